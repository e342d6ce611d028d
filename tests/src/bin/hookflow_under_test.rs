//! The `hookflow` CLI, built here so the tests can run the real binary (`CARGO_BIN_EXE_hookflow-under-test`).

fn main() -> std::process::ExitCode {
    hookflow_cli::main()
}
