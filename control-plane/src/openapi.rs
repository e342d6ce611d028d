//! The OpenAPI 3.1 document: info, the contract's 11 tags and the security schemes. Operations are added from
//! the handlers' `#[utoipa::path]` annotations as routes are registered, so the served document is the route table.

use utoipa::Modify;
use utoipa::OpenApi;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};

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
        `X-Api-Key` and `X-Organization-Id`; errors are always `{\"error\": {\"code\", \"message\", \"request_id\"}}`."),
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
        (name = "SpecialNodes", description = "Non-request node kinds: delay, module, set_variables."),
        (name = "Runner", description = "Runner registration, heartbeats, job claims and results."),
    ),
    components(schemas(hookflow_shared::ErrorBody)),
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
        openapi.servers = None;
    }
}
