//! The `hookflow` binary; everything lives in the library (`hookflow_cli`).

fn main() -> std::process::ExitCode {
    hookflow_cli::main()
}
