//! A small HTTP/1.1 load generator on hyper's client connections: closed-loop keep-alive connections, each
//! sending its next request when the previous answer is read, with every latency recorded.

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One keep-alive HTTP/1.1 connection.
#[derive(Debug)]
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    host: String,
}

impl Connection {
    pub async fn open(base: &str) -> Result<Self, BoxError> {
        let host = base.trim_start_matches("http://").to_owned();
        let stream = tokio::net::TcpStream::connect(&host).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        Ok(Self { sender, host })
    }

    /// Sends one request and reads the whole answer.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<(u16, Bytes), BoxError> {
        let mut request = hyper::Request::builder().method(method).uri(path).header("host", &self.host);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.sender.ready().await?;
        let response = self.sender.send_request(request.body(Full::new(body))?).await?;
        let status = response.status().as_u16();
        Ok((status, response.into_body().collect().await?.to_bytes()))
    }

    /// Sends a request and hands back the streaming answer (for SSE).
    pub async fn open_stream(
        &mut self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<hyper::body::Incoming, BoxError> {
        let mut request = hyper::Request::builder().method("GET").uri(path).header("host", &self.host);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = self.sender.send_request(request.body(Full::new(Bytes::new()))?).await?;
        if response.status() != 200 {
            return Err(format!("stream answered {}", response.status()).into());
        }
        Ok(response.into_body())
    }
}

/// What a load run measured.
#[derive(Debug)]
pub struct LoadResult {
    pub ok: u64,
    pub failed: u64,
    pub elapsed: Duration,
    pub latencies_us: Vec<u32>,
}

impl LoadResult {
    pub fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64()
    }

    pub fn percentile_ms(&self, p: f64) -> f64 {
        percentile_ms(&self.latencies_us, p)
    }
}

/// The `p`-th percentile (0-100) of microsecond samples, in milliseconds; sorts in place.
pub fn percentile_ms(samples: &[u32], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let index = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    f64::from(sorted[index]) / 1000.0
}

/// The median of some figures (NaN for none), reordering them.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The median and the 99th percentile of microsecond samples, in milliseconds.
pub fn p50_p99_ms(samples: &[u32]) -> (f64, f64) {
    (percentile_ms(samples, 50.0), percentile_ms(samples, 99.0))
}

/// Runs `work` on a runtime of its own threads, so the load generator's tasks never queue ahead of the server's
/// in one scheduler (the OS shares the cores between the two fairly).
pub async fn on_load_runtime<F, T>(work: impl FnOnce() -> F + Send + 'static) -> Result<T, BoxError>
where
    F: std::future::Future<Output = Result<T, BoxError>>,
    T: Send + 'static,
{
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
        let outcome = match runtime {
            Ok(runtime) => runtime.block_on(work()),
            Err(e) => Err(e.into()),
        };
        let _ = done.send(outcome);
    });
    result.await?
}

/// `connections` closed-loop connections POSTing `body` to `path` for `duration`.
#[derive(Debug, Clone)]
pub struct ClosedLoop {
    pub base: String,
    pub path: String,
    pub body: Bytes,
    pub connections: usize,
    pub duration: Duration,
    /// One more header on every request (a sender's signature).
    pub header: Option<(String, String)>,
}

impl ClosedLoop {
    /// Runs the load on the load runtime, apart from the server's.
    pub async fn run(self) -> Result<LoadResult, BoxError> {
        on_load_runtime(move || self.run_here()).await
    }

    async fn run_here(self) -> Result<LoadResult, BoxError> {
        let ClosedLoop { base, path, body, connections, duration, header } = self;
        let header: Option<Arc<(String, String)>> = header.map(Arc::new);
        let deadline = Instant::now() + duration;
        let started = Instant::now();
        let path: Arc<str> = path.into();
        let mut workers = Vec::new();
        for _ in 0..connections {
            let mut connection = Connection::open(&base).await?;
            let (path, body, header) = (path.clone(), body.clone(), header.clone());
            workers.push(tokio::spawn(async move {
                let (mut ok, mut failed, mut latencies) = (0u64, 0u64, Vec::with_capacity(100_000));
                while Instant::now() < deadline {
                    let sent = Instant::now();
                    let mut headers = vec![("content-type", "application/json")];
                    headers.extend(header.as_deref().map(|(n, v)| (n.as_str(), v.as_str())));
                    match connection.send("POST", &path, &headers, body.clone()).await {
                        Ok((200, _)) => {
                            ok += 1;
                            latencies.push(sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                        }
                        Ok(_) => failed += 1,
                        Err(_) => {
                            failed += 1;
                            break;
                        }
                    }
                }
                (ok, failed, latencies)
            }));
        }
        let mut result = LoadResult { ok: 0, failed: 0, elapsed: Duration::ZERO, latencies_us: Vec::new() };
        for worker in workers {
            let (ok, failed, latencies) = worker.await?;
            result.ok += ok;
            result.failed += failed;
            result.latencies_us.extend(latencies);
        }
        result.elapsed = started.elapsed();
        Ok(result)
    }
}

/// The machine's CPU time since a start, from `/proc/stat`: how busy all cores were during a phase, which tells a
/// rate bound by CPU from one bound by waits (commits, round trips).
#[derive(Debug, Clone, Copy)]
pub struct MachineBusy {
    busy: u64,
    total: u64,
}

impl MachineBusy {
    /// The counters now (zeros where `/proc/stat` cannot be read).
    pub fn start() -> Self {
        let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let ticks: Vec<u64> = text
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("cpu "))
            .map(|rest| rest.split_whitespace().filter_map(|n| n.parse().ok()).collect())
            .unwrap_or_default();
        // user nice system idle iowait irq softirq steal: idle and iowait are the waits.
        let total: u64 = ticks.iter().take(8).sum();
        let waiting = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
        Self { busy: total - waiting, total }
    }

    /// The busy share of every core since `self` (0 to 1; NaN when nothing could be read).
    pub fn share(self) -> f64 {
        let now = Self::start();
        (now.busy - self.busy) as f64 / (now.total - self.total) as f64
    }
}
