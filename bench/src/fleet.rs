//! `hookflow-bench fleet`: thousands of simulated runners (each a long poll plus a heartbeat every 10 s, from
//! several loopback addresses) against the real `hookflow-server` binary in its own process on its embedded
//! PostgreSQL, so its memory and CPU are its own: server RSS and CPU while the fleet waits, PostgreSQL connections
//! in use, heartbeat latency, launch -> claim latency while the fleet waits, and fairness: the first job of each of
//! many organizations while one organization has a large backlog.

use crate::load::{BoxError, percentile_ms};
use crate::server_process::{ServerProcess, database, postgres_cpu, start_server, usage};
use hookflow_shared::{JobId, RunnerId};
use serde_json::{Value, json};
use std::net::{IpAddr, Ipv4Addr};

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Simulated runners, each with one long poll waiting and a heartbeat every 10 s.
    #[arg(long, default_value_t = 5000)]
    runners: usize,
    /// Loopback addresses they come from (127.0.0.2 and up), as a fleet comes from many hosts.
    #[arg(long, default_value_t = 50)]
    addresses: u32,
    /// Seconds the idle fleet is watched.
    #[arg(long, default_value_t = 20)]
    idle_seconds: u64,
    /// Launches timed while the fleet waits.
    #[arg(long, default_value_t = 200)]
    launches: usize,
    /// Organizations of the fairness run (one of them with a backlog).
    #[arg(long, default_value_t = 100)]
    organizations: usize,
    /// Simulated runners speak HTTP/1.1 (a connection for the waiting poll, another for heartbeats) instead of
    /// HTTP/2, which multiplexes both on one connection.
    #[arg(long)]
    http1: bool,
}

fn raise_file_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// One HTTP client per source address.
fn clients(addresses: u32, http2: bool) -> Result<Vec<reqwest::Client>, BoxError> {
    (0..addresses)
        .map(|i| {
            let from = Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 0, 0, 2)) + i);
            let builder = reqwest::Client::builder().local_address(IpAddr::V4(from)).pool_max_idle_per_host(usize::MAX);
            // HTTP/2 (prior knowledge on plain http, ALPN on https): a runner's poll and heartbeats share a connection.
            let builder = if http2 { builder.http2_prior_knowledge() } else { builder };
            builder.build().map_err(Into::into)
        })
        .collect()
}

#[derive(Clone)]
struct Api {
    http: reqwest::Client,
    base: String,
    key: String,
    org: String,
}

impl Api {
    async fn post(&self, path: &str, body: Value) -> Result<(u16, Value), BoxError> {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .header(hookflow_shared::wire::header::API_KEY, &self.key)
            .header(hookflow_shared::wire::header::ORGANIZATION, &self.org)
            .json(&body)
            .timeout(Duration::from_secs(90))
            .send()
            .await?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        Ok((status, if text.is_empty() { Value::Null } else { serde_json::from_str(&text)? }))
    }
}

/// A simulated runner: registers, then long-polls (one job at a time, completing each at once and reporting when
/// it got it) while a heartbeat every `beat` measures its latency.
async fn simulate(
    api: Api,
    beat: Duration,
    got: tokio::sync::mpsc::UnboundedSender<(Instant, String)>,
    beats: Arc<Mutex<Vec<u32>>>,
) {
    let registration = json!({"name": "sim", "labels": [], "version": "bench", "max_concurrency": 1,
        "host": {"hostname": "sim", "os": "linux", "arch": "x86_64", "cpus": 1, "memory_bytes": 0}});
    // A fleet starting at once meets the key's rate limit: retry as the runner daemon does.
    let mut registered = None;
    for _ in 0..120 {
        match api.post(hookflow_shared::wire::runner_route::RUNNERS, registration.clone()).await {
            Ok((201, answer)) => {
                registered = answer["id"].as_str().map(str::to_owned);
                break;
            }
            _ => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
    let Some(id) = registered else { return };
    let heart = {
        let (api, id, beats) = (api.clone(), id.clone(), beats.clone());
        tokio::spawn(async move {
            // Spread the fleet's heartbeats over the interval.
            tokio::time::sleep(beat.mul_f64(rand_fraction(&id))).await;
            loop {
                let started = Instant::now();
                let path = hookflow_shared::wire::runner_route::heartbeat(id.parse().unwrap_or(RunnerId::nil()));
                if api.post(&path, json!({"running_jobs": []})).await.is_ok() {
                    beats.lock().map(|mut b| b.push(started.elapsed().as_micros() as u32)).ok();
                }
                tokio::time::sleep(beat).await;
            }
        })
    };
    loop {
        let poll = json!({"runner_id": id, "wait_s": 30, "max_jobs": 1});
        match api.post(hookflow_shared::wire::runner_route::NEXT_JOB, poll).await {
            Ok((200, batch)) => {
                for job in batch["jobs"].as_array().cloned().unwrap_or_default() {
                    let _ = got.send((Instant::now(), job["execution_id"].as_str().unwrap_or_default().to_owned()));
                    let job_id: JobId = job["job_id"].as_str().and_then(|j| j.parse().ok()).unwrap_or(JobId::nil());
                    let _ = api
                        .http
                        .post(format!("{}{}", api.base, hookflow_shared::wire::runner_route::job_complete(job_id)))
                        .bearer_auth(job["job_token"].as_str().unwrap_or_default())
                        .json(&json!({"status": "succeeded"}))
                        .send()
                        .await;
                }
            }
            Ok((204, _)) => {}
            // Refused (a rate limit, say) or unreachable: wait before asking again, never spin.
            Ok(_) | Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
        if heart.is_finished() {
            return;
        }
    }
}

/// A fraction in [0, 1) from an id, to spread heartbeats without a random number generator.
fn rand_fraction(id: &str) -> f64 {
    let hash = id.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    (hash % 10_000) as f64 / 10_000.0
}

/// PostgreSQL connections of the server that are running a statement right now (sampled).
async fn connections_in_use(pool: &sqlx::PgPool) -> Result<i64, BoxError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = 'hookflow' AND state = 'active' AND pid <> pg_backend_pid()",
    )
    .fetch_one(pool)
    .await?)
}

/// Claims seen by the simulated runners (when, which execution), and their heartbeat latencies (microseconds).
type Claims = tokio::sync::mpsc::UnboundedReceiver<(Instant, String)>;
type Beats = Arc<Mutex<Vec<u32>>>;

/// The server under test and the clients the simulated runners share.
struct Fleet {
    server: ServerProcess,
    http: Vec<reqwest::Client>,
    pool: sqlx::PgPool,
}

impl Fleet {
    /// The `i`-th runner's view of the API (its client spreads runners over the loopback addresses).
    fn api(&self, i: usize) -> Api {
        Api {
            http: self.http[i % self.http.len()].clone(),
            base: self.server.base.clone(),
            key: self.server.key.clone(),
            org: self.server.org.clone(),
        }
    }

    /// Starts the simulated runners, 100 every 100 ms, and waits until every one is registered.
    async fn enlist(&self, args: &Args) -> Result<(Claims, Beats), BoxError> {
        let (got_tx, got) = tokio::sync::mpsc::unbounded_channel();
        let beats: Beats = Arc::default();
        let started = Instant::now();
        for i in 0..args.runners {
            tokio::spawn(simulate(self.api(i), Duration::from_secs(10), got_tx.clone(), beats.clone()));
            if i % 100 == 99 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        loop {
            let registered: i64 = sqlx::query_scalar("SELECT count(*) FROM runners").fetch_one(&self.pool).await?;
            if registered as usize >= args.runners {
                break;
            }
            if started.elapsed() > Duration::from_secs(300) {
                return Err(format!("only {registered} runners registered in 300 s").into());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        println!(
            "  registered in {:.1} s; watching the idle fleet for {} s",
            started.elapsed().as_secs_f64(),
            args.idle_seconds
        );
        Ok((got, beats))
    }

    /// The idle fleet: server RSS and CPU, its PostgreSQL's CPU, heartbeat latency, connections in use.
    async fn watch_idle(&self, args: &Args, beats: &Beats, rss_empty: f64) -> Result<(), BoxError> {
        let pid = self.server.child.id();
        tokio::time::sleep(Duration::from_secs(3)).await;
        beats.lock().map(|mut b| b.clear()).ok();
        let (_, cpu_before) = usage(pid);
        let pg_before = postgres_cpu(&self.server.dir);
        let mut in_use_max = 0;
        let idle_until = Instant::now() + Duration::from_secs(args.idle_seconds);
        while Instant::now() < idle_until {
            in_use_max = in_use_max.max(connections_in_use(&self.pool).await?);
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let (rss_idle, cpu_after) = usage(pid);
        let idle_core = (cpu_after - cpu_before) / args.idle_seconds as f64;
        let pg_core = (postgres_cpu(&self.server.dir) - pg_before) / args.idle_seconds as f64;
        let idle_beats = beats.lock().map(|b| b.clone()).unwrap_or_default();
        println!(
            "  server RSS: {rss_empty:.0} MiB before the fleet, {rss_idle:.0} MiB with it waiting (target <= 200 MiB)"
        );
        println!(
            "  CPU while the fleet waits: server {:.0}% of one core (target <= 25%), its PostgreSQL {:.0}% more",
            idle_core * 100.0,
            pg_core * 100.0
        );
        println!(
            "  heartbeats: {} in {} s, p50 {:.2} ms, p99 {:.2} ms (target p99 <= 50 ms)",
            idle_beats.len(),
            args.idle_seconds,
            percentile_ms(&idle_beats, 50.0),
            percentile_ms(&idle_beats, 99.0)
        );
        println!(
            "  PostgreSQL connections running a statement, most seen: {in_use_max} (pool 20; waiting polls hold none)"
        );
        Ok(())
    }

    /// Launch -> a waiting runner holds the job, one launch at a time; answers the flow launched.
    async fn launch_latency(&self, args: &Args, got: &mut Claims) -> Result<String, BoxError> {
        let nodes = json!([{"id": "s", "kind": "set_variables", "variables": {"a": "1"}}]);
        let (_, flow) = self.api(0).post("/flows", json!({"name": "fleet", "definition": {"nodes": nodes}})).await?;
        let flow = flow["id"].as_str().ok_or("flow id")?.to_owned();
        let launcher = Api { http: reqwest::Client::new(), ..self.api(0) };
        let mut latencies = Vec::new();
        for _ in 0..args.launches {
            tokio::time::sleep(Duration::from_millis(20)).await;
            while got.try_recv().is_ok() {}
            let sent = Instant::now();
            let (status, execution) = launcher.post(&format!("/flows/{flow}/launch"), json!({})).await?;
            if status != 201 {
                return Err(format!("launch answered {status}").into());
            }
            let wanted = execution["id"].as_str().unwrap_or_default().to_owned();
            loop {
                let (at, id) = tokio::time::timeout(Duration::from_secs(10), got.recv()).await?.ok_or("no runner")?;
                if id == wanted {
                    latencies.push(at.duration_since(sent).as_micros() as u32);
                    break;
                }
            }
        }
        let (rss_busy, _) = usage(self.server.child.id());
        println!(
            "  launch -> claim while {} wait: p50 {:.2} ms, p99 {:.2} ms over {} launches (targets 3 ms / 25 ms); RSS {rss_busy:.0} MiB",
            args.runners,
            percentile_ms(&latencies, 50.0),
            percentile_ms(&latencies, 99.0),
            latencies.len()
        );
        Ok(flow)
    }
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    raise_file_limit();
    let server = start_server()?;
    let pool = database(&server)?;
    let fleet = Fleet { http: clients(args.addresses.max(1), !args.http1)?, server, pool };
    println!(
        "fleet: {} simulated runners ({}) from {} addresses against one hookflow-server process",
        args.runners,
        if args.http1 { "HTTP/1.1" } else { "HTTP/2" },
        args.addresses
    );
    let (rss_empty, _) = usage(fleet.server.child.id());
    let (mut got, beats) = fleet.enlist(&args).await?;
    fleet.watch_idle(&args, &beats, rss_empty).await?;
    let flow = fleet.launch_latency(&args, &mut got).await?;
    fairness(&fleet.server, &fleet.pool, &args, &flow).await?;
    fleet.pool.close().await;
    Ok(())
}

/// One organization queues a backlog, then every other organization launches one job at once; each has one
/// runner of its own. How long each waits for its first claim says whether a backlog elsewhere slows them.
async fn fairness(server: &ServerProcess, pool: &sqlx::PgPool, args: &Args, _flow: &str) -> Result<(), BoxError> {
    use hookflow_control_plane::api::admin::{keys, organization};
    use hookflow_control_plane::auth::Actor;
    let mut orgs = Vec::new();
    for i in 0..args.organizations {
        let mut tx = pool.begin().await?;
        let org = organization::create(&mut tx, &format!("tenant {i}"), Actor::Operator).await?;
        let key = keys::create(
            &mut tx,
            keys::NewKey {
                org_id: org.id,
                name: "fleet".into(),
                scopes: hookflow_shared::ScopeSet::all(),
                expires_at: None,
                actor: Actor::Operator,
            },
        )
        .await?;
        tx.commit().await?;
        orgs.push((org.id.to_string(), key.key));
    }
    let definition = json!({"nodes": [{"id": "s", "kind": "set_variables", "variables": {"a": "1"}}]});
    let mut flows = Vec::new();
    for (org, key) in &orgs {
        let api = Api { http: reqwest::Client::new(), base: server.base.clone(), key: key.clone(), org: org.clone() };
        let flow = api.post("/flows", json!({"name": "fair", "definition": definition})).await?.1["id"]
            .as_str()
            .ok_or("flow")?
            .to_owned();
        flows.push((api, flow));
    }
    // The first organization's backlog, queued before anyone else launches.
    let (heavy, heavy_flow) = &flows[0];
    for _ in 0..2_000 {
        heavy.post(&format!("/flows/{heavy_flow}/launch"), json!({})).await?;
    }
    let (got_tx, mut got) = tokio::sync::mpsc::unbounded_channel();
    let beats: Arc<Mutex<Vec<u32>>> = Arc::default();
    for (api, _) in &flows {
        tokio::spawn(simulate(api.clone(), Duration::from_secs(10), got_tx.clone(), beats.clone()));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    // Every light organization launches at once; each wait runs from its own launch's answer to its claim.
    let mut launches = tokio::task::JoinSet::new();
    for (api, flow) in flows.into_iter().skip(1) {
        launches.spawn(async move {
            let (_, execution) = api.post(&format!("/flows/{flow}/launch"), json!({})).await?;
            Ok::<_, BoxError>((execution["id"].as_str().unwrap_or_default().to_owned(), Instant::now()))
        });
    }
    let mut launched = std::collections::HashMap::new();
    while let Some(done) = launches.join_next().await {
        let (id, at) = done??;
        launched.insert(id, at);
    }
    let mut waits = Vec::new();
    while waits.len() < launched.len() {
        let (at, id) = tokio::time::timeout(Duration::from_secs(30), got.recv()).await?.ok_or("no runner")?;
        if let Some(sent) = launched.get(&id) {
            waits.push(at.saturating_duration_since(*sent).as_micros() as u32);
        }
    }
    let remaining: i64 =
        sqlx::query_scalar("SELECT count(*) FROM executions WHERE status = 'queued'").fetch_one(pool).await?;
    println!(
        "  fairness: {} organizations launch at once while one has a 2,000-job backlog ({remaining} still queued): \
         launch -> own first claim p50 {:.1} ms, max {:.1} ms",
        launched.len(),
        percentile_ms(&waits, 50.0),
        percentile_ms(&waits, 100.0)
    );
    Ok(())
}
