//! Sending one signed request the server makes for a tenant (a delivery's attempt; alert notifications' webhook channels
//! too) through the guarded client, signed the Standard Webhooks way when a secret is given, and classifying the
//! outcome: a 2xx answer delivers; any other status, a refused or failed connection, a timeout, or an address the
//! policy blocks (`error` beginning `blocked`) is a failed attempt. Errors never carry the URL or the secret.

use crate::signature::standard_webhooks_sign;
use hookflow_runner::outbound::{self as guard, ClientOptions, Guard};
use hookflow_shared::api::runners::NetworkPolicy;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most of an answer read (and dropped) so its connection can be used again.
const ANSWER_READ: usize = 64 * 1024;
/// Headers never forwarded: they describe one hop, are the client's to set, or are the delivery's own.
pub const DROPPED_HEADERS: [&str; 11] = [
    "host",
    "content-length",
    "connection",
    "transfer-encoding",
    "keep-alive",
    "upgrade",
    "te",
    "proxy-connection",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
];

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempted {
    pub status_code: Option<u16>,
    pub error: Option<String>,
    pub duration: Duration,
}

impl Attempted {
    pub fn delivered(&self) -> bool {
        self.status_code.is_some_and(|s| (200..300).contains(&s))
    }
}

/// Guarded clients by policy and timeout, made once (each keeps its connections).
#[derive(Debug, Default)]
pub struct Clients(Mutex<HashMap<(bool, u64), reqwest::Client>>);

impl Clients {
    pub fn get(&self, policy: NetworkPolicy, timeout: Duration) -> reqwest::Client {
        let key = (policy == NetworkPolicy::Private, timeout.as_millis() as u64);
        let mut clients = self.0.lock().unwrap_or_else(|e| e.into_inner());
        clients
            .entry(key)
            .or_insert_with(|| {
                let policy = if key.0 { NetworkPolicy::Private } else { NetworkPolicy::Public };
                Guard::new(policy).client(&ClientOptions { timeout: Some(timeout), ..ClientOptions::default() })
            })
            .clone()
    }
}

/// The headers a signed request carries: the given ones in order without [`DROPPED_HEADERS`], then `webhook-id`
/// and, with a secret, `webhook-timestamp` (now) and `webhook-signature`.
pub fn outgoing_headers(
    headers: &[(String, String)],
    message_id: &str,
    signing_secret: Option<&[u8]>,
    body: &[u8],
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> =
        headers.iter().filter(|(n, _)| !DROPPED_HEADERS.contains(&n.to_ascii_lowercase().as_str())).cloned().collect();
    out.push(("webhook-id".to_owned(), message_id.to_owned()));
    if let Some(secret) = signing_secret {
        let timestamp = chrono::Utc::now().timestamp();
        out.push(("webhook-timestamp".to_owned(), timestamp.to_string()));
        out.push(("webhook-signature".to_owned(), standard_webhooks_sign(secret, message_id, timestamp, body)));
    }
    out
}

/// Sends one request whose headers are made ([`outgoing_headers`]) with `client` (a guarded one:
/// [`Clients::get`]) and classifies the outcome.
pub async fn send(
    client: &reqwest::Client,
    policy: NetworkPolicy,
    method: &str,
    url: reqwest::Url,
    headers: &[(String, String)],
    body: bytes::Bytes,
) -> Attempted {
    let started = Instant::now();
    let failed = |error: String| Attempted { status_code: None, error: Some(error), duration: started.elapsed() };
    if let Err(refused) = Guard::new(policy).check_url(&url) {
        return failed(format!("blocked: {refused}"));
    }
    let Ok(method) = reqwest::Method::from_bytes(method.as_bytes()) else {
        return failed("the captured method cannot be sent".to_owned());
    };
    let mut request = client.request(method, url);
    for (name, value) in headers {
        let (Ok(name), Ok(value)) = (
            reqwest::header::HeaderName::try_from(name.as_str()),
            reqwest::header::HeaderValue::try_from(value.as_str()),
        ) else {
            continue;
        };
        request = request.header(name, value);
    }
    match request.body(body).send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let _ = guard::read_limited(response, ANSWER_READ).await;
            let error = (!(200..300).contains(&status)).then(|| format!("answered {status}"));
            Attempted { status_code: Some(status), error, duration: started.elapsed() }
        }
        Err(e) => failed(describe(&e)),
    }
}

/// A failed request in words, without its URL.
fn describe(error: &reqwest::Error) -> String {
    match guard::refusal(error) {
        Some(refused) => format!("blocked: {refused}"),
        None if error.is_timeout() => "timed out".to_owned(),
        None if error.is_connect() => "the connection failed".to_owned(),
        None => "the request failed".to_owned(),
    }
}
