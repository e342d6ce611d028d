//! Who a runner is: an organization's key holding `runner:complete`, or the server's own embedded runner with a
//! per-process key that serves every organization; and the check that a runner id belongs to the caller.

use crate::auth::{Caller, scope};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use hookflow_shared::wire::header;
use hookflow_shared::{OrgId, RunnerId, token};

/// A runner's credentials: an organization's key, or the embedded runner's (`org_id: None`, every organization).
#[derive(Debug, Clone, Copy)]
pub struct RunnerCaller {
    pub org_id: Option<OrgId>,
}

impl FromRequestParts<AppState> for RunnerCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(expected) = &state.settings.embedded_runner_key_hash
            && let Some(key) = parts.headers.get(header::API_KEY).and_then(|v| v.to_str().ok())
            && token::hash(key.trim()) == *expected
        {
            // The embedded runner's connections are the server's own: one credential, the nil id.
            crate::http::listener::prove(&parts.extensions, uuid::Uuid::nil());
            return Ok(Self { org_id: None });
        }
        // Boxed: the key's lookup would otherwise size every waiting long poll's future (see `claim`).
        let caller = Box::pin(Caller::<scope::RunnerComplete>::from_request_parts(parts, state)).await?;
        Ok(Self { org_id: Some(caller.org_id) })
    }
}

/// A runner's labels, and whether they were read from its row just now or remembered (`crate::queue::seen`).
#[derive(Debug)]
pub struct Touched {
    pub labels: Vec<String>,
    pub remembered: bool,
}

/// Checks a runner id against the caller and marks the runner seen; returns its labels. Another organization's
/// runner is 404. A runner this server saw within the last second is not read again: its claims check that it
/// still exists, and a poll that finds no work reads its row before it waits ([`read_runner`]).
pub async fn touch_runner(app: &AppState, caller: RunnerCaller, runner_id: RunnerId) -> ApiResult<Touched> {
    if let Some(labels) = app.seen_runners.labels(caller.org_id, runner_id) {
        return Ok(Touched { labels, remembered: true });
    }
    let labels = read_runner(app, caller, runner_id).await?;
    Ok(Touched { labels, remembered: false })
}

/// Reads (and marks seen) the runner's row: its labels, or 404 when the caller has no such runner.
pub async fn read_runner(app: &AppState, caller: RunnerCaller, runner_id: RunnerId) -> ApiResult<Vec<String>> {
    // The row is written at most once a second, so many pollers of one runner do not queue on its lock; like a
    // heartbeat, the write does not wait for its WAL flush (`queue::heartbeat` says why that is safe).
    let labels: Option<Vec<String>> = sqlx::query_scalar(
        "WITH runner AS (
             SELECT id, labels, last_seen_at FROM runners WHERE id = $1 AND organization_id IS NOT DISTINCT FROM $2),
         seen AS (
             UPDATE runners r SET last_seen_at = now()
             FROM runner, (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed
             WHERE r.id = runner.id AND runner.last_seen_at < now() - interval '1 second')
         SELECT labels FROM runner",
    )
    .bind(runner_id)
    .bind(caller.org_id)
    .fetch_optional(&app.pool)
    .await?;
    let labels = labels.ok_or_else(|| ApiError::not_found("runner"))?;
    app.seen_runners.saw(caller.org_id, runner_id, labels.clone());
    Ok(labels)
}
