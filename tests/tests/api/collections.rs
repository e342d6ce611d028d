//! Collections over the real server: CRUD of collections and requests with scopes and isolation, OpenAPI import of
//! the shipped public descriptions (3.0 petstore, 3.1 Scalar Galaxy with webhooks and `$ref` cycles, the Stripe API
//! with hundreds of operations), import from a URL, and clear 400s for bad documents and forbidden URLs.

use axum::Router;
use axum::routing::get;
use hookflow_shared::api::Patch;
use hookflow_shared::api::collections::{
    CollectionDetail, CollectionRequest, ImportOpenApi, ImportedCollection, OpenApiSource, PatchCollection,
    PutOpenApiSync, WriteCollection, WriteRequest,
};
use hookflow_tests::exec::scoped;
use hookflow_tests::{Credentials, TestApp};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Instant;

pub fn data(name: &str) -> String {
    let path = format!("{}/data/openapi/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Imports a description given as its JSON body (read as the wire type first); answers the import as JSON.
pub async fn import(app: &TestApp, body: Value) -> Value {
    let body: ImportOpenApi = serde_json::from_value(body).expect("an import body");
    serde_json::to_value(import_typed(app, &body).await).expect("json")
}

async fn import_typed(app: &TestApp, body: &ImportOpenApi) -> ImportedCollection {
    app.api().collections().import_openapi(body).await.expect("import")
}

fn document(name: &str) -> ImportOpenApi {
    ImportOpenApi { name: None, source: OpenApiSource { url: None, document: Some(data(name)) } }
}

fn request<'a>(collection: &'a CollectionDetail, name: &str) -> &'a CollectionRequest {
    let requests = &collection.requests;
    requests.iter().find(|r| r.name == name).unwrap_or_else(|| panic!("no request {name} in {requests:?}"))
}

fn write_request(name: &str, method: &str, url: &str) -> WriteRequest {
    WriteRequest { name: name.into(), method: method.into(), url: url.into(), ..Default::default() }
}

/// One scenario told in order, each step depending on the one before: it reads best whole.
#[tokio::test]
async fn collections_and_requests_have_crud_scopes_and_isolation() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let variables = BTreeMap::from([("base_url".to_owned(), "https://api.example.com".to_owned())]);
    let orders = WriteCollection {
        variables: variables.try_into().expect("variables"),
        ..WriteCollection::new("Orders API".parse().expect("a name"))
    };
    let created = api.collections().create(&orders).await.expect("create");
    let id = created.collection.id.to_string();
    assert_eq!((created.collection.request_count, created.requests.len()), (0, 0));
    let twice = WriteCollection::new("Orders API".parse().expect("a name"));
    let twice = api.collections().create(&twice).await.expect_err("a taken name");
    assert_eq!((twice.status(), twice.code()), (409, "conflict"));
    let unknown = app.admin(Method::POST, "/collections", Some(json!({"name": "x", "colour": "red"}))).await;
    assert_eq!((unknown.status.as_u16(), unknown.code()), (400, "invalid_request"));

    let requests = format!("/collections/{id}/requests");
    let body = WriteRequest {
        folder: Some("orders".into()),
        headers: [("accept".to_owned(), "application/json".to_owned())].into(),
        query: [("limit".to_owned(), "10".to_owned())].into(),
        ..write_request("List orders", "get", "{{base_url}}/orders")
    };
    let first = api.collections().add_request(&id, &body).await.expect("add");
    assert_eq!(first.method, "GET");
    let second = WriteRequest {
        body: Some("{\"sku\": \"{{sku}}\"}".into()),
        ..write_request("Create order", "POST", "{{base_url}}/orders")
    };
    api.collections().add_request(&id, &second).await.expect("add");
    for bad in [
        json!({"name": "x", "method": "BREW", "url": "/"}),
        json!({"name": "x", "method": "GET", "url": ""}),
        json!({"name": "x", "method": "GET", "url": "{{base_url"}),
        json!({"name": "", "method": "GET", "url": "/"}),
    ] {
        let reply = app.admin(Method::POST, &requests, Some(bad.clone())).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{bad}");
    }
    let page = api.collections().requests(&id, &[("limit", "1")]).await.expect("a page");
    assert_eq!(page.items[0].name, "List orders");
    let cursor = page.next_cursor.as_deref().expect("a second page");
    let next = api.collections().requests(&id, &[("limit", "1"), ("cursor", cursor)]).await.expect("a page");
    assert_eq!((next.items[0].name.as_str(), next.next_cursor), ("Create order", None));

    let detail = api.collections().get(&id).await.expect("detail");
    let folders: Vec<(&str, i64)> = detail.folders.iter().map(|f| (f.name.as_str(), f.request_count)).collect();
    assert_eq!(folders, [("orders", 1)]);
    assert_eq!(detail.collection.request_count, 2);
    let request_id = first.id;
    let one = format!("{requests}/{request_id}");
    let replacement = write_request("List all orders", "GET", "{{base_url}}/v2/orders");
    let replaced = api.collections().put_request(&id, request_id, &replacement).await.expect("replace");
    assert_eq!(replaced.url, "{{base_url}}/v2/orders");
    assert_eq!(replaced.folder, None, "PUT replaces the whole request");
    let patch = PatchCollection {
        name: Some("Orders".parse().expect("a name")),
        description: Patch::Set("v2".parse().expect("a text")),
        ..Default::default()
    };
    let patched = api.collections().patch(&id, &patch).await.expect("patch").collection;
    assert_eq!((patched.name.as_str(), patched.description.as_deref()), ("Orders", Some("v2")));
    assert_eq!(patched.variables["base_url"], "https://api.example.com", "variables stay when not named");
    let listed = api.collections().list(&[]).await.expect("list");
    assert_eq!(listed.items[0].name, "Orders");

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
    assert!(app.api_as(&other).collections().list(&[]).await.expect("list").items.is_empty());
    let reader = app.api_as(&scoped(&app, app.admin.org, &["collections:read"]).await);
    reader.collections().get_request(&id, request_id).await.expect("collections:read reads");
    let denied = reader.collections().delete_request(&id, request_id).await.expect_err("read only");
    assert_eq!((denied.status(), denied.code()), (403, "insufficient_scope"));
    let flows_only = app.api_as(&scoped(&app, app.admin.org, &["flows:read"]).await);
    assert_eq!(flows_only.collections().list(&[]).await.expect_err("no collections scope").status(), 403);
    let anonymous = app.api_with(Credentials::None);
    assert_eq!(anonymous.collections().list(&[]).await.expect_err("anonymous").status(), 401);

    api.collections().delete_request(&id, request_id).await.expect("delete");
    assert_eq!(api.collections().get_request(&id, request_id).await.expect_err("gone").status(), 404);
    api.collections().delete(&id).await.expect("delete");
    assert_eq!(api.collections().requests(&id, &[]).await.expect_err("gone").status(), 404);
}

#[tokio::test]
async fn the_petstore_imports_with_folders_names_urls_and_parameters() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let imported = import_typed(&app, &document("petstore-3.0.yaml")).await;
    assert_eq!((imported.summary.requests, imported.summary.folders), (3, 1));
    let collection = &imported.collection;
    assert_eq!(collection.collection.name, "Swagger Petstore");
    assert_eq!(collection.collection.variables["base_url"], "http://petstore.swagger.io/v1");
    let folders: Vec<(&str, i64)> = collection.folders.iter().map(|f| (f.name.as_str(), f.request_count)).collect();
    assert_eq!(folders, [("pets", 3)]);
    let list = request(collection, "List all pets");
    assert_eq!((list.method.as_str(), list.url.as_str()), ("GET", "{{base_url}}/pets"));
    assert_eq!(list.operation_key.as_deref(), Some("GET /pets"));
    assert!(list.query.is_empty(), "an optional parameter without example is left out");
    let show = request(collection, "Info for a specific pet");
    assert_eq!(
        (show.url.as_str(), show.operation_key.as_deref()),
        ("{{base_url}}/pets/{{petId}}", Some("GET /pets/{}"))
    );
    assert_eq!(request(collection, "Create a pet").method, "POST");
    let id = collection.collection.id;
    let sync = api.collections().get_sync(id).await.expect("sync");
    assert_eq!((sync.status.as_str(), sync.history.len()), ("synced", 1));
    assert_eq!(sync.document_sha256.as_deref().map(str::len), Some(64));
    let resync = api.collections().apply_sync(id).await.expect("resync");
    assert_eq!(resync.diff.unchanged.len(), 3, "{resync:?}");
    assert_eq!(Some(resync.diff.document_sha256), sync.document_sha256);
}

#[tokio::test]
async fn galaxy_3_1_imports_with_webhooks_cycles_bodies_and_security() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let galaxy = ImportOpenApi { name: Some("Galaxy".parse().expect("a name")), ..document("scalar-galaxy-3.1.yaml") };
    let imported = import_typed(&app, &galaxy).await;
    let (summary, collection) = (&imported.summary, &imported.collection);
    assert_eq!(summary.requests, 10, "{summary:?}");
    assert_eq!(summary.folders, 3);
    let warnings = summary.warnings.join("\n");
    assert!(warnings.contains("newPlanet") && warnings.contains("webhook"), "{warnings}");
    assert!(warnings.contains("multipart/form-data"), "{warnings}");
    assert_eq!(collection.collection.variables["base_url"], "https://galaxy.scalar.com");
    let create = request(collection, "Create a planet");
    assert_eq!(create.headers["content-type"], "application/json");
    let body: Value = serde_json::from_str(create.body.as_deref().expect("body")).expect("a JSON body");
    assert!(body["name"].is_string(), "the body comes from the (cyclic) Planet schema or its example: {body}");
    assert_eq!(create.headers["authorization"], "Bearer {{token}}", "the first global requirement");
    assert_eq!(request(collection, "Get authenticated user").headers["authorization"], "Basic {{basic_auth}}");
    let public = request(collection, "Get all planets");
    assert!(!public.headers.contains_key("authorization"), "`security: []` means none");
    assert_eq!(public.folder.as_deref(), Some("Planets"));
    assert_eq!(request(collection, "Get a planet").url, "{{base_url}}/planets/{{planetId}}");

    // A new summary in the description: the preview names it, the apply renames the (unedited) request.
    let id = collection.collection.id;
    let edited = data("scalar-galaxy-3.1.yaml").replace("summary: Get all planets", "summary: List every planet");
    let source = PutOpenApiSync { source: OpenApiSource { url: None, document: Some(edited) }, delete_removed: false };
    api.collections().put_sync(id, &source).await.expect("put the sync");
    let preview = api.collections().preview_sync(id).await.expect("preview");
    assert_eq!(
        serde_json::to_value(&preview.modified).expect("json"),
        json!([{"operation_key": "GET /planets", "name": "Get all planets",
        "request_id": public.id, "changes": ["summary"]}])
    );
    assert_eq!(preview.unchanged.len(), 9);
    api.collections().apply_sync(id).await.expect("apply");
    let after = api.collections().get(id).await.expect("detail");
    assert_eq!(request(&after, "List every planet").id, public.id);
}

#[tokio::test]
async fn the_stripe_api_imports_hundreds_of_operations_and_resyncs_unchanged() {
    let app = TestApp::spawn().await;
    let started = Instant::now();
    let imported = import_typed(&app, &document("stripe-3.0.yaml")).await;
    let elapsed = started.elapsed();
    let count = imported.summary.requests;
    println!("stripe-3.0.yaml: {count} operations imported in {} ms", elapsed.as_millis());
    assert!(count > 250, "{count}");
    let collection = &imported.collection;
    assert_eq!(collection.collection.variables["base_url"], "https://api.stripe.com");
    let create = collection
        .requests
        .iter()
        .find(|r| r.operation_key.as_deref() == Some("POST /v1/customers"))
        .expect("POST /v1/customers");
    assert_eq!(create.headers["content-type"], "application/x-www-form-urlencoded");
    assert_eq!(create.headers["authorization"], "Basic {{basic_auth}}");
    let preview = app.api().collections().preview_sync(collection.collection.id).await.expect("preview");
    for (name, list) in [("added", &preview.added), ("modified", &preview.modified), ("removed", &preview.removed)] {
        assert!(list.is_empty(), "{name}: {list:?}");
    }
    assert_eq!(preview.unchanged.len(), count);
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
    let missing =
        ImportOpenApi { name: None, source: OpenApiSource { url: Some(format!("{base}/nope.yaml")), document: None } };
    let missing = app.api().collections().import_openapi(&missing).await.expect_err("no such document");
    assert_eq!(missing.status(), 400);
    assert!(missing.message().contains("404"), "{missing}");
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
    assert!(app.api().collections().list(&[]).await.expect("list").items.is_empty(), "nothing was stored");
    let writer_only = scoped(&app, app.admin.org, &["collections:read"]).await;
    let denied = app.call(Method::POST, path, Some(&writer_only), Some(json!({"source": {"document": "{}"}}))).await;
    assert_eq!(denied.status, 403);
}
