//! Waiting for a capture without holding a database connection: `webhook` nodes long-poll through the runner
//! protocol, and each poll waits here on its target (an endpoint, or an execution's own URL) until a NOTIFY says a
//! capture was stored there. One entry per target with waiters in this process; while an endpoint has waiters, a
//! row in `capture_watchers` (under this registry's own replica id, apart from the stream hub's) asks the capture
//! writers to NOTIFY it. Executions' own URLs are always notified. A waiter reads the database only when woken
//! (and on its re-check timer), so a thousand idle waiters cost a thousand parked futures.

use crate::capture::cache::CaptureTarget;
use crate::db::watch::Watch;
use hookflow_shared::JobId;
use sqlx::PgPool;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

/// How often a target's watch row is refreshed while it has waiters (writers ignore rows older than five minutes).
const WATCH_REFRESH: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
struct Entry {
    wake: Notify,
    /// How many wait, and when the endpoint's watch was last recorded.
    state: Mutex<(usize, Option<Instant>)>,
}

/// Every target waited on in this process.
#[derive(Debug)]
pub struct CaptureWaiters {
    pool: PgPool,
    /// This registry's identity in `capture_watchers` (not the replica's: the stream hub removes that row when its
    /// last subscriber leaves, whatever waiters remain).
    watcher: Uuid,
    targets: Mutex<HashMap<Uuid, Arc<Entry>>>,
    /// Waits in progress per job: a job's nodes wait one at a time, so a few at once is already a misuse.
    jobs: Mutex<HashMap<JobId, usize>>,
}

/// Waits one job may have open at once.
pub const WAITS_PER_JOB: usize = 4;

/// One of a job's open waits; dropping it closes it.
#[derive(Debug)]
pub struct JobWait {
    waiters: Arc<CaptureWaiters>,
    job: JobId,
}

impl Drop for JobWait {
    fn drop(&mut self) {
        let mut jobs = locked(&self.waiters.jobs);
        if let Some(open) = jobs.get_mut(&self.job) {
            *open -= 1;
            if *open == 0 {
                jobs.remove(&self.job);
            }
        }
    }
}

/// One waiter's registration; dropping it leaves.
#[derive(Debug)]
pub struct Waiting {
    waiters: Arc<CaptureWaiters>,
    target: CaptureTarget,
    entry: Arc<Entry>,
}

impl Waiting {
    /// Resolves when a capture is stored at the target after the future was enabled (`Notified::enable`) or first
    /// polled.
    pub fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.entry.wake.notified()
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.waiters.leave(self.target, &self.entry);
    }
}

fn key(target: CaptureTarget) -> Uuid {
    match target {
        CaptureTarget::Webhook(id) => id.into(),
        CaptureTarget::Execution(id) => id.into(),
    }
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl CaptureWaiters {
    pub fn new(pool: PgPool) -> Arc<Self> {
        Arc::new(Self { pool, watcher: Uuid::new_v4(), targets: Mutex::default(), jobs: Mutex::default() })
    }

    /// Opens a wait for `job`, unless it has [`WAITS_PER_JOB`] open already.
    pub fn open(self: &Arc<Self>, job: JobId) -> Option<JobWait> {
        let mut jobs = locked(&self.jobs);
        let open = jobs.entry(job).or_default();
        if *open >= WAITS_PER_JOB {
            return None;
        }
        *open += 1;
        Some(JobWait { waiters: self.clone(), job })
    }

    /// Registers a waiter on `target`, recording (or refreshing) the endpoint's watch first so that a capture stored
    /// from then on is notified.
    pub async fn wait(self: &Arc<Self>, target: CaptureTarget) -> Waiting {
        metrics::gauge!("hookflow_capture_waiters").increment(1.0);
        let entry = {
            let mut targets = locked(&self.targets);
            let entry = targets.entry(key(target)).or_default().clone();
            locked(&entry.state).0 += 1;
            entry
        };
        if let CaptureTarget::Webhook(webhook_id) = target {
            let due = {
                let mut state = locked(&entry.state);
                let due = state.1.is_none_or(|at| at.elapsed() >= WATCH_REFRESH);
                if due {
                    state.1 = Some(Instant::now());
                }
                due
            };
            if due {
                crate::db::watch::record(&self.pool, Watch::Captures { webhook_id }, self.watcher).await;
            }
        }
        Waiting { waiters: self.clone(), target, entry }
    }

    /// A capture was stored at the target `id` (an endpoint's or an execution's id) somewhere.
    pub fn wake(&self, id: Uuid) {
        if let Some(entry) = locked(&self.targets).get(&id) {
            entry.wake.notify_waiters();
        }
    }

    /// Notifications may have been lost: every waiter looks again.
    pub fn wake_all(&self) {
        for entry in locked(&self.targets).values() {
            entry.wake.notify_waiters();
        }
    }

    /// How many waiters this process holds.
    pub fn waiting(&self) -> usize {
        locked(&self.targets).values().map(|entry| locked(&entry.state).0).sum()
    }

    fn leave(&self, target: CaptureTarget, entry: &Arc<Entry>) {
        metrics::gauge!("hookflow_capture_waiters").decrement(1.0);
        let mut targets = locked(&self.targets);
        let mut state = locked(&entry.state);
        state.0 = state.0.saturating_sub(1);
        if state.0 > 0 {
            return;
        }
        let key = key(target);
        if targets.get(&key).is_some_and(|current| Arc::ptr_eq(current, entry)) {
            targets.remove(&key);
        }
        if let (CaptureTarget::Webhook(webhook_id), Some(_)) = (target, state.1) {
            let (pool, watcher) = (self.pool.clone(), self.watcher);
            tokio::spawn(async move { crate::db::watch::forget_captures(&pool, webhook_id, watcher).await });
        }
    }
}
