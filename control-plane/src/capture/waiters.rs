//! Waiting for a capture without holding a database connection: `webhook` nodes long-poll through the runner
//! protocol, and each poll registers here on its target (an endpoint, or an execution's own URL). One entry per
//! target with waiters in this process, and one sweeper task per entry: woken when a waiter joins, when a NOTIFY
//! says a capture was stored at the target, and on a safety-net timer, it runs the one statement that serves all
//! the target's waiters at once (`wait_sweep`) and hands each its capture. A capture costs its target one
//! statement however many wait there, and each capture is weighed once against each waiter. While an endpoint has
//! waiters, a row in `capture_watchers` (under this registry's own replica id, apart from the stream hub's) asks
//! the capture writers to NOTIFY it; executions' own URLs are always notified.
//!
//! Bounded: waits open at once per job ([`WAITS_PER_JOB`]), per organization and in all ([`WaitLimits`], per
//! server process), and sweeps running at once (half the pool), so waits never hold the pool other requests need.

use crate::capture::row::CaptureRow;
use crate::capture::target::CaptureTarget;
use crate::capture::wait_sweep::{self, Asking, Seen, WaitSpec};
use crate::db::watch::Watch;
use crate::error::ApiError;
use hookflow_shared::{ErrorCode, JobId, OrgId};
use sqlx::PgPool;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore, oneshot};
use tokio::time::Instant;
use uuid::Uuid;

/// How often a target's watch row is refreshed while it has waiters (writers ignore rows older than five minutes).
const WATCH_REFRESH: Duration = Duration::from_secs(60);
/// A sweep soon after a target's first waiter catches a capture whose batch was in flight while the watch was
/// recorded; later sweeps without a wake-up are a safety net for lost notifications.
const FIRST_RECHECK: Duration = Duration::from_millis(500);
const RECHECK: Duration = Duration::from_secs(10);
/// After a failed sweep, the next one comes this soon.
const RETRY: Duration = Duration::from_secs(1);

/// Waits one job may have open at once.
pub const WAITS_PER_JOB: usize = 4;

/// Waits open at once in this process, per organization and in all (`--max-waits-per-organization`,
/// `--max-waits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitLimits {
    pub per_organization: usize,
    pub total: usize,
}

impl Default for WaitLimits {
    fn default() -> Self {
        Self { per_organization: 1_000, total: 10_000 }
    }
}

#[derive(Debug, Default)]
struct Counts {
    jobs: HashMap<JobId, usize>,
    orgs: HashMap<OrgId, usize>,
    total: usize,
}

/// A waiter of an entry: what it looks for, the generation it joined in, and where its capture goes.
#[derive(Debug)]
struct Registered {
    spec: Arc<WaitSpec>,
    generation: i64,
    found: Option<oneshot::Sender<CaptureRow>>,
}

#[derive(Debug, Default)]
struct EntryState {
    waiters: HashMap<i64, Registered>,
    /// Counts joins: a capture seen at generation `g` was weighed for every waiter that joined by then.
    generation: i64,
    /// The captures of the last sweep's window, and the generation they were weighed for.
    seen: Seen,
    watched_at: Option<Instant>,
    retired: bool,
}

#[derive(Debug, Default)]
struct Entry {
    /// Wakes the entry's sweeper (a wake while it sweeps is kept for after).
    wake: Notify,
    state: Mutex<EntryState>,
}

/// Every target waited on in this process.
#[derive(Debug)]
pub struct CaptureWaiters {
    pool: PgPool,
    /// This registry's identity in `capture_watchers` (not the replica's: the stream hub removes that row when its
    /// last subscriber leaves, whatever waiters remain).
    watcher: Uuid,
    limits: WaitLimits,
    targets: Mutex<HashMap<Uuid, Arc<Entry>>>,
    counts: Mutex<Counts>,
    /// Sweeps running at once.
    sweeps: Semaphore,
    next_slot: AtomicI64,
}

/// One of a job's open waits; dropping it closes it.
#[derive(Debug)]
pub struct JobWait {
    waiters: Arc<CaptureWaiters>,
    job: JobId,
    org: OrgId,
}

impl Drop for JobWait {
    fn drop(&mut self) {
        let mut counts = locked(&self.waiters.counts);
        counts.total = counts.total.saturating_sub(1);
        release(&mut counts.jobs, self.job);
        release(&mut counts.orgs, self.org);
    }
}

/// Takes one from `key`'s count, forgetting it at zero.
fn release<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: K) {
    if let Some(open) = counts.get_mut(&key) {
        *open = open.saturating_sub(1);
        if *open == 0 {
            counts.remove(&key);
        }
    }
}

/// One waiter's registration; dropping it leaves.
#[derive(Debug)]
pub struct Waiting {
    waiters: Arc<CaptureWaiters>,
    key: Uuid,
    slot: i64,
    entry: Arc<Entry>,
    found: oneshot::Receiver<CaptureRow>,
}

impl Waiting {
    /// Resolves with the first capture a sweep finds for this waiter (never, if none comes).
    pub async fn found(&mut self) -> CaptureRow {
        match (&mut self.found).await {
            Ok(row) => row,
            Err(_) => std::future::pending().await,
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.waiters.leave(self.key, self.slot, &self.entry);
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

fn too_many(message: String, retry_after_s: u64) -> ApiError {
    let mut refused = ApiError::new(ErrorCode::RateLimited, message);
    refused.retry_after_s = Some(retry_after_s);
    refused
}

impl CaptureWaiters {
    pub fn new(pool: PgPool, limits: WaitLimits) -> Arc<Self> {
        let sweeps = (pool.options().get_max_connections() / 2).max(1) as usize;
        Arc::new(Self {
            pool,
            watcher: Uuid::new_v4(),
            limits,
            targets: Mutex::default(),
            counts: Mutex::default(),
            sweeps: Semaphore::new(sweeps),
            next_slot: AtomicI64::new(1),
        })
    }

    /// Opens a wait for `job` of `org`, unless the job has [`WAITS_PER_JOB`] open already, or the organization or
    /// this server has its limit of waits open (429 with `Retry-After`).
    pub fn open(self: &Arc<Self>, job: JobId, org: OrgId) -> Result<JobWait, ApiError> {
        let mut counts = locked(&self.counts);
        if counts.jobs.get(&job).copied().unwrap_or(0) >= WAITS_PER_JOB {
            return Err(too_many(
                format!("this job has {WAITS_PER_JOB} waits open already; a job's nodes wait one at a time"),
                1,
            ));
        }
        if counts.orgs.get(&org).copied().unwrap_or(0) >= self.limits.per_organization {
            let limit = self.limits.per_organization;
            return Err(too_many(format!("this organization has {limit} webhook waits open already"), 5));
        }
        if counts.total >= self.limits.total {
            return Err(too_many(format!("this server has {} webhook waits open already", self.limits.total), 5));
        }
        *counts.jobs.entry(job).or_default() += 1;
        *counts.orgs.entry(org).or_default() += 1;
        counts.total += 1;
        Ok(JobWait { waiters: self.clone(), job, org })
    }

    /// Registers a waiter for `spec`, recording (or refreshing) the endpoint's watch first so that a capture stored
    /// from then on is notified, and wakes the target's sweeper to look for it.
    pub async fn wait(self: &Arc<Self>, spec: WaitSpec) -> Waiting {
        metrics::gauge!("hookflow_capture_waiters").increment(1.0);
        let target = spec.target;
        let key = key(target);
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        let (entry, new, watch_due) = {
            let mut targets = locked(&self.targets);
            let mut new = false;
            let entry = targets
                .entry(key)
                .or_insert_with(|| {
                    new = true;
                    Arc::default()
                })
                .clone();
            let mut state = locked(&entry.state);
            state.generation += 1;
            let generation = state.generation;
            state.waiters.insert(slot, Registered { spec: Arc::new(spec), generation, found: Some(sender) });
            let due = state.watched_at.is_none_or(|at| at.elapsed() >= WATCH_REFRESH);
            if due {
                state.watched_at = Some(Instant::now());
            }
            drop(state);
            (entry, new, due)
        };
        if new {
            tokio::spawn(sweeper(self.clone(), entry.clone()));
        }
        if let (CaptureTarget::Webhook(webhook_id), true) = (target, watch_due) {
            crate::db::watch::record(&self.pool, Watch::Captures { webhook_id }, self.watcher).await;
        }
        entry.wake.notify_one();
        Waiting { waiters: self.clone(), key, slot, entry, found: receiver }
    }

    /// A capture was stored at the target `id` (an endpoint's or an execution's id) somewhere.
    pub fn wake(&self, id: Uuid) {
        if let Some(entry) = locked(&self.targets).get(&id) {
            entry.wake.notify_one();
        }
    }

    /// Notifications may have been lost: every target looks again.
    pub fn wake_all(&self) {
        for entry in locked(&self.targets).values() {
            entry.wake.notify_one();
        }
    }

    /// How many waiters this process holds.
    pub fn waiting(&self) -> usize {
        locked(&self.targets).values().map(|entry| locked(&entry.state).waiters.len()).sum()
    }

    fn leave(&self, key: Uuid, slot: i64, entry: &Arc<Entry>) {
        metrics::gauge!("hookflow_capture_waiters").decrement(1.0);
        let mut targets = locked(&self.targets);
        let mut state = locked(&entry.state);
        let Some(left) = state.waiters.remove(&slot) else { return };
        if !state.waiters.is_empty() {
            return;
        }
        state.retired = true;
        if targets.get(&key).is_some_and(|current| Arc::ptr_eq(current, entry)) {
            targets.remove(&key);
        }
        entry.wake.notify_one();
        if let (CaptureTarget::Webhook(webhook_id), Some(_)) = (left.spec.target, state.watched_at) {
            let (pool, watcher) = (self.pool.clone(), self.watcher);
            tokio::spawn(async move { crate::db::watch::forget_captures(&pool, webhook_id, watcher).await });
        }
    }
}

/// An entry's sweeper: one sweep per wake-up (wakes while it sweeps make one more), until the entry retires.
async fn sweeper(waiters: Arc<CaptureWaiters>, entry: Arc<Entry>) {
    let mut recheck = FIRST_RECHECK;
    loop {
        tokio::select! {
            () = entry.wake.notified() => {}
            () = tokio::time::sleep(recheck) => recheck = RECHECK,
        }
        let (asking, generation, seen) = {
            let state = locked(&entry.state);
            if state.retired {
                return;
            }
            let asking: Vec<(i64, i64, Arc<WaitSpec>)> = state
                .waiters
                .iter()
                .filter(|(_, w)| w.found.is_some())
                .map(|(slot, w)| (*slot, w.generation, w.spec.clone()))
                .collect();
            (asking, state.generation, state.seen.clone())
        };
        if asking.is_empty() {
            continue;
        }
        let Ok(_permit) = waiters.sweeps.acquire().await else { return };
        let asking: Vec<Asking<'_>> = asking
            .iter()
            .map(|(slot, generation, spec)| Asking { slot: *slot, generation: *generation, spec })
            .collect();
        match Box::pin(wait_sweep::sweep(&waiters.pool, &asking, &seen)).await {
            Ok(swept) => {
                let mut state = locked(&entry.state);
                state.seen = Seen { ids: swept.window, generation };
                for (slot, row) in swept.found {
                    if let Some(sender) = state.waiters.get_mut(&slot).and_then(|w| w.found.take()) {
                        let _ = sender.send(row);
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "a sweep of webhook waits failed; it is tried again");
                recheck = RETRY;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn waits_are_capped_per_job_organization_and_server_inclusively() {
        let pool = sqlx::postgres::PgPoolOptions::new().connect_lazy("postgres://nobody@localhost/none").expect("pool");
        let waiters = CaptureWaiters::new(pool, WaitLimits { per_organization: 6, total: 9 });
        let (org, other) = (OrgId::now_v7(), OrgId::now_v7());
        let jobs: Vec<JobId> = (0..3).map(|_| JobId::now_v7()).collect();
        let mut open = Vec::new();
        for _ in 0..WAITS_PER_JOB {
            open.push(waiters.open(jobs[0], org).expect("a job's first waits"));
        }
        assert!(waiters.open(jobs[0], org).is_err(), "a job's fifth wait");
        open.push(waiters.open(jobs[1], org).expect("the organization's fifth"));
        open.push(waiters.open(jobs[1], org).expect("the organization's sixth: the limit is inclusive"));
        let refused = waiters.open(jobs[2], org).expect_err("the organization's seventh");
        assert_eq!((refused.code, refused.retry_after_s.is_some()), (ErrorCode::RateLimited, true));
        open.push(waiters.open(jobs[2], other).expect("another organization's"));
        open.push(waiters.open(jobs[2], other).expect("another organization's"));
        open.push(waiters.open(jobs[2], other).expect("the server's ninth"));
        assert!(waiters.open(JobId::now_v7(), OrgId::now_v7()).is_err(), "the server's tenth");
        open.truncate(5);
        assert!(waiters.open(jobs[2], org).is_ok(), "closed waits give their places back");
    }
}
