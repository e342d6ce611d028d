//! Request nodes: render the request from templates, send it (per-node timeout), read the response, run the
//! extractors and assertions. Retries are the caller's.

use crate::engine::vars::Variables;
use hookflow_shared::api::catalog::AssertionResult;
use hookflow_shared::api::executions::{MAX_RESULT_BODY, NodeStatus, ReceivedResponse, SentRequest, Timings};
use hookflow_shared::flow::definition::{RequestNode, RequestSpec};
use hookflow_shared::flow::extract::ResponseView;
use hookflow_shared::flow::template;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub const DEFAULT_NODE_TIMEOUT_MS: u64 = 30_000;

/// What one try of a request node produced.
#[derive(Debug, Default)]
pub struct Exchange {
    pub status: Option<NodeStatus>,
    pub request: Option<SentRequest>,
    pub response: Option<ReceivedResponse>,
    pub extracted: BTreeMap<String, Value>,
    pub assertions: Vec<AssertionResult>,
    pub error: Option<String>,
}

impl Exchange {
    fn error(request: Option<SentRequest>, message: String) -> Self {
        Self { status: Some(NodeStatus::Error), request, error: Some(message), ..Self::default() }
    }
}

/// Cuts a body to the kept size at a character boundary.
pub fn keep(text: &str) -> (String, bool) {
    if text.len() <= MAX_RESULT_BODY {
        return (text.to_owned(), false);
    }
    let mut end = MAX_RESULT_BODY;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_owned(), true)
}

/// The request as sent; a header whose template names a secret is shown as `***` whole (it may hold the secret
/// in an encoding the masker cannot see, such as Basic credentials).
fn render(spec: &RequestSpec, vars: &Variables) -> Result<(SentRequest, Vec<(String, String)>), String> {
    let scope = vars.scope();
    let fail = |field: &str, e: template::TemplateError| format!("{field}: {e}");
    let method = template::render(&spec.method, &scope).map_err(|e| fail("method", e))?.to_ascii_uppercase();
    let mut url = template::render(&spec.url, &scope).map_err(|e| fail("url", e))?;
    if !spec.query.is_empty() {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (name, value) in &spec.query {
            query.append_pair(name, &template::render(value, &scope).map_err(|e| fail(&format!("query.{name}"), e))?);
        }
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(&query.finish());
    }
    let mut headers = Vec::new();
    let mut shown = BTreeMap::new();
    for (name, value) in &spec.headers {
        let rendered = template::render(value, &scope).map_err(|e| fail(&format!("headers.{name}"), e))?;
        let display = if template::secret_names(value).is_empty() { rendered.clone() } else { "***".into() };
        shown.insert(name.clone(), display);
        headers.push((name.clone(), rendered));
    }
    let body = spec.body.as_deref().map(|b| template::render(b, &scope)).transpose().map_err(|e| fail("body", e))?;
    Ok((SentRequest { method, url, headers: shown, body }, headers))
}

/// A response as received.
struct Received {
    status: u16,
    headers: Vec<(String, String)>,
    body: bytes::Bytes,
    ttfb: Duration,
    total: Duration,
}

/// One try of a request node.
pub async fn exchange(client: &reqwest::Client, node: &RequestNode, vars: &Variables) -> Exchange {
    let Some(spec) = &node.request else {
        return Exchange::error(
            None,
            "the node carries an unresolved `request_ref` (the server inlines collection requests at launch)".into(),
        );
    };
    let (shown, headers) = match render(spec, vars) {
        Ok(rendered) => rendered,
        Err(message) => return Exchange::error(None, message),
    };
    let method = match reqwest::Method::from_bytes(shown.method.as_bytes()) {
        Ok(method) => method,
        Err(_) => return Exchange::error(Some(shown), "the method is not valid".into()),
    };
    let mut builder = client.request(method, &shown.url);
    for (name, value) in &headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    if let Some(body) = &shown.body {
        builder = builder.body(body.clone());
    }
    let timeout = Duration::from_millis(node.timeout_ms.unwrap_or(DEFAULT_NODE_TIMEOUT_MS));
    match send(builder, timeout).await {
        Ok(received) => evaluate(node, vars, shown, &received),
        Err(message) => Exchange::error(Some(shown), message),
    }
}

/// Sends the request and reads the whole response within `timeout`.
async fn send(builder: reqwest::RequestBuilder, timeout: Duration) -> Result<Received, String> {
    let started = Instant::now();
    let sent = async {
        let response = builder.send().await?;
        let ttfb = started.elapsed();
        let status = response.status().as_u16();
        let headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        let body = response.bytes().await?;
        Ok::<_, reqwest::Error>(Received { status, headers, body, ttfb, total: Duration::ZERO })
    };
    match tokio::time::timeout(timeout, sent).await {
        Ok(Ok(received)) => Ok(Received { total: started.elapsed(), ..received }),
        Ok(Err(e)) => Err(describe(&e)),
        Err(_) => Err(format!("no response within {} ms", timeout.as_millis())),
    }
}

/// Runs the extractors and then (when they all worked) the assertions over a received response.
fn evaluate(node: &RequestNode, vars: &Variables, shown: SentRequest, received: &Received) -> Exchange {
    let text = String::from_utf8_lossy(&received.body);
    let view = ResponseView { status: received.status, headers: &received.headers, body: &text };
    let mut exchange = Exchange { request: Some(shown), ..Exchange::default() };
    for extractor in &node.extractors {
        match extractor.extract(view) {
            Ok(Some(value)) => {
                exchange.extracted.insert(extractor.name.clone(), value);
            }
            Ok(None) => {}
            Err(e) => {
                exchange.status = Some(NodeStatus::Error);
                exchange.error = Some(format!("extractor `{}`: {e}", extractor.name));
            }
        }
    }
    let mut joined: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in &received.headers {
        joined.entry(name.clone()).and_modify(|v| *v = format!("{v}, {value}")).or_insert_with(|| value.clone());
    }
    let (kept, truncated) = keep(&text);
    exchange.response = Some(ReceivedResponse {
        status: received.status,
        headers: joined,
        body: kept,
        body_size: received.body.len() as u64,
        truncated,
        timings_ms: Timings {
            ttfb: received.ttfb.as_secs_f64() * 1000.0,
            total: received.total.as_secs_f64() * 1000.0,
        },
    });
    if exchange.status.is_none() {
        let values = vars.values_with(&exchange.extracted);
        exchange.assertions = node.assertions.iter().map(|a| a.evaluate(&values)).collect();
        let passed = exchange.assertions.iter().all(|a| a.passed);
        exchange.status = Some(if passed { NodeStatus::Passed } else { NodeStatus::Failed });
        if !passed {
            let failed = exchange.assertions.iter().filter(|a| !a.passed).count();
            exchange.error = Some(format!("{failed} of {} assertions failed", exchange.assertions.len()));
        }
    }
    exchange
}

/// A transport error in a sentence, without the URL (which may hold a secret the masker hides anyway).
fn describe(error: &reqwest::Error) -> String {
    let kind = if error.is_connect() {
        "could not connect"
    } else if error.is_timeout() {
        "timed out"
    } else if error.is_body() || error.is_decode() {
        "the response body could not be read"
    } else {
        "the request failed"
    };
    let mut source = std::error::Error::source(error);
    let mut detail = String::new();
    while let Some(cause) = source {
        detail = cause.to_string();
        source = cause.source();
    }
    if detail.is_empty() { kind.to_owned() } else { format!("{kind}: {detail}") }
}
