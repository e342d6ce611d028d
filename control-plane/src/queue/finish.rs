//! Finish and cancel: executions end, any number in one statement (final status, the node results a completion
//! carries, the summary counted from the attempt's node results, the dead job token, the final event); runners'
//! completions of one server share statements through group commit (`AppState::writers`). A cancel ends a queued
//! execution at once and flags a running one, whose runner is told at its next heartbeat or report.

use crate::db::group_commit::BatchWrite;
use crate::error::{ApiError, ApiResult};
use crate::queue::events::{self, LOG, bump};
use crate::queue::report::StoredResult;
use crate::queue::row::{EXECUTION_COLUMNS, ExecutionRow, fetch};
use hookflow_shared::api::executions::{Execution, ExecutionEvent, ExecutionStatus};
use hookflow_shared::api::runners::{Complete, FinalStatus};
use hookflow_shared::{ExecutionId, FlowId, JobId, OrgId};
use sqlx::PgConnection;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// Completions per statement at most.
pub const MAX_BATCH: usize = 128;

/// How an execution ends: the attempt, and its final status and error as a completion gives them.
#[derive(Debug)]
pub struct Ending {
    pub execution_id: ExecutionId,
    pub attempt: i32,
    /// When set, the execution must still be held by this job (a runner's completion).
    pub job_id: Option<JobId>,
    /// Its status and error (its `results` are taken out into `results`).
    pub end: Complete,
    /// Node results stored with the ending (a runner's last ones).
    pub results: Vec<StoredResult>,
}

impl Ending {
    /// An ending that carries no node results.
    pub fn new(execution_id: ExecutionId, attempt: i32, job_id: Option<JobId>, end: Complete) -> Self {
        Self { execution_id, attempt, job_id, end, results: Vec::new() }
    }
}

/// `$1`..`$5`: execution ids, attempts, statuses, errors and the jobs that must hold them (or nulls), one
/// element per ending; of two endings of one execution the first counts. Rows are locked in id order, each looked
/// up by its key (`OFFSET 0` keeps the planner from joining the whole table, whatever its statistics say); nodes
/// never reported count as skipped. `$6`..`$10`: the node results the endings carry (the 1-based ending each
/// belongs to, node id, status, stored text, `node.completed` event), stored as a report stores them (repeats of a
/// stored node ignored) with their events before `execution.completed`; an ending naming a node its flow does not
/// have ends nothing. The arrays are read through `(SELECT $n)` so the plan does not depend on the batch size and
/// is made once per connection. The results are joined to their endings once (`placed`), and what is made per
/// execution is materialized: planned as inlined joins on the batch's (unknown) sizes, a 42-ending batch of a
/// one-node flow compared 74,000 rows (14 ms of 18) and made each ending's events again for every use. Each
/// execution's node ids are read once (`shapes`: the position and the next node of every node, from one pass over
/// the array per ending that carries results, its first test): reading the array once per result decompressed it
/// once per comparison, and a 1,000-node flow's completion carrying 99 results took 53 ms. `shapes` keeps every
/// node and the carried results are matched to them once (`sited`, a hash join): filtering `shapes` to the carried
/// nodes was planned, on its estimates of ten rows a side, as a loop comparing each result with every node (99,000
/// comparisons, 11 ms of that completion's 14.6). Of two results of one node in a completion the first counts, as
/// in a report (`sited`), so `placed` holds one row per execution and node.
static FINISH: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH ending AS (
             SELECT DISTINCT ON (execution_id) * FROM unnest((SELECT $1::uuid[]), (SELECT $2::int[]),
                 (SELECT $3::text[]), (SELECT $4::text[]), (SELECT $5::uuid[]))
                 WITH ORDINALITY AS x(execution_id, attempt, status, error, job_id, ord)
             ORDER BY execution_id, ord),
         reported AS MATERIALIZED (
             SELECT * FROM unnest((SELECT $6::int8[]), (SELECT $7::text[]), (SELECT $8::text[]), (SELECT $9::text[]),
                 (SELECT $10::text[])) WITH ORDINALITY AS r(ending, node_id, status, result, event, ord)),
         shapes AS MATERIALIZED (
             SELECT x.ord AS ending, n.node_id, n.position, n.next_node
             FROM ending x
             CROSS JOIN LATERAL (SELECT e.node_ids FROM executions e WHERE e.id = x.execution_id OFFSET 0) e
             CROSS JOIN LATERAL (
                 SELECT u.node_id, u.position::int AS position, lead(u.node_id) OVER (ORDER BY u.position) AS next_node
                 FROM unnest(e.node_ids) WITH ORDINALITY AS u(node_id, position)) n
             WHERE x.ord IN (SELECT ending FROM reported)),
         sited AS MATERIALIZED (
             SELECT DISTINCT ON (r.ending, r.node_id) r.*, s.position, s.next_node
             FROM reported r LEFT JOIN shapes s ON s.ending = r.ending AND s.node_id = r.node_id
             ORDER BY r.ending, r.node_id, r.ord),
         locked AS (
             SELECT e.id, e.node_ids, x.ord, x.status, x.error, x.attempt, COALESCE(e.started_at, now()) AS started_at
             FROM ending x
             CROSS JOIN LATERAL (
                 SELECT * FROM executions e WHERE e.id = x.execution_id AND e.attempt = x.attempt
                     AND e.status IN ('queued', 'running') AND (x.job_id IS NULL OR e.job_id = x.job_id)
                 OFFSET 0) e
             WHERE x.ord NOT IN (SELECT s.ending FROM sited s WHERE s.position IS NULL)
             ORDER BY e.id
             FOR UPDATE OF e),
         placed AS MATERIALIZED (
             SELECT s.ord, s.node_id, s.status, s.result, s.event, l.id AS execution_id, l.attempt,
                 l.ord AS ending, s.position, s.next_node
             FROM sited s JOIN locked l ON l.ord = s.ending),
         fresh AS (
             INSERT INTO node_results (execution_id, attempt, node_id, position, status, result)
             SELECT execution_id, attempt, node_id, position, status, result::json FROM placed
             ON CONFLICT DO NOTHING RETURNING execution_id, node_id, status),
         announced AS (
             SELECT p.execution_id, p.ord, p.status, p.event,
                 CASE WHEN p.next_node IS NOT NULL AND NOT EXISTS (
                         SELECT 1 FROM placed o WHERE o.ending = p.ending AND o.node_id = p.next_node)
                     THEN format('{{\"type\":\"node.started\",\"node_id\":%s,\"attempt\":%s}}',
                         to_json(p.next_node), p.attempt)
                 END AS started
             FROM placed p WHERE (p.execution_id, p.node_id) IN (SELECT execution_id, node_id FROM fresh)),
         told AS MATERIALIZED (
             SELECT a.execution_id, array_agg(u.v ORDER BY a.ord, u.k) FILTER (WHERE u.v IS NOT NULL) AS events,
                 count(*) FILTER (WHERE u.k = 1 AND a.status = 'passed') AS passed,
                 count(*) FILTER (WHERE u.k = 1 AND a.status IN ('failed', 'error')) AS failed,
                 count(*) FILTER (WHERE u.k = 1 AND a.status = 'skipped') AS skipped
             FROM announced a CROSS JOIN LATERAL unnest(ARRAY[a.event, a.started]) WITH ORDINALITY AS u(v, k)
             GROUP BY a.execution_id),
         held AS MATERIALIZED (
             SELECT l.id, l.status, l.error, l.attempt, l.started_at,
                 jsonb_build_object('nodes_total', cardinality(l.node_ids), 'passed', c.passed, 'failed', c.failed,
                     'skipped', GREATEST(cardinality(l.node_ids) - c.passed - c.failed, c.skipped)) AS summary,
                 COALESCE(t.events, '{{}}') AS node_events
             FROM locked l
             LEFT JOIN told t ON t.execution_id = l.id
             CROSS JOIN LATERAL (
                 SELECT count(*) FILTER (WHERE r.status = 'passed') + COALESCE(t.passed, 0) AS passed,
                        count(*) FILTER (WHERE r.status IN ('failed', 'error')) + COALESCE(t.failed, 0) AS failed,
                        count(*) FILTER (WHERE r.status = 'skipped') + COALESCE(t.skipped, 0) AS skipped
                 FROM node_results r WHERE r.execution_id = l.id AND r.attempt = l.attempt) c),
         events AS MATERIALIZED (
             SELECT id, status, error, started_at, summary, node_events || ARRAY[jsonb_build_object(
                 'type', 'execution.completed', 'status', status, 'summary', summary, 'error', error, 'attempt',
                 attempt, 'duration_ms', (extract(epoch FROM now() - started_at) * 1000)::bigint)::text] AS events
             FROM held),
         transition AS (
             UPDATE executions e SET status = ev.status, error = ev.error, finished_at = now(),
                 started_at = ev.started_at, lease_expires_at = NULL, summary = ev.summary, {}
             FROM events ev WHERE e.id = ev.id
             RETURNING {EXECUTION_COLUMNS}, e.event_count, ev.events, e.watchers),
         dead AS (
             UPDATE jobs j SET completed_at = now() FROM transition t
             WHERE j.execution_id = t.id AND j.completed_at IS NULL){}",
        bump("ev.events"),
        *LOG
    )
});

/// The statement that ends executions (public so tests can look at its plan).
pub fn statement() -> &'static str {
    FINISH.as_str()
}

/// Endings share statements: runners' completions on one server through group commit (`AppState::writers`),
/// other endings call `finish` in their transaction.
impl BatchWrite for Ending {
    type Out = Option<Execution>;

    fn bytes(&self) -> usize {
        let results: usize = self.results.iter().map(|r| 32 + r.node_id.len() + r.payload.len() + r.event.len()).sum();
        64 + self.end.error.as_ref().map_or(0, String::len) + results
    }

    /// Ends executions in one statement: per ending, the execution as it ended, or `None` when it had already
    /// ended, (with `job_id`) moved on to another attempt, or an earlier ending of the batch ended it.
    async fn write_many(conn: &mut PgConnection, endings: &[Self]) -> ApiResult<Vec<Option<Execution>>> {
        let ids: Vec<ExecutionId> = endings.iter().map(|e| e.execution_id).collect();
        let carried = endings.iter().enumerate().flat_map(|(i, e)| e.results.iter().map(move |r| (i as i64 + 1, r)));
        let (mut owners, mut nodes, mut statuses, mut payloads, mut events) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (owner, result) in carried {
            owners.push(owner);
            nodes.push(result.node_id.as_str());
            statuses.push(result.status);
            payloads.push(result.payload.as_str());
            events.push(result.event.as_str());
        }
        let rows: Vec<ExecutionRow> = sqlx::query_as(sqlx::AssertSqlSafe(statement()))
            .bind(&ids)
            .bind(endings.iter().map(|e| e.attempt).collect::<Vec<_>>())
            .bind(endings.iter().map(|e| e.end.status.as_str()).collect::<Vec<_>>())
            .bind(endings.iter().map(|e| e.end.error.as_deref()).collect::<Vec<_>>())
            .bind(endings.iter().map(|e| e.job_id).collect::<Vec<_>>())
            .bind(&owners)
            .bind(&nodes)
            .bind(&statuses)
            .bind(&payloads)
            .bind(&events)
            .fetch_all(conn)
            .await?;
        let mut ended: BTreeMap<ExecutionId, ExecutionRow> = rows.into_iter().map(|row| (row.id(), row)).collect();
        let mut answers = Vec::with_capacity(endings.len());
        for ending in endings {
            let Some(row) = ended.remove(&ending.execution_id) else {
                answers.push(None);
                continue;
            };
            crate::metrics::execution_finished(ending.end.status.as_str());
            answers.push(Some(Execution::try_from(row)?));
        }
        Ok(answers)
    }
}

/// Ends an execution. `None` when it had already ended or (with `job_id`) moved on to another attempt.
pub async fn finish(conn: &mut PgConnection, ending: Ending) -> ApiResult<Option<Execution>> {
    ending.write_one(conn).await
}

/// Which execution a cancel names.
#[derive(Debug, Clone, Copy)]
pub struct CancelTarget {
    pub org_id: OrgId,
    /// `None`: the execution by id alone (`POST /executions/{id}/cancel`).
    pub flow_id: Option<FlowId>,
    pub execution_id: ExecutionId,
}

/// Cancels: a queued execution ends at once; a running one is flagged for its runner. 409 once it has ended.
pub async fn cancel(conn: &mut PgConnection, target: CancelTarget) -> ApiResult<Execution> {
    let current: Option<(String, i32)> = sqlx::query_as(
        "SELECT status, attempt FROM executions
         WHERE organization_id = $1 AND ($2::uuid IS NULL OR flow_id = $2) AND id = $3 FOR UPDATE",
    )
    .bind(target.org_id)
    .bind(target.flow_id)
    .bind(target.execution_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((status, attempt)) = current else { return Err(ApiError::not_found("execution")) };
    let execution_id = target.execution_id;
    match status.parse::<ExecutionStatus>().map_err(ApiError::internal_because)? {
        ExecutionStatus::Queued => {
            let end = Complete::new(FinalStatus::Cancelled, Some("cancelled before a runner took it".to_owned()));
            let ending = Ending::new(execution_id, attempt, None, end);
            finish(conn, ending).await?;
        }
        ExecutionStatus::Running => {
            sqlx::query("UPDATE executions SET cancel_requested = true WHERE id = $1")
                .bind(execution_id)
                .execute(&mut *conn)
                .await?;
            let event = ExecutionEvent::Status {
                status: ExecutionStatus::Running,
                attempt,
                runner_id: None,
                cancel_requested: true,
                reason: None,
            };
            events::append(conn, execution_id, &[events::encode(&event)?], None).await?;
        }
        other => return Err(ApiError::conflict(format!("the execution already finished ({other})"))),
    }
    fetch(conn, target.org_id, target.flow_id, execution_id).await
}
