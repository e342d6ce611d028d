//! Reports under a job token: node results and completion. The token is read from the `Authorization` header
//! and checked (`crate::queue::report::look_up`) before a byte of the body is read; a token this server did not
//! issue is looked up only within its client address's budget of failed lookups (`auth::failures`), and each token
//! makes at most 50 requests a second (`http::limits`), whichever job route it calls.

use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiPath, parse_json};
use crate::queue::finish::Ending;
use crate::queue::report::{JobContext, JobToken, keep_alive, look_up, record, stale_attempt, stored, unknown_node};
use crate::state::AppState;
use axum::Json;
use axum::body::Body;
use axum::http::request::Parts;
use hookflow_shared::api::executions::Execution;
use hookflow_shared::api::runners::{Complete, NodeReport, ReportReply};
use hookflow_shared::token::{self, TokenKind};
use hookflow_shared::wire::runner_route;
use hookflow_shared::{ErrorCode, JobId};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(report_nodes)).routes(routes!(complete_job))
}

/// Node reports (and completions, which may carry a runner's last results) may carry many results with bodies of
/// up to 64 KiB each.
const REPORT_BODY_LIMIT: usize = 16 * 1024 * 1024;

/// Reads a body within `limit` (413 beyond), once the caller is known.
pub(super) async fn read_body(body: Body, limit: usize) -> ApiResult<bytes::Bytes> {
    let too_large = || ApiError::new(ErrorCode::PayloadTooLarge, format!("the body is larger than {limit} bytes"));
    crate::http::body::read_within(body, limit, too_large, |_| Ok(())).await
}

/// What a report is made under: the job of the path and the job token of `Authorization: Bearer hfj_...`, checked
/// for its form (a typo never reaches the database) before the body is touched.
pub(super) struct JobCall {
    pub(super) app: AppState,
    job_id: JobId,
    token: String,
    address: Option<std::net::IpAddr>,
    /// Given once the token is found valid: the connection then leaves the connection caps.
    proof: Option<crate::http::listener::Proof>,
}

impl JobCall {
    /// The token passed: the connection is proven, with the job as its credential.
    pub(super) fn proven(&self) {
        if let Some(proof) = &self.proof {
            proof.prove(self.job_id.into());
        }
    }

    /// The job the token names, from the database; refusals count against the client's address, and a token no
    /// job has is remembered as unknown.
    pub(super) async fn authorize(&self, conn: &mut sqlx::PgConnection, lock: bool) -> ApiResult<JobContext> {
        match look_up(conn, &self.token, self.job_id, lock).await? {
            JobToken::Unknown => {
                self.app.auth.credential_failures.not_found(self.address, token::hash(&self.token));
                Err(ApiError::unauthorized())
            }
            JobToken::Known(Err(refused)) if refused.code == ErrorCode::Unauthorized => {
                self.app.auth.credential_failures.failed(self.address);
                Err(refused)
            }
            JobToken::Known(found) => found,
        }
    }
}

impl axum::extract::FromRequestParts<AppState> for JobCall {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, Self::Rejection> {
        let value = parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let token = value.and_then(|v| v.strip_prefix("Bearer ")).map(str::trim).ok_or_else(ApiError::unauthorized)?;
        TokenKind::Job.check(token).map_err(|_| ApiError::unauthorized())?;
        let token = token.to_owned();
        let ApiPath(job_id) = ApiPath::<JobId>::from_request_parts(parts, app).await?;
        let address = crate::auth::client_address(&app.auth, parts);
        let hash = token::hash(&token);
        // A token this server issued for this job is not a stranger's guess: it is never held back.
        if !app.issued_jobs.knows(&token, job_id) {
            app.auth.credential_failures.before_lookup(address, &hash)?;
        }
        // Each token has its own rate (a stranger's guesses never spend a real token's), before any lookup.
        app.allowances.job_request(&hash)?;
        let proof = crate::http::listener::Proof::of(&parts.extensions);
        Ok(JobCall { app: app.clone(), job_id, token, address, proof })
    }
}

/// A report's body, read straight into its types (no `Value` tree first, no path tracking: together they took two
/// fifths of the server's CPU while a 1,000-node run reported; the untagged enum still buffers the body in serde's
/// content). A body that fails is read again as every body is (`extract::parse_json`), which also takes integral
/// floats as integers and names the field at fault. What the quick way accepts, the strict way accepts too (the
/// report is an untagged enum, so the strict way also reads it from buffered content, where an array may stand for
/// a struct), with two differences in what is stored: an integral float in a free-form value (an extracted value,
/// an assertion's expected or actual value) stays as the runner wrote it (`1.0`) where the strict way made it `1`;
/// and a crafted body that is both one result and `{"results": [..]}` whose list only the strict way reads is taken
/// as the one result. Either way it is the sender's own run, within its token's job.
fn parse_report(bytes: &[u8]) -> ApiResult<NodeReport> {
    serde_json::from_slice(bytes).or_else(|_| parse_json(bytes))
}

/// Report one node result, or several (`{"results": [..]}`); repeats of a reported node are ignored. An empty
/// list only extends the lease (the keep-alive of callers that send no runner heartbeats).
#[utoipa::path(post, operation_id = "report_job_nodes", path = runner_route::JOB_NODES, params(("job_id" = Uuid, Path)),
    request_body = NodeReport,
    responses((status = 200, body = ReportReply), (status = 400), (status = 409)),
    security(("job_token" = [])))]
async fn report_nodes(call: JobCall, body: Body) -> ApiResult<Json<ReportReply>> {
    let app = &call.app;
    let lease_s = app.settings.lease.as_secs_f64();
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let job = call.authorize(&mut tx, true).await?;
    call.proven();
    let results = parse_report(&read_body(body, REPORT_BODY_LIMIT).await?)?.into_results();
    let accepted = if results.is_empty() {
        keep_alive(&mut tx, &job, lease_s).await?;
        0
    } else {
        record(&mut tx, &job, results, lease_s).await?
    };
    tx.commit().await?;
    Ok(Json(ReportReply { accepted, cancel: job.cancel_requested }))
}

/// Complete the job; the token is dead afterwards. Node results it carries (`results`) are stored first, as a report
/// would store them, in the same statement.
#[utoipa::path(post, path = runner_route::JOB_COMPLETE, params(("job_id" = Uuid, Path)),
    request_body = Complete,
    responses((status = 200, body = Execution), (status = 400), (status = 409)),
    security(("job_token" = [])))]
async fn complete_job(call: JobCall, body: Body) -> ApiResult<Json<Execution>> {
    let (app, job_id) = (&call.app, call.job_id);
    // A token this server handed out for this job needs no database read; any other is checked there.
    let (execution_id, attempt) = match app.issued_jobs.take(&call.token, job_id) {
        Some(issued) => (issued.execution_id, issued.attempt),
        None => {
            let job = call.authorize(&mut *app.pool.acquire().await?, false).await?;
            (job.execution_id, job.attempt)
        }
    };
    call.proven();
    let mut end: Complete = parse_json(&read_body(body, REPORT_BODY_LIMIT).await?)?;
    end.error = end.error.map(|e| e.chars().take(2000).collect());
    let results = stored(std::mem::take(&mut end.results), attempt)?;
    let nodes: Vec<String> = results.iter().map(|r| r.node_id.clone()).collect();
    let ending = Ending { execution_id, attempt, job_id: Some(job_id), end, results };
    // The statement re-checks that the job still holds the execution: when it no longer does (a rescue, or a
    // completion through another server), the token's state in the database gives the answer (401 or 409). A job
    // still current was not ended because a result names a node its flow does not have (400, as a report).
    match app.writers.completions.submit(ending).await? {
        Some(execution) => Ok(Json(execution)),
        None => {
            let job = call.authorize(&mut *app.pool.acquire().await?, !nodes.is_empty()).await?;
            match nodes.iter().find(|node| !job.node_ids.contains(node)) {
                Some(unknown) => Err(unknown_node(unknown)),
                None => Err(stale_attempt()),
            }
        }
    }
}
