//! The queue's raw baseline, shared by both parts of `hookflow-bench queue`: claim-then-complete pairs in plain SQL
//! (`UPDATE .. SKIP LOCKED`, then a second statement) on the same database, with nothing of the protocol around them.

use crate::load::BoxError;
use std::time::Instant;

/// The raw baseline: claim with one `UPDATE .. SKIP LOCKED`, complete with a second statement.
pub async fn raw_sql_pairs(pool: &sqlx::PgPool, jobs: usize, workers: usize) -> Result<f64, BoxError> {
    sqlx::query("CREATE TABLE IF NOT EXISTS bench_jobs (id bigserial PRIMARY KEY, status text NOT NULL)")
        .execute(pool)
        .await?;
    // The same kind of partial index the executions queue has.
    sqlx::query("CREATE INDEX IF NOT EXISTS bench_jobs_queued ON bench_jobs (id) WHERE status = 'queued'")
        .execute(pool)
        .await?;
    sqlx::query("TRUNCATE bench_jobs").execute(pool).await?;
    sqlx::query("INSERT INTO bench_jobs (status) SELECT 'queued' FROM generate_series(1, $1)")
        .bind(i64::try_from(jobs)?)
        .execute(pool)
        .await?;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            let mut done = 0usize;
            loop {
                let claimed: Option<i64> = sqlx::query_scalar(
                    "UPDATE bench_jobs SET status = 'running' WHERE id = (
                         SELECT id FROM bench_jobs WHERE status = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
                     RETURNING id",
                )
                .fetch_optional(&pool)
                .await?;
                let Some(id) = claimed else { return Ok::<_, sqlx::Error>(done) };
                sqlx::query("UPDATE bench_jobs SET status = 'done' WHERE id = $1").bind(id).execute(&pool).await?;
                done += 1;
            }
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await??;
    }
    let elapsed = started.elapsed();
    sqlx::query("DROP TABLE bench_jobs").execute(pool).await?;
    Ok(total as f64 / elapsed.as_secs_f64())
}
