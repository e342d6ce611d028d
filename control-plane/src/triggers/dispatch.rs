//! One dispatcher pass: takes launches captures owe (`trigger_launches`, oldest first, `FOR UPDATE SKIP LOCKED`,
//! so replicas share them and never take one twice), decides each (does the capture match the trigger's `q` and
//! `filter`, how deep in a chain of triggered runs it was sent, is the organization under its launches per minute),
//! launches the flow with the capture's launch variables, and deletes the row, all in one transaction: a launch is
//! made exactly when its row goes, whatever crashes in between.

use crate::api::executions::resolve::{DEFAULT_MAX_ATTEMPTS, LaunchRequest, create_execution};
use crate::api::webhooks::search::{Cond, push_cond};
use crate::api::webhooks::triggers::conditions;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::triggers::guard::{self, Refusal, Refused};
use crate::triggers::variables::{Captured, launch_variables, sent_depth};
use hookflow_shared::api::executions::Trigger;
use hookflow_shared::api::triggers::WebhookTrigger;
use hookflow_shared::{CaptureId, ExecutionId, FlowId, OrgId, WebhookId};
use sqlx::types::Json;
use sqlx::{PgConnection, Postgres, QueryBuilder};
use std::collections::BTreeMap;

/// Owed launches one pass takes at most.
pub const BATCH: i64 = 64;
/// Bodies larger than this are read for their variables off the async workers.
const HEAVY_BODY: usize = 256 * 1024;

/// A launch a capture owes.
#[derive(Debug, sqlx::FromRow)]
struct Owed {
    capture_id: CaptureId,
    trigger_index: i16,
    organization_id: OrgId,
    webhook_id: WebhookId,
    /// The trigger's flow, named in the audit entry of a refusal.
    flow_id: Option<FlowId>,
    trigger: Json<serde_json::Value>,
}

/// What became of an owed launch.
#[derive(Debug)]
enum Decision {
    Launched(ExecutionId),
    /// Nothing to launch: the capture is gone, or does not match.
    Skipped,
    Refused(Refusal),
}

/// One pass; how many owed launches it took (a full [`BATCH`] means more may wait). Fails, leaving every row
/// owed, only when the database does.
pub async fn pass(app: &AppState) -> ApiResult<usize> {
    let mut tx = app.pool.begin().await?;
    let mut owed: Vec<Owed> = sqlx::query_as(
        "SELECT capture_id, trigger_index, organization_id, webhook_id, trigger,
                CASE WHEN trigger->>'flow_id' ~ '^[0-9a-fA-F-]{36}$' THEN (trigger->>'flow_id')::uuid END AS flow_id
         FROM trigger_launches ORDER BY capture_id, trigger_index LIMIT $1 FOR UPDATE SKIP LOCKED",
    )
    .bind(BATCH)
    .fetch_all(&mut *tx)
    .await?;
    let taken = owed.len();
    if taken == 0 {
        return Ok(0);
    }
    // Organization by organization: the minute rows are locked in one order by every dispatcher.
    owed.sort_by_key(|o| (o.organization_id, o.capture_id, o.trigger_index));
    let mut tally = Tally::default();
    let mut counted: BTreeMap<OrgId, i64> = BTreeMap::new();
    for row in &owed {
        let so_far = match counted.get(&row.organization_id) {
            Some(n) => *n,
            None => guard::lock_minute(&mut tx, row.organization_id).await?,
        };
        let decision = decide(app, &mut tx, row, so_far).await?;
        counted.insert(row.organization_id, so_far + i64::from(matches!(decision, Decision::Launched(_))));
        tally.add(row, decision);
    }
    settle(&mut tx, &owed, &tally).await?;
    tx.commit().await?;
    for org_id in tally.launched.keys() {
        app.queue.wake(*org_id);
    }
    let launched = tally.launched.values().sum::<i64>();
    let refused = tally.refused.values().map(|(n, _)| n).sum::<i64>();
    crate::metrics::trigger_launches(launched as u64, tally.skipped, refused as u64);
    Ok(taken)
}

/// What a pass decided: launches by organization, owed launches skipped, and refusals by endpoint and reason (how
/// many, and the first).
#[derive(Debug, Default)]
struct Tally {
    launched: BTreeMap<OrgId, i64>,
    skipped: u64,
    refused: BTreeMap<(WebhookId, &'static str), (i64, Refused)>,
}

impl Tally {
    fn add(&mut self, row: &Owed, decision: Decision) {
        match decision {
            Decision::Launched(execution_id) => {
                tracing::debug!(%execution_id, request_id = %row.capture_id, "a capture launched a flow");
                *self.launched.entry(row.organization_id).or_default() += 1;
            }
            Decision::Skipped => self.skipped += 1,
            Decision::Refused(refusal) => {
                let refused = Refused {
                    org_id: row.organization_id,
                    webhook_id: row.webhook_id,
                    request_id: row.capture_id,
                    flow_id: row.flow_id,
                    refusal,
                };
                let entry = self.refused.entry((row.webhook_id, refused.refusal.reason())).or_insert((0, refused));
                entry.0 += 1;
            }
        }
    }
}

/// Writes what a pass decided, while it holds its organizations' minute rows (whoever counts or refuses for an
/// organization holds its row first, so no two passes wait on each other's rows in a circle): the launches
/// counted, the refusals counted and audited, and the owed rows deleted, in one statement each.
async fn settle(conn: &mut PgConnection, owed: &[Owed], tally: &Tally) -> ApiResult<()> {
    for (org_id, n) in &tally.launched {
        guard::count_launches(conn, *org_id, *n).await?;
    }
    for (n, refused) in tally.refused.values() {
        guard::refuse(conn, refused, *n).await?;
    }
    let captures: Vec<CaptureId> = owed.iter().map(|o| o.capture_id).collect();
    let indexes: Vec<i16> = owed.iter().map(|o| o.trigger_index).collect();
    sqlx::query(
        "DELETE FROM trigger_launches WHERE (capture_id, trigger_index) IN
             (SELECT * FROM unnest($1::uuid[], $2::int2[]))",
    )
    .bind(&captures)
    .bind(&indexes)
    .execute(conn)
    .await?;
    Ok(())
}

/// Decides one owed launch under a savepoint: what fails in it (a launch the queue refuses) is undone and becomes
/// a refusal; only an unavailable database fails the pass (its rows stay owed).
async fn decide(app: &AppState, conn: &mut PgConnection, row: &Owed, so_far: i64) -> ApiResult<Decision> {
    sqlx::query("SAVEPOINT owed").execute(&mut *conn).await?;
    match attempt(app, conn, row, so_far).await {
        Ok(decision) => {
            sqlx::query("RELEASE SAVEPOINT owed").execute(&mut *conn).await?;
            Ok(decision)
        }
        Err(e) if e.is_unavailable() => Err(e),
        Err(e) => {
            sqlx::query("ROLLBACK TO SAVEPOINT owed").execute(&mut *conn).await?;
            sqlx::query("RELEASE SAVEPOINT owed").execute(&mut *conn).await?;
            Ok(Decision::Refused(Refusal::Launch(e.message)))
        }
    }
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
    let Ok(trigger) = serde_json::from_value::<WebhookTrigger>(row.trigger.0.clone()) else {
        tracing::warn!(webhook_id = %row.webhook_id, "a stored trigger cannot be read; skipped");
        return Ok(Decision::Skipped);
    };
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
    if !matches(conn, row, &conds).await? {
        return Ok(Decision::Skipped);
    }
    let settings = app.settings.triggers;
    let depth = sent_depth(&facts.headers).saturating_add(1);
    if depth > settings.max_depth {
        return Ok(Decision::Refused(Refusal::Depth { depth: depth - 1, max: settings.max_depth }));
    }
    if so_far >= i64::from(settings.launches_per_minute) {
        return Ok(Decision::Refused(Refusal::Limit { per_minute: settings.launches_per_minute }));
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

/// Whether the capture meets the trigger's conditions (none: every capture does), by the search's own SQL.
async fn matches(conn: &mut PgConnection, row: &Owed, conds: &[Cond]) -> ApiResult<bool> {
    if conds.is_empty() {
        return Ok(true);
    }
    let mut b = QueryBuilder::<Postgres>::new("SELECT EXISTS (SELECT 1 FROM captures WHERE organization_id = ");
    b.push_bind(row.organization_id).push(" AND id = ").push_bind(row.capture_id);
    for cond in conds {
        push_cond(&mut b, cond);
    }
    b.push(")");
    Ok(b.build_query_scalar::<bool>().fetch_one(conn).await?)
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
