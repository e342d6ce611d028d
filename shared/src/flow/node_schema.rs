//! The OpenAPI schema of a flow node: a union discriminated by `kind`, each member a named schema that states its
//! `kind` (serde's internal tag, which the derived member schemas cannot see), so generators emit one typed model
//! per node kind.

use crate::flow::definition::{DelayNode, ModuleNode, Node, RequestNode, SetVariablesNode, WebhookNode};
use std::borrow::Cow;
use utoipa::openapi::schema::{Discriminator, ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

/// Node kinds with their member schemas' names, in API.md's order.
pub(crate) const KINDS: [(&str, &str); 5] = [
    ("request", "RequestNode"),
    ("delay", "DelayNode"),
    ("module", "ModuleNode"),
    ("set_variables", "SetVariablesNode"),
    ("webhook", "WebhookNode"),
];

impl PartialSchema for Node {
    fn schema() -> RefOr<Schema> {
        let mapping = KINDS.map(|(kind, name)| (kind, format!("#/components/schemas/{name}")));
        let union = KINDS.iter().fold(OneOfBuilder::new(), |union, (_, name)| union.item(Ref::from_schema_name(*name)));
        union
            .discriminator(Some(Discriminator::with_mapping("kind", mapping)))
            .description(Some("A node of a flow: a request, or one of the special nodes (`GET /special-nodes`)."))
            .into()
    }
}

impl ToSchema for Node {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("FlowNode")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        member::<RequestNode>(schemas, "request");
        member::<DelayNode>(schemas, "delay");
        member::<ModuleNode>(schemas, "module");
        member::<SetVariablesNode>(schemas, "set_variables");
        member::<WebhookNode>(schemas, "webhook");
    }
}

/// Registers a member's derived schema with its `kind` stated and required, and the schemas it refers to.
fn member<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>, kind: &str) {
    let mut schema = T::schema();
    if let RefOr::T(Schema::Object(object)) = &mut schema {
        let tag = ObjectBuilder::new().schema_type(Type::String).enum_values(Some([kind]));
        object.properties.insert("kind".to_owned(), tag.into());
        object.required.insert(0, "kind".to_owned());
    }
    schemas.push((T::name().into_owned(), schema));
    T::schemas(schemas);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_kind_is_a_named_member_that_states_its_kind() {
        let mut schemas = Vec::new();
        <Node as ToSchema>::schemas(&mut schemas);
        for (kind, name) in KINDS {
            let (_, schema) = schemas.iter().find(|(n, _)| n == name).expect(name);
            let json = serde_json::to_value(schema).expect("json");
            assert_eq!(json["properties"]["kind"]["enum"], serde_json::json!([kind]), "{name}");
            assert_eq!(json["required"][0], "kind", "{name}");
            assert_eq!(json["additionalProperties"], false, "{name}");
        }
        let union = serde_json::to_value(Node::schema()).expect("json");
        assert_eq!(union["discriminator"]["propertyName"], "kind");
        assert_eq!(union["oneOf"].as_array().map(Vec::len), Some(KINDS.len()));
        // Every kind serde reads is in the union.
        for (kind, _) in KINDS {
            let node = serde_json::json!({"id": "n", "kind": kind});
            let error = serde_json::from_value::<Node>(node).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(!error.contains("unknown variant"), "{kind}: {error}");
        }
    }
}
