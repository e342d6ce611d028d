//! Surviving the database, on a real pg_auto_failover set (a monitor, a primary, a synchronous secondary): two
//! `hookflow-server` processes on the multi-host URL and a runner process keep capture and launch load going
//! while the primary's PostgreSQL is killed, or frozen (`frozen`); deliveries to a destination pending through the
//! kill all arrive afterwards (`deliveries`); and a server whose lists read from the standby. Each test brings up
//! a set of its own (about a minute): they are ignored by the default suite and run by `.ci/run` with
//! `cargo test -p hookflow-tests --test failover -- --ignored --test-threads=1`.

mod deliveries;
mod frozen;
mod support;

use hookflow_tests::autofailover::FailoverSet;
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::server::ServerProcess;
use reqwest::Method;
use serde_json::json;
use sqlx::ConnectOptions as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::{Answer, Api, Runs, Stream, metrics, printed, readyz};

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");
const RUNNER: &str = env!("CARGO_BIN_EXE_hookflow-runner-under-test");

/// The load runs at most this long, whatever happens.
const LOAD_LIMIT: Duration = Duration::from_secs(150);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Capture,
    Launch,
}

/// One request of the load and its answer.
#[derive(Debug, Clone)]
struct Sent {
    kind: Kind,
    marker: String,
    /// When it was answered, since the load began.
    at: Duration,
    answer: Answer,
}

/// One worker: captures or launches, alternating between the servers, until `stop`.
async fn load(
    api: Api,
    bases: Vec<String>,
    kind: Kind,
    target: String,
    stop: Arc<AtomicBool>,
    began: Instant,
) -> Vec<Sent> {
    let mut sent = Vec::new();
    let worker = uuid::Uuid::new_v4().simple().to_string();
    let mut n = 0usize;
    while !stop.load(Ordering::SeqCst) && began.elapsed() < LOAD_LIMIT {
        n += 1;
        let base = &bases[n % bases.len()];
        let marker = format!("{worker}-{n}");
        let answer = match kind {
            Kind::Capture => api.capture(base, &target, marker.clone()).await,
            Kind::Launch => {
                let body = json!({"variables": {"run": marker}});
                api.call(Method::POST, base, &format!("/flows/{target}/launch"), Some(body)).await
            }
        };
        let ok = answer.status < 300;
        sent.push(Sent { kind, marker, at: began.elapsed(), answer });
        tokio::time::sleep(Duration::from_millis(match (ok, kind) {
            (false, _) => 100,
            (true, Kind::Capture) => 2,
            (true, Kind::Launch) => 20,
        }))
        .await;
    }
    sent
}

/// The set, two servers on its multi-host URL (the first made the organization), the admin's API.
async fn servers(set: &FailoverSet, read_url: Option<&str>) -> (Vec<ServerProcess>, Api) {
    let url = set.url("read-write");
    let mut extra = vec!["--metrics-listen", "127.0.0.1:0"];
    if let Some(read_url) = read_url {
        extra.extend(["--read-database-url", read_url]);
    }
    let first = ServerProcess::spawn_at(SERVER, &url, &extra).await;
    let second = ServerProcess::spawn_beside(SERVER, &first, &extra).await;
    let api = Api::new(&first.org, &first.key);
    api.expect(Method::PATCH, &first.base, "/organization", Some(json!({"capture_rate_limit_per_s": 10_000})), 200)
        .await;
    (vec![first, second], api)
}

/// What the failover test works with: the servers, an endpoint, a flow whose runs are counted, a runner on the
/// first server, a stream on the second.
struct Fixture {
    servers: Vec<ServerProcess>,
    api: Api,
    bases: Vec<String>,
    webhook: String,
    flow: String,
    runs: Runs,
    stream: Stream,
    _runner: RunnerProcess,
}

impl Fixture {
    async fn new(set: &FailoverSet) -> Self {
        let (servers, api) = servers(set, None).await;
        let bases: Vec<String> = servers.iter().map(|s| s.base.clone()).collect();
        let webhook = api.expect(Method::POST, &bases[0], "/webhooks", Some(json!({"name": "failover"})), 201).await;
        let webhook = webhook["id"].as_str().expect("id").to_owned();
        let runs = Runs::spawn().await;
        let definition = json!({"nodes": [{"id": "call", "kind": "request",
            "request": {"method": "GET", "url": format!("{}/run/{{{{run}}}}", runs.base)}}]});
        let flow = json!({"name": "failover", "definition": definition});
        let flow = api.expect(Method::POST, &bases[0], "/flows", Some(flow), 201).await;
        let flow = flow["id"].as_str().expect("id").to_owned();
        let key = servers[0].operator(SERVER, &["keys", "create", "--org", &api.org, "--preset", "runner"]).await;
        let creds = hookflow_tests::Creds { key: printed(&key, "key:"), org: api.org.parse().expect("org") };
        let runner = RunnerProcess::spawn(RUNNER, &bases[0], &creds, &[], &["--concurrency", "8"]).await;
        // Captures sent to the first server reach a stream on the second through the database's NOTIFY.
        let stream = Stream::open(&api, &bases[1], &webhook);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(api.capture(&bases[0], &webhook, "stream-before".into()).await.status, 200);
        assert!(stream.wait_for("stream-before", Duration::from_secs(10)).await.is_some(), "the stream works before");
        Self { servers, api, bases, webhook, flow, runs, stream, _runner: runner }
    }

    /// Six workers (four capturing, two launching) for 3 s, the primary killed, until both servers write again and
    /// 3 s more: what they were answered, when the kill was and how long writes took to come back.
    async fn load_through_a_crash(&self, set: &mut FailoverSet) -> (Vec<Sent>, Duration, Duration) {
        let stop = Arc::new(AtomicBool::new(false));
        let began = Instant::now();
        let mut workers = Vec::new();
        for i in 0..6 {
            let (kind, target) =
                if i < 4 { (Kind::Capture, self.webhook.clone()) } else { (Kind::Launch, self.flow.clone()) };
            workers.push(tokio::spawn(load(self.api.clone(), self.bases.clone(), kind, target, stop.clone(), began)));
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        let killed_at = began.elapsed();
        set.crash(0);
        let back_after =
            wait_until_writable(&self.api, &self.bases, &self.webhook, &self.flow, began).await - killed_at;
        tokio::time::sleep(Duration::from_secs(3)).await;
        stop.store(true, Ordering::SeqCst);
        let mut sent = Vec::new();
        for worker in workers {
            sent.extend(worker.await.expect("a load worker"));
        }
        (sent, killed_at, back_after)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "brings up a pg_auto_failover set (about a minute); .ci/run runs it"]
async fn the_servers_follow_the_primary_through_a_failover_and_lose_no_acknowledged_capture() {
    let mut set = FailoverSet::start().await;
    let fixture = Fixture::new(&set).await;
    let (ready, body) = readyz(&fixture.servers[1]).await;
    assert_eq!(ready, 200, "{body}");
    let database = &body["database"];
    assert_eq!(
        (database["primary"].as_str(), database["failovers"].as_u64()),
        (Some(set.address(0).as_str()), Some(0))
    );
    assert!(database["read_replica"].is_null(), "{body}");

    let (sent, killed_at, back_after) = fixture.load_through_a_crash(&mut set).await;
    let report = Report::of(&sent, killed_at);
    println!("failover: {report:#?}");
    println!("failover: captures and launches 2xx again {:.1} s after the kill", back_after.as_secs_f64());
    report.check();
    assert!(back_after < Duration::from_secs(30), "writes came back after {back_after:?}");
    assert_eq!(set.primary().await, Some(1), "node2 was promoted");
    let mut conn = set.node(1).connect().await.expect("the new primary");
    no_acknowledged_capture_lost(&mut conn, &fixture.webhook, &sent).await;
    each_launch_ran_once(&mut conn, &fixture.runs, &sent, &set).await;
    let after =
        sent.iter().filter(|s| s.kind == Kind::Launch && s.answer.status == 201 && s.at > killed_at + back_after);
    assert!(after.count() > 0, "launches ran after the failover: the runner carried on");
    the_servers_moved(&fixture, &set).await;
    for server in fixture.servers {
        server.stop().await;
    }
}

/// Every capture answered 200 is on the new primary.
async fn no_acknowledged_capture_lost(conn: &mut sqlx::PgConnection, webhook: &str, sent: &[Sent]) {
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT convert_from(body, 'UTF8') FROM captures WHERE webhook_id = $1::uuid")
            .bind(webhook)
            .fetch_all(conn)
            .await
            .expect("stored captures");
    let stored: std::collections::HashSet<String> = stored.into_iter().collect();
    let acknowledged: Vec<&Sent> = sent.iter().filter(|s| s.kind == Kind::Capture && s.answer.status == 200).collect();
    let lost: Vec<&str> = acknowledged.iter().map(|s| s.marker.as_str()).filter(|m| !stored.contains(*m)).collect();
    println!("failover: captures acknowledged {}, lost {}", acknowledged.len(), lost.len());
    assert!(lost.is_empty(), "{} of {} acknowledged captures are missing: {lost:?}", lost.len(), acknowledged.len());
}

/// Every launch answered 201 succeeded and called the target exactly once.
async fn each_launch_ran_once(conn: &mut sqlx::PgConnection, runs: &Runs, sent: &[Sent], set: &FailoverSet) {
    let launched: Vec<&Sent> = sent.iter().filter(|s| s.kind == Kind::Launch && s.answer.status == 201).collect();
    let ids: Vec<uuid::Uuid> =
        launched.iter().map(|s| s.answer.body["id"].as_str().and_then(|i| i.parse().ok()).expect("an id")).collect();
    wait_for_final(conn, &ids, set).await;
    let wrong: Vec<(&str, usize)> =
        launched.iter().map(|s| (s.marker.as_str(), runs.count(&s.marker))).filter(|(_, n)| *n != 1).collect();
    assert!(wrong.is_empty(), "launches that did not run exactly once: {wrong:?}");
    println!("failover: launches answered 201 {}, each ran once", launched.len());
}

/// The second server's stream carries a capture made through the first (LISTEN moved); both servers say where
/// the primary is now and that they saw one failover.
async fn the_servers_moved(fixture: &Fixture, set: &FailoverSet) {
    let marker = format!("stream-after-{}", uuid::Uuid::new_v4());
    assert_eq!(fixture.api.capture(&fixture.bases[0], &fixture.webhook, marker.clone()).await.status, 200);
    let seen = fixture.stream.wait_for(&marker, Duration::from_secs(15)).await;
    let reconnects = *fixture.stream.reconnects.lock().expect("reconnects");
    println!("failover: a capture reached the other server's stream in {seen:?} (stream reconnects: {reconnects})");
    assert!(seen.is_some(), "the stream on the second server carries captures after the failover");
    for server in &fixture.servers {
        let (ready, body) = readyz(server).await;
        assert_eq!(ready, 200, "{body}");
        assert_eq!(body["database"]["primary"].as_str(), Some(set.address(1).as_str()), "{body}");
        assert_eq!(body["database"]["failovers"].as_u64(), Some(1), "{body}");
        let text = metrics(server.metrics.as_deref().expect("a metrics listener")).await;
        assert!(text.contains(&format!("hookflow_database_primary_info{{host=\"{}\"}} 1", set.address(1))), "{text}");
        assert!(text.contains("hookflow_database_failovers_total 1"), "{text}");
    }
}

/// Probes captures and launches through every server until all answer 2xx; when (since `began`).
async fn wait_until_writable(api: &Api, bases: &[String], webhook: &str, flow: &str, began: Instant) -> Duration {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut probes = 0;
    loop {
        let mut all = true;
        for base in bases {
            probes += 1;
            let capture = api.capture(base, webhook, format!("probe-{probes}")).await.status;
            let body = json!({"variables": {"run": format!("probe-{probes}")}});
            let launch = api.call(Method::POST, base, &format!("/flows/{flow}/launch"), Some(body)).await.status;
            all &= capture == 200 && launch == 201;
        }
        if all {
            return began.elapsed();
        }
        assert!(Instant::now() < deadline, "captures and launches did not come back within 90 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Probes captures through every server until all answer 200; when (since `began`).
async fn wait_until_writable_captures(api: &Api, bases: &[String], webhook: &str, began: Instant) -> Duration {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut probes = 0;
    loop {
        let mut all = true;
        for base in bases {
            probes += 1;
            all &= api.capture(base, webhook, format!("probe-{probes}")).await.status == 200;
        }
        if all {
            return began.elapsed();
        }
        assert!(Instant::now() < deadline, "captures did not come back within 90 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (at most 120 s) until every execution in `ids` has succeeded.
async fn wait_for_final(conn: &mut sqlx::PgConnection, ids: &[uuid::Uuid], set: &FailoverSet) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let open: Vec<(uuid::Uuid, String, i32)> =
            sqlx::query_as("SELECT id, status, attempt FROM executions WHERE id = ANY($1) AND status <> 'succeeded'")
                .bind(ids)
                .fetch_all(&mut *conn)
                .await
                .expect("executions");
        let failed: Vec<_> =
            open.iter().filter(|(_, status, _)| !["queued", "running"].contains(&status.as_str())).collect();
        assert!(failed.is_empty(), "executions that did not succeed: {failed:?}");
        if open.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} executions still open: {:?}\n{}",
            open.len(),
            &open[..open.len().min(5)],
            set.logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What the load saw (printed whole).
#[derive(Debug)]
#[expect(dead_code, reason = "the counts are read when the report is printed")]
struct Report {
    captures: usize,
    captures_2xx: usize,
    launches: usize,
    launches_2xx: usize,
    unavailable: usize,
    /// From the first 503 after the kill to the last one.
    seconds_of_503: f64,
    /// The longest a 503 took to come back.
    slowest_503_s: f64,
    /// Answers that were neither 2xx nor 503 (none expected).
    others: Vec<(u16, String)>,
    no_retry_after: usize,
}

impl Report {
    fn of(sent: &[Sent], killed_at: Duration) -> Self {
        let unavailable: Vec<&Sent> = sent.iter().filter(|s| s.answer.status == 503).collect();
        let first = unavailable.iter().map(|s| s.at).filter(|at| *at >= killed_at).min().unwrap_or_default();
        let last = unavailable.iter().map(|s| s.at).max().unwrap_or_default();
        let count =
            |kind: Kind, ok: bool| sent.iter().filter(|s| s.kind == kind && (!ok || s.answer.status < 300)).count();
        Self {
            captures: count(Kind::Capture, false),
            captures_2xx: count(Kind::Capture, true),
            launches: count(Kind::Launch, false),
            launches_2xx: count(Kind::Launch, true),
            unavailable: unavailable.len(),
            seconds_of_503: last.saturating_sub(first).as_secs_f64(),
            slowest_503_s: unavailable.iter().map(|s| s.answer.took.as_secs_f64()).fold(0.0, f64::max),
            others: sent
                .iter()
                .filter(|s| s.answer.status >= 300 && s.answer.status != 503)
                .map(|s| (s.answer.status, s.answer.body.to_string()))
                .collect(),
            no_retry_after: unavailable.iter().filter(|s| !s.answer.retry_after).count(),
        }
    }

    fn check(&self) {
        self.check_within(10.0);
    }

    /// As `check`, with the longest a 503 may take.
    fn check_within(&self, slowest_503_s: f64) {
        assert!(self.others.is_empty(), "only 2xx or 503 during a failover: {:?}", self.others);
        assert_eq!(self.no_retry_after, 0, "every 503 says when to retry");
        assert!(self.slowest_503_s < slowest_503_s, "a 503 took {} s", self.slowest_503_s);
        assert!(self.captures_2xx > 0 && self.launches_2xx > 0, "{self:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "brings up a pg_auto_failover set (about a minute); .ci/run runs it"]
async fn lists_and_searches_read_from_the_standby_and_a_write_reads_back_by_id() {
    let set = FailoverSet::start().await;
    let read_url = set.url("prefer-standby");
    let (servers, api) = servers(&set, Some(&read_url)).await;
    let base = servers[0].base.clone();
    let (ready, body) = readyz(&servers[0]).await;
    assert_eq!(ready, 200, "{body}");
    assert_eq!(body["database"]["primary"].as_str(), Some(set.address(0).as_str()), "{body}");
    assert_eq!(body["database"]["read_replica"]["host"].as_str(), Some(set.address(1).as_str()), "{body}");
    let lag = body["database"]["read_replica"]["lag_s"].as_f64().expect("a lag");
    let text = metrics(servers[0].metrics.as_deref().expect("metrics")).await;
    assert!(text.contains("hookflow_database_replica_lag_seconds "), "{text}");

    let mut standby = set.node(1).connect().await.expect("the standby");
    let commits_before = commits(&mut standby).await;
    let webhook = writes_read_back_by_id(&api, &servers).await;
    let served = lists_catch_up_and_read(&api, &base, &webhook, lag).await;

    // The standby served them: its commits grew by at least as many reads, and its hookflow connections ran them
    // (an idle backend reports its counts within 10 s).
    tokio::time::sleep(Duration::from_secs(11)).await;
    let commits_after = commits(&mut standby).await;
    let activity: Vec<String> = sqlx::query_scalar(
        "SELECT query FROM pg_stat_activity WHERE datname = 'hookflow' AND application_name = 'hookflow-reads'",
    )
    .fetch_all(&mut standby)
    .await
    .expect("standby activity");
    let delta = commits_after - commits_before;
    println!(
        "replica: {served} reads; the standby committed {delta} transactions meanwhile over {} connections",
        activity.len()
    );
    assert!(delta >= served, "{commits_before} -> {commits_after} for {served} reads");
    assert!(activity.iter().any(|q| q.contains("captures")), "the standby ran the capture reads: {activity:?}");
    let mut primary = set.node(0).connect().await.expect("the primary");
    let on_primary: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = 'hookflow' AND application_name = 'hookflow-reads'",
    )
    .fetch_one(&mut primary)
    .await
    .expect("primary activity");
    assert_eq!(on_primary, 0, "no read connection on the primary");
    for server in servers {
        server.stop().await;
    }
}

/// An endpoint and 20 captures through both servers, each read back by id through the other server at once (reads
/// by id stay on the primary); the endpoint's id.
async fn writes_read_back_by_id(api: &Api, servers: &[ServerProcess]) -> String {
    let base = &servers[0].base;
    let made = api.expect(Method::POST, base, "/webhooks", Some(json!({"name": "replica"})), 201).await;
    let webhook = made["id"].as_str().expect("id").to_owned();
    api.expect(Method::GET, &servers[1].base, &format!("/webhooks/{webhook}"), None, 200).await;
    for n in 0..CAPTURES {
        let receipt = api.capture(&servers[n % 2].base, &webhook, format!("replica-{n}")).await;
        assert_eq!(receipt.status, 200);
        let id = receipt.body["request_id"].as_str().expect("request id");
        let other = &servers[(n + 1) % 2].base;
        api.expect(Method::GET, other, &format!("/webhooks/{webhook}/requests/{id}"), None, 200).await;
    }
    webhook
}

/// Captures the replica-reads test makes.
const CAPTURES: usize = 20;

/// Lists until the list has every capture (lists may lag by the replica's lag), then searches, analytics and an
/// export: how many reads were made.
async fn lists_catch_up_and_read(api: &Api, base: &str, webhook: &str, lag: f64) -> i64 {
    let started = Instant::now();
    let mut served = 0;
    loop {
        let listed = api.expect(Method::GET, base, &format!("/webhooks/{webhook}/requests?limit=100"), None, 200).await;
        served += 1;
        if listed["items"].as_array().map_or(0, Vec::len) == CAPTURES {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "the standby's list never caught up: {listed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "replica: the list caught up with {CAPTURES} captures after {:?} (lag reported {lag} s)",
        started.elapsed()
    );
    let reads = [
        (Method::GET, format!("/webhooks/{webhook}/requests?limit=100"), None),
        (Method::POST, format!("/webhooks/{webhook}/requests/search"), Some(json!({"q": "replica", "limit": 100}))),
        (Method::GET, format!("/webhooks/{webhook}/analytics/volume"), None),
        (Method::GET, "/analytics/overview".to_owned(), None),
        (Method::GET, format!("/webhooks/{webhook}/requests/export?format=ndjson"), None),
    ];
    for _ in 0..5 {
        for (method, path, body) in &reads {
            let answer = api.call(method.clone(), base, path, body.clone()).await;
            assert_eq!(answer.status, 200, "{method} {path}");
            served += 1;
        }
    }
    served
}

/// Transactions the node committed in the hookflow database (a standby counts its own read-only ones).
async fn commits(conn: &mut sqlx::PgConnection) -> i64 {
    sqlx::query_scalar("SELECT xact_commit FROM pg_stat_database WHERE datname = 'hookflow'")
        .fetch_one(conn)
        .await
        .expect("the node's statistics")
}
