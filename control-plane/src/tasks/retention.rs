//! Retention: a background task deletes captures older than their endpoint's `max_age_days` and beyond its
//! `max_requests` newest (the organization's defaults where the endpoint sets none), their deliveries (and attempts)
//! with them, keeping counts right;
//! finished executions (their node results, events, jobs and captures with them) and audit entries older than
//! their organization's retention or the server's default (audit entries never before the server's floor);
//! it also forgets the stream and queue watches of replicas that stopped refreshing them, expired idempotency keys,
//! the trigger counts of minutes long past and Standard Webhooks ids past twice their endpoint's tolerance.

use crate::api::webhooks::model::subtract_stored;
use crate::state::{AppState, RetentionDefaults};
use hookflow_shared::WebhookId;
use sqlx::PgPool;

/// Rows one retention statement deletes: small statements leave room for the capture writer and never meet the
/// statement timeout, however large the backlog.
const DELETE_BATCH: i64 = 5_000;
/// The least pause between two retention statements; otherwise four times what the last one took, so a large
/// backlog uses at most a fifth of the database's time and captures keep the rest (measured: `hookflow-bench
/// retention`).
const BETWEEN_BATCHES: std::time::Duration = std::time::Duration::from_millis(20);

/// One pass over every endpoint; returns how many captures were deleted.
pub async fn sweep(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let mut deleted = 0;
    loop {
        let started = std::time::Instant::now();
        let by_age: Vec<(WebhookId, i64)> = sqlx::query_as(
            "WITH limits AS (
                SELECT w.id, COALESCE(w.max_age_days, o.default_max_age_days) AS days
                FROM webhooks w JOIN organizations o ON o.id = w.organization_id
                WHERE COALESCE(w.max_age_days, o.default_max_age_days) IS NOT NULL
             ), doomed AS (
                DELETE FROM captures c WHERE c.id IN (
                    SELECT e.id FROM captures e JOIN limits l ON e.webhook_id = l.id
                    WHERE e.received_at < now() - make_interval(days => l.days)
                    LIMIT $1)
                RETURNING c.id, c.webhook_id
             ), undelivered AS (
                DELETE FROM deliveries d WHERE d.capture_id IN (SELECT id FROM doomed)
             )
             SELECT webhook_id, count(*) FROM doomed GROUP BY webhook_id",
        )
        .bind(DELETE_BATCH)
        .fetch_all(pool)
        .await?;
        let removed: i64 = by_age.iter().map(|(_, n)| n).sum();
        deleted += adjust_counts(pool, &by_age).await?;
        // A batch can come back short while captures arrive; only an empty one means nothing is left.
        if removed == 0 {
            break;
        }
        tokio::time::sleep(BETWEEN_BATCHES.max(started.elapsed() * 4)).await;
    }
    let over: Vec<(WebhookId, i64)> = sqlx::query_as(
        "SELECT w.id, COALESCE(w.max_requests, o.default_max_requests) FROM webhooks w
         JOIN organizations o ON o.id = w.organization_id
         WHERE (SELECT COALESCE(sum(c.stored), 0) FROM webhook_counters c WHERE c.webhook_id = w.id)
               > COALESCE(w.max_requests, o.default_max_requests)",
    )
    .fetch_all(pool)
    .await?;
    for (webhook_id, keep) in over {
        let removed = sqlx::query_as(
            "WITH doomed AS (
                 DELETE FROM captures WHERE webhook_id = $1 AND id <= (
                     SELECT id FROM captures WHERE webhook_id = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)
                 RETURNING id
             ), undelivered AS (
                 DELETE FROM deliveries d WHERE d.capture_id IN (SELECT id FROM doomed)
             )
             SELECT count(*) FROM doomed",
        )
        .bind(webhook_id)
        .bind(keep)
        .fetch_one(pool)
        .await
        .map(|row: (i64,)| row.0 as u64)?;
        deleted += adjust_counts(pool, &[(webhook_id, removed as i64)]).await?;
    }
    crate::db::watch::sweep(pool).await?;
    Ok(deleted)
}

/// Deletes, in small batches, finished executions past their organization's retention (else `defaults`'), with
/// everything they own, and audit entries past theirs (never younger than the floor); answers how many of each.
pub async fn sweep_history(pool: &PgPool, defaults: RetentionDefaults) -> Result<(u64, u64), sqlx::Error> {
    let execution_days = defaults.execution_days.and_then(|d| i32::try_from(d).ok());
    let executions = in_batches(pool, |pool| {
        // The executions' children go with them: jobs, node results and events by the delete trigger, their own
        // captures by their foreign key.
        sqlx::query(
            "DELETE FROM executions WHERE id IN (
                SELECT e.id FROM organizations o
                JOIN executions e ON e.organization_id = o.id AND e.finished_at IS NOT NULL
                    AND e.finished_at < now() - make_interval(days => COALESCE(o.execution_retention_days, $2))
                WHERE COALESCE(o.execution_retention_days, $2) IS NOT NULL
                LIMIT $1)",
        )
        .bind(DELETE_BATCH)
        .bind(execution_days)
        .execute(pool)
    })
    .await?;
    let audit_days = defaults.audit_days.and_then(|d| i32::try_from(d).ok());
    let floor = i32::try_from(defaults.min_audit_days).unwrap_or(i32::MAX);
    let audit = in_batches(pool, |pool| {
        sqlx::query(
            "DELETE FROM audit_log WHERE id IN (
                SELECT a.id FROM organizations o
                JOIN audit_log a ON a.organization_id = o.id
                    AND a.created_at < now() - make_interval(days => GREATEST(COALESCE(o.audit_retention_days, $2), $3))
                WHERE COALESCE(o.audit_retention_days, $2) IS NOT NULL
                LIMIT $1)",
        )
        .bind(DELETE_BATCH)
        .bind(audit_days)
        .bind(floor)
        .execute(pool)
    })
    .await?;
    Ok((executions, audit))
}

/// Runs a delete of at most [`DELETE_BATCH`] rows until it deletes none, pausing between batches as captures'
/// sweep does; answers the rows deleted.
async fn in_batches<'p, F, Fut>(pool: &'p PgPool, mut delete: F) -> Result<u64, sqlx::Error>
where
    F: FnMut(&'p PgPool) -> Fut,
    Fut: Future<Output = Result<sqlx::postgres::PgQueryResult, sqlx::Error>>,
{
    let mut deleted = 0;
    loop {
        let started = std::time::Instant::now();
        let removed = delete(pool).await?.rows_affected();
        deleted += removed;
        if removed == 0 {
            return Ok(deleted);
        }
        tokio::time::sleep(BETWEEN_BATCHES.max(started.elapsed() * 4)).await;
    }
}

async fn adjust_counts(pool: &PgPool, removed: &[(WebhookId, i64)]) -> Result<u64, sqlx::Error> {
    let mut total = 0;
    for (webhook_id, n) in removed.iter().filter(|(_, n)| *n > 0) {
        let mut conn = pool.acquire().await?;
        subtract_stored(&mut conn, *webhook_id, *n).await?;
        total += *n as u64;
    }
    Ok(total)
}

/// Sweeps every `settings.retention_interval` until shutdown.
pub async fn run(app: AppState) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(app.settings.retention_interval) => {}
            () = app.shutdown.cancelled() => return,
        }
        match sweep(&app.pool).await {
            Ok(0) => {}
            Ok(n) => {
                metrics::counter!("hookflow_retention_deleted_total", "kind" => "captures").increment(n);
                tracing::info!(deleted = n, "retention removed old captures");
            }
            Err(e) => tracing::warn!(error = %e, "retention sweep failed; trying again later"),
        }
        match sweep_history(&app.pool, app.settings.retention).await {
            Ok((executions, audit)) => {
                metrics::counter!("hookflow_retention_deleted_total", "kind" => "executions").increment(executions);
                metrics::counter!("hookflow_retention_deleted_total", "kind" => "audit").increment(audit);
                if executions + audit > 0 {
                    tracing::info!(executions, audit, "retention removed old executions and audit entries");
                }
            }
            Err(e) => tracing::warn!(error = %e, "retention of executions and audit failed; trying again later"),
        }
        if let Err(e) = crate::api::executions::idempotency::expire(&app.pool).await {
            tracing::warn!(error = %e, "expiring idempotency keys failed; trying again later");
        }
        if let Err(e) = crate::triggers::guard::forget_old(&app.pool).await {
            tracing::warn!(error = %e, "forgetting old trigger counts failed; trying again later");
        }
        if let Err(e) = crate::capture::signing::forget_expired_ids(&app.pool).await {
            tracing::warn!(error = %e, "forgetting expired webhook ids failed; trying again later");
        }
        if let Err(e) = crate::capture::staged::sweep(&app.pool).await {
            tracing::warn!(error = %e, "sweeping abandoned capture body parts failed; trying again later");
        }
    }
}
