//! Per-requester allowances of account mail: how many resets or sign-up confirmations about one account one
//! requester (an IPv4 address or an IPv6 /64, the caller's budget key) may have mailed per window. Keyed by both, so
//! a stranger asking again and again for someone's account uses up only their own allowance, never the owner's;
//! the callers keep a higher ceiling per account (in the database), which bounds what all requesters together
//! mail one person. Held in this process, bounded in entries.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Mails about one account one requester may have sent per [`WINDOW`].
pub const PER_REQUESTER: usize = 3;
/// The window the allowance counts in.
pub const WINDOW: Duration = Duration::from_secs(30 * 60);
/// Pairs of (account, requester) remembered at most; past it the oldest-looking are forgotten after expired ones.
const ENTRIES: usize = 100_000;

/// The counts (see the module's doc).
#[derive(Debug, Default)]
pub struct Allowances {
    sent: Mutex<HashMap<(String, IpAddr), Vec<Instant>>>,
}

impl Allowances {
    /// Counts one mail about `account` for `requester`, or false when the requester had its allowance this window.
    pub fn allow(&self, account: &str, requester: IpAddr) -> bool {
        self.allow_at(account, requester, Instant::now())
    }

    fn allow_at(&self, account: &str, requester: IpAddr, now: Instant) -> bool {
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        let key = (account.to_owned(), requester);
        if !sent.contains_key(&key) && sent.len() >= ENTRIES {
            sent.retain(|_, times| times.iter().any(|t| now.duration_since(*t) < WINDOW));
            if sent.len() >= ENTRIES {
                // Full of live entries (a requester spread over very many addresses): forget one; the per-account
                // ceiling still bounds what one person is sent.
                if let Some(any) = sent.keys().next().cloned() {
                    sent.remove(&any);
                }
            }
        }
        let times = sent.entry(key).or_default();
        times.retain(|t| now.duration_since(*t) < WINDOW);
        if times.len() >= PER_REQUESTER {
            return false;
        }
        times.push(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stranger_uses_up_only_their_own_allowance() {
        let allowances = Allowances::default();
        let (stranger, owner): (IpAddr, IpAddr) = ("203.0.113.7".parse().unwrap(), "198.51.100.20".parse().unwrap());
        let now = Instant::now();
        for _ in 0..PER_REQUESTER {
            assert!(allowances.allow_at("user:1", stranger, now));
        }
        assert!(!allowances.allow_at("user:1", stranger, now), "the stranger's allowance is used up");
        assert!(allowances.allow_at("user:1", owner, now), "the owner's is whole");
        assert!(allowances.allow_at("user:2", stranger, now), "another account is counted apart");
        assert!(allowances.allow_at("user:1", stranger, now + WINDOW), "the window ends");
    }
}
