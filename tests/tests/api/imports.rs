//! Imports from other tools over the real server (`POST /collections/import` and its preview), fed with files as
//! the tools export them (tests/fixtures/imports): a Postman v2.1 collection and environment, Insomnia v4 (JSON and
//! YAML), a HAR saved by Chromium (made into a flow the embedded runner runs against a receiver here), curl lines,
//! the Swagger 2.0 Petstore (same operations as its 3.0 form); 400s, scopes, preview and isolation.

use hookflow_tests::exec::scoped;
use hookflow_tests::receiver::Receiver;
use hookflow_tests::{Reply, TestApp};
use reqwest::Method;
use serde_json::{Value, json};

const IMPORT: &str = "/collections/import";
const PREVIEW: &str = "/collections/import/preview";

fn fixture(name: &str) -> String {
    let path = format!("{}/fixtures/imports/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

async fn import(app: &TestApp, body: Value) -> Value {
    let reply = app.admin(Method::POST, IMPORT, Some(body)).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.body
}

fn request<'a>(answer: &'a Value, name: &str) -> &'a Value {
    let requests = answer["collection"]["requests"].as_array().expect("requests");
    requests.iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("no request {name} in {requests:?}"))
}

/// `(method, url)` of every request, in order.
fn lines(answer: &Value) -> Vec<(String, String)> {
    let requests = answer["collection"]["requests"].as_array().expect("requests");
    requests.iter().map(|r| (r["method"].as_str().unwrap().to_owned(), r["url"].as_str().unwrap().to_owned())).collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
}

#[tokio::test]
async fn a_postman_collection_imports_every_request_and_reports_its_script_lines() {
    let app = TestApp::spawn().await;
    let answer = import(&app, json!({"source": {"document": fixture("shop.postman_collection.json")}})).await;
    let collection = &answer["collection"];
    assert_eq!(collection["name"], "Shop API");
    assert_eq!(collection["variables"], json!({"base_url": "https://shop.example.com/api", "user_id": ""}));
    assert_eq!(
        lines(&answer),
        pairs(&[
            ("POST", "{{base_url}}/login"),
            ("GET", "{{base_url}}/users?limit=10"),
            ("POST", "{{base_url}}/users"),
            ("POST", "{{base_url}}/users/{{user_id}}/avatar"),
            ("GET", "{{base_url}}/health"),
        ])
    );
    let folders: Vec<(&str, i64)> = collection["folders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap(), f["request_count"].as_i64().unwrap()))
        .collect();
    assert_eq!(folders, [("Auth", 1), ("Users", 1), ("Users/Admin", 2)]);
    assert_eq!(request(&answer, "Health")["folder"], Value::Null);

    let login = request(&answer, "Log in");
    assert_eq!(login["headers"], json!({"Accept": "application/json", "Content-Type": "application/json"}));
    assert_eq!(login["body"], "{\n    \"user\": \"{{user}}\",\n    \"password\": \"{{password}}\"\n}");
    let users = request(&answer, "List users");
    assert_eq!(users["headers"], json!({"Accept": "application/json", "Authorization": "Bearer {{token}}"}));
    let create = request(&answer, "Create user");
    assert_eq!(create["body"], "name=Grace&role=admin");
    assert_eq!(
        create["headers"],
        json!({"Authorization": "Basic YWRtaW46czNjcmV0", "Content-Type": "application/x-www-form-urlencoded"})
    );
    let upload = request(&answer, "Upload avatar");
    assert_eq!(upload["headers"]["X-API-Key"], "{{api_key}}");
    let content_type = upload["headers"]["Content-Type"].as_str().expect("a content type");
    assert!(content_type.starts_with("multipart/form-data; boundary="), "{content_type}");
    let body = upload["body"].as_str().expect("a multipart body");
    assert!(body.contains("name=\"caption\"\r\n\r\nMe at the beach\r\n"), "{body}");
    assert!(body.contains("name=\"avatar\"; filename=\"avatar.png\""), "{body}");

    // The six patterns: 3 lines of "Log in", 4 of "List users", 3 of "Create user", 1 of "Health".
    let report = &answer["report"];
    assert_eq!(report["converted"], 11, "{report}");
    assert_eq!(
        report["not_converted"],
        json!([
            {"where": "Auth/Log in", "line": 1,
             "text": "console.log(\"logging in as \" + pm.environment.get(\"user\"));"},
            {"where": "Users/List users", "line": 10, "text": "pm.expect(jsonData.items.length).to.be.above(0);"},
            {"where": "Users/List users", "line": 17, "text": "postman.setNextRequest(\"Create user\");"},
            {"where": "Users/Admin/Upload avatar", "line": 2, "text": "pm.variables.set(\"ts\", Date.now());"},
            {"where": "Health", "line": 2, "text": "tests[\"fast\"] = responseTime < 200;"},
        ])
    );
    let warnings = report["warnings"].as_array().expect("warnings");
    assert!(warnings.iter().any(|w| w.as_str().unwrap().contains("avatar.png")), "{warnings:?}");
    assert_eq!(answer["summary"]["requests"], 5);
    assert_eq!(answer["flow"], Value::Null);
    // Collection requests hold no tests: a read shows what was stored.
    let id = collection["id"].as_str().expect("id");
    let stored = app.admin(Method::GET, &format!("/collections/{id}"), None).await;
    assert_eq!(stored.body["requests"].as_array().map(Vec::len), Some(5));
}

/// The flow made of a Postman collection carries the converted tests and the `form` and `multipart` bodies, which
/// the request-node half of #54 (branch `requests`) makes the definition accept.
#[tokio::test]
async fn a_postman_collections_flow_holds_its_converted_tests_as_extractors_and_assertions() {
    let app = TestApp::spawn().await;
    let body = json!({"source": {"document": fixture("shop.postman_collection.json")}, "flow": {"name": "Shop smoke"}});
    let preview = app.admin(Method::POST, PREVIEW, Some(body.clone())).await;
    assert_eq!(preview.status, 200, "{}", preview.text);
    let definition = &preview.body["flow"]["definition"];
    let nodes = definition["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 5);
    assert_eq!(
        nodes[0]["extractors"],
        json!([
            {"name": "status", "kind": "statusCode"},
            {"name": "token", "kind": "jsonPath", "expression": "$.token"},
            {"name": "duration", "kind": "duration"},
        ])
    );
    assert_eq!(
        nodes[0]["assertions"],
        json!([
            {"source": "status", "operator": "equals", "expected": 200},
            {"source": "duration", "operator": "lessThan", "expected": 1000},
        ])
    );
    assert_eq!(nodes[2]["request"]["form"], json!([["name", "Grace"], ["role", "admin"]]));
    assert_eq!(nodes[3]["request"]["multipart"][0], json!({"name": "caption", "value": "Me at the beach"}));
    let created = import(&app, body).await;
    let flow = created["flow"]["id"].as_str().expect("a flow id");
    let stored = app.admin(Method::GET, &format!("/flows/{flow}"), None).await;
    assert_eq!(stored.body["definition"]["nodes"], definition["nodes"]);
}

#[tokio::test]
async fn a_postman_environment_becomes_collection_variables_or_a_flows_environment() {
    let app = TestApp::spawn().await;
    let document = fixture("shop-staging.postman_environment.json");
    let answer = import(&app, json!({"source": {"document": document}})).await;
    assert_eq!(answer["collection"]["name"], "Shop staging");
    let variables = json!({"base_url": "https://staging.shop.example.com/api", "user": "ada",
        "api_key": "{{secret.SHOP_API_KEY}}"});
    assert_eq!(answer["collection"]["variables"], variables, "the disabled value is left out");
    assert_eq!(answer["collection"]["requests"], json!([]));

    let flow = app.create_flow("Shop smoke", json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]})).await;
    let body = json!({"format": "postman_environment", "flow_id": flow, "source": {"document": document}});
    let preview = app.admin(Method::POST, PREVIEW, Some(body.clone())).await;
    assert_eq!(preview.status, 200, "{}", preview.text);
    let environments = format!("/flows/{flow}/environments");
    assert_eq!(app.admin(Method::GET, &environments, None).await.body["items"], json!([]), "a preview stores nothing");
    let answer = import(&app, body.clone()).await;
    assert_eq!(answer["collection"], Value::Null);
    assert_eq!(answer["flow"], json!({"id": flow, "name": "Shop smoke", "environment": "Shop-staging"}));
    let listed = app.admin(Method::GET, &environments, None).await.body;
    assert_eq!(listed["items"][0]["key"], "Shop-staging");
    assert_eq!(listed["items"][0]["variables"], variables);
    assert_eq!(listed["items"][0]["secret_refs"], json!(["SHOP_API_KEY"]));

    // Another organization's flow is not found; a key without flows:write may not write environments.
    let other = app.new_org("Other").await;
    let reply = app.call(Method::POST, IMPORT, Some(&other), Some(body.clone())).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (404, "not_found"), "{}", reply.text);
    let collections_only = scoped(&app, app.admin.org, &["collections:write"]).await;
    let reply = app.call(Method::POST, IMPORT, Some(&collections_only), Some(body)).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (403, "insufficient_scope"), "{}", reply.text);
}

#[tokio::test]
async fn insomnia_exports_in_json_and_yaml_import_every_request() {
    let app = TestApp::spawn().await;
    let answer = import(&app, json!({"source": {"document": fixture("shop.insomnia-v4.json")}})).await;
    assert_eq!(answer["collection"]["name"], "Shop API (Insomnia)");
    assert_eq!(
        answer["collection"]["variables"],
        json!({"base_url": "https://shop.example.com/api", "token": "tok-insomnia"})
    );
    assert_eq!(
        lines(&answer),
        pairs(&[
            ("GET", "{{base_url}}/users"),
            ("POST", "{{base_url}}/users"),
            ("POST", "{{base_url}}/login"),
            ("PUT", "{{base_url}}/users/7/avatar"),
        ])
    );
    let list = request(&answer, "List users");
    assert_eq!((&list["folder"], &list["query"]), (&json!("Users"), &json!({"limit": "10"})));
    assert_eq!(list["headers"], json!({"Accept": "application/json", "Authorization": "Bearer {{token}}"}));
    let create = request(&answer, "Create user");
    assert_eq!(create["folder"], "Users/Admin");
    assert_eq!(create["body"], "{\n\t\"name\": \"Grace\",\n\t\"role\": \"admin\"\n}");
    assert_eq!(
        create["headers"],
        json!({"Authorization": "Basic YWRtaW46czNjcmV0", "Content-Type": "application/json"})
    );
    let login = request(&answer, "Log in");
    assert_eq!(login["body"], "user=ada&password={{password}}");
    let upload = request(&answer, "Upload avatar");
    assert_eq!(upload["headers"]["X-API-Key"], "{{api_key}}");
    assert!(upload["body"].as_str().unwrap().contains("Me at the beach"));
    let warnings = answer["report"]["warnings"].as_array().expect("warnings");
    assert!(warnings.iter().any(|w| w.as_str().unwrap().contains("Production")), "{warnings:?}");

    let yaml = import(&app, json!({"source": {"document": fixture("shop.insomnia-v4.yaml")}})).await;
    assert_eq!(yaml["collection"]["name"], "Orders (YAML)");
    assert_eq!(lines(&yaml), pairs(&[("GET", "{{base_url}}/orders/42")]));
    assert_eq!(request(&yaml, "Get order")["headers"]["Authorization"], "Bearer {{token}}");
    assert_eq!(yaml["collection"]["variables"]["base_url"], "https://orders.example.com");
}

/// Serves `files` on a loopback port; answers its base URL.
async fn serve(files: Vec<(&'static str, String)>) -> String {
    let mut router = axum::Router::new();
    for (path, text) in files {
        router = router.route(path, axum::routing::get(move || async move { text }));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    base
}

#[tokio::test]
async fn curl_lines_import_with_data_forms_headers_and_users() {
    let app = TestApp::spawn_with(|settings| settings.allow_private_targets = true).await;
    let big = format!("curl https://a.example/ -d '{}'", "x".repeat(10 * 1024 * 1024));
    let base = serve(vec![("/shop.curl.txt", fixture("shop.curl.txt")), ("/big.txt", big)]).await;
    let too_big = app.admin(Method::POST, IMPORT, Some(json!({"source": {"url": format!("{base}/big.txt")}}))).await;
    assert_eq!((too_big.status.as_u16(), too_big.code()), (400, "invalid_request"));
    assert!(error(&too_big).contains("source.url"), "{}", error(&too_big));
    let url = format!("{base}/shop.curl.txt");
    let answer = import(&app, json!({"name": "From curl", "source": {"url": url}})).await;
    assert_eq!(
        lines(&answer),
        pairs(&[
            ("POST", "https://shop.example.com/api/login"),
            ("POST", "https://shop.example.com/api/users"),
            ("GET", "https://shop.example.com/api/search?q=coffee%20%26%20tea"),
            ("POST", "https://shop.example.com/api/users/7/avatar"),
            ("DELETE", "https://shop.example.com/api/users/7"),
        ])
    );
    let requests = answer["collection"]["requests"].as_array().expect("requests");
    assert_eq!(requests[0]["body"], "{\"user\":\"ada\",\"password\":\"pw\"}");
    assert_eq!(requests[0]["headers"], json!({"Content-Type": "application/json"}));
    assert_eq!(requests[1]["body"], "name=Grace&role=admin");
    assert_eq!(
        requests[1]["headers"],
        json!({"Authorization": "Basic YWRtaW46czNjcmV0", "Content-Type": "application/x-www-form-urlencoded"})
    );
    assert_eq!(requests[2]["body"], Value::Null);
    let upload = requests[3]["body"].as_str().expect("multipart");
    assert!(upload.contains("name=\"avatar\"; filename=\"avatar.png\"\r\nContent-Type: image/png\r\n"), "{upload}");
    assert!(upload.contains("name=\"caption\"\r\n\r\nMe\r\n"), "{upload}");
    assert_eq!(requests[3]["headers"]["X-API-Key"], "k-123");
    assert_eq!(requests[4]["headers"], json!({"Accept": "application/json"}));
    assert_eq!(answer["collection"]["name"], "From curl");
    let warnings = answer["report"]["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "only the file part is warned about: {warnings:?}");
}

#[tokio::test]
async fn the_swagger_2_petstore_gives_the_operations_of_its_3_0_form() {
    let app = TestApp::spawn().await;
    let v2 = import(&app, json!({"source": {"document": fixture("petstore-swagger-2.0.yaml")}, "name": "v2"})).await;
    let v3 = crate::collections::data("petstore-3.0.yaml");
    let v3 = import(&app, json!({"format": "openapi", "source": {"document": v3}, "name": "v3"})).await;
    let shape = |answer: &Value| -> Vec<Value> {
        answer["collection"]["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                json!([
                    r["name"],
                    r["folder"],
                    r["method"],
                    r["url"],
                    r["headers"],
                    r["query"],
                    r["body"],
                    r["operation_key"]
                ])
            })
            .collect()
    };
    assert_eq!(shape(&v2).len(), 3);
    assert_eq!(shape(&v2), shape(&v3));
    assert_eq!(v2["collection"]["variables"], v3["collection"]["variables"]);
    assert_eq!(v2["collection"]["variables"]["base_url"], "http://petstore.swagger.io/v1");
    // The OpenAPI import through this route is kept in sync as `/collections/import/openapi` keeps it.
    let id = v3["collection"]["id"].as_str().expect("id");
    let sync = app.admin(Method::GET, &format!("/collections/{id}/openapi-sync"), None).await;
    assert_eq!(sync.body["status"], "synced", "{}", sync.text);
}

#[tokio::test]
async fn a_har_becomes_a_flow_whose_run_sends_the_same_requests_in_order() {
    let app = TestApp::spawn_with_embedded_runner().await;
    let receiver = Receiver::spawn(200).await;
    let har = fixture("shop.chromium.har").replace("https://shop.example.com", &receiver.base);
    let answer = import(&app, json!({"source": {"document": har}, "flow": {"name": "Checkout replay"}})).await;
    assert_eq!(answer["collection"]["name"], format!("{}/cart", receiver.base));
    let requests = answer["collection"]["requests"].as_array().expect("requests");
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0]["name"], "GET /api/products");
    assert!(requests.iter().all(|r| r["headers"].as_object().unwrap().keys().all(|k| !k.starts_with(':'))));
    let flow = answer["flow"]["id"].as_str().expect("a flow id");
    assert_eq!(answer["flow"]["name"], "Checkout replay");
    let execution = app.launch(flow, json!({})).await;
    let finished = app.wait_finished(flow, execution["id"].as_str().expect("id")).await;
    assert_eq!(finished["status"], "succeeded", "{finished}");
    let arrivals = receiver.arrivals();
    let seen: Vec<(&str, &str, &[u8])> =
        arrivals.iter().map(|a| (a.method.as_str(), a.uri.as_str(), a.body.as_ref())).collect();
    assert_eq!(
        seen,
        [
            ("GET", "/api/products?page=1&sort=price", b"".as_slice()),
            ("POST", "/api/cart/items", b"{\"sku\":\"mug-1\",\"quantity\":2}".as_slice()),
            ("POST", "/api/checkout", b"cart=c-77&coupon=WINTER+10&gift=0".as_slice()),
        ]
    );
    for arrival in &arrivals {
        assert_eq!(arrival.header("x-shop-session"), Some("s-81f2"), "{}", arrival.uri);
    }
    assert_eq!(arrivals[0].header("accept-language"), Some("en-GB,en;q=0.9"));
    assert_eq!(arrivals[1].header("content-type"), Some("application/json"));
    assert_eq!(arrivals[2].header("content-type"), Some("application/x-www-form-urlencoded; charset=UTF-8"));
}

fn error(reply: &Reply) -> String {
    reply.body["error"]["message"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn bad_documents_scopes_previews_and_other_organizations() {
    let app = TestApp::spawn().await;
    let oversize = format!("{{\"log\": {{\"entries\": []}}, \"pad\": \"{}\"}}", "x".repeat(10 * 1024 * 1024));
    let many = (0..5_001).map(|i| format!("curl https://a.example/{i}")).collect::<Vec<_>>().join("\n");
    let bomb = {
        let mut text =
            format!("_type: export\n__export_format: 4\nanchor: &a \"{}\"\nresources:\n", "x".repeat(25_000));
        text.push_str(&"  - *a\n".repeat(3_000));
        text
    };
    let cases = [
        (json!({"format": "word", "source": {"document": "{}"}}), "format"),
        (json!({"source": {"document": "{\"hello\": 1}"}}), "could not be detected"),
        (json!({"format": "postman", "source": {"document": "{\"info\": "}}), "not valid JSON"),
        (json!({"format": "postman", "source": {"document": "{\"info\": {}}"}}), "`item`"),
        (json!({"source": {"document": "curl 'https://a.example/x"}}), "unclosed quote"),
        (json!({"format": "curl", "source": {"document": "wget https://a.example"}}), "`curl`"),
        (json!({"format": "har", "source": {"document": "{\"log\": {}}"}}), "log.entries"),
        (json!({"source": {"document": many}}), "5000 requests"),
        (json!({"source": {"document": bomb}}), "bytes of text"),
        (json!({"source": {"document": "swagger: '2.0'\ninfo: {title: t}\npaths: {}\n"}}), "after conversion"),
        (json!({"source": {"document": fixture("shop.curl.txt")}, "flow_id": uuid::Uuid::now_v7()}), "flow_id"),
        (json!({"source": {"url": "http://10.1.2.3/collection.json"}}), "private"),
        (json!({"source": {}}), "exactly one"),
    ];
    let mut conn = app.pool.acquire().await.expect("connection");
    hookflow_control_plane::api::admin::organization::set_private_network(&mut conn, app.admin.org, false)
        .await
        .expect("deny");
    for (body, expected) in cases {
        let shown: String = body.to_string().chars().take(120).collect();
        for path in [IMPORT, PREVIEW] {
            let reply = app.admin(Method::POST, path, Some(body.clone())).await;
            assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{shown}: {}", reply.text);
            assert!(error(&reply).contains(expected), "{shown}: expected {expected:?} in {:?}", error(&reply));
        }
    }

    // A document past 10 MiB does not get in (the body limit answers before the field rule).
    let reply = app.admin(Method::POST, IMPORT, Some(json!({"source": {"document": oversize}}))).await;
    assert_eq!(reply.status, 413, "{}", error(&reply));

    // A preview answers what an import stores, and stores nothing.
    // (Text bodies only: `multipart` nodes need #54's request-node half.)
    let curl = "curl https://a.example/one -H 'Accept: text/plain'\ncurl -X PUT https://a.example/two -d a=1\n";
    let body = json!({"source": {"document": curl}, "flow": {"name": "curl flow"}});
    let preview = app.admin(Method::POST, PREVIEW, Some(body.clone())).await;
    assert_eq!(preview.status, 200, "{}", preview.text);
    assert_eq!(preview.body["flow"]["id"], Value::Null);
    assert_eq!(preview.body["flow"]["definition"]["nodes"].as_array().map(Vec::len), Some(2));
    assert_eq!(app.admin(Method::GET, "/collections", None).await.body["items"], json!([]));
    assert_eq!(app.admin(Method::GET, "/flows", None).await.body["items"], json!([]));
    let stored = import(&app, body.clone()).await;
    assert_eq!(lines(&stored), lines(&preview.body));
    assert_eq!(stored["report"], preview.body["report"]);
    let flow = stored["flow"]["id"].as_str().expect("a flow");
    let read = app.admin(Method::GET, &format!("/flows/{flow}"), None).await;
    assert_eq!(read.body["definition"]["nodes"], preview.body["flow"]["definition"]["nodes"]);
    let again = app.admin(Method::POST, IMPORT, Some(body.clone())).await;
    assert_eq!(again.status, 409, "a taken collection name: {}", again.text);

    // Scopes: collections:write for any import, flows:write for a flow.
    let reader = scoped(&app, app.admin.org, &["collections:read", "flows:write"]).await;
    let plain = json!({"name": "x", "source": {"document": "curl https://a.example/"}});
    for path in [IMPORT, PREVIEW] {
        let reply = app.call(Method::POST, path, Some(&reader), Some(plain.clone())).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (403, "insufficient_scope"), "{path}");
    }
    let writer = scoped(&app, app.admin.org, &["collections:write"]).await;
    let reply = app.call(Method::POST, IMPORT, Some(&writer), Some(plain.clone())).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let with_flow = json!({"name": "y", "source": {"document": "curl https://a.example/"}, "flow": {"name": "y"}});
    let reply = app.call(Method::POST, IMPORT, Some(&writer), Some(with_flow)).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (403, "insufficient_scope"));
    assert_eq!(app.call(Method::POST, IMPORT, None, Some(plain)).await.status, 401);

    // Another organization sees none of it.
    let other = app.new_org("Other").await;
    let id = stored["collection"]["id"].as_str().expect("id");
    let reply = app.call(Method::GET, &format!("/collections/{id}"), Some(&other), None).await;
    assert_eq!(reply.status, 404);
    let reply = app.call(Method::GET, &format!("/flows/{flow}"), Some(&other), None).await;
    assert_eq!(reply.status, 404);
}

/// Regression (review of #54): a Swagger 2.0 conversion copied a response schema once per `produces` media type,
/// unbounded: 10,000 media types over a 200,000-property schema asked for billions of values. Now the media types
/// read are capped and the copies counted: the document is refused with a 400, and the server still answers.
#[tokio::test]
async fn a_swagger_2_document_whose_conversion_would_multiply_its_schemas_is_refused() {
    let app = TestApp::spawn().await;
    let properties: serde_json::Map<String, Value> =
        (0..200_000).map(|i| (format!("p{i}"), json!({"type": "string"}))).collect();
    let produces: Vec<String> = (0..10_000).map(|i| format!("application/x-{i}+json")).collect();
    let document = json!({
        "swagger": "2.0", "info": {"title": "bomb", "version": "1"}, "produces": produces,
        "paths": {"/a": {"get": {"responses": {"200": {"description": "ok",
            "schema": {"type": "object", "properties": properties}}}}}}
    });
    let body = json!({"format": "swagger2", "source": {"document": document.to_string()}});
    let refused = app.admin(Method::POST, PREVIEW, Some(body)).await;
    assert_eq!(refused.status, 400, "{}", refused.text.chars().take(300).collect::<String>());
    assert!(refused.text.contains("too large to convert"), "{}", refused.text);
    let alive = app.admin(Method::GET, "/collections", None).await;
    assert_eq!(alive.status, 200, "{}", alive.text);
}
