//! The documents a user reads stay inside the repository: every relative link of README.md and docs/*.md (Markdown
//! links and images, and `<img src>`) resolves to a file or folder of the repository, and none points outside it.

use std::path::{Path, PathBuf};

/// Link targets in a Markdown text: `](target)` and `src="target"`, anchors and titles dropped.
fn targets(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (opener, closer) in [("](", ')'), ("src=\"", '"')] {
        for (at, _) in text.match_indices(opener) {
            let rest = &text[at + opener.len()..];
            let Some(end) = rest.find(closer) else { continue };
            let target = rest[..end].split_whitespace().next().unwrap_or_default();
            found.push(target.to_owned());
        }
    }
    found
}

#[test]
fn every_relative_link_of_the_docs_resolves_inside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("repository root");
    let mut documents = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            documents.push(path);
        }
    }
    let mut checked = 0;
    for document in &documents {
        let text = std::fs::read_to_string(document).expect("text");
        for target in targets(&text) {
            assert!(
                !target.starts_with("http://") && !target.starts_with("https://") && !target.starts_with("//"),
                "{}: links outside the repository: {target}",
                document.display()
            );
            let path = target.split('#').next().unwrap_or_default();
            if path.is_empty() {
                continue; // an anchor in the same document
            }
            let resolved: PathBuf = document.parent().expect("folder").join(path);
            let resolved = resolved
                .canonicalize()
                .unwrap_or_else(|e| panic!("{}: `{target}` does not resolve: {e}", document.display()));
            assert!(resolved.starts_with(&root), "{}: `{target}` leaves the repository", document.display());
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} links checked: is the parser finding them?");
}
