//! A real SMTP server in the test: Python's aiosmtpd (`tests/smtp/server.py`) on 127.0.0.1, each received message
//! written to a directory as JSON (sender, recipients, subject, decoded body, raw message), which the test reads.
//! The server stops when this handle is dropped. [`SmtpServer::start_tls`] starts one speaking TLS (STARTTLS,
//! required before mail, or TLS from the first byte) with a certificate for 127.0.0.1 from a CA made by `openssl`
//! for that test alone.

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
    /// Whether it came over TLS.
    #[serde(default)]
    pub tls: bool,
}

impl Received {
    /// The first link in the body that starts with `prefix`.
    pub fn link(&self, prefix: &str) -> Option<String> {
        self.body.split_whitespace().find(|word| word.starts_with(prefix)).map(str::to_owned)
    }
}

/// How a TLS server of the tests protects its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTlsMode {
    /// STARTTLS offered, and required before any mail (`smtp://...?tls=required`).
    StartTls,
    /// TLS from the first byte (`smtps://`).
    Smtps,
}

#[derive(Debug)]
pub struct SmtpServer {
    /// `127.0.0.1:<port>`.
    pub address: String,
    /// The URL scheme and query for it: `smtp://`, `smtps://`, or `smtp://` with `?tls=required`.
    scheme: &'static str,
    query: &'static str,
    directory: PathBuf,
    _child: Child,
}

fn mail_directory() -> PathBuf {
    let directory = std::env::temp_dir().join(format!("hookflow-smtp-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&directory).expect("mail directory");
    directory
}

fn openssl(directory: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(directory)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("openssl runs");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA and a certificate for 127.0.0.1 it issued, in `directory`: `ca.pem`, `server.pem`, `server.key`.
fn make_certificates(directory: &std::path::Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=hookflow test CA"]);
    openssl(directory, &ca);
    let mut request = vec!["req"];
    request.extend(ec);
    request.extend(["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"]);
    openssl(directory, &request);
    std::fs::write(
        directory.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .expect("extensions");
    openssl(
        directory,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    );
}

impl SmtpServer {
    pub async fn start() -> Self {
        Self::launch(mail_directory(), &[], "smtp", "").await
    }

    /// A server speaking TLS as `mode` says, with a certificate for 127.0.0.1 issued by a CA made for it; answers
    /// the server and the CA's certificate (PEM), which nothing trusts unless told.
    pub async fn start_tls(mode: SmtpTlsMode) -> (Self, Vec<u8>) {
        let directory = mail_directory();
        make_certificates(&directory);
        let ca = std::fs::read(directory.join("ca.pem")).expect("the CA's certificate");
        let (cert, key) = (directory.join("server.pem"), directory.join("server.key"));
        let (cert, key) = (cert.to_str().expect("a path"), key.to_str().expect("a path"));
        let server = match mode {
            SmtpTlsMode::StartTls => {
                Self::launch(directory.clone(), &["starttls", cert, key], "smtp", "?tls=required").await
            }
            SmtpTlsMode::Smtps => Self::launch(directory.clone(), &["smtps", cert, key], "smtps", "").await,
        };
        (server, ca)
    }

    async fn launch(directory: PathBuf, args: &[&str], scheme: &'static str, query: &'static str) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/smtp/server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(&directory)
            .args(args)
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
        Self { address: format!("127.0.0.1:{port}"), scheme, query, directory, _child: child }
    }

    /// `smtp://127.0.0.1:<port>` (`smtps://` for TLS from the first byte, `?tls=required` for STARTTLS).
    pub fn url(&self) -> String {
        format!("{}://{}{}", self.scheme, self.address, self.query)
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
