//! Byte budgets of the group-commit writers: how many bytes of large writes may wait for a writer at once (a
//! write that would pass the budget is answered 503 with `Retry-After` at once, so the sender that brings the
//! excess is the one refused, never its neighbours), and how a batch is cut so that one statement never carries
//! more than a batch's worth of bytes (a write over it goes alone).

use crate::error::ApiError;
use hookflow_shared::ErrorCode;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Writes up to this size need no reservation: small writes are bounded by the writers' queues (thousands of
/// entries), and are never refused because large ones fill the budget.
pub const SMALL_WRITE: usize = 64 * 1024;
/// The budget's unit: permits are counted in KiB, so a 10 MiB write takes 10,240 of them.
const UNIT: usize = 1024;
/// Seconds a refused sender is told to wait: the writer drains a budget within a few batches.
const RETRY_AFTER_S: u64 = 1;

/// Bytes of large writes that may wait for one writer at once.
#[derive(Debug, Clone)]
pub struct ByteBudget {
    permits: Arc<Semaphore>,
    what: &'static str,
}

/// A write's share of a budget, given back when it is dropped (once the write was answered).
#[derive(Debug)]
pub struct Reservation(#[allow(dead_code)] Option<OwnedSemaphorePermit>);

impl ByteBudget {
    /// A budget of `bytes` for large writes of `what` (named in the 503's message).
    pub fn new(bytes: usize, what: &'static str) -> Self {
        Self { permits: Arc::new(Semaphore::new(bytes.div_ceil(UNIT))), what }
    }

    /// Reserves room for a write of `bytes`, or answers 503 with `Retry-After` when the budget cannot hold it now.
    pub fn reserve(&self, bytes: usize) -> Result<Reservation, ApiError> {
        if bytes <= SMALL_WRITE {
            return Ok(Reservation(None));
        }
        let units = u32::try_from(bytes.div_ceil(UNIT)).unwrap_or(u32::MAX);
        match self.permits.clone().try_acquire_many_owned(units) {
            Ok(permit) => Ok(Reservation(Some(permit))),
            Err(_) => {
                let mut error = ApiError::new(
                    ErrorCode::Unavailable,
                    format!("too many large {} are waiting to be stored; retry shortly", self.what),
                );
                error.retry_after_s = Some(RETRY_AFTER_S);
                Err(error)
            }
        }
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
        let budget = ByteBudget::new(3 * 1024 * 1024, "captures");
        let first = budget.reserve(2 * 1024 * 1024).expect("fits");
        let refused = budget.reserve(2 * 1024 * 1024).expect_err("over the budget");
        assert_eq!((refused.code, refused.retry_after_s), (ErrorCode::Unavailable, Some(1)));
        let small: Vec<_> = (0..10_000).map(|_| budget.reserve(SMALL_WRITE).expect("small")).collect();
        drop((first, small));
        assert_eq!(budget.available(), 3 * 1024 * 1024);
        budget.reserve(2 * 1024 * 1024).expect("room again once answered");
    }
}
