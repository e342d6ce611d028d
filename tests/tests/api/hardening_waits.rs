//! Issue #47, findings 1 and 6: webhook waits capped per organization and per server (429 with Retry-After), one
//! statement per capture however many wait, a rate per job token; and a webhook node reads an endpoint only for
//! whoever could read it (saving such a flow needs `webhooks:read`; running one saved by its author does not).

use hookflow_tests::TestApp;
use hookflow_tests::app::Reply;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// A job of an ephemeral launch: its id and token.
#[derive(Debug, Clone)]
struct Job {
    id: String,
    token: String,
}

/// A flow of one webhook node waiting on `webhook_id`, saved by the admin (who may read the endpoint).
async fn waiting_flow(app: &TestApp, webhook_id: &str) -> String {
    let definition = json!({"nodes": [{"id": "hook", "kind": "webhook",
        "webhook": {"webhook_id": webhook_id, "timeout_ms": 60_000}}]});
    app.create_flow(&format!("wait-{}", uuid::Uuid::now_v7()), definition).await
}

/// `n` ephemeral launches of `flow` (a few at a time), each with its job.
async fn ephemeral_jobs(app: &TestApp, flow: &str, n: usize) -> Vec<Job> {
    let permits = Arc::new(Semaphore::new(8));
    let mut launches = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (permits, client, url, key, org) = (
            permits.clone(),
            app.client.clone(),
            app.url(&format!("/flows/{flow}/launch")),
            app.admin.key.clone(),
            app.admin.org.to_string(),
        );
        launches.spawn(async move {
            let _permit = permits.acquire().await.expect("permit");
            // A server busy with the rest of the suite may answer 503 with Retry-After: the setup retries, as a
            // client should; the waits themselves are what the tests measure.
            let mut tries = 0;
            let response = loop {
                let response = client
                    .post(&url)
                    .header("x-api-key", &key)
                    .header("x-organization-id", &org)
                    .json(&json!({"mode": "ephemeral"}))
                    .send()
                    .await
                    .expect("launch");
                tries += 1;
                if response.status() != StatusCode::SERVICE_UNAVAILABLE || tries == 20 {
                    break response;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            };
            assert_eq!(response.status(), StatusCode::CREATED);
            let execution: Value = response.json().await.expect("execution");
            let job = &execution["job"];
            Job {
                id: job["job_id"].as_str().expect("job id").to_owned(),
                token: job["job_token"].as_str().expect("job token").to_owned(),
            }
        });
    }
    launches.join_all().await
}

/// One wait of `job` on `webhook_id` for captures matching `q`; answers the status and body.
async fn wait(client: &reqwest::Client, base: &str, job: &Job, webhook_id: &str, q: &str, wait_ms: u64) -> Reply {
    let body = json!({"node_id": "hook", "webhook_id": webhook_id, "q": q, "wait_ms": wait_ms});
    let response = client
        .post(format!("{base}/runner/jobs/{}/captures", job.id))
        .bearer_auth(&job.token)
        .json(&body)
        .send()
        .await
        .expect("wait");
    hookflow_tests::app::read(response).await
}

fn percentile(mut values: Vec<Duration>, p: f64) -> Duration {
    values.sort();
    let at = ((values.len() as f64 - 1.0) * p).round() as usize;
    values.get(at).copied().unwrap_or_default()
}

/// Calls, in this test's database, of statements reading `captures` (not the capture writer's insert).
async fn capture_reads(app: &TestApp) -> i64 {
    sqlx::query_scalar(
        "SELECT COALESCE(sum(s.calls), 0)::int8 FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
         WHERE d.datname = current_database() AND s.query ILIKE $1 AND s.query NOT ILIKE $2",
    )
    .bind("%from captures%")
    .bind("%insert into captures%")
    .fetch_one(&app.pool)
    .await
    .expect("read pg_stat_statements")
}

#[tokio::test]
async fn a_capture_wakes_a_thousand_waiters_with_at_most_three_statements() {
    // No retention sweep (which reads captures too) during the count.
    let app = TestApp::spawn_with(|s| {
        s.lease = Duration::from_secs(600);
        s.retention_interval = Duration::from_secs(3600);
    })
    .await;
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").execute(&app.pool).await.expect("extension");
    let webhook = app.create_webhook(json!({"name": "awaited"})).await;
    let webhook_id = webhook["id"].as_str().expect("id").to_owned();
    let flow = waiting_flow(&app, &webhook_id).await;
    let jobs = ephemeral_jobs(&app, &flow, 1_000).await;
    let mut waits = tokio::task::JoinSet::new();
    for job in jobs {
        let (client, base, webhook_id) = (app.client.clone(), app.base.clone(), webhook_id.clone());
        waits.spawn(async move { wait(&client, &base, &job, &webhook_id, "body.$.go:yes", 55_000).await });
    }
    // Every wait has registered (and been looked at) once nothing has read captures for a while.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = -1;
    loop {
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let now = capture_reads(&app).await;
        if now == last && now > 0 {
            break;
        }
        last = now;
        assert!(Instant::now() < deadline, "the waits never settled");
    }
    let before = capture_reads(&app).await;
    let sent = Instant::now();
    let captured = app.capture(Method::POST, &webhook_id, r#"{"go": "yes"}"#).await;
    assert_eq!(captured.status, 200, "{}", captured.text);
    let mut woken = Vec::new();
    while let Some(reply) = tokio::time::timeout(Duration::from_secs(30), waits.join_next()).await.expect("woken") {
        let reply = reply.expect("wait task");
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(reply.body["capture"]["body"], r#"{"go": "yes"}"#, "{}", reply.text);
        woken.push(sent.elapsed());
    }
    assert_eq!(woken.len(), 1_000);
    let reads = capture_reads(&app).await - before;
    eprintln!(
        "1,000 waiters woken by one capture: {reads} statements read captures; woken p50 {:?} p99 {:?}",
        percentile(woken.clone(), 0.5),
        percentile(woken, 0.99)
    );
    assert!(reads <= 3, "one capture cost {reads} statements reading captures for 1,000 waiters");
}

#[tokio::test]
async fn ten_thousand_waits_of_one_organization_leave_the_others_served() {
    let app = TestApp::spawn_with(|s| s.lease = Duration::from_secs(600)).await;
    let flooded = app.create_webhook(json!({"name": "flooded"})).await;
    let flooded_id = flooded["id"].as_str().expect("id").to_owned();
    let flow = waiting_flow(&app, &flooded_id).await;
    let jobs = ephemeral_jobs(&app, &flow, 2_500).await;
    let other = app.new_org("Other").await;
    let theirs = app.call(Method::POST, "/webhooks", Some(&other), Some(json!({"name": "theirs"}))).await;
    assert_eq!(theirs.status, 201, "{}", theirs.text);
    let theirs_id = theirs.body["id"].as_str().expect("id").to_owned();

    let stop = tokio_util::sync::CancellationToken::new();
    // 100 captures a second at the waited endpoint, throughout.
    let flood = {
        let (client, url, stop) = (app.client.clone(), app.url(&format!("/webhook/{flooded_id}")), stop.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut n = 0_u64;
            while !stop.is_cancelled() {
                tick.tick().await;
                n += 1;
                let (client, url) = (client.clone(), url.clone());
                tokio::spawn(async move { client.post(url).body(format!(r#"{{"id": "flood-{n}"}}"#)).send().await });
            }
            n
        })
    };
    // The other organization lists its endpoints and receives captures, measured throughout.
    let probe = {
        let (app_client, base, other, stop) = (app.client.clone(), app.base.clone(), other.clone(), stop.clone());
        let theirs_id = theirs_id.clone();
        tokio::spawn(async move {
            let mut seen: Vec<(&'static str, u16, Duration)> = Vec::new();
            while !stop.is_cancelled() {
                let started = Instant::now();
                let listed = app_client
                    .get(format!("{base}/webhooks"))
                    .header("x-api-key", &other.key)
                    .header("x-organization-id", other.org.to_string())
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await;
                seen.push(("GET /webhooks", listed.map_or(0, |r| r.status().as_u16()), started.elapsed()));
                let started = Instant::now();
                let captured = app_client
                    .post(format!("{base}/webhook/{theirs_id}"))
                    .body("{}")
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await;
                seen.push(("capture", captured.map_or(0, |r| r.status().as_u16()), started.elapsed()));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            seen
        })
    };

    // 10,000 waits (4 per job), a few hundred attempts in flight at once. An accepted wait answers only when its
    // time is up: after 3 s it counts as held, gives its attempt's place to the next, and is kept open until every
    // attempt has been answered or held.
    let attempts = Arc::new(Semaphore::new(200));
    let release = tokio_util::sync::CancellationToken::new();
    let held = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut waits = tokio::task::JoinSet::new();
    let started = Instant::now();
    for job in jobs.iter().flat_map(|job| std::iter::repeat_n(job.clone(), 4)) {
        let permit = attempts.clone().acquire_owned().await.expect("permit");
        let (client, base, flooded_id) = (app.client.clone(), app.base.clone(), flooded_id.clone());
        let (release, held) = (release.clone(), held.clone());
        waits.spawn(async move {
            let reply = wait(&client, &base, &job, &flooded_id, "body.$.id:never", 55_000);
            tokio::pin!(reply);
            tokio::select! {
                reply = &mut reply => return Some(reply),
                () = tokio::time::sleep(Duration::from_secs(3)) => {}
            }
            drop(permit);
            held.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::select! {
                reply = &mut reply => Some(reply),
                () = release.cancelled() => None,
            }
        });
    }
    let (mut accepted, mut refused) = (0, 0);
    let deadline = Instant::now() + Duration::from_secs(150);
    while accepted + refused < 10_000 {
        if refused + held.load(std::sync::atomic::Ordering::SeqCst) == 10_000 {
            release.cancel();
        }
        assert!(Instant::now() < deadline, "the attempts were neither answered nor held: {accepted} {refused}");
        let Ok(reply) = tokio::time::timeout(Duration::from_millis(200), waits.join_next()).await else { continue };
        let Some(reply) = reply else { break };
        match reply.expect("wait task") {
            None => accepted += 1,
            Some(reply) if reply.status == 200 => accepted += 1,
            Some(reply) if reply.status == 429 => {
                assert!(reply.headers.contains_key("retry-after"), "{}", reply.text);
                assert_eq!(reply.code(), "rate_limited", "{}", reply.text);
                refused += 1;
            }
            Some(reply) => panic!("a wait answered {}: {}", reply.status, reply.text),
        }
    }
    eprintln!("10,000 attempts answered or held in {:?}", started.elapsed());
    stop.cancel();
    let flooded_with = flood.await.expect("flood");
    let seen = probe.await.expect("probe");
    assert_eq!((accepted, refused), (1_000, 9_000), "the organization's 1,000 waits, and no more");
    assert!(flooded_with > 1_000, "the flood sent {flooded_with} captures");
    for kind in ["GET /webhooks", "capture"] {
        let of_kind: Vec<_> = seen.iter().filter(|(k, _, _)| *k == kind).collect();
        assert!(of_kind.len() > 20, "{kind}: only {} probes", of_kind.len());
        let failed: Vec<_> = of_kind.iter().filter(|(_, status, _)| !(200..300).contains(status)).collect();
        assert!(failed.is_empty(), "{kind} failed for the other organization: {failed:?}");
        let p95 = percentile(of_kind.iter().map(|(_, _, took)| *took).collect(), 0.95);
        eprintln!("{kind}: {} probes, p95 {p95:?}", of_kind.len());
        assert!(p95 < Duration::from_secs(1), "{kind}: p95 {p95:?} while another organization waited");
    }
}

#[tokio::test]
async fn a_job_token_is_answered_429_past_fifty_requests_a_second() {
    let app = TestApp::spawn().await;
    let flow = app.delay_flow("rate").await;
    let job = app.launch(&flow, json!({"mode": "ephemeral"})).await["job"].clone();
    let other = app.launch(&flow, json!({"mode": "ephemeral"})).await["job"].clone();
    // 80 keep-alives (empty reports) sent at once, well within a second.
    let started = Instant::now();
    let replies =
        futures_util::future::join_all((0..80).map(|_| app.job_call(&job, "nodes", json!({"results": []})))).await;
    let refused: Vec<&Reply> = replies.iter().filter(|r| r.status == 429).collect();
    let served = replies.iter().filter(|r| r.status == 200).count();
    assert_eq!(refused.len() + served, 80, "{:?}", replies.iter().map(|r| &r.text).collect::<Vec<_>>());
    assert!(refused.len() >= 10, "{} of 80 requests in {:?} were refused", refused.len(), started.elapsed());
    assert!(served >= 40, "the first 50 are served: {served}");
    for reply in refused {
        assert!(reply.headers.contains_key("retry-after"), "{}", reply.text);
        assert_eq!(reply.code(), "rate_limited");
    }
    // Another job's token has a rate of its own.
    let theirs = app.job_call(&other, "nodes", json!({"results": []})).await;
    assert_eq!(theirs.status, 200, "{}", theirs.text);
    // And the job is served again once the second has passed.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(app.job_call(&job, "nodes", json!({"results": []})).await.status, 200);
}

#[tokio::test]
async fn a_key_without_webhooks_read_cannot_save_a_node_reading_an_endpoint() {
    let app = TestApp::spawn().await;
    let webhook = app.create_webhook(json!({"name": "private"})).await;
    let webhook_id = webhook["id"].as_str().expect("id").to_owned();
    let secret = r#"{"card": "4242"}"#;
    let reading = json!({"nodes": [{"id": "peek", "kind": "webhook",
        "webhook": {"webhook_id": webhook_id, "timeout_ms": 5_000}}]});
    let own_url = json!({"nodes": [{"id": "own", "kind": "webhook", "webhook": {"timeout_ms": 1_000}}]});
    let limited = app.creds_with(&["flows:read", "flows:write", "flows:execute"]).await;
    let as_limited = |method: Method, path: String, body: Option<Value>| {
        let limited = limited.clone();
        let app = &app;
        async move { app.call(method, &path, Some(&limited), body).await }
    };

    // Every path that stores a definition refuses one naming an endpoint.
    let created = as_limited(Method::POST, "/flows".into(), Some(json!({"name": "peek", "definition": reading}))).await;
    created.assert_refused(403, "insufficient_scope", "webhooks:read");
    let own = as_limited(Method::POST, "/flows".into(), Some(json!({"name": "own", "definition": own_url}))).await;
    assert_eq!(own.status, 201, "a node waiting on its execution's own URL names no endpoint: {}", own.text);
    let own_id = own.body["id"].as_str().expect("id").to_owned();
    let replaced =
        as_limited(Method::PUT, format!("/flows/{own_id}"), Some(json!({"name": "own", "definition": reading}))).await;
    replaced.assert_refused(403, "insufficient_scope", "webhooks:read");
    let patched = as_limited(Method::PATCH, format!("/flows/{own_id}"), Some(json!({"definition": reading}))).await;
    patched.assert_refused(403, "insufficient_scope", "webhooks:read");
    let document = json!({"format": "hookflow.flow/v1", "flow": {"name": "imported", "definition": own_url},
        "versions": [{"version": 1, "note": null, "definition": reading}]});
    let imported = as_limited(Method::POST, "/flows/import".into(), Some(document)).await;
    imported.assert_refused(403, "insufficient_scope", "webhooks:read");
    let stored: Value = app.get(&format!("/flows/{own_id}"), 200).await;
    assert_eq!(stored["definition"], own_url, "nothing was stored");

    // A flow someone who may read the endpoint saved is not published by the key (publishing stores it again)...
    let flow = app.create_flow("admin-peek", reading.clone()).await;
    let published = as_limited(Method::POST, format!("/flows/{flow}/publish"), None).await;
    published.assert_refused(403, "insufficient_scope", "webhooks:read");
    // ...but CI runs it with the `ci` preset (flows:execute and flows:read): the flow's author, who may read the
    // endpoint, chose what its runs show, and a launch cannot change which endpoint a node names.
    let ci = app.creds_with(&["flows:read", "flows:execute"]).await;
    let launched =
        app.call(Method::POST, &format!("/flows/{flow}/launch"), Some(&ci), Some(json!({"mode": "ephemeral"}))).await;
    assert_eq!(launched.status, 201, "{}", launched.text);
    let job = Job {
        id: launched.body["job"]["job_id"].as_str().expect("job id").to_owned(),
        token: launched.body["job"]["job_token"].as_str().expect("token").to_owned(),
    };
    assert_eq!(app.capture(Method::POST, &webhook_id, secret).await.status, 200);
    let found = wait(&app.client, &app.base, &job, &webhook_id, "", 5_000).await;
    assert_eq!(found.status, 200, "{}", found.text);
    assert_eq!(found.body["capture"]["body"], secret, "{}", found.text);
}

/// Finding 1's sweep at scale: 480 executions wait on one endpoint, each for a capture of its own chosen by a key of
/// a different kind (a header, a query value, a JSONPath's text, a `body_json` filter), and captures arrive at 100 a
/// second in the reverse order. Every node gets its own capture, woken within seconds (a sweep that weighed every
/// waiter against every capture took 9.7 s a capture here, and 80 s at 400 waiters in the release benchmark).
#[tokio::test]
async fn four_hundred_and_eighty_waiters_each_get_their_own_capture_by_key() {
    const RUNS: usize = 480;
    let app = TestApp::spawn_with_embedded_runner_of(512, 1.0, Duration::from_secs(180), |_| {}).await;
    let webhook = app.create_webhook(json!({"name": "keyed"})).await;
    let (webhook_id, capture_url) = (webhook["id"].as_str().expect("id"), webhook["capture_url"].as_str().expect("u"));
    let searches = [
        json!({"q": "header.x-run:{{run}}"}),
        json!({"q": "query.run:{{run}} method:POST"}),
        json!({"q": "body.$.run:{{run}}"}),
        json!({"filter": {"body_json": [{"path": "$.tag", "op": "eq", "value": "t{{run}}"}]}}),
    ];
    // Two flows per search, so each flow's executions fit in one page of the list.
    let mut flows = Vec::new();
    for (n, search) in searches.iter().chain(&searches).enumerate() {
        let mut webhook = json!({"webhook_id": webhook_id, "timeout_ms": 60_000});
        webhook.as_object_mut().expect("object").extend(search.as_object().expect("object").clone());
        let definition = json!({"nodes": [{"id": "w", "kind": "webhook", "webhook": webhook,
            "extractors": [{"name": "got", "kind": "jsonPath", "expression": "$.run"}]}]});
        flows.push(app.create_flow(&format!("keyed-{n}"), definition).await);
    }
    let mut launched = Vec::new();
    for run in 0..RUNS {
        let flow = &flows[run % flows.len()];
        let reply = app.launch(flow, json!({"variables": {"run": run.to_string()}})).await;
        launched.push((flow.clone(), reply["id"].as_str().expect("id").to_owned()));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut running = 0;
        for flow in &flows {
            let page: Value = app.get(&format!("/flows/{flow}/executions?limit=100"), 200).await;
            running += page["items"].as_array().expect("items").iter().filter(|e| e["status"] == "running").count();
        }
        if running == RUNS {
            break;
        }
        assert!(Instant::now() < deadline, "only {running} of {RUNS} running");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut next = tokio::time::Instant::now();
    for run in (0..RUNS).rev() {
        tokio::time::sleep_until(next).await;
        next += Duration::from_millis(10);
        let body = json!({"run": run.to_string(), "tag": format!("t{run}")}).to_string();
        let sent = app
            .client
            .post(format!("{capture_url}/hook?run={run}"))
            .header("x-run", run.to_string())
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("send");
        assert_eq!(sent.status(), 200);
    }
    let mut woken = Vec::new();
    for (run, (flow, id)) in launched.iter().enumerate() {
        let ended = app.wait_finished(flow, id).await;
        assert_eq!(ended["status"], "succeeded", "run {run}: {ended}");
        let nodes: Value = app.get(&format!("/flows/{flow}/executions/{id}/nodes"), 200).await;
        let node = &nodes["items"][0];
        assert_eq!(node["extracted"]["got"], run.to_string(), "run {run} got its own capture: {node}");
        let at = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().expect("a time")).expect("RFC 3339");
        let received = at(&node["capture"]["received_at"]);
        let ended = at(&node["started_at"]) + chrono::Duration::milliseconds(node["duration_ms"].as_i64().expect("ms"));
        woken.push((ended - received).num_milliseconds());
    }
    woken.sort_unstable();
    eprintln!(
        "{RUNS} keyed waiters: capture -> node end p50 {} ms, p99 {} ms, max {} ms",
        woken[woken.len() / 2],
        woken[woken.len() * 99 / 100],
        woken[woken.len() - 1]
    );
    // A generous bound on what a person would notice (the issue's target is a p99 of 50 ms; measured here: p99 about
    // 100 ms in a debug build; a sweep weighing every waiter against every capture: p50 9.7 s, p99 12.4 s).
    let p99 = woken[woken.len() * 99 / 100];
    assert!(p99 < 5_000, "{RUNS} waiters were woken in {p99} ms at the 99th percentile");
}
