//! A real `hookflow-server` process over a fresh database of the test cluster: its address, the first start's
//! organization and admin key, and its process id (to read its memory from `/proc`).

use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

/// Waits for a line of a child's output containing `needle`, at most two minutes.
pub async fn line_with(
    lines: &mut tokio::io::Lines<BufReader<impl tokio::io::AsyncRead + Unpin>>,
    needle: &str,
) -> String {
    let wait = async {
        while let Some(line) = lines.next_line().await.expect("read output") {
            if line.contains(needle) {
                return line;
            }
        }
        panic!("the output ended before `{needle}`");
    };
    tokio::time::timeout(Duration::from_secs(120), wait).await.unwrap_or_else(|_| panic!("no `{needle}` in time"))
}

/// The organization id and admin key a first start prints on its standard output.
pub async fn first_start_credentials(
    out: &mut tokio::io::Lines<BufReader<impl tokio::io::AsyncRead + Unpin>>,
) -> (String, String) {
    let org = line_with(out, "organization id:").await.rsplit(' ').next().expect("org").to_owned();
    let key = line_with(out, "api key:").await.rsplit(' ').next().expect("key").to_owned();
    (org, key)
}

/// The value after `name` in a log line, up to the next space.
pub fn field(line: &str, name: &str) -> String {
    let start = line.find(name).map_or(line.len(), |at| at + name.len());
    line[start..].chars().take_while(|c| !c.is_whitespace()).collect()
}

/// The server under test on 127.0.0.1 port 0 over `database_url` and `data`, its output piped, killed when dropped.
pub fn command(binary: &str, database_url: &str, data: &std::path::Path) -> Command {
    command_with_open_files(binary, database_url, data, None)
}

/// As [`command`], with the process's open-file limit (soft and hard) set to `open_files` by util-linux's
/// `prlimit`, which then executes the binary (so the child's pid is the server's).
pub fn command_with_open_files(
    binary: &str,
    database_url: &str,
    data: &std::path::Path,
    open_files: Option<u64>,
) -> Command {
    let mut command = match open_files {
        Some(limit) => {
            let mut command = Command::new("prlimit");
            command.arg(format!("--nofile={limit}:{limit}")).arg("--").arg(binary);
            command
        }
        None => Command::new(binary),
    };
    command
        .args(["--listen", "127.0.0.1:0", "--database-url", database_url])
        .arg("--data-dir")
        .arg(data)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Keeps what a child writes on `lines` in `output` (the last [`KEPT_LINES`]); with `warnings`, its warnings and
/// errors also go to the test's output (shown when it fails).
fn keep_output(
    output: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>,
    mut lines: tokio::io::Lines<BufReader<impl tokio::io::AsyncRead + Unpin + Send + 'static>>,
    warnings: bool,
) {
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if warnings && (line.contains("WARN") || line.contains("ERROR")) {
                eprintln!("server: {line}");
            }
            let mut kept = output.lock().expect("output");
            if kept.len() == KEPT_LINES {
                kept.pop_front();
            }
            kept.push_back(line);
        }
    });
}

#[derive(Debug)]
pub struct ServerProcess {
    pub child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// `127.0.0.1:<port>`.
    pub address: String,
    pub org: String,
    pub key: String,
    pub database_url: String,
    /// The metrics listener's address, when `--metrics-listen` gave one.
    pub metrics: Option<String>,
    data: std::path::PathBuf,
    /// Every line the server wrote after starting (the last 20,000), for tests that look for what must not be there.
    output: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>,
}

/// Lines of output a server process keeps for [`ServerProcess::output`].
const KEPT_LINES: usize = 20_000;

impl ServerProcess {
    /// Starts `binary` (the server under test) on 127.0.0.1 port 0 with no embedded runner nor metrics listener,
    /// plus `extra` arguments.
    pub async fn spawn(binary: &str, extra: &[&str]) -> Self {
        let database_url = crate::cluster::fresh_database_url().await;
        Self::start(binary, database_url, extra, None).await
    }

    /// As [`ServerProcess::spawn`], with the server's open-file limit (soft and hard) at `open_files`.
    pub async fn spawn_with_open_files(binary: &str, open_files: u64, extra: &[&str]) -> Self {
        let database_url = crate::cluster::fresh_database_url().await;
        Self::start_limited(binary, database_url, extra, None, Some(open_files)).await
    }

    /// The server's open files now (entries of `/proc/<pid>/fd`).
    pub fn open_files(&self) -> usize {
        let pid = self.child.id().expect("running");
        std::fs::read_dir(format!("/proc/{pid}/fd")).map(Iterator::count).unwrap_or(0)
    }

    /// As [`ServerProcess::spawn`], over `database_url` (an empty database: this start makes the first
    /// organization and key). With `--metrics-listen` in `extra`, `metrics` is the address it took.
    pub async fn spawn_at(binary: &str, database_url: &str, extra: &[&str]) -> Self {
        Self::start(binary, database_url.to_owned(), extra, None).await
    }

    /// Another server on `first`'s database (as a replica, or the next start after a crash), with a data directory
    /// of its own; it prints no first start, so `first`'s organization and key are its own.
    pub async fn spawn_beside(binary: &str, first: &ServerProcess, extra: &[&str]) -> Self {
        let known = (first.org.clone(), first.key.clone());
        Self::start(binary, first.database_url.clone(), extra, Some(known)).await
    }

    async fn start(binary: &str, database_url: String, extra: &[&str], known: Option<(String, String)>) -> Self {
        Self::start_limited(binary, database_url, extra, known, None).await
    }

    async fn start_limited(
        binary: &str,
        database_url: String,
        extra: &[&str],
        known: Option<(String, String)>,
        open_files: Option<u64>,
    ) -> Self {
        let data = std::env::temp_dir().join(format!("hookflow-process-{}", uuid::Uuid::new_v4()));
        let mut child = command_with_open_files(binary, &database_url, &data, open_files)
            .args(["--embedded-runner", "off"])
            .args(extra)
            .env("HOOKFLOW_METRICS_LISTEN", "off")
            .spawn()
            .expect("spawn hookflow-server");
        let mut out = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut err = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let (org, key) = match known {
            Some(known) => known,
            None => first_start_credentials(&mut out).await,
        };
        let mut metrics = None;
        let listening = loop {
            let line = line_with(&mut err, "listening").await;
            if line.contains("metrics listening") {
                metrics = Some(field(&line, "address="));
            } else if line.contains("hookflow-server listening") {
                break line;
            }
        };
        let address = field(&listening, "address=");
        let output = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        keep_output(output.clone(), err, true);
        keep_output(output.clone(), out, false);
        Self { child, base: format!("http://{address}"), address, org, key, database_url, metrics, data, output }
    }

    /// POSTs `body` to `path` as organization `org` with `key`; the JSON answer.
    pub async fn post_as(&self, org: &str, key: &str, path: &str, body: &serde_json::Value) -> serde_json::Value {
        let reply = reqwest::Client::new()
            .post(format!("{}{path}", self.base))
            .header("x-api-key", key)
            .header("x-organization-id", org)
            .json(body)
            .send()
            .await
            .expect("send");
        reply.json().await.expect("a JSON answer")
    }

    /// Runs an operator command of the same binary on this server's database and data directory; its output.
    pub async fn operator(&self, binary: &str, args: &[&str]) -> String {
        let output = Command::new(binary)
            .args(["--database-url", &self.database_url])
            .arg("--data-dir")
            .arg(&self.data)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .await
            .expect("run an operator command");
        assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// A new organization with an admin key, made by the operator commands: (organization id, key).
    pub async fn organization(&self, binary: &str, name: &str) -> (String, String) {
        let created = self.operator(binary, &["orgs", "create", "--name", name]).await;
        let field = |text: &str, label: &str| {
            let line = text.lines().find(|l| l.trim_start().starts_with(label)).expect(label);
            line.rsplit(' ').next().expect("value").to_owned()
        };
        let org = field(&created, "organization id:");
        let key =
            self.operator(binary, &["keys", "create", "--org", &org, "--scopes", "webhooks:read,webhooks:write"]).await;
        (org, field(&key, "key:"))
    }

    /// What the server wrote so far (stdout and stderr, after its start-up lines).
    pub fn output(&self) -> String {
        self.output.lock().expect("output").iter().map(String::as_str).collect::<Vec<_>>().join("\n")
    }

    /// The process's peak resident memory so far (`VmHWM`), in bytes.
    pub fn peak_rss(&self) -> u64 {
        let pid = self.child.id().expect("running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM");
        line.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()).expect("kB") * 1024
    }

    /// Stops the process and removes its data directory.
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
        let _ = std::fs::remove_dir_all(&self.data);
    }
}
