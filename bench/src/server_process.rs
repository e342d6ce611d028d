//! The real `hookflow-server` binary in its own process (beside `hookflow-bench`) on its own embedded PostgreSQL,
//! for scenarios that read the server's memory and CPU apart from the load's: starting it, its resource use, and
//! a pool on its database.

use crate::load::BoxError;
use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};

/// The server process and its data directory, both gone when dropped.
pub struct ServerProcess {
    pub child: Child,
    pub dir: std::path::PathBuf,
    pub base: String,
    pub key: String,
    pub org: String,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
        // A server that could not stop its cluster leaves it running: stop it before its files go.
        stop_orphan(&self.dir);
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(self.dir.with_extension("log"));
    }
}

/// Stops (fast shutdown) the embedded PostgreSQL a server left running under `dir`, if any; waits up to 10 s.
fn stop_orphan(dir: &std::path::Path) {
    if let Some(postmaster) = postmaster(dir) {
        let _ = Command::new("kill").args(["-INT", &postmaster.to_string()]).status();
        for _ in 0..100 {
            if !std::path::Path::new(&format!("/proc/{postmaster}")).exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// The embedded PostgreSQL's postmaster under a server's data directory, while its pid file stands.
fn postmaster(dir: &std::path::Path) -> Option<u32> {
    std::fs::read_to_string(dir.join("postgres/data/postmaster.pid")).ok()?.lines().next()?.trim().parse().ok()
}

pub fn start_server() -> Result<ServerProcess, BoxError> {
    start_server_with(&[])
}

/// As [`start_server`], with `extra` arguments after the bench's own (connection caps in `extra` replace the bench's).
pub fn start_server_with(extra: &[&str]) -> Result<ServerProcess, BoxError> {
    let dir = std::path::PathBuf::from(format!("/tmp/hookflow-fleet-{}", std::process::id()));
    let mut child = spawn(&dir, "127.0.0.1:0", extra, Stdio::piped())?;
    let mut out = std::io::BufReader::new(child.stdout.take().ok_or("stdout")?);
    let (mut key, mut org, mut base) = (String::new(), String::new(), String::new());
    let mut line = String::new();
    while out.read_line(&mut line)? > 0 {
        if let Some(v) = line.trim().strip_prefix("api key:") {
            key = v.trim().to_owned();
        } else if let Some(v) = line.trim().strip_prefix("organization id:") {
            org = v.trim().to_owned();
        } else if let Some(at) = line.find("Sign in to the app at ") {
            base = line[at + 22..].split_whitespace().next().unwrap_or_default().trim_end_matches('/').to_owned();
        }
        if !key.is_empty() && !org.is_empty() && !base.is_empty() {
            break;
        }
        line.clear();
    }
    if key.is_empty() || base.is_empty() {
        return Err("the server did not print its first start".into());
    }
    // The rest of its standard output is read to the end into its log (where its standard error goes), so the
    // server never waits on a full pipe and its warnings are kept beside its data.
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.with_extension("log"));
    std::thread::spawn(move || match log {
        Ok(mut log) => std::io::copy(&mut out, &mut log),
        Err(_) => std::io::copy(&mut out, &mut std::io::sink()),
    });
    Ok(ServerProcess { child, dir, base, key, org })
}

/// Starts the server binary beside `hookflow-bench` on `dir`, listening on `listen`, its standard output to
/// `stdout`.
fn spawn(dir: &std::path::Path, listen: &str, extra: &[&str], stdout: Stdio) -> Result<Child, BoxError> {
    // Another build of the server (say, one on the system allocator) and a command to run it under (a profiler)
    // may be named for a run; by default it is the one beside this binary, run as it is.
    let binary = match std::env::var_os("HOOKFLOW_BENCH_SERVER") {
        Some(path) => std::path::PathBuf::from(path),
        None => std::env::current_exe()?.with_file_name("hookflow-server"),
    };
    if !binary.is_file() {
        return Err(format!("{} is missing: cargo build --release -p hookflow-control-plane", binary.display()).into());
    }
    // Its log goes to a file beside the data directory: a pipe nobody reads would stop the server once full.
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.with_extension("log"))?;
    let wrapper = std::env::var("HOOKFLOW_BENCH_WRAP").unwrap_or_default();
    let mut command = wrapper.split_whitespace().chain([binary.to_str().ok_or("server path")?]);
    let mut server = Command::new(command.next().ok_or("server path")?);
    server.args(command).args(["--data-dir", &dir.to_string_lossy(), "--listen", listen, "--metrics-listen", "off"]);
    // The bench's connection caps, unless `extra` names its own (the server refuses an option given twice).
    for (option, cap) in [("--max-connections", "16384"), ("--max-connections-per-address", "4096")] {
        if !extra.contains(&option) {
            server.args([option, cap]);
        }
    }
    Ok(server
        .args(["--embedded-runner", "off", "--db-max-connections", "20", "--log", "warn"])
        .args(extra)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(log)
        .spawn()?)
}

impl ServerProcess {
    /// Stops the server, adds `settings` to its cluster's `postgresql.conf` (`shared_preload_libraries`, which
    /// takes a restart), and starts it again on the same data directory and address with `extra` arguments.
    pub fn restart_with_settings(&mut self, settings: &str, extra: &[&str]) -> Result<(), BoxError> {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        self.child.wait()?;
        // A server stopped early in its start leaves its cluster running (the next start would adopt it as is).
        stop_orphan(&self.dir);
        let conf = self.dir.join("postgres/data/postgresql.conf");
        let mut text = std::fs::read_to_string(&conf)?;
        text.push_str(settings);
        std::fs::write(&conf, text)?;
        let address = self.base.trim_start_matches("http://").to_owned();
        self.child = spawn(&self.dir, &address, extra, Stdio::null())?;
        // The server listens before its cluster is up: both must answer.
        let socket = self.dir.join("postgres/run/.s.PGSQL.5432");
        for _ in 0..300 {
            if socket.exists() && std::net::TcpStream::connect(&address).is_ok() {
                std::thread::sleep(std::time::Duration::from_millis(500));
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Err(format!("the server did not listen on {address} again within 30 s").into())
    }
}

/// Resident memory (MiB) and CPU time (seconds) of a process.
pub fn usage(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(f64::NAN, |kib| kib / 1024.0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(") ").next().unwrap_or_default().split_whitespace().collect();
    let ticks: f64 = [11, 12].iter().filter_map(|i| fields.get(*i)?.parse::<f64>().ok()).sum();
    (rss, ticks / 100.0)
}

/// CPU seconds of the embedded PostgreSQL: its postmaster and every backend and helper under it.
pub fn postgres_cpu(dir: &std::path::Path) -> f64 {
    postmaster(dir).map_or(f64::NAN, postgres_cpu_of)
}

/// CPU seconds of the PostgreSQL whose data directory is `data`.
pub fn postgres_cpu_in(data: &std::path::Path) -> f64 {
    let pid = std::fs::read_to_string(data.join("postmaster.pid")).ok();
    pid.and_then(|text| text.lines().next()?.trim().parse().ok()).map_or(f64::NAN, postgres_cpu_of)
}

/// CPU seconds of a postmaster and its children.
fn postgres_cpu_of(postmaster: u32) -> f64 {
    let mut total = usage(postmaster).1;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let parent = stat.rsplit(") ").next().and_then(|rest| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if parent == Some(postmaster) {
            total += usage(pid).1;
        }
    }
    total
}

/// A small pool on the server's own database.
pub fn database(server: &ServerProcess) -> Result<sqlx::PgPool, BoxError> {
    pool_of(server, 4)
}

/// A pool of `size` connections on the server's own database.
pub fn pool_of(server: &ServerProcess, size: u32) -> Result<sqlx::PgPool, BoxError> {
    let cluster = server.dir.join("postgres");
    let password = std::fs::read_to_string(cluster.join("password"))?;
    let url =
        format!("postgres://hookflow:{}@localhost/hookflow?host={}", password.trim(), cluster.join("run").display());
    Ok(hookflow_control_plane::db::pool(hookflow_control_plane::db::parse_url(&url)?, size))
}
