//! Runner processes for the tests: the real `hookflow-runner` binary (built from the runner crate's `main.rs`
//! as this package's `hookflow-runner-under-test`), its output kept in a file to search for secrets.

use crate::app::Creds;
use std::path::PathBuf;
use std::process::Stdio;
use tokio::process::{Child, Command};

#[derive(Debug)]
pub struct RunnerProcess {
    pub child: Child,
    pub log: PathBuf,
}

impl RunnerProcess {
    /// Starts a runner of the server at `base` for `creds` with `labels`, logging at debug level into a temporary file.
    pub async fn spawn(binary: &str, base: &str, creds: &Creds, labels: &[&str], extra: &[&str]) -> Self {
        Self::spawn_with_env(binary, base, creds, labels, extra, &[]).await
    }

    /// As [`RunnerProcess::spawn`], with more environment variables.
    pub async fn spawn_with_env(
        binary: &str,
        base: &str,
        creds: &Creds,
        labels: &[&str],
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let log = std::env::temp_dir().join(format!("hookflow-runner-{}.log", uuid::Uuid::now_v7()));
        let file = std::fs::File::create(&log).expect("runner log file");
        let err = file.try_clone().expect("clone log file");
        let mut command = Command::new(binary);
        command
            .env("SERVICE_URL", base)
            .env("SERVICE_API_KEY", &creds.key)
            .env("SERVICE_ORGANIZATION_ID", creds.org.to_string())
            .env("RUST_LOG", "debug")
            .args(["--poll-wait-s", "5", "--grace-s", "5"])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::from(file))
            .stderr(Stdio::from(err))
            .kill_on_drop(true);
        if !labels.is_empty() {
            command.arg("--labels").arg(labels.join(","));
        }
        let child = command.spawn().expect("start hookflow-runner");
        Self { child, log }
    }

    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL: no chance to finish or report.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("kill runner");
    }

    /// SIGTERM, then the exit status.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running");
        let _ = std::process::Command::new("kill").arg("-TERM").arg(pid.to_string()).status();
        tokio::time::timeout(std::time::Duration::from_secs(30), self.child.wait())
            .await
            .expect("runner exits after SIGTERM")
            .expect("wait")
    }
}

impl Drop for RunnerProcess {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.log);
    }
}
