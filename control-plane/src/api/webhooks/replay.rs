//! Replay: resend a captured request (method, path, query, headers, raw body) to a target URL and report the
//! target's answer, through the guarded client under the organization's network policy.

use crate::api::context::Ctx;
use crate::api::webhooks::captures::fetch_capture;
use crate::auth::scope;
use crate::capture::row::encode_body;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, Id};
use crate::outbound;
use axum::Json;
use hookflow_shared::api::webhooks::{BodyEncoding, ReplayRequest, ReplayResult};
use hookflow_shared::{CaptureId, WebhookId};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(30);
/// Most of the target's answer kept in the result.
const MAX_ANSWER: usize = 1024 * 1024;
/// Headers that describe one hop, not the request: recomputed by the client.
const HOP_HEADERS: [&str; 8] =
    ["host", "content-length", "connection", "transfer-encoding", "keep-alive", "upgrade", "te", "proxy-connection"];

/// Resend a captured request to `target_url` (its path and query are appended).
#[utoipa::path(post, operation_id = "replay_webhook_request", path = "/webhooks/{id}/requests/{request_id}/replay",
    params(Id, ("request_id" = Uuid, Path)), request_body = ReplayRequest,
    responses((status = 200, body = ReplayResult)))]
pub async fn replay_request(
    Ctx { app, caller }: Ctx<scope::WebhooksWrite>,
    ApiPath((id, request_id)): ApiPath<(WebhookId, CaptureId)>,
    ApiJson(body): ApiJson<ReplayRequest>,
) -> ApiResult<Json<ReplayResult>> {
    let capture = fetch_capture(&app, caller.org_id, id, request_id).await?;
    let target = reqwest::Url::parse(&body.target_url)
        .map_err(|e| ApiError::invalid(format!("`target_url` is not a URL: {e}")))?;
    let mut url = format!("{}{}", target.as_str().trim_end_matches('/'), capture.path);
    if !capture.query_string.is_empty() {
        url.push(if target.query().is_some() { '&' } else { '?' });
        url.push_str(&capture.query_string);
    }
    let url = reqwest::Url::parse(&url).map_err(|e| ApiError::invalid(format!("the replay URL is not valid: {e}")))?;
    let policy = outbound::policy_for(&app.pool, app.settings.allow_private_targets, caller.org_id).await?;
    let client = outbound::client_for(&url, policy, TIMEOUT, "target_url")?;
    let method = reqwest::Method::from_bytes(capture.method.as_bytes()).map_err(ApiError::internal_because)?;
    let mut request = client.request(method, url);
    for (name, value) in
        capture.headers.0.iter().filter(|(n, _)| !HOP_HEADERS.contains(&n.to_ascii_lowercase().as_str()))
    {
        request = request.header(name.as_str(), value.as_str());
    }
    let started = Instant::now();
    let response =
        request.body(capture.body.unwrap_or_default()).send().await.map_err(|e| outbound::failed("target_url", &e))?;
    let status = response.status().as_u16();
    let headers = hookflow_runner::outbound::header_pairs(response.headers());
    let answer = outbound::read("target_url", response, MAX_ANSWER).await?.to_vec();
    let duration_ms = started.elapsed().as_millis() as u64;
    let encoding = if std::str::from_utf8(&answer).is_ok() { BodyEncoding::Utf8 } else { BodyEncoding::Base64 };
    Ok(Json(ReplayResult {
        status,
        headers,
        body: encode_body(answer, encoding),
        body_encoding: encoding,
        duration_ms,
    }))
}
