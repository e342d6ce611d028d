//! The accept loop: HTTP/1 and HTTP/2 on one listener, told apart by peeking at each connection's first bytes
//! (`protocol`), with each connection's bytes passed through the raw-head recorder, the peer address and the
//! request's number attached to every request, and graceful shutdown. Connections are admitted by the connection
//! table (`connections`), headers must arrive within the header timeout (which is also how long an HTTP/1
//! connection may wait idle for its next request), request bodies must arrive within the body timeout, and idle
//! connections are closed.

pub mod connections;
mod protocol;

use crate::http::raw_head::{HeadQueue, Recording, RequestNumber};
use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::ConnectInfo;
use bytes::Bytes;
use connections::{Connection, ConnectionLimits, Connections, Credential, InFlight};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use protocol::Protocols;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// How long shutdown waits for open connections to finish.
const DRAIN: Duration = Duration::from_secs(10);

/// What the listener enforces.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub connections: ConnectionLimits,
    /// A request's headers must arrive within this (and an idle HTTP/1 connection waits at most this long).
    pub header_timeout: Duration,
    /// A request's body must arrive within this, counted from its start.
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            connections: ConnectionLimits {
                max: 8192,
                per_address: 1024,
                max_proven: 65_536,
                idle_timeout: Duration::from_secs(75),
            },
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(60),
        }
    }
}

/// Connections the kernel completes and queues for accepting (it caps this at `net.core.somaxconn`). A burst of
/// webhook senders connecting at once must not overflow the queue: an overflowed handshake is retried by the
/// sender only after a second or more.
const ACCEPT_BACKLOG: u32 = 4096;

/// Binds the API's listener with a deep accept queue (the standard library's is 128).
pub fn bind(address: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(ACCEPT_BACKLOG)
}

/// The next connection, or `None` at shutdown. A failed accept (out of file descriptors and the like) backs
/// off briefly instead of spinning.
async fn accept(listener: &TcpListener, shutdown: &CancellationToken) -> Option<(TcpStream, SocketAddr)> {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => return Some(accepted),
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            },
            () = shutdown.cancelled() => return None,
        }
    }
}

pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
    limits: Limits,
) -> std::io::Result<()> {
    let protocols = Protocols::new(limits.header_timeout);
    let table = Connections::new(limits.connections);
    let tracker = tokio_util::task::TaskTracker::new();
    tokio::spawn(close_idle(table.clone(), shutdown.clone()));
    while let Some((stream, peer)) = accept(&listener, &shutdown).await {
        let Some(connection) = table.admit(peer.ip()) else {
            tracing::debug!(%peer, "connection refused: the server holds as many as it may");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let accepted = Accepted { peer, connection, table: table.clone(), body_timeout: limits.body_timeout };
        tracker.spawn(serve_connection(stream, accepted, router.clone(), protocols.clone(), shutdown.clone()));
    }
    drop(listener);
    tracker.close();
    if tokio::time::timeout(DRAIN, tracker.wait()).await.is_err() {
        tracing::warn!("some connections were still open after {DRAIN:?}; closing them");
    }
    Ok(())
}

/// A connection the table admitted, with what its requests carry.
struct Accepted {
    peer: SocketAddr,
    connection: Arc<Connection>,
    table: Arc<Connections>,
    body_timeout: Duration,
}

/// Serves one connection until it ends, is closed by the table, or (gracefully) the server stops.
async fn serve_connection(
    stream: TcpStream,
    accepted: Accepted,
    router: Router,
    protocols: Protocols,
    shutdown: CancellationToken,
) {
    let close = accepted.connection.close.clone();
    let (table, connection) = (accepted.table.clone(), accepted.connection.clone());
    let heads = HeadQueue::default();
    let service = service(accepted, router, heads.clone());
    let ended = tokio::select! {
        http2 = protocol::speaks_http2(&stream, protocols.header_timeout) => match http2 {
            Some(http2) => {
                let io = TokioIo::new(Recording::new(stream, heads));
                protocols.serve(http2, io, service, &close, &shutdown).await
            }
            None => Ok(()),
        },
        () = close.cancelled() => Ok(()),
        () = shutdown.cancelled() => Ok(()),
    };
    if let Err(e) = ended {
        tracing::debug!(error = %e, "connection ended with an error");
    }
    table.release(&connection);
}

/// The service of one connection's requests: each is counted in flight until its response body is done, and
/// carries the peer's address, its proof of credentials, the connection's recorded heads and its number.
fn service(
    accepted: Accepted,
    router: Router,
    heads: HeadQueue,
) -> impl hyper::service::Service<
    hyper::Request<Incoming>,
    Response = hyper::Response<Body>,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<hyper::Response<Body>, std::convert::Infallible>> + Send + 'static,
> + Clone
+ Send
+ 'static {
    let served = Arc::new(AtomicU64::new(0));
    let Accepted { peer, connection, table, body_timeout } = accepted;
    hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        let in_flight = InFlight::start(&connection);
        request.extensions_mut().insert(ConnectInfo(peer));
        request.extensions_mut().insert(Proof { table: table.clone(), connection: connection.clone() });
        request.extensions_mut().insert(heads.clone());
        request.extensions_mut().insert(RequestNumber(served.fetch_add(1, Ordering::Relaxed)));
        let request = request.map(|body| Body::new(Deadline::new(body, body_timeout)));
        let answer = router.clone().oneshot(request);
        async move {
            let response = answer.await?;
            Ok::<_, std::convert::Infallible>(response.map(|body| Body::new(Tracked { body, _in_flight: in_flight })))
        }
    })
}

/// A request's way to tell its connection's table that it carried valid credentials (`prove`).
#[derive(Debug, Clone)]
pub struct Proof {
    table: Arc<Connections>,
    connection: Arc<Connection>,
}

impl Proof {
    /// The request's proof, when it came through this listener (tests calling the router directly carry none).
    pub fn of(extensions: &axum::http::Extensions) -> Option<Self> {
        extensions.get::<Proof>().cloned()
    }

    /// The request passed authentication, the rate limit and the organization check with `credential`: its
    /// connection leaves the unproven caps for the proven one (see `connections`).
    pub fn prove(&self, credential: Credential) {
        self.table.prove(&self.connection, credential);
    }
}

/// Called once a request's credentials passed every check that can refuse them before the handler (see
/// `Proof::prove`): a 401, 403 or 429 proves nothing.
pub fn prove(extensions: &axum::http::Extensions, credential: Credential) {
    if let Some(proof) = extensions.get::<Proof>() {
        proof.prove(credential);
    }
}

/// Closes idle connections every second until shutdown.
async fn close_idle(table: Arc<Connections>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.cancelled() => return,
        }
        let closed = table.close_idle();
        if closed > 0 {
            tracing::debug!(closed, "idle connections closed");
        }
    }
}

/// A response body that keeps its request counted as in flight until it is done.
struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request body that must arrive whole within its deadline.
struct Deadline {
    body: Incoming,
    timeout: Duration,
    expires: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Deadline {
    fn new(body: Incoming, timeout: Duration) -> Self {
        Self { body, timeout, expires: None }
    }
}

/// The error of a body that did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyTimeout(Duration);

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let timeout = this.timeout;
        let expires = this.expires.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if expires.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyTimeout(timeout)))));
        }
        Pin::new(&mut this.body).poll_frame(cx).map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
