//! Release: a running execution its runner lost (lease expired, runner removed) goes back to the queue as the
//! next attempt, or ends when its attempts are used up (`runner_lost`) or a cancel was asked for. The rescuer
//! looks for expired leases on every replica; `SKIP LOCKED` keeps replicas from doubling up.

use crate::error::ApiResult;
use crate::queue::events::{LOG, bump, encode};
use crate::queue::finish::{Ending, finish};
use crate::signals::QUEUE_CHANNEL;
use hookflow_shared::api::executions::{ExecutionEvent, ExecutionStatus};
use hookflow_shared::api::runners::{Complete, FinalStatus};
use hookflow_shared::{ExecutionId, OrgId, RunnerId};
use sqlx::PgConnection;
use std::sync::LazyLock;

/// `$1` execution, `$2` its events: back to the queue as the next attempt, waking runners at commit.
static REQUEUE: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH transition AS (
             UPDATE executions e SET status = 'queued', attempt = e.attempt + 1, runner_id = NULL, job_id = NULL,
                 lease_expires_at = NULL, {}
             WHERE e.id = $1
             RETURNING e.id, e.event_count, $2::text[] AS events, e.watchers,
                 pg_notify('{QUEUE_CHANNEL}', e.organization_id::text)::text AS queue_notice){}",
        bump("$2::text[]"),
        *LOG
    )
});

/// Releases a running execution (locked by the caller).
pub async fn release(conn: &mut PgConnection, execution_id: ExecutionId, reason: &str) -> ApiResult<()> {
    let (attempt, max_attempts, cancel_requested): (i32, i32, bool) =
        sqlx::query_as("SELECT attempt, max_attempts, cancel_requested FROM executions WHERE id = $1")
            .bind(execution_id)
            .fetch_one(&mut *conn)
            .await?;
    let end =
        |status, error: &str| Ending::new(execution_id, attempt, None, Complete::new(status, Some(error.to_owned())));
    let expired = reason == "lease_expired";
    if cancel_requested {
        if expired {
            crate::metrics::lease_expired("cancelled");
        }
        return finish(conn, end(FinalStatus::Cancelled, reason)).await.map(|_| ());
    }
    if attempt >= max_attempts {
        if expired {
            crate::metrics::lease_expired("failed");
        }
        return finish(conn, end(FinalStatus::Failed, "runner_lost")).await.map(|_| ());
    }
    if expired {
        crate::metrics::lease_expired("requeued");
    }
    let event = ExecutionEvent::Status {
        status: ExecutionStatus::Queued,
        attempt: attempt + 1,
        runner_id: None,
        cancel_requested: false,
        reason: Some(reason.to_owned()),
    };
    sqlx::query(sqlx::AssertSqlSafe(REQUEUE.as_str()))
        .bind(execution_id)
        .bind(vec![encode(&event)?])
        .execute(conn)
        .await?;
    Ok(())
}

/// Releases every execution a removed runner held (in the caller's transaction).
pub async fn release_runner(conn: &mut PgConnection, org_id: OrgId, runner_id: RunnerId) -> ApiResult<()> {
    let held: Vec<ExecutionId> = sqlx::query_scalar(
        "SELECT id FROM executions WHERE organization_id = $1 AND runner_id = $2 AND status = 'running' FOR UPDATE",
    )
    .bind(org_id)
    .bind(runner_id)
    .fetch_all(&mut *conn)
    .await?;
    for execution_id in held {
        release(conn, execution_id, "runner_removed").await?;
    }
    Ok(())
}

/// One pass: releases up to 100 executions whose lease expired. Returns how many.
pub async fn rescue_expired(pool: &sqlx::PgPool) -> ApiResult<usize> {
    let mut tx = crate::db::begin::begin(&pool).await?;
    let expired: Vec<ExecutionId> = sqlx::query_scalar(
        "SELECT id FROM executions WHERE status = 'running' AND lease_expires_at < now()
         LIMIT 100 FOR UPDATE SKIP LOCKED",
    )
    .fetch_all(&mut *tx)
    .await?;
    for id in &expired {
        tracing::info!(execution_id = %id, "lease expired; releasing the execution");
        release(&mut tx, *id, "lease_expired").await?;
    }
    tx.commit().await?;
    Ok(expired.len())
}
