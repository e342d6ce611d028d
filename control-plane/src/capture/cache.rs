//! Endpoint lookups for the capture path: an in-memory map from endpoint id to what capturing needs (tenant,
//! body limit, custom response, rate limiter), invalidated by NOTIFY when an endpoint changes on any server.
//! Unknown ids are remembered for a second only, so a brand-new endpoint is live at once everywhere.

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use hookflow_shared::api::webhooks::CustomResponse;
use sqlx::PgPool;
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// How long an unknown id is answered 404 from memory.
const NEGATIVE_TTL: Duration = Duration::from_secs(1);
/// Entries kept before the map is emptied (bounds memory under floods of random ids).
const MAX_ENTRIES: usize = 100_000;

/// What the capture path needs to know about an endpoint.
#[derive(Debug)]
pub struct Endpoint {
    pub id: Uuid,
    pub org_id: Uuid,
    pub max_body_bytes: usize,
    pub response: Option<CustomResponse>,
    limiter: DefaultDirectRateLimiter,
}

impl Endpoint {
    /// `Err(wait)` when the endpoint is over its rate limit.
    pub fn check_rate(&self) -> Result<(), Duration> {
        self.limiter.check().map_err(|not_until| {
            not_until.wait_time_from(governor::clock::Clock::now(&governor::clock::DefaultClock::default()))
        })
    }
}

#[derive(Debug)]
enum Entry {
    Known(Arc<Endpoint>),
    Unknown(Instant),
}

#[derive(Debug, Default)]
pub struct EndpointCache {
    entries: RwLock<HashMap<Uuid, Entry>>,
}

type EndpointRow = (Uuid, i64, Option<sqlx::types::Json<CustomResponse>>, i32);

impl EndpointCache {
    pub async fn get(&self, pool: &PgPool, id: Uuid) -> Result<Option<Arc<Endpoint>>, sqlx::Error> {
        {
            let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
            match entries.get(&id) {
                Some(Entry::Known(endpoint)) => return Ok(Some(endpoint.clone())),
                Some(Entry::Unknown(at)) if at.elapsed() < NEGATIVE_TTL => return Ok(None),
                _ => {}
            }
        }
        let row: Option<EndpointRow> = sqlx::query_as(
            "SELECT w.organization_id, COALESCE(w.max_body_bytes, o.default_max_body_bytes), w.response,
                    o.capture_rate_limit_per_s
             FROM webhooks w JOIN organizations o ON o.id = w.organization_id WHERE w.id = $1",
        )
        .bind(id)
        .fetch_optional(pool)
        .await?;
        let entry = match row {
            Some((org_id, max_body_bytes, response, rate)) => {
                let rate = NonZeroU32::new(u32::try_from(rate).unwrap_or(1)).unwrap_or(NonZeroU32::MIN);
                Entry::Known(Arc::new(Endpoint {
                    id,
                    org_id,
                    max_body_bytes: usize::try_from(max_body_bytes).unwrap_or(0),
                    response: response.map(|r| r.0),
                    limiter: RateLimiter::direct(Quota::per_second(rate)),
                }))
            }
            None => Entry::Unknown(Instant::now()),
        };
        let found = match &entry {
            Entry::Known(endpoint) => Some(endpoint.clone()),
            Entry::Unknown(_) => None,
        };
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(id, entry);
        Ok(found)
    }

    /// Drops every endpoint of an organization (its limits changed).
    pub fn forget_organization(&self, org_id: Uuid) {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        entries.retain(|_, entry| !matches!(entry, Entry::Known(endpoint) if endpoint.org_id == org_id));
    }

    pub fn invalidate(&self, id: Uuid) {
        self.entries.write().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }

    /// Forgets everything: after the NOTIFY connection was lost, changes may have been missed.
    pub fn clear(&self) {
        self.entries.write().unwrap_or_else(|e| e.into_inner()).clear();
    }
}
