//! Queue watches: which replicas have long polls waiting, per organization, so a launch NOTIFYs only when another
//! replica needs waking (a NOTIFY takes a cluster-wide lock at commit; the launching replica wakes its own polls in
//! memory). A waiting poll records its replica's watch before its first claim attempt, at most once a minute per
//! organization; launches ignore watches older than two minutes.

use crate::db::watch::Watch;
use crate::signals::QueueSignal;
use hookflow_shared::OrgId;
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// How often a replica with waiting polls refreshes its watch of an organization.
const REFRESH: Duration = Duration::from_secs(60);
/// A launch committed while a new watch was being recorded may not have notified: the organization's waiting polls
/// look again this long after.
const SETTLE: Duration = Duration::from_millis(500);

/// The launch statement's test for "another replica waits for this organization" (`{org}` is the organization's
/// column, `{replica}` the launching replica's parameter).
pub fn others_wait(org: &str, replica: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM queue_watchers qw WHERE qw.organization_id IN ({org}, '00000000-0000-0000-0000-000000000000')
             AND qw.replica <> {replica} AND qw.seen_at > now() - interval '2 minutes')"
    )
}

/// Records that a poll of `org` (`None`: a runner serving every organization) waits on this replica, when due.
/// `replica` is this process, `queue` wakes its polls.
pub async fn record_waiting(pool: &PgPool, queue: &Arc<QueueSignal>, replica: Uuid, org: Option<OrgId>) {
    let org = org.unwrap_or(OrgId::nil());
    if !queue.watch_due(org, REFRESH) {
        return;
    }
    if !crate::db::watch::record(pool, Watch::Queue { organization_id: org }, replica).await {
        return;
    }
    let queue = queue.clone();
    tokio::spawn(async move {
        tokio::time::sleep(SETTLE).await;
        if org.is_nil() { queue.wake_all() } else { queue.wake(org) }
    });
}
