//! Leases kept alive by heartbeats: the jobs a runner still holds get a longer lease; the ones it lists that are
//! no longer its to run (another attempt took over, a cancel was asked for) come back to be stopped.

use hookflow_shared::{JobId, RunnerId};
use sqlx::PgPool;

/// Extends the leases of `jobs` still held by `runner_id`; returns the jobs to stop.
pub async fn extend(
    pool: &PgPool,
    runner_id: RunnerId,
    jobs: Vec<JobId>,
    lease_s: f64,
) -> Result<Vec<JobId>, sqlx::Error> {
    if jobs.is_empty() {
        return Ok(jobs);
    }
    let keep: Vec<JobId> = sqlx::query_scalar(
        "UPDATE executions e SET lease_expires_at = now() + make_interval(secs => $3)
         FROM jobs j
         WHERE j.id = ANY($1) AND j.runner_id = $2 AND e.id = j.execution_id AND e.job_id = j.id
           AND e.status = 'running' AND NOT e.cancel_requested
         RETURNING j.id",
    )
    .bind(&jobs)
    .bind(runner_id)
    .bind(lease_s)
    .fetch_all(pool)
    .await?;
    Ok(jobs.into_iter().filter(|job| !keep.contains(job)).collect())
}
