//! In-process wake-ups and the PostgreSQL NOTIFY channels that carry them across replicas: queued work for
//! long polls, new execution events for execution streams, stored captures for capture streams, launches captures
//! owe for the trigger dispatchers, and the invalidation of in-process caches (keys, endpoints, sessions). Not wire contract: only servers speak it.

use hookflow_shared::{ApiKeyId, OrgId, SessionId, UserId, WebhookId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use uuid::Uuid;

/// NOTIFY channel announcing queued executions (payload: the organization id).
pub const QUEUE_CHANNEL: &str = "hookflow_queue";
/// NOTIFY channel announcing new events of an execution (payload: the execution id).
pub const EXECUTIONS_CHANNEL: &str = "hookflow_executions";
/// NOTIFY channel announcing stored captures (payload: the endpoint id).
pub const CAPTURES_CHANNEL: &str = "hookflow_captures";
/// NOTIFY channel telling every replica to drop a cached entry (payload: `<kind>:<id>`, see [`Invalidation`]).
pub const INVALIDATE_CHANNEL: &str = "hookflow_invalidate";
/// NOTIFY channel announcing captures that owe trigger launches (no payload: any dispatcher takes them); sent by
/// the capture batch's statement (`capture::batch`).
pub const TRIGGERS_CHANNEL: &str = "hookflow_triggers";
/// NOTIFY channel announcing deliveries to send (no payload: any replica's sender takes them); sent by the capture
/// batch's statement, by a replay and by a destination enabled again.
pub const DELIVERIES_CHANNEL: &str = "hookflow_deliveries";

/// Every channel the process listens on.
pub const CHANNELS: [&str; 6] =
    [QUEUE_CHANNEL, EXECUTIONS_CHANNEL, CAPTURES_CHANNEL, INVALIDATE_CHANNEL, TRIGGERS_CHANNEL, DELIVERIES_CHANNEL];

/// What an invalidation names. Sent in the transaction that made the change (`pg_notify` is delivered at commit)
/// and applied locally at once by the replica that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Invalidation {
    /// A webhook endpoint changed or was deleted.
    Endpoint(WebhookId),
    /// An organization's settings changed (capture limits of all its endpoints).
    Organization(OrgId),
    /// An API key was deleted.
    Key(ApiKeyId),
    /// A browser session was revoked.
    Session(SessionId),
    /// A user's memberships changed (keys they made, sessions they hold).
    User(UserId),
    /// A user joined a new organization (one they made): only their cached memberships are stale; no key or
    /// session anyone holds changes.
    Joined(UserId),
    /// The built-in identity provider's signing keys were rotated.
    SigningKeys,
    /// The master key file changed (a rotation): servers that read their keys from it read it again.
    MasterKeys,
}

impl Invalidation {
    /// The NOTIFY payload.
    pub fn payload(self) -> String {
        let (kind, id): (&str, Uuid) = match self {
            Invalidation::Endpoint(id) => ("endpoint", id.into()),
            Invalidation::Organization(id) => ("organization", id.into()),
            Invalidation::Key(id) => ("key", id.into()),
            Invalidation::Session(id) => ("session", id.into()),
            Invalidation::User(id) => ("user", id.into()),
            Invalidation::Joined(id) => ("joined", id.into()),
            Invalidation::SigningKeys => ("signing", Uuid::nil()),
            Invalidation::MasterKeys => ("master", Uuid::nil()),
        };
        format!("{kind}:{id}")
    }

    /// Reads a NOTIFY payload; anything else is ignored.
    pub fn parse(payload: &str) -> Option<Self> {
        let (kind, id) = payload.split_once(':')?;
        let id = Uuid::parse_str(id).ok()?;
        Some(match kind {
            "endpoint" => Invalidation::Endpoint(id.into()),
            "organization" => Invalidation::Organization(id.into()),
            "key" => Invalidation::Key(id.into()),
            "session" => Invalidation::Session(id.into()),
            "user" => Invalidation::User(id.into()),
            "joined" => Invalidation::Joined(id.into()),
            "signing" => Invalidation::SigningKeys,
            "master" => Invalidation::MasterKeys,
            _ => return None,
        })
    }

    /// Sends the invalidation to every replica when `conn`'s transaction commits.
    pub async fn announce(self, conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(INVALIDATE_CHANNEL)
            .bind(self.payload())
            .execute(conn)
            .await
            .map(|_| ())
    }
}

/// Wakes waiting long polls of this process, fed by NOTIFY (payload: the organization) and by local launches.
/// A wake rouses one waiter of that organization (and one of the runners serving every organization), not all
/// of them; a waiter that claims something passes the wake on, so a burst of work spreads over every waiter
/// while a single job costs a single claim attempt. Waiters also re-check on a timer.
#[derive(Debug, Default)]
pub struct QueueSignal {
    by_org: Mutex<HashMap<OrgId, Arc<Notify>>>,
    every_org: Arc<Notify>,
    /// When this process last recorded that polls wait for an organization (nil: every organization).
    watched: Mutex<HashMap<OrgId, std::time::Instant>>,
}

impl QueueSignal {
    /// The signal a runner of `org` (or, with `None`, a runner of every organization) waits on.
    pub fn for_runner(&self, org: Option<OrgId>) -> Arc<Notify> {
        match org {
            None => self.every_org.clone(),
            Some(org) => self.by_org.lock().map(|mut m| m.entry(org).or_default().clone()).unwrap_or_default(),
        }
    }

    /// Work was queued for `org`.
    pub fn wake(&self, org: OrgId) {
        if let Ok(map) = self.by_org.lock()
            && let Some(notify) = map.get(&org)
        {
            notify.notify_one();
        }
        self.every_org.notify_one();
    }

    /// Whether the watch of `org` (nil: every organization) is due to be recorded again, which the caller then
    /// does; at most once per `every` per organization.
    pub fn watch_due(&self, org: OrgId, every: std::time::Duration) -> bool {
        let Ok(mut watched) = self.watched.lock() else { return true };
        let now = std::time::Instant::now();
        match watched.get(&org) {
            Some(at) if now.duration_since(*at) < every => false,
            _ => {
                watched.insert(org, now);
                true
            }
        }
    }

    /// Anything may have been queued (the LISTEN connection was lost): every waiter re-checks.
    pub fn wake_all(&self) {
        if let Ok(map) = self.by_org.lock() {
            map.values().for_each(|n| n.notify_waiters());
        }
        self.every_org.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalidations_round_trip_through_their_payload() {
        let id = Uuid::now_v7();
        for sent in [
            Invalidation::Endpoint(id.into()),
            Invalidation::Organization(id.into()),
            Invalidation::Key(id.into()),
            Invalidation::Session(id.into()),
            Invalidation::User(id.into()),
            Invalidation::Joined(id.into()),
            Invalidation::SigningKeys,
            Invalidation::MasterKeys,
        ] {
            assert_eq!(Invalidation::parse(&sent.payload()), Some(sent));
        }
        assert_eq!(Invalidation::parse("endpoint"), None);
        assert_eq!(Invalidation::parse("bogus:00000000-0000-0000-0000-000000000000"), None);
        assert_eq!(Invalidation::parse(&id.to_string()), None);
    }
}
