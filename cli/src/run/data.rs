//! `hookflow run --data FILE`: the rows of a data-driven run, read from a CSV file with a header row or a JSON array
//! of objects (told apart by the file's first non-blank character: `[` is JSON), each row's values launch variables.
//! JSON values that are not strings are sent as their JSON text. `--name-column` names each row's test case.

use crate::error::CliError;
use hookflow_shared::api::batches::MAX_ROWS;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// One row: its values by column.
pub type Row = BTreeMap<String, String>;

/// The rows of a data file, at most [`MAX_ROWS`], at least one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Data {
    pub rows: Vec<Row>,
    /// The column naming each row's test case, checked to be in every row.
    pub name_column: Option<String>,
}

impl Data {
    /// Reads `path`; `name_column`, when given, must be a column of every row.
    pub fn read(path: &Path, name_column: Option<&str>) -> Result<Self, CliError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError::usage(format!("cannot read --data {}: {e}", path.display())))?;
        let rows = parse(&text).map_err(|e| CliError::usage(format!("--data {}: {e}", path.display())))?;
        if rows.is_empty() || rows.len() > MAX_ROWS {
            return Err(CliError::usage(format!(
                "--data {}: 1 to {MAX_ROWS} rows; the file has {}",
                path.display(),
                rows.len()
            )));
        }
        if let Some(column) = name_column
            && let Some(i) = rows.iter().position(|row| !row.contains_key(column))
        {
            return Err(CliError::usage(format!("--name-column {column}: row {i} has no such column")));
        }
        Ok(Self { rows, name_column: name_column.map(str::to_owned) })
    }

    /// The test case name of row `index`: its name column's value, else `row <index>`.
    pub fn name_of(&self, index: usize) -> String {
        self.name_column
            .as_ref()
            .and_then(|column| self.rows.get(index)?.get(column).cloned())
            .unwrap_or_else(|| format!("row {index}"))
    }
}

/// Rows of a CSV (header row first) or JSON (array of objects) text.
pub fn parse(text: &str) -> Result<Vec<Row>, String> {
    if text.trim_start().starts_with('[') { json_rows(text) } else { csv_rows(text) }
}

fn json_rows(text: &str) -> Result<Vec<Row>, String> {
    let values: Vec<Value> = serde_json::from_str(text).map_err(|e| format!("not a JSON array of objects: {e}"))?;
    values
        .into_iter()
        .enumerate()
        .map(|(i, value)| match value {
            Value::Object(fields) => Ok(fields
                .into_iter()
                .map(|(name, value)| {
                    let text = match value {
                        Value::String(text) => text,
                        other => other.to_string(),
                    };
                    (name, text)
                })
                .collect()),
            _ => Err(format!("row {i} is not a JSON object")),
        })
        .collect()
}

fn csv_rows(text: &str) -> Result<Vec<Row>, String> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(text.as_bytes());
    let headers: Vec<String> =
        reader.headers().map_err(|e| format!("not CSV: {e}"))?.iter().map(|h| h.trim().to_owned()).collect();
    if headers.iter().any(String::is_empty) {
        return Err("the header row has an empty column name".into());
    }
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|e| format!("row {i}: {e}"))?;
        rows.push(headers.iter().cloned().zip(record.iter().map(str::to_owned)).collect());
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_with_quotes_and_json_with_other_values() {
        let rows = parse("name,note\nada,\"a, \"\"quoted\"\" note\"\r\nbob,plain\n").expect("csv");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["note"], "a, \"quoted\" note");
        assert_eq!(rows[1]["name"], "bob");
        let rows = parse(r#"[{"id": 7, "ok": true, "name": "x", "tags": ["a"]}]"#).expect("json");
        assert_eq!((rows[0]["id"].as_str(), rows[0]["ok"].as_str()), ("7", "true"));
        assert_eq!(rows[0]["tags"], r#"["a"]"#);
        assert!(parse("[1]").is_err());
        assert!(parse("a,b\n1,2,3\n").is_err(), "a row longer than the header");
    }
}
