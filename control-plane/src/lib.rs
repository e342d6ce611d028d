//! hookflow control plane: the REST + SSE API, the capture path, the execution queue, authentication and the
//! embedded PostgreSQL manager. The folders are the layers, lowest first:
//!
//! - `signals`, `crypto`, `state`: wake-ups and NOTIFY channels, encryption at rest, and `AppState` (plain data).
//! - `db/`: connecting, the embedded cluster, migrations, the data directory, the PATCH statement builder.
//! - `http/`: the listener and router, errors, extractors, authentication, pagination, field checks, OpenAPI.
//! - `outbound/`: the one guarded client for requests the server itself makes.
//! - `queue/`: the execution state machine (create, claim, report, lease, finish, release) and its event log.
//! - `tasks/`: background loops (LISTEN fan-out, retention, lease rescue, schedules).
//! - one folder per resource, with its routes and SQL together: `webhooks/`, `capture/`, `analytics`, `flows/`,
//!   `executions/`, `collections/`, `resources`, `admin/`, `catalog`, `runner_protocol/`.
//! - `app/`: the web console's page shells and scripts, embedded in the binary and served at `/`.
//! - `metrics`: the Prometheus metrics and their listener.
//! - `server/`: the binary's commands (serve, operator commands), configuration, first start, embedded runner.
//!
//! `http::serve` runs the API on any listener; `server::run` is the binary's entry point.

pub mod api;
pub mod auth;
pub mod capture;
pub mod crypto;
pub mod db;
pub mod error;
pub mod extract;
pub mod http;
pub mod metrics;
pub mod outbound;
pub mod pagination;
pub mod queue;
pub mod server;
pub mod signals;
pub mod state;
pub mod strict_json;
pub mod tasks;
pub mod validate;
