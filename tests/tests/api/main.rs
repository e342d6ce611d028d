//! End-to-end API tests: the real router on 127.0.0.1:0 over a real, freshly cloned PostgreSQL database.
//! One binary with modules, so the suite links once.

/// The runner daemon built from the runner crate's `main.rs` (this package's `hookflow-runner-under-test`).
pub const RUNNER: &str = env!("CARGO_BIN_EXE_hookflow-runner-under-test");
/// The server built from its own `main.rs` (this package's `hookflow-server-under-test`).
pub const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");

mod analytics;
mod app_audit;
mod app_browser;
mod app_signatures;
mod app_webhook_nodes;
mod auth;
mod capture;
mod catalog;
mod cli_run;
mod cli_tools;
mod collection_sync;
mod collections;
mod conventions;
mod credential_failures;
mod deploy_files;
mod docs_links;
mod embedded_cluster;
mod engine;
mod execution_cleanup;
mod executions;
mod fair_shares;
mod field_rules;
mod flows;
mod history;
mod isolation_captures;
mod isolation_network;
mod isolation_secrets;
mod keys;
mod launch_drafts;
mod limits_connections;
mod limits_fleet;
mod limits_outage;
mod limits_parsers;
mod limits_server;
mod limits_writers;
mod master_keys;
mod openapi;
mod organization;
mod people_external;
mod people_external_binding;
mod people_invitations;
mod people_members;
mod people_sessions;
mod private_network;
mod queue_at_scale;
mod queue_batching;
mod queue_completion_results;
mod queue_polls;
mod resources;
mod runner_e2e;
mod signatures;
mod signatures_endpoint;
mod startup;
mod stream;
mod triggers;
mod triggers_replicas;
mod variables;
mod webhook_nodes;
mod webhook_nodes_elsewhere;
mod webhooks;
mod wire_shapes;
