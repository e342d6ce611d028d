//! The runner protocol: registration and heartbeats (`registry`), long-poll claims from the PostgreSQL queue
//! (`claim`), node results and completion under job tokens (`report`), and the lease rescuer (`rescue`).
//! Runners authenticate with an API key holding `runner:complete`, or, for the server's own embedded runner,
//! with a per-process key that serves every organization.

pub mod claim;
pub mod registry;
pub mod report;
pub mod rescue;

use crate::auth::{Caller, scope};
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{DefaultBodyLimit, FromRequestParts};
use axum::http::request::Parts;
use hookflow_shared::token;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use utoipa_axum::router::OpenApiRouter;
use uuid::Uuid;

/// NOTIFY channel announcing queued executions (payload: the organization id).
pub const QUEUE_CHANNEL: &str = "hookflow_queue";

/// Node reports may carry many results with bodies of up to 64 KiB each.
const REPORT_BODY_LIMIT: usize = 16 * 1024 * 1024;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(registry::routes())
        .merge(claim::routes())
        .merge(report::routes().layer(DefaultBodyLimit::max(REPORT_BODY_LIMIT)))
}

/// Wakes waiting long polls of this process, fed by NOTIFY (payload: the organization) and by local launches.
/// A wake rouses one waiter of that organization (and one of the runners serving every organization), not all
/// of them; a waiter that claims something passes the wake on, so a burst of work spreads over every waiter
/// while a single job costs a single claim attempt. Waiters also re-check every second.
#[derive(Debug, Default)]
pub struct QueueSignal {
    by_org: Mutex<HashMap<Uuid, Arc<Notify>>>,
    every_org: Arc<Notify>,
}

impl QueueSignal {
    /// The signal a runner of `org` (or, with `None`, a runner of every organization) waits on.
    pub fn for_runner(&self, org: Option<Uuid>) -> Arc<Notify> {
        match org {
            None => self.every_org.clone(),
            Some(org) => self.by_org.lock().map(|mut m| m.entry(org).or_default().clone()).unwrap_or_default(),
        }
    }

    /// Work was queued for `org`.
    pub fn wake(&self, org: Uuid) {
        if let Ok(map) = self.by_org.lock()
            && let Some(notify) = map.get(&org)
        {
            notify.notify_one();
        }
        self.every_org.notify_one();
    }

    /// Anything may have been queued (the LISTEN connection was lost): every waiter re-checks.
    pub fn wake_all(&self) {
        if let Ok(map) = self.by_org.lock() {
            map.values().for_each(|n| n.notify_waiters());
        }
        self.every_org.notify_waiters();
    }
}

/// A runner's credentials: an organization's key, or the embedded runner's (`org_id: None`, every organization).
#[derive(Debug, Clone, Copy)]
pub struct RunnerCaller {
    pub org_id: Option<Uuid>,
}

impl FromRequestParts<AppState> for RunnerCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(expected) = &state.settings.embedded_runner_key_hash
            && let Some(key) = parts.headers.get(crate::auth::API_KEY_HEADER).and_then(|v| v.to_str().ok())
            && token::hash(key.trim()) == *expected
        {
            return Ok(Self { org_id: None });
        }
        let caller = Caller::<scope::RunnerComplete>::from_request_parts(parts, state).await?;
        Ok(Self { org_id: Some(caller.org_id) })
    }
}

/// Checks a runner id against the caller and marks the runner seen; returns its labels. Another organization's
/// runner is 404.
pub async fn touch_runner(app: &AppState, caller: RunnerCaller, runner_id: Uuid) -> Result<Vec<String>, ApiError> {
    // The row is written at most once a second, so many pollers of one runner do not queue on its lock.
    let labels: Option<Vec<String>> = sqlx::query_scalar(
        "WITH runner AS (
             SELECT id, labels, last_seen_at FROM runners WHERE id = $1 AND organization_id IS NOT DISTINCT FROM $2),
         seen AS (
             UPDATE runners r SET last_seen_at = now() FROM runner
             WHERE r.id = runner.id AND runner.last_seen_at < now() - interval '1 second')
         SELECT labels FROM runner",
    )
    .bind(runner_id)
    .bind(caller.org_id)
    .fetch_optional(&app.pool)
    .await?;
    labels.ok_or_else(|| ApiError::not_found("runner"))
}

/// Labels: at most 20, each 1 to 64 characters without surrounding spaces.
pub fn check_labels(field: &str, labels: &[String]) -> Result<(), ApiError> {
    if labels.len() > 20 || labels.iter().any(|l| l.trim().is_empty() || l.len() > 64 || l.trim() != l) {
        return Err(ApiError::invalid(format!("invalid field `{field}`: at most 20 labels of 1 to 64 characters")));
    }
    Ok(())
}
