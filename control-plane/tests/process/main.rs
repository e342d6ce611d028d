//! Tests of the real `hookflow-server` binary as processes: one binary with modules, so it links once.

mod harness;
mod lifecycle;
mod operations;
#[path = "../../../tests/src/prometheus.rs"]
mod prometheus;
