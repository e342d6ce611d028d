//! A receiver for destinations' deliveries: a real HTTP server on 127.0.0.1:0 that records every request that
//! arrives (when, method, path and query, headers in order, body) and answers the status it is set to (or a
//! failing status until a moment has passed).

use axum::Router;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub at: Instant,
    pub method: String,
    /// Path and query as sent.
    pub uri: String,
    pub headers: Vec<(String, String)>,
    pub body: bytes::Bytes,
    /// What it was answered.
    pub answered: u16,
}

impl Arrival {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Default)]
struct Shared {
    arrivals: Mutex<Vec<Arrival>>,
    status: AtomicU16,
    /// Until then, every request is answered `failing_status`.
    failing_until: Mutex<Option<(Instant, u16)>>,
}

/// A recording receiver.
#[derive(Debug, Clone)]
pub struct Receiver {
    pub base: String,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
}

impl Receiver {
    /// A receiver answering `status` to everything.
    pub async fn spawn(status: u16) -> Self {
        Self::spawn_on("127.0.0.1:0", status).await
    }

    /// A receiver listening on `address` (one of this machine's, such as a test namespace's).
    pub async fn spawn_on(address: &str, status: u16) -> Self {
        let shared = Arc::new(Shared { status: AtomicU16::new(status), ..Shared::default() });
        let state = shared.clone();
        let router = Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: bytes::Bytes| {
            let state = state.clone();
            async move {
                let now = Instant::now();
                let failing = *state.failing_until.lock().expect("lock");
                let answered = match failing {
                    Some((until, status)) if now < until => status,
                    _ => state.status.load(Ordering::SeqCst),
                };
                let headers =
                    headers.iter().map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_owned())).collect();
                let arrival =
                    Arrival { at: now, method: method.to_string(), uri: uri.to_string(), headers, body, answered };
                state.arrivals.lock().expect("lock").push(arrival);
                StatusCode::from_u16(answered).unwrap_or(StatusCode::OK)
            }
        });
        let listener = tokio::net::TcpListener::bind(address).await.expect("bind receiver");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned()).await;
        });
        Self { base, shared, shutdown }
    }

    /// Answers `status` from now on.
    pub fn answer(&self, status: u16) {
        self.shared.status.store(status, Ordering::SeqCst);
    }

    /// Answers `status` until `after` has passed, then the set status again.
    pub fn fail_for(&self, after: Duration, status: u16) {
        *self.shared.failing_until.lock().expect("lock") = Some((Instant::now() + after, status));
    }

    /// Every arrival so far, in order.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.shared.arrivals.lock().expect("lock").clone()
    }

    pub fn count(&self) -> usize {
        self.shared.arrivals.lock().expect("lock").len()
    }

    /// Waits until `done` holds of the arrivals (or panics after `within`).
    pub async fn wait_until(&self, within: Duration, done: impl Fn(&[Arrival]) -> bool) -> Vec<Arrival> {
        let deadline = Instant::now() + within;
        loop {
            let arrivals = self.arrivals();
            if done(&arrivals) {
                return arrivals;
            }
            assert!(Instant::now() < deadline, "the receiver saw {} arrivals, not what was awaited", arrivals.len());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn stop(&self) {
        self.shutdown.cancel();
    }
}

/// The most arrivals in any window of `window` (the receiver's view of a rate limit).
pub fn most_in_window(arrivals: &[Arrival], window: Duration) -> usize {
    let mut times: Vec<Instant> = arrivals.iter().map(|a| a.at).collect();
    times.sort();
    let mut most = 0;
    let mut start = 0;
    for end in 0..times.len() {
        while times[end].duration_since(times[start]) >= window {
            start += 1;
        }
        most = most.max(end - start + 1);
    }
    most
}
