//! Create: a resolved launch becomes a queued execution in one statement (variables layered, the row, its first
//! event and the notifications that wake stream subscribers and waiting runners).

use crate::http::error::{ApiError, ApiResult, to_json};
use crate::queue::events::{LOG, encode, status_event};
use crate::queue::row::{EXECUTION_COLUMNS, ExecutionRow};
use crate::signals::QUEUE_CHANNEL;
use hookflow_shared::api::executions::{Execution, ExecutionStatus, Trigger};
use serde_json::Value;
use sqlx::PgConnection;
use std::collections::BTreeMap;
use std::sync::LazyLock;
use uuid::Uuid;

/// What runs, already resolved: the definition with collection requests inlined, the module definitions, and
/// the variable layers.
#[derive(Debug)]
pub struct NewExecution<'a> {
    /// The launching replica, whose own polls are woken in memory (nil: none excluded).
    pub replica: Uuid,
    pub org_id: Uuid,
    pub flow_id: Uuid,
    pub flow_name: &'a str,
    /// The published version run; `None` for the draft.
    pub flow_version: Option<i32>,
    pub draft_revision: i32,
    pub definition: &'a Value,
    pub modules: &'a BTreeMap<String, Value>,
    pub node_ids: &'a [String],
    pub timeout_s: u64,
    pub environment: Option<&'a str>,
    /// The lowest variable layer: the variables of collections whose requests the flow uses.
    pub collection_variables: &'a BTreeMap<String, String>,
    /// The highest layer.
    pub launch_variables: &'a BTreeMap<String, String>,
    pub runner_labels: &'a [String],
    pub trigger: Trigger,
    pub max_attempts: i32,
}

/// Layers variables (collections < organization < environment < launch; merged, and kept by layer for claims),
/// inserts the row with its `queued`
/// event already counted (the log's rule, for a row that starts with events), and notifies. No row comes back
/// when the named environment does not exist.
static INSERT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH env AS (
             SELECT variables FROM flow_environments WHERE organization_id = $2 AND flow_id = $3 AND key = $9),
         layers AS (
             SELECT $17::jsonb
                     || COALESCE((SELECT jsonb_object_agg(name, value) FROM variables WHERE organization_id = $2), '{{}}')
                     AS base,
                 COALESCE((SELECT variables FROM env), '{{}}') AS environment, $10::jsonb AS launch),
         transition AS (
             INSERT INTO executions AS e (id, organization_id, flow_id, flow_name, flow_version, draft_revision,
                 definition, modules, environment, variables, variable_layers, runner_labels, node_ids, status,
                 trigger, max_attempts, timeout_s, event_count)
             SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, l.base || l.environment || l.launch,
                 jsonb_build_object('base', l.base, 'environment', l.environment, 'launch', l.launch),
                 $11, $12, 'queued', $13, $14, $15, cardinality($16::text[])
             FROM layers l
             WHERE $9::text IS NULL OR EXISTS (SELECT 1 FROM env)
             RETURNING {EXECUTION_COLUMNS}, e.event_count, $16::text[] AS events, e.watchers, e.organization_id,
                 CASE WHEN {} THEN pg_notify('{QUEUE_CHANNEL}', e.organization_id::text)::text END AS queue_notice){}",
        crate::queue::watch::others_wait("e.organization_id", "$18"),
        *LOG
    )
});

/// Creates a queued execution (in the caller's transaction, if any); runners are woken when it commits.
pub async fn create(conn: &mut PgConnection, new: &NewExecution<'_>) -> ApiResult<Execution> {
    let queued = vec![encode(&status_event(ExecutionStatus::Queued, 1, None))?];
    let row: Option<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(INSERT.as_str()))
        .bind(Uuid::now_v7())
        .bind(new.org_id)
        .bind(new.flow_id)
        .bind(new.flow_name)
        .bind(new.flow_version)
        .bind(new.draft_revision)
        .bind(new.definition)
        .bind(to_json(new.modules)?)
        .bind(new.environment)
        .bind(to_json(new.launch_variables)?)
        .bind(new.runner_labels)
        .bind(new.node_ids)
        .bind(new.trigger.as_str())
        .bind(new.max_attempts)
        .bind(i32::try_from(new.timeout_s).unwrap_or(i32::MAX))
        .bind(&queued)
        .bind(to_json(new.collection_variables)?)
        .bind(new.replica)
        .fetch_optional(&mut *conn)
        .await?;
    match (row, new.environment) {
        (Some(row), _) => row.try_into(),
        (None, Some(key)) => {
            Err(ApiError::invalid(format!("invalid field `environment`: the flow has no environment `{key}`")))
        }
        (None, None) => Err(ApiError::internal_because("an execution insert without an environment matched nothing")),
    }
}
