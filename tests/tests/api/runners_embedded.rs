//! The server's embedded runner among each organization's runners (`GET /runners`): named so a person knows it
//! (`embedded`, nothing of its machine), online with its labels and last-seen time, showing each organization only its part
//! (its slots there, its own running jobs, no host metrics); readable by id; never removed through the API (409),
//! and still running flows after an attempt. An embedded runner of an earlier server run is not listed.

use hookflow_tests::TestApp;
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;

fn embedded(listed: &Value) -> Vec<Value> {
    let items = listed["items"].as_array().cloned().unwrap_or_default();
    items.into_iter().filter(|r| r["labels"] == json!(["embedded"])).collect()
}

#[tokio::test]
async fn each_organization_sees_the_embedded_runner_as_its_part_of_it_and_cannot_remove_it() {
    let app = TestApp::spawn_with_embedded_runner().await;
    let runner = app.wait_runner(|r| r["labels"] == json!(["embedded"]) && r["status"] == "online").await;
    let id = runner["id"].as_str().expect("id").to_owned();
    // Hardening IV (15): nothing of the machine every tenant shares, neither in its host nor in its name.
    assert_eq!(runner["name"], "embedded", "{runner}");
    assert!(runner["last_seen_at"].is_string() && runner["metrics"].is_null(), "{runner}");
    assert!(runner["host"].is_null(), "{runner}");
    let hostname = hookflow_runner::daemon::host().hostname;
    assert!(!runner.to_string().contains(&format!("\"{hostname}\"")), "the host name is not shown: {runner}");
    assert_eq!(runner["max_concurrency"], 1, "this organization's share of the two slots: {runner}");
    // A runner of an earlier server run, offline, is not listed.
    sqlx::query(
        "INSERT INTO runners (id, organization_id, name, labels, version, max_concurrency, host, last_seen_at)
         VALUES ($1, NULL, 'embedded (old)', '{embedded}', 'old', 2, '{}', now() - interval '50 minutes')",
    )
    .bind(Uuid::now_v7())
    .execute(&app.pool)
    .await
    .expect("an old embedded runner");

    // While the admin organization's flow runs there, the other organization sees none of its jobs.
    let flow = app.create_flow("slow", json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1500}]})).await;
    let execution = app.launch_draft(&flow).await;
    app.wait_execution(&flow, &execution, Duration::from_secs(10), |e| e["status"] == "running").await;
    let other = app.new_org("Other").await;
    let mine = serde_json::to_value(app.api().runners().list(&[]).await.expect("runners")).expect("json");
    let theirs = serde_json::to_value(app.api_as(&other).runners().list(&[]).await.expect("runners")).expect("json");
    for (listed, running) in [(&mine, 1), (&theirs, 0)] {
        let found = embedded(listed);
        assert_eq!(found.len(), 1, "the running embedded runner alone: {listed}");
        assert_eq!((found[0]["id"].as_str(), &found[0]["running_jobs"]), (Some(id.as_str()), &json!(running)));
    }
    let by_id = app.api_as(&other).runners().get(&id).await.expect("read by id");
    assert_eq!((by_id.status.as_str(), by_id.running_jobs), ("online", 0));

    // Removing it is refused, for every organization, and it keeps running flows.
    for creds in [&app.admin, &other] {
        let refused = app.api_as(creds).runners().delete(&id).await.expect_err("not the organization's to remove");
        assert_eq!((refused.status(), refused.code()), (409, "conflict"), "{refused}");
        assert!(refused.message().contains("--embedded-runner off"), "{refused}");
    }
    assert_eq!(app.wait_finished(&flow, &execution).await["status"], "succeeded");
    let again = app.launch_draft(&flow).await;
    assert_eq!(app.wait_finished(&flow, &again).await["status"], "succeeded");
}
