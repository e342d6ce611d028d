//! `hookflow-runner`: the worker daemon that claims flow executions from a control plane and runs them.

use clap::Parser;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "hookflow-runner",
    version,
    about = "hookflow runner: claims flow executions from a hookflow control plane and runs them where your APIs are reachable.",
    after_help = "The runner protocol and flow engine are not released yet: this build only checks its configuration."
)]
struct Args {
    /// Base URL of the control plane.
    #[arg(long, env = "SERVICE_URL")]
    url: String,
    /// API key with the runner:complete scope (the `runner` preset).
    #[arg(long, env = "SERVICE_API_KEY", hide_env_values = true)]
    api_key: String,
    /// Organization id the key belongs to.
    #[arg(long, env = "SERVICE_ORGANIZATION_ID")]
    organization_id: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    eprintln!(
        "hookflow-runner: configuration read for {} (organization {}); the runner protocol is not released in this \
         build, so there is nothing to run yet",
        args.url, args.organization_id
    );
    let _ = args.api_key;
    ExitCode::from(2)
}
