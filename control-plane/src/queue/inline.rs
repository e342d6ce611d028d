//! Create, for an inline definition (`POST /executions`): a queued execution without a stored flow (`flow_id`
//! NULL), its environment carried in the launch, and `source` saying where the definition came from. Variables are
//! layered as for a flow's launch (organization < environment < launch), and the statement logs the `queued` event
//! and wakes other replicas' polls the same way (`create`).

use crate::error::{ApiError, ApiResult, to_json, to_json_string};
use crate::queue::batch::MAX_BATCH_BYTES;
use crate::queue::events::{LOG, encode, status_event};
use crate::queue::row::{EXECUTION_COLUMNS, ExecutionRow};
use crate::signals::QUEUE_CHANNEL;
use hookflow_shared::api::batches::{LaunchedBatch, MAX_ROWS};
use hookflow_shared::api::executions::{Execution, ExecutionStatus, Trigger};
use hookflow_shared::{BatchId, ExecutionId, OrgId};
use serde_json::Value;
use serde_json::value::RawValue;
use sqlx::PgConnection;
use std::collections::BTreeMap;
use std::sync::LazyLock;
use uuid::Uuid;

/// An inline launch, validated and resolved (modules and collection requests as for a flow's).
#[derive(Debug)]
pub struct NewInline {
    /// The launching replica, whose own polls are woken in memory.
    pub replica: Uuid,
    pub org_id: OrgId,
    /// The execution's flow name.
    pub name: String,
    /// The definition as it runs (JSON text).
    pub definition: Box<RawValue>,
    pub modules: BTreeMap<String, Value>,
    pub node_ids: Vec<String>,
    pub timeout_s: u64,
    /// The inline environment's key and variables.
    pub environment: Option<(String, BTreeMap<String, String>)>,
    pub collection_variables: BTreeMap<String, String>,
    pub launch_variables: BTreeMap<String, String>,
    pub runner_labels: Vec<String>,
    pub trigger: Trigger,
    pub max_attempts: i32,
    /// `{kind, path, definition_sha256, git_commit, git_ref}`.
    pub source: Value,
    /// 1 (highest) to 5.
    pub priority: i16,
}

/// `$1` id, `$2` organization, `$3` name, `$4` definition, `$5` modules (text), `$6` environment key, `$7` its
/// variables, `$8` launch variables, `$9` labels, `$10` node ids, `$11` trigger, `$12` attempts, `$13` timeout,
/// `$14` the `queued` event, `$15` source, `$16` collection variables, `$17` the replica, `$18` priority, `$19` batch,
/// `$20` the row's index in it.
static INSERT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH layers AS (
             SELECT $16::jsonb || COALESCE((SELECT jsonb_object_agg(name, value) FROM variables v
                                            WHERE v.organization_id = $2), '{{}}') AS base),
         transition AS (
             INSERT INTO executions AS e (id, organization_id, flow_id, flow_name, flow_version, draft_revision,
                 definition, modules, environment, variables, variable_layers, runner_labels, node_ids, status,
                 trigger, max_attempts, timeout_s, event_count, source, priority, batch_id, iteration)
             SELECT $1, $2, NULL, $3, NULL, 0, $4, $5, $6, l.base || $7::jsonb || $8::jsonb,
                 jsonb_build_object('base', l.base, 'environment', $7::jsonb, 'launch', $8::jsonb),
                 $9::text[], $10::text[], 'queued', $11, $12, $13, cardinality($14::text[]), $15, $18, $19, $20
             FROM layers l
             RETURNING {EXECUTION_COLUMNS}, e.event_count, $14::text[] AS events, e.watchers, e.organization_id,
                 CASE WHEN {} THEN pg_notify('{QUEUE_CHANNEL}', e.organization_id::text)::text END AS queue_notice){}",
        crate::queue::watch::others_wait("e.organization_id", "$17"),
        *LOG
    )
});

/// Queues an inline execution (in the caller's transaction, if any); runners are woken when it commits.
pub async fn create(conn: &mut PgConnection, new: &NewInline) -> ApiResult<Execution> {
    insert(conn, new, &new.launch_variables, None).await
}

/// Queues an inline definition once per row (`POST /executions` with `rows`), as one batch (`flow_id` NULL), in
/// the caller's transaction: each row's values are launch variables over the launch's own. At most
/// [`MAX_ROWS`] rows, and [`MAX_BATCH_BYTES`] of definitions in all, as for a flow's batch.
pub async fn create_batch(
    conn: &mut PgConnection,
    new: &NewInline,
    rows: &[BTreeMap<String, String>],
) -> ApiResult<LaunchedBatch> {
    if rows.is_empty() || rows.len() > MAX_ROWS {
        return Err(ApiError::invalid(format!("invalid field `rows`: 1 to {MAX_ROWS} rows; got {}", rows.len())));
    }
    let row_bytes = new.definition.get().len() + to_json_string(&new.modules)?.len();
    if row_bytes.saturating_mul(rows.len()) > MAX_BATCH_BYTES {
        return Err(ApiError::invalid(format!(
            "invalid field `rows`: {} rows of this definition ({row_bytes} bytes each with its modules) would store \
             more than {} MiB; send fewer rows",
            rows.len(),
            MAX_BATCH_BYTES / (1024 * 1024)
        )));
    }
    let batch_id = BatchId::now_v7();
    let total = i32::try_from(rows.len()).unwrap_or(i32::MAX);
    sqlx::query("INSERT INTO batches (id, organization_id, flow_id, total) VALUES ($1, $2, NULL, $3)")
        .bind(batch_id)
        .bind(new.org_id)
        .bind(total)
        .execute(&mut *conn)
        .await?;
    for (iteration, row) in rows.iter().enumerate() {
        let mut variables = new.launch_variables.clone();
        variables.extend(row.iter().map(|(k, v)| (k.clone(), v.clone())));
        let iteration = i32::try_from(iteration).unwrap_or(i32::MAX);
        insert(conn, new, &variables, Some((batch_id, iteration))).await?;
    }
    Ok(LaunchedBatch { batch_id, executions: u32::try_from(rows.len()).unwrap_or(u32::MAX) })
}

async fn insert(
    conn: &mut PgConnection,
    new: &NewInline,
    launch_variables: &BTreeMap<String, String>,
    batch: Option<(BatchId, i32)>,
) -> ApiResult<Execution> {
    let queued = vec![encode(&status_event(ExecutionStatus::Queued, 1, None))?];
    let (environment, environment_variables) = match &new.environment {
        Some((key, variables)) => (Some(key.as_str()), to_json(variables)?),
        None => (None, Value::Object(Default::default())),
    };
    let row: ExecutionRow = sqlx::query_as(sqlx::AssertSqlSafe(INSERT.as_str()))
        .bind(ExecutionId::now_v7())
        .bind(new.org_id)
        .bind(&new.name)
        .bind(new.definition.get())
        .bind(to_json_string(&new.modules)?)
        .bind(environment)
        .bind(environment_variables)
        .bind(to_json(launch_variables)?)
        .bind(&new.runner_labels)
        .bind(&new.node_ids)
        .bind(new.trigger.as_str())
        .bind(new.max_attempts)
        .bind(i32::try_from(new.timeout_s).unwrap_or(i32::MAX))
        .bind(&queued)
        .bind(&new.source)
        .bind(to_json(&new.collection_variables)?)
        .bind(new.replica)
        .bind(new.priority)
        .bind(batch.map(|(id, _)| id))
        .bind(batch.map(|(_, i)| i))
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| ApiError::internal_because("an inline launch inserted no row"))?;
    row.try_into()
}
