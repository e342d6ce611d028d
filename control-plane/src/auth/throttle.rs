//! Throttles of the password endpoints. A sign-in attempt is reserved before its password is hashed, in one step
//! under one lock (check and count together, so a burst cannot all pass the check): it counts as a failure of its
//! (email, client) and its client until it succeeds, and holds an in-flight slot of its client, its email and the
//! server (argon2 hashes queue for CPU; a burst may not queue hours of them). Clients are addresses, IPv6 ones by
//! their /64 (`http::client_address`); an email's count is kept per client, so a stranger never locks a person out.
//! Failures are also counted per account, so a failed sign-in is written to the audit log once per account and
//! window, not once per guess. Sign-ups are counted per client.

use crate::cache::BoundedCache;
use crate::error::ApiError;
use crate::http::client_address::budget_key;
use hookflow_shared::ErrorCode;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The window failures and sign-ups are counted in.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// Failures allowed per (email, client) and per client within a window.
pub const FAILURES_PER_EMAIL: u32 = 5;
pub const FAILURES_PER_CLIENT: u32 = 50;
/// Password checks running at once per client, per email, and in all.
const IN_FLIGHT_PER_CLIENT: u32 = 4;
const IN_FLIGHT_PER_EMAIL: u32 = 2;
const IN_FLIGHT_TOTAL: u32 = 16;
/// Sign-ups allowed per client within a window.
pub const SIGNUPS_PER_CLIENT: u32 = 10;
/// Password resets one client address (its /64 for IPv6) may ask for per window.
pub const RESETS_PER_CLIENT: u32 = 10;
/// Counter windows kept at most (the oldest leave first).
const ENTRIES: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Counter {
    EmailFromClient(String, IpAddr),
    Client(IpAddr),
    Account(String),
    SignUps(IpAddr),
    Resets(IpAddr),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Slot {
    Client(IpAddr),
    Email(String),
    Total,
}

/// Counters live one window each (their entry is made when the window starts) in the server's one bounded cache:
/// past `ENTRIES` the oldest windows leave one at a time.
#[derive(Debug)]
struct Counts {
    windows: BoundedCache<Counter, u32>,
    in_flight: HashMap<Slot, u32>,
}

impl Default for Counts {
    fn default() -> Self {
        Self { windows: BoundedCache::new(ENTRIES).with_ttl(WINDOW), in_flight: HashMap::new() }
    }
}

impl Counts {
    /// The counter's value in its current window, and the seconds left of that window.
    fn value(&self, counter: &Counter) -> (u32, u64) {
        let current = self.windows.read(counter, |count, age| (*count, WINDOW.saturating_sub(age).as_secs().max(1)));
        current.unwrap_or((0, WINDOW.as_secs()))
    }

    /// Adds `by` (which may be negative) to a counter, starting a new window when the last one ended.
    fn add(&mut self, counter: Counter, by: i64) -> u32 {
        self.windows.upsert(
            counter,
            || 0,
            |count, _| {
                *count = u32::try_from((i64::from(*count) + by).max(0)).unwrap_or(u32::MAX);
                *count
            },
        )
    }

    fn occupy(&mut self, slot: Slot, by: i32) {
        let value = self.in_flight.entry(slot.clone()).or_default();
        *value = value.saturating_add_signed(by);
        if *value == 0 {
            self.in_flight.remove(&slot);
        }
    }
}

fn too_many(message: &str, seconds: u64) -> ApiError {
    let mut error = ApiError::new(ErrorCode::RateLimited, format!("{message}; retry later"));
    error.retry_after_s = Some(seconds.max(1));
    error
}

#[derive(Debug, Default, Clone)]
pub struct SignInThrottle {
    counts: Arc<Mutex<Counts>>,
}

/// A reserved password check: it counts as a failure until `succeeded`, and holds its in-flight slots until
/// dropped.
#[derive(Debug)]
pub struct Attempt {
    counts: Arc<Mutex<Counts>>,
    email: String,
    client: IpAddr,
    settled: bool,
}

impl SignInThrottle {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserves a password check of `email` from `address`, or 429 with `Retry-After` when too many failed or run
    /// now (the check and the count are one step).
    pub fn begin(&self, email: &str, address: IpAddr) -> Result<Attempt, ApiError> {
        let client = budget_key(address);
        let mut counts = self.lock();
        for (counter, limit) in [
            (Counter::EmailFromClient(email.to_owned(), client), FAILURES_PER_EMAIL),
            (Counter::Client(client), FAILURES_PER_CLIENT),
        ] {
            let (failures, left) = counts.value(&counter);
            if failures >= limit {
                return Err(too_many("too many failed sign-ins", left));
            }
        }
        let slots = [
            (Slot::Client(client), IN_FLIGHT_PER_CLIENT),
            (Slot::Email(email.to_owned()), IN_FLIGHT_PER_EMAIL),
            (Slot::Total, IN_FLIGHT_TOTAL),
        ];
        if slots.iter().any(|(slot, limit)| counts.in_flight.get(slot).is_some_and(|n| n >= limit)) {
            return Err(too_many("too many sign-ins are being checked at once", 1));
        }
        for (slot, _) in slots {
            counts.occupy(slot, 1);
        }
        counts.add(Counter::EmailFromClient(email.to_owned(), client), 1);
        counts.add(Counter::Client(client), 1);
        Ok(Attempt { counts: self.counts.clone(), email: email.to_owned(), client, settled: false })
    }

    /// Counts a sign-up from `address`, or 429 past the window's allowance.
    pub fn sign_up(&self, address: IpAddr) -> Result<(), ApiError> {
        let counter = Counter::SignUps(budget_key(address));
        let mut counts = self.lock();
        let (done, left) = counts.value(&counter);
        if done >= SIGNUPS_PER_CLIENT {
            return Err(too_many("too many sign-ups from this address", left));
        }
        counts.add(counter, 1);
        Ok(())
    }

    /// Counts a password reset asked for from `address`, or 429 past the window's allowance (whoever it is for).
    pub fn password_reset(&self, address: IpAddr) -> Result<(), ApiError> {
        let counter = Counter::Resets(budget_key(address));
        let mut counts = self.lock();
        let (done, left) = counts.value(&counter);
        if done >= RESETS_PER_CLIENT {
            return Err(too_many("too many password resets asked for from this address", left));
        }
        counts.add(counter, 1);
        Ok(())
    }
}

impl Attempt {
    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The password was right: the email's count from this client is cleared and the client's failure refunded.
    pub fn succeeded(mut self) {
        self.settled = true;
        let mut counts = self.lock();
        counts.windows.remove(&Counter::EmailFromClient(self.email.clone(), self.client));
        counts.add(Counter::Client(self.client), -1);
    }

    /// The password was wrong (it stays counted). Answers whether this is the account's first failure of the
    /// window: the one written to its audit log.
    pub fn failed(mut self) -> bool {
        self.settled = true;
        let email = self.email.clone();
        self.lock().add(Counter::Account(email), 1) == 1
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        let (email, client) = (self.email.clone(), self.client);
        let mut counts = self.lock();
        counts.occupy(Slot::Client(client), -1);
        counts.occupy(Slot::Email(email), -1);
        counts.occupy(Slot::Total, -1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_reserved_before_hashing_and_successes_are_refunded() {
        let throttle = SignInThrottle::default();
        let address: IpAddr = "192.0.2.1".parse().expect("ip");
        let held: Vec<_> = (0..2).map(|_| throttle.begin("a@x.io", address).expect("two at once")).collect();
        assert!(throttle.begin("a@x.io", address).is_err(), "a third concurrent check of one email waits");
        for attempt in held {
            attempt.failed();
        }
        for _ in 0..3 {
            throttle.begin("a@x.io", address).expect("within five").failed();
        }
        let refused = throttle.begin("a@x.io", address).expect_err("five failures");
        assert!(refused.retry_after_s.is_some_and(|s| s > 60));
        throttle.begin("b@x.io", address).expect("another email").succeeded();
        let elsewhere: IpAddr = "198.51.100.1".parse().expect("ip");
        throttle.begin("a@x.io", elsewhere).expect("a stranger's guesses never lock the person out elsewhere");
    }

    #[test]
    fn failures_are_audited_once_per_account_and_window() {
        let throttle = SignInThrottle::default();
        let firsts: Vec<bool> =
            (0..4u8).map(|i| throttle.begin("c@x.io", IpAddr::from([192, 0, 2, i])).expect("begin").failed()).collect();
        assert_eq!(firsts, vec![true, false, false, false]);
    }

    #[test]
    fn sign_ups_are_counted_per_client_and_ipv6_by_its_64() {
        let throttle = SignInThrottle::default();
        for i in 0..SIGNUPS_PER_CLIENT {
            let address: IpAddr = format!("2001:db8::{i}").parse().expect("ip");
            throttle.sign_up(address).expect("within the allowance");
        }
        assert!(throttle.sign_up("2001:db8::ffff".parse().expect("ip")).is_err(), "the same /64");
        assert!(throttle.sign_up("2001:db8:0:1::1".parse().expect("ip")).is_ok(), "another /64");
    }

    #[test]
    fn password_resets_are_counted_per_client_apart_from_sign_ups() {
        let throttle = SignInThrottle::default();
        let address: IpAddr = "198.51.100.7".parse().expect("ip");
        for _ in 0..RESETS_PER_CLIENT {
            throttle.password_reset(address).expect("within the allowance");
        }
        let refused = throttle.password_reset(address).expect_err("past the allowance");
        assert!(refused.to_string().contains("password resets"), "{refused}");
        assert!(throttle.sign_up(address).is_ok(), "sign-ups have their own allowance");
        assert!(throttle.password_reset("198.51.100.8".parse().expect("ip")).is_ok(), "another client");
    }
}
