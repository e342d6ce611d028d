//! Create, for an inline definition (`POST /executions`): a queued execution without a stored flow (`flow_id`
//! NULL), its environment carried in the launch, and `source` saying where the definition came from. Variables are
//! layered as for a flow's launch (organization < environment < launch), and the statement logs the `queued` event
//! and wakes other replicas' polls the same way (`create`).

use crate::error::{ApiError, ApiResult, to_json, to_json_string};
use crate::queue::events::{LOG, encode, status_event};
use crate::queue::row::{EXECUTION_COLUMNS, ExecutionRow};
use crate::signals::QUEUE_CHANNEL;
use hookflow_shared::api::executions::{Execution, ExecutionStatus, Trigger};
use hookflow_shared::{ExecutionId, OrgId};
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
}

/// `$1` id, `$2` organization, `$3` name, `$4` definition, `$5` modules (text), `$6` environment key, `$7` its
/// variables, `$8` launch variables, `$9` labels, `$10` node ids, `$11` trigger, `$12` attempts, `$13` timeout,
/// `$14` the `queued` event, `$15` source, `$16` collection variables, `$17` the replica.
static INSERT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH layers AS (
             SELECT $16::jsonb || COALESCE((SELECT jsonb_object_agg(name, value) FROM variables v
                                            WHERE v.organization_id = $2), '{{}}') AS base),
         transition AS (
             INSERT INTO executions AS e (id, organization_id, flow_id, flow_name, flow_version, draft_revision,
                 definition, modules, environment, variables, variable_layers, runner_labels, node_ids, status,
                 trigger, max_attempts, timeout_s, event_count, source)
             SELECT $1, $2, NULL, $3, NULL, 0, $4, $5, $6, l.base || $7::jsonb || $8::jsonb,
                 jsonb_build_object('base', l.base, 'environment', $7::jsonb, 'launch', $8::jsonb),
                 $9::text[], $10::text[], 'queued', $11, $12, $13, cardinality($14::text[]), $15
             FROM layers l
             RETURNING {EXECUTION_COLUMNS}, e.event_count, $14::text[] AS events, e.watchers, e.organization_id,
                 CASE WHEN {} THEN pg_notify('{QUEUE_CHANNEL}', e.organization_id::text)::text END AS queue_notice){}",
        crate::queue::watch::others_wait("e.organization_id", "$17"),
        *LOG
    )
});

/// Queues an inline execution (in the caller's transaction, if any); runners are woken when it commits.
pub async fn create(conn: &mut PgConnection, new: &NewInline) -> ApiResult<Execution> {
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
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(|| ApiError::internal_because("an inline launch inserted no row"))?;
    row.try_into()
}
