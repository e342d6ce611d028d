//! Webhook nodes: render the node's search, long-poll the control plane (`CaptureSource`, the job-token route
//! `POST /runner/jobs/{job_id}/captures`) until a matching capture arrives or the node's time is up, then read the
//! capture as a response (`statusCode` is its method, `signature` its verdict) with the node's extractors and
//! assertions. Captures one node took are never another's within the run.

use crate::engine::mask::Masker;
use crate::engine::request::{assert_all, extract_all};
use crate::engine::vars::Variables;
use base64::Engine as _;
use hookflow_shared::CaptureId;
use hookflow_shared::api::executions::{NodeResult, NodeStatus};
use hookflow_shared::api::runners::{CaptureWait, CaptureWaitReply, Job};
use hookflow_shared::api::webhooks::{BodyEncoding, Capture};
use hookflow_shared::flow::definition::WebhookNode;
use hookflow_shared::flow::extract::ResponseView;
use hookflow_shared::flow::template;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The longest one poll waits (the server's ceiling).
const MAX_POLL: Duration = Duration::from_secs(55);
/// After a failed poll, the next one waits this long first.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// Why a poll failed, and whether asking again can help.
#[derive(Debug, Clone)]
pub struct PollFailed {
    /// The server refused the wait itself (a search it cannot read, an endpoint it does not know).
    pub refused: bool,
    pub message: String,
}

/// Where a run waits for captures: the control plane that runs the job.
pub trait CaptureSource: Send + Sync {
    /// One long poll of at most `wait.wait_s` seconds.
    fn wait<'a>(
        &'a self,
        job: &'a Job,
        wait: &'a CaptureWait,
    ) -> Pin<Box<dyn Future<Output = Result<CaptureWaitReply, PollFailed>> + Send + 'a>>;
}

/// What a webhook node needs from its run.
pub struct Waiting<'a> {
    pub job: &'a Job,
    pub source: Option<&'a dyn CaptureSource>,
    pub masker: &'a Masker,
    pub cancel: &'a CancellationToken,
    /// Captures taken by the run's nodes so far.
    pub taken: &'a Mutex<Vec<CaptureId>>,
}

impl std::fmt::Debug for Waiting<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiting").field("job", &self.job.job_id).field("taken", &self.taken).finish_non_exhaustive()
    }
}

/// Runs a webhook node into `result`; `None` when cancelled.
pub async fn run(node: &WebhookNode, vars: &mut Variables, run: Waiting<'_>, result: &mut NodeResult) -> Option<()> {
    let fail = |result: &mut NodeResult, status: NodeStatus, message: String| {
        result.status = status;
        result.error = Some(message);
    };
    let Some(source) = run.source else {
        fail(result, NodeStatus::Error, "webhook nodes wait through a hookflow server; this run has none".into());
        return Some(());
    };
    let search = match node.webhook.rendered(|text| template::render(text, &vars.scope())) {
        Ok(search) => search,
        Err((field, e)) => {
            fail(result, NodeStatus::Error, format!("{field}: {}", vars.explain(&e)));
            return Some(());
        }
    };
    let timeout_ms = node.webhook.timeout_ms().min(run.job.timeout_s.saturating_mul(1000));
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let mut wait = CaptureWait {
        node_id: node.id.clone(),
        webhook_id: search.webhook_id,
        q: search.q.filter(|q| !q.trim().is_empty()),
        filter: search.filter,
        signature: search.signature,
        ..CaptureWait::default()
    };
    let mut last_error = None;
    let reply = loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        wait.wait_ms = Some(u64::try_from(remaining.min(MAX_POLL).as_millis()).unwrap_or(u64::MAX));
        wait.explain = remaining <= MAX_POLL;
        wait.exclude = run.taken.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let polled = tokio::select! {
            polled = source.wait(run.job, &wait) => polled,
            () = run.cancel.cancelled() => return None,
        };
        match polled {
            Ok(reply) if reply.capture.is_some() || wait.explain => break Ok(reply),
            // Answered early with nothing (a server stopping): ask again after a pause, not at once.
            Ok(_) => tokio::select! {
                () = tokio::time::sleep(RETRY_DELAY.min(deadline.saturating_duration_since(Instant::now()))) => {}
                () = run.cancel.cancelled() => return None,
            },
            Err(e) if e.refused || Instant::now() + RETRY_DELAY >= deadline => break Err(e.message),
            Err(e) => {
                last_error = Some(e.message);
                tokio::select! {
                    () = tokio::time::sleep(RETRY_DELAY) => {}
                    () = run.cancel.cancelled() => return None,
                }
            }
        }
    };
    let reply = match reply {
        Ok(reply) => reply,
        Err(e) => {
            fail(result, NodeStatus::Error, format!("could not wait for the capture: {e}"));
            return Some(());
        }
    };
    let Some(capture) = reply.capture else {
        let place = match wait.webhook_id {
            Some(id) => format!("endpoint {id}"),
            None => "this execution's capture URL".to_owned(),
        };
        let closest = reply.closest.map(|c| format!("; the closest, {c}")).unwrap_or_default();
        let hiccup = last_error.map(|e| format!(" (a poll failed on the way: {e})")).unwrap_or_default();
        fail(
            result,
            NodeStatus::Failed,
            format!(
                "timeout: no matching capture within {timeout_ms} ms; {} arrived at {place} since the execution \
                 started{closest}{hiccup}",
                plural(reply.seen)
            ),
        );
        return Some(());
    };
    run.taken.lock().unwrap_or_else(|e| e.into_inner()).push(capture.id);
    // Anyone who knows the URL can send a capture, and anyone who observed one signed capture of a scheme that
    // signs no timestamp can send it again: unless a fresh signature vouches for it, what it says is the sender's
    // choice, as a launch variable is (it may not pick the host a secret goes to).
    let chosen_by_sender = !capture.signature.vouches(reply.hmac_timestamp);
    // Decoding and parsing a capture is CPU work: off the async workers, stopped between extractors when the run
    // is cancelled or this node's future dropped.
    let heavy = capture.body.as_ref().is_some_and(|b| b.len() > crate::engine::request::HEAVY_BODY);
    let permit = if heavy {
        tokio::select! {
            permit = crate::engine::request::heavy_evaluations().clone().acquire_owned() => permit.ok(),
            () = run.cancel.cancelled() => return None,
        }
    } else {
        None
    };
    let stop = run.cancel.child_token();
    let _stopped = stop.clone().drop_guard();
    let (node_owned, vars_owned, masker, mut out) = (node.clone(), vars.clone(), run.masker.clone(), result.clone());
    let evaluated = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        evaluate(&node_owned, &vars_owned, *capture, &masker, &mut out, &stop);
        out
    })
    .await;
    match evaluated {
        Ok(evaluated) => *result = evaluated,
        Err(_) => fail(result, NodeStatus::Error, "evaluating the capture failed".into()),
    }
    if run.cancel.is_cancelled() {
        return None;
    }
    for (name, value) in &result.extracted {
        vars.set_tainted(name, value.clone(), chosen_by_sender);
    }
    Some(())
}

fn plural(n: u64) -> String {
    if n == 1 { "1 capture".to_owned() } else { format!("{n} captures") }
}

/// Runs the extractors and assertions over the capture into `result`, and puts the capture there (masked, its
/// body cut to the kept size).
fn evaluate(
    node: &WebhookNode,
    vars: &Variables,
    mut capture: Capture,
    masker: &Masker,
    result: &mut NodeResult,
    stop: &CancellationToken,
) {
    let body = match (&capture.body, capture.body_encoding) {
        (Some(text), BodyEncoding::Utf8) => text.clone(),
        (Some(text), BodyEncoding::Base64) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default(),
        (None, _) => String::new(),
    };
    let view = ResponseView {
        status: 0,
        method: Some(&capture.method),
        signature: Some(capture.signature.verdict.as_str()),
        headers: &capture.headers,
        body: &body,
        duration_ms: None,
    };
    let (extracted, failed) = extract_all(&node.extractors, view, stop);
    result.extracted = extracted;
    if let Some(error) = failed {
        result.status = NodeStatus::Error;
        result.error = Some(error);
    } else {
        let (assertions, failed) = assert_all(&node.assertions, vars, &result.extracted, masker);
        result.assertions = assertions;
        if let Some(error) = failed {
            result.status = NodeStatus::Failed;
            result.error = Some(error);
        }
    }
    for (_, value) in &mut capture.headers {
        masker.text_in_place(value);
    }
    masker.text_in_place(&mut capture.path);
    masker.text_in_place(&mut capture.query_string);
    for value in capture.query.values_mut().flatten() {
        masker.text_in_place(value);
    }
    if let Some(text) = &mut capture.body {
        let (kept, truncated) = masker.kept(text);
        *text = kept;
        capture.body_truncated |= truncated;
    }
    result.capture = Some(Box::new(capture));
}
