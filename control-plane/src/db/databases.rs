//! The server's databases: the primary's pool with the host it follows and, with `--read-database-url`, the read
//! replica's (lists, searches, exports and analytics, which may lag); what the metrics listener's `/readyz` and `/metrics` say of them.

use crate::db::follow::{Follower, Role};
use serde::Serialize;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long `/readyz` and a scrape wait for a database's answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// The replica's lag: none on a primary, none when it has replayed all it received, else the age of the last
/// transaction it replayed.
const LAG_SQL: &str = "SELECT CASE WHEN NOT pg_is_in_recovery() THEN 0
        WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
        ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0) END::float8";

#[derive(Debug, Clone)]
pub struct Databases {
    pub primary: Arc<Follower>,
    /// The read replica's follower (`--read-database-url`).
    pub replica: Option<Arc<Follower>>,
}

/// What the metrics listener's `/readyz` answers under `database` (never the API listener's: strangers reach it).
#[derive(Debug, Clone, Serialize)]
pub struct DatabaseStatus {
    /// Whether the primary answered and takes writes.
    #[serde(skip)]
    pub writable: bool,
    /// `<host>:<port>` of the host writes go to.
    pub primary: String,
    /// The read replica, `null` without `--read-database-url`.
    pub read_replica: Option<ReplicaStatus>,
    /// Moves of the primary to another host that this process saw.
    pub failovers: u64,
    /// The last applied migration's version (`null` while the primary does not answer).
    pub schema_version: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReplicaStatus {
    /// `<host>:<port>` of the host reads go to.
    pub host: String,
    /// Seconds the replica is behind (`null` while it does not answer).
    pub lag_s: Option<f64>,
}

impl Databases {
    /// One plain pool for everything (tests, benches, the embedded cluster without a read replica).
    pub fn single(pool: PgPool) -> Self {
        Self { primary: Follower::fixed(pool, Role::Primary), replica: None }
    }

    /// The primary's pool: writes and reads of one object by id.
    pub fn pool(&self) -> &PgPool {
        self.primary.pool()
    }

    /// The pool of reads that may lag: the replica's, or the primary's without one.
    pub fn read_pool(&self) -> &PgPool {
        self.replica.as_ref().map_or(self.primary.pool(), |replica| replica.pool())
    }

    /// Starts the watches of the followers until `shutdown`.
    pub fn follow(&self, shutdown: &CancellationToken) {
        for follower in std::iter::once(&self.primary).chain(&self.replica) {
            tokio::spawn(follower.clone().follow(shutdown.clone()));
        }
    }

    /// Closes the pools.
    pub async fn close(&self) {
        if let Some(replica) = &self.replica {
            replica.pool().close().await;
        }
        self.primary.pool().close().await;
    }

    /// Whether the primary answers and takes writes (the API listener's `/readyz`, which says nothing more).
    pub async fn writable(&self) -> bool {
        let asked = sqlx::query_scalar::<_, bool>("SELECT pg_is_in_recovery()").fetch_one(self.pool());
        matches!(tokio::time::timeout(ASK_TIMEOUT, asked).await, Ok(Ok(false)))
    }

    /// The version of the last migration applied to the primary's schema (`None` while it does not answer).
    pub async fn schema_version(&self) -> Option<i64> {
        let asked = sqlx::query_scalar::<_, Option<i64>>("SELECT max(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(self.pool());
        tokio::time::timeout(ASK_TIMEOUT, asked).await.ok()?.ok()?
    }

    /// Asks the primary whether it takes writes and the replica how far behind it is.
    pub async fn status(&self) -> DatabaseStatus {
        let writable = self.writable().await;
        let read_replica = match &self.replica {
            Some(replica) => Some(ReplicaStatus { host: replica.current().to_string(), lag_s: self.lag().await }),
            None => None,
        };
        DatabaseStatus {
            writable,
            primary: self.primary.current().to_string(),
            read_replica,
            failovers: self.primary.failovers(),
            schema_version: self.schema_version().await,
        }
    }

    /// The read replica's lag in seconds, `None` without one or while it does not answer.
    pub async fn lag(&self) -> Option<f64> {
        let replica = self.replica.as_ref()?;
        let asked = sqlx::query_scalar::<_, f64>(LAG_SQL).fetch_one(replica.pool());
        match tokio::time::timeout(ASK_TIMEOUT, asked).await {
            Ok(Ok(lag)) => Some(lag.max(0.0)),
            _ => None,
        }
    }
}
