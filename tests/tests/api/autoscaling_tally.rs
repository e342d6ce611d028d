//! Autoscaling (issue #53), the scaler endpoint's cheap count: the queued tally the triggers keep agrees with what
//! `executions` holds after concurrent launches (one by one, and a batch of rows in one statement), concurrent
//! claims, cancels, a lease expiring back to `queued`, deletes, and folds (by the reader past its row budget, and
//! by `pools::compact` while launches go on); another organization's tally never mixes in.

use hookflow_control_plane::pools::{RunnerPool, compact};
use hookflow_tests::{Creds, TestApp};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

fn pools() -> Vec<RunnerPool> {
    let pool = |name: &str, labels: &[&str]| RunnerPool {
        name: name.to_owned(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
    };
    vec![RunnerPool::default_pool(), pool("eu", &["eu"]), pool("eu-gpu", &["eu", "gpu"]), pool("us", &["us"])]
}

/// `(pool, queued)` of every pool as the scaler endpoint answers it, and as SQL over `executions` counts it.
async fn both(app: &TestApp, runner: &Creds) -> (Vec<(String, i64)>, Vec<(String, i64)>) {
    let reply = app
        .client
        .get(format!("{}/runner/pools", app.base))
        .header("x-api-key", &runner.key)
        .send()
        .await
        .expect("send");
    assert_eq!(reply.status(), 200);
    let listed: Value = reply.json().await.expect("json");
    let mut answered = Vec::new();
    let mut counted = Vec::new();
    for (item, pool) in listed["items"].as_array().expect("items").iter().zip(pools()) {
        answered.push((item["pool"].as_str().unwrap().to_owned(), item["queued"].as_i64().unwrap()));
        let queued: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM executions WHERE organization_id = $1 AND status = 'queued' AND runner_labels <@ $2",
        )
        .bind(runner.org)
        .bind(&pool.labels)
        .fetch_one(&app.pool)
        .await
        .expect("count");
        counted.push((pool.name.clone(), queued));
    }
    (answered, counted)
}

async fn agree(app: &TestApp, runner: &Creds, when: &str) -> Vec<(String, i64)> {
    let (answered, counted) = both(app, runner).await;
    assert_eq!(answered, counted, "{when}");
    answered
}

async fn tally_rows(app: &TestApp, org: &Creds) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM executions_queued_tally WHERE organization_id = $1")
        .bind(org.org)
        .fetch_one(&app.pool)
        .await
        .expect("rows")
}

#[tokio::test]
async fn the_queued_tally_agrees_with_the_executions_through_launches_claims_leases_and_folds() {
    let app = TestApp::spawn_with(|settings| {
        settings.lease = Duration::from_secs(1);
        settings.rescue_interval = Duration::from_millis(200);
        settings.runner_pools = pools().into();
    })
    .await;
    let flow = app.delay_flow("tally").await;
    let runner = app.runner_creds(app.admin.org).await;
    let other = app.new_org("Other").await;
    let other_runner = app.runner_creds(other.org).await;
    agree(&app, &runner, "empty").await;

    // 60 launches at once over four label sets (in two orders of the same labels), and the other organization's.
    let sets = [json!([]), json!(["eu"]), json!(["eu", "gpu"]), json!(["gpu", "eu"]), json!(["us", "gpu"])];
    let launches = (0..60).map(|i| app.launch(&flow, json!({"runner_labels": sets[i % sets.len()]})));
    futures_util::future::join_all(launches).await;
    let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    let write = hookflow_shared::api::flows::WriteFlow::new("theirs".parse().unwrap(), definition);
    let theirs = app.api_as(&other).flows().create(&write).await.expect("flow").id.to_string();
    let launch = hookflow_shared::api::executions::Launch {
        runner_labels: vec!["eu".to_owned()].try_into().unwrap(),
        ..Default::default()
    };
    for _ in 0..5 {
        app.api_as(&other).flows().launch(&theirs, &launch).await.expect("launch");
    }
    let counts = agree(&app, &runner, "after 60 concurrent launches").await;
    assert_eq!(counts[1], ("eu".to_owned(), 24), "unlabelled and eu, not the other organization's");
    let theirs_counted = agree(&app, &other_runner, "the other organization").await;
    assert_eq!(theirs_counted[1].1, 5);

    // A batch of rows: 300 executions in one statement.
    let rows: Vec<Value> = (0..300).map(|i| json!({"n": i.to_string()})).collect();
    let batch = app
        .admin(Method::POST, &format!("/flows/{flow}/launch"), Some(json!({"runner_labels": ["us"], "rows": rows})))
        .await;
    assert_eq!(batch.status, 201, "{}", batch.text);
    assert_eq!(batch.body["executions"], 300, "{}", batch.text);
    assert_eq!(agree(&app, &runner, "after a batch of rows").await[3], ("us".to_owned(), 12 + 300));

    // Claims from four runners at once, each taking up to 8 (eu+gpu runners take eu, eu+gpu, gpu+eu and
    // unlabelled work).
    let mut ids = Vec::new();
    for _ in 0..4 {
        ids.push(app.register_runner(&runner, &["eu", "gpu"]).await);
    }
    let claims = ids.iter().map(|id| {
        let body = json!({"runner_id": id, "wait_s": 0, "max_jobs": 8});
        app.call(Method::POST, hookflow_shared::wire::runner_route::NEXT_JOB, Some(&runner), Some(body))
    });
    for reply in futures_util::future::join_all(claims).await {
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    agree(&app, &runner, "right after the claims").await;

    // Cancels of queued work.
    let queued: Vec<String> = sqlx::query_scalar(
        "SELECT id::text FROM executions WHERE organization_id = $1 AND status = 'queued' ORDER BY id LIMIT 5",
    )
    .bind(app.admin.org)
    .fetch_all(&app.pool)
    .await
    .expect("queued");
    for id in &queued {
        let cancelled = app.admin(Method::POST, &format!("/executions/{id}/cancel"), None).await;
        assert!(cancelled.status.is_success(), "{}", cancelled.text);
    }
    agree(&app, &runner, "after cancels").await;

    // The claimed jobs are never reported: their 1 s leases expire and the rescuer queues them again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let running: i64 = sqlx::query_scalar("SELECT count(*) FROM executions WHERE status = 'running'")
            .fetch_one(&app.pool)
            .await
            .expect("running");
        if running == 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{running} leases never expired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    agree(&app, &runner, "after the leases expired").await;

    // Deleted rows (as retention or an operator would) leave the tally too.
    sqlx::query("DELETE FROM executions WHERE organization_id = $1 AND status = 'queued' AND runner_labels = '{us}'")
        .bind(app.admin.org)
        .execute(&app.pool)
        .await
        .expect("delete");
    let left = agree(&app, &runner, "after a delete").await;
    assert!(left[3].1 <= 12, "only unlabelled work is left in us: {left:?}");

    // Past its row budget the reader folds the tally; a fold while launches go on loses none of them.
    let before = tally_rows(&app, &app.admin).await;
    assert!(before > 5, "the tally has rows to fold: {before}");
    let more = (0..40).map(|i| app.launch(&flow, json!({"runner_labels": sets[i % sets.len()]})));
    let fold = async {
        let mut conn = app.pool.acquire().await.expect("conn");
        let mut folded = 0;
        for _ in 0..5 {
            folded += compact(&mut conn, None).await.expect("fold");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        folded
    };
    let (_, folded) = tokio::join!(futures_util::future::join_all(more), fold);
    assert!(folded > 0, "the folds wrote the sums");
    compact(&mut *app.pool.acquire().await.expect("conn"), None).await.expect("fold");
    let after = tally_rows(&app, &app.admin).await;
    assert!(after <= sets.len() as i64, "one row per label set still queued: {after}");
    agree(&app, &runner, "after folds during launches").await;
    agree(&app, &other_runner, "the other organization, after folds").await;
}
