//! When this replica's own failed attempts come due again: each retry it records within [`REMEMBERED`] is
//! remembered here (bounded), so the claim loop wakes at that moment instead of at its next poll (up to `POLL`
//! late: half of a one-second delay; past `REMEMBERED` the poll's lateness is within the schedule's 10%). Retries
//! other replicas recorded, and any this clock dropped, are still found by the poll. Retries due within
//! [`TOGETHER`] of the first are forgotten together: one claim serves them all.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Retry times kept at most (past it new ones are left to the poll).
const KEPT: usize = 4096;
/// The longest delay remembered: the poll's lateness (at most 0.5 s) is 10% of it.
pub const REMEMBERED: std::time::Duration = std::time::Duration::from_secs(5);
/// Retries due this close after the one that woke the loop are claimed with it.
const TOGETHER: std::time::Duration = std::time::Duration::from_millis(20);

#[derive(Debug, Default)]
pub struct RetryClock {
    due: Mutex<BinaryHeap<Reverse<Instant>>>,
    changed: Notify,
}

impl RetryClock {
    /// Remembers a retry coming due at `at` (one further than [`REMEMBERED`] away is left to the poll).
    pub fn at(&self, at: Instant) {
        if at.saturating_duration_since(Instant::now()) > REMEMBERED {
            return;
        }
        let mut due = self.due.lock().unwrap_or_else(|e| e.into_inner());
        if due.len() >= KEPT {
            return;
        }
        let sooner = due.peek().is_none_or(|Reverse(first)| at < *first);
        due.push(Reverse(at));
        drop(due);
        if sooner {
            self.changed.notify_one();
        }
    }

    /// Waits until the earliest remembered retry is due and a moment more ([`TOGETHER`]), then forgets every one
    /// due by then.
    pub async fn next_due(&self) {
        loop {
            let first = self.due.lock().unwrap_or_else(|e| e.into_inner()).peek().map(|Reverse(at)| *at);
            match first {
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at + TOGETHER) => {
                            let now = Instant::now();
                            let mut due = self.due.lock().unwrap_or_else(|e| e.into_inner());
                            while due.peek().is_some_and(|Reverse(at)| *at <= now) {
                                due.pop();
                            }
                            return;
                        }
                        () = self.changed.notified() => {}
                    }
                }
                None => self.changed.notified().await,
            }
        }
    }

    /// Retry times remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.due.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn wakes_at_the_earliest_retry_even_one_remembered_while_waiting() {
        let clock = std::sync::Arc::new(RetryClock::default());
        let started = Instant::now();
        clock.at(started + Duration::from_secs(4));
        let waiting = {
            let clock = clock.clone();
            tokio::spawn(async move {
                clock.next_due().await;
                Instant::now()
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        clock.at(started + Duration::from_millis(200));
        let woke = waiting.await.expect("wait") - started;
        assert!(woke >= Duration::from_millis(200) && woke < Duration::from_secs(5), "woke after {woke:?}");
        assert_eq!(clock.len(), 1, "the retry due is forgotten, the later one kept");
    }

    #[test]
    fn leaves_distant_retries_to_the_poll() {
        let clock = RetryClock::default();
        clock.at(Instant::now() + REMEMBERED + Duration::from_secs(1));
        assert_eq!(clock.len(), 0);
    }

    #[tokio::test]
    async fn keeps_a_bounded_number_of_retries_and_forgets_those_due_together() {
        let clock = RetryClock::default();
        let at = Instant::now() + Duration::from_millis(50);
        for i in 0..KEPT + 10 {
            clock.at(at + Duration::from_millis(u64::from(i % 2 == 0)));
        }
        assert_eq!(clock.len(), KEPT);
        clock.next_due().await;
        assert!(Instant::now() >= at);
        assert_eq!(clock.len(), 0, "all due at once are forgotten at once");
    }
}
