//! Opening the database for the server and the operator commands: a configured URL, or the embedded cluster in
//! the data directory (started, adopted after a crash, or — for an operator command while a server runs —
//! simply connected to). Migrations run before anything else touches the schema.

use crate::db::data_dir::{self, DataDirError, DataDirLock};
use crate::db::embedded::{ClusterOptions, Durability, EmbeddedCluster};
use crate::db::{self, EMBEDDED_DATABASE};
use sqlx::PgPool;
use std::error::Error;

/// Who is opening: a server takes the data directory's lock; an operator command may share a running server's
/// cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opener {
    Server,
    Operator,
}

#[derive(Debug)]
pub struct Storage {
    pub pool: PgPool,
    /// Set when we started (or adopted) the embedded cluster and must stop it on close.
    owned_cluster: Option<EmbeddedCluster>,
    _lock: Option<DataDirLock>,
}

/// Where the database is: a URL, or the embedded cluster in a data directory.
#[derive(Debug, Clone)]
pub struct StorageOptions {
    /// The embedded cluster's data directory (also holds the master key and the lock).
    pub data_dir: std::path::PathBuf,
    /// A PostgreSQL URL: when set, no embedded cluster is started.
    pub database_url: Option<String>,
    /// Directory holding initdb, pg_ctl and postgres (found when unset).
    pub pg_bindir: Option<std::path::PathBuf>,
    /// Where the cluster's files go when the postgres user cannot enter the data directory.
    pub embedded_cluster_dir: std::path::PathBuf,
}

pub type BoxError = Box<dyn Error + Send + Sync>;

impl Storage {
    pub async fn open(args: &StorageOptions, opener: Opener, max_connections: u32) -> Result<Self, BoxError> {
        Self::open_with(args, opener, max_connections, db::STATEMENT_TIMEOUT).await
    }

    /// As [`Storage::open`], with the statement timeout of the pool's connections.
    pub async fn open_with(
        args: &StorageOptions,
        opener: Opener,
        max_connections: u32,
        statement_timeout: std::time::Duration,
    ) -> Result<Self, BoxError> {
        if let Some(url) = args.database_url.clone() {
            let options = db::parse_url(&url).map_err(|e| format!("the database URL is not valid: {e}"))?;
            let pool = db::pool_with_timeout(options, max_connections, statement_timeout);
            migrate(&pool).await?;
            return Ok(Self { pool, owned_cluster: None, _lock: None });
        }
        data_dir::create(&args.data_dir)?;
        if nix::unistd::geteuid().is_root() {
            // The cluster, owned by the postgres user, lives inside: that user must be able to pass through.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&args.data_dir, std::fs::Permissions::from_mode(0o711))?;
        }
        let options = ClusterOptions {
            root: crate::db::cluster_home::resolve(&args.data_dir, &args.embedded_cluster_dir)?,
            durability: Durability::Durable,
            max_connections: 100,
            bindir: args.pg_bindir.clone(),
        };
        let lock = match data_dir::lock(&args.data_dir) {
            Ok(lock) => Some(lock),
            Err(DataDirError::Busy { .. }) if opener == Opener::Operator => None,
            Err(e) => return Err(e.into()),
        };
        let cluster = if lock.is_some() {
            let options = options.clone();
            let cluster = tokio::task::spawn_blocking(move || EmbeddedCluster::start(&options)).await??;
            tracing::info!(data = %cluster.data_dir().display(), adopted = cluster.adopted, "embedded PostgreSQL ready");
            Some(cluster)
        } else {
            // A running server holds the directory: its cluster is up, connect to it.
            None
        };
        let connect = EmbeddedCluster::paths(&options)?;
        db::ensure_database(connect.connect_options("postgres"), EMBEDDED_DATABASE).await?;
        let pool =
            db::pool_with_timeout(connect.connect_options(EMBEDDED_DATABASE), max_connections, statement_timeout);
        migrate(&pool).await?;
        Ok(Self { pool, owned_cluster: cluster, _lock: lock })
    }

    /// Closes the pool, then stops the embedded cluster if this process runs it.
    pub async fn close(self) -> Result<(), BoxError> {
        self.pool.close().await;
        if let Some(cluster) = self.owned_cluster {
            tokio::task::spawn_blocking(move || cluster.stop()).await??;
            tracing::info!("embedded PostgreSQL stopped");
        }
        Ok(())
    }
}

async fn migrate(pool: &PgPool) -> Result<(), BoxError> {
    db::migrate(pool).await.map_err(|e| format!("could not bring the database schema up to date: {e}").into())
}
