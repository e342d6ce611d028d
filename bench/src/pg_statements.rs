//! PostgreSQL's execution time per statement (`pg_stat_statements`) for the benches that ask for it: the setting
//! that loads the module, the reset before the measured part and the table printed after it.

use crate::load::BoxError;

/// The lines of `postgresql.conf` that load the module (it takes a restart of the cluster) and count planning too.
pub const PRELOAD: &str = "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track_planning = on";

/// Creates the extension where needed and forgets what was counted so far (warm-up, set-up).
pub async fn reset(pool: &sqlx::PgPool) -> Result<(), BoxError> {
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").execute(pool).await?;
    sqlx::query("SELECT pg_stat_statements_reset()").execute(pool).await?;
    Ok(())
}

/// Prints the statements that took the most time since [`reset`], per `unit` (`count` of them were measured).
pub async fn print_top(pool: &sqlx::PgPool, count: u64, unit: &str) -> Result<(), BoxError> {
    let top: Vec<(i64, f64, f64, f64, String)> = sqlx::query_as(
        "SELECT calls, total_exec_time, mean_exec_time, total_plan_time, regexp_replace(query, '\\s+', ' ', 'g')
         FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 15",
    )
    .fetch_all(pool)
    .await?;
    println!("  PostgreSQL's execution time by statement (pg_stat_statements), per {unit} of the rounds:");
    for (calls, total, mean, planning, query) in top {
        let text: String = query.chars().take(110).collect();
        println!(
            "    {:>7.1} us/{unit}  {calls:>8} calls  {:>7.1} us/call  planning {:>6.1} us/{unit}  {text}",
            total * 1000.0 / count.max(1) as f64,
            mean * 1000.0,
            planning * 1000.0 / count.max(1) as f64
        );
    }
    Ok(())
}
