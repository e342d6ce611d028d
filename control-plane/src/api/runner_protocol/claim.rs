//! `POST /runner/jobs/next`: the long poll. A waiting poll is woken by NOTIFY (or a local launch) and re-checks
//! every `queue_recheck` (10 s) regardless; each try is one claim statement (`crate::queue::claim`) taking up to
//! `max_jobs` jobs when a runner with free slots asks for several.

use crate::api::runner_protocol::caller::{RunnerCaller, read_runner, touch_runner};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::queue::claim::{Claimer, Target, claim_many};
use crate::queue::issued::IssuedJob;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hookflow_shared::RunnerId;
use hookflow_shared::api::runners::{Claimed, DEFAULT_WAIT_S, Job, JobBatch, MAX_JOBS_PER_POLL, MAX_WAIT_S, NextJob};
use hookflow_shared::wire::runner_route;
use std::time::Duration;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(next_job))
}

/// Claims up to `max_jobs` jobs for a runner on one connection, each statement committed on its own: one
/// statement for a runner of one organization; for a runner of every organization (one execution per organization
/// and statement), more while they find some.
pub async fn try_claim(
    app: &AppState,
    caller: RunnerCaller,
    runner_id: RunnerId,
    labels: &[String],
    max_jobs: u32,
) -> ApiResult<Vec<Job>> {
    let target = match caller.org_id {
        Some(org_id) => Target::Organization { org_id, labels },
        None => Target::AnyOrganization { labels, org_slots: app.settings.embedded_runner.org_slots },
    };
    let mut conn = app.pool.acquire().await?;
    let claimer = Claimer::Runner { id: runner_id, embedded: caller.org_id.is_none() };
    let mut jobs = Vec::new();
    loop {
        let wanted = max_jobs as usize - jobs.len();
        let claimed = claim_many(&mut conn, &app.settings.claims(), claimer, target, wanted).await?;
        for job in &claimed {
            let issued = IssuedJob { job_id: job.job_id, execution_id: job.execution_id, attempt: job.attempt };
            app.issued_jobs.record(&job.job_token, issued);
        }
        let found = claimed.len();
        jobs.extend(claimed);
        if found == 0 || found == wanted || caller.org_id.is_some() {
            return Ok(jobs);
        }
    }
}

/// Long poll for the next job: 200 with the claim (with `max_jobs`: `{jobs: [...]}`, at least one), or 204 when
/// none came within `wait_s`.
#[utoipa::path(post, operation_id = "claim_job", path = runner_route::NEXT_JOB, request_body = NextJob,
    responses((status = 200, body = Claimed, description = "One job, or `{jobs}` when the poll gave max_jobs"),
        (status = 204, description = "No job within wait_s"),
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
    if body.max_jobs.is_some_and(|n| n == 0 || n > MAX_JOBS_PER_POLL) {
        return Err(ApiError::invalid(format!("invalid field `max_jobs`: 1 to {MAX_JOBS_PER_POLL}")));
    }
    // This future lives as long as the poll waits, thousands at once: the statements' futures (kilobytes each)
    // are boxed, so they take memory only while they run, not for the whole wait. It holds nothing of the request
    // itself (no `HeaderMap`, `Request` or `OriginalUri`): those are slices of the connection's read buffer, which
    // would then stay alive beside the next one (`http::envelope`).
    let touched = Box::pin(touch_runner(&app, caller, body.runner_id)).await?;
    let (labels, mut remembered) = (touched.labels, touched.remembered);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_s);
    let wake = app.queue.for_runner(caller.org_id);
    if wait_s > 0 {
        // Before the first claim attempt: a launch on another replica that this attempt cannot see yet notifies.
        Box::pin(crate::queue::watch::record_waiting(&app.pool, &app.queue, app.replica, caller.org_id)).await;
    }
    loop {
        let mut jobs = Box::pin(try_claim(&app, caller, body.runner_id, &labels, body.max_jobs.unwrap_or(1))).await?;
        if !jobs.is_empty() {
            // More may be queued: pass the wake on to another waiter.
            wake.notify_one();
            let answer = match (body.max_jobs, jobs.pop()) {
                (None, Some(job)) => Claimed::One(Box::new(job)),
                (_, last) => Claimed::Batch(JobBatch { jobs: jobs.into_iter().chain(last).collect() }),
            };
            return Ok((StatusCode::OK, Json(answer)).into_response());
        }
        if remembered {
            // No work, and the runner's row was not read: a removed runner is told so (404) before it waits.
            Box::pin(read_runner(&app, caller, body.runner_id)).await?;
            remembered = false;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        let pause = app.settings.queue_recheck.min(deadline - now);
        tokio::select! {
            () = wake.notified() => {}
            () = tokio::time::sleep(pause) => {}
            () = app.shutdown.cancelled() => return Ok(StatusCode::NO_CONTENT.into_response()),
        }
    }
}
