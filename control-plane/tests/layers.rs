//! The import-graph check (docs/DESIGN.md, "Layers"): reads `control-plane/src/**/*.rs` (and `shared/src`) as text,
//! collects every `crate::`, `super::`, `self::` path and every use of a declared child module, and fails on
//!
//! - an arrow against the layer order: a module may use its own layer and the layers below it, never above;
//! - a circle between files (in either crate);
//! - a circle between the top-level modules of the control plane.
//!
//! Comments are skipped; `#[cfg(test)]` modules count like the rest of their file. A new top-level module must be
//! given a layer here, or the check fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The control plane's top-level modules, lowest layer first. Same layer: may use each other, but not in a circle.
const LAYERS: &[(&str, &[&str])] = &[
    ("base", &["signals", "crypto", "strict_json", "cache", "signature", "slots"]),
    ("request", &["error", "extract", "pagination", "validate"]),
    ("storage", &["db", "pools"]),
    ("infrastructure", &["metrics", "outbound", "http", "mail"]),
    ("components", &["auth", "queue", "capture", "quota", "schedules"]),
    ("composition", &["state"]),
    ("resources", &["api"]),
    ("processes", &["tasks", "triggers", "delivery", "alerts", "server"]),
    ("crate", &["lib", "main"]),
];

/// Arrows and circles that are still to be mended. The check fails on any other, and on an entry here that is
/// gone (so the list only shrinks).
const KNOWN: &[&str] = &[];

/// One source file: its module path (`["api", "people", "store"]`) and what it refers to.
struct Source {
    module: Vec<String>,
    text: String,
}

fn read_tree(root: &Path) -> Vec<(PathBuf, Source)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> =
            std::fs::read_dir(&dir).expect("read src").map(|e| e.expect("entry").path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(root).expect("under root");
                let mut module: Vec<String> =
                    relative.with_extension("").iter().map(|s| s.to_string_lossy().into_owned()).collect();
                if module.last().is_some_and(|m| m == "mod") {
                    module.pop();
                }
                if module == ["lib"] {
                    module.clear();
                }
                let text = strip_comments(&std::fs::read_to_string(&path).expect("read file"));
                out.push((relative.to_path_buf(), Source { module, text }));
            }
        }
    }
    out
}

/// Removes `//` comments and `/* */` blocks; keeps strings (a path inside a string is rare and harmless).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let (mut i, mut in_string) = (0, false);
    while i < bytes.len() {
        let c = bytes[i];
        if in_string {
            if c == b'\\' {
                out.push_str(&text[i..(i + 2).min(bytes.len())]);
                i += 2;
                continue;
            }
            if c == b'"' {
                in_string = false;
            }
            out.push(c as char);
            i += 1;
        } else if c == b'"' {
            in_string = true;
            out.push('"');
            i += 1;
        } else if text[i..].starts_with("//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if text[i..].starts_with("/*") {
            i += text[i..].find("*/").map_or(bytes.len() - i, |n| n + 2);
        } else if c == b'\'' && bytes.get(i + 2) == Some(&b'\'') {
            // A char literal such as '"'.
            out.push_str(&text[i..i + 3]);
            i += 3;
        } else {
            let ch = text[i..].chars().next().expect("char");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Expands the path tree that starts at `text` (after `crate::`): `a::b::{c, d::{e}}` gives `a::b::c`, `a::b::d::e`.
fn expand(text: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix;
    let mut i = 0;
    let chars: Vec<char> = text.chars().collect();
    loop {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i < chars.len() && chars[i] == '{' {
            i += 1;
            loop {
                let rest: String = chars[i..].iter().collect();
                i += expand(&rest, path.clone(), out);
                while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
                    i += 1;
                }
                if i >= chars.len() || chars[i] == '}' {
                    return i + 1;
                }
            }
        }
        let start = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        if start == i {
            out.push(path);
            return i;
        }
        path.push(chars[start..i].iter().collect());
        if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
            i += 2;
        } else {
            out.push(path);
            return i;
        }
    }
}

/// The module paths a file refers to, absolute (without `crate`).
fn references(source: &Source) -> Vec<Vec<String>> {
    let text = &source.text;
    let children: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| {
            let l = l.trim().trim_start_matches("pub ").trim_start_matches("pub(crate) ");
            l.strip_prefix("mod ").and_then(|m| m.strip_suffix(';'))
        })
        .collect();
    // Inline modules (`mod tests { .. }`): a `super` inside one names the file's own module first.
    let mut inline: Vec<(usize, usize)> = Vec::new();
    for (at, _) in text.match_indices("mod ") {
        let rest = &text[at + 4..];
        let name_end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if name_end == 0 || !rest[name_end..].trim_start().starts_with('{') {
            continue;
        }
        let open = at + 4 + name_end + rest[name_end..].find('{').unwrap_or(0);
        let mut depth = 0;
        for (i, c) in text[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        inline.push((open, open + i));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (n, &(at, _)) in chars.iter().enumerate() {
        if n > 0 && (is_ident(chars[n - 1].1) || chars[n - 1].1 == ':') {
            continue;
        }
        let rest = &text[at..];
        let word_end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        let word = &rest[..word_end];
        if !rest[word_end..].starts_with("::") || word.is_empty() {
            continue;
        }
        let after = &rest[word_end + 2..];
        let base = match word {
            "crate" => Vec::new(),
            "self" => source.module.clone(),
            "super" => {
                let mut supers = 1;
                let mut after = after;
                while let Some(more) = after.strip_prefix("super::") {
                    supers += 1;
                    after = more;
                }
                let depth = inline.iter().filter(|(open, close)| (*open..*close).contains(&at)).count();
                let mut base = source.module.clone();
                for _ in depth..supers {
                    base.pop();
                }
                let mut paths = Vec::new();
                expand(after, base, &mut paths);
                out.extend(paths);
                continue;
            }
            child if children.contains(child) => {
                let mut base = source.module.clone();
                base.push(child.to_string());
                base
            }
            _ => continue,
        };
        let mut paths = Vec::new();
        expand(after, base, &mut paths);
        out.extend(paths);
    }
    out
}

/// Tarjan's strongly connected components of more than one node.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(targets) = s.edges.get(v) {
            for w in targets {
                if !s.index.contains_key(w.as_str()) {
                    visit(s, w);
                    let low = s.low[v].min(s.low[w.as_str()]);
                    s.low.insert(v, low);
                } else if s.on_stack.contains(w.as_str()) {
                    let low = s.low[v].min(s.index[w.as_str()]);
                    s.low.insert(v, low);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

/// File-level arrows: `file -> file`, each target the longest module prefix of a referred path that is a file.
fn file_graph(root: &Path) -> (BTreeMap<String, BTreeSet<String>>, BTreeMap<String, Vec<String>>) {
    let sources = read_tree(root);
    let files: BTreeMap<Vec<String>, String> =
        sources.iter().map(|(path, s)| (s.module.clone(), path.display().to_string())).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut modules = BTreeMap::new();
    for (path, source) in &sources {
        let name = path.display().to_string();
        let entry = edges.entry(name.clone()).or_default();
        for reference in references(source) {
            let target = (0..=reference.len()).rev().find_map(|n| files.get(&reference[..n]));
            if let Some(target) = target
                && *target != name
                && !(reference.len() < source.module.len() && source.module.starts_with(&reference))
            {
                entry.insert(target.clone());
            }
        }
        modules.insert(name, source.module.clone());
    }
    (edges, modules)
}

fn top_module(path: &str) -> String {
    let first = path.split('/').next().unwrap_or(path);
    first.trim_end_matches(".rs").to_string()
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, members)| members.contains(&module))
}

#[test]
fn the_control_plane_imports_only_downward_and_without_circles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (edges, _) = file_graph(&root);
    let mut problems = Vec::new();

    for file in edges.keys() {
        if layer_of(&top_module(file)).is_none() {
            problems.push(format!("{file}: top-level module `{}` has no layer in tests/layers.rs", top_module(file)));
        }
    }
    let mut module_edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, targets) in &edges {
        for to in targets {
            let (a, b) = (top_module(from), top_module(to));
            let (Some(la), Some(lb)) = (layer_of(&a), layer_of(&b)) else { continue };
            if lb > la {
                problems.push(format!(
                    "upward arrow: {from} ({a}, layer {}) -> {to} ({b}, layer {})",
                    LAYERS[la].0, LAYERS[lb].0
                ));
            }
            if a != b && la == lb {
                module_edges.entry(a).or_default().insert(b);
            }
        }
    }
    for circle in circles(&edges) {
        problems.push(format!("circle between files: {}", circle.join(", ")));
    }
    for circle in circles(&module_edges) {
        problems.push(format!("circle between modules: {}", circle.join(", ")));
    }
    let known: BTreeSet<&str> = KNOWN.iter().copied().collect();
    let new: Vec<&String> = problems.iter().filter(|p| !known.contains(p.as_str())).collect();
    let mended: Vec<&&str> = KNOWN.iter().filter(|k| !problems.iter().any(|p| p == **k)).collect();
    assert!(
        new.is_empty() && mended.is_empty(),
        "control-plane/src breaks its layers:\n  {}\nmended (remove from KNOWN): {mended:?}",
        new.iter().map(|p| p.as_str()).collect::<Vec<_>>().join("\n  ")
    );
}
/// Transactions of the server begin through `db::begin`, which a dropped caller cannot leave half-begun (its module
/// says why): `pool.begin()` (or `Transaction::begin` on a pool) anywhere else is refused.
#[test]
fn transactions_begin_only_through_db_begin() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let offenders: Vec<String> = read_tree(&root)
        .into_iter()
        .filter(|(path, _)| path != Path::new("db/begin.rs"))
        .filter(|(_, source)| source.text.contains("pool.begin()") || source.text.contains("Transaction::begin("))
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "begin transactions with crate::db::begin::begin(&pool), not pool.begin(): {offenders:?}"
    );
}

#[test]
fn the_shared_crate_has_no_circles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/src");
    let (edges, _) = file_graph(&root);
    let problems: Vec<String> = circles(&edges).into_iter().map(|c| c.join(", ")).collect();
    assert!(problems.is_empty(), "shared/src has circles between files:\n  {}", problems.join("\n  "));
}

#[test]
fn the_parser_reads_groups_super_and_children() {
    let source = Source {
        module: vec!["a".into(), "b".into()],
        text: strip_comments(
            "mod c;\nuse crate::{x::{y, z}, w};\nuse super::q::r; // crate::ignored\nfn f() { c::g(); crate::v::h() }",
        ),
    };
    let refs: Vec<String> = references(&source).iter().map(|p| p.join("::")).collect();
    assert_eq!(refs, ["x::y", "x::z", "w", "a::q::r", "a::b::c::g", "v::h"]);
}
