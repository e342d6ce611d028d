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
/// The clients' own timeout: the longest an attempt may take (`timeout_ms` at most 60,000); each request sets its own.
const MAX_TIMEOUT: Duration = Duration::from_secs(60);
/// Headers never forwarded: they describe one hop, are the client's to set, or are the delivery's own.
pub const DROPPED_HEADERS: [&str; 15] = [
    "host",
    "trailer",
    "proxy-authorization",
    "proxy-authenticate",
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
    "hookflow-verification",
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

/// Guarded clients, one per policy, made once (each keeps its connections); an attempt's timeout is the request's
/// own ([`send`]), so a tenant changing `timeout_ms` makes no new client.
#[derive(Debug, Default)]
pub struct Clients(Mutex<HashMap<bool, reqwest::Client>>);

impl Clients {
    pub fn get(&self, policy: NetworkPolicy) -> reqwest::Client {
        let private = policy == NetworkPolicy::Private;
        let mut clients = self.0.lock().unwrap_or_else(|e| e.into_inner());
        clients
            .entry(private)
            .or_insert_with(|| {
                let policy = if private { NetworkPolicy::Private } else { NetworkPolicy::Public };
                Guard::new(policy).client(&ClientOptions { timeout: Some(MAX_TIMEOUT), ..ClientOptions::default() })
            })
            .clone()
    }

    /// How many clients are made (at most one per policy).
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The headers a signed request carries: the given ones in order without [`DROPPED_HEADERS`] and those the
/// captured `Connection` header names (hop-by-hop too, RFC 9110 7.6.1), then `webhook-id`
/// and, with a secret, `webhook-timestamp` (now) and `webhook-signature`.
pub fn outgoing_headers(
    headers: &[(String, String)],
    message_id: &str,
    signing_secret: Option<&[u8]>,
    body: &[u8],
) -> Vec<(String, String)> {
    let listed: Vec<String> = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection") || n.eq_ignore_ascii_case("proxy-connection"))
        .flat_map(|(_, v)| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect();
    let mut out: Vec<(String, String)> = headers
        .iter()
        .filter(|(n, _)| {
            let n = n.to_ascii_lowercase();
            !DROPPED_HEADERS.contains(&n.as_str()) && !listed.contains(&n)
        })
        .cloned()
        .collect();
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
    timeout: Duration,
) -> Attempted {
    let started = Instant::now();
    let failed = |error: String| Attempted { status_code: None, error: Some(error), duration: started.elapsed() };
    if let Err(refused) = Guard::new(policy).check_url(&url) {
        return failed(format!("blocked: {refused}"));
    }
    let Ok(method) = reqwest::Method::from_bytes(method.as_bytes()) else {
        return failed("the captured method cannot be sent".to_owned());
    };
    let mut request = client.request(method, url).timeout(timeout.min(MAX_TIMEOUT));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_are_not_forwarded() {
        let captured = h(&[
            ("Host", "h"),
            ("Connection", "keep-alive, X-Secret-Hop ,x-other"),
            ("X-Secret-Hop", "1"),
            ("x-other", "2"),
            ("Trailer", "Expires"),
            ("Proxy-Authorization", "Basic c2VjcmV0"),
            ("Proxy-Authenticate", "Basic"),
            ("TE", "trailers"),
            ("Upgrade", "h2c"),
            ("Webhook-Signature", "v1,forged"),
            ("X-Kept", "yes"),
            ("Content-Type", "application/json"),
        ]);
        let out = outgoing_headers(&captured, "msg_1", None, b"{}");
        let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["X-Kept", "Content-Type", "webhook-id"]);
        assert!(!out.iter().any(|(_, v)| v.contains("c2VjcmV0")));
    }

    #[tokio::test]
    async fn one_client_per_policy_and_each_attempt_has_its_own_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        // A tarpit: accepts, never answers.
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        let clients = Clients::default();
        let url = reqwest::Url::parse(&format!("http://{address}/x")).expect("url");
        for timeout_ms in [150u64, 300, 450, 151, 299] {
            let client = clients.get(NetworkPolicy::Private);
            let started = Instant::now();
            let timeout = Duration::from_millis(timeout_ms);
            let attempted =
                send(&client, NetworkPolicy::Private, "POST", url.clone(), &[], bytes::Bytes::new(), timeout).await;
            assert_eq!(attempted.error.as_deref(), Some("timed out"));
            let took = started.elapsed();
            assert!(took >= timeout && took < timeout + Duration::from_secs(1), "{timeout_ms} ms took {took:?}");
        }
        clients.get(NetworkPolicy::Public);
        clients.get(NetworkPolicy::Public);
        assert_eq!(clients.len(), 2, "one client per policy, whatever the timeouts");
        let public = clients.get(NetworkPolicy::Public);
        let blocked =
            send(&public, NetworkPolicy::Public, "POST", url, &[], bytes::Bytes::new(), Duration::from_secs(1)).await;
        assert!(blocked.error.as_deref().is_some_and(|e| e.starts_with("blocked")), "{blocked:?}");
    }
}
