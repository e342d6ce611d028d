//! Why a queued execution waits (issue #53), computed when it is read, in words a person acts on: no online
//! runner carries its labels (and which labels the online runners do carry), every runner that could take it is
//! busy, the organization's share of the embedded runner is in use, or it waits behind higher-priority (or older)
//! work. Three statements for a whole page, whatever its size: the queued rows' labels and priorities, the
//! organization's online runners (and the embedded runner) with what they run, and the queue's highest priority.

use crate::error::ApiResult;
use crate::state::AppState;
use hookflow_shared::api::executions::{Execution, ExecutionStatus};
use hookflow_shared::{ExecutionId, OrgId};
use sqlx::PgConnection;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, sqlx::FromRow)]
struct Waiting {
    id: ExecutionId,
    runner_labels: Vec<String>,
    priority: i16,
}

/// An online runner the organization's executions may go to: its own, or the server's embedded runner
/// (`embedded`; `running` then counts this organization's runs there, `running_all` everyone's).
#[derive(Debug, sqlx::FromRow)]
struct Online {
    labels: Vec<String>,
    max_concurrency: i32,
    embedded: bool,
    running: i64,
    running_all: i64,
}

/// Sets `waiting_reason` on the queued executions among `executions` (all of `org_id`).
pub async fn fill(
    app: &AppState,
    conn: &mut PgConnection,
    org_id: OrgId,
    executions: &mut [Execution],
) -> ApiResult<()> {
    let queued: Vec<ExecutionId> =
        executions.iter().filter(|e| e.status == ExecutionStatus::Queued).map(|e| e.id).collect();
    if queued.is_empty() {
        return Ok(());
    }
    let rows: Vec<Waiting> = sqlx::query_as(
        "SELECT id, runner_labels, priority FROM executions
         WHERE organization_id = $1 AND id = ANY($2) AND status = 'queued'",
    )
    .bind(org_id)
    .bind(&queued)
    .fetch_all(&mut *conn)
    .await?;
    let online_s = (app.settings.heartbeat_interval * 3).as_secs_f64();
    let runners: Vec<Online> = sqlx::query_as(
        "SELECT r.labels, r.max_concurrency, r.organization_id IS NULL AS embedded,
             (SELECT count(*) FROM executions e WHERE e.organization_id = $1 AND e.status = 'running'
                  AND e.runner_id = r.id) AS running,
             CASE WHEN r.organization_id IS NULL
                  THEN (SELECT count(*) FROM executions e WHERE e.status = 'running' AND e.runner_id = r.id)
                  ELSE 0 END AS running_all
         FROM runners r
         WHERE (r.organization_id = $1 OR r.organization_id IS NULL)
             AND r.last_seen_at > now() - make_interval(secs => $2)
         ORDER BY r.id",
    )
    .bind(org_id)
    .bind(online_s)
    .fetch_all(&mut *conn)
    .await?;
    let highest: Option<i16> =
        sqlx::query_scalar("SELECT min(priority) FROM executions WHERE organization_id = $1 AND status = 'queued'")
            .bind(org_id)
            .fetch_one(&mut *conn)
            .await?;
    let org_slots = i64::from(app.settings.embedded_runner.org_slots.max(1));
    let reasons: BTreeMap<ExecutionId, String> =
        rows.iter().map(|row| (row.id, reason(row, &runners, highest, org_slots))).collect();
    for execution in executions.iter_mut() {
        execution.waiting_reason = reasons.get(&execution.id).cloned();
    }
    Ok(())
}

/// `[a, b]`.
fn list(labels: &[String]) -> String {
    format!("[{}]", labels.join(", "))
}

fn reason(row: &Waiting, runners: &[Online], highest: Option<i16>, org_slots: i64) -> String {
    let wanted = &row.runner_labels;
    let capable: Vec<&Online> = runners.iter().filter(|r| wanted.iter().all(|l| r.labels.contains(l))).collect();
    if capable.is_empty() {
        let carried: BTreeSet<String> =
            runners.iter().filter(|r| !r.embedded).map(|r| list(&r.labels)).collect::<BTreeSet<_>>();
        let detail = if carried.is_empty() {
            "no runner of the organization is online: start one with these labels".to_owned()
        } else {
            let carried: Vec<String> = carried.into_iter().collect();
            format!("the online runners carry {}: start a runner with these labels", carried.join("; "))
        };
        return format!("no online runner carries {} ({detail})", list(wanted));
    }
    let installed: Vec<&&Online> = capable.iter().filter(|r| !r.embedded).collect();
    let free = |r: &Online| {
        if r.embedded {
            r.running < org_slots && r.running_all < i64::from(r.max_concurrency)
        } else {
            r.running < i64::from(r.max_concurrency)
        }
    };
    if !capable.iter().any(|r| free(r)) {
        if installed.is_empty() {
            let embedded = capable[0];
            return format!(
                "the organization's share of the embedded runner is in use ({} of the {} slots it may hold there \
                 are running; install a runner to run more at once)",
                embedded.running, org_slots
            );
        }
        let running: i64 = installed.iter().map(|r| r.running).sum();
        let slots: i64 = installed.iter().map(|r| i64::from(r.max_concurrency)).sum();
        return format!(
            "all {} runners that carry {} are busy ({running} jobs on {slots} slots: it starts when one ends, or \
             start more runners)",
            installed.len(),
            list(wanted)
        );
    }
    match highest {
        Some(top) if top < row.priority => format!(
            "waiting behind higher-priority work (queued work of priority {top} is claimed before this one's {})",
            row.priority
        ),
        _ => format!(
            "waiting behind higher-priority work or older work of its priority ({}): a runner that carries {} has a \
             free slot and claims it at its next poll",
            row.priority,
            list(wanted)
        ),
    }
}
