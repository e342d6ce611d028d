//! The embedded PostgreSQL manager: finds the machine's PostgreSQL server binaries, initialises a private cluster
//! on first use, starts it on a Unix socket only (no TCP), adopts a cluster orphaned by a killed server, and stops
//! it. As root it runs everything as the `postgres` system user, because initdb and postgres refuse root.
//! Shared by `hookflow-server` and the test harness.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The database role and socket port inside the private cluster.
pub const SUPERUSER: &str = "hookflow";
const PORT: u16 = 5432;
/// `sun_path` holds 108 bytes including the terminator.
const MAX_SOCKET_PATH: usize = 100;

/// How durable the cluster is: servers keep every PostgreSQL guarantee; throwaway test clusters trade crash
/// safety for speed (a crash loses the whole cluster anyway).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Durable,
    Throwaway,
}

#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Directory that holds the cluster (`data/`, `run/`, `postgres.log`). Created when missing.
    pub root: PathBuf,
    pub durability: Durability,
    pub max_connections: u32,
    /// Directory with initdb, pg_ctl and postgres; found automatically when `None`.
    pub bindir: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found on PATH, through `pg_config --bindir`, \
         or under /usr/lib/postgresql/*/bin. With no database URL configured, hookflow-server runs a private \
         PostgreSQL cluster from those binaries: install PostgreSQL 15 or newer (Debian/Ubuntu: \
         `apt-get install postgresql`; Fedora: `dnf install postgresql-server`; macOS: `brew install postgresql@16`), \
         or name their directory with --pg-bindir, or use an existing database with --database-url \
         (HOOKFLOW_DATABASE_URL)."
    )]
    BinariesNotFound,
    #[error(
        "running as root, the embedded PostgreSQL must run as the `postgres` system user, and there is none. \
         Install PostgreSQL from your distribution's packages (which creates that user), run hookflow-server as \
         an ordinary user, or use --database-url"
    )]
    NoPostgresUser,
    #[error(
        "the `postgres` system user cannot reach {0}: PostgreSQL runs as that user and needs to enter every parent \
         directory of its cluster. Choose a --data-dir under a directory it can enter (for example \
         /var/lib/hookflow or a fresh directory in /tmp), or give the parents search permission (chmod o+x)"
    )]
    Unreachable(PathBuf),
    #[error("{what} failed: {detail}")]
    Command { what: String, detail: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> EmbeddedError {
    let context = context.into();
    move |source| EmbeddedError::Io { context, source }
}

/// The system user PostgreSQL runs as when we are root.
#[derive(Debug, Clone, Copy)]
struct SystemUser {
    uid: u32,
    gid: u32,
}

/// A running private cluster. Dropping it does not stop it: call [`EmbeddedCluster::stop`].
#[derive(Debug, Clone)]
pub struct EmbeddedCluster {
    bindir: PathBuf,
    data: PathBuf,
    socket_dir: PathBuf,
    run_as: Option<SystemUser>,
    /// Whether the cluster was already running (left behind by a killed server) and was adopted.
    pub adopted: bool,
}

impl EmbeddedCluster {
    /// Initialises (first time) and starts the cluster, or adopts it when it is already running. Blocking.
    pub fn start(options: &ClusterOptions) -> Result<Self, EmbeddedError> {
        let bindir = match &options.bindir {
            Some(dir) => dir.clone(),
            None => find_bindir().ok_or(EmbeddedError::BinariesNotFound)?,
        };
        if !bindir.join("pg_ctl").is_file() || !bindir.join("initdb").is_file() {
            return Err(EmbeddedError::BinariesNotFound);
        }
        let run_as = if nix::unistd::geteuid().is_root() {
            let user = nix::unistd::User::from_name("postgres").ok().flatten().ok_or(EmbeddedError::NoPostgresUser)?;
            Some(SystemUser { uid: user.uid.as_raw(), gid: user.gid.as_raw() })
        } else {
            None
        };
        let root = absolute(&options.root)?;
        let data = root.join("data");
        let socket_dir = socket_dir_for(&root);
        let mut cluster = Self { bindir, data, socket_dir, run_as, adopted: false };
        cluster.private_dir(&root)?;
        cluster.private_dir(&cluster.socket_dir.clone())?;
        if run_as.is_some() {
            let probe = Command::new("runuser")
                .args(["-u", "postgres", "--", "test", "-x"])
                .arg(&root)
                .current_dir("/")
                .status()
                .map_err(io("running runuser (util-linux)"))?;
            if !probe.success() {
                return Err(EmbeddedError::Unreachable(root));
            }
        }
        if !cluster.data.join("PG_VERSION").is_file() {
            cluster.initdb(&root, options.durability)?;
        }
        cluster.write_settings(options)?;
        if cluster.pg_ctl(&["status"])?.status.success() {
            tracing::warn!(data = %cluster.data.display(), "adopting a PostgreSQL cluster left running by an earlier server");
            cluster.adopted = true;
        } else {
            let log = root.join("postgres.log");
            let started = cluster.pg_ctl(&["start", "-w", "-t", "120", "-l", &log.to_string_lossy()])?;
            if !started.status.success() {
                let tail = fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(8).collect();
                return Err(EmbeddedError::Command {
                    what: "starting PostgreSQL".into(),
                    detail: format!(
                        "{}; last lines of {}: {}",
                        String::from_utf8_lossy(&started.stderr).trim(),
                        log.display(),
                        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                    ),
                });
            }
        }
        Ok(cluster)
    }

    /// The cluster at `options.root` without starting it: to connect to one that a running server owns.
    pub fn paths(options: &ClusterOptions) -> Result<Self, EmbeddedError> {
        let root = absolute(&options.root)?;
        Ok(Self {
            bindir: options.bindir.clone().unwrap_or_default(),
            data: root.join("data"),
            socket_dir: socket_dir_for(&root),
            run_as: None,
            adopted: true,
        })
    }

    /// Connection options for `database` over the cluster's Unix socket.
    pub fn connect_options(&self, database: &str) -> sqlx::postgres::PgConnectOptions {
        sqlx::postgres::PgConnectOptions::new()
            .socket(&self.socket_dir)
            .port(PORT)
            .username(SUPERUSER)
            .database(database)
    }

    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Stops the cluster (fast shutdown: open sessions are ended, committed data is kept). Blocking.
    pub fn stop(&self) -> Result<(), EmbeddedError> {
        let out = self.pg_ctl(&["stop", "-m", "fast", "-w", "-t", "60"])?;
        if out.status.success() || !self.data.join("postmaster.pid").exists() {
            Ok(())
        } else {
            Err(EmbeddedError::Command {
                what: "stopping PostgreSQL".into(),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }

    /// A command line for `program` in the binaries directory, run as the cluster's user.
    fn command(&self, program: &str) -> Command {
        let path = self.bindir.join(program);
        let mut command = match self.run_as {
            Some(_) => {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--"]).arg(path);
                c
            }
            None => Command::new(path),
        };
        command.current_dir("/").env_remove("PGDATA").env("LC_ALL", "C");
        command
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<Output, EmbeddedError> {
        self.command("pg_ctl").args(args).arg("-D").arg(&self.data).output().map_err(io("running pg_ctl"))
    }

    /// Creates `dir` (mode 0700) and hands it to the cluster's user.
    fn private_dir(&self, dir: &Path) -> Result<(), EmbeddedError> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io(format!("creating {}", dir.display())))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io(format!("chmod {}", dir.display())))?;
        if let Some(user) = self.run_as {
            std::os::unix::fs::chown(dir, Some(user.uid), Some(user.gid))
                .map_err(io(format!("giving {} to the postgres user", dir.display())))?;
        }
        Ok(())
    }

    /// initdb into a scratch directory, then rename: a server killed mid-initdb never leaves a half cluster.
    fn initdb(&self, root: &Path, durability: Durability) -> Result<(), EmbeddedError> {
        let scratch = root.join("data.init");
        if scratch.exists() {
            fs::remove_dir_all(&scratch).map_err(io(format!("removing {}", scratch.display())))?;
        }
        let mut command = self.command("initdb");
        command.arg("-D").arg(&scratch).args(["-U", SUPERUSER, "--auth=trust", "--encoding=UTF8", "--locale=C"]);
        if durability == Durability::Throwaway {
            command.arg("--no-sync");
        }
        let out = command.output().map_err(io("running initdb"))?;
        if !out.status.success() {
            return Err(EmbeddedError::Command {
                what: "initdb".into(),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        let conf = scratch.join("postgresql.conf");
        let mut text = fs::read_to_string(&conf).map_err(io("reading postgresql.conf"))?;
        text.push_str("\n# Settings managed by hookflow-server, rewritten at every start.\ninclude 'hookflow.conf'\n");
        fs::write(&conf, text).map_err(io("writing postgresql.conf"))?;
        fs::rename(&scratch, &self.data).map_err(io("moving the new cluster into place"))
    }

    /// Rewrites `hookflow.conf` so the socket path follows the data directory if it moved.
    fn write_settings(&self, options: &ClusterOptions) -> Result<(), EmbeddedError> {
        let socket = self.socket_dir.to_string_lossy().replace('\'', "''");
        let mut text = format!(
            "listen_addresses = ''\nunix_socket_directories = '{socket}'\nport = {PORT}\nmax_connections = {}\n",
            options.max_connections
        );
        if options.durability == Durability::Throwaway {
            text.push_str("fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n");
        }
        let path = self.data.join("hookflow.conf");
        fs::write(&path, text).map_err(io(format!("writing {}", path.display())))
    }
}

fn absolute(path: &Path) -> Result<PathBuf, EmbeddedError> {
    std::path::absolute(path).map_err(io(format!("resolving {}", path.display())))
}

/// `<root>/run`, or a short directory in /tmp when that path would not fit a Unix socket address.
fn socket_dir_for(root: &Path) -> PathBuf {
    let preferred = root.join("run");
    if preferred.as_os_str().len() + ".s.PGSQL.5432".len() < MAX_SOCKET_PATH {
        return preferred;
    }
    let digest = hookflow_shared::token::hash(&root.to_string_lossy());
    let short: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    std::env::temp_dir().join(format!("hookflow-pg-{short}"))
}

/// Looks for the server binaries on PATH, then through pg_config, then under /usr/lib/postgresql/*/bin
/// (newest version first).
pub fn find_bindir() -> Option<PathBuf> {
    let has_all = |dir: &Path| ["initdb", "pg_ctl", "postgres"].iter().all(|b| dir.join(b).is_file());
    if let Some(path) = std::env::var_os("PATH")
        && let Some(dir) = std::env::split_paths(&path).find(|d| has_all(d))
    {
        // PATH may hold symlinks to a few binaries only: use the directory they point into.
        let real = fs::canonicalize(dir.join("initdb")).ok().and_then(|p| p.parent().map(Path::to_path_buf));
        return Some(real.filter(|d| has_all(d)).unwrap_or(dir));
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && has_all(&dir) {
            return Some(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let version = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, dir)| has_all(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_roots_get_a_short_socket_dir() {
        let short = socket_dir_for(Path::new("/var/lib/hookflow/postgres"));
        assert_eq!(short, Path::new("/var/lib/hookflow/postgres/run"));
        let long_root = PathBuf::from(format!("/{}", "x".repeat(120)));
        let dir = socket_dir_for(&long_root);
        assert!(dir.as_os_str().len() < 60, "{dir:?}");
        assert_eq!(dir, socket_dir_for(&long_root), "stable for the same root");
    }
}
