//! The typed ids (`hookflow_shared::ids`) as the contract writes them: plain UUID schemas in place. utoipa's derive
//! makes every field of a type it does not know by name a `$ref` to a component named after the type (`FlowId`),
//! and an `Option` of one a `oneOf` with `null`; this pass writes those back as `{"type": "string", "format":
//! "uuid"}` (or `["string", "null"]`) with the reference's description, as a `Uuid` field comes out, and drops the
//! id components. Run on the assembled document, before the passes that shape it for generators.

use hookflow_shared::ids::{SCHEMA_NAMES, uuid_schema};
use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{AdditionalProperties, ArrayItems, Object, OneOf, Schema, Type};
use utoipa::openapi::{Content, OpenApi, Ref, RefOr, Response};

/// Inlines every reference to an id schema and removes the id components.
pub fn inline_ids(document: &mut OpenApi) {
    if let Some(components) = document.components.as_mut() {
        components.schemas.retain(|name, _| !SCHEMA_NAMES.contains(&name.as_str()));
        components.schemas.values_mut().for_each(in_ref_or);
        components.responses.values_mut().for_each(in_response);
    }
    for item in document.paths.paths.values_mut() {
        let operations =
            [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch, &mut item.head];
        for operation in operations.into_iter().flatten() {
            in_operation(operation);
        }
        for parameter in item.parameters.iter_mut().flatten().filter_map(inline) {
            parameter.schema.iter_mut().for_each(in_ref_or);
        }
    }
}

fn in_operation(operation: &mut Operation) {
    for parameter in operation.parameters.iter_mut().flatten().filter_map(inline) {
        parameter.schema.iter_mut().for_each(in_ref_or);
    }
    if let Some(body) = operation.request_body.as_mut().and_then(inline) {
        body.content.values_mut().filter_map(inline).for_each(in_content);
    }
    operation.responses.responses.values_mut().for_each(in_response);
}

fn in_response(response: &mut RefOr<Response>) {
    if let RefOr::T(response) = response {
        response.content.values_mut().filter_map(inline).for_each(in_content);
        for header in response.headers.values_mut().filter_map(inline) {
            header.schema.iter_mut().for_each(in_ref_or);
        }
    }
}

/// What is written in place (a reference to a shared parameter, body or header is left to its component).
fn inline<T>(item: &mut RefOr<T>) -> Option<&mut T> {
    match item {
        RefOr::T(item) => Some(item),
        RefOr::Ref(_) => None,
    }
}

fn in_content(content: &mut Content) {
    content.schema.iter_mut().for_each(in_ref_or);
}

/// The id a reference points to, if it points to one.
fn is_id(reference: &Ref) -> bool {
    let name = reference.ref_location.strip_prefix("#/components/schemas/");
    name.is_some_and(|name| SCHEMA_NAMES.contains(&name))
}

/// A UUID schema carrying what the reference said beside its `$ref`.
fn uuid_for(reference: &Ref, nullable: bool) -> Object {
    let mut object = uuid_schema(nullable);
    object.description = Some(reference.description.clone()).filter(|d| !d.is_empty());
    object.title = reference.title.clone();
    object.default = reference.default.clone();
    object.read_only = reference.read_only;
    object.write_only = reference.write_only;
    object
}

fn in_ref_or(schema: &mut RefOr<Schema>) {
    match schema {
        RefOr::Ref(reference) if is_id(reference) => *schema = RefOr::T(Schema::Object(uuid_for(reference, false))),
        RefOr::Ref(_) => {}
        RefOr::T(inner) => in_schema(inner),
    }
}

fn in_schema(schema: &mut Schema) {
    match schema {
        Schema::OneOf(one_of) => match nullable_id(one_of) {
            Some(object) => *schema = Schema::Object(object),
            None => one_of.items.iter_mut().for_each(in_ref_or),
        },
        Schema::AllOf(all_of) => all_of.items.iter_mut().for_each(in_ref_or),
        Schema::AnyOf(any_of) => any_of.items.iter_mut().for_each(in_ref_or),
        Schema::Object(object) => {
            object.properties.values_mut().for_each(in_ref_or);
            if let Some(AdditionalProperties::RefOr(values)) = object.additional_properties.as_deref_mut() {
                in_ref_or(values);
            }
            if let Some(names) = object.property_names.as_deref_mut() {
                in_schema(names);
            }
        }
        Schema::Array(array) => {
            if let ArrayItems::RefOrSchema(items) = &mut array.items {
                in_ref_or(items);
            }
            array.prefix_items.iter_mut().for_each(in_schema);
        }
        _ => {}
    }
}

/// An `Option` of an id: `oneOf: [{$ref: id}, {type: null}]` and nothing else that a UUID schema could not say.
fn nullable_id(one_of: &OneOf) -> Option<Object> {
    let [RefOr::Ref(reference), RefOr::T(Schema::Object(null))] = one_of.items.as_slice() else { return None };
    let plain = one_of.description.is_none()
        && one_of.example.is_none()
        && one_of.examples.is_empty()
        && one_of.discriminator.is_none()
        && one_of.extensions.is_none();
    if !is_id(reference) || !plain || null.schema_type != Type::Null.into() {
        return None;
    }
    let mut object = uuid_for(reference, true);
    object.title = one_of.title.clone().or(object.title);
    object.default = one_of.default.clone().or(object.default);
    object.read_only = one_of.read_only.or(object.read_only);
    object.write_only = one_of.write_only.or(object.write_only);
    Some(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A struct of ids and the same struct of UUIDs, as the derive writes them.
    mod shapes {
        #![allow(dead_code)]
        use hookflow_shared::{FlowId, RunnerId};

        #[derive(utoipa::ToSchema)]
        pub struct Typed {
            /// The flow.
            pub flow_id: FlowId,
            /// The runner, if any.
            pub runner_id: Option<RunnerId>,
            pub jobs: Vec<RunnerId>,
        }

        #[derive(utoipa::ToSchema)]
        pub struct Plain {
            /// The flow.
            pub flow_id: uuid::Uuid,
            /// The runner, if any.
            pub runner_id: Option<uuid::Uuid>,
            pub jobs: Vec<uuid::Uuid>,
        }
    }

    #[test]
    fn ids_come_out_as_uuids_do() {
        use utoipa::{PartialSchema, ToSchema};
        let mut schemas = Vec::new();
        shapes::Typed::schemas(&mut schemas);
        let mut document = OpenApi::default();
        let components = document.components.get_or_insert_with(Default::default);
        components.schemas.insert("Typed".into(), shapes::Typed::schema());
        components.schemas.extend(schemas);
        assert!(components.schemas.contains_key("FlowId"), "the derive refers to the id's component");

        inline_ids(&mut document);
        let components = document.components.expect("components");
        assert_eq!(components.schemas.keys().collect::<Vec<_>>(), ["Typed"]);
        let typed = serde_json::to_value(&components.schemas["Typed"]).expect("json");
        let plain = serde_json::to_value(shapes::Plain::schema()).expect("json");
        assert_eq!(typed, plain);
        assert_eq!(
            typed["properties"]["flow_id"],
            json!({"type": "string", "format": "uuid", "description": "The flow."})
        );
    }
}
