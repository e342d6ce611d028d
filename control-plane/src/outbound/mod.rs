//! Requests the server itself makes for an organization (webhook replay, OpenAPI import by URL): the runner
//! library's guarded client under the organization's policy. Public addresses only, unless the operator put the
//! organization on the private-network allow-list (or allowed every organization); link-local and cloud
//! metadata addresses never. No redirects are followed, no proxy is used, answers are read within a limit.
//! `signed`: one signed request (destinations' deliveries, notifications) and its outcome.

pub mod signed;

use crate::error::{ApiError, ApiResult};
use hookflow_runner::outbound::{self as guard, ClientOptions, Guard, ReadError};
use hookflow_shared::OrgId;
use hookflow_shared::api::runners::NetworkPolicy;
use reqwest::Url;
use sqlx::PgPool;
use std::time::Duration;

/// Where the server may send requests for `org_id`; anywhere when the operator allowed private targets for all.
pub async fn policy_for(pool: &PgPool, allow_private_targets: bool, org_id: OrgId) -> ApiResult<NetworkPolicy> {
    if allow_private_targets {
        return Ok(NetworkPolicy::Private);
    }
    let private: Option<bool> = sqlx::query_scalar("SELECT private_network FROM organizations WHERE id = $1")
        .bind(org_id)
        .fetch_optional(pool)
        .await?;
    Ok(if private == Some(true) { NetworkPolicy::Private } else { NetworkPolicy::Public })
}

/// A guarded client for one request to `url` under `policy`; the URL is checked first (`field` names it in the
/// 400 that refuses it).
pub fn client_for(url: &Url, policy: NetworkPolicy, timeout: Duration, field: &str) -> ApiResult<reqwest::Client> {
    let guard = Guard::new(policy);
    guard.check_url(url).map_err(|e| ApiError::invalid(format!("invalid field `{field}`: {e}")))?;
    let options = ClientOptions { timeout: Some(timeout), ..ClientOptions::default() };
    Ok(guard.client(&options))
}

/// A failed request as the 400 that reports it: the guard's refusal, or what went wrong, without the URL.
pub fn failed(field: &str, error: &reqwest::Error) -> ApiError {
    let reason = match guard::refusal(error) {
        Some(refused) => refused.to_string(),
        None if error.is_timeout() => "it timed out".to_owned(),
        None if error.is_connect() => "it cannot be connected to".to_owned(),
        None => "the request failed".to_owned(),
    };
    ApiError::invalid(format!("invalid field `{field}`: {reason}"))
}

/// Reads an answer within `max` bytes.
pub async fn read(field: &str, response: reqwest::Response, max: usize) -> ApiResult<bytes::Bytes> {
    guard::read_limited(response, max).await.map_err(|e| match e {
        ReadError::Guard(refused) => ApiError::invalid(format!("invalid field `{field}`: {refused}")),
        ReadError::Transport(e) => failed(field, &e),
    })
}
