//! Completions that carry a runner's last node results (`results` of `POST /runner/jobs/{job_id}/complete`):
//! stored as reports store them, with the same events in the same order and the same summary; each refusal (a
//! node the flow lacks, a malformed result, another job's token, a dead token, a stale attempt) ends nothing and
//! stores nothing; another organization's job token is refused; and the runner library, facing a control plane
//! older than `results`, reports them first and completes alone.

use hookflow_runner::client::{Client, Connection};
use hookflow_runner::engine::Engine;
use hookflow_runner::execute::execute;
use hookflow_shared::api::executions::Launch;
use hookflow_shared::api::flows::WriteFlow;
use hookflow_shared::api::runners::Job;
use hookflow_tests::TestApp;
use hookflow_tests::app::{Creds, Reply};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn three_nodes() -> Value {
    json!({"nodes": [
        {"id": "a", "kind": "delay", "delay_ms": 1},
        {"id": "b", "kind": "delay", "delay_ms": 1},
        {"id": "c", "kind": "delay", "delay_ms": 1}
    ]})
}

fn result(node: &str, status: &str) -> Value {
    json!({"node_id": node, "status": status, "started_at": "2026-11-22T10:20:47.123456Z", "duration_ms": 3,
           "extracted": {"token": "t-\"1\""}, "assertions": [], "error": null, "retries": 0})
}

fn results(nodes: &[(&str, &str)]) -> Vec<Value> {
    nodes.iter().map(|(node, status)| result(node, status)).collect()
}

/// An execution's events as stored, in order; `execution.completed` without its `duration_ms` (a time).
async fn stored_events(app: &TestApp, execution: &str) -> Vec<String> {
    let rows: Vec<String> =
        sqlx::query_scalar("SELECT data FROM execution_events WHERE execution_id = $1::uuid ORDER BY seq")
            .bind(execution)
            .fetch_all(&app.pool)
            .await
            .expect("events");
    rows.into_iter()
        .map(|text| {
            let mut event: Value = serde_json::from_str(&text).expect("an event");
            if event["type"] == "execution.completed" {
                event.as_object_mut().expect("an object").remove("duration_ms");
                return event.to_string();
            }
            text
        })
        .collect()
}

/// An execution's stored node results, as the API shows them.
async fn node_results(app: &TestApp, flow: &str, execution: &str) -> Value {
    let items = app.api().executions().nodes(flow, execution).await.expect("the node results").items;
    serde_json::to_value(items).expect("json")
}

/// A server, a runner's credentials, a registered runner and a flow of `definition` named `name`.
async fn runner_and_flow(name: &str, definition: Value) -> (TestApp, Creds, String, String) {
    let app = TestApp::spawn_for_execution().await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &[]).await;
    let flow = app.create_flow(name, definition).await;
    (app, creds, runner, flow)
}

/// A launch of `flow` and its claim: the execution id and the job.
async fn claimed(app: &TestApp, creds: &Creds, runner: &str, flow: &str) -> (String, Value) {
    let id = app.launch_draft(flow).await;
    let job = app.next_job(creds, runner, 5).await;
    assert_eq!(job.status, 200, "{}", job.text);
    assert_eq!(job.body["execution_id"], id.as_str());
    (id, job.body)
}

fn ok(reply: &Reply) {
    assert_eq!(reply.status, 200, "{}", reply.text);
}

/// Node ids with their statuses.
type Outcomes<'a> = &'a [(&'a str, &'a str)];

/// Each way a runner may split its results between reports and the completion gives the same stored results,
/// events and summary as reporting them all before completing.
#[tokio::test]
async fn results_carried_by_a_completion_are_stored_as_reports_store_them() {
    let (app, creds, runner, flow) = runner_and_flow("carried", three_nodes()).await;
    // (reported first, carried by the completion, the final status)
    let splits: [(Outcomes, Outcomes, &str); 4] = [
        (&[], &[("a", "passed"), ("b", "passed"), ("c", "passed")], "succeeded"),
        (&[("a", "passed")], &[("b", "passed"), ("c", "passed")], "succeeded"),
        (&[], &[("a", "failed")], "failed"),
        (&[("a", "passed")], &[("b", "error")], "error"),
    ];
    for (reported, carried, status) in splits {
        let (before, job) = claimed(&app, &creds, &runner, &flow).await;
        if !reported.is_empty() {
            ok(&app.job_call(&job, "nodes", json!({"results": results(reported)})).await);
        }
        ok(&app.job_call(&job, "nodes", json!({"results": results(carried)})).await);
        let old = app.job_call(&job, "complete", json!({"status": status, "error": "why"})).await;
        ok(&old);

        let (after, job) = claimed(&app, &creds, &runner, &flow).await;
        if !reported.is_empty() {
            ok(&app.job_call(&job, "nodes", json!({"results": results(reported)})).await);
        }
        let new = app
            .job_call(&job, "complete", json!({"status": status, "error": "why", "results": results(carried)}))
            .await;
        ok(&new);

        let case = format!("{reported:?} reported, {carried:?} carried");
        assert_eq!(stored_events(&app, &after).await, stored_events(&app, &before).await, "{case}");
        assert_eq!(node_results(&app, &flow, &after).await, node_results(&app, &flow, &before).await, "{case}");
        assert_eq!(new.body["summary"], old.body["summary"], "{case}");
        assert_eq!((new.body["status"].as_str(), new.body["error"].as_str()), (Some(status), Some("why")), "{case}");
    }
    // The stream tells the story as before.
    let (id, job) = claimed(&app, &creds, &runner, &flow).await;
    ok(&app.job_call(&job, "complete", json!({"status": "failed", "results": results(&[("a", "failed")])})).await);
    let mut sse = hookflow_tests::sse::Sse::open(&app, &format!("/flows/{flow}/executions/{id}/stream"), None).await;
    let kinds: Vec<String> = sse
        .until_closed()
        .await
        .iter()
        .map(|e| format!("{}:{}", e.data["type"].as_str().unwrap_or(""), e.data["node_id"].as_str().unwrap_or("")))
        .collect();
    let expected = ["execution.status:", "execution.status:", "node.started:a", "node.completed:a", "node.started:b"];
    assert_eq!(kinds[..5], expected);
    assert_eq!(kinds[5], "execution.completed:");
}

/// A flow long enough that PostgreSQL compresses its executions' node ids (1,500 nodes): a completion carrying 400
/// results, out of order, after 1,100 reported, stores what a report of the 400 before the completion stores, each at its node's position with the
/// `node.started` of the node after it; one result for a node the flow lacks among them ends nothing (400).
#[tokio::test]
async fn a_long_flows_completion_places_its_results_as_reports_do() {
    let ids: Vec<String> = (0..1500).map(|i| format!("step-{i:04}")).collect();
    let nodes: Vec<Value> = ids.iter().map(|id| json!({"id": id, "kind": "delay", "delay_ms": 1})).collect();
    let (app, creds, runner, flow) = runner_and_flow("long", json!({"nodes": nodes})).await;
    let outcomes: Vec<(&str, &str)> =
        ids.iter().enumerate().map(|(i, id)| (id.as_str(), if i % 7 == 3 { "failed" } else { "passed" })).collect();
    // Reported in batches of 100 (as a runner does): all but every third of the last 1,200 nodes, which come last,
    // out of order, each followed by a node reported before (so each is told with the `node.started` of the next).
    let late = |i: usize| i >= 300 && i.is_multiple_of(3);
    let reported: Vec<(&str, &str)> = outcomes.iter().enumerate().filter(|(i, _)| !late(*i)).map(|(_, o)| *o).collect();
    let mut carried: Vec<(&str, &str)> =
        outcomes.iter().enumerate().filter(|(i, _)| late(*i)).map(|(_, o)| *o).collect();
    carried.reverse();
    let reported = reported.as_slice();
    let report_all = async |job: &Value, rows: &[(&str, &str)]| {
        for part in rows.chunks(100) {
            ok(&app.job_call(job, "nodes", json!({"results": results(part)})).await);
        }
    };

    let (before, job) = claimed(&app, &creds, &runner, &flow).await;
    report_all(&job, reported).await;
    ok(&app.job_call(&job, "nodes", json!({"results": results(&carried)})).await);
    let old = app.job_call(&job, "complete", json!({"status": "failed"})).await;
    ok(&old);

    let (refused, job) = claimed(&app, &creds, &runner, &flow).await;
    report_all(&job, reported).await;
    let mut stranger = results(&carried);
    stranger.insert(200, result("step-9999", "passed"));
    let reply = app.job_call(&job, "complete", json!({"status": "failed", "results": stranger})).await;
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert!(reply.text.contains("step-9999"), "{}", reply.text);
    let before_refusal = i64::try_from(reported.len()).expect("a count");
    assert_eq!(
        stored_count(&app, &refused).await.0,
        before_refusal,
        "the refused completion stored none of its results"
    );

    let new = app.job_call(&job, "complete", json!({"status": "failed", "results": results(&carried)})).await;
    ok(&new);
    let events = stored_events(&app, &refused).await;
    assert_eq!(events, stored_events(&app, &before).await);
    // Each carried node's next one (reported earlier, in another batch) is announced after it, as a report does.
    let started_after_carried = carried
        .iter()
        .filter_map(|(node, _)| ids.iter().position(|id| id == node).and_then(|i| ids.get(i + 1)))
        .filter(|next| events.iter().rev().take(802).any(|e| e.contains("node.started") && e.contains(next.as_str())))
        .count();
    assert_eq!(started_after_carried, carried.len() - usize::from(carried.iter().any(|(n, _)| *n == "step-1499")));
    assert_eq!(node_results(&app, &flow, &refused).await, node_results(&app, &flow, &before).await);
    assert_eq!(new.body["summary"], old.body["summary"]);
    let failed = outcomes.iter().filter(|(_, status)| *status == "failed").count();
    assert_eq!(new.body["summary"]["failed"], failed);
    let positions: Vec<(String, i32)> =
        sqlx::query_as("SELECT node_id, position FROM node_results WHERE execution_id = $1::uuid ORDER BY position")
            .bind(&refused)
            .fetch_all(&app.pool)
            .await
            .expect("positions");
    let expected: Vec<(String, i32)> = ids.iter().cloned().zip(1..).collect();
    assert_eq!(positions, expected);
}

/// Two results of one node in a report, or in a completion: the first is stored and told, once, and counted once.
#[tokio::test]
async fn of_two_results_of_one_node_the_first_counts() {
    let (app, creds, runner, flow) = runner_and_flow("twice", three_nodes()).await;
    let twice = results(&[("a", "passed"), ("a", "failed"), ("b", "failed"), ("b", "passed")]);
    let (reported, job) = claimed(&app, &creds, &runner, &flow).await;
    ok(&app.job_call(&job, "nodes", json!({"results": twice.clone()})).await);
    ok(&app.job_call(&job, "complete", json!({"status": "failed"})).await);
    let (carried, job) = claimed(&app, &creds, &runner, &flow).await;
    let done = app.job_call(&job, "complete", json!({"status": "failed", "results": twice})).await;
    ok(&done);
    assert_eq!((done.body["summary"]["passed"].as_u64(), done.body["summary"]["failed"].as_u64()), (Some(1), Some(1)));
    for execution in [&reported, &carried] {
        let stored = node_results(&app, &flow, execution).await;
        let statuses: Vec<&str> =
            stored.as_array().expect("a list").iter().filter_map(|r| r["status"].as_str()).collect();
        assert_eq!(statuses, ["passed", "failed"], "{execution}");
        let told: Vec<String> = stored_events(&app, execution)
            .await
            .into_iter()
            .filter(|e| e.contains("node.completed"))
            .map(|e| serde_json::from_str::<Value>(&e).expect("an event"))
            .map(|e| format!("{}:{}", e["node_id"].as_str().unwrap_or(""), e["status"].as_str().unwrap_or("")))
            .collect();
        assert_eq!(told, ["a:passed", "b:failed"], "{execution}");
    }
}

async fn stored_count(app: &TestApp, execution: &str) -> (i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM node_results WHERE execution_id = $1::uuid),
                (SELECT count(*) FROM execution_events WHERE execution_id = $1::uuid)",
    )
    .bind(execution)
    .fetch_one(&app.pool)
    .await
    .expect("counts")
}

#[tokio::test]
async fn a_refused_completion_ends_nothing_and_stores_nothing() {
    let (app, creds, runner, flow) = runner_and_flow("refused", three_nodes()).await;
    let (id, job) = claimed(&app, &creds, &runner, &flow).await;
    let (_, other_job) = claimed(&app, &creds, &runner, &flow).await;
    let before = stored_count(&app, &id).await;

    let unknown = json!({"status": "succeeded", "results": results(&[("a", "passed"), ("nope", "passed")])});
    let reply = app.job_call(&job, "complete", unknown).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{}", reply.text);
    assert!(reply.text.contains("`nope` is not a node of this flow"), "{}", reply.text);
    let malformed = json!({"status": "succeeded", "results": [{"node_id": "a"}]});
    assert_eq!(app.job_call(&job, "complete", malformed).await.status, 400);
    // Another job's token on this job's path.
    let stranger = json!({"status": "succeeded", "results": results(&[("a", "passed")])});
    let foreign = json!({"job_id": job["job_id"], "job_token": other_job["job_token"]});
    let reply = app.job_call(&foreign, "complete", stranger.clone()).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (401, "unauthorized"), "{}", reply.text);
    let reply = app.job_call(&other_job, "complete", stranger).await;
    ok(&reply);
    assert_ne!(reply.body["id"], id.as_str(), "another job's token completes its own job, never this one");
    assert_eq!(stored_count(&app, &id).await, before, "nothing stored by the refused completions");
    assert_eq!(app.execution(&flow, &id).await["status"], "running");

    // Repeats of a reported node are ignored, as in a report.
    ok(&app.job_call(&job, "nodes", json!({"results": results(&[("a", "passed")])})).await);
    let done = app
        .job_call(
            &job,
            "complete",
            json!({"status": "succeeded", "results": results(&[("a", "failed"), ("b", "passed")])}),
        )
        .await;
    ok(&done);
    assert_eq!(done.body["summary"], json!({"nodes_total": 3, "passed": 2, "failed": 0, "skipped": 1}));
    let kinds: Vec<String> = stored_events(&app, &id)
        .await
        .iter()
        .map(|e| serde_json::from_str::<Value>(e).expect("json")["type"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(kinds.iter().filter(|k| *k == "node.completed").count(), 2, "{kinds:?}");
    let dead =
        app.job_call(&job, "complete", json!({"status": "failed", "results": results(&[("c", "passed")])})).await;
    assert_eq!((dead.status.as_u16(), dead.code()), (401, "unauthorized"), "the token died with the job");
    assert_eq!(node_results(&app, &flow, &id).await.as_array().map(Vec::len), Some(2));
}

#[tokio::test]
async fn a_stale_attempt_carries_no_results_in() {
    let (app, creds, runner, flow) = runner_and_flow("stale", three_nodes()).await;
    let (id, first) = claimed(&app, &creds, &runner, &flow).await;
    // No heartbeat: the 2 s lease expires and the execution goes back to the queue as attempt 2.
    app.wait_execution(&flow, &id, Duration::from_secs(10), |e| e["attempt"] == 2).await;
    let late = json!({"status": "succeeded", "results": results(&[("a", "passed")])});
    let reply = app.job_call(&first, "complete", late).await;
    assert_eq!((reply.status.as_u16(), reply.code()), (409, "conflict"), "{}", reply.text);
    assert_eq!(stored_count(&app, &id).await.0, 0, "no result of the stale attempt");
}

#[tokio::test]
async fn another_organizations_job_token_is_refused() {
    let (app, creds, runner, flow) = runner_and_flow("ours", three_nodes()).await;
    let (id, ours) = claimed(&app, &creds, &runner, &flow).await;

    let other = app.new_org("Other").await;
    let other_runner_creds = app.runner_creds(other.org).await;
    let other_runner = app.register_runner(&other_runner_creds, &[]).await;
    let theirs_api = app.api_as(&other);
    let write = WriteFlow::new("theirs".parse().expect("a name"), three_nodes());
    let theirs_flow = theirs_api.flows().create(&write).await.expect("their flow").id.to_string();
    theirs_api.flows().launch(&theirs_flow, &Launch::default()).await.expect("their launch");
    let theirs = app.next_job(&other_runner_creds, &other_runner, 5).await.body;
    assert_eq!(theirs["flow"]["id"], theirs_flow.as_str());

    let carried = json!({"status": "succeeded", "results": results(&[("a", "passed")])});
    for (path_of, token_of) in [(&ours, &theirs), (&theirs, &ours)] {
        let crossed = json!({"job_id": path_of["job_id"], "job_token": token_of["job_token"]});
        let reply = app.job_call(&crossed, "complete", carried.clone()).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (401, "unauthorized"), "{}", reply.text);
    }
    assert_eq!(stored_count(&app, &id).await.0, 0);
    assert_eq!(app.execution(&flow, &id).await["status"], "running");
    ok(&app.job_call(&ours, "complete", carried).await);
}

/// What the older control plane saw: each call's route and whether it carried results.
type Calls = Arc<Mutex<Vec<String>>>;

/// A control plane from before `results`: its completion refuses the field, as its strict reader did.
async fn older_control_plane(calls: Calls) -> String {
    use axum::routing::post;
    let nodes = {
        let calls = calls.clone();
        move |body: String| async move {
            calls.lock().expect("calls").push("nodes".into());
            let reported =
                serde_json::from_str::<Value>(&body).map_or(0, |b| b["results"].as_array().map_or(1, Vec::len));
            axum::Json(json!({"accepted": reported, "cancel": false}))
        }
    };
    let complete = move |body: String| async move {
        let body: Value = serde_json::from_str(&body).unwrap_or_default();
        if body.get("results").is_some() {
            calls.lock().expect("calls").push("complete with results".into());
            let refusal = json!({"error": {"code": "invalid_request", "request_id": "r",
                "message": "invalid JSON body: unknown field `results`, expected `status` or `error`"}});
            return (axum::http::StatusCode::BAD_REQUEST, axum::Json(refusal));
        }
        calls.lock().expect("calls").push("complete".into());
        (axum::http::StatusCode::OK, axum::Json(json!({})))
    };
    let router = axum::Router::new()
        .route("/runner/jobs/{job_id}/nodes", post(nodes))
        .route("/runner/jobs/{job_id}/complete", post(complete));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    base
}

#[tokio::test]
async fn a_runner_facing_an_older_control_plane_reports_first_then_completes() {
    let calls = Calls::default();
    let base = older_control_plane(calls.clone()).await;
    let client =
        Client::new(Connection { base_url: base, api_key: "hf_unused".to_owned().into(), organization_id: None });
    let definition = json!({"nodes": [{"id": "set", "kind": "set_variables", "variables": {"a": "1"}}]});
    for _ in 0..2 {
        let mut job = Job::standalone("older", definition.clone(), 60);
        job.job_token = "hfj_0000000000000000000000000000000000000".into();
        let outcome = execute(&client, &Engine::new(), &job, &CancellationToken::new()).await.expect("completed");
        assert_eq!(outcome.status.as_str(), "succeeded");
    }
    let seen = calls.lock().expect("calls").clone();
    assert_eq!(
        seen,
        ["complete with results", "nodes", "complete", "nodes", "complete"],
        "asked once, then remembered"
    );
}

/// Rows a plan (`EXPLAIN (ANALYZE, FORMAT JSON)`) compared and threw away in its joins, over every loop.
fn removed_by_joins(plan: &Value) -> f64 {
    let loops = plan["Actual Loops"].as_f64().unwrap_or(1.0);
    let here = plan["Rows Removed by Join Filter"].as_f64().unwrap_or(0.0) * loops;
    here + plan["Plans"].as_array().into_iter().flatten().map(removed_by_joins).sum::<f64>()
}

/// The completion of a 1,500-node flow carrying 400 results, looked at as it runs (then rolled back), matches
/// results to nodes by hash: filtering the nodes to the carried ones was planned as a loop comparing each result
/// with every node (99,000 comparisons, 11 ms, for a 1,000-node flow carrying 99).
#[tokio::test]
async fn a_long_flows_completion_matches_results_to_nodes_without_a_loop_over_both() {
    use hookflow_control_plane::queue::{finish, report};
    let ids: Vec<String> = (0..1500).map(|i| format!("step-{i:04}")).collect();
    let nodes: Vec<Value> = ids.iter().map(|id| json!({"id": id, "kind": "delay", "delay_ms": 1})).collect();
    let (app, creds, runner, flow) = runner_and_flow("long plan", json!({"nodes": nodes})).await;
    let (execution, job) = claimed(&app, &creds, &runner, &flow).await;
    let outcomes: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "passed")).collect();
    for part in outcomes[..1100].chunks(100) {
        ok(&app.job_call(&job, "nodes", json!({"results": results(part)})).await);
    }
    let carried: Vec<_> = results(&outcomes[1100..])
        .into_iter()
        .map(|result| serde_json::from_value(result).expect("a node result"))
        .collect();
    let carried = report::stored(carried, 1).expect("encoded");
    let job_id = uuid::Uuid::parse_str(job["job_id"].as_str().expect("job id")).expect("a uuid");
    let sql = format!("EXPLAIN (ANALYZE, FORMAT JSON) {}", finish::statement());
    let mut tx = app.pool.begin().await.expect("begin");
    let plan: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(vec![uuid::Uuid::parse_str(&execution).expect("a uuid")])
        .bind(vec![1_i32])
        .bind(vec!["succeeded"])
        .bind(vec![None::<String>])
        .bind(vec![Some(job_id)])
        .bind(vec![1_i64; carried.len()])
        .bind(carried.iter().map(|r| r.node_id.as_str()).collect::<Vec<_>>())
        .bind(carried.iter().map(|r| r.status).collect::<Vec<_>>())
        .bind(carried.iter().map(|r| r.payload.as_str()).collect::<Vec<_>>())
        .bind(carried.iter().map(|r| r.event.as_str()).collect::<Vec<_>>())
        .fetch_one(&mut *tx)
        .await
        .expect("explain the completion");
    tx.rollback().await.expect("rollback");
    let root = &plan[0]["Plan"];
    assert_eq!(root["Actual Rows"].as_f64(), Some(1.0), "the execution ended: {plan:#}");
    let removed = removed_by_joins(root);
    assert!(removed <= 15_000.0, "the completion compared and threw away {removed} rows: {plan:#}");
}
