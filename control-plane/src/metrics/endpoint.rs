//! `GET /metrics` on the metrics listener: what the recorder holds, plus the gauges the database knows (queue depth
//! and age, runners online, each declared runner pool's backlog, runners and slots, the connection pool) and where
//! the databases are (the primary's host, failovers seen, the read replica's lag), read at scrape time; and
//! `GET /readyz` with where the databases are (the API listener's `/readyz` says only whether it is ready:
//! strangers reach that one).

use crate::db::databases::Databases;
use crate::metrics::install;
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics::gauge;
use metrics_exporter_prometheus::PrometheusHandle;
use std::fmt::Write as _;
use std::time::Duration;
use std::time::Instant;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// What a scrape reads: the databases and how long a runner stays online without a heartbeat.
#[derive(Debug, Clone)]
struct Source {
    databases: Databases,
    heartbeat_interval: Duration,
    /// The declared runner pools, whose series exist from the first scrape (0 when empty).
    pools: std::sync::Arc<[crate::pools::RunnerPool]>,
}

/// Serves `GET /metrics` on `listener` until `shutdown` is cancelled.
pub async fn serve(
    listener: TcpListener,
    databases: Databases,
    heartbeat_interval: Duration,
    pools: std::sync::Arc<[crate::pools::RunnerPool]>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let handle = install();
    let app = Source { databases, heartbeat_interval, pools };
    let router = Router::new().route("/metrics", get(scrape)).route("/readyz", get(readyz)).with_state((app, handle));
    axum::serve(listener, router).with_graceful_shutdown(async move { shutdown.cancelled().await }).await
}

async fn scrape(State((app, handle)): State<(Source, PrometheusHandle)>) -> impl IntoResponse {
    if let Err(e) = read_gauges(&app).await {
        tracing::warn!(error = %e, "reading the queue and runner gauges failed; they keep their last values");
    }
    super::read_dropped_log_lines();
    let mut text = handle.render();
    database_lines(&app.databases, &mut text).await;
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// 200 `{"status": "ready", "database": {primary, read_replica, failovers, schema_version}}` while the primary
/// takes writes, else 503 `{"status": "unavailable", "database": ...}` with `Retry-After`.
async fn readyz(State((app, _)): State<(Source, PrometheusHandle)>) -> Response {
    let status = app.databases.status().await;
    let database = serde_json::to_value(&status).unwrap_or_default();
    if status.writable {
        return Json(serde_json::json!({"status": "ready", "database": database})).into_response();
    }
    let body = Json(serde_json::json!({"status": "unavailable", "database": database}));
    (StatusCode::SERVICE_UNAVAILABLE, [(header::RETRY_AFTER, "5")], body).into_response()
}

/// Where the databases are, written here rather than recorded: one `primary_info` series, of the host writes go
/// to now (a recorded gauge would keep the old host's series after a failover).
async fn database_lines(databases: &Databases, text: &mut String) {
    let primary = databases.primary.current().to_string().replace('\\', "\\\\").replace('"', "\\\"");
    let _ = write!(
        text,
        "# HELP hookflow_database_primary_info The database host writes go to.\n\
         # TYPE hookflow_database_primary_info gauge\n\
         hookflow_database_primary_info{{host=\"{primary}\"}} 1\n\
         # HELP hookflow_database_failovers_total Moves of the primary to another host seen by this process.\n\
         # TYPE hookflow_database_failovers_total counter\n\
         hookflow_database_failovers_total {}\n",
        databases.primary.failovers()
    );
    if databases.replica.is_some() {
        let lag = databases.lag().await.map_or_else(|| "NaN".to_owned(), |lag| lag.to_string());
        let _ = write!(
            text,
            "# HELP hookflow_database_replica_lag_seconds How far the read replica is behind (NaN while it does not answer).\n\
             # TYPE hookflow_database_replica_lag_seconds gauge\n\
             hookflow_database_replica_lag_seconds {lag}\n"
        );
    }
}

/// Gauges the database knows, read when scraped.
async fn read_gauges(app: &Source) -> Result<(), sqlx::Error> {
    let started = Instant::now();
    let pool = app.databases.pool();
    let mut conn = pool.acquire().await?;
    gauge!("hookflow_db_pool_acquire_seconds").set(started.elapsed().as_secs_f64());
    let (queued, running, oldest_s): (i64, i64, f64) = sqlx::query_as(
        // One subquery per status, so each reads its own partial index (`executions_queued`,
        // `executions_running_org`), never the table.
        "SELECT (SELECT count(*) FROM executions WHERE status = 'queued'),
                (SELECT count(*) FROM executions WHERE status = 'running'),
                coalesce(extract(epoch FROM now() - (SELECT min(created_at) FROM executions WHERE status = 'queued')),
                    0)::float8",
    )
    .fetch_one(&mut *conn)
    .await?;
    let online_after = app.heartbeat_interval.as_secs_f64() * 3.0;
    let online: i64 =
        sqlx::query_scalar("SELECT count(*) FROM runners WHERE last_seen_at > now() - make_interval(secs => $1)")
            .bind(online_after)
            .fetch_one(&mut *conn)
            .await?;
    // Pending deliveries and the oldest one's age (the partial index of due rows).
    let (pending, oldest_pending_s): (i64, f64) = sqlx::query_as(
        "SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
         FROM deliveries WHERE status = 'pending'",
    )
    .fetch_one(&mut *conn)
    .await?;
    pool_gauges(&mut conn, app, online_after).await?;
    drop(conn);
    gauge!("hookflow_deliveries_pending").set(pending as f64);
    gauge!("hookflow_delivery_oldest_pending_seconds").set(oldest_pending_s);
    gauge!("hookflow_queue_depth").set(queued as f64);
    gauge!("hookflow_queue_oldest_age_seconds").set(oldest_s);
    gauge!("hookflow_executions_running").set(running as f64);
    gauge!("hookflow_runners_online").set(online as f64);
    let (size, idle) = (pool.size(), pool.num_idle() as u32);
    gauge!("hookflow_db_pool_connections", "state" => "idle").set(f64::from(idle));
    gauge!("hookflow_db_pool_connections", "state" => "in_use").set(f64::from(size.saturating_sub(idle)));
    gauge!("hookflow_db_pool_max_connections").set(f64::from(pool.options().get_max_connections()));
    Ok(())
}

/// Each declared runner pool's numbers over every organization (`crate::pools`), labelled by the pool's name only:
/// the operator's names, never a tenant's labels.
async fn pool_gauges(conn: &mut sqlx::PgConnection, app: &Source, online_after_s: f64) -> Result<(), sqlx::Error> {
    let online_within = Duration::from_secs_f64(online_after_s);
    for pool in crate::pools::counts(conn, None, &app.pools, online_within).await? {
        let name = pool.pool;
        gauge!("hookflow_pool_queue_depth", "pool" => name.clone()).set(pool.queued as f64);
        gauge!("hookflow_pool_oldest_queued_seconds", "pool" => name.clone()).set(pool.oldest_queued_s);
        gauge!("hookflow_pool_runners_online", "pool" => name.clone()).set(pool.runners_online as f64);
        gauge!("hookflow_pool_slots", "pool" => name.clone(), "state" => "busy").set(pool.busy_slots as f64);
        gauge!("hookflow_pool_slots", "pool" => name, "state" => "idle").set(pool.idle_slots as f64);
    }
    Ok(())
}
