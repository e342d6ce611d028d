//! Byte budgets of the group-commit writers: how many bytes of large writes may wait for a writer at once (a
//! write that would pass the budget is answered 503 with `Retry-After` at once, so the sender that brings the
//! excess is the one refused, never its neighbours), and how a batch is cut so that one statement never carries
//! more than a batch's worth of bytes (a write over it goes alone).

use crate::error::ApiError;
use hookflow_shared::{ErrorCode, OrgId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Writes up to this size need no reservation: small writes are bounded by the writers' queues (thousands of
/// entries), and are never refused because large ones fill the budget.
pub const SMALL_WRITE: usize = 64 * 1024;
/// The budget's unit: permits are counted in KiB, so a 10 MiB write takes 10,240 of them.
const UNIT: usize = 1024;
/// Seconds a refused sender is told to wait: the writer drains a budget within a few batches.
const RETRY_AFTER_S: u64 = 1;

/// Room each owner holds, in units.
type Shares = Arc<Mutex<HashMap<OrgId, u32>>>;

/// Bytes of large writes that may wait for one writer at once, and the share one owner (an organization) may hold
/// of them: a tenant's stalled or slow senders hold at most its share, never the whole budget.
#[derive(Debug, Clone)]
pub struct ByteBudget {
    permits: Arc<Semaphore>,
    shares: Shares,
    share: u32,
    what: &'static str,
}

/// A write's share of a budget, given back when it is dropped: by the writer, once the write is stored (not when
/// its sender goes away while it waits).
#[derive(Debug, Default)]
pub struct Reservation {
    /// Held for its drop, which gives the room back.
    _permit: Option<OwnedSemaphorePermit>,
    units: u32,
    owner: Option<(Shares, OrgId)>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some((shares, owner)) = self.owner.take() {
            let mut shares = shares.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(held) = shares.get_mut(&owner) {
                *held = held.saturating_sub(self.units);
                if *held == 0 {
                    shares.remove(&owner);
                }
            }
        }
    }
}

impl ByteBudget {
    /// A budget of `bytes` for large writes of `what` (named in the 503's message); one owner may hold at most
    /// `share_bytes` of it.
    pub fn new(bytes: usize, share_bytes: usize, what: &'static str) -> Self {
        let share = u32::try_from(share_bytes.div_ceil(UNIT)).unwrap_or(u32::MAX);
        Self { permits: Arc::new(Semaphore::new(bytes.div_ceil(UNIT))), shares: Arc::default(), share, what }
    }

    /// Reserves room for a write of `bytes`, or answers 503 with `Retry-After` when the budget cannot hold it now.
    pub fn reserve(&self, bytes: usize) -> Result<Reservation, ApiError> {
        self.reserve_for(None, bytes)
    }

    /// `reserve` counted against `owner`'s share too (when given).
    pub fn reserve_for(&self, owner: Option<OrgId>, bytes: usize) -> Result<Reservation, ApiError> {
        if bytes <= SMALL_WRITE {
            return Ok(Reservation::default());
        }
        let units = u32::try_from(bytes.div_ceil(UNIT)).unwrap_or(u32::MAX);
        let mut shares = self.shares.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(owner) = owner
            && shares.get(&owner).copied().unwrap_or(0).saturating_add(units) > self.share.max(units)
        {
            return Err(self.full());
        }
        let permit = self.permits.clone().try_acquire_many_owned(units).map_err(|_| self.full())?;
        let owner = owner.map(|owner| {
            *shares.entry(owner).or_default() += units;
            (self.shares.clone(), owner)
        });
        Ok(Reservation { _permit: Some(permit), units, owner })
    }

    fn full(&self) -> ApiError {
        let mut error = ApiError::new(
            ErrorCode::Unavailable,
            format!("too many large {} are waiting to be stored; retry shortly", self.what),
        );
        error.retry_after_s = Some(RETRY_AFTER_S);
        error
    }

    /// Bytes of large writes that could still be reserved now.
    pub fn available(&self) -> usize {
        self.permits.available_permits() * UNIT
    }
}

/// Cuts `sizes` (the writes of one batch, in order) into consecutive runs of at most `budget` bytes each; a write
/// larger than the budget runs alone. Answers the runs' lengths.
pub fn cut(sizes: impl IntoIterator<Item = usize>, budget: usize) -> Vec<usize> {
    let mut runs = Vec::new();
    let (mut count, mut bytes) = (0usize, 0usize);
    for size in sizes {
        if count > 0 && bytes.saturating_add(size) > budget {
            runs.push(count);
            (count, bytes) = (0, 0);
        }
        count += 1;
        bytes = bytes.saturating_add(size);
    }
    if count > 0 {
        runs.push(count);
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_close_at_the_budget_and_large_writes_go_alone() {
        assert_eq!(cut([1, 2, 3], 10), vec![3]);
        assert_eq!(cut([6, 6, 6], 10), vec![1, 1, 1]);
        assert_eq!(cut([4, 4, 30, 1, 1], 10), vec![2, 1, 2]);
        assert_eq!(cut([30], 10), vec![1]);
        assert!(cut(Vec::<usize>::new(), 10).is_empty());
    }

    #[test]
    fn large_writes_share_the_budget_and_small_ones_never_wait() {
        let budget = ByteBudget::new(3 * 1024 * 1024, 3 * 1024 * 1024, "captures");
        let first = budget.reserve(2 * 1024 * 1024).expect("fits");
        let refused = budget.reserve(2 * 1024 * 1024).expect_err("over the budget");
        assert_eq!((refused.code, refused.retry_after_s), (ErrorCode::Unavailable, Some(1)));
        let small: Vec<_> = (0..10_000).map(|_| budget.reserve(SMALL_WRITE).expect("small")).collect();
        drop((first, small));
        assert_eq!(budget.available(), 3 * 1024 * 1024);
        budget.reserve(2 * 1024 * 1024).expect("room again once answered");
    }

    #[test]
    fn one_owner_holds_at_most_its_share() {
        let budget = ByteBudget::new(8 * 1024 * 1024, 2 * 1024 * 1024, "captures");
        let (greedy, other) = (OrgId::now_v7(), OrgId::now_v7());
        let held = budget.reserve_for(Some(greedy), 2 * 1024 * 1024).expect("its share");
        assert!(budget.reserve_for(Some(greedy), 1024 * 1024).is_err(), "past its share");
        let theirs = budget.reserve_for(Some(other), 2 * 1024 * 1024).expect("another owner's share is its own");
        drop(held);
        budget.reserve_for(Some(greedy), 2 * 1024 * 1024).expect("its share again");
        // A single write larger than the share still goes through alone.
        drop(theirs);
        let lone = budget.reserve_for(Some(other), 3 * 1024 * 1024).expect("one large write");
        drop(lone);
    }
}
