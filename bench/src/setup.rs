//! A durable PostgreSQL cluster in a fresh /tmp directory and a real control plane on 127.0.0.1:0 over it.

use hookflow_control_plane::api::admin::{keys, organization};
use hookflow_control_plane::auth::Actor;
use hookflow_control_plane::db::{self, embedded};
use hookflow_control_plane::state::{AppState, Settings};
use hookflow_shared::api::executions::Launch;
use hookflow_shared::api::flows::WriteFlow;
use hookflow_shared::api::webhooks::CreateWebhook;
use hookflow_shared::{OrgId, RunnerId, ScopeSet};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The server under test with its cluster; `stop` tears both down and removes the directory.
#[derive(Debug)]
pub struct Rig {
    pub base: String,
    pub pool: sqlx::PgPool,
    pub org: OrgId,
    pub key: String,
    cluster: Cluster,
    shutdown: CancellationToken,
}

/// A rig's cluster and its directory, stopped and removed when dropped: a scenario that fails half-way (or whose
/// output pipe closed) leaves no PostgreSQL running in /tmp.
#[derive(Debug)]
struct Cluster {
    running: Option<embedded::EmbeddedCluster>,
    root: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(cluster) = self.running.take() {
            let _ = cluster.stop();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Rig {
    /// CPU seconds its PostgreSQL has used so far.
    pub fn postgres_cpu(&self) -> f64 {
        crate::server_process::postgres_cpu_in(&self.cluster.root.join("data"))
    }

    pub async fn start() -> Result<Self, BoxError> {
        Self::start_with(|_| {}).await
    }

    /// As [`Rig::start`], with `adjust` applied to the server's settings.
    pub async fn start_with(adjust: impl FnOnce(&mut Settings)) -> Result<Self, BoxError> {
        Self::start_inner(adjust, None).await
    }

    /// As [`Rig::start`], with `settings` added to the cluster's `postgresql.auto.conf` (a restart of the new
    /// cluster before anything is stored), say [`crate::pg_statements::PRELOAD`].
    pub async fn start_with_settings(settings: &str) -> Result<Self, BoxError> {
        Self::start_inner(|_| {}, Some(settings)).await
    }

    async fn start_inner(adjust: impl FnOnce(&mut Settings), settings: Option<&str>) -> Result<Self, BoxError> {
        let root = PathBuf::from(format!("/tmp/hookflow-bench-{}", std::process::id()));
        // Durable, as the server runs: fsync and synchronous commit on.
        let options = embedded::ClusterOptions::new(root.clone(), embedded::Durability::Durable, 100);
        let first = options.clone();
        let mut running = tokio::task::spawn_blocking(move || embedded::EmbeddedCluster::start(&first)).await??;
        if let Some(settings) = settings {
            running.stop()?;
            let auto = root.join("data/postgresql.auto.conf");
            let mut text = std::fs::read_to_string(&auto)?;
            text.push_str(&format!("\n{settings}\n"));
            std::fs::write(&auto, text)?;
            running = tokio::task::spawn_blocking(move || embedded::EmbeddedCluster::start(&options)).await??;
        }
        let cluster = Cluster { running: Some(running), root };
        let connect = |database| cluster.running.as_ref().map(|c| c.connect_options(database)).ok_or("no cluster");
        db::ensure_database(connect("postgres")?, "hookflow").await?;
        let pool = db::pool(connect("hookflow")?, 20);
        db::migrate(&pool).await?;
        let mut tx = pool.begin().await?;
        let org = organization::create(&mut tx, "bench", Actor::Operator).await?;
        let key = keys::create(
            &mut tx,
            keys::NewKey {
                org_id: org.id,
                name: "bench".into(),
                scopes: ScopeSet::all(),
                expires_at: None,
                actor: Actor::Operator,
            },
        )
        .await?;
        sqlx::query("UPDATE organizations SET capture_rate_limit_per_s = 1000000").execute(&mut *tx).await?;
        tx.commit().await?;
        let listener = hookflow_control_plane::http::listener::bind(([127, 0, 0, 1], 0).into())?;
        let base = format!("http://{}", listener.local_addr()?);
        let shutdown = CancellationToken::new();
        // The benches measure the server, not its protections: no capture-rate ceiling.
        // Retention sweeps run when a bench asks (hookflow-bench retention), not on a timer under its load.
        let mut settings = Settings {
            max_capture_rate_per_s: i32::MAX,
            retention_interval: std::time::Duration::from_secs(86_400),
            ..Settings::new(base.clone())
        };
        adjust(&mut settings);
        let state = AppState::new(pool.clone(), settings, shutdown.clone());
        hookflow_control_plane::tasks::start(&state);
        tokio::spawn(hookflow_control_plane::api::serve(listener, state));
        Ok(Self { base, pool, org: org.id, key: key.key, cluster, shutdown })
    }

    /// The typed API client with the rig's key (setup calls only: the scenarios measure with their own clients).
    pub fn api(&self) -> hookflow_client::Client {
        hookflow_client::Client::new(&self.base, hookflow_client::Credentials::api_key(self.key.clone(), self.org))
    }

    /// Creates a webhook endpoint through the API and returns its id.
    pub async fn webhook(&self, name: &str) -> Result<String, BoxError> {
        let create = CreateWebhook::new(name.parse()?);
        Ok(self.api().webhooks().create(&create).await?.id.to_string())
    }

    /// `POST path` with a JSON body; answers the JSON answer of a success.
    pub async fn post(&self, path: &str, body: serde_json::Value) -> Result<serde_json::Value, BoxError> {
        Ok(self.api().post(path, &body).await?)
    }

    /// Creates a flow through the API and returns its id.
    pub async fn flow(&self, name: &str, definition: serde_json::Value) -> Result<String, BoxError> {
        let flow = WriteFlow::new(name.parse()?, definition);
        Ok(self.api().flows().create(&flow).await?.id.to_string())
    }

    /// Launches a flow's draft and returns the execution id.
    pub async fn launch(&self, flow: &str) -> Result<String, BoxError> {
        Ok(self.api().flows().launch(flow, &Launch::default()).await?.id.to_string())
    }

    /// A runner-protocol client with the rig's key.
    pub fn runner_client(&self) -> hookflow_runner::client::Client {
        hookflow_runner::client::Client::new(hookflow_runner::client::Connection {
            base_url: self.base.clone(),
            api_key: self.key.clone().into(),
            organization_id: Some(self.org),
        })
    }

    /// Registers a runner named `bench` with `slots` concurrent jobs through `client`; answers its id.
    pub async fn register_runner(client: &hookflow_runner::client::Client, slots: u32) -> Result<RunnerId, BoxError> {
        use hookflow_shared::api::fields::Labels;
        use hookflow_shared::api::runners::{Host, RegisterRunner};
        let host =
            Host { hostname: "bench".into(), os: "linux".into(), arch: "x86_64".into(), cpus: 2, memory_bytes: 0 };
        let registration = RegisterRunner {
            name: "bench".parse()?,
            labels: Labels::default(),
            version: "bench".parse()?,
            max_concurrency: slots,
            host,
        };
        Ok(client.register(&registration).await?.id)
    }

    /// Starts a rig, runs `measure` on it and stops the rig whatever `measure` answered.
    pub async fn around(measure: impl AsyncFnOnce(&Rig) -> Result<(), BoxError>) -> Result<(), BoxError> {
        let rig = Rig::start().await?;
        let outcome = measure(&rig).await;
        rig.stop().await;
        outcome
    }

    pub async fn stop(self) {
        self.shutdown.cancel();
        self.pool.close().await;
        let mut cluster = self.cluster;
        let running = cluster.running.take();
        let _ = tokio::task::spawn_blocking(move || running.map(|c| c.stop())).await;
        // Dropping it removes the directory.
    }
}
