//! The accept loop: HTTP/1 and HTTP/2 on one listener through hyper-util, with each connection's bytes passed
//! through the raw-head recorder, the peer address attached to every request, and graceful shutdown.

use crate::http::raw_head::{HeadQueue, Recording, RequestNumber};
use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// How long shutdown waits for open connections to finish.
const DRAIN: Duration = Duration::from_secs(10);

pub async fn serve(listener: TcpListener, router: Router, shutdown: CancellationToken) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let builder = Builder::new(TokioExecutor::new());
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off briefly instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let heads = HeadQueue::default();
        let io = TokioIo::new(Recording::new(stream, heads.clone()));
        let router = router.clone();
        let served = Arc::new(AtomicU64::new(0));
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request.extensions_mut().insert(heads.clone());
            request.extensions_mut().insert(RequestNumber(served.fetch_add(1, Ordering::Relaxed)));
            router.clone().oneshot(request.map(axum::body::Body::new))
        });
        let connection = graceful.watch(builder.serve_connection_with_upgrades(io, service).into_owned());
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown()).await.is_err() {
        tracing::warn!("some connections were still open after {DRAIN:?}; closing them");
    }
    Ok(())
}
