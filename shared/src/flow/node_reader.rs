//! How a node is read: its `kind` picks the struct, which is read from the rest of the object with the strict
//! reader (an object, never an array of fields: serde's internally tagged enums would take both), and an error
//! deep inside a node names its whole path (`nodes[0].webhook.timeout_s`), which serde's own buffering loses.

use crate::api::fields::Refusal;
use crate::flow::definition::Node;
use crate::flow::node_schema::KINDS;
use crate::strict_json::StrictJson;
use serde::de::{self, Deserialize, Deserializer};
use serde_json::Value;

/// The node kinds, as `kind` spells them (the schema's list, in its order).
const NODE_KINDS: &[&str] = &[KINDS[0].0, KINDS[1].0, KINDS[2].0, KINDS[3].0, KINDS[4].0];

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut value = Value::deserialize(deserializer)?;
        let Value::Object(fields) = &mut value else {
            return Err(de::Error::custom("a node is a JSON object with a `kind`"));
        };
        let kind = match fields.remove("kind") {
            Some(Value::String(kind)) => kind,
            Some(_) => return Err(de::Error::custom("`kind` is a string")),
            None => return Err(de::Error::missing_field("kind")),
        };
        let rest = StrictJson(&value);
        let read = match kind.as_str() {
            "request" => read(rest).map(|n| Node::Request(Box::new(n))),
            "delay" => read(rest).map(Node::Delay),
            "module" => read(rest).map(Node::Module),
            "set_variables" => read(rest).map(Node::SetVariables),
            "webhook" => read(rest).map(|n| Node::Webhook(Box::new(n))),
            other => return Err(de::Error::unknown_variant(other, NODE_KINDS)),
        };
        read.map_err(de::Error::custom)
    }
}

/// Reads one node kind; an error carries the path inside the node as a [`Refusal`], whose field the outer reader
/// fills in with the node's own place.
fn read<T: for<'a> Deserialize<'a>>(rest: StrictJson<'_>) -> Result<T, Refusal> {
    serde_path_to_error::deserialize(rest).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        let field = if path == "." || path.is_empty() {
            Refusal::FIELD.to_owned()
        } else {
            format!("{}.{path}", Refusal::FIELD)
        };
        match Refusal::from_message(&inner) {
            Some(refusal) => Refusal::new(refusal.for_field(&field)),
            None => Refusal::new(format!("invalid field `{field}`: {inner}")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(value: Value) -> Result<Node, String> {
        let body = json!({ "nodes": [value] });
        serde_path_to_error::deserialize(StrictJson(&body))
            .map(|wrapper: Wrapper| wrapper.nodes.into_iter().next().expect("one"))
            .map_err(|e| {
                let inner = e.inner().to_string();
                match Refusal::from_message(&inner) {
                    Some(refusal) => refusal.for_field(&e.path().to_string()),
                    None => format!("{}: {inner}", e.path()),
                }
            })
    }

    #[derive(serde::Deserialize)]
    struct Wrapper {
        nodes: Vec<Node>,
    }

    #[test]
    fn a_node_is_an_object_and_its_parts_are_objects() {
        let ok = node(json!({"kind": "webhook", "id": "w", "webhook": {"timeout_ms": 5000}}));
        assert!(matches!(ok, Ok(Node::Webhook(_))), "{ok:?}");
        let array = node(json!({"kind": "webhook", "id": "w", "webhook": [null, null]})).expect_err("array");
        assert!(array.starts_with("invalid field `nodes[0].webhook`: invalid type: sequence"), "{array}");
        assert!(node(json!(["webhook", "w"])).is_err());
        let unknown = node(json!({"kind": "delay", "id": "d", "delay_ms": 1, "extra": 1})).expect_err("unknown");
        assert!(unknown.contains("`nodes[0].extra`") && unknown.contains("unknown field `extra`"), "{unknown}");
        let kind = node(json!({"kind": "teleport", "id": "t"})).expect_err("kind");
        assert!(kind.contains("unknown variant `teleport`"), "{kind}");
        assert!(node(json!({"id": "t"})).expect_err("no kind").contains("missing field `kind`"));
    }
}
