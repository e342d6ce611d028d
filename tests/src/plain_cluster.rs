//! A PostgreSQL cluster run the way an operator runs one outside hookflow: the machine's binaries, the `postgres`
//! user (when the tests run as root), its own superuser `postgres` trusted on a private Unix socket, stopped and
//! removed when the test process exits. For recipes that manage the cluster themselves (pgBackRest).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[derive(Debug)]
pub struct PlainCluster {
    pub root: PathBuf,
    pub data: PathBuf,
    pub socket: PathBuf,
    bindir: PathBuf,
}

/// Runs `program` with `args` as the postgres user (or as ourselves when not root), in `/`, with `env`.
pub fn as_postgres(program: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = if nix::unistd::geteuid().is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--", program]);
        command
    } else {
        Command::new(program)
    };
    command.args(args).envs(env.iter().copied()).current_dir("/").env("LC_ALL", "C");
    command.output().unwrap_or_else(|e| panic!("run {program}: {e}"))
}

/// Panics with the output of a command that failed.
pub fn succeeded(what: &str, output: Output) -> Output {
    assert!(
        output.status.success(),
        "{what}: {}\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

impl PlainCluster {
    /// initdb and start a cluster under a new directory in /tmp, with a database `hookflow`.
    pub fn start(what: &str) -> Self {
        let root = PathBuf::from(format!("/tmp/hookflow-{what}-{}", uuid::Uuid::new_v4().simple()));
        let script = r#"pid=$(head -n 1 "$2/data/postmaster.pid" 2>/dev/null) && kill -QUIT "$pid" 2>/dev/null
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -e "$2/data/postmaster.pid" ] || break; sleep 0.5; done
rm -rf "$2""#;
        crate::cluster::after_exit(script, &root, "a plain PostgreSQL cluster");
        std::fs::create_dir_all(root.join("run")).expect("the cluster's directory");
        if nix::unistd::geteuid().is_root() {
            succeeded(
                "chown",
                Command::new("chown").args(["-R", "postgres:postgres"]).arg(&root).output().expect("chown"),
            );
        }
        let bindir = hookflow_control_plane::db::embedded::find_bindir().expect("PostgreSQL server binaries");
        let cluster = Self { data: root.join("data"), socket: root.join("run"), root, bindir };
        let initdb = cluster.bin("initdb");
        let data = cluster.data.to_str().expect("path").to_owned();
        let args = ["-D", &data, "-U", "postgres", "--auth-local=trust", "--auth-host=reject", "--no-sync"];
        succeeded("initdb", as_postgres(&initdb, &args, &[]));
        let settings =
            format!("listen_addresses = ''\nunix_socket_directories = '{}'\nport = 5432\n", cluster.socket.display());
        let conf = cluster.data.join("postgresql.conf");
        let text = std::fs::read_to_string(&conf).expect("postgresql.conf");
        std::fs::write(&conf, format!("{text}\n{settings}")).expect("postgresql.conf");
        cluster.pg_ctl(&["start", "-w", "-t", "60"]);
        cluster.psql("CREATE DATABASE hookflow");
        cluster
    }

    pub fn bin(&self, program: &str) -> String {
        self.bindir.join(program).display().to_string()
    }

    /// `pg_ctl <args> -D <data>` as the cluster's user (logging to `<root>/postgres.log`), which must succeed.
    pub fn pg_ctl(&self, args: &[&str]) {
        let log = self.root.join("postgres.log").display().to_string();
        let data = self.data.to_str().expect("path");
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["-D", data, "-l", &log]);
        let output = as_postgres(&self.bin("pg_ctl"), &all, &[]);
        if !output.status.success() {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("pg_ctl {args:?}: {}\n{tail}", String::from_utf8_lossy(&output.stderr));
        }
    }

    /// Runs `sql` in the `postgres` database; its output, unaligned.
    pub fn psql(&self, sql: &str) -> String {
        let socket = self.socket.to_str().expect("path");
        let args = ["-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", socket, "-d", "postgres", "-c", sql];
        let output = succeeded("psql", as_postgres(&self.bin("psql"), &args, &[]));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// The URL of database `hookflow` for a server.
    pub fn url(&self) -> String {
        format!("postgres://postgres@localhost/hookflow?host={}", self.socket.display())
    }

    /// The cluster's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.root.join("postgres.log")).unwrap_or_default()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}
