//! The rescuer: executions whose lease expired go back to the queue as the next attempt, up to `max_attempts`;
//! after that they fail with `runner_lost`. Every replica runs it; `SKIP LOCKED` keeps them from doubling up.

use crate::executions::{Ending, events, finish};
use crate::state::AppState;
use sqlx::PgConnection;
use uuid::Uuid;

/// Releases a running execution (locked by the caller) that its runner lost: requeued as the next attempt, or
/// ended when attempts are used up or a cancel was asked for.
pub async fn release(conn: &mut PgConnection, execution_id: Uuid, reason: &str) -> Result<(), sqlx::Error> {
    let (attempt, max_attempts, cancel_requested, org_id): (i32, i32, bool, Uuid) =
        sqlx::query_as("SELECT attempt, max_attempts, cancel_requested, organization_id FROM executions WHERE id = $1")
            .bind(execution_id)
            .fetch_one(&mut *conn)
            .await?;
    let end = |status, error| Ending { execution_id, attempt, job_id: None, status, error: Some(error) };
    if cancel_requested {
        return finish(conn, end("cancelled", reason)).await.map(|_| ());
    }
    if attempt >= max_attempts {
        return finish(conn, end("failed", "runner_lost")).await.map(|_| ());
    }
    sqlx::query(
        "UPDATE executions SET status = 'queued', attempt = attempt + 1, runner_id = NULL, job_id = NULL,
             lease_expires_at = NULL
         WHERE id = $1",
    )
    .bind(execution_id)
    .execute(&mut *conn)
    .await?;
    let mut event = events::status_event("queued", attempt + 1, None);
    if let Some(object) = event.as_object_mut() {
        object.insert("reason".into(), reason.into());
    }
    events::append(conn, execution_id, &[event]).await?;
    sqlx::query("SELECT pg_notify($1, $2)").bind(super::QUEUE_CHANNEL).bind(org_id.to_string()).execute(conn).await?;
    Ok(())
}

/// One pass: releases up to 100 executions whose lease expired. Returns how many.
pub async fn rescue_expired(app: &AppState) -> Result<usize, sqlx::Error> {
    let mut tx = app.pool.begin().await?;
    let expired: Vec<Uuid> = sqlx::query_scalar(
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

/// Runs the rescuer until shutdown.
pub async fn run(app: AppState) {
    let (shutdown, interval) = (app.shutdown.clone(), app.settings.rescue_interval);
    crate::state::every(shutdown, interval, "lease rescue", || rescue_expired(&app)).await;
}
