//! `hookflow-bench fleet`: thousands of simulated runners (each a long poll plus a heartbeat every 10 s, on
//! connections of its own as a runner process holds them: `fleet_link`), from several loopback addresses, against
//! the real `hookflow-server` binary in its own process on its embedded PostgreSQL, so its memory and CPU are its
//! own: server RSS per connection and CPU while the fleet waits, PostgreSQL connections in use, heartbeat latency,
//! launch -> claim latency while the fleet waits, protocol errors, and fairness: the first job of each of many
//! organizations while one organization has a large backlog.

use crate::fleet_link::{Dialer, Link, Tally};
use crate::load::{BoxError, percentile_ms};
use crate::server_process::{ServerProcess, database, postgres_cpu, start_server_with, usage};
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
    /// HTTP/2 only: runners whose polls and heartbeats share one connection (as behind a proxy that multiplexes
    /// them); 1 gives every runner its own. Each side of a connection is an open file of its process: a fleet
    /// larger than the open-file limit (`ulimit -Hn`) allows needs more than 1.
    #[arg(long, default_value_t = 1)]
    runners_per_connection: usize,
}

/// Open files this process and the server it starts (which inherits the limit) may hold: a fleet of 20,000
/// runners needs 20,000 connections on each side, over the 20,000 this machine's hard limit allows. Raising the
/// hard limit needs privileges; without them the soft limit goes to the hard one.
const OPEN_FILES: u64 = 1 << 17;

/// Raises the open-file limit and checks that the fleet's connections fit under it, on this side and the server's.
fn raise_file_limit(args: &Args) -> Result<(), BoxError> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if setrlimit(Resource::RLIMIT_NOFILE, OPEN_FILES.max(hard), OPEN_FILES.max(hard)).is_err() {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    let (limit, _) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if args.http1 && args.runners_per_connection != 1 {
        return Err(
            "--runners-per-connection is for HTTP/2: an HTTP/1.1 connection carries one request at a time".into()
        );
    }
    let connections =
        if args.http1 { 2 * args.runners } else { args.runners.div_ceil(args.runners_per_connection.max(1)) };
    // Besides the fleet: the server's database connections, listener and logs (it keeps 512 aside).
    if connections as u64 + 600 > limit {
        return Err(format!(
            "{connections} connections do not fit under this process's open-file limit ({limit}, which the server \
             inherits): fewer runners, or more --runners-per-connection over HTTP/2"
        )
        .into());
    }
    Ok(())
}

/// The `i`-th of `addresses` loopback source addresses (127.0.0.2 and up), as a fleet comes from many hosts.
fn source_address(i: usize, addresses: u32) -> IpAddr {
    let i = u32::try_from(i).unwrap_or(0) % addresses.max(1);
    IpAddr::V4(Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 0, 0, 2)) + i))
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

/// A simulated runner's credentials and its connection (the poll's; `Link::second` gives the other).
#[derive(Clone)]
struct Runner {
    link: Link,
    key: String,
    org: String,
}

impl Runner {
    async fn post(&self, link: &Link, path: &str, body: &Value) -> Result<(u16, Value), BoxError> {
        let headers = [
            (hookflow_shared::wire::header::API_KEY, &*self.key),
            (hookflow_shared::wire::header::ORGANIZATION, &*self.org),
        ];
        link.post(path, &headers, body).await
    }
}

/// Registers on `link`, retrying as the runner daemon does when a fleet starting at once meets a rate limit.
async fn register(runner: &Runner, link: &Link) -> Option<String> {
    let registration = json!({"name": "sim", "labels": [], "version": "bench", "max_concurrency": 1,
        "host": {"hostname": "sim", "os": "linux", "arch": "x86_64", "cpus": 1, "memory_bytes": 0}});
    for _ in 0..120 {
        match runner.post(link, hookflow_shared::wire::runner_route::RUNNERS, &registration).await {
            Ok((201, answer)) => return answer["id"].as_str().map(str::to_owned),
            _ => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
    None
}

/// A simulated runner: registers, then long-polls (one job at a time, completing each at once and reporting when
/// it got it) while a heartbeat every `beat` measures its latency. Over HTTP/1.1 the poll has a connection of its
/// own and everything else shares the other; over HTTP/2 one connection carries both.
async fn simulate(
    runner: Runner,
    beat: Duration,
    got: tokio::sync::mpsc::UnboundedSender<(Instant, String)>,
    beats: Arc<Mutex<Vec<u32>>>,
) {
    let other = runner.link.second();
    let Some(id) = register(&runner, &other).await else { return };
    let heart = {
        let (runner, id, beats) = (runner.clone(), id.clone(), beats.clone());
        tokio::spawn(async move {
            // Spread the fleet's heartbeats over the interval.
            tokio::time::sleep(beat.mul_f64(rand_fraction(&id))).await;
            let path = hookflow_shared::wire::runner_route::heartbeat(id.parse().unwrap_or(RunnerId::nil()));
            loop {
                let started = Instant::now();
                if let Ok((200..=299, _)) = runner.post(&other, &path, &json!({"running_jobs": []})).await {
                    beats.lock().map(|mut b| b.push(started.elapsed().as_micros() as u32)).ok();
                }
                tokio::time::sleep(beat).await;
            }
        })
    };
    loop {
        let poll = json!({"runner_id": id, "wait_s": 30, "max_jobs": 1});
        match runner.post(&runner.link, hookflow_shared::wire::runner_route::NEXT_JOB, &poll).await {
            Ok((200, batch)) => {
                for job in batch["jobs"].as_array().cloned().unwrap_or_default() {
                    let _ = got.send((Instant::now(), job["execution_id"].as_str().unwrap_or_default().to_owned()));
                    let job_id: JobId = job["job_id"].as_str().and_then(|j| j.parse().ok()).unwrap_or(JobId::nil());
                    let bearer = format!("Bearer {}", job["job_token"].as_str().unwrap_or_default());
                    let path = hookflow_shared::wire::runner_route::job_complete(job_id);
                    let _ =
                        runner.link.post(&path, &[("authorization", &bearer)], &json!({"status": "succeeded"})).await;
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

/// Another key of the fleet's organization, with every scope.
async fn fleet_key(pool: &sqlx::PgPool, org_id: hookflow_shared::OrgId) -> Result<String, BoxError> {
    use hookflow_control_plane::api::admin::keys;
    let mut tx = pool.begin().await?;
    let key = keys::create(
        &mut tx,
        keys::NewKey {
            org_id,
            name: "fleet".into(),
            scopes: hookflow_shared::ScopeSet::all(),
            expires_at: None,
            actor: hookflow_control_plane::auth::Actor::Operator,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(key.key)
}

/// Established TCP connections whose local end is the server's port (its side of every client connection).
fn server_connections(base: &str) -> usize {
    let port = base.rsplit(':').next().and_then(|p| p.parse::<u16>().ok()).unwrap_or(0);
    let wanted = format!(":{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter(|line| {
            let mut fields = line.split_whitespace().skip(1);
            let local = fields.next().unwrap_or_default();
            local.ends_with(&wanted) && fields.nth(1) == Some("01")
        })
        .count()
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

/// Runners that share one API key: the default per-key rate (2,000 requests/s) covers about 15,000 runners
/// heartbeating every 10 s and polling every 30 s; a large fleet is given several keys, as an operator would.
const RUNNERS_PER_KEY: usize = 2_000;

/// The server under test, where the simulated runners connect from, and their keys.
struct Fleet {
    server: ServerProcess,
    dialers: Vec<Arc<Dialer>>,
    /// Connections shared by several runners (`--runners-per-connection` over 1), by runner number / that.
    shared: Vec<Link>,
    per_connection: usize,
    keys: Vec<String>,
    tally: Arc<Tally>,
    pool: sqlx::PgPool,
}

impl Fleet {
    async fn new(server: ServerProcess, pool: sqlx::PgPool, args: &Args) -> Result<Self, BoxError> {
        let address: std::net::SocketAddr = server.base.trim_start_matches("http://").parse()?;
        let tally = Arc::new(Tally::default());
        let dialers: Vec<_> = (0..args.addresses.max(1) as usize)
            .map(|i| {
                let from = source_address(i, args.addresses);
                Arc::new(Dialer { server: address, from, http2: !args.http1, tally: tally.clone() })
            })
            .collect();
        let per_connection = args.runners_per_connection.max(1);
        let shared = if per_connection > 1 {
            (0..args.runners.div_ceil(per_connection)).map(|c| Link::new(dialers[c % dialers.len()].clone())).collect()
        } else {
            Vec::new()
        };
        let mut keys = vec![server.key.clone()];
        let org_id: hookflow_shared::OrgId = server.org.parse()?;
        while keys.len() * RUNNERS_PER_KEY < args.runners {
            keys.push(fleet_key(&pool, org_id).await?);
        }
        Ok(Self { server, dialers, shared, per_connection, keys, tally, pool })
    }

    /// The `i`-th runner: its connection from its source address (or the one it shares), its key. Runners past
    /// the fleet's number get connections of their own.
    fn runner(&self, i: usize) -> Runner {
        let connection = i / self.per_connection;
        Runner {
            link: match self.shared.get(connection) {
                Some(shared) => shared.clone(),
                None => Link::new(self.dialers[connection % self.dialers.len()].clone()),
            },
            key: self.keys[(i / RUNNERS_PER_KEY).min(self.keys.len() - 1)].clone(),
            org: self.server.org.clone(),
        }
    }

    /// A client of the API beside the fleet (launches, flows).
    fn api(&self) -> Api {
        Api {
            http: reqwest::Client::new(),
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
            tokio::spawn(simulate(self.runner(i), Duration::from_secs(10), got_tx.clone(), beats.clone()));
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
        let held = server_connections(&self.server.base);
        let idle_core = (cpu_after - cpu_before) / args.idle_seconds as f64;
        let pg_core = (postgres_cpu(&self.server.dir) - pg_before) / args.idle_seconds as f64;
        let idle_beats = beats.lock().map(|b| b.clone()).unwrap_or_default();
        println!(
            "  server RSS: {rss_empty:.0} MiB before the fleet, {rss_idle:.0} MiB with it waiting (target <= {} MiB); \
             {held} connections held, {:.1} KiB each",
            if args.http1 { 200 } else { 400 },
            (rss_idle - rss_empty) * 1024.0 / held.max(1) as f64
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
        let launcher = self.api();
        let (_, flow) = launcher.post("/flows", json!({"name": "fleet", "definition": {"nodes": nodes}})).await?;
        let flow = flow["id"].as_str().ok_or("flow id")?.to_owned();
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
            "  launch -> claim while {} wait: p50 {:.2} ms, p99 {:.2} ms over {} launches (targets 5 ms / 50 ms); RSS {rss_busy:.0} MiB",
            args.runners,
            percentile_ms(&latencies, 50.0),
            percentile_ms(&latencies, 99.0),
            latencies.len()
        );
        Ok(flow)
    }
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    raise_file_limit(&args)?;
    // The server's default connection caps (the bench's own are higher): the runners' connections leave them once
    // they authenticate.
    let server = start_server_with(&["--max-connections", "8192", "--max-connections-per-address", "1024"])?;
    let pool = database(&server)?;
    let fleet = Fleet::new(server, pool, &args).await?;
    println!(
        "fleet: {} simulated runners ({}) from {} addresses against one hookflow-server process",
        args.runners,
        match (args.http1, args.runners_per_connection) {
            (true, _) => "HTTP/1.1, two connections each".to_owned(),
            (false, 0 | 1) => "HTTP/2, a connection each".to_owned(),
            (false, n) => format!("HTTP/2, {n} to a connection"),
        },
        args.addresses
    );
    let (rss_empty, _) = usage(fleet.server.child.id());
    let (mut got, beats) = fleet.enlist(&args).await?;
    fleet.watch_idle(&args, &beats, rss_empty).await?;
    let flow = fleet.launch_latency(&args, &mut got).await?;
    fairness(&fleet, &args, &flow).await?;
    println!("  protocol errors across the fleet: {}", fleet.tally.line());
    fleet.pool.close().await;
    Ok(())
}

/// One organization queues a backlog, then every other organization launches one job at once; each has one
/// runner of its own. How long each waits for its first claim says whether a backlog elsewhere slows them.
async fn fairness(fleet: &Fleet, args: &Args, _flow: &str) -> Result<(), BoxError> {
    use hookflow_control_plane::api::admin::{keys, organization};
    let (server, pool) = (&fleet.server, &fleet.pool);
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
    for (i, (api, _)) in flows.iter().enumerate() {
        let runner = Runner { key: api.key.clone(), org: api.org.clone(), ..fleet.runner(args.runners + i) };
        tokio::spawn(simulate(runner, Duration::from_secs(10), got_tx.clone(), beats.clone()));
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
