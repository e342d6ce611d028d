//! The deadline a request of the hot paths (captures, launches) keeps on the database itself: whatever it waits for
//! (its organization's turn, a pool connection, a group-commit batch, a statement), it is answered 503
//! `unavailable` with `Retry-After` once `REQUEST` has passed. The pool's acquire timeout, the writers' batch
//! deadlines and the cut of a silent host (`db::fence`) each bound one wait; a request that meets several in a row
//! (a capture queued behind a batch stuck on a frozen primary, then a connection opened to it) would add them up,
//! and PostgreSQL's own statement timeout never runs on a host that froze. Time the sender spends sending its body
//! is not the database's and does not count.

use crate::error::ApiError;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// The longest a capture or a launch waits on the database: under the contract's 15 s, with room for the rest of
/// the request (authentication, the answer).
pub const REQUEST: Duration = Duration::from_secs(12);

/// When a request stops waiting on the database.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
}

impl Deadline {
    /// A request's deadline, from now.
    pub fn start() -> Self {
        Self::after(REQUEST)
    }

    /// A deadline `limit` from now.
    pub fn after(limit: Duration) -> Self {
        Self { at: Instant::now() + limit }
    }

    /// Moves the deadline on by time spent on something else than the database (the sender's body).
    pub fn extend(&mut self, by: Duration) {
        self.at += by;
    }

    /// Runs `work` until the deadline; past it, the work is dropped (a statement in flight is given up with its
    /// connection, a write queued for a batch may still be stored: the 503 says nothing was promised) and the
    /// answer is 503 with `Retry-After`.
    pub async fn run<T>(&self, work: impl Future<Output = T>) -> Result<T, ApiError> {
        match tokio::time::timeout_at(self.at, work).await {
            Ok(done) => Ok(done),
            Err(_) => {
                tracing::warn!("a request waited on the database past its deadline; answering 503");
                Err(ApiError::unavailable())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_past_the_deadline_is_answered_unavailable() {
        let deadline = Deadline::after(Duration::from_millis(200));
        assert_eq!(deadline.run(async { 7 }).await.expect("in time"), 7);
        let begun = Instant::now();
        let stuck = deadline.run(std::future::pending::<()>()).await.expect_err("past the deadline");
        assert!(stuck.is_unavailable() && stuck.retry_after_s.is_some(), "{stuck}");
        assert!(begun.elapsed() < Duration::from_secs(2), "given up at the deadline");
    }

    #[tokio::test]
    async fn time_spent_elsewhere_moves_the_deadline() {
        let mut deadline = Deadline::after(Duration::from_millis(200));
        tokio::time::sleep(Duration::from_millis(300)).await;
        deadline.extend(Duration::from_millis(300));
        let work = deadline.run(tokio::time::sleep(Duration::from_millis(100))).await;
        assert!(work.is_ok(), "the body's time is not the database's: 200 ms of it are left");
        let late = Deadline::after(Duration::from_millis(200));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            late.run(tokio::time::sleep(Duration::from_millis(50))).await.is_err(),
            "without the extension the deadline has passed"
        );
    }
}
