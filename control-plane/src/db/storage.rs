//! Opening the database for the server and the operator commands: a configured URL, or the embedded cluster in
//! the data directory (started, adopted after a crash, or — for an operator command while a server runs —
//! simply connected to). A URL may name several hosts (libpq's forms): the pool then follows the writable one, and
//! the server's read replica (`--read-database-url`) the standby. Migrations run before anything else touches the
//! schema.

use crate::db::conninfo::{self, SessionAttrs};
use crate::db::data_dir::{self, DataDirError, DataDirLock};
use crate::db::databases::Databases;
use crate::db::embedded::{ClusterOptions, Durability, EmbeddedCluster};
use crate::db::follow::{Follower, Prepare, Role};
use crate::db::{self, EMBEDDED_DATABASE};
use sqlx::PgPool;
use std::error::Error;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long a start waits for a writable primary among the URL's hosts (a failover under way).
const PRIMARY_PATIENCE: Duration = Duration::from_secs(30);

/// Who is opening: a server takes the data directory's lock; an operator command may share a running server's
/// cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opener {
    Server,
    Operator,
}

#[derive(Debug)]
pub struct Storage {
    /// The primary's pool (`databases.pool()`).
    pub pool: PgPool,
    /// The pools with the hosts they follow.
    pub databases: Databases,
    /// Stops the followers' watches.
    following: CancellationToken,
    /// Set when we started (or adopted) the embedded cluster and must stop it on close.
    owned_cluster: Option<EmbeddedCluster>,
    _lock: Option<DataDirLock>,
}

/// Where the database is: a URL, or the embedded cluster in a data directory.
#[derive(Debug, Clone)]
pub struct StorageOptions {
    /// The embedded cluster's data directory (also holds the master key and the lock).
    pub data_dir: std::path::PathBuf,
    /// A PostgreSQL URL or keyword/value string, of one host or several: when set, no embedded cluster is started.
    pub database_url: Option<String>,
    /// Where reads that may lag go (a server's lists, searches, exports, analytics); the primary's pool when unset.
    pub read_database_url: Option<String>,
    /// Directory holding initdb, pg_ctl and postgres (found when unset).
    pub pg_bindir: Option<std::path::PathBuf>,
    /// Where the cluster's files go when the postgres user cannot enter the data directory.
    pub embedded_cluster_dir: std::path::PathBuf,
    /// How long a TCP host may leave the watch unanswered before its connections are cut
    /// (`--db-tcp-user-timeout-ms`).
    pub silence_limit: Duration,
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
        let sizes = PoolSizes { max_connections, statement_timeout, silence_limit: args.silence_limit };
        let (primary, owned_cluster, lock) = match args.database_url.as_deref() {
            Some(url) => (follower(url, Role::Primary, sizes).await?, None, None),
            None => {
                let (pool, cluster, lock) = Self::open_embedded(args, opener, sizes).await?;
                (Follower::fixed(pool, Role::Primary), cluster, lock)
            }
        };
        migrate(primary.pool()).await?;
        let replica = match (&args.read_database_url, opener) {
            (Some(url), Opener::Server) => Some(follower(url, Role::Replica, sizes).await?),
            _ => None,
        };
        let databases = Databases { primary, replica };
        let following = CancellationToken::new();
        databases.follow(&following);
        Ok(Self { pool: databases.pool().clone(), databases, following, owned_cluster, _lock: lock })
    }

    /// Starts (or adopts, or joins) the embedded cluster in the data directory: its pool, the cluster when this
    /// process must stop it, and the directory's lock when this process holds it.
    async fn open_embedded(
        args: &StorageOptions,
        opener: Opener,
        sizes: PoolSizes,
    ) -> Result<(PgPool, Option<EmbeddedCluster>, Option<DataDirLock>), BoxError> {
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
            preload: Vec::new(),
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
        let pool = db::pool_with_timeout(
            connect.connect_options(EMBEDDED_DATABASE),
            sizes.max_connections,
            sizes.statement_timeout,
        );
        Ok((pool, cluster, lock))
    }

    /// Closes the pools, then stops the embedded cluster if this process runs it.
    pub async fn close(self) -> Result<(), BoxError> {
        self.following.cancel();
        self.databases.close().await;
        if let Some(cluster) = self.owned_cluster {
            tokio::task::spawn_blocking(move || cluster.stop()).await??;
            tracing::info!("embedded PostgreSQL stopped");
        }
        Ok(())
    }
}

/// How the pools of a start are sized.
#[derive(Debug, Clone, Copy)]
struct PoolSizes {
    max_connections: u32,
    statement_timeout: Duration,
    silence_limit: Duration,
}

/// The follower of a configured URL: a plain pool for one host on a Unix socket asked nothing (as before), else a
/// pool that follows the host that suits `role` (one TCP host asked nothing: watched for silence only), pointed
/// there before this returns (a primary waits for one; a read replica starts on its first host when none suits
/// yet, and its watch keeps looking).
async fn follower(url: &str, role: Role, sizes: PoolSizes) -> Result<Arc<Follower>, BoxError> {
    let what = match role {
        Role::Primary => "the database URL",
        Role::Replica => "the read database URL",
    };
    let target = conninfo::parse(url).map_err(|e| format!("{what} is not valid: {e}"))?;
    let attrs = session_attrs(&target, role).map_err(|e| format!("{what}: {e}"))?;
    if target.is_plain() && target.hosts[0].0.host.starts_with('/') {
        let pool = db::pool_with_timeout(target.hosts[0].1.clone(), sizes.max_connections, sizes.statement_timeout);
        return Ok(Follower::fixed(pool, role));
    }
    let timeout = sizes.statement_timeout;
    let prepare: Prepare = Box::new(move |options| {
        let named = options.get_application_name().is_some();
        let options = db::connection_options(options, timeout);
        match (named, role) {
            (true, _) => options,
            (false, Role::Primary) => options.application_name("hookflow"),
            (false, Role::Replica) => options.application_name("hookflow-reads"),
        }
    });
    let follower = Follower::new(role, target, attrs, db::pool_options(sizes.max_connections), &prepare)
        .with_silence_limit(sizes.silence_limit);
    let patience = if role == Role::Primary { PRIMARY_PATIENCE } else { Duration::ZERO };
    if let Err(report) = follower.find(patience).await {
        if role == Role::Primary {
            return Err(format!("no writable primary among the hosts of {what}: {report}").into());
        }
        tracing::warn!(hosts = %report, "no host of the read database URL suits yet; reads wait for one");
    }
    Ok(follower)
}

/// What a host must be: as the URL says, else a writable primary (several hosts) or a standby first (reads of
/// several hosts); one host asked nothing is used as it is. A primary cannot be asked for a read-only session.
fn session_attrs(target: &conninfo::Target, role: Role) -> Result<SessionAttrs, String> {
    let several = target.hosts.len() > 1;
    match (target.attrs, role) {
        (Some(SessionAttrs::ReadOnly | SessionAttrs::Standby | SessionAttrs::PreferStandby), Role::Primary) => {
            Err("target_session_attrs must let the server write (read-write or primary; any with one host)".into())
        }
        // `any` would take the first host that answers, a standby too: keys, sessions and writes would be read
        // from (and refused by) a replica after a failover.
        (Some(SessionAttrs::Any), Role::Primary) if several => {
            Err("target_session_attrs=any with several hosts may pick a standby: use read-write or primary".into())
        }
        (Some(attrs), _) => Ok(attrs),
        (None, Role::Primary) if several => Ok(SessionAttrs::ReadWrite),
        (None, Role::Replica) if several => Ok(SessionAttrs::PreferStandby),
        (None, _) => Ok(SessionAttrs::Any),
    }
}

async fn migrate(pool: &PgPool) -> Result<(), BoxError> {
    db::migrate(pool).await.map_err(|e| format!("could not bring the database schema up to date: {e}").into())
}
