//! The limits of request fields (names, free text, tags, labels, values, variables, emails): each refusal is a 400
//! whose message names the field exactly as it does today. The wire spelling of these messages is the point, so
//! the bodies are written as JSON.

use hookflow_shared::wire::runner_route;
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};

/// Sends `body` as the admin and checks the answer is a 400 saying exactly `message`.
async fn refused(app: &TestApp, method: Method, path: &str, body: Value, message: &str) {
    let reply = app.admin(method, path, Some(body.clone())).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{path} {body}: {}", reply.text);
    assert_eq!(reply.body["error"]["message"], message, "{path} {body}");
}

fn long(n: usize) -> String {
    "x".repeat(n)
}

fn definition() -> Value {
    json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]})
}

const NAME: &str = "`name` must be 1 to 200 characters, not only white space";

#[tokio::test]
async fn flow_fields() {
    let app = TestApp::spawn().await;
    let flow = |extra: Value| {
        let mut body = json!({"name": "f", "definition": definition()});
        body.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        body
    };
    let tags: Vec<String> = (0..21).map(|i| format!("t{i}")).collect();
    let cases = [
        (flow(json!({"name": " \t"})), NAME.to_owned()),
        (flow(json!({"name": long(201)})), NAME.to_owned()),
        (flow(json!({"description": long(2001)})), "`description` must be at most 2000 characters".to_owned()),
        (flow(json!({"tags": tags})), "`tags`: at most 20 tags".to_owned()),
        (
            flow(json!({"tags": ["ok", " "]})),
            "`tags`: each tag must be 1 to 64 characters, not only white space".into(),
        ),
        (flow(json!({"tags": [long(65)]})), "`tags`: each tag must be 1 to 64 characters, not only white space".into()),
        (flow(json!({"name": 5})), "invalid field `name`: invalid type: integer `5`, expected a string".into()),
        (
            flow(json!({"tags": ["a", 1]})),
            "invalid field `tags[1]`: invalid type: integer `1`, expected a string".into(),
        ),
    ];
    for (body, message) in cases {
        refused(&app, Method::POST, "/flows", body, &message).await;
    }
    let id = app.create_flow(" spaced ", definition()).await;
    let path = format!("/flows/{id}");
    refused(&app, Method::PATCH, &path, json!({"name": ""}), NAME).await;
    let message = "`description` must be at most 2000 characters";
    refused(&app, Method::PATCH, &path, json!({"description": long(2001)}), message).await;
    let message = "`tags`: each tag must be 1 to 64 characters, not only white space";
    refused(&app, Method::PATCH, &path, json!({"tags": [""]}), message).await;
    let kept = app.admin(Method::PATCH, &path, Some(json!({"name": null, "tags": null}))).await;
    assert_eq!((kept.status.as_u16(), &kept.body["name"]), (200, &json!("spaced")), "null keeps; stored trimmed");
    let message = "`note` must be at most 2000 characters";
    refused(&app, Method::POST, &format!("{path}/publish"), json!({"note": long(2001)}), message).await;
    let tags = app.admin(Method::PATCH, &path, Some(json!({"tags": [" a ", "a", "b"]}))).await;
    assert_eq!(tags.body["tags"], json!(["a", "b"]), "tags are trimmed and kept once");
}

#[tokio::test]
async fn imported_flow_fields() {
    let app = TestApp::spawn().await;
    let document = |flow: Value, versions: Value| {
        let mut written = json!({"name": "f", "definition": definition()});
        written.as_object_mut().expect("object").extend(flow.as_object().expect("object").clone());
        json!({"format": "hookflow.flow/v1", "flow": written, "versions": versions})
    };
    let tags: Vec<String> = (0..21).map(|i| format!("t{i}")).collect();
    let version = |note: String| json!([{"version": 1, "note": note, "definition": definition()}]);
    let cases = [
        (document(json!({"name": ""}), json!([])), "`flow.name` must be 1 to 200 characters, not only white space"),
        (document(json!({"description": long(2001)}), json!([])), "`flow.description` must be at most 2000 characters"),
        (document(json!({"tags": tags}), json!([])), "`tags`: at most 20 tags"),
        (document(json!({}), version(long(2001))), "`versions.note` must be at most 2000 characters"),
    ];
    for (body, message) in cases {
        refused(&app, Method::POST, "/flows/import", body, message).await;
    }
}

#[tokio::test]
async fn webhook_fields() {
    let app = TestApp::spawn().await;
    let message = "`description` must be at most 2000 characters";
    refused(&app, Method::POST, "/webhooks", json!({"name": "   "}), NAME).await;
    refused(&app, Method::POST, "/webhooks", json!({"name": "w", "description": long(2001)}), message).await;
    let id = app.webhook_named("w").await;
    let path = format!("/webhooks/{id}");
    refused(&app, Method::PATCH, &path, json!({"name": long(201)}), NAME).await;
    refused(&app, Method::PATCH, &path, json!({"description": long(2001)}), message).await;
    let cleared = app.admin(Method::PATCH, &path, Some(json!({"name": null, "description": null}))).await;
    assert_eq!((cleared.status.as_u16(), &cleared.body["name"]), (200, &json!("w")));
}

#[tokio::test]
async fn collection_fields() {
    let app = TestApp::spawn().await;
    let many: serde_json::Map<String, Value> = (0..201).map(|i| (format!("v{i}"), json!("x"))).collect();
    let text = "`description` must be at most 10000 characters";
    let cases = [
        (json!({"name": ""}), NAME.to_owned()),
        (json!({"name": "c", "description": long(10_001)}), text.to_owned()),
        (json!({"name": "c", "variables": many}), "invalid field `variables`: at most 200 variables".to_owned()),
        (
            json!({"name": "c", "variables": {"a b": "x"}}),
            "invalid field `variables`: `a b` is not a variable name".into(),
        ),
        (
            json!({"name": "c", "variables": {"v": long(10_001)}}),
            "`variables.v` must be at most 10000 characters".into(),
        ),
    ];
    for (body, message) in cases.clone() {
        refused(&app, Method::POST, "/collections", body, &message).await;
    }
    let created = app.admin(Method::POST, "/collections", Some(json!({"name": "c"}))).await;
    let path = format!("/collections/{}", created.body["id"].as_str().expect("id"));
    for (body, message) in cases {
        refused(&app, Method::PATCH, &path, body, &message).await;
    }
    let source = json!({"document": "openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths: {}\n"});
    refused(&app, Method::POST, "/collections/import/openapi", json!({"name": " ", "source": source}), NAME).await;
}

#[tokio::test]
async fn runner_and_launch_fields() {
    let app = TestApp::spawn().await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = |extra: Value| {
        let host = json!({"hostname": "h", "os": "linux", "arch": "x86_64", "cpus": 1, "memory_bytes": 1});
        let mut body = json!({"name": "r", "version": "1", "max_concurrency": 1, "host": host});
        for (field, value) in extra.as_object().expect("object") {
            match field.strip_prefix("host.") {
                Some(inner) => body["host"][inner] = value.clone(),
                None => body[field] = value.clone(),
            }
        }
        body
    };
    let labels = "invalid field `labels`: at most 20 labels of 1 to 64 characters";
    let too_many: Vec<String> = (0..21).map(|i| format!("l{i}")).collect();
    let cases = [
        (runner(json!({"name": ""})), NAME),
        (runner(json!({"labels": [" a"]})), labels),
        (runner(json!({"labels": too_many})), labels),
        (runner(json!({"labels": [long(65)]})), labels),
        (runner(json!({"version": long(101)})), "`version` must be at most 100 characters"),
        (runner(json!({"host.hostname": long(101)})), "`host.hostname` must be at most 100 characters"),
        (runner(json!({"host.arch": long(101)})), "`host.arch` must be at most 100 characters"),
    ];
    for (body, message) in cases {
        let reply = app.call(Method::POST, runner_route::RUNNERS, Some(&creds), Some(body.clone())).await;
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert_eq!(reply.body["error"]["message"], message, "{body}");
    }
    let flow = app.create_flow("f", definition()).await;
    let labels = "invalid field `runner_labels`: at most 20 labels of 1 to 64 characters";
    let launch = format!("/flows/{flow}/launch");
    refused(&app, Method::POST, &launch, json!({"runner_labels": ["a "]}), labels).await;
    refused(&app, Method::POST, "/flows/launch", json!({"tags": ["a"], "runner_labels": [""]}), labels).await;
    let message = "invalid field `tags`: name at least one tag";
    refused(&app, Method::POST, "/flows/launch", json!({"tags": []}), message).await;
    let message = "`tags`: each tag must be 1 to 64 characters, not only white space";
    refused(&app, Method::POST, "/flows/launch", json!({"tags": [" "]}), message).await;
}

#[tokio::test]
async fn admin_resource_and_people_fields() {
    let app = TestApp::spawn().await;
    refused(&app, Method::POST, "/api-keys", json!({"name": "", "preset": "ci"}), NAME).await;
    refused(&app, Method::PATCH, "/organization", json!({"name": long(201)}), NAME).await;
    let value = "`value` must be at most 65536 characters";
    refused(&app, Method::PUT, "/variables/V", json!({"value": long(65_537)}), value).await;
    refused(&app, Method::PUT, "/secrets/S", json!({"value": long(65_537)}), value).await;
    let email = "invalid field `email`";
    refused(&app, Method::POST, "/organization/members", json!({"email": "nobody", "role": "member"}), email).await;
    let reply = app.sign_in("nobody@", "password").await;
    assert_eq!((reply.status.as_u16(), &reply.body["error"]["message"]), (400, &json!(email)));
    let person = app.user(false).await;
    let (bearer, _) = app.bearer(&person, None).await;
    let reply = app.call_bearer(Method::POST, "/organizations", &bearer, Some(json!({"name": " "}))).await;
    assert_eq!((reply.status.as_u16(), &reply.body["error"]["message"]), (400, &json!(NAME)));
    let one_time = app.user(true).await;
    let (bearer, _) = app.bearer(&one_time, None).await;
    let reply = app.call_bearer(Method::POST, "/organizations", &bearer, Some(json!({"name": " "}))).await;
    assert_eq!(reply.status, 403, "a password to change comes before the body: {}", reply.text);

    let open = TestApp::spawn_with(|s| s.signup = true).await;
    let signup = |email: &str, organization: &str| json!({"email": email, "password": "a long enough password", "organization_name": organization});
    let message = "`organization_name` must be 1 to 200 characters, not only white space";
    for (body, message) in [(signup("x", "o"), email), (signup("a@example.com", ""), message)] {
        let reply = open.call(Method::POST, "/auth/signup", None, Some(body.clone())).await;
        assert_eq!((reply.status.as_u16(), &reply.body["error"]["message"]), (400, &json!(message)), "{body}");
    }
}
