//! Flow files: a bare definition (`{"nodes": ...}`), a flow object (`{"key", "name", "description", "tags",
//! "definition"}`, export's layout) or an exported `hookflow.flow/v1` document (`{"format", "flow": {...},
//! "environments": [...]}`). The definition is kept as the text the file holds (a bare definition's whole text
//! without its final newline, a flow object's or document's `definition` member as written), so what is sent is
//! what the file says, byte for byte. Folders are read for their `.json` files, subfolders included, by path.

use crate::error::CliError;
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The export document's format tag.
pub const DOCUMENT_FORMAT: &str = "hookflow.flow/v1";

/// How a file holds its flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Bare,
    Object,
    Document,
}

/// A flow file as read.
#[derive(Debug)]
pub struct FlowFile {
    pub path: PathBuf,
    pub shape: Shape,
    pub key: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub tags: Vec<String>,
    /// The definition's JSON text as the file holds it.
    pub definition: Box<RawValue>,
    /// A document's environments, by key.
    pub environments: BTreeMap<String, BTreeMap<String, String>>,
}

/// The members of a flow object that are read.
#[derive(serde::Deserialize)]
struct ObjectMembers {
    key: Option<String>,
    name: Option<String>,
    description: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    definition: Box<RawValue>,
}

#[derive(serde::Deserialize)]
struct DocumentEnvironment {
    key: String,
    #[serde(default)]
    variables: BTreeMap<String, String>,
}

#[derive(serde::Deserialize)]
struct DocumentMembers {
    flow: ObjectMembers,
    #[serde(default)]
    environments: Vec<DocumentEnvironment>,
}

/// A bare definition's text without its final newline (`\n` or `\r\n`).
pub fn without_final_newline(text: &str) -> &str {
    let text = text.strip_suffix('\n').unwrap_or(text);
    text.strip_suffix('\r').unwrap_or(text)
}

/// Reads one flow file.
pub fn read(path: &Path) -> Result<FlowFile, CliError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| CliError::usage(format!("cannot read {shown}: {e}")))?;
    let value: Value = serde_json::from_str(&text).map_err(|e| CliError::usage(format!("{shown} is not JSON: {e}")))?;
    let not_a_flow = |why: String| CliError::usage(format!("{shown}: {why}"));
    if !value.is_object() {
        return Err(not_a_flow("expected a JSON object (a definition, a flow or an exported document)".to_owned()));
    }
    let file = |shape, members: ObjectMembers, environments| FlowFile {
        path: path.to_owned(),
        shape,
        key: members.key,
        name: members.name,
        description: members.description,
        tags: members.tags,
        definition: members.definition,
        environments,
    };
    if value.get("format").and_then(Value::as_str) == Some(DOCUMENT_FORMAT) {
        let document: DocumentMembers =
            serde_json::from_str(&text).map_err(|e| not_a_flow(format!("not a {DOCUMENT_FORMAT} document: {e}")))?;
        let environments = document.environments.into_iter().map(|e| (e.key, e.variables)).collect();
        return Ok(file(Shape::Document, document.flow, environments));
    }
    if value.get("definition").is_some() && value.get("nodes").is_none() {
        let members: ObjectMembers =
            serde_json::from_str(&text).map_err(|e| not_a_flow(format!("not a flow object: {e}")))?;
        return Ok(file(Shape::Object, members, BTreeMap::new()));
    }
    let definition = RawValue::from_string(without_final_newline(&text).to_owned())
        .map_err(|e| not_a_flow(format!("not a definition: {e}")))?;
    Ok(FlowFile {
        path: path.to_owned(),
        shape: Shape::Bare,
        key: None,
        name: None,
        description: None,
        tags: Vec::new(),
        definition,
        environments: BTreeMap::new(),
    })
}

/// The files `paths` name: each file as given, each folder's `.json` files (subfolders included) sorted by path.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    let mut files = Vec::new();
    for path in paths {
        let meta =
            std::fs::metadata(path).map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(path, &mut found)?;
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

fn walk(folder: &Path, found: &mut Vec<PathBuf>) -> Result<(), CliError> {
    let entries =
        std::fs::read_dir(folder).map_err(|e| CliError::usage(format!("cannot read {}: {e}", folder.display())))?;
    for entry in entries {
        let entry = entry.map_err(|e| CliError::usage(format!("cannot read {}: {e}", folder.display())))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?;
        if kind.is_dir() {
            walk(&path, found)?;
        } else if path.extension().is_some_and(|ext| ext == "json") {
            found.push(path);
        }
    }
    Ok(())
}

/// The Git commit and branch of the working tree holding `path`, when it is in one (`git` on `PATH`).
pub fn git_of(path: &Path) -> (Option<String>, Option<String>) {
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    let git = |args: &[&str]| {
        let output = std::process::Command::new("git").arg("-C").arg(&folder).args(args).output().ok()?;
        let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
        (output.status.success() && !text.is_empty()).then_some(text)
    };
    let commit = git(&["rev-parse", "HEAD"]);
    let branch = commit.as_ref().and_then(|_| git(&["symbolic-ref", "--short", "-q", "HEAD"]));
    (commit, branch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_final_newline_is_left_out_and_nothing_else() {
        assert_eq!(without_final_newline("{}\n"), "{}");
        assert_eq!(without_final_newline("{}\r\n"), "{}");
        assert_eq!(without_final_newline("{}\n\n"), "{}\n");
        assert_eq!(without_final_newline("{}"), "{}");
    }
}
