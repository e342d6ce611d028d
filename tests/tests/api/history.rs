//! History of an endpoint: list, read, delete, clear, search (filter, q, sort, pages), export, replay.

use hookflow_shared::wire::header;
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};

/// Sends a capture with headers and returns its id.
async fn send(app: &TestApp, id: &str, method: Method, rest: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut request = app.client.request(method, app.url(&format!("/webhook/{id}{rest}"))).body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let receipt: Value = request.send().await.expect("send").json().await.expect("receipt");
    receipt["request_id"].as_str().expect("request_id").to_owned()
}

async fn search(app: &TestApp, id: &str, body: Value) -> Vec<String> {
    let reply = app.admin(Method::POST, &format!("/webhooks/{id}/requests/search"), Some(body.clone())).await;
    assert_eq!(reply.status, 200, "{body}: {}", reply.text);
    reply.body["items"].as_array().expect("items").iter().map(|c| c["id"].as_str().expect("id").to_owned()).collect()
}

#[tokio::test]
async fn list_read_delete_and_clear() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("h").await;
    let mut sent = Vec::new();
    for i in 0..5 {
        sent.push(send(&app, &id, Method::POST, "", &[], &format!("{i}")).await);
    }
    let page = app.admin(Method::GET, &format!("/webhooks/{id}/requests?limit=3"), None).await;
    let ids: Vec<&str> =
        page.body["items"].as_array().expect("items").iter().map(|c| c["id"].as_str().expect("id")).collect();
    assert_eq!(ids, [&sent[4], &sent[3], &sent[2]], "newest first");
    let cursor = page.body["next_cursor"].as_str().expect("more");
    let rest = app.admin(Method::GET, &format!("/webhooks/{id}/requests?limit=3&cursor={cursor}"), None).await;
    assert_eq!(rest.body["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(rest.body["next_cursor"], json!(null));
    assert_eq!(
        app.admin(Method::GET, &format!("/webhooks/{id}/requests?limit=0"), None).await.code(),
        "invalid_request"
    );

    let one = format!("/webhooks/{id}/requests/{}", sent[0]);
    assert_eq!(app.admin(Method::DELETE, &one, None).await.status, 204);
    assert_eq!(app.admin(Method::GET, &one, None).await.status, 404);
    assert_eq!(app.admin(Method::DELETE, &one, None).await.status, 404);
    let unknown = format!("/webhooks/{id}/requests/{}", uuid::Uuid::now_v7());
    assert_eq!(app.admin(Method::GET, &format!("{unknown}/body"), None).await.status, 404);
    assert_eq!(app.admin(Method::GET, &format!("/webhooks/{id}"), None).await.body["request_count"], 4);

    assert_eq!(app.admin(Method::DELETE, &format!("/webhooks/{id}/requests"), None).await.status, 204);
    let empty = app.admin(Method::GET, &format!("/webhooks/{id}/requests"), None).await;
    assert_eq!(empty.body, json!({"items": [], "next_cursor": null}));
    assert_eq!(app.admin(Method::GET, &format!("/webhooks/{id}"), None).await.body["request_count"], 0);
    let missing = format!("/webhooks/{}/requests", uuid::Uuid::new_v4());
    assert_eq!(app.admin(Method::DELETE, &missing, None).await.status, 404);
}

#[tokio::test]
async fn lists_leave_out_bodies_over_64_kib() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("big").await;
    let big = "x".repeat(70_000);
    let capture = send(&app, &id, Method::POST, "", &[], &big).await;
    let list = app.admin(Method::GET, &format!("/webhooks/{id}/requests"), None).await;
    let item = &list.body["items"][0];
    assert_eq!(item["body_truncated"], true);
    assert!(item.get("body").is_none_or(Value::is_null));
    assert_eq!(item["body_size"], 70_000);
    let whole = app.admin(Method::GET, &format!("/webhooks/{id}/requests/{capture}"), None).await;
    assert_eq!(whole.body["body"].as_str().map(str::len), Some(70_000));
}

/// One scenario told in order, each step depending on the one before: it reads best whole.
#[tokio::test]
async fn search_by_filter_text_and_sort() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("search").await;
    let github = |path: &'static str, event: &'static str, body: &'static str| {
        let (app, id) = (&app, &id);
        async move {
            let headers = [("X-GitHub-Event", event), ("Content-Type", "application/json")];
            send(app, id, Method::POST, path, &headers, body).await
        }
    };
    let push = github("/gh?page=2", "push", r#"{"action":"opened","n":5}"#).await;
    let issue = github("/gh", "issues", r#"{"action":"closed","n":7,"note":"dry run"}"#).await;
    let get = send(&app, &id, Method::GET, "/ping?page=1", &[("Content-Type", "text/plain")], "").await;
    let put =
        send(&app, &id, Method::PUT, "/stripe", &[("Stripe-Signature", "t=1")], "not json at all, quite long").await;

    let cases = vec![
        (json!({"filter": {"methods": ["post"]}}), vec![&issue, &push]),
        (json!({"filter": {"headers": [{"name": "x-github-event", "op": "eq", "value": "push"}]}}), vec![&push]),
        (json!({"filter": {"headers": [{"name": "X-GITHUB-EVENT", "op": "prefix", "value": "iss"}]}}), vec![&issue]),
        (json!({"filter": {"headers": [{"name": "stripe-signature", "op": "exists"}]}}), vec![&put]),
        (
            json!({"filter": {"headers": [{"name": "x-github-event", "op": "ne", "value": "push"}]}}),
            vec![&put, &get, &issue],
        ),
        (json!({"filter": {"headers": [{"name": "stripe-signature", "op": "contains", "value": "=1"}]}}), vec![&put]),
        (json!({"filter": {"query": [{"name": "page", "op": "eq", "value": "2"}]}}), vec![&push]),
        (json!({"filter": {"query": [{"name": "page", "op": "exists"}]}}), vec![&get, &push]),
        (json!({"filter": {"body_contains": "dry run"}}), vec![&issue]),
        (json!({"filter": {"body_json": [{"path": "$.action", "op": "eq", "value": "opened"}]}}), vec![&push]),
        (json!({"filter": {"body_json": [{"path": "$.n", "op": "eq", "value": 7.0}]}}), vec![&issue]),
        (json!({"filter": {"body_json": [{"path": "$.note", "op": "exists"}]}}), vec![&issue]),
        (json!({"filter": {"body_json": [{"path": "$.action", "op": "prefix", "value": "clo"}]}}), vec![&issue]),
        (json!({"filter": {"content_type": "APPLICATION/json"}}), vec![&issue, &push]),
        (json!({"filter": {"min_size": 25, "max_size": 27}}), vec![&put, &push]),
        (json!({"filter": {"source_ip": "127.0.0.1", "methods": ["GET"]}}), vec![&get]),
        (json!({"filter": {"source_ip": "10.0.0.1"}}), vec![]),
        (json!({"q": "method:POST header.x-github-event:push"}), vec![&push]),
        (json!({"q": "method:POST -body:\"dry run\""}), vec![&push]),
        (json!({"q": "path:/gh query.page:2"}), vec![&push]),
        (json!({"q": "header.stripe-signature:*"}), vec![&put]),
        (json!({"q": "content_type:text/ ip:127.0.0.1"}), vec![&get]),
        (json!({"q": "opened"}), vec![&push]),
        (json!({"q": "-method:POST", "filter": {"methods": ["PUT", "GET"]}}), vec![&put, &get]),
    ];
    for (body, expected) in cases {
        let expected: Vec<String> = expected.into_iter().cloned().collect();
        assert_eq!(search(&app, &id, body.clone()).await, expected, "{body}");
    }

    let everything = search(&app, &id, json!({"filter": {"received_after": "2000-01-01T00:00:00Z"}})).await;
    assert_eq!(everything.len(), 4);
    assert!(search(&app, &id, json!({"filter": {"received_before": "2000-01-01T00:00:00Z"}})).await.is_empty());
    let by_size = search(&app, &id, json!({"sort": {"field": "body_size", "order": "asc"}})).await;
    assert_eq!(by_size, [get.clone(), push.clone(), put.clone(), issue.clone()]);
    let by_method = search(&app, &id, json!({"sort": {"field": "method", "order": "desc"}})).await;
    assert_eq!(by_method[0], put);
    assert_eq!(by_method[3], get);

    // Keyset pages over a sorted search.
    let first = app
        .admin(
            Method::POST,
            &format!("/webhooks/{id}/requests/search"),
            Some(json!({"sort": {"field": "body_size", "order": "desc"}, "limit": 3})),
        )
        .await;
    let cursor = first.body["next_cursor"].as_str().expect("more").to_owned();
    let second =
        search(&app, &id, json!({"sort": {"field": "body_size", "order": "desc"}, "limit": 3, "cursor": cursor})).await;
    assert_eq!(second, std::slice::from_ref(&get));
    let wrong = app
        .admin(
            Method::POST,
            &format!("/webhooks/{id}/requests/search"),
            Some(json!({"sort": {"field": "method"}, "cursor": cursor})),
        )
        .await;
    assert_eq!(wrong.code(), "invalid_request");

    for bad in [
        json!({"q": "colour:red"}),
        json!({"q": "body:\"unclosed"}),
        json!({"filter": {"body_json": [{"path": "$$$[", "op": "exists"}]}}),
        json!({"filter": {"headers": [{"name": "x", "op": "eq"}]}}),
        json!({"filter": {"headers": [{"name": "x", "op": "like", "value": "y"}]}}),
        json!({"sort": {"field": "color"}}),
        json!({"limit": 0}),
        json!({"cursor": "nonsense"}),
        json!({"filters": {}}),
    ] {
        let reply = app.admin(Method::POST, &format!("/webhooks/{id}/requests/search"), Some(bad.clone())).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{bad}: {}", reply.text);
    }
}

#[tokio::test]
async fn export_as_ndjson_and_har() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("export").await;
    for i in 0..250 {
        let event = if i % 2 == 0 { "push" } else { "issues" };
        send(&app, &id, Method::POST, &format!("/e?i={i}"), &[("X-Event", event)], &format!("{{\"i\":{i}}}")).await;
    }
    let bin = app.capture(Method::PUT, &id, vec![0xffu8, 0xfe, 0x00]).await.body["request_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let export = |query: &str| {
        let url = app.url(&format!("/webhooks/{id}/requests/export?{query}"));
        app.client
            .get(url)
            .header(header::API_KEY, &app.admin.key)
            .header(header::ORGANIZATION, app.admin.org.to_string())
            .send()
    };
    let ndjson = export("format=ndjson").await.expect("send");
    assert_eq!(ndjson.headers()["content-type"], "application/x-ndjson");
    let text = ndjson.text().await.expect("text");
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    assert_eq!(lines.len(), 251);
    assert_eq!(lines[0]["body"], "{\"i\":0}", "oldest first");
    assert_eq!(lines[250]["id"], bin);

    let filtered = export("q=header.x-event:push").await.expect("send").text().await.expect("text");
    assert_eq!(filtered.lines().count(), 125);

    let har: Value = export("format=har").await.expect("send").json().await.expect("HAR is JSON");
    assert_eq!(har["log"]["version"], "1.2");
    let entries = har["log"]["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 251);
    assert_eq!(entries[3]["request"]["url"], format!("{}/webhook/{id}/e?i=3", app.base));
    assert_eq!(entries[3]["request"]["queryString"], json!([{"name": "i", "value": "3"}]));
    assert_eq!(entries[250]["request"]["postData"]["encoding"], "base64");
    let empty: Value = export("format=har&q=method:PATCH").await.expect("send").json().await.expect("json");
    assert_eq!(empty["log"]["entries"], json!([]));
    let bad = export("format=xml").await.expect("send");
    assert_eq!(bad.status(), 400);
}

/// One scenario told in order, each step depending on the one before: it reads best whole.
#[tokio::test]
async fn replay_resends_the_request_byte_exact() {
    let app = TestApp::spawn_with(|s| s.allow_private_targets = true).await;
    let source = app.webhook_named("source").await;
    let target =
        app.create_webhook(json!({"name": "target", "response": {"status": 201, "body": "got it"}})).await["id"]
            .as_str()
            .expect("id")
            .to_owned();
    let body: Vec<u8> = (0..=255u8).collect();
    let sent = app
        .client
        .patch(app.url(&format!("/webhook/{source}/orders/7?x=1&x=2")))
        .header("X-Signature", "abc")
        .header("Content-Type", "application/octet-stream")
        .body(body.clone())
        .send()
        .await
        .expect("send");
    let capture: Value = sent.json().await.expect("receipt");
    let capture_id = capture["request_id"].as_str().expect("id");
    let result = app
        .admin(
            Method::POST,
            &format!("/webhooks/{source}/requests/{capture_id}/replay"),
            Some(json!({"target_url": format!("{}/webhook/{target}", app.base)})),
        )
        .await;
    assert_eq!(result.status, 200, "{}", result.text);
    assert_eq!(result.body["status"], 201);
    assert_eq!(result.body["body"], "got it");
    assert!(result.body["duration_ms"].is_u64());
    let replayed = app.admin(Method::GET, &format!("/webhooks/{target}/requests"), None).await.body["items"][0].clone();
    assert_eq!(replayed["method"], "PATCH");
    assert_eq!(replayed["path"], "/orders/7");
    assert_eq!(replayed["query_string"], "x=1&x=2");
    assert!(replayed["headers"].as_array().expect("headers").contains(&json!(["x-signature", "abc"])));
    let raw = app
        .client
        .get(app.url(&format!("/webhooks/{target}/requests/{}/body", replayed["id"].as_str().expect("id"))))
        .header(header::API_KEY, &app.admin.key)
        .header(header::ORGANIZATION, app.admin.org.to_string())
        .send()
        .await
        .expect("send");
    assert_eq!(raw.bytes().await.expect("bytes").to_vec(), body);

    for target in ["nope", "ftp://example.com/"] {
        let path = format!("/webhooks/{source}/requests/{capture_id}/replay");
        let refused = app.admin(Method::POST, &path, Some(json!({"target_url": target}))).await;
        assert_eq!((refused.status.as_u16(), refused.code()), (400, "invalid_request"), "{target}");
    }
}

#[tokio::test]
async fn replay_refuses_private_targets_by_default() {
    let app = TestApp::spawn().await;
    // A tenant the operator did not put on the private-network list.
    let tenant = app.new_org("Tenant").await;
    let created = app.call(Method::POST, "/webhooks", Some(&tenant), Some(json!({"name": "ssrf"}))).await;
    let id = created.body["id"].as_str().expect("id").to_owned();
    let capture = send(&app, &id, Method::POST, "", &[], "x").await;
    let replay = |target: &'static str, creds| {
        let path = format!("/webhooks/{id}/requests/{capture}/replay");
        let app = &app;
        async move { app.call(Method::POST, &path, Some(creds), Some(json!({"target_url": target}))).await }
    };
    for target in [
        "http://127.0.0.1:9/",
        "http://localhost/",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://2130706433/",
        "http://[64:ff9b::7f00:1]/",
        "http://10.0.0.1/",
    ] {
        let reply = replay(target, &tenant).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{target}");
        assert!(reply.body["error"]["message"].as_str().unwrap_or_default().contains("not allowed"), "{}", reply.text);
    }
}
