//! What the failover tests share: a small API client of a server process, a target that counts the runs of each
//! launch, a capture stream that reconnects as a client would, and the answers of the load.

use hookflow_tests::server::ServerProcess;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Calls a server process's API as one organization's admin key.
#[derive(Debug, Clone)]
pub struct Api {
    pub client: reqwest::Client,
    pub org: String,
    pub key: String,
}

/// An answer: status, whether it said when to retry, its JSON body (null when none) and how long it took.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub retry_after: bool,
    pub body: Value,
    pub took: Duration,
}

impl Api {
    pub fn new(org: &str, key: &str) -> Self {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
        Self { client, org: org.to_owned(), key: key.to_owned() }
    }

    /// `method base+path` with the admin key and `body`; a request that gets no answer is status 0.
    pub async fn call(&self, method: Method, base: &str, path: &str, body: Option<Value>) -> Answer {
        let started = Instant::now();
        let mut request = self
            .client
            .request(method, format!("{base}{path}"))
            .header("x-api-key", &self.key)
            .header("x-organization-id", &self.org);
        if let Some(body) = body {
            request = request.json(&body);
        }
        answer(request.send().await, started).await
    }

    /// A capture of `body` at `base`'s capture URL of `webhook`.
    pub async fn capture(&self, base: &str, webhook: &str, body: String) -> Answer {
        let started = Instant::now();
        answer(self.client.post(format!("{base}/webhook/{webhook}")).body(body).send().await, started).await
    }

    /// As [`Api::call`], expecting `status`; the body.
    pub async fn expect(&self, method: Method, base: &str, path: &str, body: Option<Value>, status: u16) -> Value {
        let answer = self.call(method.clone(), base, path, body).await;
        assert_eq!(answer.status, status, "{method} {path}: {}", answer.body);
        answer.body
    }
}

async fn answer(sent: reqwest::Result<reqwest::Response>, started: Instant) -> Answer {
    match sent {
        Ok(response) => {
            let status = response.status().as_u16();
            let retry_after = response.headers().contains_key("retry-after");
            let body = response.json().await.unwrap_or(Value::Null);
            Answer { status, retry_after, body, took: started.elapsed() }
        }
        Err(_) => Answer { status: 0, retry_after: false, body: Value::Null, took: started.elapsed() },
    }
}

/// An HTTP target on 127.0.0.1 that counts how often each run (a launch variable) called it.
#[derive(Debug)]
pub struct Runs {
    pub base: String,
    counts: Arc<Mutex<HashMap<String, usize>>>,
    _server: tokio::task::JoinHandle<()>,
}

impl Runs {
    pub async fn spawn() -> Self {
        use axum::extract::{Path, State};
        let counts: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
        let router = axum::Router::new()
            .route(
                "/run/{marker}",
                axum::routing::get(
                    |State(counts): State<Arc<Mutex<HashMap<String, usize>>>>, Path(marker): Path<String>| async move {
                        *counts.lock().expect("counts").entry(marker).or_default() += 1;
                        axum::Json(json!({"ok": true}))
                    },
                ),
            )
            .with_state(counts.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { base, counts, _server: server }
    }

    /// How often `marker` ran.
    pub fn count(&self, marker: &str) -> usize {
        self.counts.lock().expect("counts").get(marker).copied().unwrap_or(0)
    }
}

/// A capture stream of one endpoint on one server, read by a task that reconnects (with `Last-Event-ID`) when the
/// stream ends, as a client would; what it received and how often it reconnected.
#[derive(Debug, Clone, Default)]
pub struct Stream {
    pub received: Arc<Mutex<Vec<String>>>,
    pub reconnects: Arc<Mutex<usize>>,
}

impl Stream {
    pub fn open(api: &Api, base: &str, webhook: &str) -> Self {
        let stream = Self::default();
        let (api, url, seen) = (api.clone(), format!("{base}/webhooks/{webhook}/stream"), stream.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut last_id: Option<String> = None;
            loop {
                let mut request = client.get(&url).header("x-api-key", &api.key).header("x-organization-id", &api.org);
                if let Some(id) = &last_id {
                    request = request.header("last-event-id", id);
                }
                if let Ok(response) = request.send().await
                    && response.status() == 200
                {
                    read_events(response, &seen, &mut last_id).await;
                }
                *seen.reconnects.lock().expect("reconnects") += 1;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        stream
    }

    pub fn has(&self, marker: &str) -> bool {
        self.received.lock().expect("received").iter().any(|data| data.contains(marker))
    }

    /// Waits up to `patience` for an event holding `marker`; how long it took.
    pub async fn wait_for(&self, marker: &str, patience: Duration) -> Option<Duration> {
        let started = Instant::now();
        while started.elapsed() < patience {
            if self.has(marker) {
                return Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
}

async fn read_events(response: reqwest::Response, seen: &Stream, last_id: &mut Option<String>) {
    use futures_util::StreamExt as _;
    let mut bytes = response.bytes_stream();
    let mut pending = String::new();
    while let Some(Ok(chunk)) = bytes.next().await {
        pending.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = pending.find('\n') {
            let line: String = pending.drain(..=end).collect();
            if let Some(id) = line.strip_prefix("id:") {
                *last_id = Some(id.trim().to_owned());
            } else if let Some(data) = line.strip_prefix("data:") {
                seen.received.lock().expect("received").push(data.trim().to_owned());
            }
        }
    }
}

/// The value after `label` on the line of `text` that starts with it (an operator command's output).
pub fn printed(text: &str, label: &str) -> String {
    let line = text.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("{label} in {text}"));
    line.rsplit(' ').next().expect("a value").to_owned()
}

/// `GET /metrics` of a server's metrics listener.
pub async fn metrics(address: &str) -> String {
    reqwest::get(format!("http://{address}/metrics")).await.expect("scrape").text().await.expect("metrics text")
}

/// `GET /readyz` of a server's metrics listener (where the databases are): status and body. The API listener's
/// `/readyz` (open to anyone) must name no database: checked here on every call.
pub async fn readyz(server: &ServerProcess) -> (u16, Value) {
    let metrics = server.metrics.as_deref().expect("a metrics listener");
    let response = reqwest::get(format!("http://{metrics}/readyz")).await.expect("readyz");
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("readyz body");
    let public: Value =
        reqwest::get(format!("{}/readyz", server.base)).await.expect("readyz").json().await.expect("body");
    assert!(public.get("database").is_none(), "the API listener's /readyz names no database: {public}");
    (status, body)
}
