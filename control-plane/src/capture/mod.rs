//! The capture path, `/webhook/{id}[/{*path}]`: no authentication; finds the endpoint in the cache, applies its
//! rate limit, its organization's capture quotas (before the body is read) and its body limit, records the request
//! exactly as sent (HEAD and OPTIONS included), and answers (`answer`: a CORS preflight, a response rule, the
//! endpoint's custom response or the receipt) only once the capture writer has committed it. It reads its own component, `CapturePath`, from
//! any state that gives one (`FromRef`): the hot path touches nothing else.

pub mod answer;
pub mod batch;
pub mod cache;
pub mod handoff;
pub mod handshake;
pub mod hub;
pub mod refused;
pub mod row;
pub mod signing;
pub mod sinks;
pub mod staged;
pub mod stored_verification;
pub mod target;
pub mod wait_sweep;
pub mod waiters;
pub mod writer;

use crate::crypto::MasterKey;
use crate::db::byte_budget::{Reservation, SMALL_WRITE};
use crate::db::deadline::Deadline;
use crate::error::{ApiError, ApiResult, to_json_string};
use crate::http::body::{discard, read_within};
use crate::http::client_address::TrustedProxies;
use crate::http::limits::Allowances;
use crate::http::raw_head::{HeadQueue, RequestNumber};
use crate::quota::captures::CaptureQuotas;
use crate::signature::Message;
use axum::Extension;
use axum::extract::{ConnectInfo, FromRef, Request, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use batch::CaptureSignature;
use cache::{CaptureTarget, Endpoint, EndpointCache, Lookup};
use hookflow_shared::api::signatures::{Verdict, VerificationMode};
use hookflow_shared::api::webhooks::CaptureReceipt;
use hookflow_shared::{ErrorCode, OrgId, WebhookId};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use utoipa_axum::{router::OpenApiRouter, routes};
use writer::{CaptureRecord, CaptureWriter, Outcome};

/// What the capture path reads. Shared as `Arc<CapturePath>`.
#[derive(Debug)]
pub struct CapturePath {
    pub pool: PgPool,
    /// Endpoints by id, dropped when they change (NOTIFY).
    pub endpoints: EndpointCache,
    /// Executions' own capture URLs.
    pub executions: sinks::ExecutionSinks,
    /// The group-commit writer captures are stored through.
    pub writer: CaptureWriter,
    /// Stored captures' deliveries handed to this replica's sender.
    pub handoff: Arc<handoff::Handoff>,
    /// Unknown endpoint lookups per address.
    pub allowances: Arc<Allowances>,
    /// Peers whose `Forwarded` / `X-Forwarded-For` headers name the sender.
    pub trusted_proxies: TrustedProxies,
    /// The highest capture rate limit an organization may set for its endpoints.
    pub max_rate_per_s: i32,
    /// Opens the endpoints' sealed verification secrets.
    pub master_key: MasterKey,
    /// Base URL of capture URLs (`--capture-url`), the URL some schemes sign.
    pub capture_url: String,
    /// The organizations' `captures_per_day` and `stored_bytes` quotas, admitted before a body is read.
    pub quotas: Arc<CaptureQuotas>,
}

pub fn routes<S>() -> OpenApiRouter<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<CapturePath>: FromRef<S>,
{
    // The sub-path form shares the handler; OpenAPI cannot express a path wildcard, so /webhook/{id} documents both.
    OpenApiRouter::new().routes(routes!(capture)).route(
        "/webhook/{id}/{*path}",
        axum::routing::get(capture)
            .post(capture)
            .put(capture)
            .patch(capture)
            .delete(capture)
            .head(capture)
            .options(capture),
    )
}

/// Capture a request: any headers, query and body, no authentication. Also serves every sub-path
/// (`/webhook/{id}/any/thing`), recorded as `path`. Answers only after the capture is durably stored.
#[utoipa::path(method(get, post, put, patch, delete, head, options), operation_id = "capture_webhook", path = "/webhook/{id}",
    params(("id" = Uuid, Path, description = "The endpoint id")),
    request_body(description = "Any body up to the endpoint's `max_body_bytes`, stored exactly as sent (any \
        content type; the document names the generic one)",
        content = Option<hookflow_shared::api::documents::RawBody>, content_type = "application/octet-stream"),
    responses((status = 200, description = "Stored; the receipt, or the endpoint's custom response", body = CaptureReceipt),
        (status = 204, description = "A CORS preflight (`OPTIONS` with `Origin` and \
            `Access-Control-Request-Method`) from an origin the endpoint's `cors` allows; stored too"),
        (status = 400, description = "The database refused this capture (its neighbours are stored)"),
        (status = 401, description = "The endpoint enforces or rejects signatures and this one is invalid, missing \
            or a duplicate (`signature_invalid`; under `enforce` the capture is stored, under `reject` it is not)"),
        (status = 403, description = "The endpoint's `handshake` preset recognised a provider's check and refused it \
            (Meta's verify token or Twitch's or Slack's signature does not match; `signature_invalid`); stored"),
        (status = 404), (status = 405), (status = 413),
        (status = 429, description = "The endpoint's rate limit (`rate_limited`), or the organization's \
            `captures_per_day` or `stored_bytes` quota (`quota_exceeded`, answered before the body is read); \
            `Retry-After` says when to try again"),
        (status = 503),
        (status = "default", description = "A provider's check the endpoint's `handshake` preset recognised, answered \
            as the provider documents it (docs/API.md, issue #51); else the first matching response rule's answer, else \
            the endpoint's custom response: the status (200 to 599, not 3xx), headers and body it sets")),
    security(()))]
async fn capture(
    State(capture): State<Arc<CapturePath>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    heads: Option<Extension<HeadQueue>>,
    number: Option<Extension<RequestNumber>>,
    request: Request,
) -> Response {
    let recorded = heads.zip(number).map(|(heads, number)| (heads.0, number.0));
    let mut origin = None;
    let mut response = match capture_inner(&capture, peer, recorded, request, &mut origin).await {
        Ok(response) => response,
        Err(error) => {
            let response = error.into_response();
            // Rows the database refused or could not store are counted by the writer.
            if !matches!(response.status().as_u16(), 400 | 503) {
                crate::metrics::capture_refused(response.status().as_u16());
            }
            response
        }
    };
    // An answer to an origin the endpoint's `cors` allows carries its CORS headers, refusals included.
    if let Some(origin) = origin
        && !response.headers().contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN)
    {
        answer::cors::mark(&mut response, &origin);
    }
    response
}

async fn capture_inner(
    capture: &CapturePath,
    peer: SocketAddr,
    recorded: Option<(HeadQueue, RequestNumber)>,
    request: Request,
    origin: &mut Option<String>,
) -> ApiResult<Response> {
    let received_at = chrono::Utc::now();
    let (parts, body) = request.into_parts();
    // Behind a trusted proxy the sender is who the proxy says; anyone else's forwarding headers are kept, not believed.
    let peer = SocketAddr::new(capture.trusted_proxies.client(peer.ip(), &parts.headers), peer.port());
    let rest = parts.uri.path().strip_prefix("/webhook/").unwrap_or_default();
    let (id, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    // What this capture waits on the database (the endpoint, a signature's replay check, its batch) is given up
    // at its deadline with a 503; the time its body takes to arrive is the sender's and does not count.
    let mut deadline = Deadline::start();
    let endpoint = deadline.run(resolve(capture, peer, id)).await??;
    if let Some(cors) = &endpoint.answers.cors
        && let Some(value) = parts.headers.get(header::ORIGIN).and_then(|v| v.to_str().ok())
    {
        *origin = answer::cors::allowed_origin(cors, &[("origin".to_owned(), value.to_owned())]).map(str::to_owned);
    }
    if let Err(wait) = endpoint.check_rate() {
        let mut error = ApiError::new(ErrorCode::RateLimited, "this endpoint receives too many requests; retry later");
        error.retry_after_s = Some(wait.as_secs_f64().ceil().max(1.0) as u64);
        return Err(error);
    }
    let declared = parts.headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    // A body over the endpoint's limit is 413 before any quota counts it: a quota's 429 would have its sender retry
    // what can never be taken.
    if declared.is_some_and(|n| n > endpoint.max_body_bytes) {
        return Err(too_large(endpoint.max_body_bytes));
    }
    let admission = capture.quotas.admit(endpoint.org_id, declared.unwrap_or(0)).await?;
    let reading = std::time::Instant::now();
    let (body, room) =
        read_body(&capture.writer, endpoint.org_id, &parts.headers, body, endpoint.max_body_bytes).await?;
    deadline.extend(reading.elapsed());
    let size = body.len();
    let target = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let headers = recorded
        .and_then(|(queue, number)| queue.take(number, parts.method.as_str(), target))
        .map(|head| head.headers)
        .unwrap_or_else(|| hookflow_runner::outbound::header_pairs(&parts.headers));
    let signature = match &endpoint.verification {
        None => CaptureSignature::unverified(),
        Some(verification) => {
            // Only Twilio and Square sign the URL: the others' captures skip building it.
            let CaptureTarget::Webhook(id) = endpoint.target else { unreachable!("only endpoints verify") };
            let url = if verification.scheme.signs_url() {
                signed_url(&capture.capture_url, id, path, parts.uri.query().unwrap_or_default())
            } else {
                String::new()
            };
            let message = Message { headers: &headers, body: &body, url: &url, received_at };
            deadline.run(verification.judge(&capture.pool, id, message)).await?
        }
    };
    let refusal = refuses(&endpoint, &signature);
    if let (Some(refused), Some(verification)) = (&refusal, &endpoint.verification)
        && verification.mode == VerificationMode::Reject
        && let CaptureTarget::Webhook(webhook_id) = endpoint.target
    {
        // `reject`: nothing is stored; the refusal is only counted.
        let invalid = signature.answer.verdict == Verdict::Invalid;
        let method = parts.method.as_str().to_owned();
        let counted = refused::RefusedCapture { webhook_id, org_id: endpoint.org_id, method, received_at, invalid };
        // A count the deadline gives up is only a count: the refusal stands.
        let _ = deadline.run(capture.writer.count_refused(counted)).await;
        return Err(refused.clone());
    }
    let verdict = signature.answer.verdict;
    let recognised = endpoint.handshake.as_ref().and_then(|h| {
        let query = parts.uri.query().unwrap_or_default();
        let now_s = received_at.timestamp();
        let seen = handshake::Parts { method: &parts.method, query, headers: &parts.headers, body: &body, now_s };
        Some((h.preset, h.recognise(&seen)?))
    });
    let request = Captured { parts: &parts, path, headers: &headers, body: body.clone(), peer, received_at };
    let judged = signature.clone();
    let mut record = request.record(&endpoint, signature)?;
    record.handshake = recognised.as_ref().map(|(preset, _)| *preset);
    // A big body is written in parts first, from the one buffer that holds it (`staged`).
    let staged = staged::stage_if_big(&capture.pool, &deadline, &body).await;
    record.staged = staged.ok().flatten();
    record.hand =
        matches!(endpoint.target, CaptureTarget::Webhook(_)) && capture.handoff.accepts(endpoint.org_id, body.len());
    // Past the deadline the capture may still be stored: the 503 promises nothing, and the sender's retry is a
    // new capture (its signature's id is forgotten below).
    // Taken before the statement: its deliveries' leases begin later, so the sender never counts on more lease.
    let submitted = tokio::time::Instant::now();
    let (outcome, handed) = match staged {
        Ok(_) => deadline.run(capture.writer.store(record, room)).await.unwrap_or((Outcome::Failed, None)),
        Err(()) => (Outcome::Failed, None),
    };
    if let (Outcome::Stored(capture_id), Some(handed), CaptureTarget::Webhook(webhook_id)) =
        (outcome, handed, endpoint.target)
    {
        capture.handoff.give(handoff::HandedCapture {
            org_id: endpoint.org_id,
            webhook_id,
            capture_id,
            method: parts.method.as_str().to_owned(),
            path: path.to_owned(),
            query_string: parts.uri.query().unwrap_or_default().to_owned(),
            headers: headers.clone(),
            body: body.clone(),
            signature_verdict: verdict.as_str().to_owned(),
            handed,
            handed_at: submitted,
        });
    }
    staged::settled(&capture.pool, staged.ok().flatten(), outcome).await;
    if !matches!(outcome, Outcome::Stored(_))
        && let Some(verification) = &endpoint.verification
    {
        // Not stored: the sender's retry of this `webhook-id` is not a duplicate.
        verification.forget(&judged);
    }
    if matches!(outcome, Outcome::Stored(_)) {
        admission.stored(size);
    }
    match outcome {
        Outcome::Stored(request_id) => match refusal {
            Some(refused) => Err(refused),
            // The Contract's order: a CORS preflight, a handshake, the first matching rule, the endpoint's response,
            // the receipt (no preset recognises a preflight: the handshake may come first here).
            None if let Some((_, recognised)) = &recognised => Ok(handshake::response(recognised)),
            None if endpoint.answers.is_empty() => {
                Ok(answer::ordinary(endpoint.response.as_ref(), request_id, received_at))
            }
            None => {
                let query = query_map(parts.uri.query().unwrap_or_default());
                let content_type = parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
                let source_ip = peer.ip().to_string();
                let incoming = answer::Incoming {
                    method: parts.method.as_str(),
                    path,
                    query: &query,
                    headers: &headers,
                    content_type,
                    body: &body,
                    source_ip: &source_ip,
                    verdict: verdict.as_str(),
                    received_at,
                };
                let answered =
                    answer::answer(&capture.pool, &endpoint.answers, endpoint.response.as_ref(), &incoming, request_id)
                        .await;
                // The capture is stored; a delay holds no connection and no slot, only this request.
                if !answered.delay.is_zero() {
                    tokio::time::sleep(answered.delay).await;
                }
                Ok(answered.response)
            }
        },
        Outcome::EndpointGone => Err(ApiError::not_found("webhook")),
        Outcome::Rejected => {
            Err(ApiError::invalid("this capture holds a value the database cannot store; nothing was kept"))
        }
        Outcome::Failed => Err(ApiError::unavailable()),
    }
}

/// The endpoint (or the execution's own URL) a capture URL's id segment names; 404 for anything else.
async fn resolve(capture: &CapturePath, peer: SocketAddr, id: &str) -> ApiResult<Arc<Endpoint>> {
    let Ok(id) = id.parse::<WebhookId>() else {
        let execution = sinks::parse(&capture.master_key, id).ok_or_else(|| ApiError::not_found("webhook"))?;
        let endpoint = capture.executions.endpoint(&capture.pool, execution, capture.max_rate_per_s).await?;
        return endpoint.ok_or_else(|| ApiError::not_found("webhook"));
    };
    match capture.endpoints.lookup(id) {
        Lookup::Known(endpoint) => Ok(endpoint),
        Lookup::Unknown => Err(ApiError::not_found("webhook")),
        Lookup::Miss => {
            // Every id memory does not know costs a query: a budget per address keeps floods off the database.
            capture.allowances.unknown_capture(crate::http::client_address::budget_key(peer.ip()))?;
            let max_rate = capture.max_rate_per_s;
            capture
                .endpoints
                .load(&capture.pool, &capture.master_key, id, max_rate)
                .await?
                .ok_or_else(|| ApiError::not_found("webhook"))
        }
    }
}

/// The URL the sender called, as Twilio and Square sign it: the capture URL, the path, then the query.
pub fn signed_url(capture_base: &str, id: WebhookId, path: &str, query: &str) -> String {
    if query.is_empty() {
        format!("{capture_base}/webhook/{id}{path}")
    } else {
        format!("{capture_base}/webhook/{id}{path}?{query}")
    }
}

/// The 401 an `enforce` endpoint answers (after storing) and a `reject` endpoint answers (storing nothing) when the
/// signature is invalid, missing or a duplicate.
fn refuses(endpoint: &Endpoint, signature: &CaptureSignature) -> Option<ApiError> {
    let enforced = endpoint.verification.as_ref().is_some_and(|v| v.mode.refuses());
    let signature = &signature.answer;
    let refused = matches!(signature.verdict, Verdict::Invalid | Verdict::Missing | Verdict::Duplicate);
    (enforced && refused).then(|| {
        let reason = signature.reason.clone().unwrap_or_else(|| format!("signature {}", signature.verdict.as_str()));
        ApiError::new(ErrorCode::SignatureInvalid, reason)
    })
}

/// The answer to a body over the endpoint's `limit`.
fn too_large(limit: usize) -> ApiError {
    ApiError::new(ErrorCode::PayloadTooLarge, format!("the body is larger than this endpoint's limit of {limit} bytes"))
}

/// Reads the body within the endpoint's limit (a declared length over it is refused before reading), holding room
/// for it in the writer's byte budget, counted against the endpoint's organization's share: a declared length is
/// reserved before reading, a chunked body once it grows past a small one's size (then the endpoint's limit). The
/// room goes with the capture to the writer.
async fn read_body(
    writer: &CaptureWriter,
    org_id: OrgId,
    headers: &HeaderMap,
    body: axum::body::Body,
    limit: usize,
) -> ApiResult<(bytes::Bytes, Reservation)> {
    let too_large = || too_large(limit);
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let mut room = match writer.reserve_for(org_id, declared.unwrap_or(0)) {
        Ok(room) => room,
        Err(full) => return Err(discard(body, limit, full).await),
    };
    let mut reserved_limit = declared.is_some();
    let grown = |size: usize| {
        if !reserved_limit && size > SMALL_WRITE {
            room = writer.reserve_for(org_id, limit)?;
            reserved_limit = true;
        }
        Ok(())
    };
    let body = read_within(body, limit, too_large, grown).await?;
    Ok((body, room))
}

/// A request as it arrived, before it becomes a record.
struct Captured<'a> {
    parts: &'a axum::http::request::Parts,
    path: &'a str,
    headers: &'a [(String, String)],
    body: bytes::Bytes,
    peer: SocketAddr,
    received_at: chrono::DateTime<chrono::Utc>,
}

impl Captured<'_> {
    fn record(self, endpoint: &Endpoint, signature: CaptureSignature) -> ApiResult<CaptureRecord> {
        let query_string = self.parts.uri.query().unwrap_or_default().to_owned();
        let query = query_map(&query_string);
        let content_type = self.parts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
        Ok(CaptureRecord {
            org_id: endpoint.org_id,
            target: endpoint.target,
            method: self.parts.method.as_str().to_owned(),
            path: self.path.to_owned(),
            query_json: to_json_string(&query)?,
            query_string,
            headers_json: to_json_string(self.headers)?,
            content_type: content_type.map(str::to_owned),
            body_sha256: Sha256::digest(&self.body).to_vec(),
            body_utf8: std::str::from_utf8(&self.body).is_ok(),
            body: self.body,
            staged: None,
            source_ip: self.peer.ip().to_string(),
            received_at: self.received_at,
            signature,
            handshake: None,
            hand: false,
        })
    }
}

/// A query string's decoded view, `{name: [values]}`. It cannot hold U+0000 (PostgreSQL refuses it): it reads
/// U+FFFD there, while `query_string` keeps the exact bytes.
pub fn query_map(query_string: &str) -> BTreeMap<String, Vec<String>> {
    let mut query: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let text =
        |s: std::borrow::Cow<'_, str>| if s.contains('\0') { s.replace('\0', "\u{FFFD}") } else { s.into_owned() };
    for (name, value) in form_urlencoded::parse(query_string.as_bytes()) {
        query.entry(text(name)).or_default().push(text(value));
    }
    query
}
