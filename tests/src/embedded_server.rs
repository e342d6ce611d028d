//! A real `hookflow-server` on the embedded cluster of its own data directory (no `--database-url`), as an operator
//! runs it: started, asked, stopped with SIGTERM so its cluster stops with it; and its operator commands run on
//! that data directory.

use crate::server::{field, first_start_credentials, line_with};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

#[derive(Debug)]
pub struct EmbeddedServer {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub org: String,
    pub key: String,
}

/// A data directory under /tmp (the postgres user must enter every parent), whose cluster is stopped and whose
/// files are removed once the test process exits, however it ends.
pub fn data_dir(what: &str) -> PathBuf {
    let dir = PathBuf::from(format!("/tmp/hookflow-{what}-{}", uuid::Uuid::new_v4().simple()));
    let script = r#"pid=$(head -n 1 "$2/postgres/data/postmaster.pid" 2>/dev/null) && kill -QUIT "$pid" 2>/dev/null
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -e "$2/postgres/data/postmaster.pid" ] || break; sleep 0.5; done
rm -rf "$2""#;
    crate::cluster::after_exit(script, &dir, "an embedded server's data directory");
    dir
}

impl EmbeddedServer {
    /// Starts `binary` on `data` (127.0.0.1 port 0, no embedded runner, no metrics listener). `known`: the
    /// organization and key of a database that is not new (a restored one), else those its first start prints.
    pub async fn start(binary: &str, data: &Path, known: Option<(String, String)>) -> Self {
        let mut child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0", "--embedded-runner", "off", "--metrics-listen", "off"])
            .arg("--data-dir")
            .arg(data)
            .env("NO_COLOR", "1")
            .env_remove("HOOKFLOW_DATABASE_URL")
            .env_remove("DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn hookflow-server");
        let mut out = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut err = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let (org, key) = match known {
            Some(known) => known,
            None => first_start_credentials(&mut out).await,
        };
        let listening = line_with(&mut err, "hookflow-server listening").await;
        let address = field(&listening, "address=");
        // Keep draining the pipes so the server never blocks on a full one.
        tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });
        tokio::spawn(async move {
            while let Ok(Some(line)) = err.next_line().await {
                if line.contains("ERROR") {
                    eprintln!("server: {line}");
                }
            }
        });
        Self { child, base: format!("http://{address}"), org, key }
    }

    /// A request to `path` as the server's organization and key.
    pub fn request(&self, client: &reqwest::Client, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        client
            .request(method, format!("{}{path}", self.base))
            .header("x-api-key", &self.key)
            .header("x-organization-id", &self.org)
    }

    /// SIGTERM, then waits for the server to stop its cluster and exit (SIGKILL after a minute).
    pub async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
        }
        if tokio::time::timeout(Duration::from_secs(60), self.child.wait()).await.is_err() {
            let _ = self.child.start_kill();
            let _ = self.child.wait().await;
        }
    }
}

/// What an operator command printed, and whether it succeeded.
#[derive(Debug)]
pub struct Ran {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `binary --data-dir data <args>` (no database URL) to its end.
pub async fn operator(binary: &str, data: &Path, args: &[&str]) -> Ran {
    let output = Command::new(binary)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("HOOKFLOW_DATABASE_URL")
        .env_remove("DATABASE_URL")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run an operator command");
    Ran {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
