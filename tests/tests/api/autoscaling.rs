//! Autoscaling (issue #53), in the server: the scaler endpoint (`GET /runner/pools`, `/runner/pools/{pool}`)
//! against SQL counts, its scopes, the key's own organization without `X-Organization-Id`, other organizations'
//! work and runners never counted, an unknown pool 404; launch `priority` (400s; 10 priority-1 launches claimed
//! by a runner of concurrency 1 before any further of 1,000 queued priority-3 jobs); `waiting_reason` naming
//! missing labels and busy runners within a second of the launch and of the runner leaving.

use crate::RUNNER;
use hookflow_control_plane::pools::RunnerPool;
use hookflow_shared::ScopeSet;
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::target::Target;
use hookflow_tests::{Creds, TestApp};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn pools() -> Vec<RunnerPool> {
    let pool = |name: &str, labels: &[&str]| RunnerPool {
        name: name.to_owned(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
    };
    vec![RunnerPool::default_pool(), pool("eu", &["eu"]), pool("eu-gpu", &["eu", "gpu"]), pool("us", &["us"])]
}

/// A server with the pools above; runners are online while seen within three `heartbeat_s`.
async fn spawn(lease_s: u64, heartbeat_s: u64) -> TestApp {
    TestApp::spawn_with(|settings| {
        settings.lease = Duration::from_secs(lease_s);
        settings.heartbeat_interval = Duration::from_secs(heartbeat_s);
        settings.rescue_interval = Duration::from_millis(200);
        settings.runner_pools = pools().into();
    })
    .await
}

/// `GET path` with `key` and, when given, `X-Organization-Id`.
async fn get(app: &TestApp, path: &str, key: &str, org: Option<&str>) -> (StatusCode, Value) {
    let mut request = app.client.get(format!("{}{path}", app.base)).header("x-api-key", key);
    if let Some(org) = org {
        request = request.header("x-organization-id", org);
    }
    let response = request.send().await.expect("send");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// What the database holds for a pool of `labels` in `org`, counted here with SQL over `executions` and `runners`
/// (online: seen within three 10 s heartbeat intervals, as `the_scaler_endpoint...` sets them).
async fn sql_counts(app: &TestApp, org: &Creds, labels: &[&str]) -> Value {
    let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
    let (queued, running, online, busy, idle): (i64, i64, i64, i64, i64) = sqlx::query_as(
        "WITH r AS (
             SELECT r.id, r.max_concurrency, r.last_seen_at > now() - interval '30 seconds' AS online,
                 (SELECT count(*) FROM executions e WHERE e.status = 'running' AND e.runner_id = r.id) AS running
             FROM runners r WHERE r.organization_id = $1 AND r.labels @> $2)
         SELECT (SELECT count(*) FROM executions WHERE organization_id = $1 AND status = 'queued'
                     AND runner_labels <@ $2),
             (SELECT coalesce(sum(running), 0)::int8 FROM r),
             (SELECT count(*) FROM r WHERE online),
             (SELECT coalesce(sum(running), 0)::int8 FROM r WHERE online),
             (SELECT coalesce(sum(greatest(max_concurrency - running, 0)), 0)::int8 FROM r WHERE online)",
    )
    .bind(org.org)
    .bind(&labels)
    .fetch_one(&app.pool)
    .await
    .expect("count");
    json!({"queued": queued, "running": running, "runners_online": online, "busy_slots": busy, "idle_slots": idle})
}

fn numbers(pool: &Value) -> Value {
    json!({"queued": pool["queued"], "running": pool["running"], "runners_online": pool["runners_online"],
        "busy_slots": pool["busy_slots"], "idle_slots": pool["idle_slots"]})
}

#[tokio::test]
async fn the_scaler_endpoint_counts_each_pool_as_the_database_holds_it_for_the_keys_organization_only() {
    // Leases and the online window long enough that nothing moves while the test counts.
    let app = spawn(60, 10).await;
    let flow = app.delay_flow("pools").await;
    let runner = app.runner_creds(app.admin.org).await;
    let org = app.admin.org.to_string();

    // Empty: every declared pool, zeros.
    let (status, listed) = get(&app, "/runner/pools", &runner.key, Some(&org)).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let names: Vec<&str> =
        listed["items"].as_array().expect("items").iter().map(|p| p["pool"].as_str().unwrap()).collect();
    assert_eq!(names, ["default", "eu", "eu-gpu", "us"]);
    assert_eq!(listed["items"][2]["labels"], json!(["eu", "gpu"]));
    assert_eq!(listed["items"][1]["queued"], 0);

    // Work: 3 unlabelled, 4 for eu, 2 for eu+gpu, 1 for us+gpu (no pool carries both).
    for (labels, n) in [(json!([]), 3), (json!(["eu"]), 4), (json!(["gpu", "eu"]), 2), (json!(["us", "gpu"]), 1)] {
        for _ in 0..n {
            app.launch(&flow, json!({"runner_labels": labels})).await;
        }
    }
    // Runners: an eu one holding a claimed job, an eu+gpu one, and one that stopped being seen.
    let eu = app.register_runner(&runner, &["eu"]).await;
    app.register_runner(&runner, &["eu", "gpu", "big"]).await;
    let gone = app.register_runner(&runner, &["eu"]).await;
    let claimed = app.next_job(&runner, &eu, 1).await;
    assert_eq!(claimed.status, StatusCode::OK, "{}", claimed.text);
    sqlx::query("UPDATE runners SET last_seen_at = now() - interval '1 minute' WHERE id = $1::uuid")
        .bind(&gone)
        .execute(&app.pool)
        .await
        .expect("age the runner");

    // Another organization's work and runners never count.
    let other = app.new_org("Other").await;
    let as_other = app.api_as(&other);
    let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    let write = hookflow_shared::api::flows::WriteFlow::new("other".parse().unwrap(), definition);
    let other_flow = as_other.flows().create(&write).await.expect("flow").id.to_string();
    let launch = hookflow_shared::api::executions::Launch {
        runner_labels: vec!["eu".to_owned()].try_into().unwrap(),
        ..Default::default()
    };
    as_other.flows().launch(&other_flow, &launch).await.expect("launch");
    let other_runner = app.runner_creds(other.org).await;
    app.register_runner(&other_runner, &["eu"]).await;

    let expected: [(&str, &[&str]); 4] =
        [("default", &[]), ("eu", &["eu"]), ("eu-gpu", &["eu", "gpu"]), ("us", &["us"])];
    let (_, listed) = get(&app, "/runner/pools", &runner.key, Some(&org)).await;
    for (i, (name, labels)) in expected.iter().enumerate() {
        let pool = &listed["items"][i];
        assert_eq!(pool["pool"], *name);
        assert_eq!(numbers(pool), sql_counts(&app, &app.admin, labels).await, "pool {name}: {pool}");
        let (status, one) = get(&app, &format!("/runner/pools/{name}"), &runner.key, Some(&org)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(numbers(&one), numbers(pool), "{one}");
    }
    // The figures, spelled out: the eu pool holds the unlabelled and eu work, less the one claimed.
    let eu_pool = &listed["items"][1];
    assert_eq!(eu_pool["queued"], 3 + 4 - 1, "{eu_pool}");
    assert_eq!(eu_pool["running"], 1);
    assert_eq!(eu_pool["runners_online"], 2, "the aged runner is not online");
    assert_eq!(eu_pool["busy_slots"], 1);
    assert_eq!(eu_pool["idle_slots"], 3);
    assert!(eu_pool["oldest_queued_s"].as_f64().unwrap() >= 0.0);
    assert_eq!(listed["items"][2]["queued"], 3 + 4 + 2 - 1);
    assert_eq!(listed["items"][2]["runners_online"], 1);
    assert_eq!(listed["items"][3]["queued"], 2, "the unlabelled work left (the eu runner took the oldest): {listed}");

    // KEDA's one header: the key's own organization.
    let (status, alone) = get(&app, "/runner/pools/eu", &runner.key, None).await;
    assert_eq!(status, StatusCode::OK, "{alone}");
    assert_eq!(numbers(&alone), numbers(eu_pool));
    let (_, others) = get(&app, "/runner/pools/eu", &other_runner.key, None).await;
    assert_eq!(others["queued"], 1 + 0, "the other organization sees its own one launch: {others}");
    assert_eq!(others["runners_online"], 1);

    // Scopes: runners:read answers, flows:read does not; no key 401; another organization's id 403.
    let reader = app.key(app.admin.org, ScopeSet::parse(["runners:read"]).unwrap(), None).await;
    assert_eq!(get(&app, "/runner/pools", &reader, Some(&org)).await.0, StatusCode::OK);
    let flows_only = app.key(app.admin.org, ScopeSet::parse(["flows:read"]).unwrap(), None).await;
    let (status, refused) = get(&app, "/runner/pools/eu", &flows_only, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["code"], "insufficient_scope", "{refused}");
    let (status, _) = get(&app, "/runner/pools", "hf_not_a_key", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, mismatch) = get(&app, "/runner/pools", &runner.key, Some(&other.org.to_string())).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{mismatch}");

    // Unknown pool: 404.
    let (status, unknown) = get(&app, "/runner/pools/asia", &runner.key, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{unknown}");
    assert_eq!(unknown["error"]["code"], "not_found");
}

#[tokio::test]
async fn priority_is_one_to_five_three_by_default_and_read_back() {
    let app = spawn(2, 1).await;
    let flow = app.delay_flow("priority").await;
    let plain = app.launch(&flow, json!({})).await;
    assert_eq!(plain["priority"], 3, "{plain}");
    let urgent = app.launch(&flow, json!({"priority": 1})).await;
    assert_eq!(urgent["priority"], 1);
    let path = format!("/flows/{flow}/executions/{}", urgent["id"].as_str().unwrap());
    assert_eq!(app.admin(Method::GET, &path, None).await.body["priority"], 1);
    for bad in [json!(0), json!(6), json!("high"), json!(1.5), json!(-1)] {
        let reply = app.admin(Method::POST, &format!("/flows/{flow}/launch"), Some(json!({"priority": bad}))).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}: {}", reply.text);
        assert!(reply.text.contains("priority"), "names the field: {}", reply.text);
    }
    let by_tag = app.admin(Method::POST, "/flows/launch", Some(json!({"tags": ["x"], "priority": 9}))).await;
    assert_eq!(by_tag.status, StatusCode::BAD_REQUEST, "{}", by_tag.text);
    assert!(by_tag.text.contains("priority"), "{}", by_tag.text);
}

#[tokio::test]
async fn ten_priority_one_launches_are_claimed_before_any_further_of_a_thousand_priority_three_jobs() {
    let app = spawn(2, 1).await;
    let flow = app.delay_flow("bulk").await;
    let creds = app.runner_creds(app.admin.org).await;
    // 1,000 priority-3 launches, 25 at a time.
    for _ in 0..40 {
        let launches = (0..25).map(|_| app.launch(&flow, json!({"runner_labels": ["prio"]})));
        futures_util::future::join_all(launches).await;
    }
    // Ten flows tagged `urgent`: one launch by tag queues all ten at once, at priority 1.
    for i in 0..10 {
        let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
        let mut write = hookflow_shared::api::flows::WriteFlow::new(format!("urgent {i}").parse().unwrap(), definition);
        write.tags = vec!["urgent".to_owned()].try_into().unwrap();
        app.api().flows().create(&write).await.expect("flow");
    }
    let mut runner = RunnerProcess::spawn(RUNNER, &app.base, &creds, &["prio"], &["--concurrency", "1"]).await;
    let started = Instant::now();
    let succeeded = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM executions WHERE status = 'succeeded' AND priority = 3")
            .fetch_one(&app.pool)
            .await
            .expect("count")
    };
    while succeeded().await < 20 {
        assert!(started.elapsed() < Duration::from_secs(60), "the runner ran nothing:\n{}", runner.output());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reply = app
        .admin(
            Method::POST,
            "/flows/launch",
            Some(json!({"tags": ["urgent"], "priority": 1, "runner_labels": ["prio"]})),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.text);
    let (launched_at, still_queued): (chrono::DateTime<chrono::Utc>, i64) =
        sqlx::query_as("SELECT now(), (SELECT count(*) FROM executions WHERE status = 'queued' AND priority = 3)")
            .fetch_one(&app.pool)
            .await
            .expect("now");
    assert!(still_queued > 500, "most priority-3 jobs still wait ({still_queued}), so the order can show");
    let urgent_done = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM executions WHERE status = 'succeeded' AND priority = 1")
            .fetch_one(&app.pool)
            .await
            .expect("count")
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while urgent_done().await < 10 {
        assert!(Instant::now() < deadline, "the urgent jobs did not all run:\n{}", runner.output());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    runner.kill().await;
    // Every priority-3 job claimed after the urgent launch was claimed after the last urgent one.
    let (last_urgent, early): (chrono::DateTime<chrono::Utc>, i64) = sqlx::query_as(
        "SELECT (SELECT max(started_at) FROM executions WHERE priority = 1),
             (SELECT count(*) FROM executions WHERE priority = 3 AND started_at > $1
                  AND started_at < (SELECT max(started_at) FROM executions WHERE priority = 1))",
    )
    .bind(launched_at)
    .fetch_one(&app.pool)
    .await
    .expect("order");
    assert!(last_urgent > launched_at);
    assert_eq!(early, 0, "no priority-3 job was claimed between the urgent launch and the last urgent claim");
}

async fn reason(app: &TestApp, flow: &str, id: &str) -> String {
    let read = app.admin(Method::GET, &format!("/flows/{flow}/executions/{id}"), None).await;
    assert_eq!(read.body["status"], "queued", "{}", read.text);
    read.body["waiting_reason"].as_str().unwrap_or_else(|| panic!("a reason: {}", read.text)).to_owned()
}

#[tokio::test]
async fn waiting_reason_names_missing_labels_and_busy_runners_at_once() {
    let app = spawn(2, 1).await;
    let target = Target::spawn().await;
    let definition = json!({"nodes": [{"id": "call", "kind": "request",
        "request": {"method": "GET", "url": format!("{}/slow?ms=4000", target.base)}}]});
    let flow = app.create_flow("slow", definition).await;
    let creds = app.runner_creds(app.admin.org).await;
    let mut runner = RunnerProcess::spawn(RUNNER, &app.base, &creds, &["wr"], &["--concurrency", "1"]).await;
    app.wait_runner(|r| r["labels"] == json!(["wr"]) && r["status"] == "online").await;
    let first = app.launch(&flow, json!({"runner_labels": ["wr"]})).await;
    let first = first["id"].as_str().unwrap().to_owned();
    app.wait_execution(&flow, &first, Duration::from_secs(15), |e| e["status"] == "running").await;

    // Within a second of each launch.
    let launched = Instant::now();
    let busy = app.launch(&flow, json!({"runner_labels": ["wr"]})).await["id"].as_str().unwrap().to_owned();
    let busy_reason = reason(&app, &flow, &busy).await;
    let missing = app.launch(&flow, json!({"runner_labels": ["gpu", "wr"]})).await["id"].as_str().unwrap().to_owned();
    let missing_reason = reason(&app, &flow, &missing).await;
    assert!(launched.elapsed() < Duration::from_secs(1), "read within a second: {:?}", launched.elapsed());
    assert!(busy_reason.starts_with("all 1 runners that carry [wr] are busy"), "{busy_reason}");
    assert!(missing_reason.starts_with("no online runner carries [gpu, wr]"), "{missing_reason}");
    assert!(missing_reason.contains("[wr]"), "which labels the online runners carry: {missing_reason}");
    let done = app.admin(Method::GET, &format!("/flows/{flow}/executions/{first}"), None).await;
    assert_eq!(done.body["waiting_reason"], Value::Null, "null unless queued: {}", done.text);
    let listed = app.admin(Method::GET, &format!("/flows/{flow}/executions"), None).await;
    let listed_busy = listed.body["items"].as_array().unwrap().iter().find(|e| e["id"] == busy.as_str()).cloned();
    assert_eq!(listed_busy.unwrap()["waiting_reason"].as_str(), Some(busy_reason.as_str()), "lists say it too");

    // The runner drains and deregisters: within a second, nothing carries `wr` any more.
    let stopped = runner.terminate().await;
    assert!(stopped.success(), "{}", runner.output());
    let left = Instant::now();
    let now_missing = reason(&app, &flow, &busy).await;
    assert!(left.elapsed() < Duration::from_secs(1));
    assert!(now_missing.starts_with("no online runner carries [wr]"), "{now_missing}");
    assert!(now_missing.contains("no runner of the organization is online"), "{now_missing}");
}
