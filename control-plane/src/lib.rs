//! hookflow control plane: the REST + SSE API, capture path, queue, auth and the embedded PostgreSQL manager.
//! `app::serve` runs it on any listener; `server::run` is the binary's entry point.

pub mod admin;
pub mod analytics;
pub mod app;
pub mod audit;
pub mod auth;
pub mod bootstrap;
pub mod capture;
pub mod catalog;
pub mod collections;
pub mod config;
pub mod crypto;
pub mod data_dir;
pub mod db;
pub mod embedded_runner;
pub mod error;
pub mod executions;
pub mod extract;
pub mod flows;
pub mod health;
pub mod http_server;
pub mod notify;
pub mod openapi;
pub mod operator;
pub mod outbound;
pub mod pagination;
pub mod raw_head;
pub mod resources;
pub mod retention;
pub mod runner_protocol;
pub mod scheduler;
pub mod server;
pub mod state;
pub mod storage;
pub mod webhooks;
