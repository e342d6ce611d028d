//! Deciding one launch a capture owes, in its turn's transaction under a savepoint: is the organization under its
//! launches per minute (checked first: past it nothing is matched), does the capture match the trigger's `q` and
//! `filter` (under a statement timeout of its own, [`MATCH_TIMEOUT`]: a tenant's filter over a crafted body is
//! refused, never taken for an unavailable database), how deep in a chain of triggered runs it was sent; then the
//! launch, with the capture's launch variables.

use crate::api::executions::resolve::{DEFAULT_MAX_ATTEMPTS, LaunchRequest, create_execution};
use crate::api::webhooks::search::{Cond, push_cond};
use crate::api::webhooks::triggers::conditions;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::triggers::guard::Refusal;
use crate::triggers::variables::{Captured, launch_variables, sent_depth};
use hookflow_shared::api::executions::Trigger;
use hookflow_shared::api::triggers::WebhookTrigger;
use hookflow_shared::{CaptureId, ExecutionId, FlowId, OrgId, WebhookId};
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, QueryBuilder};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long a trigger's match may run: past it the match is cancelled and the launch refused (`timeout`).
pub const MATCH_TIMEOUT: Duration = Duration::from_secs(2);
/// Bodies larger than this are read for their variables off the async workers.
const HEAVY_BODY: usize = 256 * 1024;

/// A launch a capture owes, with its trigger as the turn read it.
#[derive(Debug, sqlx::FromRow)]
pub struct Owed {
    pub capture_id: CaptureId,
    pub trigger_index: i16,
    pub organization_id: OrgId,
    pub webhook_id: WebhookId,
    /// The trigger; `None` when it was changed or removed since the capture arrived.
    pub trigger: Option<Json<serde_json::Value>>,
}

impl Owed {
    /// The trigger's flow, named in the audit entry of a refusal.
    pub fn flow_id(&self) -> Option<FlowId> {
        let flow = self.trigger.as_ref()?.0.get("flow_id")?.as_str()?;
        flow.parse::<uuid::Uuid>().ok().map(FlowId::from)
    }
}

/// What became of an owed launch.
#[derive(Debug)]
pub enum Decision {
    Launched(ExecutionId),
    /// Nothing to launch: the capture or its trigger is gone, or the capture does not match.
    Skipped,
    Refused(Refusal),
}

/// Decides one owed launch under a savepoint: what fails in it (a launch the queue refuses, a match that fails or
/// runs past [`MATCH_TIMEOUT`]) is undone and becomes a refusal; only an unavailable database fails the turn (its
/// rows stay owed).
pub async fn decide(app: &AppState, conn: &mut PgConnection, row: &Owed, so_far: i64) -> ApiResult<Decision> {
    sqlx::query("SAVEPOINT owed").execute(&mut *conn).await?;
    let decision = match attempt(app, conn, row, so_far).await {
        Ok(decision) => decision,
        Err(e) if e.is_unavailable() => return Err(e),
        Err(e) => Decision::Refused(Refusal::Launch(e.message)),
    };
    if matches!(decision, Decision::Refused(_)) {
        // A refusal leaves nothing behind (and a cancelled match left the transaction to roll back).
        sqlx::query("ROLLBACK TO SAVEPOINT owed").execute(&mut *conn).await?;
    }
    sqlx::query("RELEASE SAVEPOINT owed").execute(&mut *conn).await?;
    Ok(decision)
}

/// The capture's facts its match, depth and variables need, without the body.
#[derive(Debug, sqlx::FromRow)]
struct CaptureFacts {
    method: String,
    path: String,
    query: Json<BTreeMap<String, Vec<String>>>,
    headers: Json<Vec<(String, String)>>,
    body_utf8: bool,
    signature_verdict: String,
}

async fn attempt(app: &AppState, conn: &mut PgConnection, row: &Owed, so_far: i64) -> ApiResult<Decision> {
    let Some(Json(stored)) = &row.trigger else { return Ok(Decision::Skipped) };
    let Ok(trigger) = serde_json::from_value::<WebhookTrigger>(stored.clone()) else {
        tracing::warn!(webhook_id = %row.webhook_id, "a stored trigger cannot be read; skipped");
        return Ok(Decision::Skipped);
    };
    let settings = app.settings.triggers;
    // The limit first: an organization past it pays for no match.
    if so_far >= i64::from(settings.launches_per_minute) {
        return Ok(Decision::Refused(Refusal::Limit { per_minute: settings.launches_per_minute }));
    }
    let facts: Option<CaptureFacts> = sqlx::query_as(
        "SELECT method, path, query, headers, body_utf8, signature_verdict FROM captures
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(row.organization_id)
    .bind(row.capture_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(facts) = facts else { return Ok(Decision::Skipped) };
    let conds = conditions(&trigger, &|field| format!("triggers[{}].{field}", row.trigger_index))?;
    match matches(conn, row, &conds).await? {
        Match::Yes => {}
        Match::No => return Ok(Decision::Skipped),
        Match::TimedOut => return Ok(Decision::Refused(Refusal::Timeout { after: MATCH_TIMEOUT })),
    }
    let depth = sent_depth(&facts.headers).saturating_add(1);
    if depth > settings.max_depth {
        return Ok(Decision::Refused(Refusal::Depth { depth: depth - 1, max: settings.max_depth }));
    }
    let body: Vec<u8> = sqlx::query_scalar("SELECT body FROM captures WHERE organization_id = $1 AND id = $2")
        .bind(row.organization_id)
        .bind(row.capture_id)
        .fetch_one(&mut *conn)
        .await?;
    let captured = Captured {
        request_id: row.capture_id,
        webhook_id: row.webhook_id,
        method: facts.method,
        path: facts.path,
        headers: facts.headers.0,
        query: facts.query.0,
        body,
        body_utf8: facts.body_utf8,
        verdict: facts.signature_verdict,
    };
    let variables = variables_of(trigger.clone(), captured).await?;
    let launch = Launching { org_id: row.organization_id, trigger: &trigger, variables: &variables, depth };
    let execution = launch_flow(app, conn, launch, row).await?;
    Ok(Decision::Launched(execution))
}

/// Whether a capture meets a trigger's conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Match {
    Yes,
    No,
    /// The match ran past [`MATCH_TIMEOUT`] and was cancelled (the transaction rolls back to the row's
    /// savepoint, which also restores the statement timeout).
    TimedOut,
}

/// Whether the capture meets the trigger's conditions (none: every capture does), by the search's own SQL, under
/// [`MATCH_TIMEOUT`]: its cancellation is the row's answer, not the database's state (a lost connection still
/// fails the turn).
async fn matches(conn: &mut PgConnection, row: &Owed, conds: &[Cond]) -> ApiResult<Match> {
    if conds.is_empty() {
        return Ok(Match::Yes);
    }
    let mut b = QueryBuilder::<Postgres>::new("SELECT EXISTS (SELECT 1 FROM captures WHERE organization_id = ");
    b.push_bind(row.organization_id).push(" AND id = ").push_bind(row.capture_id);
    for cond in conds {
        push_cond(&mut b, cond);
    }
    b.push(")");
    sqlx::query("SELECT set_config('statement_timeout', $1, true)")
        .bind(format!("{}ms", MATCH_TIMEOUT.as_millis()))
        .execute(&mut *conn)
        .await?;
    match b.build_query_scalar::<bool>().fetch_one(&mut *conn).await {
        Ok(matched) => {
            sqlx::query("SET LOCAL statement_timeout TO DEFAULT").execute(&mut *conn).await?;
            Ok(if matched { Match::Yes } else { Match::No })
        }
        Err(e) if crate::error::is_statement_timeout(&e) => {
            tracing::info!(webhook_id = %row.webhook_id, request_id = %row.capture_id,
                "a trigger's match ran past its timeout; the launch is refused");
            Ok(Match::TimedOut)
        }
        Err(e) => Err(e.into()),
    }
}

/// The launch variables, read off the async workers when the body is large (its JSON is parsed for `extract`).
async fn variables_of(trigger: WebhookTrigger, captured: Captured) -> ApiResult<BTreeMap<String, String>> {
    if captured.body.len() <= HEAVY_BODY {
        return Ok(launch_variables(&trigger, &captured));
    }
    tokio::task::spawn_blocking(move || launch_variables(&trigger, &captured)).await.map_err(ApiError::internal_because)
}

/// What a launch needs besides the owed row.
#[derive(Debug, Clone, Copy)]
struct Launching<'a> {
    org_id: OrgId,
    trigger: &'a WebhookTrigger,
    variables: &'a BTreeMap<String, String>,
    depth: u32,
}

/// Queues the flow (woken at commit) and links the execution to its capture, at its depth.
async fn launch_flow(
    app: &AppState,
    conn: &mut PgConnection,
    launch: Launching<'_>,
    row: &Owed,
) -> ApiResult<ExecutionId> {
    let request = LaunchRequest {
        replica: app.replica,
        drafts: &app.drafts,
        org_id: launch.org_id,
        flow_id: launch.trigger.flow_id,
        trigger: Trigger::Webhook,
        environment: launch.trigger.environment.as_deref(),
        version: launch.trigger.version,
        variables: launch.variables,
        runner_labels: &[],
        max_attempts: DEFAULT_MAX_ATTEMPTS,
        priority: i16::from(launch.trigger.priority.unwrap_or_default().get()),
    };
    let execution = create_execution(conn, &request).await?;
    sqlx::query(
        "UPDATE executions SET trigger_webhook_id = $3, trigger_request_id = $4, trigger_depth = $5
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(launch.org_id)
    .bind(execution.id)
    .bind(row.webhook_id)
    .bind(row.capture_id)
    .bind(i32::try_from(launch.depth).unwrap_or(i32::MAX))
    .execute(conn)
    .await?;
    Ok(execution.id)
}
