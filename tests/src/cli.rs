//! The real `hookflow` binary (built from the CLI library as this package's `hookflow-under-test`), run with
//! credentials in its environment, its output and exit code collected, bounded in time.

use crate::app::Creds;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};

/// What a finished CLI run printed and answered.
#[derive(Debug)]
pub struct CliOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    /// Both streams, for assertion messages and secret scans.
    pub fn all(&self) -> String {
        format!("exit {}\n--- stdout\n{}\n--- stderr\n{}", self.code, self.stdout, self.stderr)
    }
}

/// The binary (tests pass `env!("CARGO_BIN_EXE_hookflow-under-test")`) and the server it talks to.
#[derive(Debug, Clone)]
pub struct Cli {
    pub binary: &'static str,
    pub base: String,
}

impl Cli {
    /// A `hookflow` command as `creds` (none: no credential variables at all).
    pub fn command(&self, creds: Option<&Creds>, args: &[&str]) -> Command {
        command(self.binary, &self.base, creds, args)
    }

    /// Runs `hookflow args...` to its end (at most 60 s).
    pub async fn run(&self, creds: Option<&Creds>, args: &[&str]) -> CliOutput {
        finish(self.command(creds, args).spawn().expect("start hookflow")).await
    }
}

fn command(binary: &str, base: &str, creds: Option<&Creds>, args: &[&str]) -> Command {
    let mut command = Command::new(binary);
    command
        .env_remove("SERVICE_API_KEY")
        .env_remove("SERVICE_ORGANIZATION_ID")
        .env_remove("CI")
        .env("SERVICE_URL", base)
        .env("NO_COLOR", "1")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(creds) = creds {
        command.env("SERVICE_API_KEY", &creds.key).env("SERVICE_ORGANIZATION_ID", creds.org.to_string());
    }
    command
}

/// Waits for a started CLI (at most 60 s) and collects its output.
pub async fn finish(child: Child) -> CliOutput {
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("hookflow finishes within 60 s")
        .expect("hookflow output");
    CliOutput {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A CLI still running, its output read line by line as it comes.
#[derive(Debug)]
pub struct Running {
    child: Child,
    stdout: tokio::sync::mpsc::UnboundedReceiver<String>,
    stderr: tokio::sync::mpsc::UnboundedReceiver<String>,
    seen_stdout: Vec<String>,
    seen_stderr: Vec<String>,
}

fn lines(reader: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    use tokio::io::AsyncBufReadExt as _;
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(reader).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

impl Cli {
    /// Starts `hookflow args...` and returns at once.
    pub fn start(&self, creds: Option<&Creds>, args: &[&str]) -> Running {
        let mut child = self.command(creds, args).spawn().expect("start hookflow");
        let stdout = lines(child.stdout.take().expect("stdout"));
        let stderr = lines(child.stderr.take().expect("stderr"));
        Running { child, stdout, stderr, seen_stdout: Vec::new(), seen_stderr: Vec::new() }
    }
}

impl Running {
    /// Waits (at most 20 s) for a line on standard error containing `needle`.
    pub async fn wait_stderr(&mut self, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let line = tokio::time::timeout_at(deadline, self.stderr.recv()).await;
            match line {
                Ok(Some(line)) => {
                    self.seen_stderr.push(line.clone());
                    if line.contains(needle) {
                        return line;
                    }
                }
                _ => panic!("no stderr line with {needle:?}; saw {:?}", self.seen_stderr),
            }
        }
    }

    /// The next line on standard output (at most 20 s).
    pub async fn stdout_line(&mut self) -> String {
        let line = tokio::time::timeout(Duration::from_secs(20), self.stdout.recv()).await;
        match line {
            Ok(Some(line)) => {
                self.seen_stdout.push(line.clone());
                line
            }
            _ => panic!("no stdout line; stderr so far {:?}", self.seen_stderr),
        }
    }

    /// Waits for the exit (at most 60 s); the output includes the lines already read.
    pub async fn finish(mut self) -> CliOutput {
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("hookflow finishes within 60 s")
            .expect("hookflow exit status");
        while let Some(line) = self.stdout.recv().await {
            self.seen_stdout.push(line);
        }
        while let Some(line) = self.stderr.recv().await {
            self.seen_stderr.push(line);
        }
        CliOutput {
            code: status.code().unwrap_or(-1),
            stdout: self.seen_stdout.join("\n"),
            stderr: self.seen_stderr.join("\n"),
        }
    }
}
