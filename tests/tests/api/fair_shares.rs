//! Regression tests of shared capacity (security review "Hardening III", findings 8 and 9): one organization
//! cannot hold every slot of the server's embedded runner nor keep it for a day, and the embedded runner's claim
//! costs the same however many organizations exist (it walks queued work, never the organizations table).

use hookflow_control_plane::queue::claim::{Target, statement};
use hookflow_shared::OrgId;
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;

/// A flow that waits `ms` milliseconds, allowed to run for a day.
fn waiting(ms: u64) -> Value {
    json!({"timeout_s": 86_400, "nodes": [{"id": "wait", "kind": "delay", "delay_ms": ms}]})
}

async fn running_of(app: &TestApp, org: OrgId) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM executions WHERE organization_id = $1 AND status = 'running'")
        .bind(org)
        .fetch_one(&app.pool)
        .await
        .expect("count running")
}

#[tokio::test]
async fn one_organization_cannot_hold_every_slot_of_the_embedded_runner() {
    // Two slots, one per organization at most.
    let app = TestApp::spawn_with_embedded_runner().await;
    let slow = app.create_flow("slow", waiting(120_000)).await;
    let mut launched = Vec::new();
    for _ in 0..3 {
        launched.push(app.launch_draft(&slow).await);
    }
    app.wait_execution(&slow, &launched[0], Duration::from_secs(15), |e| e["status"] == "running").await;
    // Another organization's run starts and finishes while the first one's slow runs are still going.
    let other = app.new_org("Neighbour").await;
    let (theirs, _) = app.run_as(&other, waiting(1), json!({})).await;
    assert_eq!(theirs["status"], "succeeded", "{theirs}");
    assert_eq!(running_of(&app, app.admin.org).await, 1, "the first organization holds its share and no more");
    let queued = app.execution(&slow, &launched[2]).await;
    assert_eq!(queued["status"], "queued", "{queued}");
}

#[tokio::test]
async fn the_embedded_runner_cuts_a_day_long_timeout_and_says_why() {
    let app = TestApp::spawn_with_embedded_runner_for(Duration::from_secs(2)).await;
    let (execution, _) = app.run_as(&app.admin.clone(), waiting(60_000), json!({})).await;
    assert_eq!(execution["status"], "failed", "{execution}");
    let error = execution["error"].as_str().expect("error");
    assert!(error.contains("timeout of 2 s"), "{error}");
    assert!(error.contains("--embedded-runner-max-run-s") && error.contains("86400"), "{error}");
}

/// Rows of `table` a plan (`EXPLAIN (ANALYZE, FORMAT JSON)`) read, and whether it read the table sequentially.
fn visited(plan: &Value, table: &str) -> (f64, bool) {
    let mut rows = 0.0;
    let mut scanned = false;
    if plan["Relation Name"] == table {
        rows += plan["Actual Rows"].as_f64().unwrap_or(0.0) * plan["Actual Loops"].as_f64().unwrap_or(1.0);
        scanned |= plan["Node Type"] == "Seq Scan";
    }
    for child in plan["Plans"].as_array().into_iter().flatten() {
        let (r, s) = visited(child, table);
        rows += r;
        scanned |= s;
    }
    (rows, scanned)
}

#[tokio::test]
async fn the_any_organization_claim_costs_the_same_with_200000_organizations() {
    let app = TestApp::spawn_with_embedded_runner().await;
    sqlx::query(
        "INSERT INTO organizations (id, name) SELECT gen_random_uuid(), 'org ' || n FROM generate_series(1, 200000) n",
    )
    .execute(&app.pool)
    .await
    .expect("insert organizations");
    sqlx::query("ANALYZE organizations").execute(&app.pool).await.expect("analyze");
    // The embedded runner still picks up queued work.
    let (done, _) = app.run_as(&app.admin.clone(), waiting(1), json!({})).await;
    assert_eq!(done["status"], "succeeded", "{done}");

    // A run only a `gpu` runner may take stays queued; the claim statement of a runner carrying `gpu`, looked at
    // as it runs (then rolled back), reads a handful of organization rows, by key.
    let flow = app.create_flow("gpu", waiting(1)).await;
    app.launch(&flow, json!({"runner_labels": ["gpu"]})).await;
    let labels = vec!["gpu".to_owned()];
    let sql = format!(
        "EXPLAIN (ANALYZE, FORMAT JSON) {}",
        statement(&Target::AnyOrganization { labels: &labels, org_slots: 1 })
    );
    let mut tx = app.pool.begin().await.expect("begin");
    let plan: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(Some(Uuid::now_v7()))
        .bind(vec![Uuid::now_v7()])
        .bind(30.0_f64)
        .bind(vec![vec![0_u8; 32]])
        .bind(&labels)
        .bind(1_i64)
        .fetch_one(&mut *tx)
        .await
        .expect("explain the claim");
    tx.rollback().await.expect("rollback");
    let root = &plan[0]["Plan"];
    let (rows, scanned) = visited(root, "organizations");
    assert!(!scanned, "the claim scans the organizations table: {plan:#}");
    assert!(rows <= 10.0, "the claim read {rows} organization rows: {plan:#}");
    assert_eq!(root["Actual Rows"], 1, "the queued run was picked up: {plan:#}");
}

#[tokio::test]
async fn a_person_makes_at_most_twenty_organizations_even_all_at_once() {
    let app = TestApp::spawn().await;
    let person = app.user(false).await;
    let (bearer, _) = app.bearer(&person, None).await;
    let create = |n: usize| {
        let (app, bearer) = (&app, &bearer);
        async move {
            app.call_bearer(Method::POST, "/organizations", bearer, Some(json!({"name": format!("org {n}")}))).await
        }
    };
    for n in 0..15 {
        let made = create(n).await;
        assert_eq!(made.status, 201, "{}", made.text);
    }
    let racing = futures_util::future::join_all((15..25).map(create)).await;
    let made = racing.iter().filter(|r| r.status == 201).count();
    assert_eq!(made, 5, "{:?}", racing.iter().map(|r| &r.text).collect::<Vec<_>>());
    for refused in racing.iter().filter(|r| r.status != 201) {
        refused.assert_refused(403, "quota_exceeded", "--max-organizations-per-person");
    }
    app.call_bearer(Method::POST, "/organizations", &bearer, Some(json!({"name": "one more"}))).await.assert_refused(
        403,
        "quota_exceeded",
        "20 organizations",
    );
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM memberships WHERE user_id = $1")
        .bind(person.user_id)
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(count, 20);
}

#[tokio::test]
async fn a_new_organization_invalidates_no_one_elses_cached_key() {
    let app = TestApp::spawn().await;
    let creds = app.creds_with(&["webhooks:read"]).await;
    assert_eq!(app.call(Method::GET, "/webhooks", Some(&creds), None).await.status, 200);
    // The key's row changes behind the cache's back (nothing announced): only a new lookup would see it.
    sqlx::query("UPDATE api_keys SET scopes = '{}' WHERE key_hash = $1")
        .bind(hookflow_shared::token::hash(&creds.key))
        .execute(&app.pool)
        .await
        .expect("change the key's row");
    let person = app.user(false).await;
    let (bearer, _) = app.bearer(&person, None).await;
    let made = app.call_bearer(Method::POST, "/organizations", &bearer, Some(json!({"name": "Mine"}))).await;
    assert_eq!(made.status, 201, "{}", made.text);
    // The maker's memberships are fresh at once ...
    let org: OrgId = made.body["id"].as_str().and_then(|id| id.parse().ok()).expect("org id");
    let mine = hookflow_tests::people::Bearer { token: bearer.token.clone(), org: Some(org) };
    let read = app.call_bearer(Method::GET, "/organization", &mine, None).await;
    assert_eq!(read.status, 200, "{}", read.text);
    // ... and the stranger's key is still served from the cache (it was not cleared).
    let again = app.call(Method::GET, "/webhooks", Some(&creds), None).await;
    assert_eq!(again.status, 200, "the key cache was cleared by someone else's new organization: {}", again.text);
}
