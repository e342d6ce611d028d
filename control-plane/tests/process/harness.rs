//! The harness of the process tests: fresh data directories, server processes with their output collected,
//! operator commands, and small HTTP helpers.

use hookflow_shared::wire::header;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_hookflow-server");

/// A fresh data directory under /tmp (the postgres user must reach it); on drop, any cluster left in it is
/// stopped and the directory removed.
pub struct DataDir(pub PathBuf);

impl DataDir {
    pub fn new(tag: &str) -> Self {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        Self(PathBuf::from(format!("/tmp/hookflow-proc-{tag}-{}-{nanos}", std::process::id())))
    }
    pub fn postmaster_pid(&self) -> PathBuf {
        self.0.join("postgres/data/postmaster.pid")
    }

    /// A URL to the embedded cluster, with its password (the cluster trusts nobody).
    pub fn database_url(&self) -> String {
        let password = std::fs::read_to_string(self.0.join("postgres/password")).expect("the cluster's password");
        let socket = self.0.join("postgres/run");
        format!("postgres://hookflow:{}@localhost/hookflow?host={}", password.trim(), socket.display())
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        if let Ok(text) = std::fs::read_to_string(self.postmaster_pid())
            && let Some(pid) = text.lines().next()
        {
            let _ = Command::new("kill").args(["-QUIT", pid]).status();
            std::thread::sleep(Duration::from_millis(500));
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running server process with its output collected as it arrives.
pub struct Server {
    pub child: Child,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
}

pub fn collect(stream: impl std::io::Read + Send + 'static) -> Arc<Mutex<String>> {
    let buffer = Arc::new(Mutex::new(String::new()));
    let sink = buffer.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let mut text = sink.lock().expect("lock");
            text.push_str(&line);
            text.push('\n');
        }
    });
    buffer
}

pub fn server_command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env_remove("HOOKFLOW_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("HOOKFLOW_LISTEN")
        .env("NO_COLOR", "1")
        // Servers of this file run side by side: none takes the default metrics port unless a test asks.
        .env("HOOKFLOW_METRICS_LISTEN", "off")
        .stdin(Stdio::null());
    command
}

impl Server {
    pub fn start(dir: &Path, args: &[&str]) -> Self {
        let mut command = server_command(dir, &[&["--listen", "127.0.0.1:0"], args].concat());
        Self::spawn(&mut command)
    }

    pub fn spawn(command: &mut Command) -> Self {
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn hookflow-server");
        let out = collect(child.stdout.take().expect("stdout"));
        let err = collect(child.stderr.take().expect("stderr"));
        Self { child, out, err }
    }

    pub fn stdout(&self) -> String {
        self.out.lock().expect("lock").clone()
    }

    pub fn stderr(&self) -> String {
        self.err.lock().expect("lock").clone()
    }

    /// Waits until `needle` shows in stderr; panics with the output after `secs`.
    pub fn wait_stderr(&mut self, needle: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let err = self.stderr();
            if err.contains(needle) {
                return err;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("server exited ({status}) before `{needle}`:\n{err}\nstdout:\n{}", self.stdout());
            }
            assert!(Instant::now() < deadline, "no `{needle}` after {secs}s:\n{err}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The base URL once the server listens.
    pub fn base_url(&mut self) -> String {
        let err = self.wait_stderr("hookflow-server listening", 120);
        let line = err.lines().find(|l| l.contains("hookflow-server listening")).expect("the line");
        let at = line.find("address=").expect("address field") + "address=".len();
        let address: String = line[at..].chars().take_while(|c| !c.is_whitespace()).collect();
        format!("http://{address}")
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status().expect("kill");
        assert!(status.success());
    }

    pub fn wait_exit(&mut self, secs: u64) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // Let the reader threads drain what was written last.
                std::thread::sleep(Duration::from_millis(100));
                return status;
            }
            assert!(Instant::now() < deadline, "server still running after {secs}s:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a first start announces: where it listens, the organization and admin key it made, and the whole text.
pub struct Announced {
    pub base: String,
    pub org: String,
    pub key: String,
    pub text: String,
}

impl Server {
    /// Waits for the first start's announcement and reads it.
    pub fn announced(&mut self) -> Announced {
        let base = self.base_url();
        // Standard output is read by its own thread: the announcement may land a moment after the listening line.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.stdout().contains("api key:") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let text = self.stdout();
        Announced { base, org: field(&text, "organization id:"), key: field(&text, "api key:"), text }
    }
}

/// The value after `label` on its line of the bootstrap announcement.
pub fn field(text: &str, label: &str) -> String {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(label))
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|| panic!("no `{label}` in:\n{text}"))
}

/// `GET path` with the key: the status and the JSON answer (null when it is not JSON).
pub async fn get(base: &str, path: &str, key: &str, org: &str) -> (u16, serde_json::Value) {
    let response = send_get(base, path, key, org).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(serde_json::Value::Null))
}

/// `GET path` with the key: the answer's text.
pub async fn get_text(base: &str, path: &str, key: &str, org: &str) -> String {
    send_get(base, path, key, org).await.text().await.expect("text")
}

async fn send_get(base: &str, path: &str, key: &str, org: &str) -> reqwest::Response {
    let request = reqwest::Client::new().get(format!("{base}{path}"));
    request.header(header::API_KEY, key).header(header::ORGANIZATION, org).send().await.expect("request")
}

/// Runs an operator subcommand to completion.
pub fn operator(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = server_command(dir, args).output().expect("run operator command");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs pg_ctl on the embedded cluster behind the server's back (as the postgres user when root).
pub fn pg_ctl(dir: &DataDir, args: &[&str]) {
    let bindir = hookflow_control_plane::db::embedded::find_bindir().expect("PostgreSQL binaries");
    let data = dir.0.join("postgres/data");
    let log = dir.0.join("postgres/postgres.log");
    let mut command = if nix_is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bindir.join("pg_ctl"));
        c
    } else {
        Command::new(bindir.join("pg_ctl"))
    };
    let status = command
        .current_dir("/")
        .args(args)
        .arg("-D")
        .arg(data)
        .arg("-l")
        .arg(log)
        .arg("-w")
        .stdout(Stdio::null())
        .status()
        .expect("pg_ctl");
    assert!(status.success(), "pg_ctl {args:?}");
}

pub fn nix_is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

/// POSTs JSON with a key and answers the JSON reply.
pub async fn post_json(base: &str, path: &str, key: &str, org: &str, body: serde_json::Value) -> serde_json::Value {
    let response = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header(header::API_KEY, key)
        .header(header::ORGANIZATION, org)
        .json(&body)
        .send()
        .await
        .expect("request");
    assert!(response.status().is_success(), "{path}: {}", response.status());
    response.json().await.expect("json")
}
