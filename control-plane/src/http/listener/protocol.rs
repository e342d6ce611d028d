//! Which protocol a connection speaks and how each is served: HTTP/1.1 (with upgrades) under the head read
//! timeout, HTTP/2 with keep-alive pings and a cap on concurrent streams. The first bytes are peeked at, not read:
//! they stay in the socket for hyper's own reader. (hyper-util's auto builder reads them and replays them from a
//! buffer, and hyper's HTTP/1 read buffer, handed those few bytes first, then grows to twice its size, 16 KiB, on
//! every connection for as long as it lives.)

use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::convert::Infallible;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// What an HTTP/2 client sends first (prior knowledge, or after ALPN chose h2).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How long to wait before peeking again at a connection that sent part of the HTTP/2 preface (peeking answers
/// at once while anything is queued, so it cannot wait for more): doubling from the first to the longest, so a
/// sender that stalls mid-preface costs a few wake-ups a second, not two hundred.
const PREFACE_RETRY: Duration = Duration::from_millis(5);
const PREFACE_RETRY_MAX: Duration = Duration::from_millis(200);

/// Whether the connection speaks HTTP/2, from its first bytes: as soon as they differ from the HTTP/2 preface it
/// is HTTP/1. `None` when it closed (or failed) before sending anything that tells, or when the preface took
/// longer than `within` (the time a request's head may take).
pub async fn speaks_http2(stream: &TcpStream, within: Duration) -> Option<bool> {
    tokio::time::timeout(within, async {
        let mut first = [0u8; H2_PREFACE.len()];
        let mut retry = PREFACE_RETRY;
        loop {
            let seen = stream.peek(&mut first).await.ok()?;
            if seen == 0 {
                return None;
            }
            if first[..seen] != H2_PREFACE[..seen] {
                return Some(false);
            }
            if seen == H2_PREFACE.len() {
                return Some(true);
            }
            tokio::time::sleep(retry).await;
            retry = (retry * 2).min(PREFACE_RETRY_MAX);
        }
    })
    .await
    .ok()
    .flatten()
}

/// The two protocols' settings, cloned into every connection.
#[derive(Clone, Debug)]
pub struct Protocols {
    /// How long a request's head (or the HTTP/2 preface) may take to arrive.
    pub header_timeout: Duration,
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
}

impl Protocols {
    /// `header_timeout`: how long a request's head may take to arrive (and an idle HTTP/1 connection may wait).
    pub fn new(header_timeout: Duration) -> Self {
        let mut http1 = http1::Builder::new();
        http1.timer(TokioTimer::new()).header_read_timeout(header_timeout);
        let mut http2 = http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            .keep_alive_interval(Duration::from_secs(30))
            .keep_alive_timeout(Duration::from_secs(20))
            .max_concurrent_streams(256);
        Self { header_timeout, http1, http2 }
    }

    /// Serves the connection in its protocol until it ends; `close` drops it at once, `shutdown` lets its
    /// requests in flight finish first.
    pub async fn serve<I, S, F>(
        &self,
        http2: bool,
        io: I,
        service: S,
        close: &CancellationToken,
        shutdown: &CancellationToken,
    ) -> Result<(), hyper::Error>
    where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
        S: hyper::service::Service<
                hyper::Request<Incoming>,
                Response = hyper::Response<Body>,
                Error = Infallible,
                Future = F,
            > + Send
            + 'static,
        F: Future<Output = Result<hyper::Response<Body>, Infallible>> + Send + 'static,
    {
        // Boxed, each its own size: the connection's task does not take the larger protocol's size for both.
        if http2 {
            let mut connection = Box::pin(self.http2.serve_connection(io, service));
            drive(connection.as_mut(), |c| c.graceful_shutdown(), close, shutdown).await
        } else {
            let mut connection = Box::pin(self.http1.serve_connection(io, service).with_upgrades());
            drive(connection.as_mut(), |c| c.graceful_shutdown(), close, shutdown).await
        }
    }
}

/// Polls a connection to its end: dropped at once when `close` is cancelled; asked to finish what is in flight
/// and close when `shutdown` is.
async fn drive<C>(
    mut connection: std::pin::Pin<&mut C>,
    graceful: impl FnOnce(std::pin::Pin<&mut C>),
    close: &CancellationToken,
    shutdown: &CancellationToken,
) -> Result<(), hyper::Error>
where
    C: Future<Output = Result<(), hyper::Error>>,
{
    tokio::select! {
        ended = connection.as_mut() => return ended,
        () = close.cancelled() => {
            tracing::debug!("connection closed: idle, or its place was taken");
            return Ok(());
        }
        () = shutdown.cancelled() => graceful(connection.as_mut()),
    }
    tokio::select! {
        ended = connection => ended,
        () = close.cancelled() => Ok(()),
    }
}
