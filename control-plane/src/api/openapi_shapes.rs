//! The served document in the shapes client generators need (openapi-python-client, openapi-typescript): one
//! operationId per operation, required path parameters, pages that refer to their item schema. Run on the
//! assembled document, after `openapi::complete_operations`.

use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::schema::{ArrayItems, Schema};
use utoipa::openapi::{OpenApi, Ref, RefOr, Required};

/// Every pass below, in order.
pub fn for_generators(document: &mut OpenApi) {
    name_each_method(document);
    open_means_no_requirement(document);
    require_path_parameters(document);
    refer_page_items(document);
    preflights_answer_options_only(document);
}

/// The capture URL's one handler documents a CORS preflight's 204 for every method it serves; it belongs to
/// `OPTIONS` alone (generators would otherwise type every capture's success as possibly empty).
fn preflights_answer_options_only(document: &mut OpenApi) {
    for (path, item) in document.paths.paths.iter_mut() {
        if !path.starts_with("/webhook/") {
            continue;
        }
        for (method, operation) in operations(item) {
            if let Some(operation) = operation.as_mut().filter(|_| method != "options") {
                operation.responses.responses.remove("204");
            }
        }
    }
}

/// The operations of each path with their method names.
fn operations(item: &mut utoipa::openapi::PathItem) -> [(&'static str, &mut Option<Operation>); 7] {
    [
        ("get", &mut item.get),
        ("put", &mut item.put),
        ("post", &mut item.post),
        ("patch", &mut item.patch),
        ("delete", &mut item.delete),
        ("head", &mut item.head),
        ("options", &mut item.options),
    ]
}

/// A handler serving several methods of one path (the capture URL) documents one operationId for all of them;
/// each method's operation gets that id with its method appended (`capture_webhook_post`), so ids stay unique and
/// stable when a method is added.
fn name_each_method(document: &mut OpenApi) {
    for item in document.paths.paths.values_mut() {
        let mut ids = std::collections::BTreeMap::<String, usize>::new();
        for (_, operation) in operations(item) {
            if let Some(id) = operation.as_ref().and_then(|o| o.operation_id.clone()) {
                *ids.entry(id).or_default() += 1;
            }
        }
        for (method, operation) in operations(item) {
            let Some(operation) = operation.as_mut() else { continue };
            if let Some(id) = operation.operation_id.as_mut().filter(|id| ids.get(id.as_str()) > Some(&1)) {
                *id = format!("{id}_{method}");
            }
        }
    }
}

/// An operation open to anyone (`security(())` in its annotation, written `[{}]`) says `security: []`, which
/// generators read as "no credentials", so their plain client calls it.
fn open_means_no_requirement(document: &mut OpenApi) {
    for item in document.paths.paths.values_mut() {
        for (_, operation) in operations(item) {
            let Some(security) = operation.as_mut().and_then(|o| o.security.as_mut()) else { continue };
            let empty = |r: &utoipa::openapi::security::SecurityRequirement| {
                serde_json::to_value(r).is_ok_and(|v| v.as_object().is_some_and(|o| o.is_empty()))
            };
            if security.iter().all(empty) {
                security.clear();
            }
        }
    }
}

/// A path parameter is always required (OpenAPI says so, and generators drop operations whose path parameters
/// are optional); parameters declared through `IntoParams` structs of `Option`-free strings still come out
/// optional from the derive.
fn require_path_parameters(document: &mut OpenApi) {
    for item in document.paths.paths.values_mut() {
        for (_, operation) in operations(item) {
            let parameters = operation.as_mut().and_then(|o| o.parameters.as_mut());
            for parameter in parameters.into_iter().flatten() {
                if let RefOr::T(parameter) = parameter
                    && parameter.parameter_in == ParameterIn::Path
                {
                    parameter.required = Required::True;
                }
            }
        }
    }
}

/// `Page_<Item>` schemas come out of the generic `Page<T>` with the item's schema copied inline, which makes
/// generators emit a second model for every listed resource; the items refer to `<Item>` instead.
fn refer_page_items(document: &mut OpenApi) {
    let Some(components) = document.components.as_mut() else { return };
    let names: Vec<String> = components.schemas.keys().cloned().collect();
    for name in names {
        let Some(item) = name.strip_prefix("Page_") else { continue };
        if !components.schemas.contains_key(item) {
            continue;
        }
        let reference = Ref::from_schema_name(item);
        if let Some(RefOr::T(Schema::Object(page))) = components.schemas.get_mut(&name)
            && let Some(RefOr::T(Schema::Array(items))) = page.properties.get_mut("items")
        {
            items.items = ArrayItems::RefOrSchema(Box::new(RefOr::Ref(reference)));
        }
    }
}
