//! The served OpenAPI document is the route table: OpenAPI 3.1, no servers block, exactly the contract's 11 tags,
//! exactly the operations implemented so far, and every documented operation really routed.

use hookflow_tests::TestApp;
use reqwest::Method;
use std::collections::BTreeSet;

/// The operations of API.md this build implements. A route added without documentation, or documented without
/// a route, fails below.
const IMPLEMENTED: &[&str] = &[
    "POST /auth/sessions",
    "POST /auth/sessions/refresh",
    "GET /auth/session",
    "DELETE /auth/session",
    "PUT /auth/password",
    "POST /auth/signup",
    "GET /.well-known/jwks.json",
    "POST /organizations",
    "GET /organization/members",
    "POST /organization/members",
    "PATCH /organization/members/{user_id}",
    "DELETE /organization/members/{user_id}",
    "DELETE /organization/invitations/{id}",
    "GET /permissions",
    "POST /api-keys",
    "GET /api-keys",
    "GET /api-keys/{id}",
    "DELETE /api-keys/{id}",
    "GET /organization",
    "PATCH /organization",
    "GET /audit-log",
    "POST /webhooks",
    "GET /webhooks",
    "GET /webhooks/{id}",
    "PATCH /webhooks/{id}",
    "DELETE /webhooks/{id}",
    "GET /webhook/{id}",
    "POST /webhook/{id}",
    "PUT /webhook/{id}",
    "PATCH /webhook/{id}",
    "DELETE /webhook/{id}",
    "GET /webhooks/{id}/stream",
    "GET /webhooks/{id}/requests",
    "POST /webhooks/{id}/requests/search",
    "GET /webhooks/{id}/requests/{request_id}",
    "GET /webhooks/{id}/requests/{request_id}/body",
    "DELETE /webhooks/{id}/requests/{request_id}",
    "DELETE /webhooks/{id}/requests",
    "POST /webhooks/{id}/requests/{request_id}/replay",
    "GET /webhooks/{id}/requests/export",
    "GET /webhooks/{id}/analytics/volume",
    "GET /webhooks/{id}/analytics/methods",
    "GET /analytics/overview",
    "GET /extractors",
    "POST /extractors/evaluate",
    "GET /assertions/operators",
    "POST /assertions/evaluate",
    "GET /special-nodes",
    "GET /secrets",
    "PUT /secrets/{name}",
    "DELETE /secrets/{name}",
    "GET /variables",
    "PUT /variables/{name}",
    "DELETE /variables/{name}",
    "GET /flows",
    "POST /flows",
    "POST /flows/search",
    "POST /flows/validate",
    "GET /flows/tags",
    "GET /flows/{id}",
    "PUT /flows/{id}",
    "PATCH /flows/{id}",
    "DELETE /flows/{id}",
    "POST /flows/{id}/validate",
    "POST /flows/{id}/publish",
    "GET /flows/{id}/versions",
    "GET /flows/{id}/versions/{version_id}",
    "POST /flows/{id}/versions/{version_id}/restore",
    "GET /flows/{id}/environments",
    "PUT /flows/{id}/environments/{key}",
    "DELETE /flows/{id}/environments/{key}",
    "GET /flows/{id}/export",
    "POST /flows/import",
    "POST /flows/{id}/launch",
    "POST /flows/launch",
    "GET /flows/{id}/executions",
    "GET /flows/{flow_id}/executions/{execution_id}",
    "GET /flows/{flow_id}/executions/{execution_id}/stream",
    "GET /flows/{flow_id}/executions/{execution_id}/nodes",
    "POST /flows/{flow_id}/executions/{execution_id}/cancel",
    "GET /flows/{id}/analytics/executions",
    "POST /runners",
    "GET /runners",
    "GET /runners/{id}",
    "DELETE /runners/{id}",
    "POST /runners/{id}/heartbeat",
    "POST /runner/jobs/next",
    "POST /runner/jobs/{job_id}/nodes",
    "POST /runner/jobs/{job_id}/complete",
    "GET /collections",
    "POST /collections",
    "GET /collections/{id}",
    "PATCH /collections/{id}",
    "DELETE /collections/{id}",
    "GET /collections/{id}/requests",
    "POST /collections/{id}/requests",
    "GET /collections/{id}/requests/{request_id}",
    "PUT /collections/{id}/requests/{request_id}",
    "DELETE /collections/{id}/requests/{request_id}",
    "POST /collections/import/openapi",
    "GET /collections/{id}/openapi-sync",
    "PUT /collections/{id}/openapi-sync",
    "POST /collections/{id}/openapi-sync/preview",
    "POST /collections/{id}/openapi-sync",
];

#[tokio::test]
async fn the_document_matches_the_contract_and_the_routes() {
    let app = TestApp::spawn().await;
    let reply = app.call(Method::GET, "/openapi.json", None, None).await;
    assert_eq!(reply.status, 200);
    let doc = reply.body;
    assert!(doc["openapi"].as_str().expect("version").starts_with("3.1"), "{}", doc["openapi"]);
    assert!(doc.get("servers").is_none(), "no servers block");
    let tags: Vec<&str> =
        doc["tags"].as_array().expect("tags").iter().map(|t| t["name"].as_str().expect("name")).collect();
    assert_eq!(tags, hookflow_control_plane::http::openapi::TAGS);

    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item") {
            documented.insert(format!("{} {path}", method.to_uppercase()));
            let tags = op["tags"].as_array().expect("every operation is tagged");
            assert!(
                tags.iter()
                    .all(|t| { hookflow_control_plane::http::openapi::TAGS.contains(&t.as_str().unwrap_or("")) })
            );
        }
    }
    let expected: BTreeSet<String> = IMPLEMENTED.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(documented, expected);

    // Each documented operation is routed: unauthenticated, it meets authentication (or, for the capture URL,
    // the endpoint lookup), never "no route".
    for op in &documented {
        let (method, path) = op.split_once(' ').expect("op");
        let path = path
            .replace("{id}", &uuid::Uuid::now_v7().to_string())
            .replace("{request_id}", &uuid::Uuid::now_v7().to_string())
            .replace("{name}", "NAME")
            .replace("{version_id}", &uuid::Uuid::now_v7().to_string())
            .replace("{key}", "dev")
            .replace("{flow_id}", &uuid::Uuid::now_v7().to_string())
            .replace("{execution_id}", &uuid::Uuid::now_v7().to_string())
            .replace("{job_id}", &uuid::Uuid::now_v7().to_string())
            .replace("{user_id}", &uuid::Uuid::now_v7().to_string());
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        let reply = app.call(method, &path, None, None).await;
        // Unauthenticated, each meets its authentication; the public ones answer what they answer without it.
        let expected = match op.as_str() {
            _ if path.starts_with("/webhook/") => 404,
            "POST /auth/sessions" => 400,
            "POST /auth/signup" => 404,
            "GET /.well-known/jwks.json" => 200,
            _ => 401,
        };
        assert_eq!(reply.status, expected, "{op} is documented but not routed: {}", reply.text);
        assert!(!reply.text.contains("no route"), "{op}: {}", reply.text);
    }
    // And the routes outside the document are only the probes and the document itself.
    for path in hookflow_control_plane::http::UNDOCUMENTED_ROUTES {
        assert_eq!(app.call(Method::GET, path, None, None).await.status, 200, "{path}");
    }
}

/// Every JSON pointer the document's `$ref`s name, as `#/a/b` paths.
fn refs(value: &serde_json::Value, found: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(serde_json::Value::String(target)) = map.get("$ref") {
                found.insert(target.clone());
            }
            map.values().for_each(|v| refs(v, found));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| refs(v, found)),
        _ => {}
    }
}

#[tokio::test]
async fn every_reference_resolves_and_the_limits_are_stated() {
    let app = TestApp::spawn().await;
    let doc = app.call(Method::GET, "/openapi.json", None, None).await.body;
    let mut found = BTreeSet::new();
    refs(&doc, &mut found);
    assert!(found.len() > 50, "the document uses references: {}", found.len());
    for target in &found {
        let pointer = target.strip_prefix('#').unwrap_or_else(|| panic!("{target} is not local"));
        assert!(doc.pointer(pointer).is_some(), "{target} names nothing in the document");
    }

    // The limits handlers enforce are in the schemas: names, pages, and this server's capture-rate ceiling.
    let schemas = &doc["components"]["schemas"];
    assert_eq!(schemas["WriteFlow"]["properties"]["name"]["maxLength"], 200);
    assert_eq!(schemas["WriteFlow"]["properties"]["tags"]["maxItems"], 20);
    assert_eq!(schemas["CreateWebhook"]["properties"]["max_body_bytes"]["maximum"], 10_485_760);
    let rate = &schemas["UpdateOrganization"]["properties"]["capture_rate_limit_per_s"];
    assert_eq!(rate["maximum"], 10_000, "{rate}");
    let limit = doc["paths"]["/webhooks"]["get"]["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .find(|p| p["name"] == "limit")
        .expect("limit");
    assert_eq!(limit["schema"]["minimum"], 1);
    let operators: Vec<&str> =
        schemas["Operator"]["enum"].as_array().expect("enum").iter().filter_map(|v| v.as_str()).collect();
    assert!(operators.contains(&"isType") && operators.contains(&"notEquals"), "{operators:?}");
}
