//! A real pg_auto_failover set on this machine (Debian's `postgresql-15-auto-failover`): a monitor, a primary and a
//! synchronous secondary, each `pg_autoctl run` in a process group of its own, on loopback ports and under one
//! directory in /tmp, run as the `postgres` user when the tests run as root. The monitor's health checks are made
//! quick (a failover in about 8 s, not 40 s), unless a test sets them otherwise. A node can be frozen (SIGSTOP to its
//! keeper and every PostgreSQL process, its kernel still acknowledging) and thawed. Dropped, or when the test process
//! dies, every process is continued, every process group killed and the directory removed.

use sqlx::ConnectOptions as _;
use sqlx::postgres::PgConnectOptions;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// How long the harness waits for one connection and its answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// Connects with `ASK_TIMEOUT`; `None` when the node does not answer in time.
async fn connect(options: &PgConnectOptions) -> Option<sqlx::PgConnection> {
    tokio::time::timeout(ASK_TIMEOUT, options.connect()).await.ok()?.ok()
}

/// The application database every node serves.
pub const DATABASE: &str = "hookflow";

/// How long one `pg_autoctl create` may take (the secondary's base backup included).
const CREATE_TIMEOUT: Duration = Duration::from_secs(240);
/// How long the set may take to reach the states a test waits for.
const STATE_TIMEOUT: Duration = Duration::from_secs(180);

/// The monitor's health checks: every second, a node unhealthy after 2 s, a primary demoted after 3 s.
const MONITOR_SETTINGS: &[(&str, &str)] = &[
    ("pgautofailover.health_check_period", "1000"),
    ("pgautofailover.health_check_timeout", "1000"),
    ("pgautofailover.health_check_max_retries", "1"),
    ("pgautofailover.health_check_retry_delay", "500"),
    ("pgautofailover.node_considered_unhealthy_timeout", "2000"),
    ("pgautofailover.primary_demote_timeout", "3000"),
];

#[derive(Debug)]
pub struct FailoverSet {
    root: PathBuf,
    bindir: PathBuf,
    pub monitor_port: u16,
    /// The data nodes' ports, `node1` first.
    pub ports: Vec<u16>,
    /// Process group of each `pg_autoctl run`: the monitor's, then each node's (`None` once killed).
    groups: Vec<Option<u32>>,
}

impl FailoverSet {
    /// Brings up the monitor, `node1` (the first primary) and `node2` (its synchronous secondary), and waits until
    /// the monitor reports them `primary` and `secondary`.
    pub async fn start() -> Self {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let root = PathBuf::from(format!("/tmp/hookflow-failover-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&root).expect("the set's directory");
        let ports = free_ports(3);
        let mut set = Self {
            bindir: bindir(),
            monitor_port: ports[0],
            ports: ports[1..].to_vec(),
            groups: Vec::new(),
            root: root.clone(),
        };
        set.prepare_directories();
        reap_when_done(&root);
        set.create_monitor().await;
        for node in 1..=2 {
            set.create_node(node).await;
            let want: &[&str] = if node == 1 { &["single"] } else { &["primary", "secondary"] };
            set.wait_for_states(want).await;
        }
        set
    }

    /// The libpq URL of every node in order, with `attrs` as `target_session_attrs`.
    pub fn url(&self, attrs: &str) -> String {
        let hosts: Vec<String> = self.ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        format!("postgres://postgres@{}/{DATABASE}?target_session_attrs={attrs}", hosts.join(","))
    }

    /// Options of a connection to node `index` (0: `node1`).
    pub fn node(&self, index: usize) -> PgConnectOptions {
        PgConnectOptions::new_without_pgpass()
            .host("127.0.0.1")
            .port(self.ports[index])
            .username("postgres")
            .database(DATABASE)
    }

    /// `127.0.0.1:<port>` of node `index`.
    pub fn address(&self, index: usize) -> String {
        format!("127.0.0.1:{}", self.ports[index])
    }

    /// The node that is primary now, asked directly.
    pub async fn primary(&self) -> Option<usize> {
        for index in 0..self.ports.len() {
            if let Some(mut conn) = connect(&self.node(index)).await {
                let recovering = sqlx::query_scalar::<_, bool>("SELECT pg_is_in_recovery()").fetch_one(&mut conn);
                if matches!(tokio::time::timeout(ASK_TIMEOUT, recovering).await, Ok(Ok(false))) {
                    return Some(index);
                }
            }
        }
        None
    }

    /// A crash of node `index`: SIGKILL to its keeper, its postmaster and every backend (a keeper left alive
    /// would restart the postmaster).
    pub fn crash(&mut self, index: usize) {
        if let Some(group) = self.groups[index + 1].take() {
            kill_group(group);
        }
    }

    /// Sets the monitor's settings (`ALTER SYSTEM`, then reloaded), e.g. a longer
    /// `pgautofailover.node_considered_unhealthy_timeout`.
    pub async fn configure_monitor(&self, settings: &[(&str, &str)]) {
        let mut conn = connect(&self.monitor_options()).await.expect("the monitor");
        for (name, value) in settings {
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("ALTER SYSTEM SET {name} = {value}")))
                .execute(&mut conn)
                .await
                .expect("a monitor setting");
        }
        sqlx::query("SELECT pg_reload_conf()").execute(&mut conn).await.expect("reload the monitor's settings");
    }

    /// A frozen node `index`: SIGSTOP to its keeper (`pg_autoctl run` and its process group) and every PostgreSQL
    /// process of its data directory. Its kernel keeps accepting connections and acknowledging what is sent; nothing
    /// answers. How many processes were stopped.
    pub fn freeze(&self, index: usize) -> usize {
        self.signal_node(index, "-STOP")
    }

    /// Continues every process `freeze` stopped.
    pub fn thaw(&self, index: usize) -> usize {
        self.signal_node(index, "-CONT")
    }

    fn signal_node(&self, index: usize, signal: &str) -> usize {
        let mut signalled = 0;
        if let Some(group) = self.groups.get(index + 1).copied().flatten() {
            let status = std::process::Command::new("kill").args([signal, "--", &format!("-{group}")]).status();
            signalled += usize::from(status.is_ok_and(|s| s.success()));
        }
        let pgdata = self.root.join(format!("node{}", index + 1));
        for pid in working_in(&pgdata) {
            let status = std::process::Command::new("kill").args([signal, &pid.to_string()]).status();
            signalled += usize::from(status.is_ok_and(|s| s.success()));
        }
        signalled
    }

    /// Waits until the monitor reports the nodes in `want` (in node order); panics after `STATE_TIMEOUT` with what
    /// it last said.
    pub async fn wait_for_states(&self, want: &[&str]) {
        let monitor = self.monitor_options();
        let deadline = tokio::time::Instant::now() + STATE_TIMEOUT;
        let mut last = Vec::new();
        while tokio::time::Instant::now() < deadline {
            if let Ok(mut conn) = monitor.connect().await {
                let states: Result<Vec<String>, _> =
                    sqlx::query_scalar("SELECT reportedstate::text FROM pgautofailover.node ORDER BY nodeid")
                        .fetch_all(&mut conn)
                        .await;
                if let Ok(states) = states {
                    if states.iter().map(String::as_str).eq(want.iter().copied()) {
                        return;
                    }
                    last = states;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("the failover set did not reach {want:?}; last states {last:?}\n{}", self.logs());
    }

    /// The tail of every `pg_autoctl run` log, for a failure's message.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for name in ["monitor", "node1", "node2"] {
            let text = std::fs::read_to_string(self.root.join(format!("{name}.log"))).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            out.push_str(&format!("--- {name}.log\n{}\n", tail.into_iter().rev().collect::<Vec<_>>().join("\n")));
        }
        out
    }

    fn monitor_options(&self) -> PgConnectOptions {
        PgConnectOptions::new_without_pgpass()
            .host("127.0.0.1")
            .port(self.monitor_port)
            .username("postgres")
            .database("pg_auto_failover")
    }

    fn prepare_directories(&self) {
        // Debian's PostgreSQL puts a lock file in /var/run/postgresql.
        std::fs::create_dir_all("/var/run/postgresql").expect("/var/run/postgresql");
        if as_root() {
            for dir in [Path::new("/var/run/postgresql"), self.root.as_path()] {
                let status =
                    std::process::Command::new("chown").arg("postgres:postgres").arg(dir).status().expect("chown");
                assert!(status.success(), "chown {}", dir.display());
            }
        }
    }

    /// `pg_autoctl` with the set's environment, as the postgres user when we are root.
    fn autoctl(&self, args: &[&str]) -> Command {
        let path = format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", self.bindir.display());
        let env = [
            format!("PATH={path}"),
            format!("XDG_CONFIG_HOME={}", self.root.join("config").display()),
            format!("XDG_DATA_HOME={}", self.root.join("share").display()),
            format!("XDG_RUNTIME_DIR={}", self.root.join("run").display()),
        ];
        let mut command = if as_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--", "env"]);
            command
        } else {
            Command::new("env")
        };
        command.args(&env).arg("pg_autoctl").args(args).stdin(Stdio::null());
        command
    }

    /// Runs a `pg_autoctl create ...` to its end, its output in `<name>-create.log`.
    async fn create(&self, name: &str, args: &[&str]) {
        let log = std::fs::File::create(self.root.join(format!("{name}-create.log"))).expect("log");
        let mut command = self.autoctl(args);
        command.stdout(log.try_clone().expect("log")).stderr(log).kill_on_drop(true);
        let status = tokio::time::timeout(CREATE_TIMEOUT, command.status())
            .await
            .unwrap_or_else(|_| panic!("pg_autoctl create {name} took over {CREATE_TIMEOUT:?}"))
            .expect("run pg_autoctl");
        let output = std::fs::read_to_string(self.root.join(format!("{name}-create.log"))).unwrap_or_default();
        assert!(status.success(), "pg_autoctl create {name} failed:\n{output}");
    }

    /// Starts `pg_autoctl run` for `name` in a process group of its own (its id noted for the reaper).
    fn run(&mut self, name: &str) {
        let log = std::fs::File::create(self.root.join(format!("{name}.log"))).expect("log");
        let pgdata = self.root.join(name);
        let mut command = self.autoctl(&["run", "--pgdata", &pgdata.display().to_string()]);
        command.stdout(log.try_clone().expect("log")).stderr(log).process_group(0);
        let child = command.spawn().expect("start pg_autoctl run");
        let group = child.id().expect("a process id");
        std::fs::write(self.root.join(format!("{name}.pgid")), group.to_string()).expect("note the group");
        self.groups.push(Some(group));
    }

    async fn create_monitor(&mut self) {
        let pgdata = self.root.join("monitor").display().to_string();
        let port = self.monitor_port.to_string();
        self.create(
            "monitor",
            &[
                "create",
                "monitor",
                "--pgdata",
                &pgdata,
                "--pgport",
                &port,
                "--hostname",
                "127.0.0.1",
                "--auth",
                "trust",
                "--no-ssl",
            ],
        )
        .await;
        self.run("monitor");
        let monitor = self.monitor_options();
        let deadline = tokio::time::Instant::now() + STATE_TIMEOUT;
        let mut conn = loop {
            match connect(&monitor).await {
                Some(conn) => break conn,
                None if tokio::time::Instant::now() > deadline => {
                    let log = std::fs::read_to_string(self.root.join("monitor.log")).unwrap_or_default();
                    panic!("the monitor never answered; its log:\n{log}")
                }
                None => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        for (name, value) in MONITOR_SETTINGS {
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("ALTER SYSTEM SET {name} = {value}")))
                .execute(&mut conn)
                .await
                .expect("a monitor setting");
        }
        sqlx::query("SELECT pg_reload_conf()").execute(&mut conn).await.expect("reload the monitor's settings");
    }

    async fn create_node(&mut self, node: usize) {
        let name = format!("node{node}");
        let pgdata = self.root.join(&name).display().to_string();
        let port = self.ports[node - 1].to_string();
        let monitor =
            format!("postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=disable", self.monitor_port);
        self.create(
            &name,
            &[
                "create",
                "postgres",
                "--pgdata",
                &pgdata,
                "--pgport",
                &port,
                "--hostname",
                "127.0.0.1",
                "--listen",
                "127.0.0.1",
                "--auth",
                "trust",
                "--no-ssl",
                "--monitor",
                &monitor,
                "--dbname",
                DATABASE,
                "--name",
                &name,
                "--replication-quorum",
                "true",
            ],
        )
        .await;
        self.run(&name);
    }
}

impl Drop for FailoverSet {
    fn drop(&mut self) {
        // A frozen node's processes are continued first: nothing is left stopped, whatever the test did.
        for index in 0..self.ports.len() {
            self.thaw(index);
        }
        for group in self.groups.iter_mut().filter_map(Option::take) {
            kill_group(group);
        }
        kill_working_in(&self.root);
        std::thread::sleep(Duration::from_millis(300));
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn kill_group(group: u32) {
    let _ = std::process::Command::new("kill").args(["-KILL", "--", &format!("-{group}")]).status();
}

/// Every process whose working directory is under `root`.
fn working_in(root: &Path) -> Vec<u32> {
    let Ok(processes) = std::fs::read_dir("/proc") else { return Vec::new() };
    processes
        .filter_map(Result::ok)
        .filter_map(|process| {
            let pid = process.file_name().to_str()?.parse::<u32>().ok()?;
            std::fs::read_link(process.path().join("cwd")).ok()?.starts_with(root).then_some(pid)
        })
        .collect()
}

/// Kills every process whose working directory is under `root`. PostgreSQL's children leave the postmaster's
/// process group, and the monitor's healthcheck worker outlives a killed postmaster (keeping its logger alive):
/// killing the groups alone left both running after every failover test.
fn kill_working_in(root: &Path) {
    for pid in working_in(root) {
        let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
}

/// The PostgreSQL server binaries (pg_ctl and friends) that pg_autoctl runs.
fn bindir() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|dirs| {
            dirs.filter_map(Result::ok).map(|d| d.path().join("bin")).filter(|b| b.join("pg_ctl").exists()).collect()
        })
        .unwrap_or_default();
    found.sort();
    found.pop().expect("PostgreSQL server binaries under /usr/lib/postgresql/*/bin")
}

/// Ports free on 127.0.0.1 now (bound and let go).
/// `n` ports free now, below the kernel's range of ephemeral ports (32768 and up by default): an outgoing connection
/// of the load never takes one between this choice and PostgreSQL's bind (which, after a run of thousands of loopback
/// connections, made the monitor fail to start now and then).
fn free_ports(n: usize) -> Vec<u16> {
    let start = 20_000 + u16::try_from(std::process::id() % 5_000).unwrap_or(0);
    let mut ports = Vec::new();
    let mut listeners = Vec::new();
    for port in (start..32_000).chain(20_000..start) {
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            listeners.push(listener);
            ports.push(port);
            if ports.len() == n {
                return ports;
            }
        }
    }
    panic!("no {n} free ports between 20000 and 32000")
}

/// A detached watcher that, once this test process exits, kills every process group of the set and every process
/// working in its directory, and removes the directory.
fn reap_when_done(root: &Path) {
    let script = r#"for f in "$2"/*.pgid; do [ -e "$f" ] && env kill -KILL -- "-$(cat "$f")" 2>/dev/null; done
for p in /proc/[0-9]*; do case "$(readlink "$p/cwd" 2>/dev/null)" in "$2"/*) env kill -KILL "${p#/proc/}" 2>/dev/null;; esac; done
sleep 1; rm -rf "$2""#;
    crate::cluster::after_exit(script, root, "the failover set");
}

/// Whether Debian's pg_auto_failover is installed (`pg_autoctl` on PATH).
pub fn installed() -> bool {
    std::process::Command::new("pg_autoctl")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
