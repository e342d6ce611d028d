//! The OpenAPI 3.1 document: info, the contract's 11 tags and the security schemes. Operations are added from
//! the handlers' `#[utoipa::path]` annotations as routes are registered, so the served document is the route table.

use axum::http::StatusCode;
use utoipa::Modify;
use utoipa::OpenApi;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::Response;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{Content, Ref, RefOr};

/// The 11 tags of the contract, in its order.
pub const TAGS: [&str; 11] = [
    "Auth",
    "Webhook",
    "Analytics",
    "Flows",
    "Collections",
    "Resources",
    "Administration",
    "Extractors",
    "Assertions",
    "SpecialNodes",
    "Runner",
];

#[derive(OpenApi)]
#[openapi(
    info(title = "hookflow", description = "Webhook capture and API flow automation. Automation authenticates with \
        `X-Api-Key` and `X-Organization-Id`; errors are always `{\"error\": {\"code\", \"message\", \"request_id\"}}`. \
        Every response carries `X-Request-Id`: the caller's own when it is 1 to 128 letters, digits and `._:/+=-`, \
        else a new one."),
    tags(
        (name = "Auth", description = "Browser sign-in sessions and the built-in identity provider's keys."),
        (name = "Webhook", description = "Inbound webhook endpoints, their capture URLs, live streams and history."),
        (name = "Analytics", description = "Capture volume, method breakdown and execution statistics."),
        (name = "Flows", description = "API-testing flows: definitions, versions, environments, launches, executions."),
        (name = "Collections", description = "Request collections, OpenAPI import and sync."),
        (name = "Resources", description = "Organization secrets (write-only) and variables."),
        (name = "Administration", description = "Scopes, API keys, the organization, members and the audit log."),
        (name = "Extractors", description = "Extractor kinds and a sandbox to evaluate them."),
        (name = "Assertions", description = "The 14 assertion operators and a sandbox to evaluate them."),
        (name = "SpecialNodes", description = "Non-request node kinds: delay, module, set_variables, webhook."),
        (name = "Runner", description = "Runner registration, heartbeats, job claims and results."),
    ),
    components(schemas(hookflow_shared::ErrorBody, hookflow_shared::flow::definition::Latest)),
    modifiers(&SecuritySchemes)
)]
#[derive(Debug)]
pub struct ApiDoc;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components
            .add_security_scheme("api_key", SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-Api-Key"))));
        components.add_security_scheme(
            "organization",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-Organization-Id",
                "The organization the request acts in (a UUID).",
            ))),
        );
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build()),
        );
        components.add_security_scheme(
            "job_token",
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("hfj_ job token").build(),
            ),
        );
        for (name, schema) in hookflow_shared::api::rules::named_schemas() {
            components.schemas.insert(name.to_owned(), schema);
        }
        openapi.servers = None;
    }
}

/// Operations whose JSON body may be left out (nothing reads as `{}`): a launch of the draft, a publish
/// without a note.
const BODY_OPTIONAL: &[&str] = &["launch_flow", "publish_flow"];

/// Completes every operation of the assembled document, so handlers list only what is theirs: each operation gets
/// the tag of its path's section (`tag_of`); an operation with no `security` gets the default (`X-Api-Key` with `X-Organization-Id`); every authenticated operation can
/// answer 401, and those acting in an organization 400 (`organization_required`) and 403; an operation with a
/// path parameter can answer 404 (no such resource, or another organization's); every operation can answer 429
/// and 503; every error response carries the error body; every response has a description.
pub fn complete_operations(document: &mut utoipa::openapi::OpenApi) {
    for (path, item) in document.paths.paths.iter_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
            &mut item.head,
            &mut item.options,
            &mut item.trace,
        ];
        for operation in operations.into_iter().flatten() {
            operation.tags.get_or_insert_with(|| vec![tag_of(path).to_owned()]);
            complete(operation);
            if operation.operation_id.as_deref().is_some_and(|id| BODY_OPTIONAL.contains(&id)) {
                if let Some(RefOr::T(body)) = &mut operation.request_body {
                    body.required = Some(utoipa::openapi::Required::False);
                }
            }
        }
    }
}

/// The contract's tag for an operation's path: analytics wherever they hang, then the section its first segment
/// names.
pub fn tag_of(path: &str) -> &'static str {
    if path.contains("/analytics/") {
        return "Analytics";
    }
    let section = path.trim_start_matches('/').split('/').next().unwrap_or("");
    match section {
        "auth" | ".well-known" => "Auth",
        "webhooks" | "webhook" => "Webhook",
        "flows" | "schedules" | "executions" => "Flows",
        "batches" => "Flows",
        "collections" => "Collections",
        "secrets" | "variables" => "Resources",
        "extractors" => "Extractors",
        "assertions" => "Assertions",
        "special-nodes" => "SpecialNodes",
        "runner" | "runners" => "Runner",
        _ => "Administration",
    }
}

/// Names of the schemes an operation's security requirements use.
fn schemes(operation: &Operation) -> Vec<String> {
    let requirements = operation.security.iter().flatten();
    let names = requirements.filter_map(|r| serde_json::to_value(r).ok()).filter_map(|v| match v {
        serde_json::Value::Object(map) => Some(map.keys().cloned().collect::<Vec<_>>()),
        _ => None,
    });
    names.flatten().collect()
}

fn complete(operation: &mut Operation) {
    if operation.security.is_none() {
        let default =
            SecurityRequirement::new("api_key", Vec::<String>::new()).add("organization", Vec::<String>::new());
        operation.security = Some(vec![default]);
    }
    let schemes = schemes(operation);
    let mut statuses = vec![StatusCode::TOO_MANY_REQUESTS, StatusCode::SERVICE_UNAVAILABLE];
    if !schemes.is_empty() {
        statuses.push(StatusCode::UNAUTHORIZED);
    }
    if schemes.iter().any(|s| s == "organization") {
        statuses.extend([StatusCode::BAD_REQUEST, StatusCode::FORBIDDEN]);
    }
    let in_path = |p: &RefOr<utoipa::openapi::path::Parameter>| matches!(p, RefOr::T(p) if p.parameter_in == utoipa::openapi::path::ParameterIn::Path);
    if operation.parameters.iter().flatten().any(in_path) {
        statuses.push(StatusCode::NOT_FOUND);
    }
    let responses = &mut operation.responses.responses;
    for status in statuses {
        responses.entry(status.as_str().to_owned()).or_insert_with(|| RefOr::T(Response::new("")));
    }
    for (code, response) in responses.iter_mut() {
        let RefOr::T(response) = response else { continue };
        let status = code.parse::<u16>().ok().and_then(|c| StatusCode::from_u16(c).ok());
        if response.description.is_empty() {
            let reason = status.and_then(|s| s.canonical_reason()).unwrap_or("Response");
            response.description = reason.to_owned();
        }
        if status.is_some_and(|s| s.is_client_error() || s.is_server_error()) && response.content.is_empty() {
            let body = Content::new(Some(RefOr::Ref(Ref::from_schema_name("ErrorBody"))));
            response.content.insert("application/json".to_owned(), RefOr::T(body));
        }
    }
}

/// States this server's own settings where a schema depends on them: the operator's ceiling on capture rates.
pub fn state_server_limits(document: &mut utoipa::openapi::OpenApi, max_capture_rate: i32) {
    use utoipa::openapi::schema::Schema;
    let schemas = document.components.as_mut().map(|c| &mut c.schemas);
    let Some(RefOr::T(Schema::Object(update))) = schemas.and_then(|s| s.get_mut("UpdateOrganization")) else {
        return;
    };
    if let Some(RefOr::T(Schema::Object(rate))) = update.properties.get_mut("capture_rate_limit_per_s") {
        rate.maximum = Some(max_capture_rate.into());
        rate.description = Some(format!(
            "Captures per second each endpoint accepts: 1 to {max_capture_rate} (the operator's ceiling)."
        ));
    }
}
