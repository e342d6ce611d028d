//! Request nodes: render the request from templates, check where its secrets may go, send it (per-node timeout,
//! redirects followed here so every hop is checked), read the response, run the extractors and assertions.
//! Retries are the caller's. Everything kept from the exchange is masked before it is cut to size.

use crate::engine::mask::Masker;
use crate::engine::send::{self, Outgoing, Received};
use crate::engine::vars::Variables;
use hookflow_shared::api::catalog::{Assertion, AssertionResult};
use hookflow_shared::api::executions::{MAX_RESULT_BODY, NodeStatus, ReceivedResponse, SentRequest, Timings};
use hookflow_shared::api::runners::Job;
use hookflow_shared::flow::definition::{RequestNode, RequestSpec};
use hookflow_shared::flow::extract::{Extractor, ExtractorKind, ResponseView};
use hookflow_shared::flow::template;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

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

/// What a request node's exchange needs from the run.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub client: &'a reqwest::Client,
    pub job: &'a Job,
    pub masker: &'a Masker,
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

/// The request as it will be sent, and as it is shown: a header whose value carries a secret is shown as `***`
/// whole (it may hold the secret in an encoding the masker cannot see).
fn render(spec: &RequestSpec, vars: &Variables, context: Context<'_>) -> Result<(SentRequest, Outgoing), String> {
    let (scope, masker) = (vars.scope(), context.masker);
    let fail = |field: &str, e: template::TemplateError| match &e {
        template::TemplateError::Undefined(name)
            if name.strip_prefix("secret.").is_some_and(|s| context.job.withheld_secrets.iter().any(|w| w == s)) =>
        {
            format!(
                "{field}: `{{{{{name}}}}}` is given only to registered runners, not to ephemeral runs or tried nodes"
            )
        }
        _ => format!("{field}: {}", vars.explain(&e)),
    };
    let method = template::render(&spec.method, &scope).map_err(|e| fail("method", e))?.to_ascii_uppercase();
    let mut url = template::render(&spec.url, &scope).map_err(|e| fail("url", e))?;
    let mut untainted_url = vars.render_untainted(&spec.url);
    if !spec.query.is_empty() {
        let mut query = form_urlencoded::Serializer::new(String::new());
        for (name, value) in &spec.query {
            query.append_pair(name, &template::render(value, &scope).map_err(|e| fail(&format!("query.{name}"), e))?);
        }
        let query = query.finish();
        for url in std::iter::once(&mut url).chain(untainted_url.as_mut()) {
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(&query);
        }
    }
    let mut headers = Vec::new();
    let mut shown = BTreeMap::new();
    for (name, value) in &spec.headers {
        let rendered = template::render(value, &scope).map_err(|e| fail(&format!("headers.{name}"), e))?;
        let secret = !template::secret_names(value).is_empty() || !masker.carried(&rendered).is_empty();
        shown.insert(name.clone(), if secret { "***".to_owned() } else { rendered.clone() });
        headers.push((name.clone(), rendered));
    }
    if context.job.trigger_depth > 0 {
        mark_depth(&mut headers, &mut shown, context.job.trigger_depth);
    }
    let body = spec.body.as_deref().map(|b| template::render(b, &scope)).transpose().map_err(|e| fail("body", e))?;
    let outgoing = Outgoing { method: method.clone(), url: url.clone(), untainted_url, headers, body: body.clone() };
    Ok((SentRequest { method, url, headers: shown, body }, outgoing))
}

/// Puts a triggered run's depth in its chain on a request, after the flow's own headers and in place of any of
/// that name: a flow cannot drop or lower it, so a loop of runs triggering themselves is seen and stopped.
fn mark_depth(headers: &mut Vec<(String, String)>, shown: &mut BTreeMap<String, String>, depth: u32) {
    let name = hookflow_shared::wire::header::TRIGGER_DEPTH;
    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    shown.retain(|n, _| !n.eq_ignore_ascii_case(name));
    headers.push((name.to_owned(), depth.to_string()));
    shown.insert(name.to_owned(), depth.to_string());
}

/// One try of a request node.
pub async fn exchange(context: Context<'_>, node: &RequestNode, vars: &Variables) -> Exchange {
    let Some(spec) = &node.request else {
        return Exchange::error(
            None,
            "the node carries an unresolved `request_ref` (the server inlines collection requests at launch)".into(),
        );
    };
    let (shown, outgoing) = match render(spec, vars, context) {
        Ok(rendered) => rendered,
        Err(message) => return Exchange::error(None, message),
    };
    let timeout = Duration::from_millis(node.timeout_ms.unwrap_or(DEFAULT_NODE_TIMEOUT_MS));
    let rules = send::Rules { guard_policy: context.job.network, secret_hosts: &context.job.secret_hosts };
    let received = match send::send(context.client, &outgoing, &rules, context.masker, timeout).await {
        Ok(received) => received,
        Err(message) => return Exchange::error(Some(shown), message),
    };
    let heavy = received.body.len() > HEAVY_BODY || node.extractors.iter().any(|e| e.kind == ExtractorKind::XmlPath);
    if !heavy {
        return evaluate(node, vars, shown, &received, context.masker);
    }
    // Parsing a large or XML body is CPU work: off the async workers.
    let (node, vars, masker) = (node.clone(), vars.clone(), context.masker.clone());
    tokio::task::spawn_blocking(move || evaluate(&node, &vars, shown, &received, &masker))
        .await
        .unwrap_or_else(|_| Exchange::error(None, "evaluating the response failed".into()))
}

/// Bodies larger than this are evaluated off the async workers.
const HEAVY_BODY: usize = 256 * 1024;

/// Runs the extractors and then (when they all worked) the assertions over a received response; the kept body
/// and headers are masked whole before the body is cut to size.
fn evaluate(
    node: &RequestNode,
    vars: &Variables,
    shown: SentRequest,
    received: &Received,
    masker: &Masker,
) -> Exchange {
    let text = String::from_utf8_lossy(&received.body);
    let view = ResponseView {
        status: received.status,
        method: None,
        signature: None,
        headers: &received.headers,
        body: &text,
    };
    let mut exchange = Exchange { request: Some(shown), ..Exchange::default() };
    let (extracted, failed) = extract_all(&node.extractors, view);
    exchange.extracted = extracted;
    if let Some(error) = failed {
        exchange.status = Some(NodeStatus::Error);
        exchange.error = Some(error);
    }
    let mut joined: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in &received.headers {
        joined.entry(name.clone()).and_modify(|v| *v = format!("{v}, {value}")).or_insert_with(|| value.clone());
    }
    let (kept, truncated) = keep(&masker.text(&text));
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
        let (results, failed) = assert_all(&node.assertions, vars, &exchange.extracted, masker);
        exchange.assertions = results;
        exchange.status = Some(if failed.is_none() { NodeStatus::Passed } else { NodeStatus::Failed });
        exchange.error = failed;
    }
    exchange
}

/// Runs `extractors` over a response: what they found, and the first extractor's error.
pub(crate) fn extract_all(
    extractors: &[Extractor],
    view: ResponseView<'_>,
) -> (BTreeMap<String, Value>, Option<String>) {
    let (mut extracted, mut error) = (BTreeMap::new(), None);
    for extractor in extractors {
        match extractor.extract(view) {
            Ok(Some(value)) => {
                extracted.insert(extractor.name.clone(), value);
            }
            Ok(None) => {}
            Err(e) => error = Some(format!("extractor `{}`: {e}", extractor.name)),
        }
    }
    (extracted, error)
}

/// Evaluates `assertions` over the variables and a node's fresh extractions: the results, and the failure's
/// message when any failed.
pub(crate) fn assert_all(
    assertions: &[Assertion],
    vars: &Variables,
    extracted: &BTreeMap<String, Value>,
    masker: &Masker,
) -> (Vec<AssertionResult>, Option<String>) {
    let values = vars.values_with(extracted);
    let results: Vec<AssertionResult> =
        assertions.iter().map(|a| crate::engine::guarded_assert(a, &values, masker)).collect();
    let failed = results.iter().filter(|a| !a.passed).count();
    let error = (failed > 0).then(|| format!("{failed} of {} assertions failed", results.len()));
    (results, error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_triggered_run_marks_its_depth_over_the_flows_own_header() {
        let mut headers = vec![("Hookflow-Trigger-Depth".to_owned(), "0".to_owned()), ("a".into(), "1".into())];
        let mut shown: BTreeMap<String, String> = headers.iter().cloned().collect();
        mark_depth(&mut headers, &mut shown, 3);
        assert_eq!(headers, [("a".to_owned(), "1".to_owned()), ("hookflow-trigger-depth".into(), "3".into())]);
        assert_eq!(shown.get("hookflow-trigger-depth").map(String::as_str), Some("3"));
        assert_eq!(shown.len(), 2);
    }
}
