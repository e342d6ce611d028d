//! A destination as stored and as the API answers it, and the checks of what is written: the URL (scheme,
//! length, a literal private address refused without `runner_labels` unless the organization may reach private
//! targets), the search conditions, the schedule and the limits, each refusal naming its field.

use crate::api::webhooks::search::{self, Cond};
use crate::error::{ApiError, ApiResult};
use chrono::{DateTime, Utc};
use hookflow_runner::outbound::Guard;
use hookflow_shared::api::destinations::{
    DISABLE_AFTER_FAILING_MIN, Destination, RATE_LIMIT_MAX, RETRY_DELAY_MAX, RETRY_SCHEDULE_MAX, Signing,
    TIMEOUT_MS_MAX, TIMEOUT_MS_MIN, URL_MAX,
};
use hookflow_shared::api::runners::NetworkPolicy;
use hookflow_shared::api::search::SearchFilter;
use hookflow_shared::api::triggers::TRIGGER_Q_MAX;
use hookflow_shared::{DestinationId, WebhookId};
use sqlx::PgPool;
use sqlx::types::Json;

/// Destination columns (from `destinations`, not aliased); never the sealed secret.
pub const DESTINATION_COLUMNS: &str = "id, webhook_id, name, url, q, filter, runner_labels, retry_schedule_s,
    timeout_ms, rate_limit_per_s, disable_after_failing_s, signing, enabled, disabled_reason, created_at, updated_at";

#[derive(Debug, sqlx::FromRow)]
pub struct DestinationRow {
    pub id: DestinationId,
    pub webhook_id: WebhookId,
    pub name: String,
    pub url: String,
    pub q: Option<String>,
    pub filter: Option<Json<SearchFilter>>,
    pub runner_labels: Vec<String>,
    pub retry_schedule_s: Vec<i32>,
    pub timeout_ms: i32,
    pub rate_limit_per_s: Option<i32>,
    pub disable_after_failing_s: i32,
    pub signing: Option<String>,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<DestinationRow> for Destination {
    fn from(row: DestinationRow) -> Self {
        let unsigned = |n: i32| u32::try_from(n).unwrap_or_default();
        Destination {
            id: row.id,
            webhook_id: row.webhook_id,
            name: row.name,
            url: row.url,
            q: row.q,
            filter: row.filter.map(|f| f.0),
            runner_labels: row.runner_labels,
            retry_schedule_s: row.retry_schedule_s.into_iter().map(unsigned).collect(),
            timeout_ms: unsigned(row.timeout_ms),
            rate_limit_per_s: row.rate_limit_per_s.map(unsigned),
            disable_after_failing_s: unsigned(row.disable_after_failing_s),
            signing: row.signing.as_deref().filter(|s| *s == "standard-webhooks").map(|_| Signing::StandardWebhooks),
            enabled: row.enabled,
            disabled_reason: row.disabled_reason,
            created_at: row.created_at.into(),
            updated_at: row.updated_at.into(),
            signing_secret: None,
        }
    }
}

/// Refuses a URL that is not `http(s)`, is too long, or (delivered by the server, `direct`) names a literal
/// address the organization's policy does not reach. A name is not resolved here: it is checked at each attempt.
pub fn check_url(url: &str, direct: bool, policy: NetworkPolicy) -> ApiResult<()> {
    if url.chars().count() > URL_MAX {
        return Err(ApiError::invalid(format!("invalid field `url`: at most {URL_MAX} characters")));
    }
    let parsed =
        reqwest::Url::parse(url).map_err(|e| ApiError::invalid(format!("invalid field `url`: not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none_or(str::is_empty) {
        return Err(ApiError::invalid("invalid field `url`: an http or https URL with a host"));
    }
    if parsed.fragment().is_some() || !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(ApiError::invalid("invalid field `url`: no fragment and no credentials in the URL"));
    }
    if direct {
        Guard::new(policy).check_url(&parsed).map_err(|e| ApiError::invalid(format!("invalid field `url`: {e}")))?;
    }
    Ok(())
}

/// The search conditions a capture must meet to be delivered (none: every capture), checked as a search's.
pub fn conditions(q: Option<&str>, filter: Option<&SearchFilter>) -> ApiResult<Vec<Cond>> {
    let mut conds = match filter {
        Some(filter) => search::from_filter(filter).map_err(|e| named(e, "filter"))?,
        None => Vec::new(),
    };
    if let Some(q) = q {
        if q.chars().count() > TRIGGER_Q_MAX {
            return Err(ApiError::invalid(format!("invalid field `q`: at most {TRIGGER_Q_MAX} characters")));
        }
        conds.extend(search::from_text(q).map_err(|e| named(e, "q"))?);
    }
    search::check_conditions(&conds).map_err(|e| named(e, "q"))?;
    Ok(conds)
}

/// The conditions, with their JSON paths checked by the database.
pub async fn check_conditions(pool: &PgPool, q: Option<&str>, filter: Option<&SearchFilter>) -> ApiResult<()> {
    let conds = conditions(q, filter)?;
    search::check_json_paths(pool, &conds).await.map_err(|e| named(e, "filter"))
}

fn named(error: ApiError, field: &str) -> ApiError {
    if error.code == hookflow_shared::ErrorCode::InvalidRequest {
        ApiError::invalid(format!("invalid field `{field}`: {}", error.message))
    } else {
        error
    }
}

/// The schedule as stored; refused past 20 entries or outside 1 to 86400 seconds.
pub fn check_schedule(schedule: &[u32]) -> ApiResult<Vec<i32>> {
    if schedule.len() > RETRY_SCHEDULE_MAX {
        return Err(ApiError::invalid(format!(
            "invalid field `retry_schedule_s`: at most {RETRY_SCHEDULE_MAX} entries"
        )));
    }
    if schedule.iter().any(|s| !(1..=RETRY_DELAY_MAX).contains(s)) {
        return Err(ApiError::invalid(format!(
            "invalid field `retry_schedule_s`: each delay 1 to {RETRY_DELAY_MAX} seconds"
        )));
    }
    Ok(schedule.iter().map(|s| *s as i32).collect())
}

pub fn check_timeout(timeout_ms: u32) -> ApiResult<i32> {
    if !(TIMEOUT_MS_MIN..=TIMEOUT_MS_MAX).contains(&timeout_ms) {
        return Err(ApiError::invalid(format!(
            "invalid field `timeout_ms`: {TIMEOUT_MS_MIN} to {TIMEOUT_MS_MAX} milliseconds"
        )));
    }
    Ok(timeout_ms as i32)
}

pub fn check_rate(rate: u32) -> ApiResult<i32> {
    if !(1..=RATE_LIMIT_MAX).contains(&rate) {
        return Err(ApiError::invalid(format!("invalid field `rate_limit_per_s`: 1 to {RATE_LIMIT_MAX} a second")));
    }
    Ok(rate as i32)
}

pub fn check_disable_after(seconds: u32) -> ApiResult<i32> {
    match i32::try_from(seconds) {
        Ok(s) if seconds >= DISABLE_AFTER_FAILING_MIN => Ok(s),
        _ => Err(ApiError::invalid(format!(
            "invalid field `disable_after_failing_s`: at least {DISABLE_AFTER_FAILING_MIN} seconds"
        ))),
    }
}

/// A new signing secret: `whsec_` + base64 of 24 random bytes.
pub fn new_signing_secret() -> String {
    use base64::Engine as _;
    use rand::Rng as _;
    let mut bytes = [0u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// The name a destination's signing secret is sealed under (bound to it: a sealed value moved to another row
/// does not open).
pub fn secret_name(id: DestinationId) -> String {
    format!("destination-signing:{id}")
}
