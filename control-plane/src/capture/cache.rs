//! Endpoint lookups for the capture path: an in-memory map from endpoint id to what capturing needs (tenant,
//! body limit, custom response, rate limiter), invalidated through the invalidation channel when an endpoint or
//! its organization changes on any server. Unknown ids are remembered apart, for a while (a new endpoint is
//! announced, so it is live at once everywhere): a flood of random ids fills only that map, never evicting a
//! known endpoint (and with it its rate limiter). At most `LOADS` reads run at once, and a capture that waited for
//! one looks in memory again first: a burst of captures to an endpoint memory does not know yet costs one read,
//! not one pool connection each (which starved the capture writer and failed other tenants' captures with 503).
//! Both maps are [`BoundedCache`]s: past their capacity the oldest entries leave one at a time (a flood of random
//! ids pushes out older unknown ids, never the recent ones, and never the known endpoints).

use crate::cache::BoundedCache;
use crate::capture::answer::Answers;
use crate::capture::answer::rules::RuleCond;
use crate::capture::handshake::EndpointHandshake;
use crate::capture::signing::EndpointVerification;
use crate::capture::stored_verification::StoredVerification;
pub use crate::capture::target::CaptureTarget;
use crate::crypto::{MasterKey, Sealed};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use hookflow_shared::api::webhooks::CustomResponse;
use hookflow_shared::{OrgId, WebhookId};
use sqlx::PgPool;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

/// How long an unknown id is answered 404 from memory.
const NEGATIVE_TTL: Duration = Duration::from_secs(30);
/// Unknown ids remembered at most, the oldest forgotten first (bounds memory under floods of random ids).
const MAX_UNKNOWN: usize = 100_000;
/// Known endpoints kept at most, the oldest loaded forgotten first (loaded again on their next capture).
const MAX_KNOWN: usize = 1_000_000;

/// Endpoint reads from the database running at once.
const LOADS: usize = 4;

/// What the capture path needs to know about an endpoint (or an execution's own URL, which captures as an endpoint
/// with its organization's defaults would).
#[derive(Debug)]
pub struct Endpoint {
    pub target: CaptureTarget,
    pub org_id: OrgId,
    pub max_body_bytes: usize,
    pub response: Option<CustomResponse>,
    /// How its senders sign, when it verifies signatures.
    pub verification: Option<EndpointVerification>,
    /// Its response rules and CORS settings.
    pub answers: Answers,
    /// The provider handshake it answers (issue #51).
    pub handshake: Option<EndpointHandshake>,
    limiter: DefaultDirectRateLimiter,
}

impl Endpoint {
    /// An endpoint capturing at most `rate` requests a second (at least one).
    pub fn new(target: CaptureTarget, org_id: OrgId, max_body_bytes: i64, rate: i32) -> Self {
        let rate = u32::try_from(rate).ok().and_then(NonZeroU32::new).unwrap_or(NonZeroU32::MIN);
        Self {
            target,
            org_id,
            max_body_bytes: usize::try_from(max_body_bytes).unwrap_or(0),
            response: None,
            verification: None,
            answers: Answers::default(),
            handshake: None,
            limiter: RateLimiter::direct(Quota::per_second(rate)),
        }
    }

    /// `Err(wait)` when the endpoint is over its rate limit.
    pub fn check_rate(&self) -> Result<(), Duration> {
        self.limiter.check().map_err(|not_until| {
            not_until.wait_time_from(governor::clock::Clock::now(&governor::clock::DefaultClock::default()))
        })
    }
}

/// What the cache knows of an id.
#[derive(Debug)]
pub enum Lookup {
    Known(Arc<Endpoint>),
    /// Recently found not to exist.
    Unknown,
    /// Not in memory: the database must say.
    Miss,
}

#[derive(Debug)]
pub struct EndpointCache {
    known: BoundedCache<WebhookId, Arc<Endpoint>>,
    unknown: BoundedCache<WebhookId, ()>,
    loads: tokio::sync::Semaphore,
}

impl Default for EndpointCache {
    fn default() -> Self {
        Self {
            known: BoundedCache::new(MAX_KNOWN),
            unknown: BoundedCache::new(MAX_UNKNOWN).with_ttl(NEGATIVE_TTL),
            loads: tokio::sync::Semaphore::new(LOADS),
        }
    }
}

#[derive(sqlx::FromRow)]
struct EndpointRow {
    organization_id: OrgId,
    max_body_bytes: i64,
    response: Option<sqlx::types::Json<CustomResponse>>,
    rate: i32,
    verification: Option<sqlx::types::Json<StoredVerification>>,
    verification_secrets: Option<Vec<u8>>,
    verification_nonce: Option<Vec<u8>>,
    verification_key_version: Option<i32>,
    rules: Option<sqlx::types::Json<Vec<hookflow_shared::api::answers::ResponseRule>>>,
    rule_conditions: Option<sqlx::types::Json<Vec<Vec<RuleCond>>>>,
    cors: Option<sqlx::types::Json<hookflow_shared::api::answers::Cors>>,
    handshake: Option<String>,
    handshake_secret: Option<Vec<u8>>,
    handshake_nonce: Option<Vec<u8>>,
    handshake_key_version: Option<i32>,
    mock: bool,
}

impl EndpointRow {
    fn verification(&self, master: &MasterKey, id: WebhookId) -> Option<EndpointVerification> {
        let stored = self.verification.as_ref()?.0.clone().into_verification();
        let sealed = Sealed::from_columns(
            self.verification_secrets.clone(),
            self.verification_nonce.clone(),
            self.verification_key_version,
        )?;
        Some(EndpointVerification::open(master, self.organization_id, id, &stored, &sealed))
    }

    /// The handshake with its secret: its own, else the endpoint's first verification secret (none when neither
    /// opens: the presets that need one then refuse).
    fn handshake(&self, master: &MasterKey, id: WebhookId) -> Option<EndpointHandshake> {
        let preset = hookflow_shared::api::webhooks::HandshakePreset::parse(self.handshake.as_deref()?)?;
        let own = Sealed::from_columns(
            self.handshake_secret.clone(),
            self.handshake_nonce.clone(),
            self.handshake_key_version,
        );
        let secret = match own {
            Some(sealed) => master
                .open(self.organization_id, &crate::capture::handshake::sealed_name(id), &sealed)
                .ok()
                .and_then(|plain| String::from_utf8(plain).ok()),
            None => {
                let sealed = Sealed::from_columns(
                    self.verification_secrets.clone(),
                    self.verification_nonce.clone(),
                    self.verification_key_version,
                );
                sealed
                    .and_then(|s| crate::capture::signing::open_secrets(master, self.organization_id, id, &s))
                    .and_then(|secrets| secrets.into_iter().next())
            }
        };
        Some(EndpointHandshake::new(preset, secret))
    }
}

impl EndpointCache {
    /// What memory knows of `id`.
    pub fn lookup(&self, id: WebhookId) -> Lookup {
        if let Some(endpoint) = self.known.get(&id) {
            return Lookup::Known(endpoint);
        }
        if self.unknown.contains(&id) { Lookup::Unknown } else { Lookup::Miss }
    }

    /// Reads `id` from the database into memory (opening its verification secrets with `master`); capture rates
    /// above `max_rate` are held to it.
    pub async fn load(
        &self,
        pool: &PgPool,
        master: &MasterKey,
        id: WebhookId,
        max_rate: i32,
    ) -> Result<Option<Arc<Endpoint>>, sqlx::Error> {
        let _turn = self.loads.acquire().await.map_err(|_| sqlx::Error::PoolClosed)?;
        match self.lookup(id) {
            Lookup::Known(endpoint) => return Ok(Some(endpoint)),
            Lookup::Unknown => return Ok(None),
            Lookup::Miss => {}
        }
        let row: Option<EndpointRow> = sqlx::query_as(
            "SELECT w.organization_id, COALESCE(w.max_body_bytes, o.default_max_body_bytes) AS max_body_bytes,
                    w.response, o.capture_rate_limit_per_s AS rate, w.verification, w.verification_secrets,
                    w.verification_nonce, w.verification_key_version, w.rules, w.rule_conditions, w.cors,
                    w.handshake, w.handshake_secret, w.handshake_nonce, w.handshake_key_version,
                    w.mock_of IS NOT NULL AS mock
             FROM webhooks w JOIN organizations o ON o.id = w.organization_id WHERE w.id = $1",
        )
        .bind(id)
        .fetch_optional(pool)
        .await?;
        let Some(row) = row else {
            self.unknown.insert(id, ());
            return Ok(None);
        };
        let verification = row.verification(master, id);
        let handshake = row.handshake(master, id);
        let EndpointRow {
            organization_id: org_id,
            max_body_bytes,
            response,
            rate,
            rules,
            rule_conditions,
            cors,
            mock,
            ..
        } = row;
        let answers = Answers::compile(
            rules.map(|r| r.0).unwrap_or_default(),
            rule_conditions.map(|c| c.0).unwrap_or_default(),
            cors.map(|c| c.0),
        )
        .mocking(mock);
        let endpoint = Arc::new(Endpoint {
            response: response.map(|r| r.0),
            verification,
            answers,
            handshake,
            ..Endpoint::new(CaptureTarget::Webhook(id), org_id, max_body_bytes, rate.min(max_rate))
        });
        self.unknown.remove(&id);
        self.known.insert(id, endpoint.clone());
        Ok(Some(endpoint))
    }

    /// Drops every endpoint of an organization (its limits changed).
    pub fn forget_organization(&self, org_id: OrgId) {
        self.known.retain(|_, endpoint| endpoint.org_id != org_id);
    }

    /// Forgets what memory knows of `id` (it changed, was created or was deleted).
    pub fn invalidate(&self, id: WebhookId) {
        self.known.remove(&id);
        self.unknown.remove(&id);
    }

    /// Forgets everything: after the NOTIFY connection was lost, changes may have been missed.
    pub fn clear(&self) {
        self.known.clear();
        self.unknown.clear();
    }
}
