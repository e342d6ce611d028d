//! Fair use of the database (Operating II): while one organization launches 120 flows of 10 MiB at once and sends
//! 150 captures of 10 MiB, another organization's 50 small launches and 200 small captures are all answered 2xx
//! (before, 4 of its 12 launches were answered 503 "the database is unavailable"). The flooding organization is
//! answered 2xx or 503/429 with `Retry-After`, and every 2xx of it is stored. The test prints the most connections
//! the server held during the flood (sampled from pg_stat_activity): never the whole pool (20) in the runs so far,
//! so a neighbour's 503 here means the server's runtime was starved (each large launch parses its 10 MiB draft,
//! each refused large capture's body is read to the end), not that the flood held the pool.

use futures_util::future::join_all;
use hookflow_tests::server::ServerProcess;
use serde_json::{Value, json};
use sqlx::ConnectOptions as _;
use std::collections::HashSet;
use std::str::FromStr as _;
use std::time::{Duration, Instant};

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");
const LARGE: usize = 10 * 1024 * 1024;

/// One organization's view of the server.
struct Org {
    org: String,
    key: String,
}

/// What one request got: its status, whether it said when to retry, its body, and how long it took.
struct Answer {
    status: u16,
    retry_after: bool,
    body: Value,
    took: Duration,
}

async fn send(request: reqwest::RequestBuilder) -> Answer {
    let started = Instant::now();
    let response = request.send().await.unwrap_or_else(|e| panic!("a request was not answered: {e:?}"));
    let status = response.status().as_u16();
    let retry_after = response.headers().contains_key("retry-after");
    let body = response.json().await.unwrap_or(Value::Null);
    Answer { status, retry_after, body, took: started.elapsed() }
}

impl Org {
    fn post(&self, client: &reqwest::Client, url: String) -> reqwest::RequestBuilder {
        client.post(url).header("x-api-key", &self.key).header("x-organization-id", &self.org)
    }

    /// A flow whose one request node sends `body_bytes` of body; its id.
    async fn flow(&self, server: &ServerProcess, name: &str, body_bytes: usize) -> String {
        let request = json!({"method": "POST", "url": "https://example.com/", "body": "b".repeat(body_bytes)});
        let definition = json!({"nodes": [{"id": "call", "kind": "request", "request": request}]});
        let flow = json!({"name": name, "definition": definition});
        let created = server.post_as(&self.org, &self.key, "/flows", &flow).await;
        created["id"].as_str().unwrap_or_else(|| panic!("flow {name}: {created}")).to_owned()
    }

    async fn endpoint(&self, server: &ServerProcess, max_body_bytes: usize) -> String {
        let body = json!({"name": "fair", "max_body_bytes": max_body_bytes});
        let created = server.post_as(&self.org, &self.key, "/webhooks", &body).await;
        created["capture_url"].as_str().expect("capture_url").to_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_organization_flooding_the_database_never_costs_another_its_small_writes() {
    let server = ServerProcess::spawn(SERVER, &[]).await;
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().expect("client");
    let flooder = Org { org: server.org.clone(), key: server.key.clone() };
    let (org, _) = server.organization(SERVER, "Neighbour").await;
    let scopes = "webhooks:read,webhooks:write,flows:read,flows:write,flows:execute";
    let key = server.operator(SERVER, &["keys", "create", "--org", &org, "--scopes", scopes]).await;
    let key = key.lines().find_map(|l| l.trim_start().strip_prefix("key:")).expect("key").trim().to_owned();
    let neighbour = Org { org, key };
    // A flow of a little under 10 MiB (the largest definition the API takes): too large for the server to keep
    // its draft, so every launch reads and resolves it.
    let large_flow = flooder.flow(&server, "large", LARGE - 64 * 1024).await;
    let small_flow = neighbour.flow(&server, "small", 16).await;
    let large_url = flooder.endpoint(&server, LARGE).await;
    let small_url = neighbour.endpoint(&server, 1024 * 1024).await;
    let base = server.base.clone();
    let published = send(neighbour.post(&client, format!("{base}/flows/{small_flow}/publish")).json(&json!({}))).await;
    assert_eq!(published.status, 201, "{}", published.body);
    for (who, flow, url) in [(&flooder, &large_flow, &large_url), (&neighbour, &small_flow, &small_url)] {
        let launched = send(who.post(&client, format!("{base}/flows/{flow}/launch")).json(&json!({}))).await;
        assert_eq!(launched.status, 201, "warm-up launch: {}", launched.body);
        assert_eq!(send(client.post(url).body("warm")).await.status, 200, "warm-up capture");
    }

    let started = Instant::now();
    let body = bytes::Bytes::from(vec![b'x'; LARGE]);
    let large_launches = join_all(
        (0..120).map(|_| send(flooder.post(&client, format!("{base}/flows/{large_flow}/launch")).json(&json!({})))),
    );
    let large_captures = join_all((0..150).map(|_| send(client.post(&large_url).body(body.clone()))));
    let small = async {
        // Spread over the flood as a neighbour's traffic is: rounds of 5 launches and 20 captures.
        let mut launches = Vec::new();
        let mut captures = Vec::new();
        for round in 0..10 {
            // Launches that read their flow (the published version) and launches in a transaction (an
            // idempotency key), the kinds that need a connection of the pool.
            let launch = (0..5).map(|i| {
                let body = json!({"version": "latest", "variables": {"n": format!("{round}-{i}")}});
                let request = neighbour.post(&client, format!("{base}/flows/{small_flow}/launch")).json(&body);
                let request =
                    if i % 2 == 0 { request.header("idempotency-key", format!("{round}-{i}")) } else { request };
                send(request)
            });
            let capture = (0..20).map(|i| send(client.post(&small_url).body(format!("small {round} {i}"))));
            let (l, c) = tokio::join!(join_all(launch), join_all(capture));
            launches.extend(l);
            captures.extend(c);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (launches, captures)
    };
    // What holds the server's connections meanwhile: pg_stat_activity sampled every 250 ms.
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = tokio::spawn(sample_connections(server.database_url.clone(), sampling.clone()));
    let (large_launches, large_captures, (small_launches, small_captures)) =
        tokio::join!(large_launches, large_captures, small);
    let elapsed = started.elapsed();
    sampling.store(false, std::sync::atomic::Ordering::SeqCst);
    let busiest = sampler.await.expect("sampler");
    eprintln!("fair database: the busiest sample of the server's connections: {busiest:?}");

    for answer in &small_launches {
        assert_eq!(answer.status, 201, "every small launch of the neighbour is made: {}", answer.body);
    }
    for answer in &small_captures {
        assert_eq!(answer.status, 200, "every small capture of the neighbour is stored: {}", answer.body);
    }
    let refused_rightly = |answer: &Answer| [429, 503].contains(&answer.status) && answer.retry_after;
    let mut launched: HashSet<String> = HashSet::new();
    let mut launches_refused = 0;
    for answer in &large_launches {
        match answer.status {
            201 => {
                launched.insert(answer.body["id"].as_str().expect("execution id").to_owned());
            }
            _ if refused_rightly(answer) => launches_refused += 1,
            other => panic!("a large launch answered {other} (refusals say when to retry): {}", answer.body),
        }
    }
    let mut captured = 0;
    for answer in &large_captures {
        match answer.status {
            200 => captured += 1,
            _ if refused_rightly(answer) => {}
            other => panic!("a large capture answered {other} (refusals say when to retry): {}", answer.body),
        }
    }
    let slowest = |answers: &[Answer]| answers.iter().map(|a| a.took).max().unwrap_or_default();
    eprintln!(
        "fair database: in {:.1} s, large launches {} made / {launches_refused} refused, large captures {captured} \
         stored / {} refused; the neighbour's 50 launches and 200 captures all 2xx, slowest launch {:.2} s, slowest \
         capture {:.2} s",
        elapsed.as_secs_f64(),
        launched.len(),
        150 - captured,
        slowest(&small_launches).as_secs_f64(),
        slowest(&small_captures).as_secs_f64(),
    );

    // Everything answered 2xx is stored: the executions launched (by id), and the captures (by count).
    let mut conn =
        sqlx::postgres::PgConnectOptions::from_str(&server.database_url).expect("url").connect().await.expect("db");
    let stored: Vec<String> = sqlx::query_scalar(
        "SELECT id::text FROM executions WHERE flow_id = $1::uuid AND created_at >= now() - interval '1 hour'",
    )
    .bind(&large_flow)
    .fetch_all(&mut conn)
    .await
    .expect("executions");
    let stored: HashSet<String> = stored.into_iter().collect();
    assert!(launched.is_subset(&stored), "launches answered 201 are missing: {:?}", launched.difference(&stored));
    assert_eq!(stored.len(), launched.len() + 1, "the warm-up and the launches answered 201, no more");
    let theirs: i64 = sqlx::query_scalar("SELECT count(*) FROM executions WHERE flow_id = $1::uuid")
        .bind(&small_flow)
        .fetch_one(&mut conn)
        .await
        .expect("count");
    assert_eq!(theirs, 51, "the neighbour's warm-up and 50 launches");
    let request_count = |url: &str, who: &Org| {
        let request = client
            .get(url.replace("/webhook/", "/webhooks/"))
            .header("x-api-key", &who.key)
            .header("x-organization-id", &who.org);
        async move {
            let webhook: Value = request.send().await.expect("get").json().await.expect("webhook");
            webhook["request_count"].as_i64().expect("request_count")
        }
    };
    assert_eq!(request_count(&small_url, &neighbour).await, 201);
    assert_eq!(request_count(&large_url, &flooder).await, captured + 1);
    server.stop().await;
}

/// Samples the server's connections (state, wait, the statement's start) every 100 ms until `go` is false: the
/// sample with the most connections, and the most connections seen.
async fn sample_connections(
    url: String,
    go: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (i64, Vec<(String, i64)>) {
    let mut conn = sqlx::postgres::PgConnectOptions::from_str(&url).expect("url").connect().await.expect("db");
    let mut busiest: Vec<(String, i64)> = Vec::new();
    let total = |sample: &[(String, i64)]| sample.iter().map(|(_, n)| n).sum::<i64>();
    while go.load(std::sync::atomic::Ordering::SeqCst) {
        let sample: Vec<(String, i64)> = sqlx::query_as(
            "SELECT coalesce(state, '?') || ' ' || coalesce(wait_event, '-') || ' ' || left(regexp_replace(query, \
             '\\s+', ' ', 'g'), 40), count(*) FROM pg_stat_activity WHERE (datname = current_database() OR \
             datname IS NULL AND backend_type = 'client backend') AND pid <> pg_backend_pid() GROUP BY 1 ORDER BY 2 DESC",
        )
        .fetch_all(&mut conn)
        .await
        .expect("sample");
        if total(&sample) > total(&busiest) {
            busiest = sample;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (total(&busiest), busiest)
}
