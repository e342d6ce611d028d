//! A fleet behind one address (Hardening III): runners in a private network share their NAT's address, and behind
//! the recommended proxy every runner has the proxy's. The per-address cap (1,024 by default) once cut 5,000
//! long-polling runners at 1,024; it now counts only connections that have proven nothing, so the fleet is held
//! whole with the defaults while strangers stay capped.

use futures_util::future::join_all;
use hookflow_tests::server::ServerProcess;
use serde_json::{Value, json};
use std::time::Duration;

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");
const RUNNERS: usize = 5_000;
const KEYS: usize = 5;
const LAUNCHES: usize = 200;

#[tokio::test]
async fn five_thousand_long_polls_from_one_address_are_all_held_and_every_launch_is_claimed() {
    let server = ServerProcess::spawn(SERVER, &[]).await;
    let admin = reqwest::Client::new();
    let call = |method: reqwest::Method, path: &str, key: &str, body: Value| {
        let request = admin.request(method, format!("{}{path}", server.base));
        request.header("x-api-key", key.to_owned()).header("x-organization-id", server.org.clone()).json(&body)
    };
    // Runner keys (each has its own request rate), and a thousand runners registered with each.
    let mut keys = Vec::new();
    for i in 0..KEYS {
        let created = call(
            reqwest::Method::POST,
            "/api-keys",
            &server.key,
            json!({"name": format!("fleet {i}"), "preset": "runner"}),
        );
        let created: Value = created.send().await.expect("key").json().await.expect("key json");
        keys.push(created["key"].as_str().expect("key").to_owned());
    }
    let mut runners = Vec::new();
    for chunk in (0..RUNNERS).collect::<Vec<_>>().chunks(100) {
        let registered = join_all(chunk.iter().map(|i| {
            let body = json!({"name": format!("r{i}"), "labels": [], "version": "test", "max_concurrency": 1,
                "host": {"hostname": "fleet", "os": "linux", "arch": "x86_64", "cpus": 1, "memory_bytes": 1}});
            call(reqwest::Method::POST, "/runners", &keys[i % KEYS], body).send()
        }))
        .await;
        for (i, reply) in chunk.iter().zip(registered) {
            let reply: Value = reply.expect("register").json().await.expect("runner");
            runners.push((reply["id"].as_str().unwrap_or_else(|| panic!("runner {i}: {reply}")).to_owned(), i % KEYS));
        }
    }

    // Every runner long-polls on a connection of its own, all from 127.0.0.1, started in waves as a fleet comes up.
    let pollers = reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("client");
    let mut polls: Vec<tokio::task::JoinHandle<Result<(u16, String), String>>> = Vec::new();
    for wave in runners.chunks(100) {
        for (runner, key) in wave {
            let request = pollers
                .post(format!("{}/runner/jobs/next", server.base))
                .header("x-api-key", keys[*key].clone())
                .header("x-organization-id", server.org.clone())
                .json(&json!({"runner_id": runner, "wait_s": 60}));
            polls.push(tokio::spawn(async move {
                // As a runner does: a 503 (the database pool busy while 5,000 polls arrive on a loaded machine)
                // is retried after its Retry-After; a refused or cut connection is an error.
                loop {
                    let attempt = request.try_clone().expect("a JSON request clones");
                    let reply = attempt.send().await.map_err(|e| format!("{e:?}"))?;
                    let status = reply.status().as_u16();
                    let job = reply.text().await.map_err(|e| format!("{e:?}"))?;
                    if status != 503 {
                        return Ok::<_, String>((status, job));
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let flow = call(
        reqwest::Method::POST,
        "/flows",
        &server.key,
        json!({"name": "fleet",
        "definition": {"nodes": [{"id": "d", "kind": "delay", "delay_ms": 1}]}}),
    );
    let flow: Value = flow.send().await.expect("flow").json().await.expect("flow json");
    let launch_path = format!("/flows/{}/launch", flow["id"].as_str().expect("flow id"));
    let launched =
        join_all((0..LAUNCHES).map(|_| call(reqwest::Method::POST, &launch_path, &server.key, json!({})).send())).await;
    assert!(launched.iter().all(|r| r.as_ref().is_ok_and(|r| r.status() == 201)), "every launch is accepted");

    // Polls wait up to 60 s: the 200 that got a job answer now; none may have failed (a refused or cut connection).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut answered: Vec<Option<u16>> = vec![None; polls.len()];
    let claimed = |answered: &[Option<u16>]| answered.iter().filter(|a| **a == Some(200)).count();
    while claimed(&answered) < LAUNCHES && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        for (poll, answer) in polls.iter_mut().zip(answered.iter_mut()) {
            if answer.is_some() || !poll.is_finished() {
                continue;
            }
            match poll.await.expect("poll task") {
                Ok((200, job)) => assert!(job.contains("job_token"), "{job}"),
                Ok((status, body)) => panic!("a long poll answered {status}: {body}"),
                Err(error) => panic!("a long poll's connection was refused or cut: {error}"),
            }
            *answer = Some(200);
        }
    }
    assert_eq!(claimed(&answered), LAUNCHES, "every launch was claimed by a waiting runner");
    let waiting = polls.iter().filter(|p| !p.is_finished()).count();
    assert_eq!(waiting, RUNNERS - LAUNCHES, "every other runner is still held, waiting");
    polls.iter().for_each(tokio::task::JoinHandle::abort);
    server.stop().await;
}
