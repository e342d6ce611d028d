//! Database access: starting transactions safely (`begin`), connecting (to a configured URL or the embedded cluster), libpq's connection strings, the pools
//! and the hosts they follow (the primary, a read replica), cutting the connections to a host that froze, the
//! deadlines the server keeps itself (a request's own: `deadline`), migrations, the data directory, where the
//! embedded cluster lives, copies of it (backups), the PATCH statement builder, the replicas' watches, group commit
//! with its byte budgets, the organizations' shares of the pool, and `json` parameters kept as written.

pub mod basebackup;
pub mod begin;
pub mod byte_budget;
pub mod cluster_home;
pub mod conninfo;
pub mod data_dir;
pub mod databases;
pub mod deadline;
pub mod embedded;
pub mod fence;
pub mod follow;
pub mod group_commit;
pub mod json_text;
pub mod owned;
pub mod shares;
pub mod storage;
pub mod update;
pub mod watch;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The migrations in `migrations/`, compiled into the binary. Migrations newer than this binary knows are
/// tolerated (a rolling upgrade runs the previous release beside the new one, on the new one's schema): those it
/// knows are still checked against what was applied, and a newer schema is logged at start.
pub static MIGRATOR: sqlx::migrate::Migrator = {
    let mut migrator = sqlx::migrate!("../migrations");
    migrator.ignore_missing = true;
    migrator
};

/// The newest migration this binary carries.
pub fn newest_known_migration() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Name of the application database inside the embedded cluster.
pub const EMBEDDED_DATABASE: &str = "hookflow";

/// How long a request waits for a connection before answering 503 (a connection opened for it included).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long opening a connection outside a pool (start-up, the watch's own) may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How far past the statement timeout the server gives a statement up itself: a host that froze never runs its
/// own timeout, so the writers stop waiting at the statement timeout plus this.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(2);

/// The statement timeout of this process's pools, in milliseconds (the longest given).
static STATEMENT_TIMEOUT_MS: AtomicU64 = AtomicU64::new(STATEMENT_TIMEOUT.as_millis() as u64);

/// How long the server waits for a statement before giving it up itself: the statement timeout plus a margin.
pub fn statement_deadline() -> Duration {
    Duration::from_millis(STATEMENT_TIMEOUT_MS.load(Ordering::Relaxed)) + DEADLINE_MARGIN
}

/// Parses a `postgres://` URL, refusing anything else with a message that says what is expected.
pub fn parse_url(url: &str) -> Result<PgConnectOptions, sqlx::Error> {
    PgConnectOptions::from_str(url)
}

/// How long a statement may run unless the server is told otherwise.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// A pool whose connections log slow statements only (so query text never floods the logs) and cancel statements
/// that run longer than [`STATEMENT_TIMEOUT`].
pub fn pool(options: PgConnectOptions, max_connections: u32) -> PgPool {
    pool_with_timeout(options, max_connections, STATEMENT_TIMEOUT)
}

/// As [`pool`], with another statement timeout.
pub fn pool_with_timeout(options: PgConnectOptions, max_connections: u32, statement_timeout: Duration) -> PgPool {
    pool_options(max_connections).connect_lazy_with(connection_options(options, statement_timeout))
}

/// What every connection of the server's pools gets: the statement timeout, slow statements logged only.
pub fn connection_options(options: PgConnectOptions, statement_timeout: Duration) -> PgConnectOptions {
    let millis = u64::try_from(statement_timeout.as_millis()).unwrap_or(u64::MAX);
    STATEMENT_TIMEOUT_MS.fetch_max(millis, Ordering::Relaxed);
    let timeout = format!("{}ms", statement_timeout.as_millis().max(1));
    options
        .options([("statement_timeout", timeout.as_str())])
        .log_statements(tracing::log::LevelFilter::Trace)
        .log_slow_statements(tracing::log::LevelFilter::Warn, Duration::from_secs(1))
}

/// The server's pools: at most `max_connections`, none kept open for nothing, acquired within 5 s or 503.
pub fn pool_options(max_connections: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .min_connections(0)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        // No ping before every use (a round trip on each request); a connection found broken is dropped on
        // use and the next acquire opens a fresh one.
        .test_before_acquire(false)
}

/// Creates `name` in the cluster `admin` points at unless it exists (`admin` names an existing database).
pub async fn ensure_database(admin: PgConnectOptions, name: &str) -> Result<(), sqlx::Error> {
    let mut conn =
        tokio::time::timeout(CONNECT_TIMEOUT, admin.connect()).await.map_err(|_| sqlx::Error::PoolTimedOut)??;
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(name)
        .fetch_one(&mut conn)
        .await?;
    if !exists {
        let quoted = name.replace('"', "\"\"");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{quoted}\""))).execute(&mut conn).await?;
    }
    Ok(())
}

/// Brings the schema up to date. Safe with several servers starting at once (sqlx takes an advisory lock). A
/// migration may rewrite a large table: it runs on a connection without the statement timeout.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    let mut conn = pool.acquire().await?;
    sqlx::query("SET statement_timeout = 0").execute(&mut *conn).await?;
    let result = MIGRATOR.run(&mut *conn).await;
    let _ = sqlx::query("RESET statement_timeout").execute(&mut *conn).await;
    result?;
    let applied: Option<i64> =
        sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success").fetch_one(&mut *conn).await?;
    if let Some(applied) = applied.filter(|v| *v > newest_known_migration()) {
        tracing::warn!(
            schema_version = applied,
            known = newest_known_migration(),
            "the database schema is newer than this server knows (a newer release migrated it): running on it as \
             the previous release; upgrade this server next"
        );
    }
    Ok(())
}
