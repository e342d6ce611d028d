//! Deliveries made by installed runners (issue #49): a destination with `runner_labels` is delivered from the
//! network of a runner of its organization carrying all those labels. `POST /runner/deliveries/next` long-polls
//! (a check a second) and claims due deliveries as the server's sender does (leased; matched; signed here, so the
//! secret never leaves the server); a runner holds at most `DELIVERY_POLLS_PER_RUNNER` polls open on one server and
//! an organization's runners `DELIVERY_POLLS_PER_ORGANIZATION` (`state`), past which a poll is refused 429; `POST /runner/deliveries/{delivery_id}/result` records the attempt with the
//! runner's id, given the lease the delivery was handed out with (a result of another claim is refused). The server never connects to such a URL.

use crate::api::runner_protocol::caller::{RunnerCaller, touch_runner};
use crate::api::webhooks::destinations::attempts::prepare;
use crate::api::webhooks::destinations::claim::{Claimed, Limits, Sender, claim};
use crate::api::webhooks::destinations::recording::{Recording, record};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath};
use crate::outbound::signed::Attempted;
use crate::slots::Slot;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use hookflow_shared::api::destinations::{DeliveryResult, NextDeliveries, RunnerDeliveries, RunnerDelivery};
use hookflow_shared::wire::runner_route;
use hookflow_shared::{DeliveryId, ErrorCode, OrgId, RunnerId};
use std::time::Duration;
use utoipa_axum::{router::OpenApiRouter, routes};

/// Deliveries one poll hands out at most.
const PER_POLL: i64 = 16;
/// Capture body bytes one poll hands out at most (the first delivery whatever its size).
const POLL_BYTES: i64 = 8 * 1024 * 1024;
const DEFAULT_WAIT_S: u64 = 20;
const MAX_WAIT_S: u64 = 60;
/// The `Retry-After` of a poll past its runner's or organization's ceiling.
const POLL_RETRY_AFTER_S: u64 = 2;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(next_deliveries)).routes(routes!(delivery_result))
}

/// Long poll for deliveries this runner may make: 200 with them, or 204 when none came within `wait_s`.
#[utoipa::path(post, operation_id = "claim_deliveries", path = runner_route::NEXT_DELIVERIES,
    request_body = NextDeliveries,
    responses((status = 200, body = RunnerDeliveries), (status = 204, description = "None within wait_s"),
        (status = 404, description = "No such runner in the organization"),
        (status = 429, description = "The runner, or its organization's runners, hold their ceiling of polls")))]
async fn next_deliveries(
    State(app): State<AppState>,
    caller: RunnerCaller,
    ApiJson(body): ApiJson<NextDeliveries>,
) -> ApiResult<Response> {
    let wait_s = body.wait_s.unwrap_or(DEFAULT_WAIT_S);
    if wait_s > MAX_WAIT_S {
        return Err(ApiError::invalid(format!("invalid field `wait_s`: at most {MAX_WAIT_S}")));
    }
    // The embedded runner is the server's own: it makes no runner deliveries.
    let Some(org_id) = caller.org_id else { return Ok(StatusCode::NO_CONTENT.into_response()) };
    let labels = touch_runner(&app, caller, body.runner_id).await?.labels;
    // Held until the poll answers (or its client goes away, dropping this future).
    let _slots = take_poll_slots(&app, org_id, body.runner_id)?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_s);
    loop {
        // A rate-limited destination's delivery is handed out when its slot comes (one a poll), so the runner's
        // attempts keep the limit too.
        let limits = Limits {
            rows: PER_POLL,
            per_org: PER_POLL,
            bytes: POLL_BYTES,
            busy: &[],
            held: &[],
            per_limited_destination: 1,
        };
        let claimed = claim(&app.pool, Sender::Runner { org_id, labels: &labels }, limits).await?;
        let mut deliveries = Vec::new();
        let mut rows = claimed.rows;
        rows.sort_by_key(|r| r.slot_in().unwrap_or_default());
        for row in rows {
            if let (Some(wait), Some(claimed_at)) = (row.slot_in(), row.claimed_at) {
                tokio::time::sleep_until(claimed_at + wait).await;
            }
            if let Some(delivery) = to_send(&app, row).await? {
                deliveries.push(delivery);
            }
        }
        if !deliveries.is_empty() {
            return Ok((StatusCode::OK, Json(RunnerDeliveries { deliveries })).into_response());
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        tokio::select! {
            () = app.delivery_wakes.notified() => {}
            () = tokio::time::sleep(Duration::from_secs(1).min(deadline - now)) => {}
            () = app.shutdown.cancelled() => return Ok(StatusCode::NO_CONTENT.into_response()),
        }
    }
}

/// A place for one more waiting poll of `runner` (of `org`) on this server, or 429 `rate_limited` with `Retry-After`
/// when the runner, or its organization's runners together, hold their ceiling of polls already.
fn take_poll_slots(app: &AppState, org: OrgId, runner: RunnerId) -> ApiResult<(Slot<RunnerId>, Slot<OrgId>)> {
    let polls = &app.delivery_polls;
    let refused = |message: String| {
        let mut error = ApiError::new(ErrorCode::RateLimited, message);
        error.retry_after_s = Some(POLL_RETRY_AFTER_S);
        error
    };
    let Some(runner_slot) = polls.per_runner.take(runner) else {
        let n = polls.per_runner.per_key();
        return Err(refused(format!("this runner holds {n} delivery polls open already; poll one at a time")));
    };
    let Some(org_slot) = polls.per_organization.take(org) else {
        let n = polls.per_organization.per_key();
        return Err(refused(format!("this organization's runners hold {n} delivery polls open already")));
    };
    Ok((runner_slot, org_slot))
}

/// A claimed delivery as the runner sends it; `None` when there is nothing to send (or no URL: recorded failed).
async fn to_send(app: &AppState, mut row: Claimed) -> ApiResult<Option<RunnerDelivery>> {
    let Some(prepared) = prepare(app, &mut row).await? else { return Ok(None) };
    let Some(url) = prepared.url else {
        let failed = Attempted {
            status_code: None,
            error: Some("the destination URL and the capture's path make no URL".to_owned()),
            duration: Duration::ZERO,
        };
        record(&app.pool, &Recording::of(&row, None), &failed).await?;
        return Ok(None);
    };
    Ok(Some(RunnerDelivery {
        delivery_id: row.id,
        method: prepared.method,
        url: url.to_string(),
        headers: prepared.headers,
        body: base64::engine::general_purpose::STANDARD.encode(&prepared.body),
        timeout_ms: u32::try_from(prepared.timeout.as_millis()).unwrap_or(u32::MAX),
        lease: row.lease.unwrap_or_default(),
    }))
}

#[derive(Debug, sqlx::FromRow)]
struct Pending {
    destination_id: hookflow_shared::DestinationId,
    attempts: i32,
    round_start: i32,
    retry_schedule_s: Vec<i32>,
}

/// Record what a runner's attempt of a delivery came to.
#[utoipa::path(post, operation_id = "report_delivery", path = runner_route::DELIVERY_RESULT,
    params(("delivery_id" = Uuid, Path)), request_body = DeliveryResult,
    responses((status = 204), (status = 404, description = "No such pending delivery for this runner")))]
async fn delivery_result(
    State(app): State<AppState>,
    caller: RunnerCaller,
    ApiPath(id): ApiPath<DeliveryId>,
    ApiJson(body): ApiJson<DeliveryResult>,
) -> ApiResult<StatusCode> {
    let Some(org_id) = caller.org_id else { return Err(ApiError::not_found("delivery")) };
    let labels = touch_runner(&app, caller, body.runner_id).await?.labels;
    // A pending delivery of the organization whose destination this runner may deliver.
    let pending: Option<Pending> = sqlx::query_as(
        "SELECT d.destination_id, d.attempts, d.round_start, t.retry_schedule_s
         FROM deliveries d JOIN destinations t ON t.id = d.destination_id
         WHERE d.id = $1 AND d.organization_id = $2 AND d.status = 'pending' AND d.lease = $4
           AND cardinality(t.runner_labels) > 0 AND t.runner_labels <@ $3::text[]",
    )
    .bind(id)
    .bind(org_id)
    .bind(&labels)
    .bind(body.lease)
    .fetch_optional(&app.pool)
    .await?;
    let Some(pending) = pending else { return Err(ApiError::not_found("delivery")) };
    let error = body.error.map(|e| e.chars().take(2000).collect::<String>());
    let attempted = Attempted {
        status_code: body.status_code,
        error: match (body.status_code, error) {
            (Some(s), None) if !(200..300).contains(&s) => Some(format!("answered {s}")),
            (_, error) => error,
        },
        duration: Duration::from_millis(body.duration_ms.min(3_600_000)),
    };
    let recording = Recording {
        id,
        destination_id: pending.destination_id,
        attempts: pending.attempts,
        round_start: pending.round_start,
        retry_schedule_s: pending.retry_schedule_s,
        runner_id: Some(body.runner_id),
        lease: Some(body.lease),
    };
    record(&app.pool, &recording, &attempted).await?;
    Ok(StatusCode::NO_CONTENT)
}
