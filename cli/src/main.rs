//! The `hookflow` binary; everything lives in the library (`hookflow_cli`).

/// mimalloc, as in `hookflow-server`: a run's requests, JSON and templates make many small, short-lived
/// allocations, which glibc's allocator served at a cost `perf` could see.
#[global_allocator]
static ALLOCATOR: hookflow_alloc::Allocator = hookflow_alloc::Allocator;

fn main() -> std::process::ExitCode {
    hookflow_cli::main()
}
