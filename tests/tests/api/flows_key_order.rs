//! Definitions keep the key order their author wrote, at every level (the definition, its nodes, requests,
//! headers, extractors and assertions), through every path a definition takes: create, replace, read, the
//! versions, restore, export and import, a launch's snapshot and the claim a runner gets. Each check reads the
//! raw answer text, never a parsed value: the definition written compactly must appear in it byte for byte.

use hookflow_shared::api::collections::{WriteCollection, WriteRequest};
use hookflow_tests::{Reply, TestApp};
use reqwest::Method;

/// A definition whose keys are out of alphabetical order at every level, written as serde_json prints it.
const DEFINITION: &str = concat!(
    r#"{"timeout_s":60,"variables":{"zeta":"z","alpha":"a"},"nodes":["#,
    r#"{"kind":"request","id":"login","name":"Log in","#,
    r#""request":{"url":"http://127.0.0.1:9/login","method":"POST","#,
    r#""headers":{"x-b":"2","content-type":"application/json","a-first":"1"},"query":{"z":"1","a":"2"},"#,
    r#""body":"{\"user\": \"u\"}"},"#,
    r#""extractors":[{"name":"token","kind":"jsonPath","expression":"$.token"},{"name":"status","kind":"statusCode"}],"#,
    r#""assertions":[{"source":"status","operator":"equals","expected":200},{"source":"token","operator":"exists"}],"#,
    r#""timeout_ms":1000,"retry":{"interval_ms":10,"count":0}},"#,
    r#"{"kind":"delay","id":"wait","delay_ms":1}]}"#
);

/// The same definition with its nodes in another order of keys: a replacement keeps its own.
const REPLACED: &str = r#"{"nodes":[{"id":"wait","delay_ms":2,"kind":"delay"}],"variables":{"b":"1","a":"2"}}"#;

/// Sends `body` (raw JSON text) as the admin key.
async fn raw(app: &TestApp, method: Method, path: &str, body: Option<String>) -> Reply {
    let mut request = app.api().request(method, path);
    if let Some(body) = body {
        request = request.header("content-type", "application/json").body(body);
    }
    hookflow_tests::app::read(request.send().await.expect("send")).await
}

/// Checks `reply` succeeded and holds `definition` byte for byte (`times` times at least).
fn holds(reply: &Reply, definition: &str, times: usize, what: &str) {
    assert!(reply.status.is_success(), "{what}: {} {}", reply.status, reply.text);
    let found = reply.text.matches(definition).count();
    assert!(found >= times, "{what}: the definition as written appears {found} times, not {times}:\n{}", reply.text);
}

/// The object keys of a JSON text in the order they are written (strings followed by `:`), at any depth.
fn keys_in_order(text: &str) -> Vec<String> {
    let (mut keys, mut chars) = (Vec::new(), text.char_indices().peekable());
    while let Some((start, c)) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut end = start + 1;
        while let Some((i, c)) = chars.next() {
            end = i;
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => break,
                _ => {}
            }
        }
        let rest = text[end + 1..].trim_start();
        if rest.starts_with(':') {
            keys.push(text[start + 1..end].to_owned());
        }
    }
    keys
}

#[tokio::test]
async fn definitions_keep_their_authors_key_order() {
    let app = TestApp::spawn().await;
    let created =
        raw(&app, Method::POST, "/flows", Some(format!(r#"{{"name":"ordered","definition":{DEFINITION}}}"#))).await;
    holds(&created, DEFINITION, 1, "POST /flows");
    let flow = created.body["id"].as_str().expect("id").to_owned();
    holds(&raw(&app, Method::GET, &format!("/flows/{flow}"), None).await, DEFINITION, 1, "GET /flows/{id}");
    holds(&raw(&app, Method::GET, "/flows", None).await, DEFINITION, 1, "GET /flows");

    let published = raw(&app, Method::POST, &format!("/flows/{flow}/publish"), None).await;
    holds(&published, DEFINITION, 1, "publish");
    let version = published.body["id"].as_str().expect("version id").to_owned();
    holds(&raw(&app, Method::GET, &format!("/flows/{flow}/versions"), None).await, DEFINITION, 1, "versions");
    let one = raw(&app, Method::GET, &format!("/flows/{flow}/versions/{version}"), None).await;
    holds(&one, DEFINITION, 1, "a version");

    // A replacement and a patch keep their own order; a restore brings the version's back.
    let put = format!(r#"{{"name":"ordered","definition":{REPLACED}}}"#);
    holds(&raw(&app, Method::PUT, &format!("/flows/{flow}"), Some(put)).await, REPLACED, 1, "PUT /flows/{id}");
    let patch = format!(r#"{{"definition":{REPLACED}}}"#);
    holds(&raw(&app, Method::PATCH, &format!("/flows/{flow}"), Some(patch)).await, REPLACED, 1, "PATCH");
    let restored = raw(&app, Method::POST, &format!("/flows/{flow}/versions/{version}/restore"), None).await;
    holds(&restored, DEFINITION, 1, "restore");

    // Export and import: the draft and the version, both as written.
    let exported = raw(&app, Method::GET, &format!("/flows/{flow}/export"), None).await;
    holds(&exported, DEFINITION, 2, "export");
    let document = exported.text.replace(r#""name":"ordered""#, r#""name":"imported""#);
    let imported = raw(&app, Method::POST, "/flows/import", Some(document)).await;
    holds(&imported, DEFINITION, 1, "import");
    let copy = imported.body["id"].as_str().expect("id").to_owned();
    holds(&raw(&app, Method::GET, &format!("/flows/{copy}/export"), None).await, DEFINITION, 2, "export of the copy");

    // A launch snapshots the draft as written, and the runner's claim carries it so.
    raw(&app, Method::POST, &format!("/flows/{flow}/launch"), Some("{}".into())).await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    holds(&app.next_job(&creds, &runner, 5).await, DEFINITION, 1, "the claim");
}

#[tokio::test]
async fn an_inlined_collection_request_takes_the_place_of_its_reference() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let collection = WriteCollection::new("Orders API".parse().expect("a name"));
    let collection = api.collections().create(&collection).await.expect("create").collection.id;
    let list = WriteRequest {
        name: "List".into(),
        method: "GET".into(),
        url: "http://127.0.0.1:9/o".into(),
        ..Default::default()
    };
    let request = api.collections().add_request(collection, &list).await.expect("add").id;
    let definition = format!(
        r#"{{"nodes":[{{"kind":"request","request_ref":{{"request_id":"{request}","collection_id":"{collection}"}},"id":"list","assertions":[{{"source":"s","operator":"exists"}}],"extractors":[{{"name":"s","kind":"statusCode"}}]}}]}}"#
    );
    let created =
        raw(&app, Method::POST, "/flows", Some(format!(r#"{{"name":"refs","definition":{definition}}}"#))).await;
    holds(&created, &definition, 1, "POST /flows");
    let flow = created.body["id"].as_str().expect("id").to_owned();
    raw(&app, Method::POST, &format!("/flows/{flow}/launch"), Some("{}".into())).await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let claim = app.next_job(&creds, &runner, 5).await;
    assert_eq!(claim.status, 200, "{}", claim.text);
    let start = claim.text.find(r#""nodes":["#).expect("the nodes");
    let keys = keys_in_order(&claim.text[start..]);
    let node: Vec<&str> = keys.iter().map(String::as_str).take(12).collect();
    assert_eq!(
        node,
        [
            "nodes",
            "kind",
            "request",
            "method",
            "url",
            "headers",
            "query",
            "body",
            "id",
            "assertions",
            "source",
            "operator"
        ],
        "the request where the reference was, its fields in the collection request's order: {}",
        claim.text
    );
}
