//! Where the credentials come from: flags, else `SERVICE_URL`, `SERVICE_API_KEY` and `SERVICE_ORGANIZATION_ID`.
//! A missing one is a one-line error naming the variable; the key is never printed, not even by `Debug`.

use crate::error::CliError;
use clap::Args;
use hookflow_runner::env::{SERVICE_API_KEY, SERVICE_ORGANIZATION_ID, SERVICE_URL};
use hookflow_shared::OrgId;
use hookflow_shared::redacted::Redacted;

/// The server a local `hookflow-server` listens on by default.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

#[derive(Debug, Clone, Args)]
pub struct CredentialArgs {
    /// Base URL of the hookflow server.
    #[arg(long = "url", env = SERVICE_URL, global = true, value_name = "URL")]
    pub url: Option<String>,
    /// API key (prefer the environment variable: flags show up in process lists).
    #[arg(long = "api-key", env = SERVICE_API_KEY, hide_env_values = true, global = true, value_name = "KEY")]
    pub api_key: Option<Redacted<String>>,
    /// Organization the key belongs to.
    #[arg(long = "organization-id", env = SERVICE_ORGANIZATION_ID, global = true, value_name = "UUID")]
    pub organization_id: Option<String>,
    /// Allow a plain-http server on another machine (the key then crosses the network in clear text).
    /// The variable takes 1/0, true/false, yes/no, on/off.
    #[arg(long = "insecure-http", env = "SERVICE_INSECURE_HTTP", global = true,
        value_parser = clap::builder::BoolishValueParser::new())]
    pub insecure_http: bool,
}

/// Checked credentials.
#[derive(Debug, Clone)]
pub struct Credentials {
    pub base_url: String,
    pub api_key: Redacted<String>,
    pub organization_id: OrgId,
}

impl CredentialArgs {
    pub fn resolve(&self) -> Result<Credentials, CliError> {
        let api_key = self
            .api_key
            .clone()
            .filter(|k| !k.trim().is_empty())
            .ok_or_else(|| CliError::usage(format!("no API key: set {SERVICE_API_KEY} or pass --api-key")))?;
        let organization =
            self.organization_id.as_deref().map(str::trim).filter(|o| !o.is_empty()).ok_or_else(|| {
                CliError::usage(format!("no organization: set {SERVICE_ORGANIZATION_ID} or pass --organization-id"))
            })?;
        let organization_id = organization.parse::<OrgId>().map_err(|_| {
            CliError::usage(format!("{SERVICE_ORGANIZATION_ID} (--organization-id) is not a UUID: {organization:?}"))
        })?;
        let base_url = self.url.as_deref().map(str::trim).filter(|u| !u.is_empty()).unwrap_or(DEFAULT_URL);
        let base_url = hookflow_runner::client::check_base_url(base_url, self.insecure_http)
            .map_err(|e| CliError::usage(format!("{SERVICE_URL} (--url): {e}")))?;
        Ok(Credentials { base_url, api_key, organization_id })
    }
}
