//! Helpers for tests of captures that start flows: an endpoint with triggers, a flow's executions, and waiting
//! until the launches captures owe are all decided.

use crate::app::TestApp;
use serde_json::{Value, json};
use std::time::Duration;

impl TestApp {
    /// Creates an endpoint named `name` with `triggers` as the admin; answers its id.
    pub async fn triggered_endpoint(&self, name: &str, triggers: Value) -> String {
        let created = self.create_webhook(json!({"name": name, "triggers": triggers})).await;
        created["id"].as_str().expect("id").to_owned()
    }

    /// The capture URL of endpoint `id` (`rest` appended).
    pub fn capture_url(&self, id: &str, rest: &str) -> String {
        self.url(&format!("/webhook/{id}{rest}"))
    }

    /// A flow's executions, newest first (at most 200), as the admin.
    pub async fn executions_of(&self, flow: &str) -> Vec<Value> {
        let page = self.api().executions().list(flow, &[("limit", "200")]).await.expect("the executions");
        page.items.into_iter().map(|e| serde_json::to_value(e).expect("json")).collect()
    }

    /// Waits (at most `within`) until no launch a capture owes is left undecided.
    pub async fn triggers_settled(&self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let owed = self.rows("trigger_launches").await;
            if owed == 0 {
                return;
            }
            assert!(tokio::time::Instant::now() < deadline, "{owed} launches still owed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (at most `within`) until `flow` has `n` executions, then answers them.
    pub async fn wait_executions(&self, flow: &str, n: usize, within: Duration) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let executions = self.executions_of(flow).await;
            if executions.len() >= n {
                return executions;
            }
            assert!(tokio::time::Instant::now() < deadline, "{} of {n} executions; {executions:?}", executions.len());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The organization's audit entries of `action`, newest first.
    pub async fn audit_entries(&self, action: &str) -> Vec<Value> {
        let log = self.api().organization().audit_log(&[("limit", "100")]).await.expect("the audit log");
        let log = serde_json::to_value(log).expect("json");
        log["items"].as_array().expect("items").iter().filter(|e| e["action"] == action).cloned().collect()
    }
}
