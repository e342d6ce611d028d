//! Helpers for execution tests: a server with short leases, flows, runner keys, protocol calls, and waiting for
//! an execution to reach a state.

use crate::app::{Creds, Reply, TestApp};
use hookflow_shared::api::executions::{ExecutionStatus, Launch};
use hookflow_shared::api::flows::WriteFlow;
use hookflow_shared::api::runners::{Host, RegisterRunner};
use hookflow_shared::scope::Preset;
use hookflow_shared::wire::{header, runner_route};
use hookflow_shared::{JobId, OrgId, ScopeSet};
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;

impl TestApp {
    /// A server whose leases expire after 2 s, with a rescuer and scheduler ticking every 200 ms.
    pub async fn spawn_for_execution() -> Self {
        Self::spawn_with(|settings| {
            settings.lease = Duration::from_secs(2);
            settings.heartbeat_interval = Duration::from_secs(1);
            settings.rescue_interval = Duration::from_millis(200);
            settings.schedule_interval = Duration::from_millis(200);
        })
        .await
    }

    /// Creates a flow of one 1 ms delay node (`wait`) as the admin and returns its id: the smallest flow that runs.
    pub async fn delay_flow(&self, name: &str) -> String {
        self.create_flow(name, serde_json::json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 1}]})).await
    }

    /// Creates a flow as the admin and returns its id.
    pub async fn create_flow(&self, name: &str, definition: Value) -> String {
        let flow = WriteFlow::new(name.parse().expect("a name"), definition);
        self.api().flows().create(&flow).await.expect("create the flow").id.to_string()
    }

    /// Launches a flow as the admin (a launch body written as JSON, read as `Launch` first); returns the execution.
    pub async fn launch(&self, flow: &str, body: Value) -> Value {
        let launch: Launch = serde_json::from_value(body).expect("a launch body");
        let execution = self.api().flows().launch(flow, &launch).await.expect("launch");
        serde_json::to_value(execution).expect("json")
    }

    /// Launches a flow as the admin key with an `Idempotency-Key`; answers the reply, whatever its status.
    pub async fn launch_idempotent(&self, flow: &str, key: &str, body: Value) -> Reply {
        let response = self
            .api()
            .request(Method::POST, &format!("/flows/{flow}/launch"))
            .header(header::IDEMPOTENCY_KEY, key)
            .json(&body)
            .send()
            .await
            .expect("launch");
        crate::app::read(response).await
    }

    /// Launches a flow's draft with no options; answers the execution's id.
    pub async fn launch_draft(&self, flow: &str) -> String {
        self.launch(flow, serde_json::json!({})).await["id"].as_str().expect("id").to_owned()
    }

    /// A key of `org` with the `runner` preset.
    pub async fn runner_creds(&self, org: OrgId) -> Creds {
        Creds { key: self.key(org, Preset::Runner.scopes(), None).await, org }
    }

    /// Registers a runner; returns its id.
    pub async fn register_runner(&self, creds: &Creds, labels: &[&str]) -> String {
        let host =
            Host { hostname: "test".into(), os: "linux".into(), arch: "x86_64".into(), cpus: 2, memory_bytes: 1024 };
        let registration = RegisterRunner {
            name: "test runner".parse().expect("a name"),
            labels: labels.iter().map(|l| l.to_string()).collect::<Vec<_>>().try_into().expect("labels"),
            version: "test".parse().expect("a version"),
            max_concurrency: 2,
            host,
        };
        let registered = self.api_as(creds).runners().register(&registration).await.expect("register the runner");
        registered.id.to_string()
    }

    /// One long poll.
    pub async fn next_job(&self, creds: &Creds, runner: &str, wait_s: u64) -> Reply {
        let body = json!({"runner_id": runner, "wait_s": wait_s});
        self.call(Method::POST, runner_route::NEXT_JOB, Some(creds), Some(body)).await
    }

    /// A call authenticated by a job token; `action` is `nodes`, `complete` or `captures`.
    pub async fn job_call(&self, job: &Value, action: &str, body: Value) -> Reply {
        let job_id: JobId = job["job_id"].as_str().and_then(|id| id.parse().ok()).expect("job id");
        let path = match action {
            "nodes" => runner_route::job_nodes(job_id),
            "complete" => runner_route::job_complete(job_id),
            "captures" => runner_route::job_captures(job_id),
            other => panic!("no job route `{other}`"),
        };
        let token = job["job_token"].as_str().expect("job token");
        let as_job = self.api_with(hookflow_client::Credentials::JobToken(token.to_owned()));
        let response = as_job.request(Method::POST, &path).json(&body).send().await.expect("send");
        crate::app::read(response).await
    }

    pub async fn execution(&self, flow: &str, execution: &str) -> Value {
        let execution = self.api().executions().get(flow, execution).await.expect("the execution");
        serde_json::to_value(execution).expect("json")
    }

    /// Polls the execution until `done` holds (at most `within`), and returns it.
    pub async fn wait_execution(
        &self,
        flow: &str,
        execution: &str,
        within: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let current = self.execution(flow, execution).await;
            if done(&current) {
                return current;
            }
            assert!(tokio::time::Instant::now() < deadline, "execution never got there; last seen {current}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls `GET /runners` until some runner satisfies `done` (at most 15 s), and returns it.
    pub async fn wait_runner(&self, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            let listed = self.api().runners().list(&[]).await.expect("the runners");
            let listed = serde_json::to_value(listed).expect("json");
            if let Some(found) = listed["items"].as_array().and_then(|items| items.iter().find(|r| done(r))) {
                return found.clone();
            }
            assert!(tokio::time::Instant::now() < deadline, "no runner got there; last seen {listed}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A server running its embedded runner (every organization's flows) with two slots, one per organization at
    /// most, stopped with the app.
    pub async fn spawn_with_embedded_runner() -> Self {
        Self::spawn_with_embedded_runner_for(Duration::from_secs(900)).await
    }

    /// As [`TestApp::spawn_with_embedded_runner`], running a flow for at most `max_run`.
    pub async fn spawn_with_embedded_runner_for(max_run: Duration) -> Self {
        Self::spawn_with_embedded_runner_of(2, 0.5, max_run, |_| {}).await
    }

    /// A server running its embedded runner with `slots` slots, `share` of them per organization at most, running
    /// a flow for at most `max_run`, with `configure`'s settings.
    pub async fn spawn_with_embedded_runner_of(
        slots: u32,
        share: f64,
        max_run: Duration,
        configure: impl FnOnce(&mut hookflow_control_plane::state::Settings),
    ) -> Self {
        let key = hookflow_control_plane::server::embedded_runner::new_key();
        let hash = key.hash.clone();
        let app = Self::spawn_with(|settings| {
            settings.embedded_runner_key_hash = Some(hash);
            settings.embedded_runner = hookflow_control_plane::state::EmbeddedRunnerLimits::new(slots, share, max_run);
            configure(settings);
        })
        .await;
        let address = app.base.trim_start_matches("http://").parse().expect("address");
        hookflow_control_plane::server::embedded_runner::spawn(address, key, slots, app.shutdown_token());
        app
    }

    /// Creates a flow as `creds`, launches it with `launch` and waits for it to finish; answers the execution and
    /// its node results.
    pub async fn run_as(&self, creds: &Creds, definition: Value, launch: Value) -> (Value, Value) {
        let api = self.api_as(creds);
        let flow = WriteFlow::new(format!("flow-{}", Uuid::now_v7()).parse().expect("a name"), definition);
        let flow = api.flows().create(&flow).await.expect("create the flow").id;
        let launch: Launch = serde_json::from_value(launch).expect("a launch body");
        let id = api.flows().launch(flow, &launch).await.expect("launch").id;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let execution = loop {
            let current = api.executions().get(flow, id).await.expect("the execution");
            if !matches!(current.status, ExecutionStatus::Queued | ExecutionStatus::Running) {
                break current;
            }
            assert!(tokio::time::Instant::now() < deadline, "execution never finished; last seen {current:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let nodes = api.executions().nodes(flow, id).await.expect("the node results");
        (serde_json::to_value(execution).expect("json"), serde_json::to_value(nodes).expect("json"))
    }

    /// Waits for a finished status.
    pub async fn wait_finished(&self, flow: &str, execution: &str) -> Value {
        self.wait_execution(flow, execution, Duration::from_secs(30), |e| {
            !matches!(e["status"].as_str(), Some("queued" | "running"))
        })
        .await
    }
}

/// A key of `org` with exactly the named scopes.
pub async fn scoped(app: &TestApp, org: OrgId, scopes: &[&str]) -> Creds {
    Creds { key: app.key(org, ScopeSet::parse(scopes.iter().copied()).expect("scopes"), None).await, org }
}

/// The capture URL of execution `id`, as the server makes it (what its flows read as `{{execution.capture_url}}`).
pub fn execution_capture_url(app: &TestApp, id: &str) -> String {
    let id: hookflow_shared::ExecutionId = id.parse().expect("an execution id");
    hookflow_control_plane::capture::sinks::capture_url(&app.base, &app.master_key(), id)
}
