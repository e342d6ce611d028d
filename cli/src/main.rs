//! `hookflow`: the command-line client for CI pipelines and scripts.

use clap::Parser;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "hookflow",
    version,
    about = "hookflow CLI: launch flows from CI, manage keys, tail webhooks.",
    after_help = "Credentials come from SERVICE_URL, SERVICE_API_KEY and SERVICE_ORGANIZATION_ID. The commands arrive \
                  with the execution work; this build has none yet."
)]
struct Args {}

fn main() -> ExitCode {
    let _ = Args::parse();
    eprintln!("hookflow: no commands in this build yet; see --help");
    ExitCode::from(2)
}
