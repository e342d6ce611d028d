//! A simulated runner's own connections, held as a runner process holds them: over HTTP/1.1 one for its waiting
//! poll and another for everything else (registration, heartbeats, completions); over HTTP/2 one connection that
//! carries both. Each is opened from the runner's source address and reopened when the server closes it; every
//! failure and every answer outside 2xx/204 is counted, so a run says whether the fleet met any protocol error.

use crate::load::BoxError;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What went wrong across the fleet.
#[derive(Debug, Default)]
pub struct Tally {
    /// Requests that failed at the connection (refused, reset, closed mid-request, timed out).
    pub failed: AtomicU64,
    /// Answers the fleet did not expect (4xx, 5xx), by status.
    pub refused: std::sync::Mutex<std::collections::BTreeMap<u16, u64>>,
    /// Connections opened again after the server closed one.
    pub reopened: AtomicU64,
}

impl Tally {
    pub fn line(&self) -> String {
        let refused = self.refused.lock().map(|r| r.clone()).unwrap_or_default();
        format!(
            "{} failed requests, {} answers outside 2xx {refused:?}, {} connections reopened",
            self.failed.load(Ordering::Relaxed),
            refused.values().sum::<u64>(),
            self.reopened.load(Ordering::Relaxed)
        )
    }
}

/// Where a runner's connections go and come from.
#[derive(Debug)]
pub struct Dialer {
    pub server: SocketAddr,
    pub from: IpAddr,
    pub http2: bool,
    pub tally: Arc<Tally>,
}

enum Sender {
    Http1(http1::SendRequest<Full<Bytes>>),
    Http2(http2::SendRequest<Full<Bytes>>),
}

impl Dialer {
    async fn open(&self) -> Result<Sender, BoxError> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(self.from, 0))?;
        let stream = socket.connect(self.server).await?;
        stream.set_nodelay(true)?;
        let io = TokioIo::new(stream);
        if self.http2 {
            let (sender, connection) = http2::handshake(TokioExecutor::new(), io).await?;
            tokio::spawn(connection);
            Ok(Sender::Http2(sender))
        } else {
            let (sender, connection) = http1::handshake(io).await?;
            tokio::spawn(connection);
            Ok(Sender::Http1(sender))
        }
    }
}

/// One connection of a runner (or, cloned over HTTP/2, its one shared connection), opened on first use.
#[derive(Clone)]
pub struct Link {
    dialer: Arc<Dialer>,
    slot: Arc<tokio::sync::Mutex<Option<Sender>>>,
    opened: Arc<AtomicU64>,
}

impl Link {
    pub fn new(dialer: Arc<Dialer>) -> Self {
        Self { dialer, slot: Arc::default(), opened: Arc::default() }
    }

    /// The runner's other connection: the same one over HTTP/2, a second one over HTTP/1.1.
    pub fn second(&self) -> Self {
        if self.dialer.http2 { self.clone() } else { Self::new(self.dialer.clone()) }
    }

    /// The open connection (HTTP/1.1: taken out of the slot for the request), or a new one. Over HTTP/2 the slot
    /// stays locked while a connection opens, so runners sharing it open one between them.
    async fn sender(&self) -> Result<Sender, BoxError> {
        let mut slot = self.slot.lock().await;
        match slot.as_ref() {
            Some(Sender::Http2(s)) if !s.is_closed() => return Ok(Sender::Http2(s.clone())),
            Some(Sender::Http1(s)) if !s.is_closed() => return slot.take().ok_or_else(|| "no connection".into()),
            _ => {}
        }
        if self.opened.fetch_add(1, Ordering::Relaxed) > 0 {
            self.dialer.tally.reopened.fetch_add(1, Ordering::Relaxed);
        }
        match self.dialer.open().await? {
            Sender::Http2(sender) => {
                *slot = Some(Sender::Http2(sender.clone()));
                Ok(Sender::Http2(sender))
            }
            http1 => Ok(http1),
        }
    }

    /// POSTs JSON with `headers`; answers the status and the JSON answer (`Null` when empty). Failures and
    /// answers outside 2xx are counted in the tally.
    pub async fn post(&self, path: &str, headers: &[(&str, &str)], body: &Value) -> Result<(u16, Value), BoxError> {
        let answer = tokio::time::timeout(Duration::from_secs(90), self.exchange(path, headers, body)).await;
        let answer = answer.map_err(BoxError::from).and_then(|a| a);
        match &answer {
            Err(_) => {
                self.dialer.tally.failed.fetch_add(1, Ordering::Relaxed);
            }
            Ok((status, _)) if *status >= 400 => {
                if let Ok(mut refused) = self.dialer.tally.refused.lock() {
                    *refused.entry(*status).or_default() += 1;
                }
            }
            Ok(_) => {}
        }
        answer
    }

    async fn exchange(&self, path: &str, headers: &[(&str, &str)], body: &Value) -> Result<(u16, Value), BoxError> {
        let mut sender = self.sender().await?;
        let mut request = hyper::Request::builder().method("POST").header("content-type", "application/json");
        request = match sender {
            // HTTP/2 takes the authority from the URI; HTTP/1.1 from the Host header.
            Sender::Http2(_) => request.uri(format!("http://{}{path}", self.dialer.server)),
            Sender::Http1(_) => request.uri(path).header("host", self.dialer.server.to_string()),
        };
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(Bytes::from(serde_json::to_vec(body)?)))?;
        let response = match &mut sender {
            Sender::Http1(s) => {
                s.ready().await?;
                s.send_request(request).await?
            }
            Sender::Http2(s) => {
                s.ready().await?;
                s.send_request(request).await?
            }
        };
        let status = response.status().as_u16();
        let text = response.into_body().collect().await?.to_bytes();
        if let Sender::Http1(_) = sender {
            *self.slot.lock().await = Some(sender);
        }
        Ok((status, if text.is_empty() { Value::Null } else { serde_json::from_slice(&text)? }))
    }
}
