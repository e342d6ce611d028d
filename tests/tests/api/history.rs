//! History of an endpoint: list, read, delete, clear, search (filter, q, sort, pages), export, replay.

use hookflow_shared::api::webhooks::{CreateWebhook, CustomResponse, ReplayRequest, SearchRequests};
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

/// A search written as its JSON (read as the wire type first, so a misspelled field fails here); answers the ids.
async fn search(app: &TestApp, id: &str, body: Value) -> Vec<String> {
    let search: SearchRequests = serde_json::from_value(body.clone()).unwrap_or_else(|e| panic!("{body}: {e}"));
    let page = app.api().webhooks().search(id, &search).await.unwrap_or_else(|e| panic!("{body}: {e}"));
    page.items.iter().map(|c| c.id.to_string()).collect()
}

#[tokio::test]
async fn list_read_delete_and_clear() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("h").await;
    let mut sent = Vec::new();
    for i in 0..5 {
        sent.push(send(&app, &id, Method::POST, "", &[], &format!("{i}")).await);
    }
    let hooks = app.api();
    let hooks = hooks.webhooks();
    let page = hooks.requests(&id, &[("limit", "3")]).await.expect("a page");
    let ids: Vec<String> = page.items.iter().map(|c| c.id.to_string()).collect();
    assert_eq!(ids, [sent[4].clone(), sent[3].clone(), sent[2].clone()], "newest first");
    let cursor = page.next_cursor.as_deref().expect("more");
    let rest = hooks.requests(&id, &[("limit", "3"), ("cursor", cursor)]).await.expect("a page");
    assert_eq!(rest.items.len(), 2);
    assert_eq!(rest.next_cursor, None);
    assert_eq!(hooks.requests(&id, &[("limit", "0")]).await.expect_err("limit 0").code(), "invalid_request");

    hooks.delete_request(&id, &sent[0]).await.expect("delete");
    assert_eq!(hooks.request(&id, &sent[0]).await.expect_err("gone").status(), 404);
    assert_eq!(hooks.delete_request(&id, &sent[0]).await.expect_err("gone").status(), 404);
    assert_eq!(hooks.body(&id, uuid::Uuid::now_v7()).await.expect_err("unknown").status(), 404);
    assert_eq!(hooks.get(&id).await.expect("webhook").request_count, 4);

    hooks.clear_requests(&id).await.expect("clear");
    let empty = hooks.requests(&id, &[]).await.expect("list");
    assert!(empty.items.is_empty() && empty.next_cursor.is_none());
    assert_eq!(hooks.get(&id).await.expect("webhook").request_count, 0);
    assert_eq!(hooks.clear_requests(uuid::Uuid::new_v4()).await.expect_err("no such webhook").status(), 404);
}

#[tokio::test]
async fn lists_leave_out_bodies_over_64_kib() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("big").await;
    let big = "x".repeat(70_000);
    let capture = send(&app, &id, Method::POST, "", &[], &big).await;
    let list = app.api().webhooks().requests(&id, &[]).await.expect("list");
    let item = &list.items[0];
    assert!(item.body_truncated);
    assert_eq!(item.body, None);
    assert_eq!(item.body_size, 70_000);
    let whole = app.api().webhooks().request(&id, &capture).await.expect("one");
    assert_eq!(whole.body.as_deref().map(str::len), Some(70_000));
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
    let first: SearchRequests =
        serde_json::from_value(json!({"sort": {"field": "body_size", "order": "desc"}, "limit": 3})).expect("search");
    let first = app.api().webhooks().search(&id, &first).await.expect("search");
    let cursor = first.next_cursor.expect("more");
    let second =
        search(&app, &id, json!({"sort": {"field": "body_size", "order": "desc"}, "limit": 3, "cursor": cursor})).await;
    assert_eq!(second, std::slice::from_ref(&get));
    let wrong: SearchRequests =
        serde_json::from_value(json!({"sort": {"field": "method"}, "cursor": cursor})).expect("search");
    let wrong = app.api().webhooks().search(&id, &wrong).await.expect_err("another sort's cursor");
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
    let api = app.api();
    let export = |query: &str| {
        let request = api.request(Method::GET, &format!("/webhooks/{id}/requests/export?{query}"));
        request.send()
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
    let api = app.api();
    let answer = CustomResponse { status: 201, headers: Default::default(), body: "got it".into() };
    let target = CreateWebhook { response: Some(answer), ..CreateWebhook::new("target".parse().expect("a name")) };
    let target = api.webhooks().create(&target).await.expect("create").id;
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
    let replay = ReplayRequest { target_url: format!("{}/webhook/{target}", app.base) };
    let result = api.webhooks().replay(&source, capture_id, &replay).await.expect("replay");
    assert_eq!(result.status, 201);
    assert_eq!(result.body, "got it");
    let replayed = api.webhooks().requests(target, &[]).await.expect("list").items.remove(0);
    assert_eq!(replayed.method, "PATCH");
    assert_eq!(replayed.path, "/orders/7");
    assert_eq!(replayed.query_string, "x=1&x=2");
    assert!(replayed.headers.contains(&("x-signature".into(), "abc".into())));
    let raw = api.webhooks().body(target, replayed.id).await.expect("body");
    assert_eq!(raw.to_vec(), body);

    for target in ["nope", "ftp://example.com/"] {
        let replay = ReplayRequest { target_url: target.into() };
        let refused = api.webhooks().replay(&source, capture_id, &replay).await.expect_err(target);
        assert_eq!((refused.status(), refused.code()), (400, "invalid_request"), "{target}");
    }
}

#[tokio::test]
async fn replay_refuses_private_targets_by_default() {
    let app = TestApp::spawn().await;
    // A tenant the operator did not put on the private-network list.
    let tenant = app.api_as(&app.new_org("Tenant").await);
    let created = tenant.webhooks().create(&CreateWebhook::new("ssrf".parse().expect("a name"))).await;
    let id = created.expect("create").id.to_string();
    let capture = send(&app, &id, Method::POST, "", &[], "x").await;
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
        let replay = ReplayRequest { target_url: target.into() };
        let reply = tenant.webhooks().replay(&id, &capture, &replay).await.expect_err(target);
        reply.assert_refused(400, "invalid_request", "not allowed");
    }
}
