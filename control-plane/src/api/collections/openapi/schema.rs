//! Example values from JSON Schemas of an OpenAPI description: `$ref`s resolved (local ones; reference cycles cut),
//! `allOf` merged, the first branch of `oneOf`/`anyOf`, explicit examples, defaults and enums preferred, plausible
//! values by type and format otherwise. Bounded in depth and size, so no description can make it loop or explode.

use serde_json::{Map, Value, json};

/// Deeper than this, a schema yields `null`.
const MAX_DEPTH: usize = 12;
/// At most this many properties of one object are generated.
const MAX_PROPERTIES: usize = 60;
/// Schema nodes visited for one example: beyond it, the rest of that example is left out.
pub const EXAMPLE_STEPS: usize = 20_000;
/// Schema nodes visited for a whole document: beyond it, the document is refused.
pub const DOCUMENT_STEPS: usize = 2_000_000;

/// Follows a local `$ref` (`#/components/...`) in `document`; `None` for external or broken references.
pub fn pointer<'a>(document: &'a Value, reference: &str) -> Option<&'a Value> {
    let path = reference.strip_prefix('#')?;
    if path.is_empty() {
        return Some(document);
    }
    document.pointer(path)
}

/// Resolves a value that may be a `$ref` (following chains, at most 10 hops).
pub fn resolve<'a>(document: &'a Value, value: &'a Value) -> &'a Value {
    let mut current = value;
    for _ in 0..10 {
        match current.get("$ref").and_then(Value::as_str).and_then(|r| pointer(document, r)) {
            Some(next) => current = next,
            None => break,
        }
    }
    current
}

/// Generates examples from schemas of one document, noting what it had to leave out.
#[derive(Debug)]
pub struct Examples<'a> {
    document: &'a Value,
    /// References followed on the current path: a reference met again is a cycle.
    stack: Vec<String>,
    pub cycles_cut: usize,
    pub unresolved: Vec<String>,
    /// Examples cut short by [`EXAMPLE_STEPS`].
    pub truncated: usize,
    /// Steps left for this example and for the document.
    example_steps: usize,
    document_steps: usize,
}

impl<'a> Examples<'a> {
    pub fn new(document: &'a Value) -> Self {
        Self {
            document,
            stack: Vec::new(),
            cycles_cut: 0,
            unresolved: Vec::new(),
            truncated: 0,
            example_steps: 0,
            document_steps: DOCUMENT_STEPS,
        }
    }

    /// Whether the document's budget ran out (the description is refused).
    pub fn exhausted(&self) -> bool {
        self.document_steps == 0
    }

    /// An example value for `schema`.
    pub fn of(&mut self, schema: &Value) -> Value {
        self.example_steps = EXAMPLE_STEPS;
        let value = self.example(schema, 0);
        if self.example_steps == 0 {
            self.truncated += 1;
        }
        value
    }

    fn example(&mut self, schema: &Value, depth: usize) -> Value {
        if depth > MAX_DEPTH || self.example_steps == 0 || self.document_steps == 0 {
            return Value::Null;
        }
        self.example_steps -= 1;
        self.document_steps -= 1;
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            return self.follow(reference, depth);
        }
        for key in ["example", "const", "default"] {
            if let Some(value) = schema.get(key) {
                return value.clone();
            }
        }
        if let Some(first) = schema.get("examples").and_then(Value::as_array).and_then(|e| e.first()) {
            return first.clone();
        }
        if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
            return first.clone();
        }
        if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
            return self.merge_all(parts, depth);
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(first) = schema.get(key).and_then(Value::as_array).and_then(|b| b.first()) {
                return self.example(first, depth + 1);
            }
        }
        match schema_type(schema) {
            Some("object") => self.object(schema, depth),
            Some("array") => match schema.get("items") {
                Some(items) => {
                    let item = self.example(items, depth + 1);
                    if item.is_null() { json!([]) } else { json!([item]) }
                }
                None => json!([]),
            },
            Some("string") => Value::String(string_for(schema.get("format").and_then(Value::as_str)).to_owned()),
            Some("integer") => json!(0),
            Some("number") => json!(0.0),
            Some("boolean") => json!(false),
            Some("null") => Value::Null,
            _ if schema.get("properties").is_some() => self.object(schema, depth),
            _ => Value::Null,
        }
    }

    fn follow(&mut self, reference: &str, depth: usize) -> Value {
        if self.stack.iter().any(|r| r == reference) {
            self.cycles_cut += 1;
            return Value::Null;
        }
        let Some(target) = pointer(self.document, reference) else {
            if !self.unresolved.iter().any(|r| r == reference) {
                self.unresolved.push(reference.to_owned());
            }
            return Value::Null;
        };
        self.stack.push(reference.to_owned());
        let value = self.example(target, depth + 1);
        self.stack.pop();
        value
    }

    fn object(&mut self, schema: &Value, depth: usize) -> Value {
        let mut out = Map::new();
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, property) in properties.iter().take(MAX_PROPERTIES) {
                let resolved = resolve(self.document, property);
                if resolved.get("readOnly").and_then(Value::as_bool) == Some(true) {
                    continue;
                }
                let value = self.example(property, depth + 1);
                if !value.is_null() || resolved.get("nullable").and_then(Value::as_bool) == Some(true) {
                    out.insert(name.clone(), value);
                }
            }
        }
        Value::Object(out)
    }

    fn merge_all(&mut self, parts: &[Value], depth: usize) -> Value {
        let mut merged = Map::new();
        let mut other = Value::Null;
        for part in parts {
            match self.example(part, depth + 1) {
                Value::Object(fields) => merged.extend(fields),
                Value::Null => {}
                value => other = value,
            }
        }
        if merged.is_empty() && !other.is_null() { other } else { Value::Object(merged) }
    }
}

/// The schema's type; in 3.1 a list (`["string", "null"]`) means its first non-null entry.
fn schema_type(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(kind) => Some(kind),
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).find(|k| *k != "null"),
        _ => None,
    }
}

fn string_for(format: Option<&str>) -> &'static str {
    match format {
        Some("date-time") => "2026-01-01T00:00:00Z",
        Some("date") => "2026-01-01",
        Some("time") => "12:00:00",
        Some("email") => "user@example.com",
        Some("uuid") => "00000000-0000-4000-8000-000000000000",
        Some("uri" | "url") => "https://example.com",
        Some("hostname") => "example.com",
        Some("ipv4") => "192.0.2.1",
        Some("ipv6") => "2001:db8::1",
        Some("byte") => "ZXhhbXBsZQ==",
        Some("password") => "password",
        _ => "string",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_take_examples_defaults_enums_and_formats() {
        let doc = json!({"components": {"schemas": {"Pet": {"type": "object", "required": ["name"], "properties": {
            "id": {"type": "integer", "readOnly": true},
            "name": {"type": "string", "example": "Rex"},
            "kind": {"type": "string", "enum": ["dog", "cat"]},
            "born": {"type": "string", "format": "date"},
            "tags": {"type": "array", "items": {"type": "string", "default": "friendly"}}}}}}});
        let mut examples = Examples::new(&doc);
        let value = examples.of(&json!({"$ref": "#/components/schemas/Pet"}));
        assert_eq!(value, json!({"name": "Rex", "kind": "dog", "born": "2026-01-01", "tags": ["friendly"]}));
    }

    #[test]
    fn reference_cycles_are_cut_and_all_of_is_merged() {
        let doc = json!({"components": {"schemas": {
            "Node": {"type": "object", "properties": {"name": {"type": "string"}, "child": {"$ref": "#/components/schemas/Node"}}},
            "Named": {"allOf": [{"$ref": "#/components/schemas/Node"}, {"properties": {"extra": {"type": "boolean"}}}]},
            "Either": {"oneOf": [{"type": "integer"}, {"type": "string"}]}}}});
        let mut examples = Examples::new(&doc);
        assert_eq!(examples.of(&json!({"$ref": "#/components/schemas/Node"})), json!({"name": "string"}));
        assert!(examples.cycles_cut > 0);
        let named = examples.of(&json!({"$ref": "#/components/schemas/Named"}));
        assert_eq!(named["extra"], json!(false));
        assert_eq!(examples.of(&json!({"$ref": "#/components/schemas/Either"})), json!(0));
        assert_eq!(examples.of(&json!({"$ref": "other.yaml#/X"})), Value::Null);
        assert_eq!(examples.unresolved, ["other.yaml#/X"]);
    }

    #[test]
    fn open_api_3_1_type_lists_and_examples_arrays() {
        let doc = json!({});
        let mut examples = Examples::new(&doc);
        assert_eq!(examples.of(&json!({"type": ["null", "integer"]})), json!(0));
        assert_eq!(examples.of(&json!({"type": "string", "examples": ["first", "second"]})), json!("first"));
    }
}
