//! Launches and the runner protocol driven by hand: claims, job tokens, reports, completion, the execution API
//! and stream, leases and rescue, labels, cancellation, idempotency, errors, scopes and isolation.

use futures_util::future::join_all;
use hookflow_shared::api::Patch;
use hookflow_shared::api::executions::{ExecutionStatus, Launch, LaunchByTag};
use hookflow_shared::api::fields::Tags;
use hookflow_shared::api::flows::{PatchFlow, Publish, PutEnvironment, WriteFlow};
use hookflow_shared::api::resources::PutSecret;
use hookflow_shared::api::runners::{Heartbeat, HeartbeatReply, Metrics};
use hookflow_shared::wire::{header, runner_route};
use hookflow_shared::{JobId, RunnerId};
use hookflow_tests::app::Creds;
use hookflow_tests::exec::scoped;
use hookflow_tests::notices::Notices;
use hookflow_tests::sse::Sse;
use hookflow_tests::{Credentials, TestApp};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

fn two_nodes() -> Value {
    json!({"nodes": [
        {"id": "login", "kind": "request",
         "request": {"method": "POST", "url": "http://127.0.0.1:9/login",
                     "body": "{\"password\": \"{{secret.API_PASSWORD}}\", \"user\": \"{{user}}\"}"}},
        {"id": "wait", "kind": "delay", "delay_ms": 1}
    ]})
}

fn node_result(node: &str, status: &str) -> Value {
    json!({"node_id": node, "status": status, "started_at": "2026-11-22T10:20:47.123456Z", "duration_ms": 3,
           "extracted": {"token": "t-1"}, "assertions": [], "error": null, "retries": 0})
}

/// One scenario told in order, each step depending on the one before: it reads best whole.
#[tokio::test]
async fn a_claim_runs_through_reports_and_completion() {
    let app = TestApp::spawn_for_execution().await;
    let api = app.api();
    let secret =
        |value: &str| PutSecret { value: value.parse().expect("a value"), allowed_hosts: vec![], runners_only: false };
    api.secrets().put("API_PASSWORD", &secret("hunter2-secret")).await.expect("put");
    api.secrets().put("UNUSED", &secret("never-sent")).await.expect("put");
    api.variables().put("user", &"org-user".parse().expect("a value")).await.expect("put");
    let flow = app.create_flow("protocol", two_nodes()).await;
    let env = PutEnvironment {
        variables: [("user", "env-user"), ("region", "eu")].map(|(k, v)| (k.into(), v.into())).into(),
    };
    api.flows().put_environment(&flow, "staging", &env).await.expect("put staging");
    let execution = app.launch(&flow, json!({"environment": "staging", "variables": {"region": "us"}})).await;
    assert_eq!(execution["status"], "queued");
    assert_eq!(execution["trigger"], "api");
    assert_eq!(execution["attempt"], 1);
    assert_eq!(execution["environment"], "staging");
    assert_eq!(execution["flow_version"], json!(null));
    assert_eq!(execution["summary"], json!({"nodes_total": 2, "passed": 0, "failed": 0, "skipped": 0}));
    let id = execution["id"].as_str().expect("id").to_owned();

    let runner_creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&runner_creds, &[]).await;
    let claim = app.next_job(&runner_creds, &runner, 5).await;
    assert_eq!(claim.status, 200, "{}", claim.text);
    let job = claim.body;
    assert_eq!(job["execution_id"], id.as_str());
    assert_eq!(job["attempt"], 1);
    assert!(job["job_token"].as_str().expect("token").starts_with("hfj_"));
    assert_eq!(job["flow"]["id"], flow.as_str());
    assert_eq!(job["flow"]["name"], "protocol");
    assert_eq!(job["flow"]["definition"], two_nodes());
    assert_eq!(job["secrets"], json!({"API_PASSWORD": "hunter2-secret"}), "only referenced secrets");
    assert_eq!(job["variables"], json!({"user": "env-user", "region": "us"}), "launch > environment > organization");
    assert_eq!(job["environment"], "staging");
    assert_eq!(job["timeout_s"], 300);
    assert!(job["lease_expires_at"].as_str().is_some());

    let running = app.execution(&flow, &id).await;
    assert_eq!(running["status"], "running");
    assert_eq!(running["runner_id"], runner.as_str());
    assert!(running["started_at"].as_str().is_some());

    let reply = app.job_call(&job, "nodes", node_result("login", "passed")).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body, json!({"accepted": 1, "cancel": false}));
    let again = app.job_call(&job, "nodes", json!({"results": [node_result("login", "failed")]})).await;
    assert_eq!(again.body["accepted"], 0, "idempotent per (job, attempt, node)");
    let unknown = app.job_call(&job, "nodes", node_result("nope", "passed")).await;
    assert_eq!((unknown.status.as_u16(), unknown.code()), (400, "invalid_request"));
    let bad = app.job_call(&job, "nodes", json!({"node_id": "wait"})).await;
    assert_eq!(bad.status, 400);
    // A report nested 100,000 deep is refused by both readers (neither recurses past its limit), storing nothing.
    let deep = format!(
        r#"{{"results": [{{"node_id": "wait", "status": "passed", "started_at": "2026-11-22T10:20:47Z",
            "duration_ms": 1, "extracted": {{"x": {}1{}}}, "assertions": [], "retries": 0}}]}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let job_id: JobId = job["job_id"].as_str().and_then(|id| id.parse().ok()).expect("job id");
    let as_job = app.api_with(Credentials::JobToken(job["job_token"].as_str().expect("token").to_owned()));
    let request = as_job.request(Method::POST, &runner_route::job_nodes(job_id));
    let deep = request.header("content-type", "application/json").body(deep).send().await.expect("send");
    assert_eq!(deep.status(), 400, "{}", deep.text().await.unwrap_or_default());
    // An integral float is an integer here as in every body (a report is read again the strict way for it).
    let mut waited = node_result("wait", "passed");
    waited["duration_ms"] = json!(7.0);
    assert_eq!(app.job_call(&job, "nodes", json!({"results": [waited]})).await.status, 200);

    let done = app.job_call(&job, "complete", json!({"status": "succeeded"})).await;
    assert_eq!(done.status, 200, "{}", done.text);
    assert_eq!(done.body["status"], "succeeded");
    assert_eq!(done.body["summary"], json!({"nodes_total": 2, "passed": 2, "failed": 0, "skipped": 0}));
    assert!(done.body["duration_ms"].as_i64().is_some());
    for action in ["nodes", "complete"] {
        let late = app.job_call(&job, action, json!({"status": "failed"})).await;
        assert_eq!((late.status.as_u16(), late.code()), (401, "unauthorized"), "the token died with the job");
    }

    let items = api.executions().nodes(&flow, &id).await.expect("nodes").items;
    assert_eq!(items.iter().map(|n| n.node_id.as_str()).collect::<Vec<_>>(), ["login", "wait"]);
    assert_eq!(items[0].status.as_str(), "passed", "the first report of a node stands");
    assert_eq!(items[0].attempt, 1);
    assert_eq!(json!(items[0].extracted), json!({"token": "t-1"}));
    assert_eq!((items[0].duration_ms, items[1].duration_ms), (3, 7));

    let list = api.executions().list(&flow, &[]).await.expect("list");
    assert_eq!(list.items[0].id.to_string(), id);
    let flow_body = api.flows().get(&flow).await.expect("flow");
    assert_eq!(flow_body.last_status, Some(ExecutionStatus::Succeeded));

    // A late subscriber gets the whole story, then the stream closes.
    let mut sse = Sse::open(&app, &format!("/flows/{flow}/executions/{id}/stream"), None).await;
    let events = sse.until_closed().await;
    let kinds: Vec<String> = events
        .iter()
        .map(|e| format!("{}:{}", e.data["type"].as_str().unwrap_or(""), e.data["node_id"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        kinds,
        [
            "execution.status:",
            "execution.status:",
            "node.started:login",
            "node.completed:login",
            "node.started:wait",
            "node.completed:wait",
            "execution.completed:"
        ]
    );
    let ids: Vec<String> = events.iter().map(|e| e.id.clone().expect("id")).collect();
    assert_eq!(ids, ["1", "2", "3", "4", "5", "6", "7"]);
    assert_eq!(events[0].data["status"], "queued");
    assert_eq!(events[1].data["status"], "running");
    assert_eq!(events[3].data["extracted"], json!({"token": "t-1"}));
    assert_eq!(events[6].data["status"], "succeeded");
    assert_eq!(events[6].data["summary"]["passed"], 2);
    let mut resumed = Sse::open(&app, &format!("/flows/{flow}/executions/{id}/stream"), Some("5")).await;
    let rest = resumed.until_closed().await;
    assert_eq!(rest.iter().map(|e| e.id.clone().expect("id")).collect::<Vec<_>>(), ["6", "7"]);
}

#[tokio::test]
async fn the_stream_delivers_events_live_and_ends_with_the_execution() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("live").await;
    let id = app.launch_draft(&flow).await;
    let mut sse = Sse::open(&app, &format!("/flows/{flow}/executions/{id}/stream"), None).await;
    assert_eq!(sse.event().await.data["status"], "queued");
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let job = app.next_job(&creds, &runner, 5).await.body;
    assert_eq!(sse.event().await.data["status"], "running");
    assert_eq!(sse.event().await.data["type"], "node.started");
    app.job_call(&job, "nodes", node_result("wait", "passed")).await;
    let completed = sse.event().await;
    assert_eq!(completed.data["type"], "node.completed");
    assert_eq!(completed.data["status"], "passed");
    app.job_call(&job, "complete", json!({"status": "failed", "error": "boom"})).await;
    let last = sse.event().await;
    assert_eq!(last.data["type"], "execution.completed");
    assert_eq!(last.data["status"], "failed");
    assert_eq!(sse.next_line().await, None, "the server closes the stream after the final event");
}

/// Hardening regression: a quiet execution's stream waits for a wake-up instead of asking PostgreSQL every second.
/// An event written behind the server's back (no NOTIFY) stays unseen for 3 s, then a bare NOTIFY delivers it.
#[tokio::test]
async fn execution_streams_wait_for_a_wake_instead_of_polling() {
    // Keep-alive comments every 200 ms: one arriving proves the stream had nothing to send, so it was waiting.
    let app = TestApp::spawn_with(|s| s.stream_keep_alive = Duration::from_millis(200)).await;
    let flow = app.delay_flow("quiet").await;
    let id = app.launch_draft(&flow).await;
    let mut sse = Sse::open(&app, &format!("/flows/{flow}/executions/{id}/stream"), None).await;
    assert_eq!(sse.event().await.data["status"], "queued");
    while !sse.line().await.starts_with(':') {}

    let planted = json!({"type": "execution.status", "status": "queued", "note": "planted"}).to_string();
    sqlx::query(
        "WITH bumped AS (UPDATE executions SET event_count = event_count + 1 WHERE id = $1::uuid RETURNING event_count)
         INSERT INTO execution_events (execution_id, seq, data) SELECT $1::uuid, event_count, $2 FROM bumped",
    )
    .bind(&id)
    .bind(&planted)
    .execute(&app.pool)
    .await
    .expect("plant an event without a wake-up");
    for _ in 0..4 {
        sse.quiet().await; // 4 x 0.7 s: a once-a-second poll would have delivered it by now.
    }

    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(hookflow_control_plane::signals::EXECUTIONS_CHANNEL)
        .bind(&id)
        .execute(&app.pool)
        .await
        .expect("notify");
    let woken = sse.event().await;
    assert_eq!(woken.id.as_deref(), Some("2"));
    assert_eq!(woken.data["note"], "planted");
}

/// Transitions NOTIFY only executions a stream watches (a NOTIFY serializes commits cluster-wide): the unwatched
/// execution's cancellation sends none, the watched one's wakes its stream, and a closed stream gives its mark back.
#[tokio::test]
async fn transitions_notify_only_the_executions_a_stream_watches() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("watched").await;
    let watched = app.launch_draft(&flow).await;
    let unwatched = app.launch_draft(&flow).await;
    let mut notices = Notices::listen(&app.pool, hookflow_control_plane::signals::EXECUTIONS_CHANNEL).await;

    let mut sse = Sse::open(&app, &format!("/flows/{flow}/executions/{watched}/stream"), None).await;
    assert_eq!(sse.event().await.data["status"], "queued");
    let watchers = async |id: &str| -> i64 {
        let sql = "SELECT watchers::int8 FROM executions WHERE id = $1::uuid";
        sqlx::query_scalar(sql).bind(id).fetch_one(&app.pool).await.expect("watchers")
    };
    assert_eq!((watchers(&watched).await, watchers(&unwatched).await), (1, 0));

    // The unwatched one ends first; notifications arrive in commit order, so any for it would come first.
    for id in [&unwatched, &watched] {
        app.api().executions().cancel(&flow, id).await.expect("cancel");
    }
    assert_eq!(notices.next().await, watched, "the unwatched execution's transition sent no NOTIFY");
    let completed = sse.event().await;
    assert_eq!(
        (completed.data["type"].as_str(), completed.data["status"].as_str()),
        (Some("execution.completed"), Some("cancelled"))
    );

    // The stream ended with the execution: its mark goes back.
    drop(sse);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while watchers(&watched).await != 0 {
        assert!(tokio::time::Instant::now() < deadline, "the closed stream's mark stayed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn long_polls_wait_then_answer_204_or_wake_on_launch() {
    let app = TestApp::spawn_for_execution().await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let empty = app.next_job(&creds, &runner, 1).await;
    assert_eq!(empty.status, 204);
    let flow = app.delay_flow("wake").await;
    let poll = {
        let (base, creds, runner) = (app.base.clone(), creds.clone(), runner.clone());
        tokio::spawn(async move {
            let response = reqwest::Client::new()
                .post(format!("{base}/runner/jobs/next"))
                .header(header::API_KEY, &creds.key)
                .header(header::ORGANIZATION, creds.org.to_string())
                .json(&json!({"runner_id": runner, "wait_s": 30}))
                .send()
                .await
                .expect("poll");
            (response.status(), std::time::Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let launched = std::time::Instant::now();
    app.launch(&flow, json!({})).await;
    let (status, answered) = poll.await.expect("poll task");
    assert_eq!(status, 200, "the waiting poll got the job");
    assert!(answered.duration_since(launched) < Duration::from_secs(25), "well before its 30 s wait ran out");

    let too_long = app.next_job(&creds, &runner, 61).await;
    too_long.assert_refused(400, "invalid_request", "wait_s");
}

/// `max_jobs`: one poll claims up to that many jobs, each with its own token good for its own job only; the
/// single-job answer stays for runners that do not ask.
#[tokio::test]
async fn a_poll_with_max_jobs_claims_several_each_with_its_own_token() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("batch").await;
    let mut launched = futures_util::future::join_all((0..5).map(|_| app.launch_draft(&flow))).await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let poll = |max_jobs: Value, wait_s: u64| {
        let body = json!({"runner_id": runner, "wait_s": wait_s, "max_jobs": max_jobs});
        app.call(Method::POST, runner_route::NEXT_JOB, Some(&creds), Some(body))
    };
    let first = poll(json!(3), 5).await;
    assert_eq!(first.status, 200, "{}", first.text);
    let jobs = first.body["jobs"].as_array().expect("a batch").clone();
    assert_eq!(jobs.len(), 3);
    let second = poll(json!(3), 5).await.body["jobs"].as_array().expect("a batch").clone();
    assert_eq!(second.len(), 2, "only what was queued");
    assert_eq!(poll(json!(3), 1).await.status, 204, "nothing left: the poll waits, then answers 204");
    let mut claimed: Vec<String> =
        jobs.iter().chain(&second).map(|j| j["execution_id"].as_str().expect("id").to_owned()).collect();
    claimed.sort();
    launched.sort();
    assert_eq!(claimed, launched, "each execution claimed once");
    let tokens: std::collections::BTreeSet<&str> =
        jobs.iter().chain(&second).map(|j| j["job_token"].as_str().expect("token")).collect();
    assert_eq!(tokens.len(), 5, "a token per job");
    // A job's token is good for that job only.
    let mut crossed = jobs[0].clone();
    crossed["job_token"] = jobs[1]["job_token"].clone();
    assert_eq!(app.job_call(&crossed, "nodes", node_result("wait", "passed")).await.status, 401);
    for job in jobs.iter().chain(&second) {
        assert_eq!(app.job_call(job, "complete", json!({"status": "succeeded"})).await.status, 200);
    }
    // Limits.
    for bad in [json!(0), json!(101), json!(-1), json!("3")] {
        let reply = poll(bad.clone(), 1).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "max_jobs {bad}");
    }
}

#[tokio::test]
async fn jobs_go_only_to_runners_carrying_every_required_label() {
    let app = TestApp::spawn_for_execution().await;
    let creds = app.runner_creds(app.admin.org).await;
    let plain = app.register_runner(&creds, &["linux"]).await;
    let gpu = app.register_runner(&creds, &["linux", "gpu", "eu"]).await;
    let flow = app.delay_flow("labels").await;
    let execution = app.launch(&flow, json!({"runner_labels": ["gpu", "eu"]})).await;
    assert_eq!(app.next_job(&creds, &plain, 1).await.status, 204, "missing a label");
    let claimed = app.next_job(&creds, &gpu, 1).await;
    assert_eq!(claimed.status, 200);
    assert_eq!(claimed.body["execution_id"], execution["id"]);
    let unlabelled = app.launch(&flow, json!({})).await;
    assert_eq!(app.next_job(&creds, &plain, 1).await.body["execution_id"], unlabelled["id"], "no labels: anyone");
    // A body the typed client cannot make: the wire spelling is the point.
    let bad = app.admin(Method::POST, &format!("/flows/{flow}/launch"), Some(json!({"runner_labels": [""]}))).await;
    assert_eq!((bad.status.as_u16(), bad.code()), (400, "invalid_request"));
}

#[tokio::test]
async fn expired_leases_are_retried_as_the_next_attempt_and_stale_reports_get_409() {
    let app = TestApp::spawn_for_execution().await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let flow = app.delay_flow("lease").await;
    let id = app.launch_draft(&flow).await;
    let first = app.next_job(&creds, &runner, 5).await.body;
    // Heartbeats keep the lease alive past its 2 s.
    let runner_id: RunnerId = runner.parse().expect("runner id");
    let as_runner = app.api_as(&creds);
    for _ in 0..3 {
        let metrics = Metrics { cpu_percent: 12.5, memory_used_bytes: 1000, load_avg_1m: 0.5 };
        let body = Heartbeat { running_jobs: vec![job_id(&first)], metrics: Some(metrics) };
        let beat = as_runner.runners().heartbeat(runner_id, &body).await.expect("a heartbeat");
        assert!(beat.cancel.is_empty(), "{beat:?}");
        tokio::time::sleep(Duration::from_millis(900)).await;
    }
    assert_eq!(app.execution(&flow, &id).await["status"], "running", "heartbeats extended the lease");
    let shown = app.api().runners().get(runner_id).await.expect("the runner");
    assert_eq!(shown.status, "online");
    assert_eq!(shown.metrics.map(|m| m.cpu_percent), Some(12.5));
    assert_eq!(shown.running_jobs, 1);

    // Silence: the rescuer requeues it as attempt 2.
    let requeued = app.wait_execution(&flow, &id, Duration::from_secs(10), |e| e["attempt"] == 2).await;
    assert_eq!(requeued["status"], "queued");
    let stale = app.job_call(&first, "nodes", node_result("wait", "passed")).await;
    assert_eq!((stale.status.as_u16(), stale.code()), (409, "conflict"));
    let beat = heartbeat(&app, &creds, &runner, &first).await;
    assert_eq!(beat.cancel, [job_id(&first)], "the runner is told to drop the stale job");
    let second = app.next_job(&creds, &runner, 5).await.body;
    assert_eq!(second["attempt"], 2);
    assert_ne!(second["job_token"], first["job_token"]);
    assert_eq!(app.job_call(&first, "complete", json!({"status": "succeeded"})).await.status, 409);
    assert_eq!(app.job_call(&second, "nodes", node_result("wait", "passed")).await.status, 200);
    assert_eq!(app.job_call(&second, "complete", json!({"status": "succeeded"})).await.status, 200);
    let done = app.execution(&flow, &id).await;
    assert_eq!((done["status"].as_str(), done["attempt"].as_i64()), (Some("succeeded"), Some(2)));

    // Three silent attempts: failed with runner_lost.
    let lost = app.launch_draft(&flow).await;
    for attempt in 1..=3 {
        let job = app.next_job(&creds, &runner, 10).await;
        assert_eq!(job.body["attempt"], attempt, "{}", job.text);
    }
    let failed = app.wait_finished(&flow, &lost).await;
    assert_eq!((failed["status"].as_str(), failed["error"].as_str()), (Some("failed"), Some("runner_lost")));
    assert_eq!(failed["max_attempts"], 3);
}

#[tokio::test]
async fn cancelling_stops_queued_runs_at_once_and_tells_runners_of_running_ones() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("cancel").await;
    let queued = app.launch_draft(&flow).await;
    let api = app.api();
    let cancel = api.send_raw(api.request(Method::POST, &format!("/flows/{flow}/executions/{queued}/cancel"))).await;
    let cancel = cancel.expect("cancel");
    assert_eq!(cancel.status(), 202);
    let cancel: hookflow_shared::api::executions::Execution = cancel.json().await.expect("an execution");
    assert_eq!(cancel.status, ExecutionStatus::Cancelled);
    let again = api.executions().cancel(&flow, &queued).await.expect_err("already over");
    assert_eq!((again.status(), again.code()), (409, "conflict"));

    let running = app.launch_draft(&flow).await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let job = app.next_job(&creds, &runner, 5).await.body;
    assert_eq!(job["execution_id"], running.as_str(), "the cancelled one was never handed out");
    let asked = api.executions().cancel(&flow, &running).await.expect("cancel");
    assert_eq!(asked.status, ExecutionStatus::Running);
    let beat = heartbeat(&app, &creds, &runner, &job).await;
    assert_eq!(beat.cancel, [job_id(&job)]);
    assert_eq!(app.job_call(&job, "nodes", node_result("wait", "skipped")).await.body["cancel"], true);
    app.job_call(&job, "complete", json!({"status": "cancelled"})).await;
    assert_eq!(app.execution(&flow, &running).await["status"], "cancelled");
}

#[tokio::test]
async fn idempotent_launches_make_one_execution_even_when_raced() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("idem").await;
    let launches = (0..50).map(|_| app.launch_idempotent(&flow, "deploy-42", json!({"variables": {"sha": "abc"}})));
    let answers: Vec<_> = join_all(launches)
        .await
        .into_iter()
        .map(|reply| {
            let replayed = reply.headers.get(header::IDEMPOTENT_REPLAYED).map(|v| v.to_str().unwrap_or("").to_owned());
            (reply.status.as_u16(), replayed, reply.body["id"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    let created: Vec<_> = answers.iter().filter(|a| a.0 == 201).collect();
    assert_eq!(created.len(), 1, "{answers:?}");
    assert!(answers.iter().all(|a| a.2 == created[0].2), "one execution id for all");
    assert!(answers.iter().filter(|a| a.0 == 200).all(|a| a.1.as_deref() == Some("true")));
    let count = app.rows("executions").await;
    assert_eq!(count, 1);

    let send = |key, body| app.launch_idempotent(&flow, key, body);
    let other = send("deploy-42", json!({"variables": {"sha": "def"}})).await;
    assert_eq!((other.status.as_u16(), other.code()), (422, "idempotency_key_reused"));
    assert_eq!(send("deploy-43", json!({"variables": {"sha": "def"}})).await.status, 201, "a new key launches");
    let empty_key = send("", json!({})).await;
    assert_eq!(empty_key.status, 400);
}

#[tokio::test]
async fn launch_resolves_versions_environments_and_refuses_what_is_not_there() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("versions").await;
    let path = format!("/flows/{flow}/launch");
    let api = app.api();
    let latest: Launch = serde_json::from_value(json!({"version": "latest"})).expect("a launch");
    let none = api.flows().launch(&flow, &latest).await.expect_err("nothing published");
    none.assert_refused(400, "invalid_request", "version");
    api.flows().publish(&flow, &Publish::default()).await.expect("publish");
    let latest = app.launch(&flow, json!({"version": "latest"})).await;
    assert_eq!(latest["flow_version"], 1);
    assert_eq!(app.launch(&flow, json!({"version": 1})).await["flow_version"], 1);
    let seven: Launch = serde_json::from_value(json!({"version": 7})).expect("a launch");
    assert_eq!(api.flows().launch(&flow, &seven).await.expect_err("no version 7").status(), 400);
    let prod = Launch { environment: Some("prod".into()), ..Default::default() };
    let env = api.flows().launch(&flow, &prod).await.expect_err("no such environment");
    assert_eq!(env.status(), 400);
    assert!(env.message().contains("environment"));
    let unknown = app.admin(Method::POST, &path, Some(json!({"colour": "red"}))).await;
    assert_eq!(unknown.status, 400);
    assert!(unknown.text.contains("colour"));
    let mode = app.admin(Method::POST, &path, Some(json!({"mode": "sometimes"}))).await;
    assert_eq!(mode.status, 400);
    let empty = app
        .client
        .post(app.url(&path))
        .header(header::API_KEY, &app.admin.key)
        .header(header::ORGANIZATION, app.admin.org.to_string())
        .send()
        .await
        .expect("send");
    assert_eq!(empty.status(), 201, "an empty body launches the draft");
    let absent = api.flows().launch(uuid::Uuid::now_v7(), &Launch::default()).await.expect_err("no such flow");
    assert_eq!((absent.status(), absent.code()), (404, "not_found"));
}

#[tokio::test]
async fn modules_are_resolved_at_launch_and_shipped_with_the_claim() {
    let app = TestApp::spawn_for_execution().await;
    let inner = app.delay_flow("inner").await;
    let outer_definition = json!({"nodes": [{"id": "sub", "kind": "module", "flow_id": inner, "version": "latest"}]});
    let outer = app.create_flow("outer", outer_definition).await;
    let api = app.api();
    let unpublished = api.flows().launch(&outer, &Launch::default()).await.expect_err("an unpublished module");
    assert_eq!(unpublished.status(), 400, "the module has no published version");
    assert!(unpublished.message().contains("sub"));
    api.flows().publish(&inner, &Publish::default()).await.expect("publish");
    app.launch(&outer, json!({})).await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let job = app.next_job(&creds, &runner, 5).await.body;
    let key = format!("{inner}@latest");
    assert_eq!(job["modules"][&key]["nodes"][0]["id"], "wait");
}

#[tokio::test]
async fn launch_by_tag_starts_every_flow_carrying_the_tags() {
    let app = TestApp::spawn_for_execution().await;
    let api = app.api();
    let tags = |tags: &[&str]| Tags::try_from(tags.iter().map(|t| t.to_string()).collect::<Vec<_>>()).expect("tags");
    for (name, with) in [("a", tags(&["smoke", "eu"])), ("b", tags(&["smoke"])), ("c", tags(&["nightly"]))] {
        let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
        let flow = WriteFlow { tags: with, ..WriteFlow::new(name.parse().expect("a name"), definition) };
        api.flows().create(&flow).await.expect("create");
    }
    let smoke = LaunchByTag { tags: tags(&["smoke"]), ..Default::default() };
    let executions = api.flows().launch_by_tag(&smoke).await.expect("launch by tag").executions;
    assert_eq!(executions.len(), 2);
    assert!(executions.iter().all(|e| e.trigger.as_str() == "tag" && e.status == ExecutionStatus::Queued));
    let both = LaunchByTag { tags: tags(&["smoke", "eu"]), ..Default::default() };
    let both = api.flows().launch_by_tag(&both).await.expect("launch by tag");
    assert_eq!(both.executions.len(), 1, "every tag must match");
    let none = api.flows().launch_by_tag(&LaunchByTag::default()).await.expect_err("no tags");
    assert_eq!(none.status(), 400);
    let execute_only = app.api_as(&scoped(&app, app.admin.org, &["flows:execute"]).await);
    let denied = execute_only.flows().launch_by_tag(&smoke).await.expect_err("no flows:read");
    denied.assert_refused(403, "insufficient_scope", "flows:read");
}

#[tokio::test]
async fn ephemeral_launches_hand_the_claim_to_the_caller() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("local").await;
    let execution = app.launch(&flow, json!({"mode": "ephemeral"})).await;
    assert_eq!(execution["status"], "running");
    assert_eq!(execution["max_attempts"], 1);
    let job = execution["job"].clone();
    assert_eq!(job["execution_id"], execution["id"]);
    assert_eq!(app.job_call(&job, "nodes", node_result("wait", "passed")).await.status, 200);
    assert_eq!(app.job_call(&job, "complete", json!({"status": "succeeded"})).await.body["status"], "succeeded");
}

#[tokio::test]
async fn a_retried_ephemeral_launch_gets_its_claim_again_until_something_is_reported() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("local").await;
    let launch = || app.launch_idempotent(&flow, "ci-run-7", json!({"mode": "ephemeral"}));
    let first = launch().await;
    assert_eq!(first.status, 201);
    // The first answer was lost: the retry replays the launch and hands the claim out again.
    let again = launch().await;
    assert_eq!(again.status, 200);
    assert_eq!(again.body["id"], first.body["id"]);
    let (old_job, job) = (first.body["job"].clone(), again.body["job"].clone());
    assert_ne!(job["job_id"], old_job["job_id"]);
    assert_ne!(job["job_token"], old_job["job_token"]);
    assert_eq!(
        app.job_call(&old_job, "nodes", node_result("wait", "passed")).await.status,
        409,
        "the old claim is dead"
    );
    // An empty report is a keep-alive: it extends the lease past what the 2 s lease would allow.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(900)).await;
        let alive = app.job_call(&job, "nodes", json!({"results": []})).await;
        assert_eq!((alive.status.as_u16(), alive.body["accepted"].as_i64()), (200, Some(0)), "{}", alive.text);
    }
    assert_eq!(app.job_call(&job, "nodes", node_result("wait", "passed")).await.status, 200);
    // Once something was reported, a retry only replays the answer: the claim is not handed out twice.
    let late = launch().await;
    assert_eq!(late.status, 200);
    assert!(late.body.get("job").is_none(), "{}", late.text);
    assert_eq!(app.job_call(&job, "complete", json!({"status": "succeeded"})).await.body["status"], "succeeded");
}

#[tokio::test]
async fn scopes_and_organizations_fence_every_execution_operation() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("fenced").await;
    let id = app.launch_draft(&flow).await;
    let other = app.new_org("Other").await;
    for (method, path) in [
        (Method::POST, format!("/flows/{flow}/launch")),
        (Method::GET, format!("/flows/{flow}/executions")),
        (Method::GET, format!("/flows/{flow}/executions/{id}")),
        (Method::GET, format!("/flows/{flow}/executions/{id}/nodes")),
        (Method::GET, format!("/flows/{flow}/executions/{id}/stream")),
        (Method::POST, format!("/flows/{flow}/executions/{id}/cancel")),
        (Method::GET, format!("/flows/{flow}/analytics/executions")),
    ] {
        let reply = app.call(method.clone(), &path, Some(&other), None).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (404, "not_found"), "{method} {path}");
    }
    let reader = app.api_as(&scoped(&app, app.admin.org, &["flows:read"]).await);
    let launch = reader.flows().launch(&flow, &Launch::default()).await.expect_err("no flows:execute");
    assert_eq!((launch.status(), launch.code()), (403, "insufficient_scope"));
    assert_eq!(reader.executions().cancel(&flow, &id).await.expect_err("no flows:execute").status(), 403);
    let executor = app.api_as(&scoped(&app, app.admin.org, &["flows:execute"]).await);
    assert_eq!(executor.executions().list(&flow, &[]).await.expect_err("no flows:read").status(), 403);
    let anonymous = app.api_with(Credentials::None);
    assert_eq!(anonymous.executions().list(&flow, &[]).await.expect_err("anonymous").status(), 401);

    // Runner endpoints: the runner:complete scope, and runners of another organization are 404.
    let no_runner_scope = scoped(&app, app.admin.org, &["flows:read"]).await;
    let denied = app
        .call(Method::POST, runner_route::RUNNERS, Some(&no_runner_scope), Some(json!({"name": "x", "version": "1",
            "max_concurrency": 1, "host": {"hostname": "h", "os": "linux", "arch": "x86_64", "cpus": 1, "memory_bytes": 1}})))
        .await;
    assert_eq!((denied.status.as_u16(), denied.code()), (403, "insufficient_scope"));
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let other_runner_creds = app.runner_creds(other.org).await;
    assert_eq!(app.next_job(&other_runner_creds, &runner, 1).await.status, 404);
    let runner_id: RunnerId = runner.parse().expect("runner id");
    let beat = app.api_as(&other_runner_creds).runners().heartbeat(runner_id, &Heartbeat::default()).await;
    assert_eq!(beat.expect_err("another organization's runner").status(), 404);
    let theirs_api = app.api_as(&other);
    assert_eq!(theirs_api.runners().get(runner_id).await.expect_err("not theirs").status(), 404);
    assert_eq!(theirs_api.runners().delete(runner_id).await.expect_err("not theirs").status(), 404);
    // Another organization's runner never sees this organization's work.
    let theirs = app.register_runner(&other_runner_creds, &[]).await;
    assert_eq!(app.next_job(&other_runner_creds, &theirs, 1).await.status, 204);
    // A forged job token is 401.
    let forged = json!({"job_id": uuid::Uuid::now_v7(), "job_token": "hfj_0000000000000000000000000000000000000"});
    assert_eq!(app.job_call(&forged, "complete", json!({"status": "succeeded"})).await.status, 401);
}

#[tokio::test]
async fn runners_are_listed_and_removing_one_requeues_its_jobs() {
    let app = TestApp::spawn_for_execution().await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &["linux"]).await;
    let api = app.api();
    let runner_id: RunnerId = runner.parse().expect("runner id");
    let listed = api.runners().list(&[]).await.expect("list");
    let item = &listed.items[0];
    assert_eq!(item.id, runner_id);
    assert_eq!(item.labels, ["linux"]);
    assert_eq!(item.status, "online");
    assert_eq!(item.host.as_ref().map(|h| h.cpus), Some(2));
    let reader = app.api_as(&scoped(&app, app.admin.org, &["runners:read"]).await);
    reader.runners().list(&[]).await.expect("runners:read lists");
    assert_eq!(reader.runners().delete(runner_id).await.expect_err("read only").status(), 403);

    let flow = app.delay_flow("requeue").await;
    let id = app.launch_draft(&flow).await;
    let job = app.next_job(&creds, &runner, 5).await.body;
    api.runners().delete(runner_id).await.expect("remove the runner");
    let requeued = app.execution(&flow, &id).await;
    assert_eq!((requeued["status"].as_str(), requeued["attempt"].as_i64()), (Some("queued"), Some(2)));
    assert_eq!(app.job_call(&job, "complete", json!({"status": "succeeded"})).await.status, 409);
    assert_eq!(app.next_job(&creds, &runner, 1).await.status, 404, "a removed runner cannot poll");
    assert_eq!(api.runners().get(runner_id).await.expect_err("removed").status(), 404);
    let bad = app
        .call(
            Method::POST,
            runner_route::RUNNERS,
            Some(&creds),
            Some(json!({"name": "", "version": "1", "max_concurrency": 0,
            "host": {"hostname": "h", "os": "linux", "arch": "x86_64", "cpus": 1, "memory_bytes": 1}})),
        )
        .await;
    assert_eq!(bad.status, 400);
}

#[tokio::test]
async fn schedules_fire_once_per_occurrence_across_replicas() {
    let app = TestApp::spawn_for_execution().await;
    let replica = app.replica().await;
    let every_2s = WriteFlow {
        schedule: Some("*/2 * * * * *".into()),
        ..WriteFlow::new(
            "every-2s".parse().expect("a name"),
            json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]}),
        )
    };
    let flow = app.api().flows().create(&every_2s).await.expect("create").id.to_string();
    tokio::time::sleep(Duration::from_secs(7)).await;
    let created: Vec<(chrono::DateTime<chrono::Utc>, String)> =
        sqlx::query_as("SELECT created_at, trigger FROM executions WHERE flow_id = $1::uuid ORDER BY created_at")
            .bind(&flow)
            .fetch_all(&app.pool)
            .await
            .expect("executions");
    assert!(created.len() >= 2, "fired on schedule: {created:?}");
    assert!(created.iter().all(|(_, trigger)| trigger == "schedule"));
    for pair in created.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        assert!(
            gap >= chrono::TimeDelta::milliseconds(1000),
            "one launch per occurrence, not one per replica: {created:?}"
        );
    }
    // Removing the schedule stops it.
    let unscheduled = PatchFlow { schedule: Patch::Clear, ..Default::default() };
    app.api().flows().patch(&flow, &unscheduled).await.expect("patch");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = app.rows("executions").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = app.rows("executions").await;
    assert_eq!(before, after);
    drop(replica);
}

#[tokio::test]
async fn execution_analytics_count_outcomes_and_durations() {
    let app = TestApp::spawn_for_execution().await;
    let flow = app.delay_flow("stats").await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    for status in ["succeeded", "succeeded", "failed"] {
        app.launch(&flow, json!({})).await;
        let job = app.next_job(&creds, &runner, 5).await.body;
        app.job_call(&job, "complete", json!({"status": status})).await;
    }
    app.launch(&flow, json!({})).await;
    let api = app.api();
    let stats = api.flows().analytics(&flow, &[("bucket", "minute")]).await.expect("stats");
    let points = &stats.points;
    assert!(points.len() >= 1440, "every minute of the default 24 h window");
    let succeeded: i64 = points.iter().map(|p| p.succeeded).sum();
    let failed: i64 = points.iter().map(|p| p.failed).sum();
    assert_eq!((succeeded, failed), (2, 1));
    let busy = points.iter().find(|p| p.succeeded > 0).expect("a busy bucket");
    assert!(busy.p50_ms.is_some() && busy.p95_ms.is_some());
    assert_eq!(points[0].p50_ms, None, "an empty bucket has no percentiles");
    let overview = api.organization().overview(&[]).await.expect("overview");
    assert_eq!(overview.executions["succeeded"], 2);
    assert_eq!(overview.executions["failed"], 1);
    assert_eq!(overview.executions["queued"], 1);
    let bad = api.flows().analytics(&flow, &[("bucket", "week")]).await.expect_err("no week buckets");
    assert_eq!(bad.status(), 400);
}

/// A claimed job's id.
fn job_id(job: &Value) -> JobId {
    job["job_id"].as_str().and_then(|id| id.parse().ok()).expect("a job id")
}

/// A runner's heartbeat naming the one job it runs.
async fn heartbeat(app: &TestApp, creds: &Creds, runner: &str, job: &Value) -> HeartbeatReply {
    let body = Heartbeat { running_jobs: vec![job_id(job)], metrics: None };
    let runner = runner.parse().expect("runner id");
    app.api_as(creds).runners().heartbeat(runner, &body).await.expect("a heartbeat")
}
