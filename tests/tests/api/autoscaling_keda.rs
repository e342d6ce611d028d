//! Autoscaling (issue #53) as KEDA's `metrics-api` trigger on a `ScaledJob` does it, over the real
//! `hookflow-server` (`--runner-pool`, metrics listener) and real one-shot runner processes: every 2 s read the
//! pool's `queued` from `GET /runner/pools/eu` (the runner key alone, no `X-Organization-Id`), start
//! ceil(queued / 5) runners `--max-jobs 1 --idle-exit-s 10` (as deploy/kubernetes/keda/scaledjob.yaml carries them)
//! up to 20 alive, none at 0. From zero runners, 50 launches all succeed, the first claim comes within 10 s of the
//! first launch, and no runner is left 30 s after `queued` first reads 0. Along the way the scaler endpoint and
//! the `hookflow_pool_*` metrics are checked against SQL counts at (at least) 10 scrapes.

use crate::{RUNNER, SERVER};
use hookflow_tests::Creds;
use hookflow_tests::prometheus;
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::server::ServerProcess;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const LAUNCHES: usize = 50;
const PER_RUNNER: i64 = 5;
const MAX_ALIVE: usize = 20;

/// The pool's numbers as the database holds them (SQL over `executions` and `runners`; online: seen within
/// three heartbeat intervals, 2 s with `--lease-s 6`).
async fn sql(db: &sqlx::PgPool, labels: &[&str]) -> [i64; 5] {
    let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
    let row: (i64, i64, i64, i64, i64) = sqlx::query_as(
        "WITH r AS (
             SELECT r.max_concurrency, r.last_seen_at > now() - interval '6 seconds' AS online,
                 (SELECT count(*) FROM executions e WHERE e.status = 'running' AND e.runner_id = r.id) AS running
             FROM runners r WHERE r.organization_id IS NOT NULL AND r.labels @> $1)
         SELECT (SELECT count(*) FROM executions WHERE status = 'queued' AND runner_labels <@ $1),
             (SELECT coalesce(sum(running), 0)::int8 FROM r),
             (SELECT count(*) FROM r WHERE online),
             (SELECT coalesce(sum(running), 0)::int8 FROM r WHERE online),
             (SELECT coalesce(sum(greatest(max_concurrency - running, 0)), 0)::int8 FROM r WHERE online)",
    )
    .bind(&labels)
    .fetch_one(db)
    .await
    .expect("count");
    [row.0, row.1, row.2, row.3, row.4]
}

struct Scaler {
    server: ServerProcess,
    client: reqwest::Client,
    runner_key: String,
    db: sqlx::PgPool,
}

impl Scaler {
    /// `GET /runner/pools/{pool}` as KEDA sends it: the key, no organization header.
    async fn pool(&self, pool: &str) -> Value {
        let reply = self
            .client
            .get(format!("{}/runner/pools/{pool}", self.server.base))
            .header("x-api-key", &self.runner_key)
            .send()
            .await
            .expect("scaler endpoint");
        assert_eq!(reply.status(), 200);
        reply.json().await.expect("json")
    }

    async fn scrape(&self) -> prometheus_parse::Scrape {
        let metrics = self.server.metrics.as_deref().expect("a metrics listener");
        let text = self.client.get(format!("http://{metrics}/metrics")).send().await.expect("scrape");
        prometheus::parse(&text.text().await.expect("text"))
    }

    /// One comparison of the endpoint and the metrics with SQL; `true` when the database did not move meanwhile
    /// (counted the same before and after) and so the comparison was made.
    async fn agrees(&self) -> bool {
        let before = sql(&self.db, &["eu"]).await;
        let pool = self.pool("eu").await;
        let scrape = self.scrape().await;
        let after = sql(&self.db, &["eu"]).await;
        if before != after {
            return false;
        }
        let endpoint =
            ["queued", "running", "runners_online", "busy_slots", "idle_slots"].map(|k| pool[k].as_i64().unwrap());
        assert_eq!(endpoint, before, "the scaler endpoint against SQL: {pool}");
        let metric = |name: &str, extra: &[(&str, &str)]| {
            let mut labels = vec![("pool", "eu")];
            labels.extend_from_slice(extra);
            prometheus::sum(&scrape, name, &labels) as i64
        };
        let metrics = [
            metric("hookflow_pool_queue_depth", &[]),
            metric("hookflow_pool_runners_online", &[]),
            metric("hookflow_pool_slots", &[("state", "busy")]),
            metric("hookflow_pool_slots", &[("state", "idle")]),
        ];
        assert_eq!(metrics, [before[0], before[2], before[3], before[4]], "the pool metrics against SQL");
        let oldest = prometheus::sum(&scrape, "hookflow_pool_oldest_queued_seconds", &[("pool", "eu")]);
        let oldest_sql: f64 = sqlx::query_scalar(
            "SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 FROM executions
             WHERE status = 'queued' AND runner_labels <@ ARRAY['eu']",
        )
        .fetch_one(&self.db)
        .await
        .expect("oldest");
        assert!((oldest - oldest_sql).abs() < 2.0, "oldest queued: metric {oldest} s, SQL {oldest_sql} s");
        true
    }
}

#[tokio::test]
async fn a_keda_like_autoscaler_runs_fifty_jobs_on_one_shot_runners_from_zero_and_back_to_zero() {
    let args = ["--runner-pool", "eu=eu", "--metrics-listen", "127.0.0.1:0", "--lease-s", "6"];
    let server = ServerProcess::spawn(SERVER, &args).await;
    let client = reqwest::Client::new();
    let (base, key, org) = (server.base.clone(), server.key.clone(), server.org.clone());
    let admin = |method: Method, path: &str, body: Value| {
        client
            .request(method, format!("{base}{path}"))
            .header("x-api-key", &key)
            .header("x-organization-id", &org)
            .json(&body)
            .send()
    };
    let created: Value = admin(Method::POST, "/api-keys", json!({"name": "scaler", "preset": "runner"}))
        .await
        .expect("key")
        .json()
        .await
        .expect("json");
    let runner_key = created["key"].as_str().expect("key").to_owned();
    let creds = Creds { key: runner_key.clone(), org: server.org.parse().expect("org id") };
    let definition = json!({"nodes": [{"id": "wait", "kind": "delay", "delay_ms": 300}]});
    let flow: Value = admin(Method::POST, "/flows", json!({"name": "scaled", "definition": definition}))
        .await
        .expect("flow")
        .json()
        .await
        .expect("json");
    let flow = flow["id"].as_str().expect("flow id").to_owned();
    let db = sqlx::PgPool::connect(&server.database_url).await.expect("database");
    let scaler = Scaler { server, client: client.clone(), runner_key, db };

    // Every declared pool's series exists before anything happened, at 0.
    let first = scaler.scrape().await;
    for pool in ["default", "eu"] {
        let present =
            first.samples.iter().any(|s| s.metric == "hookflow_pool_queue_depth" && s.labels.get("pool") == Some(pool));
        assert!(present, "a series for pool {pool}");
    }
    assert_eq!(prometheus::sum(&first, "hookflow_pool_runners_online", &[("pool", "eu")]), 0.0);
    let mut agreed = usize::from(scaler.agrees().await);

    for _ in 0..LAUNCHES {
        let reply = admin(Method::POST, &format!("/flows/{flow}/launch"), json!({"runner_labels": ["eu"]})).await;
        assert_eq!(reply.expect("launch").status(), 201);
    }
    agreed += usize::from(scaler.agrees().await);

    let mut alive: Vec<RunnerProcess> = Vec::new();
    let mut started = 0usize;
    let mut zero_at: Option<Instant> = None;
    loop {
        // Runners that left must have left well.
        let mut still = Vec::new();
        for mut runner in alive.drain(..) {
            match runner.child.try_wait().expect("wait") {
                Some(status) => assert!(status.success(), "a one-shot runner failed: {status:?}\n{}", runner.output()),
                None => still.push(runner),
            }
        }
        alive = still;
        let queued = scaler.pool("eu").await["queued"].as_i64().expect("queued");
        if queued == 0 && zero_at.is_none() {
            zero_at = Some(Instant::now());
        }
        if let Some(zero) = zero_at {
            if alive.is_empty() {
                break;
            }
            let left: Vec<String> = alive.iter().map(RunnerProcess::output).collect();
            assert!(zero.elapsed() < Duration::from_secs(30), "runners left 30 s after queued read 0:\n{left:?}");
        }
        let wanted = usize::try_from((queued + PER_RUNNER - 1) / PER_RUNNER).unwrap().min(MAX_ALIVE);
        for _ in alive.len()..wanted {
            let one_shot = ["--max-jobs", "1", "--idle-exit-s", "10"];
            alive.push(RunnerProcess::spawn(RUNNER, &scaler.server.base, &creds, &["eu"], &one_shot).await);
            started += 1;
        }
        if agreed < 10 {
            agreed += usize::from(scaler.agrees().await);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    while agreed < 10 {
        agreed += usize::from(scaler.agrees().await);
    }

    let (succeeded, total, first_claim_s): (i64, i64, f64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE status = 'succeeded'), count(*),
             extract(epoch FROM min(started_at) - min(created_at))::float8 FROM executions",
    )
    .fetch_one(&scaler.db)
    .await
    .expect("outcome");
    assert_eq!((succeeded, total), (LAUNCHES as i64, LAUNCHES as i64), "every launch succeeded");
    assert!(first_claim_s < 10.0, "first claim {first_claim_s} s after the first launch");
    assert!(started <= LAUNCHES, "one-shot runners started: {started}");
    let runners: i64 = sqlx::query_scalar("SELECT count(*) FROM runners").fetch_one(&scaler.db).await.expect("runners");
    assert_eq!(runners, 0, "every runner deregistered as it left");
    let last = scaler.pool("eu").await;
    assert_eq!((last["queued"].as_i64(), last["runners_online"].as_i64()), (Some(0), Some(0)), "{last}");
}

/// A bad `--runner-pool` (or `HOOKFLOW_RUNNER_POOLS`) stops the start with a message naming the flag and the rule,
/// before any database is opened.
#[test]
fn a_bad_runner_pool_stops_the_start_naming_the_flag() {
    let data = std::env::temp_dir().join(format!("hookflow-pools-{}", uuid::Uuid::new_v4()));
    let many: Vec<String> = (0..51).map(|i| format!("p{i}=l")).collect();
    let cases: [(&[&str], Option<String>, &str); 5] = [
        (&["--runner-pool", "Eu=eu"], None, "must match ^[a-z0-9][a-z0-9_-]{0,31}$"),
        (&["--runner-pool", "default=eu"], None, "always exists"),
        (&["--runner-pool", "eu"], None, "expected NAME=LABEL"),
        (&["--runner-pool", "eu=a", "--runner-pool", "eu=b"], None, "declared twice"),
        (&[], Some(many.join(";")), "at most 50 pools"),
    ];
    for (args, env, says) in cases {
        let mut command = std::process::Command::new(SERVER);
        command
            .args(["--listen", "127.0.0.1:0", "--database-url", "postgres://127.0.0.1:1/none", "--data-dir"])
            .arg(&data)
            .args(args)
            .env("HOOKFLOW_METRICS_LISTEN", "off");
        if let Some(env) = env {
            command.env("HOOKFLOW_RUNNER_POOLS", env);
        }
        let out = command.output().expect("run the server");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started");
        assert!(stderr.contains("--runner-pool") && stderr.contains(says), "{args:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&data);
}
