//! The embedded PostgreSQL manager: finds the machine's PostgreSQL server binaries, initialises a private cluster
//! on first use, starts it on a Unix socket only (no TCP), adopts a cluster orphaned by a killed server, and stops
//! it. As root it runs everything as the `postgres` system user, because initdb and postgres refuse root.
//! Shared by `hookflow-server` and the test harness.

use hookflow_shared::redacted::Redacted;
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
    /// Libraries loaded at start (`shared_preload_libraries`), such as `pg_stat_statements` for tests that count
    /// statements.
    pub preload: Vec<String>,
}

impl ClusterOptions {
    /// A cluster under `root` from the binaries found automatically.
    pub fn new(root: PathBuf, durability: Durability, max_connections: u32) -> Self {
        ClusterOptions { root, durability, max_connections, bindir: None, preload: Vec::new() }
    }
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
    /// The superuser's password (the cluster takes passwords only, never trust).
    password: Redacted<String>,
    /// Whether the cluster was already running (left behind by a killed server) and was adopted.
    pub adopted: bool,
}

/// File (under the cluster root, mode 0600) holding the superuser's password.
const PASSWORD_FILE: &str = "password";
/// File (under the cluster root) naming the socket directory, when it is not `<root>/run`.
const SOCKET_POINTER: &str = "socket_dir";

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
        check_path(&root)?;
        let data = root.join("data");
        let mut cluster =
            Self { bindir, data, socket_dir: root.join("run"), run_as, password: Redacted::default(), adopted: false };
        cluster.private_dir(&root)?;
        cluster.socket_dir = cluster.socket_dir_at(&root)?;
        if run_as.is_some() && !postgres_can_enter(&root)? {
            return Err(EmbeddedError::Unreachable(root));
        }
        cluster.password = password(&root, run_as)?.into();
        if cluster.data.join("PG_VERSION").is_file() {
            // PostgreSQL refuses a group- or world-readable data directory; put back what someone loosened.
            fs::set_permissions(&cluster.data, fs::Permissions::from_mode(0o700))
                .map_err(io(format!("chmod {}", cluster.data.display())))?;
        } else {
            cluster.initdb(&root, options.durability)?;
        }
        cluster.write_settings(options)?;
        cluster.write_hba()?;
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
        let pointer = fs::read_to_string(root.join(SOCKET_POINTER)).ok().map(|p| PathBuf::from(p.trim()));
        let password = fs::read_to_string(root.join(PASSWORD_FILE)).map_err(io("reading the cluster's password"))?;
        Ok(Self {
            bindir: options.bindir.clone().unwrap_or_default(),
            data: root.join("data"),
            socket_dir: pointer.unwrap_or_else(|| root.join("run")),
            run_as: None,
            password: password.trim().to_owned().into(),
            adopted: true,
        })
    }

    /// The existing cluster at `options.root`, running or not, with the binaries and system user a start would use:
    /// for tools that work beside a server (`hookflow-server backup`).
    pub fn locate(options: &ClusterOptions) -> Result<Self, EmbeddedError> {
        let bindir = match &options.bindir {
            Some(dir) => dir.clone(),
            None => find_bindir().ok_or(EmbeddedError::BinariesNotFound)?,
        };
        let run_as = if nix::unistd::geteuid().is_root() {
            let user = nix::unistd::User::from_name("postgres").ok().flatten().ok_or(EmbeddedError::NoPostgresUser)?;
            Some(SystemUser { uid: user.uid.as_raw(), gid: user.gid.as_raw() })
        } else {
            None
        };
        Ok(Self { bindir, run_as, adopted: false, ..Self::paths(options)? })
    }

    /// Whether PostgreSQL runs on this cluster now.
    pub fn is_running(&self) -> Result<bool, EmbeddedError> {
        Ok(self.pg_ctl(&["status"])?.status.success())
    }

    /// The directory of the PostgreSQL binaries this cluster runs with (pg_basebackup, pg_verifybackup beside them).
    pub fn bindir(&self) -> &Path {
        &self.bindir
    }

    /// The directory of the cluster's Unix socket (its port is 5432).
    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    /// The system user and group that own the cluster's files, when we are root (else: ourselves).
    pub fn owner(&self) -> Option<(u32, u32)> {
        self.run_as.map(|u| (u.uid, u.gid))
    }

    /// The superuser's password (for tools such as pg_dump: `PGPASSWORD`).
    pub fn password(&self) -> &str {
        self.password.expose()
    }

    /// Connection options for `database` over the cluster's Unix socket.
    pub fn connect_options(&self, database: &str) -> sqlx::postgres::PgConnectOptions {
        sqlx::postgres::PgConnectOptions::new()
            .socket(&self.socket_dir)
            .port(PORT)
            .username(SUPERUSER)
            .password(self.password.expose())
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

    /// `<root>/run`, or, when that path is too long for a Unix socket address, a fresh private directory under the
    /// temporary directory with an unpredictable name (kept in `<root>/socket_dir` for the next start).
    fn socket_dir_at(&self, root: &Path) -> Result<PathBuf, EmbeddedError> {
        let preferred = root.join("run");
        if preferred.as_os_str().len() + ".s.PGSQL.5432".len() < MAX_SOCKET_PATH {
            self.private_dir(&preferred)?;
            return Ok(preferred);
        }
        let pointer = root.join(SOCKET_POINTER);
        if let Ok(known) = fs::read_to_string(&pointer).map(|p| PathBuf::from(p.trim()))
            && self.is_ours(&known)
        {
            return Ok(known);
        }
        let mut random = [0u8; 8];
        rand::Rng::fill_bytes(&mut rand::rng(), &mut random);
        let dir = std::env::temp_dir().join(format!("hookflow-pg-{}", hex::encode(random)));
        // Created anew (never an existing directory someone else prepared), private from the start.
        fs::DirBuilder::new().mode(0o700).create(&dir).map_err(io(format!("creating {}", dir.display())))?;
        self.private_dir(&dir)?;
        fs::write(&pointer, dir.to_string_lossy().as_bytes()).map_err(io("recording the socket directory"))?;
        Ok(dir)
    }

    /// Whether `dir` is a directory only the cluster's user can enter (mode 0700, owned by that user).
    fn is_ours(&self, dir: &Path) -> bool {
        use std::os::unix::fs::MetadataExt;
        let uid = self.run_as.map_or_else(|| nix::unistd::geteuid().as_raw(), |u| u.uid);
        fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o777 == 0o700)
    }

    /// Local connections authenticate with the superuser's password (`scram-sha-256`); nothing is trusted. The
    /// superuser may also open a replication connection (`hookflow-server backup` streams the cluster with
    /// pg_basebackup). A cluster made before this (with trust) gets its password set first, over the trusted
    /// socket, once. Reloads a running cluster whose rules changed.
    pub fn write_hba(&self) -> Result<(), EmbeddedError> {
        let path = self.data.join("pg_hba.conf");
        let hba = "# Managed by hookflow-server: local connections only, by password.\n\
                   local all all scram-sha-256\n\
                   local replication hookflow scram-sha-256\n";
        let current = fs::read_to_string(&path).map_err(io("reading pg_hba.conf"))?;
        if current == hba {
            return Ok(());
        }
        if current.lines().any(|l| !l.trim_start().starts_with('#') && l.contains("trust")) {
            self.set_password_over_trust()?;
        }
        fs::write(&path, hba).map_err(io("writing pg_hba.conf"))?;
        if self.pg_ctl(&["status"])?.status.success() {
            self.pg_ctl(&["reload"])?;
        }
        Ok(())
    }

    /// Sets the superuser's password on a cluster that still trusts local connections (made by an older server).
    fn set_password_over_trust(&self) -> Result<(), EmbeddedError> {
        let running = self.pg_ctl(&["status"])?.status.success();
        if !running {
            let started = self.pg_ctl(&["start", "-w", "-t", "120"])?;
            if !started.status.success() {
                return Err(EmbeddedError::Command {
                    what: "starting PostgreSQL to set its password".into(),
                    detail: String::from_utf8_lossy(&started.stderr).trim().to_owned(),
                });
            }
        }
        let socket = self.socket_dir.to_string_lossy().into_owned();
        let quoted = self.password.expose().replace('\'', "''");
        let out = self
            .command("psql")
            .args(["-h", &socket, "-p", &PORT.to_string(), "-U", SUPERUSER, "-d", "postgres", "-v", "ON_ERROR_STOP=1"])
            .args(["-c", &format!("ALTER ROLE {SUPERUSER} PASSWORD '{quoted}'")])
            .output()
            .map_err(io("running psql"))?;
        if !running {
            self.pg_ctl(&["stop", "-m", "fast", "-w"])?;
        }
        if !out.status.success() {
            return Err(EmbeddedError::Command {
                what: "setting the cluster's password".into(),
                detail: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(())
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
        // The password reaches initdb in a file only the cluster's user can read, removed right after.
        let pwfile = root.join("initdb.pw");
        fs::write(&pwfile, self.password.expose()).map_err(io("writing the initdb password file"))?;
        fs::set_permissions(&pwfile, fs::Permissions::from_mode(0o600)).map_err(io("chmod the password file"))?;
        if let Some(user) = self.run_as {
            std::os::unix::fs::chown(&pwfile, Some(user.uid), Some(user.gid)).map_err(io("chown the password file"))?;
        }
        let mut command = self.command("initdb");
        command.arg("-D").arg(&scratch).args(["-U", SUPERUSER, "--auth=scram-sha-256", "--encoding=UTF8"]);
        command.arg("--locale=C").arg(format!("--pwfile={}", pwfile.display()));
        if durability == Durability::Throwaway {
            command.arg("--no-sync");
        }
        let out = command.output().map_err(io("running initdb"));
        let _ = fs::remove_file(&pwfile);
        let out = out?;
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
        // The cluster's files are on a local disk, mostly in the page cache: an index lookup costs little more than
        // a sequential read, and the default (4) has the planner scan whole tables to find a few rows.
        text.push_str("random_page_cost = 1.1\n");
        if !options.preload.is_empty() {
            let libraries = options.preload.join(",").replace('\'', "");
            text.push_str(&format!("shared_preload_libraries = '{libraries}'\n"));
        }
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

/// pg_ctl starts the server through a shell command line holding the data directory's path: a path with a
/// quote, `$`, a backquote, a backslash or a control character is refused rather than quoted.
/// Whether the `postgres` system user can enter `dir` (asked as that user, so every parent counts).
pub fn postgres_can_enter(dir: &Path) -> Result<bool, EmbeddedError> {
    let probe = Command::new("runuser")
        .args(["-u", "postgres", "--", "test", "-x"])
        .arg(dir)
        .current_dir("/")
        .status()
        .map_err(io("running runuser (util-linux)"))?;
    Ok(probe.success())
}

fn check_path(path: &Path) -> Result<(), EmbeddedError> {
    let text = path.to_string_lossy();
    if text.chars().any(|c| matches!(c, '\'' | '"' | '$' | '`' | '\\') || c.is_control()) {
        return Err(EmbeddedError::Command {
            what: "choosing the cluster directory".into(),
            detail: format!("{text:?} holds a quote, $, `, \\ or a control character; choose another --data-dir"),
        });
    }
    Ok(())
}

/// The superuser's password: read from `<root>/password`, or made (32 random characters) and written there
/// (mode 0600, the cluster's user's).
fn password(root: &Path, run_as: Option<SystemUser>) -> Result<String, EmbeddedError> {
    let path = root.join(PASSWORD_FILE);
    if let Ok(known) = fs::read_to_string(&path)
        && !known.trim().is_empty()
    {
        return Ok(known.trim().to_owned());
    }
    let mut random = [0u8; 24];
    rand::Rng::fill_bytes(&mut rand::rng(), &mut random);
    let password = hex::encode(random);
    fs::write(&path, &password).map_err(io("writing the cluster's password"))?;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).map_err(io("chmod the password file"))?;
    if let Some(user) = run_as {
        std::os::unix::fs::chown(&path, Some(user.uid), Some(user.gid)).map_err(io("chown the password file"))?;
    }
    Ok(password)
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
    fn paths_pg_ctl_would_mishandle_are_refused() {
        assert!(check_path(Path::new("/var/lib/hookflow/postgres")).is_ok());
        for bad in ["/tmp/a'b", "/tmp/$(touch x)", "/tmp/`id`", "/tmp/a\nb", "/tmp/a\\b"] {
            assert!(check_path(Path::new(bad)).is_err(), "{bad}");
        }
    }
}
