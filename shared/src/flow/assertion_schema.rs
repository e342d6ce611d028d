//! The OpenAPI schema of an assertion: a union of two members told apart by `operator` (their operator lists are
//! disjoint), so the document states what the server checks: `exists` and `notExists` need no `expected`, every
//! other operator (`isType` with its type name among them) needs one (JSON `null` reads as absent, which the
//! member's description says). No `discriminator` object: the lists decide already, and schemathesis misreads a
//! discriminated union when it makes invalid data (it reported a valid `exists` item as breaking the enum).

use crate::api::catalog::Assertion;
use crate::flow::assert::Operator;
use std::borrow::Cow;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

/// The members: the operators that read no `expected`, and those that need one.
const PRESENCE: &str = "PresenceAssertion";
const VALUE: &str = "ValueAssertion";

fn member_of(operator: Operator) -> &'static str {
    if operator.takes_expected() { VALUE } else { PRESENCE }
}

/// A member: `source`, `operator` (its operators), and `expected` (required, any value but null, for `VALUE`).
fn member(name: &str) -> Schema {
    let operators: Vec<&str> = Operator::ALL.iter().filter(|o| member_of(**o) == name).map(|o| o.name()).collect();
    let operator = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(operators));
    // Any JSON value; `null` reads as absent (said, not typed: generators take a list of types for an array).
    let expected = if name == VALUE {
        ObjectBuilder::new()
            .schema_type(SchemaType::AnyValue)
            .description(Some("The value compared with, not null; for `isType`, the type's name."))
    } else {
        ObjectBuilder::new().schema_type(SchemaType::AnyValue).description(Some("Not read by this operator."))
    };
    let mut object = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("source", ObjectBuilder::new().schema_type(Type::String))
        .required("source")
        .property("operator", operator)
        .required("operator")
        .property("expected", expected)
        .additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::FreeForm(false)));
    if name == VALUE {
        object = object.required("expected");
    }
    object.into()
}

impl PartialSchema for Assertion {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(Ref::from_schema_name(PRESENCE))
            .item(Ref::from_schema_name(VALUE))
            .description(Some("A check on a named value: `source` names it, `operator` says how (`GET /assertions`)."))
            .into()
    }
}

impl ToSchema for Assertion {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Assertion")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((PRESENCE.to_owned(), member(PRESENCE).into()));
        schemas.push((VALUE.to_owned(), member(VALUE).into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_operator_is_in_exactly_the_member_whose_rule_the_server_applies() {
        let union = serde_json::to_value(Assertion::schema()).expect("json");
        assert_eq!(union["oneOf"].as_array().map(Vec::len), Some(2));
        let value = serde_json::to_value(member(VALUE)).expect("json");
        let presence = serde_json::to_value(member(PRESENCE)).expect("json");
        for operator in Operator::ALL {
            let name = json!(operator.name());
            let in_value = value["properties"]["operator"]["enum"].as_array().expect("enum").contains(&name);
            let in_presence = presence["properties"]["operator"]["enum"].as_array().expect("enum").contains(&name);
            assert_eq!((in_value, in_presence), (operator.takes_expected(), !operator.takes_expected()), "{name}");
        }
        assert_eq!(value["required"], json!(["source", "operator", "expected"]));
        assert!(value["properties"]["operator"]["enum"].as_array().expect("enum").contains(&json!("isType")));
        assert_eq!(presence["properties"]["operator"]["enum"], json!(["exists", "notExists"]));
        // What serde reads as absent, the document does not offer.
        let parsed: Assertion =
            serde_json::from_value(json!({"source": "s", "operator": "equals", "expected": null})).expect("parse");
        assert!(parsed.expected.is_none());
        assert!(value["properties"]["expected"]["description"].as_str().expect("said").contains("not null"));
    }
}
