//! API keys resolved from memory: after one database lookup a key's identity (organization, scopes, expiry) is
//! kept by the hash of the key, so a request costs no query. A deleted key is dropped at once on the replica
//! that deleted it and, through the invalidation channel, on every other; expiry is checked on every request
//! from the cached time; entries also age out, a safety net for a notification missed while reconnecting.

use chrono::{DateTime, Utc};
use hookflow_shared::ScopeSet;
use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// How long an entry is trusted without a fresh lookup.
const TTL: Duration = Duration::from_secs(60);
/// How often a key's `last_used_at` is written.
pub const LAST_USE_EVERY: Duration = Duration::from_secs(60);
/// Entries kept before the map is emptied (only keys that authenticated are cached).
const MAX_ENTRIES: usize = 100_000;

/// Who a key is.
#[derive(Debug, Clone)]
pub struct KeyIdentity {
    pub key_id: Uuid,
    pub org_id: Uuid,
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
    cached_at: Instant,
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

#[derive(Debug, Default)]
pub struct KeyCache {
    entries: RwLock<HashMap<Vec<u8>, Entry>>,
}

impl KeyCache {
    pub fn get(&self, hash: &[u8]) -> Cached {
        {
            let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
            match entries.get(hash) {
                None => return Cached::Miss,
                Some(entry) if entry.cached_at.elapsed() >= TTL => {}
                Some(entry) if entry.last_use_recorded.elapsed() < LAST_USE_EVERY => {
                    return Cached::Hit { identity: entry.identity.clone(), record_use: false };
                }
                Some(_) => {}
            }
        }
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        match entries.get_mut(hash) {
            Some(entry) if entry.cached_at.elapsed() < TTL => {
                let record_use = entry.last_use_recorded.elapsed() >= LAST_USE_EVERY;
                if record_use {
                    entry.last_use_recorded = Instant::now();
                }
                Cached::Hit { identity: entry.identity.clone(), record_use }
            }
            Some(entry) => {
                let recent = entry.cached_at.elapsed() < 2 * TTL;
                entries.remove(hash);
                if recent { Cached::Stale } else { Cached::Miss }
            }
            None => Cached::Miss,
        }
    }

    /// Remembers a key just read from the database (whose last use was just written, or is recent).
    pub fn insert(&self, hash: Vec<u8>, identity: KeyIdentity) {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        let now = Instant::now();
        entries.insert(hash, Entry { identity, cached_at: now, last_use_recorded: now });
    }

    /// Drops a key (deleted).
    pub fn forget_key(&self, key_id: Uuid) {
        self.entries.write().unwrap_or_else(|e| e.into_inner()).retain(|_, e| e.identity.key_id != key_id);
    }

    /// Drops every key of an organization.
    pub fn forget_organization(&self, org_id: Uuid) {
        self.entries.write().unwrap_or_else(|e| e.into_inner()).retain(|_, e| e.identity.org_id != org_id);
    }

    /// Drops everything (notifications may have been missed).
    pub fn clear(&self) {
        self.entries.write().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(key_id: Uuid, org_id: Uuid) -> KeyIdentity {
        KeyIdentity { key_id, org_id, scopes: ScopeSet::all(), expires_at: None }
    }

    #[test]
    fn keys_are_found_until_forgotten() {
        let cache = KeyCache::default();
        let (a, b, org) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
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
        let mut expired = identity(Uuid::now_v7(), Uuid::now_v7());
        expired.expires_at = Some(Utc::now() - chrono::Duration::seconds(1));
        assert!(expired.is_expired());
        assert!(!identity(Uuid::now_v7(), Uuid::now_v7()).is_expired());
    }
}
