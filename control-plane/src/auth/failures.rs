//! Failed credential lookups (API keys, job tokens, refresh tokens): a budget per client address and a memory
//! of credentials the database does not know. A well-formed forgery costs at most one lookup (the same forgery
//! again is answered from memory for [`UNKNOWN_TTL`]), and an address that failed its budget within a minute is
//! answered 429 with `Retry-After` before any lookup. Only failures count: credentials that work are never
//! refused because of others' failures, and a credential this replica has seen work (a key in the key cache, a
//! job token it issued) is served whatever its address did. Both maps are [`BoundedCache`]s (the oldest forgotten
//! first, one at a time).

use crate::cache::BoundedCache;
use crate::error::ApiError;
use hookflow_shared::ErrorCode;
use std::net::IpAddr;
use std::time::Duration;

/// The window failures are counted in.
pub const WINDOW: Duration = Duration::from_secs(60);
/// How long a credential the database did not know is answered 401 without asking it again. Only "not found"
/// is remembered (a database error never is); such credentials cannot start to exist: they are made at random
/// by the server and handed out after they are stored.
pub const UNKNOWN_TTL: Duration = Duration::from_secs(30);
/// Unknown credentials remembered at most (the oldest are forgotten first), about 100 bytes each.
const UNKNOWN_CAPACITY: usize = 50_000;
/// Addresses counted at most; past it, the windows started longest ago are dropped first, one at a time.
const ADDRESS_CAPACITY: usize = 100_000;

#[derive(Debug)]
pub struct CredentialFailures {
    per_address: u32,
    /// Failures of each address in its current window, which started when its entry was made ([`WINDOW`] TTL).
    by_address: BoundedCache<IpAddr, u32>,
    /// Hashes of credentials the database said do not exist.
    unknown: BoundedCache<Vec<u8>, ()>,
}

/// The address a budget is kept for: an IPv6 client is counted by its /64 (`http::client_address`).
fn bucket(address: IpAddr) -> IpAddr {
    crate::http::client_address::budget_key(address)
}

impl CredentialFailures {
    /// `per_address` failures per address within [`WINDOW`] (at least one).
    pub fn new(per_address: u32) -> Self {
        Self {
            per_address: per_address.max(1),
            by_address: BoundedCache::new(ADDRESS_CAPACITY).with_ttl(WINDOW),
            unknown: BoundedCache::new(UNKNOWN_CAPACITY).with_ttl(UNKNOWN_TTL),
        }
    }

    /// Before a lookup of a credential this replica has not seen work: 429 while `address` has spent its budget,
    /// 401 (counted) when the database said lately that `hash` does not exist.
    pub fn before_lookup(&self, address: Option<IpAddr>, hash: &[u8]) -> Result<(), ApiError> {
        if let Some(address) = address {
            self.check(address)?;
        }
        if self.is_unknown(hash) {
            self.failed(address);
            return Err(ApiError::unauthorized());
        }
        Ok(())
    }

    /// 429 with `Retry-After` (the rest of the window) while `address` has spent its budget.
    pub fn check(&self, address: IpAddr) -> Result<(), ApiError> {
        let Some((failures, age)) = self.by_address.read(&bucket(address), |failures, age| (*failures, age)) else {
            return Ok(());
        };
        let Some(left) = WINDOW.checked_sub(age) else { return Ok(()) };
        if failures < self.per_address {
            return Ok(());
        }
        let mut error = ApiError::new(
            ErrorCode::RateLimited,
            "too many requests with unknown credentials from this address; retry later",
        );
        error.retry_after_s = Some(left.as_secs().max(1));
        Err(error)
    }

    /// A credential of `address` was refused.
    pub fn failed(&self, address: Option<IpAddr>) {
        let Some(address) = address else { return };
        self.by_address.upsert(bucket(address), || 0, |failures, _| *failures = failures.saturating_add(1));
    }

    /// The database does not know the credential hashed `hash`, sent from `address`: counted, and remembered.
    pub fn not_found(&self, address: Option<IpAddr>, hash: Vec<u8>) {
        self.failed(address);
        self.unknown.insert(hash, ());
    }

    fn is_unknown(&self, hash: &[u8]) -> bool {
        self.unknown.contains(hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));
    const THERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));

    #[test]
    fn an_address_that_spent_its_budget_waits_and_others_do_not() {
        let failures = CredentialFailures::new(3);
        for n in 0..3u8 {
            assert!(failures.before_lookup(Some(HERE), &[n]).is_ok());
            failures.not_found(Some(HERE), vec![n]);
        }
        let refused = failures.before_lookup(Some(HERE), b"new").expect_err("over budget");
        assert_eq!(refused.code, ErrorCode::RateLimited);
        assert!(refused.retry_after_s.is_some_and(|s| (1..=60).contains(&s)));
        assert!(failures.before_lookup(Some(THERE), b"new").is_ok(), "another address has its own budget");
    }

    #[test]
    fn unknown_credentials_are_answered_from_memory_and_counted() {
        let failures = CredentialFailures::new(10);
        failures.not_found(Some(HERE), b"forged".to_vec());
        let again = failures.before_lookup(Some(THERE), b"forged").expect_err("known unknown");
        assert_eq!(again.code, ErrorCode::Unauthorized);
        assert!(failures.before_lookup(None, b"other").is_ok());
    }

    #[test]
    fn the_memory_of_unknown_credentials_is_bounded() {
        let failures = CredentialFailures::new(u32::MAX);
        for n in 0..UNKNOWN_CAPACITY + 10 {
            failures.not_found(None, n.to_le_bytes().to_vec());
        }
        assert_eq!(failures.unknown.len(), UNKNOWN_CAPACITY);
        assert!(!failures.unknown.contains(0usize.to_le_bytes().as_slice()), "the oldest went first");
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().expect("ip");
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().expect("ip");
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().expect("ip");
        assert_eq!(bucket(a), bucket(b));
        assert_eq!(bucket(mapped), HERE);
    }
}
