//! Batches (data-driven runs): one resolved launch queued once per row of data, every row an execution like any
//! other (claimed, leased and requeued by the queue as usual) carrying its batch and row index (`iteration`); and
//! the rerun of a batch's failed rows as a new batch. Rows go in chunks, one statement each (`unnest`), so a
//! 10,000-row launch is ten statements and the server holds one chunk's rows as JSON at a time. Every row stores
//! the launch's definition: a batch writes at most `MAX_BATCH_BYTES`, a statement about `CHUNK_BYTES`.

use crate::db::group_commit::BatchWrite as _;
use crate::error::{ApiError, ApiResult, to_json};
use crate::queue::create::NewExecution;
use crate::queue::events::{LOG, encode, status_event};
use crate::signals::QUEUE_CHANNEL;
use hookflow_shared::api::batches::{LaunchedBatch, MAX_ROWS};
use hookflow_shared::api::executions::{ExecutionStatus, Trigger};
use hookflow_shared::{BatchId, ExecutionId, OrgId};
use serde_json::Value;
use sqlx::PgConnection;
use std::collections::BTreeMap;
use std::sync::LazyLock;
use uuid::Uuid;

/// Rows per statement at most.
const CHUNK: usize = 1_000;
/// What one statement writes at most: every row stores the launch's definition and modules, so a large
/// definition takes fewer rows per statement.
const CHUNK_BYTES: usize = 64 * 1024 * 1024;
/// What one batch writes at most (rows times the launch's definition and modules): a tenant's one request may not
/// make the database write gigabytes.
pub const MAX_BATCH_BYTES: usize = 512 * 1024 * 1024;

/// One chunk of a batch's rows: `$1`..`$3` one array each (execution id, the row's variables, its iteration), the
/// rest one value for every row (the resolved launch). The flow's name and the variable layers are read once per
/// statement; a launch naming an environment its flow does not have inserts nothing.
static INSERT_ROWS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH r AS (
             SELECT * FROM unnest($1::uuid[], $2::jsonb[], $3::int[]) AS r(id, row_variables, iteration)),
         layers AS (
             SELECT f.name AS flow_name, $13::jsonb || COALESCE(org.variables, '{{}}') AS base,
                 COALESCE(env.variables, '{{}}') AS env_variables
             FROM flows f
             CROSS JOIN LATERAL (
                 SELECT jsonb_object_agg(name, value) AS variables FROM variables v
                 WHERE v.organization_id = $4) org
             LEFT JOIN LATERAL (
                 SELECT variables FROM flow_environments env
                 WHERE env.organization_id = $4 AND env.flow_id = $5 AND env.key = $9) env ON true
             WHERE f.id = $5 AND f.organization_id = $4 AND ($9::text IS NULL OR env.variables IS NOT NULL)),
         transition AS (
             INSERT INTO executions AS e (id, organization_id, flow_id, flow_name, flow_version, draft_revision,
                 definition, modules, environment, variables, variable_layers, runner_labels, node_ids, status,
                 trigger, max_attempts, timeout_s, event_count, batch_id, iteration, priority)
             SELECT r.id, $4, $5, l.flow_name, $6, $7, $8, $10, $9,
                 l.base || l.env_variables || $11::jsonb || r.row_variables,
                 jsonb_build_object('base', l.base, 'environment', l.env_variables,
                     'launch', $11::jsonb || r.row_variables),
                 $12::text[], $14::text[], 'queued', $15, $16, $17, cardinality($18::text[]), $19, r.iteration, $20
             FROM r CROSS JOIN layers l
             ORDER BY r.id
             RETURNING e.id, e.event_count, $18::text[] AS events, e.watchers){}",
        *LOG
    )
});

/// What each row of a batch copies of the variables stored apart from the launch, twice (merged and by layer): the
/// organization's and, when one is named, the flow's environment's (`flow_id` `None`: an inline definition's, whose
/// environment comes with the launch).
pub(crate) async fn stored_variables_bytes(
    conn: &mut PgConnection,
    org_id: OrgId,
    flow_id: Option<hookflow_shared::FlowId>,
    environment: Option<&str>,
) -> ApiResult<usize> {
    let bytes: i64 = sqlx::query_scalar(
        "SELECT (SELECT COALESCE(sum(octet_length(name) + octet_length(value) + 6), 0)
                 FROM variables WHERE organization_id = $1)
              + COALESCE((SELECT octet_length(variables::text) FROM flow_environments
                          WHERE organization_id = $1 AND flow_id = $2 AND key = $3), 0)",
    )
    .bind(org_id)
    .bind(flow_id)
    .bind(environment)
    .fetch_one(&mut *conn)
    .await?;
    Ok(2 * usize::try_from(bytes).unwrap_or(usize::MAX / 2))
}

/// A rerun: copies the failed rows of batch `$2` (organization `$1`) into batch `$3`, keeping what they ran and
/// their iterations; `$4` the trigger, `$5` the `queued` event, `$6` the new executions' ids (taken in row order;
/// rows past them are left out).
static RERUN_ROWS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH transition AS (
             INSERT INTO executions AS e (id, organization_id, flow_id, flow_name, flow_version, draft_revision,
                 definition, modules, environment, variables, variable_layers, runner_labels, node_ids, status,
                 trigger, max_attempts, timeout_s, event_count, batch_id, iteration, priority, source)
             SELECT i.id, s.organization_id, s.flow_id, s.flow_name, s.flow_version, s.draft_revision,
                 s.definition, s.modules, s.environment, s.variables, s.variable_layers, s.runner_labels, s.node_ids,
                 'queued', $4, s.max_attempts, s.timeout_s, cardinality($5::text[]), $3, s.iteration, s.priority, s.source
             FROM (SELECT *, row_number() OVER (ORDER BY iteration) AS n FROM executions
                   WHERE organization_id = $1 AND batch_id = $2 AND status IN ('failed', 'error')) s
             JOIN unnest($6::uuid[]) WITH ORDINALITY AS i(id, n) ON i.n = s.n
             ORDER BY i.id
             RETURNING e.id, e.event_count, $5::text[] AS events, e.watchers){}",
        *LOG
    )
});

/// One chunk of a batch's rows as its insert binds them: a fresh id, the row's values (JSON) and its iteration
/// (counted from the chunk's `first`) for each row.
#[derive(Debug)]
pub struct ChunkBinds {
    pub ids: Vec<ExecutionId>,
    pub variables: Vec<Value>,
    pub iterations: Vec<i32>,
}

impl ChunkBinds {
    pub fn of(chunk: &[BTreeMap<String, String>], first: usize) -> ApiResult<Self> {
        Ok(Self {
            ids: chunk.iter().map(|_| ExecutionId::now_v7()).collect(),
            variables: chunk.iter().map(to_json).collect::<ApiResult<Vec<Value>>>()?,
            iterations: (first..first + chunk.len()).map(|i| i32::try_from(i).unwrap_or(i32::MAX)).collect(),
        })
    }
}

/// How many rows of `row_bytes` each (definition and modules) one statement inserts.
pub fn chunk_rows(row_bytes: usize) -> usize {
    (CHUNK_BYTES / row_bytes.max(1)).clamp(1, CHUNK)
}

/// Wakes the organization's waiting polls on other replicas (the launching one wakes its own in memory).
pub async fn notify_queue(conn: &mut PgConnection, org_id: OrgId, replica: Uuid) -> ApiResult<()> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT pg_notify('{QUEUE_CHANNEL}', $1::text) WHERE {}",
        crate::queue::watch::others_wait("$1", "$2")
    )))
    .bind(org_id)
    .bind(replica)
    .execute(conn)
    .await?;
    Ok(())
}

/// Queues `launch` (resolved, its `launch_variables` the launch's own) once per row, each row's values over the
/// launch variables, as one new batch of the launch's flow; in the caller's transaction, so the batch and all its
/// executions appear together at commit (runners are woken then). At most [`MAX_ROWS`] rows, at least one. A
/// launch naming an environment its flow does not have is a 400; a flow gone meanwhile a 404.
pub async fn create_batch(
    conn: &mut PgConnection,
    launch: &NewExecution,
    rows: &[BTreeMap<String, String>],
) -> ApiResult<LaunchedBatch> {
    if rows.is_empty() || rows.len() > MAX_ROWS {
        return Err(ApiError::invalid(format!("invalid field `rows`: 1 to {MAX_ROWS} rows; got {}", rows.len())));
    }
    let row_bytes = launch.bytes()
        + stored_variables_bytes(&mut *conn, launch.org_id, Some(launch.flow.id), launch.environment.as_deref())
            .await?;
    if row_bytes.saturating_mul(rows.len()) > MAX_BATCH_BYTES {
        return Err(ApiError::invalid(format!(
            "invalid field `rows`: {} rows of this flow ({row_bytes} bytes each with its definition, modules and \
             launch variables) would store more than {} MiB; launch fewer rows or smaller variables",
            rows.len(),
            MAX_BATCH_BYTES / (1024 * 1024)
        )));
    }
    let chunk_rows = chunk_rows(row_bytes);
    let total = u32::try_from(rows.len()).unwrap_or(u32::MAX);
    let batch_id = BatchId::now_v7();
    sqlx::query("INSERT INTO batches (id, organization_id, flow_id, total) VALUES ($1, $2, $3, $4)")
        .bind(batch_id)
        .bind(launch.org_id)
        .bind(launch.flow.id)
        .bind(i32::try_from(total).unwrap_or(i32::MAX))
        .execute(&mut *conn)
        .await?;
    let queued = vec![encode(&status_event(ExecutionStatus::Queued, 1, None))?];
    let modules = crate::error::to_json_string(&launch.modules)?;
    let launch_variables = to_json(&launch.launch_variables)?;
    let collection = to_json(&launch.collection_variables)?;
    let timeout_s = i32::try_from(launch.timeout_s).unwrap_or(i32::MAX);
    for (chunk_index, chunk) in rows.chunks(chunk_rows).enumerate() {
        let ChunkBinds { ids, variables, iterations } = ChunkBinds::of(chunk, chunk_index * chunk_rows)?;
        let inserted: Vec<ExecutionId> = sqlx::query_scalar(sqlx::AssertSqlSafe(INSERT_ROWS.as_str()))
            .bind(&ids)
            .bind(&variables)
            .bind(&iterations)
            .bind(launch.org_id)
            .bind(launch.flow.id)
            .bind(launch.flow.version)
            .bind(launch.draft_revision)
            .bind(launch.flow.definition.get())
            .bind(launch.environment.as_deref())
            .bind(&modules)
            .bind(&launch_variables)
            .bind(&launch.runner_labels)
            .bind(&collection)
            .bind(&launch.node_ids)
            .bind(launch.trigger.as_str())
            .bind(launch.max_attempts)
            .bind(timeout_s)
            .bind(&queued)
            .bind(batch_id)
            .bind(launch.priority)
            .fetch_all(&mut *conn)
            .await?;
        if inserted.len() != chunk.len() {
            return Err(match &launch.environment {
                Some(key) => {
                    ApiError::invalid(format!("invalid field `environment`: the flow has no environment `{key}`"))
                }
                None => ApiError::not_found("flow"),
            });
        }
    }
    notify_queue(conn, launch.org_id, launch.replica).await?;
    Ok(LaunchedBatch { batch_id, executions: total })
}

/// Queues the failed rows (`failed` or `error`) of batch `batch_id` of the organization again, as a new batch:
/// each row runs what it ran before (definition, modules, variables, labels) and keeps its iteration. 404 for a
/// batch of another organization, 409 when no row failed. In the caller's transaction.
pub async fn rerun_failed(
    conn: &mut PgConnection,
    org_id: OrgId,
    batch_id: BatchId,
    trigger: Trigger,
    replica: Uuid,
) -> ApiResult<LaunchedBatch> {
    // The failed rows and what copying them writes (as stored, compressed or not), against the batch budget.
    let found: Option<(Option<hookflow_shared::FlowId>, i64, i64)> = sqlx::query_as(
        "SELECT b.flow_id, f.n, f.bytes
         FROM batches b
         CROSS JOIN LATERAL (
             SELECT count(*) AS n,
                    COALESCE(sum(pg_column_size(e.definition) + COALESCE(pg_column_size(e.modules), 0)
                                 + COALESCE(pg_column_size(e.variables), 0)
                                 + COALESCE(pg_column_size(e.variable_layers), 0)), 0)::int8 AS bytes
             FROM executions e
             WHERE e.batch_id = b.id AND e.organization_id = b.organization_id AND e.status IN ('failed', 'error')) f
         WHERE b.id = $1 AND b.organization_id = $2",
    )
    .bind(batch_id)
    .bind(org_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((flow_id, failed, bytes)) = found else { return Err(ApiError::not_found("batch")) };
    if failed == 0 {
        return Err(ApiError::conflict("the batch has no failed rows to run again"));
    }
    if usize::try_from(bytes).unwrap_or(usize::MAX) > MAX_BATCH_BYTES {
        return Err(ApiError::invalid(format!(
            "the batch's {failed} failed rows would store more than {} MiB again; launch them in smaller batches",
            MAX_BATCH_BYTES / (1024 * 1024)
        )));
    }
    let new_id = BatchId::now_v7();
    sqlx::query("INSERT INTO batches (id, organization_id, flow_id, total, rerun_of) VALUES ($1, $2, $3, $4, $5)")
        .bind(new_id)
        .bind(org_id)
        .bind(flow_id)
        .bind(i32::try_from(failed).unwrap_or(i32::MAX))
        .bind(batch_id)
        .execute(&mut *conn)
        .await?;
    let queued = vec![encode(&status_event(ExecutionStatus::Queued, 1, None))?];
    let ids: Vec<ExecutionId> = (0..failed).map(|_| ExecutionId::now_v7()).collect();
    let inserted: Vec<ExecutionId> = sqlx::query_scalar(sqlx::AssertSqlSafe(RERUN_ROWS.as_str()))
        .bind(org_id)
        .bind(batch_id)
        .bind(new_id)
        .bind(trigger.as_str())
        .bind(&queued)
        .bind(&ids)
        .fetch_all(&mut *conn)
        .await?;
    let executions = u32::try_from(inserted.len()).unwrap_or(u32::MAX);
    if i64::from(executions) != failed {
        // Retention removed some meanwhile: the batch counts what it holds.
        sqlx::query("UPDATE batches SET total = $2 WHERE id = $1")
            .bind(new_id)
            .bind(i32::try_from(executions).unwrap_or(i32::MAX))
            .execute(&mut *conn)
            .await?;
    }
    notify_queue(conn, org_id, replica).await?;
    Ok(LaunchedBatch { batch_id: new_id, executions })
}
