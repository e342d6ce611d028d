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
    "POST /auth/signup/confirm",
    "POST /auth/password-reset",
    "POST /auth/password-reset/confirm",
    "POST /auth/invitations/accept",
    "POST /auth/identities",
    "GET /.well-known/jwks.json",
    "POST /organizations",
    "GET /organization/members",
    "POST /organization/members",
    "PATCH /organization/members/{user_id}",
    "DELETE /organization/members/{user_id}",
    "DELETE /organization/invitations/{id}",
    "DELETE /organization/membership",
    "GET /permissions",
    "POST /api-keys",
    "GET /api-keys",
    "GET /api-keys/{id}",
    "DELETE /api-keys/{id}",
    "GET /organization",
    "GET /organization/usage",
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
    "HEAD /webhook/{id}",
    "OPTIONS /webhook/{id}",
    "GET /webhooks/{id}/stream",
    "GET /webhooks/{id}/requests",
    "POST /webhooks/{id}/requests/search",
    "GET /webhooks/{id}/requests/{request_id}",
    "GET /webhooks/{id}/requests/{request_id}/body",
    "DELETE /webhooks/{id}/requests/{request_id}",
    "DELETE /webhooks/{id}/requests",
    "POST /webhooks/{id}/requests/{request_id}/replay",
    "POST /webhooks/{id}/requests/{request_id}/verify",
    "POST /webhooks/{id}/rules/test",
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
    "GET /flows/{id}/schedules",
    "POST /flows/{id}/schedules",
    "GET /flows/{id}/schedules/{schedule_id}",
    "PATCH /flows/{id}/schedules/{schedule_id}",
    "DELETE /flows/{id}/schedules/{schedule_id}",
    "POST /schedules/preview",
    "POST /notification-channels",
    "GET /notification-channels",
    "GET /notification-channels/{channel_id}",
    "PATCH /notification-channels/{channel_id}",
    "DELETE /notification-channels/{channel_id}",
    "POST /notification-channels/{channel_id}/test",
    "POST /alert-rules",
    "GET /alert-rules",
    "DELETE /alert-rules/{rule_id}",
    "GET /alerts",
    "GET /flows/{id}/export",
    "POST /flows/import",
    "POST /flows/{id}/launch",
    "POST /flows/launch",
    "GET /batches/{id}",
    "GET /batches/{id}/executions",
    "POST /batches/{id}/rerun",
    "GET /flows/{id}/executions",
    "GET /flows/{flow_id}/executions/{execution_id}",
    "GET /flows/{flow_id}/executions/{execution_id}/stream",
    "GET /flows/{flow_id}/executions/{execution_id}/nodes",
    "GET /flows/{flow_id}/executions/{execution_id}/captures",
    "POST /flows/{flow_id}/executions/{execution_id}/cancel",
    "POST /executions",
    "GET /executions",
    "GET /executions/{execution_id}",
    "GET /executions/{execution_id}/nodes",
    "GET /executions/{execution_id}/stream",
    "GET /executions/{execution_id}/captures",
    "POST /executions/{execution_id}/cancel",
    "POST /flows/{flow_id}/try",
    "GET /flows/{id}/analytics/executions",
    "POST /runners",
    "GET /runners",
    "GET /runners/{id}",
    "DELETE /runners/{id}",
    "POST /runners/{id}/heartbeat",
    "POST /runner/deregister",
    "GET /runner/pools",
    "GET /runner/pools/{pool}",
    "POST /runner/jobs/next",
    "POST /runner/jobs/{job_id}/nodes",
    "POST /runner/jobs/{job_id}/complete",
    "POST /runner/jobs/{job_id}/captures",
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
    "POST /collections/{id}/mock",
    "POST /collections/import",
    "POST /collections/import/preview",
    "GET /collections/{id}/openapi-sync",
    "PUT /collections/{id}/openapi-sync",
    "POST /collections/{id}/openapi-sync/preview",
    "POST /collections/{id}/openapi-sync",
    // Destinations (issue #49).
    "POST /webhooks/{id}/destinations",
    "GET /webhooks/{id}/destinations",
    "GET /webhooks/{id}/destinations/{destination_id}",
    "PATCH /webhooks/{id}/destinations/{destination_id}",
    "DELETE /webhooks/{id}/destinations/{destination_id}",
    "GET /webhooks/{id}/destinations/{destination_id}/deliveries",
    "POST /webhooks/{id}/destinations/{destination_id}/deliveries/replay",
    "GET /webhooks/{id}/destinations/{destination_id}/deliveries/{delivery_id}",
    "GET /webhooks/{id}/destinations/{destination_id}/deliveries/{delivery_id}/attempts",
    "POST /runner/deliveries/next",
    "POST /runner/deliveries/{delivery_id}/result",
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
    assert_eq!(tags, hookflow_control_plane::api::openapi::TAGS);

    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item") {
            documented.insert(format!("{} {path}", method.to_uppercase()));
            let tags = op["tags"].as_array().expect("every operation is tagged");
            assert!(
                tags.iter().all(|t| { hookflow_control_plane::api::openapi::TAGS.contains(&t.as_str().unwrap_or("")) })
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
            // Mail is off on this server (no SMTP).
            "POST /auth/signup/confirm" | "POST /auth/password-reset" | "POST /auth/password-reset/confirm" => 404,
            "GET /.well-known/jwks.json" => 200,
            _ => 401,
        };
        assert_eq!(reply.status, expected, "{op} is documented but not routed: {}", reply.text);
        assert!(!reply.text.contains("no route"), "{op}: {}", reply.text);
    }
    // And the routes outside the document are only the probes and the document itself.
    for path in hookflow_control_plane::api::UNDOCUMENTED_ROUTES {
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
    assert_eq!(schemas["CreateWebhook"]["properties"]["max_body_bytes"]["maximum"], 33_554_432);
    assert_eq!(schemas["UpdateOrganization"]["properties"]["default_max_body_bytes"]["maximum"], 10_485_760);
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

/// Every operation of the document, as (method, path, operation).
fn operations(doc: &serde_json::Value) -> Vec<(String, String, &serde_json::Value)> {
    let paths = doc["paths"].as_object().expect("paths");
    let each = paths.iter().flat_map(|(path, item)| {
        let item = item.as_object().expect("item");
        item.iter().map(move |(method, op)| (method.to_uppercase(), path.clone(), op))
    });
    each.collect()
}

/// Every schema object of the document with its JSON pointer.
fn schema_objects<'a>(value: &'a serde_json::Value, at: String, found: &mut Vec<(String, &'a serde_json::Value)>) {
    match value {
        serde_json::Value::Object(map) => {
            found.push((at.clone(), value));
            map.iter().for_each(|(k, v)| schema_objects(v, format!("{at}/{k}"), found));
        }
        serde_json::Value::Array(items) => {
            items.iter().enumerate().for_each(|(i, v)| schema_objects(v, format!("{at}/{i}"), found))
        }
        _ => {}
    }
}

/// What openapi-python-client and openapi-typescript need (issue "Generated clients"; `.ci/clients/run.sh` runs
/// the generators themselves): unique `<verb>_<resource>` operationIds, required path parameters, a schema for
/// every answer with a body, the shared error body on every error, pages that refer to their items, tuples without
/// `items: false`, named union members, and a flow definition typed as a union of node kinds.
#[test]
fn the_document_is_shaped_for_client_generators() {
    let doc = serde_json::to_value(hookflow_control_plane::api::openapi_document()).expect("json");
    let mut ids = BTreeSet::new();
    let id_shape = |id: &str| {
        let words: Vec<&str> = id.split('_').collect();
        words.len() > 1
            && words[0].chars().all(|c| c.is_ascii_lowercase())
            && words.iter().all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
    };
    for (method, path, op) in operations(&doc) {
        let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path} has no operationId"));
        assert!(id_shape(id), "{method} {path}: `{id}` is not <verb>_<resource>");
        assert!(ids.insert(id.to_owned()), "{method} {path}: operationId `{id}` is used twice");
        for parameter in op["parameters"].as_array().into_iter().flatten() {
            if parameter["in"] == "path" {
                assert_eq!(parameter["required"], true, "{method} {path}: path parameter {}", parameter["name"]);
            }
        }
        for (status, response) in op["responses"].as_object().expect("responses") {
            let content = response["content"].as_object();
            if status.starts_with('2') && status != "204" {
                let content = content.unwrap_or_else(|| panic!("{method} {path} {status} has no content"));
                for (media, body) in content {
                    assert!(body.get("schema").is_some(), "{method} {path} {status} {media} has no schema");
                }
            }
            if status.starts_with('4') || status.starts_with('5') {
                let error = &response["content"]["application/json"]["schema"]["$ref"];
                assert_eq!(error, "#/components/schemas/ErrorBody", "{method} {path} {status}");
            }
        }
    }
    assert_eq!(ids.len(), IMPLEMENTED.len());
    for name in ["capture_webhook_post", "list_webhook_requests", "list_collection_requests", "get_webhook_request"] {
        assert!(ids.contains(name), "{name}");
    }
    assert_eq!(doc["paths"]["/webhook/{id}"]["post"]["security"], serde_json::json!([]), "captures need no key");

    let mut objects = Vec::new();
    schema_objects(&doc, String::new(), &mut objects);
    for (at, object) in &objects {
        assert_ne!(object.get("items"), Some(&serde_json::Value::Bool(false)), "{at}: items false");
        for union in ["oneOf", "anyOf"] {
            for member in object[union].as_array().into_iter().flatten() {
                let named = member.get("$ref").is_some() || !matches!(member["type"].as_str(), Some("object"));
                let enumerated = member.get("enum").is_some() && member["type"] != "null";
                assert!(named && !enumerated, "{at}: an inline {union} member gets a positional name: {member}");
            }
        }
    }
    let schemas = &doc["components"]["schemas"];
    for (name, page) in schemas.as_object().expect("schemas") {
        if let Some(item) = name.strip_prefix("Page_") {
            assert_eq!(page["properties"]["items"]["items"]["$ref"], format!("#/components/schemas/{item}"), "{name}");
        }
    }
    let header_pair = &schemas["CapturedRequest"]["properties"]["headers"]["items"];
    assert_eq!((&header_pair["minItems"], &header_pair["maxItems"]), (&2.into(), &2.into()), "{header_pair}");
    assert_eq!(schemas["WriteFlow"]["properties"]["definition"]["$ref"], "#/components/schemas/FlowDefinition");
    let nodes = &schemas["FlowDefinition"]["properties"]["nodes"]["items"];
    assert_eq!(nodes["$ref"], "#/components/schemas/FlowNode");
    assert_eq!(schemas["FlowNode"]["discriminator"]["propertyName"], "kind");
    let request = &schemas["RequestNode"];
    assert_eq!(request["properties"]["kind"]["enum"], serde_json::json!(["request"]));
    assert_eq!(request["properties"]["extractors"]["items"]["$ref"], "#/components/schemas/Extractor");
}
