//! hookflow control plane: the REST + SSE API, the capture path, the execution queue, authentication and the
//! embedded PostgreSQL manager. The folders are the layers, lowest first; a module uses its own layer and those
//! below, never above, and nothing forms a circle (`tests/layers.rs` checks both; docs/DESIGN.md has the table):
//!
//! - `signals`, `crypto`, `strict_json`, `cache`, `signature/`, `slots`: wake-ups and NOTIFY channels, encryption at
//!   rest, the strict JSON reader, the bounded cache primitive (entries, weight, TTL; oldest out first) behind every
//!   in-memory cache, webhook signature verification (pure: settings in, verdicts out), ceilings on work in flight
//!   per key.
//! - `error`, `extract`, `pagination`, `validate`: the crate-wide error type, extractors (a body parsed into its
//!   fields' types), pages, the field rules for values that arrive otherwise.
//! - `db/`: connecting, the embedded cluster and where it lives, migrations, the data directory, the PATCH
//!   statement builder, group commit and its byte budgets, the replicas' watches, the owned-row reads and deletes.
//! - `metrics/`, `outbound/`, `http/`, `mail/`: the metrics and their listener, the one guarded client for requests
//!   the server itself makes, the transport (accept loop, raw heads, client addresses, allowances, bounded body
//!   reads, the observer), the SMTP settings and the queued mail sender.
//! - `auth/`, `queue/`, `capture/`, `quota/`, `schedules/`: identity (the `Auth` component and the `Caller` extractor over it: keys,
//!   sessions with the one copy of their SQL, job tokens, external issuers, signing keys, throttles), the
//!   execution state machine and its event log, the capture path (the `Capture` component and its handler, the
//!   writer, the endpoint cache, the live hub and the capture row); `quota/`: the organizations' quotas (usage
//!   read from the database, creations counted under a lock, the capture path's in-memory view); `schedules/`: flow
//!   schedules (fire times in IANA zones, catch-up planning, the rows, the launcher taking due rows once across
//!   replicas).
//! - `state`: `AppState`, the composition root: it wires the components and hands each to what takes it
//!   (`FromRef`, `Settings::claims`); nothing below it takes it.
//! - `api/`: one folder or file per resource with its routes and SQL (`webhooks/`, `analytics`, `flows/`,
//!   `executions/`, `collections/`, `resources/`, `admin/`, `people/`, `alerts/` (notification channels, alert list),
//!   `catalog`, `runner_protocol/`, `health`, the
//!   web console `app/`), the handlers' contexts over `AppState` (`context`: `Ctx`, `Person`), merged into the
//!   router and the OpenAPI document (`openapi`, `openapi_shapes`) in `api/mod.rs`.
//! - `tasks/`, `triggers/`, `delivery/`, `alerts/`, `server/`: background loops (LISTEN fan-out, retention, lease rescue,
//!   schedules); the dispatcher that launches the flows captures owe their endpoints' triggers; the sender that
//!   delivers captures to their endpoints' destinations (retries, rate limits, the circuit breaker); the alerts made
//!   from schedules' transitions and their sender to notification channels; the binary's commands (operator
//!   commands, master-key rotation), configuration, first start, open-file limit, embedded runner.
//!
//! `api::serve` runs the API on any listener; `server::run` is the binary's entry point.

pub mod alerts;
pub mod api;
pub mod auth;
pub mod cache;
pub mod capture;
pub mod crypto;
pub mod db;
pub mod delivery;
pub mod error;
pub mod extract;
pub mod http;
pub mod mail;
pub mod metrics;
pub mod outbound;
pub mod pagination;
pub mod pools;
pub mod queue;
pub mod quota;
pub mod schedules;
pub mod server;
pub mod signals;
pub mod signature;
pub mod slots;
pub mod state;
pub mod strict_json;
pub mod tasks;
pub mod triggers;
pub mod validate;
