//! What authenticating a person needs on every request, kept in memory: the state of each browser session, each
//! user's memberships, and external identities found unknown. Entries live at most [`TTL`] and are dropped at once
//! when a change is announced (`Invalidation::Session`, `User`, `Organization`), so sign-out, revocation, member
//! removal and a newly linked identity take effect on every replica's next request. Each map is a
//! [`BoundedCache`]: past its capacity the oldest entries leave one at a time.

use crate::cache::BoundedCache;
use hookflow_shared::{OrgId, Role, SessionId, UserId};
use std::time::Duration;

/// The safety net under the invalidations.
pub const TTL: Duration = Duration::from_secs(60);
/// Entries held per map, the oldest forgotten first (a flood of sessions cannot grow memory without bound).
const MAX_ENTRIES: usize = 100_000;
/// Unknown external identities remembered at once.
const MAX_UNKNOWN_IDENTITIES: usize = 10_000;

/// A browser session as authentication needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionState {
    pub user_id: UserId,
    pub live: bool,
    pub password_change_required: bool,
}

/// A user's organizations and roles.
pub type Memberships = Vec<(OrgId, Role)>;

#[derive(Debug)]
pub struct PeopleCache {
    sessions: BoundedCache<SessionId, SessionState>,
    memberships: BoundedCache<UserId, Memberships>,
    /// External identities (issuer and subject) no user has: their tokens answer 401 without a lookup.
    unknown_identities: BoundedCache<String, ()>,
}

impl Default for PeopleCache {
    fn default() -> Self {
        Self {
            sessions: BoundedCache::new(MAX_ENTRIES).with_ttl(TTL),
            memberships: BoundedCache::new(MAX_ENTRIES).with_ttl(TTL),
            unknown_identities: BoundedCache::new(MAX_UNKNOWN_IDENTITIES).with_ttl(TTL),
        }
    }
}

impl PeopleCache {
    pub fn session(&self, id: SessionId) -> Option<SessionState> {
        self.sessions.get(&id)
    }

    pub fn store_session(&self, id: SessionId, state: SessionState) {
        self.sessions.insert(id, state);
    }

    pub fn memberships(&self, user_id: UserId) -> Option<Memberships> {
        self.memberships.get(&user_id)
    }

    pub fn store_memberships(&self, user_id: UserId, memberships: Memberships) {
        self.memberships.insert(user_id, memberships);
    }

    /// Whether an external identity was found unknown within the last [`TTL`].
    pub fn identity_unknown(&self, identity: &str) -> bool {
        self.unknown_identities.contains(identity)
    }

    pub fn store_unknown_identity(&self, identity: String) {
        self.unknown_identities.insert(identity, ());
    }

    pub fn forget_session(&self, id: SessionId) {
        self.sessions.remove(&id);
    }

    /// A user's sessions (password changed, sessions revoked) and memberships; and the unknown identities, one
    /// of which may just have become this user's.
    pub fn forget_user(&self, user_id: UserId) {
        self.sessions.retain(|_, s| s.user_id != user_id);
        self.memberships.remove(&user_id);
        self.unknown_identities.clear();
    }

    /// A user's memberships only (they joined an organization).
    pub fn forget_memberships(&self, user_id: UserId) {
        self.memberships.remove(&user_id);
    }

    /// Everything: invalidations may have been missed.
    pub fn clear(&self) {
        self.sessions.clear();
        self.memberships.clear();
        self.unknown_identities.clear();
    }

    /// Every membership in an organization (members added, removed or changed).
    pub fn forget_organization(&self, org_id: OrgId) {
        self.memberships.retain(|_, orgs| !orgs.iter().any(|(org, _)| *org == org_id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgetting_drops_what_it_names_only() {
        let cache = PeopleCache::default();
        let (user, other, org, session) = (UserId::now_v7(), UserId::now_v7(), OrgId::now_v7(), SessionId::now_v7());
        let state = SessionState { user_id: user, live: true, password_change_required: false };
        cache.store_session(session, state);
        cache.store_memberships(user, vec![(org, Role::Admin)]);
        cache.store_memberships(other, vec![(OrgId::now_v7(), Role::Viewer)]);
        assert_eq!(cache.session(session), Some(state));
        cache.forget_organization(org);
        assert!(cache.memberships(user).is_none() && cache.memberships(other).is_some());
        cache.store_unknown_identity("issuer\nsub".into());
        assert!(cache.identity_unknown("issuer\nsub") && !cache.identity_unknown("issuer\nother"));
        cache.forget_user(user);
        assert!(cache.session(session).is_none());
        assert!(!cache.identity_unknown("issuer\nsub"), "a newly linked identity is looked up again");
    }
}
