//! The embedded runner: the runner daemon from `hookflow-runner`, started inside the server and speaking the
//! same HTTP protocol to it over loopback, with a per-process key that claims for every organization. It makes
//! the single-process setup run flows with nothing else installed.

use hookflow_runner::client::Connection;
use hookflow_runner::daemon::{self, DaemonConfig};
use hookflow_shared::token::{self, TokenKind};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The embedded runner's key; only its hash goes into the settings.
#[derive(Clone)]
pub struct EmbeddedKey {
    key: String,
    pub hash: Vec<u8>,
}

impl std::fmt::Debug for EmbeddedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EmbeddedKey([REDACTED])")
    }
}

impl EmbeddedKey {
    /// The key itself, for a runner speaking the protocol with it.
    pub fn secret(&self) -> &str {
        &self.key
    }
}

pub fn new_key() -> EmbeddedKey {
    let key = crate::crypto::new_token(TokenKind::ApiKey);
    EmbeddedKey { hash: token::hash(&key), key }
}

/// How organizations see the runner among theirs (`GET /runners`): `embedded`, nothing of the machine (every
/// tenant sees it; its host is `null` there too).
const DISPLAY_NAME: &str = "embedded";

/// Starts the runner against the server's own listener; it stops with `shutdown`.
pub fn spawn(listening: SocketAddr, key: EmbeddedKey, concurrency: u32, shutdown: CancellationToken) {
    let ip = match listening.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let config = DaemonConfig {
        connection: Connection {
            base_url: format!("http://{}", SocketAddr::new(ip, listening.port())),
            api_key: key.key.into(),
            organization_id: None,
        },
        name: DISPLAY_NAME.into(),
        labels: vec!["embedded".into()],
        concurrency: concurrency.max(1),
        grace: Duration::from_secs(10),
        poll_wait_s: 30,
        max_jobs: None,
        idle_exit: None,
        // The server's guarded client checks every address itself: never through a proxy, whatever HTTPS_PROXY says.
        proxy: hookflow_runner::outbound::Proxy::None,
    };
    tokio::spawn(async move {
        tracing::info!(concurrency = config.concurrency, "starting the embedded runner");
        if let Err(e) = daemon::run(config, shutdown).await {
            tracing::error!(error = %e, "the embedded runner stopped");
        }
    });
}
