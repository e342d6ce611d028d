//! `POST /runner/jobs/next`: the long poll. A waiting poll is woken by NOTIFY (or a local launch) and re-checks
//! every second regardless; each try is one claim statement (`crate::queue::claim`).

use crate::http::error::{ApiError, ApiResult};
use crate::http::extract::ApiJson;
use crate::queue::claim::{Claimer, Target, claim};
use crate::runner_protocol::caller::{RunnerCaller, touch_runner};
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hookflow_shared::api::runners::{DEFAULT_WAIT_S, Job, MAX_WAIT_S, NextJob};
use hookflow_shared::wire::runner_route;
use std::time::Duration;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(next_job))
}

/// How often a waiting poll re-checks the queue without a wake-up.
const RECHECK: Duration = Duration::from_secs(1);

/// Tries once to claim a job for a runner; one statement, committed on its own.
pub async fn try_claim(
    app: &AppState,
    caller: RunnerCaller,
    runner_id: Uuid,
    labels: &[String],
) -> ApiResult<Option<Job>> {
    let target = match caller.org_id {
        Some(org_id) => Target::Organization { org_id, labels },
        None => Target::AnyOrganization { labels },
    };
    let mut conn = app.pool.acquire().await?;
    let claimer = Claimer::Runner { id: runner_id, embedded: caller.org_id.is_none() };
    claim(&mut conn, &app.settings, claimer, target).await
}

/// Long poll for the next job: 200 with the claim, or 204 when none came within `wait_s`.
#[utoipa::path(post, path = runner_route::NEXT_JOB, tag = "Runner", request_body = NextJob,
    responses((status = 200, body = Job), (status = 204, description = "No job within wait_s"),
        (status = 404, description = "No such runner in the organization")))]
async fn next_job(
    State(app): State<AppState>,
    caller: RunnerCaller,
    ApiJson(body): ApiJson<NextJob>,
) -> ApiResult<Response> {
    let wait_s = body.wait_s.unwrap_or(DEFAULT_WAIT_S);
    if wait_s > MAX_WAIT_S {
        return Err(ApiError::invalid(format!("invalid field `wait_s`: at most {MAX_WAIT_S}")));
    }
    let labels = touch_runner(&app, caller, body.runner_id).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_s);
    let wake = app.queue.for_runner(caller.org_id);
    loop {
        if let Some(job) = try_claim(&app, caller, body.runner_id, &labels).await? {
            // More may be queued: pass the wake on to another waiter.
            wake.notify_one();
            return Ok((StatusCode::OK, Json(job)).into_response());
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        let pause = RECHECK.min(deadline - now);
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(pause) => {}
            () = app.shutdown.cancelled() => return Ok(StatusCode::NO_CONTENT.into_response()),
        }
    }
}
