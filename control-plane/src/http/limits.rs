//! Allowances of one client, each answered 429 with `Retry-After` when spent: requests per second per API key and
//! per job token (a job's reports, completion and webhook waits), lookups of capture ids this server does not know per client address (each costs a database query), and live
//! streams held open at once per key. Rate state is shrunk regularly, so it stays bounded however many clients
//! come and go.

use crate::error::ApiError;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use hookflow_shared::ErrorCode;
use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use uuid::Uuid;

/// Lookups of unknown capture ids one address may cause per second (bursts of five times that).
const UNKNOWN_CAPTURES_PER_S: u32 = 50;
/// Requests one job token may make per second (bursts of as many). A runner reports at most every 25 ms and waits
/// for one capture at a time.
pub const JOB_REQUESTS_PER_S: u32 = 50;

#[derive(Debug)]
pub struct Allowances {
    keys: DefaultKeyedRateLimiter<Uuid>,
    unknown_captures: DefaultKeyedRateLimiter<IpAddr>,
    /// By the hash of the job token.
    jobs: DefaultKeyedRateLimiter<Vec<u8>>,
    streams: Mutex<HashMap<Uuid, usize>>,
    streams_per_key: usize,
}

fn quota(per_s: u32, burst: u32) -> Quota {
    let per_s = NonZeroU32::new(per_s).unwrap_or(NonZeroU32::MIN);
    Quota::per_second(per_s).allow_burst(NonZeroU32::new(burst).unwrap_or(per_s))
}

fn rate_limited(what: &str, not_until: &governor::NotUntil<<DefaultClock as Clock>::Instant>) -> ApiError {
    let wait = not_until.wait_time_from(DefaultClock::default().now());
    let mut error = ApiError::new(ErrorCode::RateLimited, format!("{what}; retry later"));
    error.retry_after_s = Some(wait.as_secs_f64().ceil().max(1.0) as u64);
    error
}

impl Allowances {
    pub fn new(key_rate_per_s: u32, streams_per_key: usize) -> Arc<Self> {
        Arc::new(Self {
            keys: RateLimiter::keyed(quota(key_rate_per_s, key_rate_per_s.saturating_mul(2))),
            unknown_captures: RateLimiter::keyed(quota(UNKNOWN_CAPTURES_PER_S, UNKNOWN_CAPTURES_PER_S * 5)),
            jobs: RateLimiter::keyed(quota(JOB_REQUESTS_PER_S, JOB_REQUESTS_PER_S)),
            streams: Mutex::default(),
            streams_per_key,
        })
    }

    /// One request of key `key`.
    pub fn key_request(&self, key: Uuid) -> Result<(), ApiError> {
        self.keys.check_key(&key).map_err(|not_until| rate_limited("this API key makes too many requests", &not_until))
    }

    /// One request under the job token whose hash is `token_hash`.
    pub fn job_request(&self, token_hash: &[u8]) -> Result<(), ApiError> {
        self.jobs.check_key(&token_hash.to_vec()).map_err(|not_until| {
            rate_limited(&format!("this job token makes more than {JOB_REQUESTS_PER_S} requests a second"), &not_until)
        })
    }

    /// One lookup of a capture id this server does not know, from `address`.
    pub fn unknown_capture(&self, address: IpAddr) -> Result<(), ApiError> {
        self.unknown_captures
            .check_key(&address)
            .map_err(|not_until| rate_limited("too many requests to unknown capture URLs", &not_until))
    }

    /// A live stream of key `key`, held until the slot is dropped.
    pub fn open_stream(self: &Arc<Self>, key: Uuid) -> Result<StreamSlot, ApiError> {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        let open = streams.entry(key).or_default();
        if *open >= self.streams_per_key {
            let mut error = ApiError::new(
                ErrorCode::RateLimited,
                format!("this API key holds {} live streams already; close one first", self.streams_per_key),
            );
            error.retry_after_s = Some(5);
            return Err(error);
        }
        *open += 1;
        crate::metrics::stream_subscribers(1.0);
        Ok(StreamSlot { allowances: self.clone(), key })
    }

    /// Forgets rate state of clients not seen lately.
    pub fn shrink(&self) {
        self.keys.retain_recent();
        self.unknown_captures.retain_recent();
        self.jobs.retain_recent();
        self.keys.shrink_to_fit();
        self.unknown_captures.shrink_to_fit();
        self.jobs.shrink_to_fit();
    }
}

/// A live stream's place in its key's allowance.
#[derive(Debug)]
pub struct StreamSlot {
    allowances: Arc<Allowances>,
    key: Uuid,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        crate::metrics::stream_subscribers(-1.0);
        let mut streams = self.allowances.streams.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = streams.get_mut(&self.key) {
            *open -= 1;
            if *open == 0 {
                streams.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_counted_per_key_until_their_slot_drops() {
        let allowances = Allowances::new(10, 2);
        let key = Uuid::now_v7();
        let first = allowances.open_stream(key).expect("first");
        let _second = allowances.open_stream(key).expect("second");
        assert!(allowances.open_stream(key).is_err());
        assert!(allowances.open_stream(Uuid::now_v7()).is_ok(), "another key has its own allowance");
        drop(first);
        assert!(allowances.open_stream(key).is_ok());
    }

    #[test]
    fn a_key_over_its_rate_is_told_when_to_come_back() {
        let allowances = Allowances::new(1, 1);
        let key = Uuid::now_v7();
        assert!(allowances.key_request(key).is_ok());
        assert!(allowances.key_request(key).is_ok(), "a burst of twice the rate");
        let refused = allowances.key_request(key).expect_err("over the rate");
        assert!(refused.retry_after_s.is_some_and(|s| s >= 1));
    }
}
