//! API keys resolved from memory: after one database lookup a key's identity (organization, scopes, expiry) is
//! kept by the hash of the key, so a request costs no query. A deleted key is dropped at once on the replica
//! that deleted it and, through the invalidation channel, on every other; expiry is checked on every request
//! from the cached time; entries also age out, a safety net for a notification missed while reconnecting. The
//! entries are a [`BoundedCache`] (kept two [`TTL`]s, to tell a stale key from a stranger's); past
//! [`MAX_ENTRIES`] the oldest leave one at a time.

use crate::cache::BoundedCache;
use chrono::{DateTime, Utc};
use hookflow_shared::{ApiKeyId, OrgId, ScopeSet};
use std::time::{Duration, Instant};

/// How long an entry is trusted without a fresh lookup.
const TTL: Duration = Duration::from_secs(60);
/// How often a key's `last_used_at` is written.
pub const LAST_USE_EVERY: Duration = Duration::from_secs(60);
/// Entries kept at most, the oldest forgotten first (only keys that authenticated are cached).
const MAX_ENTRIES: usize = 100_000;

/// Who a key is.
#[derive(Debug, Clone)]
pub struct KeyIdentity {
    pub key_id: ApiKeyId,
    pub org_id: OrgId,
    pub scopes: ScopeSet,
    pub expires_at: Option<DateTime<Utc>>,
}

impl KeyIdentity {
    pub fn is_expired(&self) -> bool {
        self.expires_at.is_some_and(|at| at <= Utc::now())
    }
}

#[derive(Debug)]
struct Entry {
    identity: KeyIdentity,
    last_use_recorded: Instant,
}

/// What a lookup in the cache found.
#[derive(Debug)]
pub enum Cached {
    /// The key's identity, and whether its last use is due to be written.
    Hit {
        identity: KeyIdentity,
        record_use: bool,
    },
    /// The key worked here within the last [`TTL`] twice over, and is due for a fresh lookup (which the budget of
    /// failed lookups does not stop: it is not a stranger's guess).
    Stale,
    Miss,
}

#[derive(Debug)]
pub struct KeyCache {
    /// By the hash of the key; an entry's age is the time since its lookup.
    entries: BoundedCache<Vec<u8>, Entry>,
}

impl Default for KeyCache {
    fn default() -> Self {
        Self { entries: BoundedCache::new(MAX_ENTRIES).with_ttl(2 * TTL) }
    }
}

impl KeyCache {
    pub fn get(&self, hash: &[u8]) -> Cached {
        let quick = self.entries.read(hash, |entry, age| {
            (age < TTL && entry.last_use_recorded.elapsed() < LAST_USE_EVERY).then(|| entry.identity.clone())
        });
        match quick {
            None => return Cached::Miss,
            Some(Some(identity)) => return Cached::Hit { identity, record_use: false },
            Some(None) => {}
        }
        let found = self.entries.update(hash, |entry, age| {
            (age < TTL).then(|| {
                let record_use = entry.last_use_recorded.elapsed() >= LAST_USE_EVERY;
                if record_use {
                    entry.last_use_recorded = Instant::now();
                }
                Cached::Hit { identity: entry.identity.clone(), record_use }
            })
        });
        match found {
            Some(Some(hit)) => hit,
            Some(None) => {
                self.entries.remove_if(hash, |_, age| age >= TTL);
                Cached::Stale
            }
            None => Cached::Miss,
        }
    }

    /// Remembers a key just read from the database (whose last use was just written, or is recent).
    pub fn insert(&self, hash: Vec<u8>, identity: KeyIdentity) {
        self.entries.insert(hash, Entry { identity, last_use_recorded: Instant::now() });
    }

    /// Drops a key (deleted).
    pub fn forget_key(&self, key_id: ApiKeyId) {
        self.entries.retain(|_, e| e.identity.key_id != key_id);
    }

    /// Drops every key of an organization.
    pub fn forget_organization(&self, org_id: OrgId) {
        self.entries.retain(|_, e| e.identity.org_id != org_id);
    }

    /// Drops everything (notifications may have been missed).
    pub fn clear(&self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(key_id: ApiKeyId, org_id: OrgId) -> KeyIdentity {
        KeyIdentity { key_id, org_id, scopes: ScopeSet::all(), expires_at: None }
    }

    #[test]
    fn keys_are_found_until_forgotten() {
        let cache = KeyCache::default();
        let (a, b, org) = (ApiKeyId::now_v7(), ApiKeyId::now_v7(), OrgId::now_v7());
        cache.insert(b"a".to_vec(), identity(a, org));
        cache.insert(b"b".to_vec(), identity(b, org));
        assert!(matches!(cache.get(b"a"), Cached::Hit { record_use: false, .. }));
        cache.forget_key(a);
        assert!(matches!(cache.get(b"a"), Cached::Miss));
        assert!(matches!(cache.get(b"b"), Cached::Hit { .. }));
        cache.forget_organization(org);
        assert!(matches!(cache.get(b"b"), Cached::Miss));
    }

    #[test]
    fn expiry_is_read_from_the_identity() {
        let mut expired = identity(ApiKeyId::now_v7(), OrgId::now_v7());
        expired.expires_at = Some(Utc::now() - chrono::Duration::seconds(1));
        assert!(expired.is_expired());
        assert!(!identity(ApiKeyId::now_v7(), OrgId::now_v7()).is_expired());
    }
}
