//! YAML read into JSON within a budget. Aliases are expanded as the parser replays them, so a small document of
//! anchors and aliases can stand for an enormous tree; every node and every byte of text the expansion produces
//! is counted, and reading stops with an error naming the limit as soon as the budget is spent, before memory or
//! time are. Non-string keys become text (`200:` of a response); merge keys (`<<`) merge, explicit keys winning.

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::Cell;
use std::fmt;

/// Nodes a document may expand to.
pub const MAX_NODES: usize = 2_000_000;
/// Bytes of text (keys and strings) a document may expand to.
pub const MAX_TEXT_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Default)]
struct Budget {
    nodes: Cell<usize>,
    text: Cell<usize>,
}

impl Budget {
    fn node<E: de::Error>(&self) -> Result<(), E> {
        self.nodes.set(self.nodes.get() + 1);
        if self.nodes.get() > MAX_NODES {
            return Err(E::custom(format!("it expands to more than {MAX_NODES} nodes (anchors and aliases?)")));
        }
        Ok(())
    }

    fn text<E: de::Error>(&self, bytes: usize) -> Result<(), E> {
        self.text.set(self.text.get() + bytes);
        if self.text.get() > MAX_TEXT_BYTES {
            return Err(E::custom(format!(
                "it expands to more than {MAX_TEXT_BYTES} bytes of text (anchors and aliases?)"
            )));
        }
        Ok(())
    }
}

/// Reads YAML text into JSON within the budget.
pub fn to_json(text: &str) -> Result<Value, String> {
    let budget = Budget::default();
    Node(&budget).deserialize(yaml_serde::Deserializer::from_str(text)).map_err(|e| e.to_string())
}

#[derive(Clone, Copy)]
struct Node<'b>(&'b Budget);

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// A key as JSON object keys take it.
fn key_text(key: Value) -> String {
    match key {
        Value::String(text) => text,
        other => other.to_string(),
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.0.node()?;
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        self.0.node()?;
        Ok(Value::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        self.0.node()?;
        Ok(Value::from(n))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        self.0.node()?;
        Ok(Value::from(n))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
        self.0.node()?;
        Ok(serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Value, E> {
        self.0.node()?;
        self.0.text(text.len())?;
        Ok(Value::String(text.to_owned()))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Value, E> {
        self.0.node()?;
        self.0.text(text.len())?;
        Ok(Value::String(text))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.0.node()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.0.node()?;
        let mut object = Map::new();
        let mut merged = Vec::new();
        while let Some(key) = map.next_key_seed(self)? {
            let value = map.next_value_seed(self)?;
            let key = key_text(key);
            self.0.text::<A::Error>(key.len())?;
            if key == "<<" {
                merged.push(value);
            } else {
                object.insert(key, value);
            }
        }
        for source in merged {
            let sources = match source {
                Value::Array(items) => items,
                other => vec![other],
            };
            for source in sources {
                let Value::Object(fields) = source else {
                    return Err(de::Error::custom("a merge key (<<) must name a mapping or a list of mappings"));
                };
                for (key, value) in fields {
                    object.entry(key).or_insert(value);
                }
            }
        }
        Ok(Value::Object(object))
    }

    /// A tagged value (`!tag value`): the tag is dropped.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        let (_tag, variant): (Value, _) = data.variant_seed(self)?;
        variant.newtype_variant_seed(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_read_as_json_with_text_keys_and_merges() {
        let text = "base: &base {a: 1, b: 2}\nderived:\n  <<: *base\n  b: 3\nresponses:\n  200: {description: ok}\n";
        let value = to_json(text).expect("yaml");
        assert_eq!(value["derived"], serde_json::json!({"a": 1, "b": 3}));
        assert_eq!(value["responses"]["200"]["description"], "ok");
    }

    #[test]
    fn an_alias_bomb_stops_at_the_budget() {
        // 25 KB of document, one anchor of 25 KB referenced 3,000 times: 75 MB of text once expanded.
        let mut text = format!("anchor: &a \"{}\"\nmany:\n", "x".repeat(25_000));
        text.push_str(&"  - *a\n".repeat(3_000));
        let error = to_json(&text).expect_err("refused");
        assert!(error.contains("bytes of text"), "{error}");
        // Nested repetition is refused as well (here by the parser's own repetition limit).
        let mut nested = String::from("a0: &a0 [\"lol\", \"lol\", \"lol\", \"lol\"]\n");
        for level in 1..12 {
            let p = level - 1;
            nested.push_str(&format!("a{level}: &a{level} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"));
        }
        assert!(to_json(&nested).is_err());
    }
}
