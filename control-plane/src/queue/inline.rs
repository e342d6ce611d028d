//! Create, for an inline definition (`POST /executions`): a queued execution without a stored flow (`flow_id`
//! NULL), its environment carried in the launch, and `source` saying where the definition came from. Variables are
//! layered as for a flow's launch (organization < environment < launch), and the statement logs the `queued` event
//! and wakes other replicas' polls the same way (`create`). With rows, one batch whose rows go in chunks, one
//! statement each (`unnest`), as a flow's batch does (`batch`).

use crate::error::{ApiError, ApiResult, to_json, to_json_string};
use crate::queue::batch::{ChunkBinds, MAX_BATCH_BYTES, chunk_rows, notify_queue};
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
/// `$14` the `queued` event, `$15` source, `$16` collection variables, `$17` the replica, `$18` priority.
static INSERT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH layers AS (
             SELECT $16::jsonb || COALESCE((SELECT jsonb_object_agg(name, value) FROM variables v
                                            WHERE v.organization_id = $2), '{{}}') AS base),
         transition AS (
             INSERT INTO executions AS e (id, organization_id, flow_id, flow_name, flow_version, draft_revision,
                 definition, modules, environment, variables, variable_layers, runner_labels, node_ids, status,
                 trigger, max_attempts, timeout_s, event_count, source, priority)
             SELECT $1, $2, NULL, $3, NULL, 0, $4, $5, $6, l.base || $7::jsonb || $8::jsonb,
                 jsonb_build_object('base', l.base, 'environment', $7::jsonb, 'launch', $8::jsonb),
                 $9::text[], $10::text[], 'queued', $11, $12, $13, cardinality($14::text[]), $15, $18
             FROM layers l
             RETURNING {EXECUTION_COLUMNS}, e.event_count, $14::text[] AS events, e.watchers, e.organization_id,
                 CASE WHEN {} THEN pg_notify('{QUEUE_CHANNEL}', e.organization_id::text)::text END AS queue_notice){}",
        crate::queue::watch::others_wait("e.organization_id", "$17"),
        *LOG
    )
});

/// One chunk of an inline batch's rows: `$1`..`$3` one array each (execution id, the row's variables, its
/// iteration), the rest one value for every row: `$4` organization, `$5` name, `$6` definition, `$7` modules
/// (text), `$8` environment key, `$9` its variables, `$10` launch variables, `$11` labels, `$12` node ids, `$13`
/// trigger, `$14` attempts, `$15` timeout, `$16` collection variables, `$17` the `queued` event, `$18` source,
/// `$19` priority, `$20` batch. The organization's variables are read once per statement.
static INSERT_ROWS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH r AS (
             SELECT * FROM unnest($1::uuid[], $2::jsonb[], $3::int[]) AS r(id, row_variables, iteration)),
         layers AS (
             SELECT $16::jsonb || COALESCE((SELECT jsonb_object_agg(name, value) FROM variables v
                                            WHERE v.organization_id = $4), '{{}}') AS base),
         transition AS (
             INSERT INTO executions AS e (id, organization_id, flow_id, flow_name, flow_version, draft_revision,
                 definition, modules, environment, variables, variable_layers, runner_labels, node_ids, status,
                 trigger, max_attempts, timeout_s, event_count, source, priority, batch_id, iteration)
             SELECT r.id, $4, NULL, $5, NULL, 0, $6, $7, $8, l.base || $9::jsonb || $10::jsonb || r.row_variables,
                 jsonb_build_object('base', l.base, 'environment', $9::jsonb,
                     'launch', $10::jsonb || r.row_variables),
                 $11::text[], $12::text[], 'queued', $13, $14, $15, cardinality($17::text[]), $18, $19, $20,
                 r.iteration
             FROM r CROSS JOIN layers l
             ORDER BY r.id
             RETURNING e.id, e.event_count, $17::text[] AS events, e.watchers){}",
        *LOG
    )
});

/// Queues an inline execution (in the caller's transaction, if any); runners are woken when it commits.
pub async fn create(conn: &mut PgConnection, new: &NewInline) -> ApiResult<Execution> {
    insert(conn, new).await
}

/// Queues an inline definition once per row (`POST /executions` with `rows`), as one batch (`flow_id` NULL), in
/// the caller's transaction: each row's values are launch variables over the launch's own. At most
/// [`MAX_ROWS`] rows, and [`MAX_BATCH_BYTES`] of what the rows store (definitions, modules, variables) in all, as
/// for a flow's batch.
pub async fn create_batch(
    conn: &mut PgConnection,
    new: &NewInline,
    rows: &[BTreeMap<String, String>],
) -> ApiResult<LaunchedBatch> {
    if rows.is_empty() || rows.len() > MAX_ROWS {
        return Err(ApiError::invalid(format!("invalid field `rows`: 1 to {MAX_ROWS} rows; got {}", rows.len())));
    }
    // Every row stores the definition, its modules and source, and the variables twice (merged and by layer).
    use crate::queue::create::variables_bytes;
    let environment = new.environment.as_ref().map_or(0, |(_, vars)| variables_bytes(vars));
    let copied =
        2 * (variables_bytes(&new.launch_variables) + variables_bytes(&new.collection_variables) + environment);
    let row_bytes = new.definition.get().len()
        + to_json_string(&new.modules)?.len()
        + hookflow_shared::flow::budget::json_size(&new.source)
        + copied
        + crate::queue::batch::stored_variables_bytes(&mut *conn, new.org_id, None, None).await?;
    if row_bytes.saturating_mul(rows.len()) > MAX_BATCH_BYTES {
        return Err(ApiError::invalid(format!(
            "invalid field `rows`: {} rows of this definition ({row_bytes} bytes each with its modules and launch \
             variables) would store more than {} MiB; send fewer rows or smaller variables",
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
    let queued = vec![encode(&status_event(ExecutionStatus::Queued, 1, None))?];
    let (environment, environment_variables) = environment_of(new)?;
    let modules = to_json_string(&new.modules)?;
    let launch_variables = to_json(&new.launch_variables)?;
    let collection = to_json(&new.collection_variables)?;
    let timeout_s = i32::try_from(new.timeout_s).unwrap_or(i32::MAX);
    let chunk_rows = chunk_rows(row_bytes);
    for (chunk_index, chunk) in rows.chunks(chunk_rows).enumerate() {
        let ChunkBinds { ids, variables, iterations } = ChunkBinds::of(chunk, chunk_index * chunk_rows)?;
        let inserted: Vec<ExecutionId> = sqlx::query_scalar(sqlx::AssertSqlSafe(INSERT_ROWS.as_str()))
            .bind(&ids)
            .bind(&variables)
            .bind(&iterations)
            .bind(new.org_id)
            .bind(&new.name)
            .bind(new.definition.get())
            .bind(&modules)
            .bind(environment)
            .bind(&environment_variables)
            .bind(&launch_variables)
            .bind(&new.runner_labels)
            .bind(&new.node_ids)
            .bind(new.trigger.as_str())
            .bind(new.max_attempts)
            .bind(timeout_s)
            .bind(&collection)
            .bind(&queued)
            .bind(&new.source)
            .bind(new.priority)
            .bind(batch_id)
            .fetch_all(&mut *conn)
            .await?;
        if inserted.len() != chunk.len() {
            return Err(ApiError::internal_because("an inline batch inserted fewer rows than it was given"));
        }
    }
    notify_queue(conn, new.org_id, new.replica).await?;
    Ok(LaunchedBatch { batch_id, executions: u32::try_from(rows.len()).unwrap_or(u32::MAX) })
}

/// The inline environment's key and its variables (`{}` without one).
fn environment_of(new: &NewInline) -> ApiResult<(Option<&str>, Value)> {
    Ok(match &new.environment {
        Some((key, variables)) => (Some(key.as_str()), to_json(variables)?),
        None => (None, Value::Object(Default::default())),
    })
}

async fn insert(conn: &mut PgConnection, new: &NewInline) -> ApiResult<Execution> {
    let queued = vec![encode(&status_event(ExecutionStatus::Queued, 1, None))?];
    let (environment, environment_variables) = environment_of(new)?;
    let row: ExecutionRow = sqlx::query_as(sqlx::AssertSqlSafe(INSERT.as_str()))
        .bind(ExecutionId::now_v7())
        .bind(new.org_id)
        .bind(&new.name)
        .bind(new.definition.get())
        .bind(to_json_string(&new.modules)?)
        .bind(environment)
        .bind(environment_variables)
        .bind(to_json(&new.launch_variables)?)
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
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| ApiError::internal_because("an inline launch inserted no row"))?;
    row.try_into()
}
