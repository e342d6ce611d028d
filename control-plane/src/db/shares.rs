//! Fair shares of the primary's pool for heavy work (launches that read and resolve a flow, launches in a
//! transaction): one organization holds at most a quarter of the pool's connections for it at once, and heavy work of every organization together at most half, so the rest of the pool stays for the
//! group-commit writers, credentials and light requests. A turn is waited for a little (`WAIT`); past it the
//! request is answered 503 with `Retry-After`, so the organization that floods is the one refused, never its
//! neighbours.

use crate::error::ApiError;
use hookflow_shared::{ErrorCode, OrgId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long heavy work waits for its turn before the answer is 503.
pub const WAIT: Duration = Duration::from_secs(4);
/// Seconds a refused sender is told to wait.
const RETRY_AFTER_S: u64 = 1;

/// Each organization's turns and everyone's.
#[derive(Debug, Clone)]
pub struct ConnectionShares {
    per_org: usize,
    all: Arc<Semaphore>,
    orgs: Arc<Mutex<HashMap<OrgId, Arc<Semaphore>>>>,
    wait: Duration,
}

/// A turn of heavy work: hold it while the connection is held; dropping it gives the turn back.
#[derive(Debug)]
pub struct Turn {
    _all: OwnedSemaphorePermit,
    org: Option<OwnedSemaphorePermit>,
    shares: ConnectionShares,
    org_id: OrgId,
}

impl Drop for Turn {
    fn drop(&mut self) {
        drop(self.org.take());
        self.shares.forget_if_idle(self.org_id);
    }
}

impl ConnectionShares {
    /// Shares of a pool of `pool_size` connections: a quarter per organization, half in all (at least one each).
    pub fn of_pool(pool_size: u32) -> Self {
        let size = usize::try_from(pool_size).unwrap_or(usize::MAX).max(1);
        Self::new((size / 4).max(1), (size / 2).max(1), WAIT)
    }

    pub fn new(per_org: usize, all: usize, wait: Duration) -> Self {
        Self { per_org: per_org.max(1), all: Arc::new(Semaphore::new(all.max(1))), orgs: Arc::default(), wait }
    }

    /// Connections one organization may hold for heavy work at once.
    pub fn per_org(&self) -> usize {
        self.per_org
    }

    /// Waits (at most `WAIT`) for a turn of `org_id`: first its own share, then room among everyone's; 503 with
    /// `Retry-After` when none came.
    pub async fn take(&self, org_id: OrgId) -> Result<Turn, ApiError> {
        let own = {
            let mut orgs = self.orgs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            orgs.entry(org_id).or_insert_with(|| Arc::new(Semaphore::new(self.per_org))).clone()
        };
        let deadline = tokio::time::Instant::now() + self.wait;
        let org = tokio::time::timeout_at(deadline, own.clone().acquire_owned()).await;
        drop(own);
        let org = match org {
            Ok(Ok(permit)) => permit,
            _ => return Err(self.busy(org_id, "this organization's share")),
        };
        match tokio::time::timeout_at(deadline, self.all.clone().acquire_owned()).await {
            Ok(Ok(all)) => Ok(Turn { _all: all, org: Some(org), shares: self.clone(), org_id }),
            _ => {
                drop(org);
                self.forget_if_idle(org_id);
                Err(self.busy(org_id, "the database's share for heavy work"))
            }
        }
    }

    /// Forgets an organization whose turns are all back (no entry per organization ever seen).
    fn forget_if_idle(&self, org_id: OrgId) {
        let mut orgs = self.orgs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(semaphore) = orgs.get(&org_id)
            && Arc::strong_count(semaphore) == 1
            && semaphore.available_permits() == self.per_org
        {
            orgs.remove(&org_id);
        }
    }

    fn busy(&self, org_id: OrgId, what: &str) -> ApiError {
        tracing::info!(organization = %org_id, share = what, "heavy database work refused: its share is busy");
        let mut error = ApiError::new(
            ErrorCode::Unavailable,
            format!("too much of {what} of database connections is busy; retry shortly"),
        );
        error.retry_after_s = Some(RETRY_AFTER_S);
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_organization_holds_its_share_and_others_keep_theirs() {
        let shares = ConnectionShares::new(2, 3, Duration::from_millis(50));
        let (greedy, other, third) = (OrgId::now_v7(), OrgId::now_v7(), OrgId::now_v7());
        let first = shares.take(greedy).await.expect("a turn");
        let second = shares.take(greedy).await.expect("its second turn");
        let refused = shares.take(greedy).await.expect_err("past its share");
        assert_eq!((refused.code, refused.retry_after_s), (ErrorCode::Unavailable, Some(1)));
        let theirs = shares.take(other).await.expect("another organization's turn");
        // Everyone's share (3) is taken now: a third organization waits, then is refused.
        let full = shares.take(third).await.expect_err("everyone's share is taken");
        assert!(full.message.contains("heavy work"), "{}", full.message);
        drop(first);
        let again = shares.take(third).await.expect("a turn once one came back");
        drop((second, theirs, again));
        assert!(shares.orgs.lock().expect("orgs").is_empty(), "organizations with no turn out are forgotten");
        assert_eq!(shares.all.available_permits(), 3);
    }

    #[tokio::test]
    async fn a_turn_is_waited_for_until_one_comes_back() {
        let shares = ConnectionShares::new(1, 1, Duration::from_secs(5));
        let org = OrgId::now_v7();
        let held = shares.take(org).await.expect("a turn");
        let waiting = tokio::spawn({
            let shares = shares.clone();
            async move { shares.take(org).await.map(drop) }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(held);
        waiting.await.expect("task").expect("the turn given back is taken");
    }

    #[test]
    fn shares_of_a_pool() {
        assert_eq!(ConnectionShares::of_pool(20).per_org(), 5);
        assert_eq!(ConnectionShares::of_pool(20).all.available_permits(), 10);
        assert_eq!(ConnectionShares::of_pool(2).per_org(), 1);
        assert_eq!(ConnectionShares::of_pool(1).all.available_permits(), 1);
    }
}
