//! hookflow-runner library: the flow engine (`engine`), the runner-protocol client (`client`), one job's
//! execution and reporting (`execute`), the worker loop (`daemon`) and deliveries to destinations with runner
//! labels (`deliver`). The CLI and the server's embedded runner
//! use the same pieces as the `hookflow-runner` binary.

pub mod client;
pub mod daemon;
pub mod deliver;
pub mod engine;
pub mod execute;
pub mod outbound;
pub mod tls;

/// The environment variables the runner and the CLI read their credentials from.
pub mod env {
    pub const SERVICE_URL: &str = "SERVICE_URL";
    pub const SERVICE_API_KEY: &str = "SERVICE_API_KEY";
    pub const SERVICE_ORGANIZATION_ID: &str = "SERVICE_ORGANIZATION_ID";
}
