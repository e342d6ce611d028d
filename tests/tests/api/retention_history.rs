//! Operating II: finished executions (with their node results, events and captures) and audit entries are
//! deleted once older than their organization's retention, or the server's default; younger ones and other
//! organizations' are kept, and audit entries never go before the server's floor. The operator sets an
//! organization's retention with `hookflow-server orgs limits`.

use hookflow_control_plane::api::admin::organization::{RetentionLimits, set_retention};
use hookflow_control_plane::state::RetentionDefaults;
use hookflow_control_plane::tasks::retention::sweep_history;
use hookflow_shared::OrgId;
use hookflow_tests::TestApp;
use serde_json::{Value, json};
use uuid::Uuid;

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");

/// One finished execution of `creds`' organization, its flow's id and its own id; it has a node result and events.
async fn finished(app: &TestApp, creds: &hookflow_tests::Creds) -> Uuid {
    let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]});
    let (execution, nodes) = app.run_as(creds, definition, json!({})).await;
    assert_eq!(execution["status"], "succeeded", "{execution}");
    assert_eq!(nodes["items"].as_array().map(Vec::len), Some(1), "{nodes}");
    execution["id"].as_str().expect("id").parse().expect("uuid")
}

/// Rows of `table` that belong to `execution`.
async fn owned(app: &TestApp, table: &str, execution: Uuid) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table} WHERE execution_id = $1")))
        .bind(execution)
        .fetch_one(&app.pool)
        .await
        .expect("count")
}

/// Ends `execution` `days` ago.
async fn age(app: &TestApp, execution: Uuid, days: i32) {
    sqlx::query("UPDATE executions SET finished_at = now() - make_interval(days => $2) WHERE id = $1")
        .bind(execution)
        .bind(days)
        .execute(&app.pool)
        .await
        .expect("age the execution");
}

/// An audit entry of `org` written `days` ago; its id.
async fn audit_entry(app: &TestApp, org: OrgId, days: i32) -> Uuid {
    let id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO audit_log (id, organization_id, action, actor, target, created_at)
         VALUES ($1, $2, 'test.old', 'operator', 'x', now() - make_interval(days => $3))",
    )
    .bind(id)
    .bind(org)
    .bind(days)
    .execute(&app.pool)
    .await
    .expect("an old audit entry");
    id
}

async fn exists(app: &TestApp, table: &str, id: Uuid) -> bool {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE id = $1)")))
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .expect("exists")
}

#[tokio::test]
async fn old_executions_and_audit_entries_go_young_ones_and_other_organizations_stay() {
    let app = TestApp::spawn_with_embedded_runner().await;
    let other = app.new_org("Other").await;
    let (old, young, theirs) =
        (finished(&app, &app.admin).await, finished(&app, &app.admin).await, finished(&app, &other).await);
    for execution in [old, theirs] {
        age(&app, execution, 10).await;
    }
    assert!(owned(&app, "node_results", old).await > 0 && owned(&app, "execution_events", old).await > 0);
    let mut conn = app.pool.acquire().await.expect("conn");
    let limits = RetentionLimits { execution_retention_days: Some(Some(7)), audit_retention_days: Some(Some(7)) };
    set_retention(&mut conn, app.admin.org, limits).await.expect("set").expect("the organization");
    drop(conn);
    let (audit_10, audit_40) = (audit_entry(&app, app.admin.org, 10).await, audit_entry(&app, app.admin.org, 40).await);
    let their_audit = audit_entry(&app, other.org, 400).await;

    let floor = RetentionDefaults { execution_days: None, audit_days: None, min_audit_days: 30 };
    let (executions, audit) = sweep_history(&app.pool, floor).await.expect("sweep");
    assert_eq!((executions, audit), (1, 1), "one execution past 7 days, one audit entry past the 30-day floor");
    assert!(!exists(&app, "executions", old).await, "past the organization's retention");
    for table in ["node_results", "execution_events", "jobs"] {
        assert_eq!(owned(&app, table, old).await, 0, "{table} of the deleted execution");
    }
    assert!(exists(&app, "executions", young).await, "younger than the retention");
    assert!(owned(&app, "node_results", young).await > 0, "a kept execution keeps its results");
    assert!(exists(&app, "executions", theirs).await, "another organization sets no retention and no default");
    assert!(exists(&app, "audit_log", audit_10).await, "the floor keeps a 10-day entry whatever the 7 days say");
    assert!(!exists(&app, "audit_log", audit_40).await);
    assert!(exists(&app, "audit_log", their_audit).await);
    let listed: Value = app.get(&format!("/flows/{}/executions", flow_of(&app, young).await), 200).await;
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(1), "{listed}");

    // The server's default reaches the organizations that set none.
    let defaults = RetentionDefaults { execution_days: Some(5), audit_days: Some(365), min_audit_days: 30 };
    let (executions, audit) = sweep_history(&app.pool, defaults).await.expect("sweep");
    assert_eq!((executions, audit), (1, 1));
    assert!(!exists(&app, "executions", theirs).await && !exists(&app, "audit_log", their_audit).await);
    assert!(exists(&app, "executions", young).await);
}

async fn flow_of(app: &TestApp, execution: Uuid) -> Uuid {
    sqlx::query_scalar("SELECT flow_id FROM executions WHERE id = $1")
        .bind(execution)
        .fetch_one(&app.pool)
        .await
        .expect("flow")
}

/// The operator's command sets, clears and refuses as its help says, audited; nothing else changes.
#[tokio::test]
async fn orgs_limits_sets_an_organizations_retention() {
    let server = hookflow_tests::server::ServerProcess::spawn(SERVER, &[]).await;
    let org = server.org.clone();
    let out = server
        .operator(
            SERVER,
            &["orgs", "limits", "--org", &org, "--execution-retention-days", "7", "--audit-retention-days", "90"],
        )
        .await;
    assert!(out.contains("7 days") && out.contains("90 days"), "{out}");
    let pool = sqlx::PgPool::connect(&server.database_url).await.expect("connect");
    let org_id: Uuid = org.parse().expect("uuid");
    let read = |pool: sqlx::PgPool| async move {
        sqlx::query_as::<_, (Option<i32>, Option<i32>)>(
            "SELECT execution_retention_days, audit_retention_days FROM organizations WHERE id = $1",
        )
        .bind(org_id)
        .fetch_one(&pool)
        .await
        .expect("read")
    };
    assert_eq!(read(pool.clone()).await, (Some(7), Some(90)));
    let out = server.operator(SERVER, &["orgs", "limits", "--org", &org, "--execution-retention-days", "none"]).await;
    assert!(out.contains("the server's default"), "{out}");
    assert_eq!(read(pool.clone()).await, (None, Some(90)), "the other limit is kept");
    let audited: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action = 'organization.limits'")
        .fetch_one(&pool)
        .await
        .expect("audit");
    assert_eq!(audited, 2);
    for bad in [&["--execution-retention-days", "0"][..], &["--audit-retention-days", "soon"][..], &[][..]] {
        let output = tokio::process::Command::new(SERVER)
            .args(["--database-url", &server.database_url, "orgs", "limits", "--org", &org])
            .args(bad)
            .output()
            .await
            .expect("run");
        assert!(!output.status.success(), "{bad:?} is refused");
    }
    assert_eq!(read(pool.clone()).await, (None, Some(90)), "a refused command changes nothing");
    server.stop().await;
}
