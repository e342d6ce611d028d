//! hookflow-runner library: the flow engine and the runner-protocol client. The engine arrives with the
//! execution work; today this crate holds the daemon's configuration so its command line is stable.

/// The environment variables the runner and the CLI read their credentials from.
pub mod env {
    pub const SERVICE_URL: &str = "SERVICE_URL";
    pub const SERVICE_API_KEY: &str = "SERVICE_API_KEY";
    pub const SERVICE_ORGANIZATION_ID: &str = "SERVICE_ORGANIZATION_ID";
}
