//! A real SMTP server in the test: Python's aiosmtpd (`tests/smtp/server.py`) on 127.0.0.1, each received message
//! written to a directory as JSON (sender, recipients, subject, decoded body, raw message), which the test reads.
//! The server stops when this handle is dropped.

use serde::Deserialize;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncBufReadExt as _;
use tokio::process::{Child, Command};

/// One message as the SMTP server received it.
#[derive(Debug, Clone, Deserialize)]
pub struct Received {
    pub from: String,
    pub to: Vec<String>,
    pub subject: String,
    /// The text body, decoded from its transfer encoding.
    pub body: String,
    /// The whole message as sent (headers and encoded body).
    pub raw: String,
}

impl Received {
    /// The first link in the body that starts with `prefix`.
    pub fn link(&self, prefix: &str) -> Option<String> {
        self.body.split_whitespace().find(|word| word.starts_with(prefix)).map(str::to_owned)
    }
}

#[derive(Debug)]
pub struct SmtpServer {
    /// `127.0.0.1:<port>`.
    pub address: String,
    directory: PathBuf,
    _child: Child,
}

impl SmtpServer {
    pub async fn start() -> Self {
        let directory = std::env::temp_dir().join(format!("hookflow-smtp-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&directory).expect("mail directory");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/smtp/server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(&directory)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 with aiosmtpd (pip install aiosmtpd)");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the SMTP server starts within 30 s")
            .expect("read")
            .expect("the SMTP server says where it listens (is aiosmtpd installed?)");
        let port = line.strip_prefix("listening ").expect("listening <port>").trim().to_owned();
        Self { address: format!("127.0.0.1:{port}"), directory, _child: child }
    }

    /// `smtp://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("smtp://{}", self.address)
    }

    /// The server's settings for it, sending as `hookflow <hookflow@example.com>`.
    pub fn settings(&self) -> hookflow_control_plane::mail::SmtpSettings {
        hookflow_control_plane::mail::SmtpSettings::parse(&self.url(), Some("hookflow <hookflow@example.com>"), None)
            .expect("SMTP settings")
    }

    /// Every message received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&self.directory)
            .expect("mail directory")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|p| serde_json::from_str(&std::fs::read_to_string(p).expect("read mail")).expect("a mail record"))
            .collect()
    }

    /// The messages to `to` so far.
    pub fn to(&self, to: &str) -> Vec<Received> {
        self.received().into_iter().filter(|m| m.to.iter().any(|t| t.eq_ignore_ascii_case(to))).collect()
    }

    /// Waits (up to 30 s) until `count` messages to `to` arrived; answers them.
    pub async fn wait_for(&self, to: &str, count: usize) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let mails = self.to(to);
            if mails.len() >= count {
                return mails;
            }
            assert!(tokio::time::Instant::now() < deadline, "{count} mail(s) to {to} within 30 s; got {mails:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}
