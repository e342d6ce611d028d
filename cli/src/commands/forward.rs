//! Forwarding a capture to a local server: the same method, the capture's path and query appended to the target,
//! its headers in order (hop-by-hop ones left to the client) and the exact body bytes. Bodies the stream left out
//! for size are fetched from `.../body`.

use crate::api::Api;
use crate::error::CliError;
use crate::output::{Style, Tone, duration};
use base64::Engine as _;
use hookflow_shared::WebhookId;
use hookflow_shared::api::webhooks::{BodyEncoding, Capture};
use reqwest::Method;
use std::time::{Duration, Instant};

/// Headers that describe one hop, not the request: the client sets its own.
const HOP_HEADERS: [&str; 8] =
    ["host", "content-length", "connection", "transfer-encoding", "keep-alive", "upgrade", "te", "proxy-connection"];

#[derive(Debug)]
pub struct Forwarder {
    api: Api,
    webhook_id: WebhookId,
    target: reqwest::Url,
    http: reqwest::Client,
}

/// What the target answered.
#[derive(Debug)]
pub struct Delivered {
    pub status: u16,
    pub duration_ms: u64,
}

impl Forwarder {
    pub fn new(api: Api, webhook_id: WebhookId, to: &str) -> Result<Self, CliError> {
        let target =
            reqwest::Url::parse(to).map_err(|e| CliError::usage(format!("--to is not a URL ({e}): {to:?}")))?;
        if !matches!(target.scheme(), "http" | "https") {
            return Err(CliError::usage(format!("--to must be an http or https URL: {to:?}")));
        }
        // No proxy: the target is usually on this machine. No redirects: the answer is reported as it came.
        let http = hookflow_runner::tls::shared(reqwest::Client::builder())
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| CliError::runtime(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Self { api, webhook_id, target, http })
    }

    /// The target URL for a capture: the target's path, then the capture's path; the target's query, then the
    /// capture's. A capture path with dot segments (`/../`, `%2e%2e` in any case) would leave `--to`'s path: the
    /// sender chose it, so it is refused.
    pub fn url_for(&self, capture: &Capture) -> Result<reqwest::Url, String> {
        let dot_segment = capture.path.split('/').any(|segment| {
            let segment = segment.to_ascii_lowercase().replace("%2e", ".");
            segment == "." || segment == ".."
        });
        let base = self.target.path().trim_end_matches('/');
        let mut url = self.target.clone();
        let path = format!("{base}{}", capture.path);
        url.set_path(if path.is_empty() { "/" } else { &path });
        if dot_segment || !url.path().starts_with(base) {
            return Err(format!("its path {:?} would leave the --to path; not forwarded", capture.path));
        }
        let query: Vec<&str> = [self.target.query(), Some(capture.query_string.as_str())]
            .into_iter()
            .flatten()
            .filter(|q| !q.is_empty())
            .collect();
        url.set_query((!query.is_empty()).then(|| query.join("&")).as_deref());
        Ok(url)
    }

    /// The capture's exact body bytes.
    async fn body(&self, capture: &Capture) -> Result<Vec<u8>, CliError> {
        match (&capture.body, capture.body_truncated) {
            (Some(body), false) => match capture.body_encoding {
                BodyEncoding::Utf8 => Ok(body.clone().into_bytes()),
                BodyEncoding::Base64 => base64::engine::general_purpose::STANDARD
                    .decode(body)
                    .map_err(|e| CliError::Network(format!("capture {} has a bad base64 body: {e}", capture.id))),
            },
            (None, false) if capture.body_size == 0 => Ok(Vec::new()),
            _ => {
                let path = format!("/webhooks/{}/requests/{}/body", self.webhook_id, capture.id);
                let response = self.api.send_raw(self.api.request(Method::GET, &path)).await?;
                let bytes =
                    response.bytes().await.map_err(|e| CliError::Network(format!("reading the body failed: {e}")))?;
                Ok(bytes.to_vec())
            }
        }
    }

    /// Sends the capture to the target. A target that does not answer is reported, not fatal.
    pub async fn forward(&self, capture: &Capture) -> Result<Delivered, String> {
        let url = self.url_for(capture)?;
        let body = self.body(capture).await.map_err(|e| e.to_string())?;
        let method =
            Method::from_bytes(capture.method.as_bytes()).map_err(|_| format!("bad method {}", capture.method))?;
        let mut request = self.http.request(method, url);
        for (name, value) in
            capture.headers.iter().filter(|(n, _)| !HOP_HEADERS.contains(&n.to_ascii_lowercase().as_str()))
        {
            request = request.header(name.as_str(), value.as_str());
        }
        let started = Instant::now();
        let response = request.body(body).send().await.map_err(|e| {
            let mut reason = e.to_string();
            if let Some(inner) = std::error::Error::source(&e) {
                reason = format!("{reason}: {inner}");
            }
            reason
        })?;
        Ok(Delivered {
            status: response.status().as_u16(),
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        })
    }
}

/// One line per forwarded capture.
pub fn describe(capture: &Capture, result: Result<Delivered, String>, style: Style) -> String {
    let path = if capture.path.is_empty() { "/" } else { &capture.path };
    match result {
        Ok(delivered) => {
            let tone = if delivered.status < 400 { Tone::Good } else { Tone::Bad };
            format!(
                "{} {path} -> {} ({})",
                capture.method,
                style.paint(&delivered.status.to_string(), tone),
                duration(delivered.duration_ms)
            )
        }
        Err(reason) => {
            format!("{} {path} -> {}", capture.method, style.paint(&format!("not delivered: {reason}"), Tone::Bad))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Credentials;
    use hookflow_shared::Timestamp;
    use hookflow_shared::api::webhooks::BodyEncoding;
    use hookflow_shared::redacted::Redacted;
    use hookflow_shared::{CaptureId, OrgId};

    fn capture(path: &str) -> Capture {
        Capture {
            id: CaptureId::nil(),
            webhook_id: Some(WebhookId::nil()),
            execution_id: None,
            method: "POST".into(),
            path: path.into(),
            query_string: "a=1".into(),
            query: Default::default(),
            headers: Vec::new(),
            content_type: None,
            body: None,
            body_encoding: BodyEncoding::Utf8,
            body_size: 0,
            body_sha256: String::new(),
            source_ip: "127.0.0.1".into(),
            received_at: Timestamp::now(),
            signature: hookflow_shared::api::signatures::Signature::unverified(),
            body_truncated: false,
            handshake: None,
            executions: Vec::new(),
            deliveries: Vec::new(),
        }
    }

    #[test]
    fn a_sender_cannot_leave_the_to_path() {
        let credentials = Credentials {
            base_url: "http://127.0.0.1:1".into(),
            api_key: Redacted::new("k".into()),
            organization_id: OrgId::nil(),
        };
        let api = Api::new(credentials).expect("api");
        let forwarder = Forwarder::new(api, WebhookId::nil(), "http://127.0.0.1:3000/hooks/in").expect("forwarder");
        let fine = forwarder.url_for(&capture("/github/push")).expect("a path under --to");
        assert_eq!(fine.as_str(), "http://127.0.0.1:3000/hooks/in/github/push?a=1");
        for escape in ["/../admin", "/a/../../admin", "/%2e%2e/admin", "/%2E%2e/x", "/./../x"] {
            assert!(forwarder.url_for(&capture(escape)).is_err(), "{escape}");
        }
    }
}
