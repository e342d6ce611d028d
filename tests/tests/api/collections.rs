//! Collections over the real server: CRUD of collections and requests with scopes and isolation, OpenAPI import of
//! the shipped public descriptions (3.0 petstore, 3.1 Scalar Galaxy with webhooks and `$ref` cycles, the Stripe API
//! with hundreds of operations), import from a URL, and clear 400s for bad documents and forbidden URLs.

use axum::Router;
use axum::routing::get;
use hookflow_tests::TestApp;
use hookflow_tests::exec::scoped;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Instant;

pub fn data(name: &str) -> String {
    let path = format!("{}/data/openapi/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub async fn import(app: &TestApp, body: Value) -> Value {
    let reply = app.admin(Method::POST, "/collections/import/openapi", Some(body)).await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.body
}

fn request<'a>(collection: &'a Value, name: &str) -> &'a Value {
    let requests = collection["requests"].as_array().expect("requests");
    requests.iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("no request {name} in {requests:?}"))
}

/// One scenario told in order, each step depending on the one before: it reads best whole.
#[tokio::test]
async fn collections_and_requests_have_crud_scopes_and_isolation() {
    let app = TestApp::spawn().await;
    let created = app
        .admin(
            Method::POST,
            "/collections",
            Some(json!({"name": "Orders API", "variables": {"base_url": "https://api.example.com"}})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.body["id"].as_str().expect("id").to_owned();
    assert_eq!(
        (created.body["request_count"].as_i64(), created.body["requests"].as_array().map(Vec::len)),
        (Some(0), Some(0))
    );
    let twice = app.admin(Method::POST, "/collections", Some(json!({"name": "Orders API"}))).await;
    assert_eq!((twice.status.as_u16(), twice.code()), (409, "conflict"));
    let unknown = app.admin(Method::POST, "/collections", Some(json!({"name": "x", "colour": "red"}))).await;
    assert_eq!((unknown.status.as_u16(), unknown.code()), (400, "invalid_request"));

    let requests = format!("/collections/{id}/requests");
    let body = json!({"name": "List orders", "folder": "orders", "method": "get", "url": "{{base_url}}/orders",
        "headers": {"accept": "application/json"}, "query": {"limit": "10"}});
    let first = app.admin(Method::POST, &requests, Some(body)).await;
    assert_eq!(first.status, 201, "{}", first.text);
    assert_eq!(first.body["method"], "GET");
    let second = app
        .admin(
            Method::POST,
            &requests,
            Some(json!({"name": "Create order", "method": "POST", "url": "{{base_url}}/orders",
            "body": "{\"sku\": \"{{sku}}\"}"})),
        )
        .await;
    assert_eq!(second.status, 201, "{}", second.text);
    for bad in [
        json!({"name": "x", "method": "BREW", "url": "/"}),
        json!({"name": "x", "method": "GET", "url": ""}),
        json!({"name": "x", "method": "GET", "url": "{{base_url"}),
        json!({"name": "", "method": "GET", "url": "/"}),
    ] {
        let reply = app.admin(Method::POST, &requests, Some(bad.clone())).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{bad}");
    }
    let page = app.admin(Method::GET, &format!("{requests}?limit=1"), None).await;
    assert_eq!(page.body["items"][0]["name"], "List orders");
    let cursor = page.body["next_cursor"].as_str().expect("a second page");
    let next = app.admin(Method::GET, &format!("{requests}?limit=1&cursor={cursor}"), None).await;
    assert_eq!(
        (next.body["items"][0]["name"].as_str(), next.body["next_cursor"].as_str()),
        (Some("Create order"), None)
    );

    let detail = app.admin(Method::GET, &format!("/collections/{id}"), None).await.body;
    assert_eq!(detail["folders"], json!([{"name": "orders", "request_count": 1}]));
    assert_eq!(detail["request_count"], 2);
    let request_id = first.body["id"].as_str().expect("request id");
    let one = format!("{requests}/{request_id}");
    let replaced = app
        .admin(
            Method::PUT,
            &one,
            Some(json!({"name": "List all orders", "method": "GET", "url": "{{base_url}}/v2/orders"})),
        )
        .await;
    assert_eq!((replaced.status.as_u16(), replaced.body["url"].as_str()), (200, Some("{{base_url}}/v2/orders")));
    assert_eq!(replaced.body["folder"], Value::Null, "PUT replaces the whole request");
    let patched = app
        .admin(Method::PATCH, &format!("/collections/{id}"), Some(json!({"name": "Orders", "description": "v2"})))
        .await;
    assert_eq!((patched.body["name"].as_str(), patched.body["description"].as_str()), (Some("Orders"), Some("v2")));
    assert_eq!(patched.body["variables"]["base_url"], "https://api.example.com", "variables stay when not named");
    let listed = app.admin(Method::GET, "/collections", None).await;
    assert_eq!(listed.body["items"][0]["name"], "Orders");

    // Another organization sees none of it; scopes gate reads and writes.
    let other = app.new_org("Other").await;
    for (method, path) in [
        (Method::GET, format!("/collections/{id}")),
        (Method::PATCH, format!("/collections/{id}")),
        (Method::DELETE, format!("/collections/{id}")),
        (Method::GET, requests.clone()),
        (Method::POST, requests.clone()),
        (Method::GET, one.clone()),
        (Method::PUT, one.clone()),
        (Method::DELETE, one.clone()),
        (Method::GET, format!("/collections/{id}/openapi-sync")),
        (Method::POST, format!("/collections/{id}/openapi-sync/preview")),
    ] {
        let body = match method {
            Method::PATCH => Some(json!({"name": "x"})),
            Method::POST | Method::PUT if !path.ends_with("preview") => {
                Some(json!({"name": "x", "method": "GET", "url": "/"}))
            }
            _ => None,
        };
        let reply = app.call(method.clone(), &path, Some(&other), body).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (404, "not_found"), "{method} {path}: {}", reply.text);
    }
    assert!(
        app.call(Method::GET, "/collections", Some(&other), None).await.body["items"]
            .as_array()
            .expect("items")
            .is_empty()
    );
    let reader = scoped(&app, app.admin.org, &["collections:read"]).await;
    assert_eq!(app.call(Method::GET, &one, Some(&reader), None).await.status, 200);
    let denied = app.call(Method::DELETE, &one, Some(&reader), None).await;
    assert_eq!((denied.status.as_u16(), denied.code()), (403, "insufficient_scope"));
    let flows_only = scoped(&app, app.admin.org, &["flows:read"]).await;
    assert_eq!(app.call(Method::GET, "/collections", Some(&flows_only), None).await.status, 403);
    assert_eq!(app.call(Method::GET, "/collections", None, None).await.status, 401);

    assert_eq!(app.admin(Method::DELETE, &one, None).await.status, 204);
    assert_eq!(app.admin(Method::GET, &one, None).await.status, 404);
    assert_eq!(app.admin(Method::DELETE, &format!("/collections/{id}"), None).await.status, 204);
    assert_eq!(app.admin(Method::GET, &requests, None).await.status, 404);
}

#[tokio::test]
async fn the_petstore_imports_with_folders_names_urls_and_parameters() {
    let app = TestApp::spawn().await;
    let imported = import(&app, json!({"source": {"document": data("petstore-3.0.yaml")}})).await;
    assert_eq!(imported["summary"]["requests"], 3);
    assert_eq!(imported["summary"]["folders"], 1);
    let collection = &imported["collection"];
    assert_eq!(collection["name"], "Swagger Petstore");
    assert_eq!(collection["variables"]["base_url"], "http://petstore.swagger.io/v1");
    assert_eq!(collection["folders"], json!([{"name": "pets", "request_count": 3}]));
    let list = request(collection, "List all pets");
    assert_eq!((list["method"].as_str(), list["url"].as_str()), (Some("GET"), Some("{{base_url}}/pets")));
    assert_eq!(list["operation_key"], "GET /pets");
    assert_eq!(list["query"], json!({}), "an optional parameter without example is left out");
    let show = request(collection, "Info for a specific pet");
    assert_eq!(
        (show["url"].as_str(), show["operation_key"].as_str()),
        (Some("{{base_url}}/pets/{{petId}}"), Some("GET /pets/{}"))
    );
    assert_eq!(request(collection, "Create a pet")["method"], "POST");
    let sync = app
        .admin(Method::GET, &format!("/collections/{}/openapi-sync", collection["id"].as_str().expect("id")), None)
        .await;
    assert_eq!(
        (sync.body["status"].as_str(), sync.body["history"].as_array().map(Vec::len)),
        (Some("synced"), Some(1))
    );
    assert_eq!(sync.body["document_sha256"].as_str().map(str::len), Some(64));
    let id = collection["id"].as_str().expect("id");
    let resync = app.admin(Method::POST, &format!("/collections/{id}/openapi-sync"), None).await;
    assert_eq!(resync.status, 200, "{}", resync.text);
    assert_eq!(resync.body["unchanged"].as_array().map(Vec::len), Some(3), "{}", resync.text);
    assert_eq!(resync.body["document_sha256"], sync.body["document_sha256"]);
}

#[tokio::test]
async fn galaxy_3_1_imports_with_webhooks_cycles_bodies_and_security() {
    let app = TestApp::spawn().await;
    let imported =
        import(&app, json!({"name": "Galaxy", "source": {"document": data("scalar-galaxy-3.1.yaml")}})).await;
    let (summary, collection) = (&imported["summary"], &imported["collection"]);
    assert_eq!(summary["requests"], 10, "{summary}");
    assert_eq!(summary["folders"], 3);
    let warnings = summary["warnings"].to_string();
    assert!(warnings.contains("newPlanet") && warnings.contains("webhook"), "{warnings}");
    assert!(warnings.contains("multipart/form-data"), "{warnings}");
    assert_eq!(collection["variables"]["base_url"], "https://galaxy.scalar.com");
    let create = request(collection, "Create a planet");
    assert_eq!(create["headers"]["content-type"], "application/json");
    let body: Value = serde_json::from_str(create["body"].as_str().expect("body")).expect("a JSON body");
    assert!(body["name"].is_string(), "the body comes from the (cyclic) Planet schema or its example: {body}");
    assert_eq!(create["headers"]["authorization"], "Bearer {{token}}", "the first global requirement");
    assert_eq!(request(collection, "Get authenticated user")["headers"]["authorization"], "Basic {{basic_auth}}");
    let public = request(collection, "Get all planets");
    assert!(public["headers"].get("authorization").is_none(), "`security: []` means none");
    assert_eq!(public["folder"], "Planets");
    assert_eq!(request(collection, "Get a planet")["url"], "{{base_url}}/planets/{{planetId}}");

    // A new summary in the description: the preview names it, the apply renames the (unedited) request.
    let id = collection["id"].as_str().expect("id");
    let edited = data("scalar-galaxy-3.1.yaml").replace("summary: Get all planets", "summary: List every planet");
    let sync = format!("/collections/{id}/openapi-sync");
    assert_eq!(app.admin(Method::PUT, &sync, Some(json!({"source": {"document": edited}}))).await.status, 200);
    let preview = app.admin(Method::POST, &format!("{sync}/preview"), None).await.body;
    assert_eq!(
        preview["modified"],
        json!([{"operation_key": "GET /planets", "name": "Get all planets",
        "request_id": public["id"], "changes": ["summary"]}])
    );
    assert_eq!(preview["unchanged"].as_array().map(Vec::len), Some(9));
    assert_eq!(app.admin(Method::POST, &sync, None).await.status, 200);
    let after = app.admin(Method::GET, &format!("/collections/{id}"), None).await.body;
    assert_eq!(request(&after, "List every planet")["id"], public["id"]);
}

#[tokio::test]
async fn the_stripe_api_imports_hundreds_of_operations_and_resyncs_unchanged() {
    let app = TestApp::spawn().await;
    let started = Instant::now();
    let imported = import(&app, json!({"source": {"document": data("stripe-3.0.yaml")}})).await;
    let elapsed = started.elapsed();
    let count = imported["summary"]["requests"].as_u64().expect("count");
    println!("stripe-3.0.yaml: {count} operations imported in {} ms", elapsed.as_millis());
    assert!(count > 250, "{count}");
    let collection = &imported["collection"];
    assert_eq!(collection["variables"]["base_url"], "https://api.stripe.com");
    let id = collection["id"].as_str().expect("id");
    let create = collection["requests"]
        .as_array()
        .expect("requests")
        .iter()
        .find(|r| r["operation_key"] == "POST /v1/customers")
        .expect("POST /v1/customers");
    assert_eq!(create["headers"]["content-type"], "application/x-www-form-urlencoded");
    assert_eq!(create["headers"]["authorization"], "Basic {{basic_auth}}");
    let preview = app.admin(Method::POST, &format!("/collections/{id}/openapi-sync/preview"), None).await;
    assert_eq!(preview.status, 200, "{}", preview.text);
    for list in ["added", "modified", "removed"] {
        assert_eq!(preview.body[list].as_array().map(Vec::len), Some(0), "{list}: {}", preview.body[list]);
    }
    assert_eq!(preview.body["unchanged"].as_array().map(Vec::len), Some(usize::try_from(count).expect("count")));
}

async fn serve(files: Vec<(&'static str, String)>) -> String {
    let mut router = Router::new();
    for (path, text) in files {
        router = router.route(path, get(move || async move { text }));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    base
}

#[tokio::test]
async fn descriptions_import_from_urls_and_relative_servers_resolve_against_them() {
    let app = TestApp::spawn_with(|settings| settings.allow_private_targets = true).await;
    let relative = "openapi: 3.0.3\ninfo: {title: Local, version: '1'}\nservers: [{url: /api/v2}]\npaths:\n  /ping:\n    get: {summary: Ping, responses: {'200': {description: ok}}}\n";
    let base =
        serve(vec![("/specs/petstore.yaml", data("petstore-3.0.yaml")), ("/specs/local.yaml", relative.to_owned())])
            .await;
    let imported = import(&app, json!({"source": {"url": format!("{base}/specs/petstore.yaml")}})).await;
    assert_eq!(imported["summary"]["requests"], 3);
    let local = import(&app, json!({"source": {"url": format!("{base}/specs/local.yaml")}})).await;
    assert_eq!(local["collection"]["variables"]["base_url"], format!("{base}/api/v2"));
    let missing = app
        .admin(
            Method::POST,
            "/collections/import/openapi",
            Some(json!({"source": {"url": format!("{base}/nope.yaml")}})),
        )
        .await;
    assert_eq!(missing.status, 400);
    assert!(missing.body["error"]["message"].as_str().expect("message").contains("404"), "{}", missing.text);
}

#[tokio::test]
async fn bad_documents_and_forbidden_urls_get_clear_400s() {
    let app = TestApp::spawn().await;
    // As any organization the operator did not allow private networks.
    let mut conn = app.pool.acquire().await.expect("connection");
    hookflow_control_plane::api::admin::organization::set_private_network(&mut conn, app.admin.org, false)
        .await
        .expect("deny");
    let path = "/collections/import/openapi";
    let cases = [
        (json!({"source": {"document": "openapi: 3.0.3\ninfo: [unclosed"}}), "line"),
        (json!({"source": {"document": "{\"openapi\": \"3.0.3\", \"info\": "}}), "not valid JSON"),
        (
            json!({"source": {"document": "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /x:\n    get:\n      responses: 12\n"}}),
            "paths./x.get.responses",
        ),
        (json!({"source": {"document": "openapi: 3.1.0\ninfo: {title: t}\npaths: {}\n"}}), "info"),
        (json!({"source": {"document": "swagger: '2.0'\ninfo: {title: t, version: '1'}\n"}}), "Swagger 2.0"),
        (json!({"source": {"document": "title: not openapi\n"}}), "`openapi`"),
        (json!({"source": {"url": "http://127.0.0.1:9/spec.yaml"}}), "loopback"),
        (json!({"source": {"url": "http://10.1.2.3/spec.yaml"}}), "private"),
        (json!({"source": {"url": "file:///etc/passwd"}}), "http"),
        (json!({"source": {"url": "https://a.example/x", "document": "{}"}}), "exactly one"),
        (json!({"source": {}}), "exactly one"),
    ];
    for (body, expected) in cases {
        let reply = app.admin(Method::POST, path, Some(body.clone())).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{body}: {}", reply.text);
        let message = reply.body["error"]["message"].as_str().expect("message");
        assert!(message.contains(expected), "{body}: expected {expected:?} in {message:?}");
    }
    let listed = app.admin(Method::GET, "/collections", None).await;
    assert!(listed.body["items"].as_array().expect("items").is_empty(), "nothing was stored");
    let writer_only = scoped(&app, app.admin.org, &["collections:read"]).await;
    let denied = app.call(Method::POST, path, Some(&writer_only), Some(json!({"source": {"document": "{}"}}))).await;
    assert_eq!(denied.status, 403);
}
