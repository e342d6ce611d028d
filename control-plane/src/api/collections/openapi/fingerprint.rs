//! Fingerprints of parts of an operation, for sync: a part's JSON together with every component it reaches through
//! `$ref`s (each component hashed once), so a change deep in a shared schema changes the operations using it. The
//! JSON is printed with its keys sorted, whatever order the document wrote them in: reordering a document's keys
//! changes nothing, and fingerprints stored by earlier releases (whose maps were sorted) still match.

use crate::api::collections::openapi::schema::pointer;
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Debug)]
pub struct Fingerprinter<'a> {
    document: &'a Value,
    /// Per component reference: its own hash and the references directly inside it.
    components: HashMap<String, (String, Vec<String>)>,
}

fn refs_in(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                into.push(reference.clone());
            }
            map.values().for_each(|v| refs_in(v, into));
        }
        Value::Array(items) => items.iter().for_each(|v| refs_in(v, into)),
        _ => {}
    }
}

fn hash(text: &[u8]) -> String {
    hex::encode(&Sha256::digest(text)[..12])
}

/// A value printed with every object's keys sorted (compact, as serde_json prints).
struct Sorted<'a>(&'a Value);

impl serde::Serialize for Sorted<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Object(map) => {
                let sorted: BTreeMap<&str, Sorted<'_>> = map.iter().map(|(k, v)| (k.as_str(), Sorted(v))).collect();
                sorted.serialize(serializer)
            }
            Value::Array(items) => serializer.collect_seq(items.iter().map(Sorted)),
            other => other.serialize(serializer),
        }
    }
}

fn sorted_text(value: &Value) -> String {
    serde_json::to_string(&Sorted(value)).unwrap_or_default()
}

impl<'a> Fingerprinter<'a> {
    pub fn new(document: &'a Value) -> Self {
        Self { document, components: HashMap::new() }
    }

    fn component(&mut self, reference: &str) -> (String, Vec<String>) {
        if let Some(known) = self.components.get(reference) {
            return known.clone();
        }
        let entry = match pointer(self.document, reference) {
            Some(target) => {
                let mut inner = Vec::new();
                refs_in(target, &mut inner);
                (hash(sorted_text(target).as_bytes()), inner)
            }
            None => ("unresolved".to_owned(), Vec::new()),
        };
        self.components.insert(reference.to_owned(), entry.clone());
        entry
    }

    /// The fingerprint of `value` and everything it references.
    pub fn of(&mut self, value: &Value) -> String {
        let mut pending = Vec::new();
        refs_in(value, &mut pending);
        let mut reached = BTreeSet::new();
        while let Some(reference) = pending.pop() {
            if reached.insert(reference.clone()) {
                let (_, inner) = self.component(&reference);
                pending.extend(inner);
            }
        }
        let mut text = sorted_text(value);
        for reference in &reached {
            let (own, _) = self.component(reference);
            text.push('\n');
            text.push_str(reference);
            text.push('=');
            text.push_str(&own);
        }
        hash(text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_change_in_a_referenced_schema_changes_the_fingerprint() {
        let before =
            json!({"components": {"schemas": {"A": {"$ref": "#/components/schemas/B"}, "B": {"type": "string"}}}});
        let after =
            json!({"components": {"schemas": {"A": {"$ref": "#/components/schemas/B"}, "B": {"type": "integer"}}}});
        let part = json!({"schema": {"$ref": "#/components/schemas/A"}});
        let (one, two) = (Fingerprinter::new(&before).of(&part), Fingerprinter::new(&after).of(&part));
        assert_ne!(one, two);
        assert_eq!(one, Fingerprinter::new(&before).of(&part), "stable");
        let cyclic =
            json!({"components": {"schemas": {"A": {"properties": {"a": {"$ref": "#/components/schemas/A"}}}}}});
        assert_eq!(Fingerprinter::new(&cyclic).of(&part).len(), 24, "cycles end");
    }

    #[test]
    fn the_order_of_a_documents_keys_changes_nothing() {
        let document = json!({});
        let written: Value = serde_json::from_str(
            r#"{"schema": {"type": "object", "required": ["b"], "nested": {"z": 1, "a": [{"y": 2, "b": 3}]}}}"#,
        )
        .expect("json");
        let reordered: Value = serde_json::from_str(
            r#"{"schema": {"nested": {"a": [{"b": 3, "y": 2}], "z": 1}, "required": ["b"], "type": "object"}}"#,
        )
        .expect("json");
        let print = Fingerprinter::new(&document).of(&written);
        assert_eq!(print, Fingerprinter::new(&document).of(&reordered));
        // As earlier releases printed it (sorted maps), so their stored fingerprints still match.
        let sorted = r#"{"schema":{"nested":{"a":[{"b":3,"y":2}],"z":1},"required":["b"],"type":"object"}}"#;
        assert_eq!(print, hash(sorted.as_bytes()));
    }
}
