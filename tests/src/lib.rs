//! The end-to-end test harness: one throwaway PostgreSQL cluster per test process (under a fresh directory in
//! /tmp, stopped and removed when the process ends), a template database migrated once and cloned for every
//! test, and `TestApp`, the real router served on 127.0.0.1:0.

pub mod app;
pub mod autofailover;
pub mod browser;
pub mod browser_audit;
pub mod cli;
pub mod cluster;
pub mod embedded_server;
pub mod exec;
pub mod netns;
pub mod notices;
pub mod oidc;
pub mod people;
pub mod plain_cluster;
pub mod previous_release;
pub mod prometheus;
pub mod provider;
pub mod proxy;
pub mod receiver;
pub mod runner;
pub mod scratch;
pub mod server;
pub mod signers;
pub mod smtp;
pub mod sse;
pub mod target;
pub mod triggers;

pub use app::{Creds, Reply, TestApp};
pub use hookflow_client::{self as client, ApiFailure, Client, Credentials};
