//! Create: resolved launches become queued executions, any number in one statement (variables layered, the rows,
//! their first events and the notifications that wake stream subscribers and waiting runners). Plain launches of
//! one server share statements through group commit (`AppState::writers`); launches in a transaction
//! (idempotent, ephemeral, by tag, scheduled) create theirs in it. A launch of a draft the server keeps is created
//! only while the flow's draft is still that one (`NewExecution::kept_draft`).

use crate::db::group_commit::BatchWrite;
use crate::error::{ApiError, ApiResult, to_json, to_json_string};
use crate::queue::events::{LOG, encode, status_event};
use crate::queue::row::{EXECUTION_COLUMNS, ExecutionRow};
use crate::signals::QUEUE_CHANNEL;
use chrono::{DateTime, Utc};
use hookflow_shared::api::executions::{Execution, ExecutionStatus, Trigger};
use hookflow_shared::api::runners::JobFlow;
use hookflow_shared::{ExecutionId, FlowId, OrgId};
use serde_json::Value;
use sqlx::PgConnection;
use std::collections::BTreeMap;
use std::sync::LazyLock;
use uuid::Uuid;

/// Launches per statement at most.
pub const MAX_BATCH: usize = 128;

/// What runs, already resolved: the definition with collection requests inlined, the module definitions, and
/// the variable layers.
#[derive(Debug)]
pub struct NewExecution {
    /// The launching replica, whose own polls are woken in memory (nil: none excluded).
    pub replica: Uuid,
    pub org_id: OrgId,
    /// The flow as it runs: its published version (`None`: the draft) with collection requests inlined. The name
    /// stored is the flow row's at creation.
    pub flow: JobFlow,
    pub draft_revision: i32,
    /// The draft's revision and update time when the launch runs a draft this server kept without reading the flow
    /// row: the execution is created only while the row still has both (else the launch resolves again).
    pub kept_draft: Option<(i32, DateTime<Utc>)>,
    pub modules: BTreeMap<String, Value>,
    pub node_ids: Vec<String>,
    pub timeout_s: u64,
    pub environment: Option<String>,
    /// The lowest variable layer: the variables of collections whose requests the flow uses.
    pub collection_variables: BTreeMap<String, String>,
    /// The highest layer.
    pub launch_variables: BTreeMap<String, String>,
    pub runner_labels: Vec<String>,
    pub trigger: Trigger,
    pub max_attempts: i32,
    /// 1 (highest) to 5.
    pub priority: i16,
}

/// Layers variables (collections < organization < environment < launch; merged, and kept by layer for claims),
/// inserts the rows with their `queued` event already counted (the log's rule, for a row that starts with events),
/// and notifies; lookups go by key (`OFFSET 0` keeps the planner from joining whole tables, whatever its
/// statistics say). A launch inserts no row when its flow is gone from its organization, when it names an
/// environment its flow does not have, or when the flow's draft is no longer the kept one it expects. The arrays
/// are read through `(SELECT $n)` so the batch size stays unknown to the planner: the plan no longer depends on it
/// and is made once per connection, not once per batch. `$1`..`$3` and `$5`..`$16` are one array each (a launch
/// per element; labels and node ids as JSON arrays), as are `$4` and `$18` (the kept draft's revision and update
/// time, or nulls), `$17` the `queued` event, `$19` the replica, `$20` the priorities.
static INSERT: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH launch AS (
             SELECT * FROM unnest((SELECT $1::uuid[]), (SELECT $2::uuid[]), (SELECT $3::uuid[]),
                 (SELECT $4::int[]), (SELECT $5::int[]), (SELECT $6::int[]), (SELECT $7::text[]),
                 (SELECT $8::text[]), (SELECT $9::text[]), (SELECT $10::jsonb[]), (SELECT $11::jsonb[]),
                 (SELECT $12::jsonb[]), (SELECT $13::text[]), (SELECT $14::int[]), (SELECT $15::int[]),
                 (SELECT $16::jsonb[]), (SELECT $18::timestamptz[]),
                 (SELECT $20::int2[]))
             AS l(id, organization_id, flow_id, kept_revision, flow_version, draft_revision, definition, modules,
                 environment, launch, runner_labels, node_ids, trigger, max_attempts, timeout_s, collection,
                 kept_updated_at, priority)),
         layers AS (
             SELECT l.*, f.name AS flow_name, l.collection || COALESCE(org.variables, '{{}}') AS base,
                 COALESCE(env.variables, '{{}}') AS env_variables
             FROM launch l
             JOIN LATERAL (
                 SELECT name FROM flows f WHERE f.id = l.flow_id AND f.organization_id = l.organization_id
                     AND (l.kept_revision IS NULL
                         OR (f.draft_revision = l.kept_revision AND f.updated_at = l.kept_updated_at))
                 OFFSET 0) f ON true
             CROSS JOIN LATERAL (
                 SELECT jsonb_object_agg(name, value) AS variables FROM variables v
                 WHERE v.organization_id = l.organization_id) org
             LEFT JOIN LATERAL (
                 SELECT variables FROM flow_environments env
                 WHERE env.organization_id = l.organization_id AND env.flow_id = l.flow_id AND env.key = l.environment
                 OFFSET 0) env ON true
             WHERE l.environment IS NULL OR env.variables IS NOT NULL),
         transition AS (
             INSERT INTO executions AS e (id, organization_id, flow_id, flow_name, flow_version, draft_revision,
                 definition, modules, environment, variables, variable_layers, runner_labels, node_ids, status,
                 trigger, max_attempts, timeout_s, event_count, priority)
             SELECT l.id, l.organization_id, l.flow_id, l.flow_name, l.flow_version, l.draft_revision, l.definition,
                 l.modules, l.environment, l.base || l.env_variables || l.launch,
                 jsonb_build_object('base', l.base, 'environment', l.env_variables, 'launch', l.launch),
                 ARRAY(SELECT jsonb_array_elements_text(l.runner_labels)),
                 ARRAY(SELECT jsonb_array_elements_text(l.node_ids)), 'queued', l.trigger, l.max_attempts,
                 l.timeout_s, cardinality($17::text[]), l.priority
             FROM layers l
             ORDER BY l.id
             RETURNING {EXECUTION_COLUMNS}, e.event_count, $17::text[] AS events, e.watchers, e.organization_id,
                 CASE WHEN {} THEN pg_notify('{QUEUE_CHANNEL}', e.organization_id::text)::text END AS queue_notice){}",
        crate::queue::watch::others_wait("e.organization_id", "$19"),
        *LOG
    )
});

/// The statement's columns, one array per column (borrowing what the launches hold as it is).
#[derive(Debug, Default)]
struct Columns<'a> {
    ids: Vec<ExecutionId>,
    orgs: Vec<OrgId>,
    flows: Vec<FlowId>,
    kept_revisions: Vec<Option<i32>>,
    kept_updated: Vec<Option<DateTime<Utc>>>,
    versions: Vec<Option<i32>>,
    revisions: Vec<i32>,
    /// Definitions and module definitions as JSON text (the columns are text: see the migration that made them so).
    definitions: Vec<&'a str>,
    modules: Vec<String>,
    environments: Vec<Option<&'a str>>,
    launch: Vec<Value>,
    labels: Vec<Value>,
    node_ids: Vec<Value>,
    triggers: Vec<&'static str>,
    max_attempts: Vec<i32>,
    timeouts: Vec<i32>,
    collection: Vec<Value>,
    priorities: Vec<i16>,
}

impl<'a> Columns<'a> {
    fn push(&mut self, id: ExecutionId, new: &'a NewExecution) -> ApiResult<()> {
        self.ids.push(id);
        self.orgs.push(new.org_id);
        self.flows.push(new.flow.id);
        self.kept_revisions.push(new.kept_draft.map(|(revision, _)| revision));
        self.kept_updated.push(new.kept_draft.map(|(_, updated_at)| updated_at));
        self.versions.push(new.flow.version);
        self.revisions.push(new.draft_revision);
        self.definitions.push(new.flow.definition.get());
        self.modules.push(to_json_string(&new.modules)?);
        self.environments.push(new.environment.as_deref());
        self.launch.push(to_json(&new.launch_variables)?);
        self.labels.push(to_json(&new.runner_labels)?);
        self.node_ids.push(to_json(&new.node_ids)?);
        self.triggers.push(new.trigger.as_str());
        self.max_attempts.push(new.max_attempts);
        self.timeouts.push(i32::try_from(new.timeout_s).unwrap_or(i32::MAX));
        self.collection.push(to_json(&new.collection_variables)?);
        self.priorities.push(new.priority);
        Ok(())
    }
}

/// About how many bytes a set of variables takes in a row's JSON (names and values, a few bytes of punctuation
/// each): what `batch::stored_variables_bytes` counts in the database.
pub(crate) fn variables_bytes(variables: &BTreeMap<String, String>) -> usize {
    variables.iter().map(|(name, value)| name.len() + value.len() + 6).sum()
}

/// Launches share statements: plain launches of one server through group commit (`AppState::writers`), launches in
/// a transaction call `create`.
impl BatchWrite for NewExecution {
    type Out = ApiResult<Option<Execution>>;

    /// A launch's row: its definition and modules, and its launch and collection variables twice (merged into
    /// `variables` and kept by layer in `variable_layers`).
    fn bytes(&self) -> usize {
        let modules: usize = self.modules.values().map(hookflow_shared::flow::budget::json_size).sum();
        let copied = 2 * (variables_bytes(&self.launch_variables) + variables_bytes(&self.collection_variables));
        256 + self.flow.definition.get().len() + modules + copied
    }

    /// Creates queued executions, one per launch and in the same order, in one statement (in the caller's
    /// transaction, if any); runners are woken when it commits. A launch of a kept draft that no longer matches
    /// the flow row (or whose flow or environment is gone) gets `None` and resolves again; another launch naming an
    /// environment its flow does not have gets its own 400, one whose flow was deleted meanwhile 404; the others
    /// are created.
    async fn write_many(conn: &mut PgConnection, launches: &[Self]) -> ApiResult<Vec<ApiResult<Option<Execution>>>> {
        let Some(replica) = launches.first().map(|l| l.replica) else { return Ok(Vec::new()) };
        let queued = vec![encode(&status_event(ExecutionStatus::Queued, 1, None))?];
        let mut columns = Columns::default();
        for new in launches {
            columns.push(ExecutionId::now_v7(), new)?;
        }
        let rows: Vec<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(INSERT.as_str()))
            .bind(&columns.ids)
            .bind(&columns.orgs)
            .bind(&columns.flows)
            .bind(&columns.kept_revisions)
            .bind(&columns.versions)
            .bind(&columns.revisions)
            .bind(&columns.definitions)
            .bind(&columns.modules)
            .bind(&columns.environments)
            .bind(&columns.launch)
            .bind(&columns.labels)
            .bind(&columns.node_ids)
            .bind(&columns.triggers)
            .bind(&columns.max_attempts)
            .bind(&columns.timeouts)
            .bind(&columns.collection)
            .bind(&queued)
            .bind(&columns.kept_updated)
            .bind(replica)
            .bind(&columns.priorities)
            .fetch_all(&mut *conn)
            .await?;
        let mut created: BTreeMap<ExecutionId, ExecutionRow> = rows.into_iter().map(|row| (row.id(), row)).collect();
        let answers = columns.ids.iter().zip(launches).map(|(id, new)| match (created.remove(id), &new.environment) {
            (Some(row), _) => row.try_into().map(Some),
            (None, _) if new.kept_draft.is_some() => Ok(None),
            (None, Some(key)) => {
                Err(ApiError::invalid(format!("invalid field `environment`: the flow has no environment `{key}`")))
            }
            (None, None) => Err(ApiError::not_found("flow")),
        });
        Ok(answers.collect())
    }
}

/// Creates one queued execution of a resolved launch (in the caller's transaction, if any); runners are woken
/// when it commits.
pub async fn create(conn: &mut PgConnection, new: NewExecution) -> ApiResult<Execution> {
    resolved(new.write_one(conn).await??)
}

/// The outcome of a resolved launch's write: only a kept draft's launch is left out without an error.
pub fn resolved(created: Option<Execution>) -> ApiResult<Execution> {
    created.ok_or_else(|| ApiError::internal_because("a resolved launch was taken for a kept one"))
}
