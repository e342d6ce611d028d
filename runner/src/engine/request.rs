//! Request nodes: render the request from templates, check where its secrets may go, send it (per-node timeout,
//! redirects followed here so every hop is checked), read the response, run the extractors and assertions.
//! Retries are the caller's. Everything kept from the exchange is masked before it is cut to size.

use crate::engine::bodies;
use crate::engine::clients::Clients;
use crate::engine::cookies::{Jar, masked_set_cookie};
use crate::engine::mask::{MASK, Masker};
use crate::engine::send::{self, Outgoing, Received};
use crate::engine::vars::Variables;
use hookflow_shared::api::catalog::{Assertion, AssertionResult};
use hookflow_shared::api::executions::{NodeStatus, ReceivedResponse, SentRequest, Timings};
use hookflow_shared::api::runners::Job;
use hookflow_shared::flow::definition::{RequestNode, RequestSpec};
use hookflow_shared::flow::extract::{Extractor, ExtractorKind, Parsed, ResponseView};
use hookflow_shared::flow::request_body;
use hookflow_shared::flow::template;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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
    /// The request's URL held a value a launch or a sender chose: what it extracted is theirs too.
    pub tainted: bool,
}

impl Exchange {
    fn error(request: Option<SentRequest>, message: String) -> Self {
        Self { status: Some(NodeStatus::Error), request, error: Some(message), ..Self::default() }
    }
}

/// What a request node's exchange needs from the run.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub clients: &'a Clients,
    pub job: &'a Job,
    pub masker: &'a Masker,
    /// The run's cookie jar (`None`: off for the run).
    pub jar: Option<&'a std::sync::Mutex<Jar>>,
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
        // A cookie is a credential: shown as `***` like a header carrying a secret.
        let secret = !template::secret_names(value).is_empty()
            || !masker.carried(&rendered).is_empty()
            || name.eq_ignore_ascii_case("cookie");
        shown.insert(name.clone(), if secret { MASK.to_owned() } else { rendered.clone() });
        headers.push((name.clone(), rendered));
    }
    if context.job.trigger_depth > 0 {
        mark_depth(&mut headers, &mut shown, context.job.trigger_depth);
    }
    let render = |field: &str, text: &str| template::render(text, &scope).map_err(|e| fail(field, e));
    let body = bodies::build(spec, &render, &scope)?;
    if let Some(content_type) = &body.content_type
        && !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
    {
        headers.push(("content-type".into(), content_type.clone()));
        shown.insert("content-type".into(), content_type.clone());
    }
    if spec.graphql.is_some() && !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("accept")) {
        let accept = "application/graphql-response+json, application/json".to_owned();
        headers.push(("accept".into(), accept.clone()));
        shown.insert("accept".into(), accept);
    }
    let method = if body.post { "POST".to_owned() } else { method };
    let secrets = spec.client_certificate.as_deref().and_then(request_body::secret_reference).into_iter().collect();
    let outgoing =
        Outgoing { method: method.clone(), url: url.clone(), untainted_url, headers, body: body.bytes, secrets };
    Ok((SentRequest { method, url, headers: shown, body: body.shown }, outgoing))
}

/// The client a request goes out on: the run's, or one presenting the node's client certificate.
fn client_for(spec: &RequestSpec, vars: &Variables, context: Context<'_>) -> Result<reqwest::Client, String> {
    let policy = context.job.network;
    let Some(certificate) = &spec.client_certificate else {
        return Ok(context.clients.get(policy).clone());
    };
    let pem = template::render(certificate, &vars.scope())
        .map_err(|e| format!("client_certificate: {}", vars.explain(&e)))?;
    context.clients.with_certificate(policy, &pem).map_err(|e| format!("client_certificate: {e}"))
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

/// Whether the URL a request is sent to (its template or its query's) used a value a launch or a sender chose.
fn url_tainted(spec: &RequestSpec, vars: &Variables) -> bool {
    vars.is_tainted_template(&spec.url) || spec.query.values().any(|value| vars.is_tainted_template(value))
}

/// One try of a request node. `stop` ends it early (a timeout, a cancellation): sending stops at once, evaluating
/// between two extractors, and the try returns only once its work has ended.
pub async fn exchange(
    context: Context<'_>,
    node: &RequestNode,
    vars: &Variables,
    stop: &CancellationToken,
) -> Exchange {
    let mut exchange = exchange_inner(context, node, vars, stop).await;
    exchange.tainted = node.request.as_ref().is_some_and(|spec| url_tainted(spec, vars));
    exchange
}

async fn exchange_inner(
    context: Context<'_>,
    node: &RequestNode,
    vars: &Variables,
    stop: &CancellationToken,
) -> Exchange {
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
    let client = match client_for(spec, vars, context) {
        Ok(client) => client,
        Err(message) => return Exchange::error(Some(shown), message),
    };
    let jar = context.jar.filter(|_| spec.cookies != Some(false));
    let sent = tokio::select! {
        sent = send::send(&client, &outgoing, &rules, context.masker, timeout, jar) => sent,
        () = stop.cancelled() => Err(STOPPED.to_owned()),
    };
    let mut shown = shown;
    let received = match sent {
        Ok(received) => received,
        Err(message) => return Exchange::error(Some(shown), message),
    };
    if received.sent_cookies {
        shown.headers.insert("cookie".into(), MASK.to_owned());
    }
    let heavy = received.body.len() > HEAVY_BODY || node.extractors.iter().any(|e| e.kind == ExtractorKind::XmlPath);
    if !heavy {
        return evaluate(node, vars, shown, &received, context.masker, stop);
    }
    // Parsing a large or XML body is CPU work: off the async workers, a few at a time in the process (a parsed
    // document takes many times its text), stopped between extractors when `stop` fires, and awaited to its end
    // even then, so whoever holds a slot for this try holds it while the work goes on.
    let permit = tokio::select! {
        permit = heavy_evaluations().clone().acquire_owned() => permit.ok(),
        () = stop.cancelled() => None,
    };
    let Some(permit) = permit else {
        return Exchange::error(Some(shown), STOPPED.into());
    };
    // Dropped before its end (a run's timeout drops it), the exchange stops its blocking work all the same.
    let stop = stop.child_token();
    let _stopped = stop.clone().drop_guard();
    let (node, vars, masker) = (node.clone(), vars.clone(), context.masker.clone());
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        evaluate(&node, &vars, shown, &received, &masker, &stop)
    })
    .await
    .unwrap_or_else(|_| Exchange::error(None, "evaluating the response failed".into()))
}

/// Bodies larger than this are evaluated off the async workers.
pub(crate) const HEAVY_BODY: usize = 256 * 1024;
/// Large or XML bodies evaluated at once in the process.
const HEAVY_EVALUATIONS: usize = 2;
/// The error of a try stopped before its end.
pub const STOPPED: &str = "stopped before the exchange ended";

pub(crate) fn heavy_evaluations() -> &'static std::sync::Arc<tokio::sync::Semaphore> {
    static SEMAPHORE: std::sync::OnceLock<std::sync::Arc<tokio::sync::Semaphore>> = std::sync::OnceLock::new();
    SEMAPHORE.get_or_init(|| std::sync::Arc::new(tokio::sync::Semaphore::new(HEAVY_EVALUATIONS)))
}

/// Runs the extractors and then (when they all worked) the assertions over a received response; the kept body
/// (only what is kept of it) and headers are masked.
fn evaluate(
    node: &RequestNode,
    vars: &Variables,
    shown: SentRequest,
    received: &Received,
    masker: &Masker,
    stop: &CancellationToken,
) -> Exchange {
    let text = String::from_utf8_lossy(&received.body);
    let view = ResponseView {
        status: received.status,
        method: None,
        signature: None,
        headers: &received.headers,
        body: &text,
        duration_ms: Some(received.total.as_secs_f64() * 1000.0),
    };
    let mut exchange = Exchange { request: Some(shown), ..Exchange::default() };
    let (extracted, failed) = extract_all(&node.extractors, view, stop);
    exchange.extracted = extracted;
    if let Some(error) = failed {
        exchange.status = Some(NodeStatus::Error);
        exchange.error = Some(error);
    }
    let mut joined: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in &received.headers {
        let value = &if name.eq_ignore_ascii_case("set-cookie") { masked_set_cookie(value) } else { value.clone() };
        joined.entry(name.clone()).and_modify(|v| *v = format!("{v}, {value}")).or_insert_with(|| value.clone());
    }
    let (kept, truncated) = masker.kept(&text);
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
    let graphql_failed = node
        .request
        .as_ref()
        .and_then(|spec| spec.graphql.as_ref())
        .filter(|graphql| !graphql.allow_errors)
        .and_then(|_| bodies::graphql_error(&text));
    if exchange.status.is_none()
        && let Some(error) = graphql_failed
    {
        exchange.status = Some(NodeStatus::Failed);
        exchange.error = Some(error);
    }
    if exchange.status.is_none() {
        let (results, failed) = assert_all(&node.assertions, vars, &exchange.extracted, masker);
        exchange.assertions = results;
        exchange.status = Some(if failed.is_none() { NodeStatus::Passed } else { NodeStatus::Failed });
        exchange.error = failed;
    }
    exchange
}

/// Runs `extractors` over a response, its body parsed at most once: what they found, and the last extractor's
/// error. Stops between two extractors when `stop` fires.
pub(crate) fn extract_all(
    extractors: &[Extractor],
    view: ResponseView<'_>,
    stop: &CancellationToken,
) -> (BTreeMap<String, Value>, Option<String>) {
    let (mut extracted, mut error) = (BTreeMap::new(), None);
    let parsed = Parsed::new(view);
    for extractor in extractors {
        if stop.is_cancelled() {
            return (extracted, Some(STOPPED.to_owned()));
        }
        match extractor.extract_from(&parsed) {
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
