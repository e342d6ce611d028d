//! `hookflow-server`: parses the command line and runs the control plane or an operator command.

use clap::Parser as _;
use hookflow_control_plane::server::{self, config::Cli};
use std::process::ExitCode;

/// mimalloc: the many small, short-lived allocations of requests and JSON cost less than with the system allocator
/// (`hookflow-bench capture`: +8% durable captures/s).
#[global_allocator]
static ALLOCATOR: hookflow_alloc::Allocator = hookflow_alloc::Allocator;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _logs = server::init_logging(&cli.logging);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("hookflow-server: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(server::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hookflow-server: {e}");
            ExitCode::FAILURE
        }
    }
}
