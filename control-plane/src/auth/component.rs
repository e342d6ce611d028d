//! Identity as a component, `Auth`: what authenticating a request reads (the pool, the caches of keys, sessions
//! and memberships, the signing keys, the external issuers, the failure budgets, the allowances) and what it needs
//! of the settings. The composition root builds it once and hands it out (`Arc<Auth>: FromRef`).

use crate::auth::external::ExternalIssuers;
use crate::auth::failures::CredentialFailures;
use crate::auth::key_cache::KeyCache;
use crate::auth::people_cache::PeopleCache;
use crate::auth::signing::SigningKeys;
use crate::crypto::MasterKey;
use crate::http::client_address::TrustedProxies;
use crate::http::limits::Allowances;
use sqlx::PgPool;
use std::sync::Arc;

/// Identity as a component: what authenticating a request reads. Shared as `Arc<Auth>`.
#[derive(Debug)]
pub struct Auth {
    pub pool: PgPool,
    pub keys: KeyCache,
    /// Browser sessions and memberships of people.
    pub people: PeopleCache,
    /// The built-in identity provider's keys.
    pub signing: SigningKeys,
    /// External OpenID providers and their keys.
    pub external: ExternalIssuers,
    /// Failed lookups of keys, job tokens and refresh tokens per address, and credentials known not to exist.
    pub credential_failures: CredentialFailures,
    /// Requests per key (and per person).
    pub allowances: Arc<Allowances>,
    /// The server's public URL: the built-in provider's issuer.
    pub public_url: String,
    /// Opens the built-in provider's signing keys.
    pub master_key: MasterKey,
    /// Peers whose `Forwarded` / `X-Forwarded-For` headers name the client.
    pub trusted_proxies: TrustedProxies,
}
