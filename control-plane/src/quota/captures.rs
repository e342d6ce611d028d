//! The capture path's quotas (`captures_per_day`, `stored_bytes`): an in-memory view per organization, admitted
//! before a body is read, without a query. The view is the database's usage (`organization_usage`) as last read,
//! plus this server's own captures since: a capture is counted when admitted (its declared length, then its real
//! size once stored; nothing when it is not stored), so concurrent captures never pass a limit between them.
//! An organization's view is read at its first capture, then refreshed with every other known organization in one
//! statement every refresh interval (`--quota-refresh-ms`, 1 s by default; a limit an operator sets takes effect
//! within it); a view unused for 10 minutes is forgotten.
//!
//! Accuracy. One server: exact (the Nth capture of the day is admitted, the N+1th refused), but a body without a
//! `Content-Length` counts as empty until stored, so chunked bodies in flight at once may pass `stored_bytes` by
//! their sizes. Several replicas: each sees the others' captures only at its refresh, so a limit may be overshot by
//! what the other replicas admit between two of its refreshes (one interval, up to four while captures keep it
//! busy, below), and never by more than (replicas - 1) x the limit. A refresh is exact when none of the
//! organization's captures was in flight while it read; otherwise it keeps the view as it was, up to three times in
//! a row, and then takes the database's figures anyway: captures in flight may then be counted twice until the next
//! refresh, so a capture may be refused early, never admitted late.

use crate::error::ApiError;
use crate::quota::usage::{self, CaptureUsage};
use crate::quota::{Quota, QuotaDefaults, exceeded};
use chrono::{NaiveDate, Utc};
use hookflow_shared::OrgId;
use sqlx::PgPool;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A view unused this long is forgotten (read again at the organization's next capture).
const IDLE: Duration = Duration::from_secs(600);

/// The capture quotas of the organizations this server has seen captures for.
#[derive(Debug)]
pub struct CaptureQuotas {
    pool: PgPool,
    defaults: QuotaDefaults,
    /// `Retry-After` of a capture refused for `stored_bytes`: when retention may next have freed room.
    bytes_retry: Duration,
    orgs: Mutex<HashMap<OrgId, Arc<OrgView>>>,
}

#[derive(Debug)]
struct OrgView {
    /// Whether the view was read from the database once.
    read: AtomicBool,
    /// Held while the first read of the view runs, so concurrent first captures read it once.
    first_read: tokio::sync::Mutex<()>,
    view: Mutex<View>,
}

#[derive(Debug, Clone, Copy, Default)]
struct View {
    bytes_limit: Option<i64>,
    per_day_limit: Option<i64>,
    /// The day `db_captures` and `settled_captures` count.
    day: Option<NaiveDate>,
    db_bytes: i64,
    db_captures: i64,
    /// This server's captures admitted and not yet stored or refused.
    pending_bytes: i64,
    pending_captures: i64,
    /// This server's captures stored since the database was last read.
    settled_bytes: i64,
    settled_captures: i64,
    /// Bumped at every admission and every end of one: a refresh during which it did not move, with nothing
    /// pending when it began, read the database exactly as this view counts it.
    activity: u64,
    /// Refreshes in a row that met captures in flight and kept the view as it was.
    skipped: u32,
    used: Option<Instant>,
}

/// Refreshes in a row that may keep a view unchanged because captures were in flight; the next one takes the
/// database's figures all the same (captures in flight may then be counted twice until the following one).
const MAX_SKIPPED: u32 = 3;

/// An admitted capture's place in its organization's view: `stored` settles it at its real size; dropped
/// unsettled (refused, failed), it gives its place back.
#[derive(Debug)]
pub struct Admission {
    counted: Option<(Arc<OrgView>, NaiveDate, i64)>,
}

impl Admission {
    /// The capture was stored with a body of `bytes`.
    pub fn stored(mut self, bytes: usize) {
        if let Some((org, day, declared)) = self.counted.take() {
            let mut view = locked(&org.view);
            view.end(declared);
            view.settled_bytes += i64::try_from(bytes).unwrap_or(i64::MAX);
            if view.day == Some(day) {
                view.settled_captures += 1;
            }
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some((org, _, declared)) = self.counted.take() {
            locked(&org.view).end(declared);
        }
    }
}

impl CaptureQuotas {
    pub fn new(pool: PgPool, defaults: QuotaDefaults, bytes_retry: Duration) -> Self {
        Self { pool, defaults, bytes_retry, orgs: Mutex::default() }
    }

    /// Admits a capture of `org_id` declaring `declared` body bytes (0 when unknown), or refuses it with 429
    /// `quota_exceeded` naming the quota. Reads the database only at the organization's first capture here.
    pub async fn admit(&self, org_id: OrgId, declared: usize) -> Result<Admission, ApiError> {
        let org = locked(&self.orgs).entry(org_id).or_insert_with(Default::default).clone();
        if !org.read.load(Ordering::Acquire) {
            let _reading = org.first_read.lock().await;
            if !org.read.load(Ordering::Acquire) {
                let fresh = usage::for_captures(&self.pool, &[org_id]).await?;
                if let Some(fresh) = fresh.first() {
                    locked(&org.view).refreshed(fresh, Before::default());
                }
                org.read.store(true, Ordering::Release);
            }
        }
        let now = Utc::now();
        let today = now.date_naive();
        let declared = i64::try_from(declared).unwrap_or(i64::MAX);
        let mut view = locked(&org.view);
        view.used = Some(Instant::now());
        if view.day != Some(today) {
            // A new UTC day: its count starts at nothing (the next refresh reads the database's).
            (view.day, view.db_captures, view.settled_captures) = (Some(today), 0, 0);
        }
        let (bytes_limit, per_day_limit) = self.limits(&view);
        if bytes_limit.is_none() && per_day_limit.is_none() {
            return Ok(Admission { counted: None });
        }
        if let Some(limit) = per_day_limit
            && view.db_captures + view.settled_captures + view.pending_captures >= limit
        {
            let midnight = (today + chrono::Days::new(1)).and_hms_opt(0, 0, 0).map(|m| m.and_utc());
            let wait = midnight.map_or(1, |m| (m - now).num_seconds().max(1) as u64);
            return Err(exceeded(Quota::CapturesPerDay, limit, Some(wait)));
        }
        if let Some(limit) = bytes_limit {
            let used = view.db_bytes + view.settled_bytes + view.pending_bytes;
            if used >= limit || used.saturating_add(declared) > limit {
                return Err(exceeded(Quota::StoredBytes, limit, Some(self.bytes_retry.as_secs())));
            }
        }
        view.pending_captures += 1;
        view.pending_bytes += declared;
        view.activity += 1;
        Ok(Admission { counted: Some((org.clone(), today, declared)) })
    }

    fn limits(&self, view: &View) -> (Option<i64>, Option<i64>) {
        let default = |d: Option<u64>| d.map(|d| i64::try_from(d).unwrap_or(i64::MAX));
        (
            view.bytes_limit.or(default(self.defaults.stored_bytes)),
            view.per_day_limit.or(default(self.defaults.captures_per_day)),
        )
    }

    /// Reads the usage of every organization known here in one statement (forgetting those unused for 10 minutes
    /// or gone); answers how many were read.
    pub async fn refresh(&self) -> Result<usize, sqlx::Error> {
        let known: Vec<(OrgId, Arc<OrgView>)> = {
            let mut orgs = locked(&self.orgs);
            orgs.retain(|_, org| locked(&org.view).used.is_some_and(|used| used.elapsed() < IDLE));
            orgs.iter().map(|(id, org)| (*id, org.clone())).collect()
        };
        if known.is_empty() {
            return Ok(0);
        }
        // What this server had counted before the read: the read includes what of it was stored by then.
        let before: Vec<Before> = known.iter().map(|(_, org)| Before::of(&locked(&org.view))).collect();
        let ids: Vec<OrgId> = known.iter().map(|(id, _)| *id).collect();
        let fresh: HashMap<OrgId, CaptureUsage> =
            usage::for_captures(&self.pool, &ids).await?.into_iter().map(|u| (u.org_id, u)).collect();
        let mut orgs = locked(&self.orgs);
        for ((id, org), before) in known.iter().zip(before) {
            match fresh.get(id) {
                Some(fresh) => locked(&org.view).refreshed(fresh, before),
                None => {
                    orgs.remove(id);
                }
            }
        }
        Ok(fresh.len())
    }
}

/// A view's counts as a refresh began.
#[derive(Debug, Clone, Copy, Default)]
struct Before {
    settled_bytes: i64,
    settled_captures: i64,
    pending: bool,
    activity: u64,
}

impl Before {
    fn of(view: &View) -> Self {
        Self {
            settled_bytes: view.settled_bytes,
            settled_captures: view.settled_captures,
            pending: view.pending_captures > 0,
            activity: view.activity,
        }
    }
}

impl View {
    /// An admitted capture is stored or refused.
    fn end(&mut self, declared: i64) {
        self.pending_captures -= 1;
        self.pending_bytes -= declared;
        self.activity += 1;
    }

    /// Takes the database's limits, and its figures with what this server stored after `before` was taken. When
    /// captures were in flight meanwhile (the read may hold some of them or not), the figures are kept as they
    /// were, up to [`MAX_SKIPPED`] times in a row.
    fn refreshed(&mut self, fresh: &CaptureUsage, before: Before) {
        self.bytes_limit = fresh.stored_bytes_limit;
        self.per_day_limit = fresh.captures_per_day_limit;
        self.used.get_or_insert_with(Instant::now);
        let quiet = !before.pending && before.activity == self.activity;
        if !quiet && self.skipped < MAX_SKIPPED {
            self.skipped += 1;
            return;
        }
        self.skipped = 0;
        self.db_bytes = fresh.stored_bytes;
        self.settled_bytes -= before.settled_bytes;
        if self.day == Some(fresh.day) {
            self.settled_captures -= before.settled_captures;
        } else {
            self.settled_captures = 0;
        }
        self.day = Some(fresh.day);
        self.db_captures = fresh.captures_today;
    }
}
impl Default for OrgView {
    fn default() -> Self {
        Self {
            read: AtomicBool::new(false),
            first_read: tokio::sync::Mutex::new(()),
            view: Mutex::new(View::default()),
        }
    }
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
