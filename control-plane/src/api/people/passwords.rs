//! Passwords: argon2id hashes in PHC format, computed off the async workers with bounded concurrency (hashing is
//! memory- and CPU-hard by design: two at a time on a small machine, the rest wait their turn). An unknown email is
//! checked against a dummy hash, so a sign-in costs the same whether or not the person exists.
//!
//! Parameters: argon2id, 19 MiB of memory, 2 passes, 1 lane, a 16-byte random salt, a 32-byte output (the
//! crate's defaults, which follow the OWASP recommendation). Stored hashes carry their parameters, so raising them
//! later keeps old hashes verifiable.

use argon2::password_hash::{PasswordHash, PasswordHasher as _, PasswordVerifier as _, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use rand::Rng as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use tokio::sync::Semaphore;

/// Shortest password accepted (characters).
pub const MIN_LENGTH: usize = 12;
/// Longest password accepted (characters): hashing cost does not depend on it, but bodies are bounded anyway.
pub const MAX_LENGTH: usize = 1024;

/// Hashes computed at once: the machine's cores, at least one.
static SLOTS: LazyLock<Arc<Semaphore>> = LazyLock::new(|| {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
    Arc::new(Semaphore::new(cores.max(1)))
});

/// What an unknown email is verified against: a real hash of a random password.
static DUMMY: LazyLock<String> = LazyLock::new(|| {
    let mut random = [0u8; 32];
    rand::rng().fill_bytes(&mut random);
    hash_now(&hex::encode(random)).unwrap_or_default()
});

fn hasher() -> Argon2<'static> {
    Argon2::new(Algorithm::Argon2id, Version::V0x13, Params::DEFAULT)
}

fn hash_now(password: &str) -> Result<String, argon2::password_hash::Error> {
    let mut salt = [0u8; 16];
    rand::rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt)?;
    Ok(hasher().hash_password(password.as_bytes(), &salt)?.to_string())
}

fn verify_now(stored: &str, password: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|parsed| hasher().verify_password(password.as_bytes(), &parsed).is_ok())
}

/// Why a new password is refused.
pub fn check_new(password: &str) -> Result<(), String> {
    let length = password.chars().count();
    if length < MIN_LENGTH {
        return Err(format!("a password needs at least {MIN_LENGTH} characters"));
    }
    if length > MAX_LENGTH {
        return Err(format!("a password has at most {MAX_LENGTH} characters"));
    }
    Ok(())
}

/// Runs blocking `work` in one of `slots`. The slot goes into the blocking task: a request that goes away while
/// its hash runs keeps the slot until the hash is done, so disconnecting clients cannot pile up argon2 work
/// beyond the slots. Each hash frees 19 MiB, which the last hash running hands back to the system
/// (`hookflow_alloc`): a quiet server kept it for good (an idle fleet's server: 42 MiB before its runners came, 33
/// with this). Hashes that follow one another keep reusing it, so a burst of sign-ins pays for one release.
async fn in_slot<T: Send + 'static>(slots: &Arc<Semaphore>, work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let slot = slots.clone().acquire_owned().await.ok()?;
    tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let _running = Running::start(&RUNNING, hookflow_alloc::release_freed_memory);
        work()
    })
    .await
    .ok()
}

/// Hashes running now (see `in_slot`).
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// One piece of work counted in `count` while it lives; the last to end calls `last_out` (also when it panics).
struct Running {
    count: &'static AtomicUsize,
    last_out: fn(),
}

impl Running {
    fn start(count: &'static AtomicUsize, last_out: fn()) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self { count, last_out }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            (self.last_out)();
        }
    }
}

/// Hashes a password for storing.
pub async fn hash(password: String) -> Result<String, PasswordError> {
    in_slot(&SLOTS, move || hash_now(&password).map_err(|_| PasswordError)).await.unwrap_or(Err(PasswordError))
}

/// Whether `password` matches `stored`; with no stored hash (unknown email, or a user of external providers
/// only) the dummy is checked, so the answer takes as long and is false.
pub async fn verify(stored: Option<String>, password: String) -> bool {
    let check = move || match stored {
        Some(stored) => verify_now(&stored, &password),
        None => {
            verify_now(&DUMMY, &password);
            false
        }
    };
    in_slot(&SLOTS, check).await.unwrap_or(false)
}

/// A one-time password: 20 random letters and digits (about 119 bits), to be changed at the first sign-in.
pub fn one_time() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
    let mut random = [0u8; 20];
    rand::rng().fill_bytes(&mut random);
    random.iter().map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char).collect()
}

/// Hashing failed (it does not, short of memory exhaustion).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the password could not be hashed")]
pub struct PasswordError;

#[cfg(test)]
mod slot_tests {
    use super::*;

    /// Review of Speed III: releasing after every hash purged the 19 MiB the next hash of a burst faulted back in.
    #[test]
    fn only_the_last_running_hash_hands_memory_back() {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        static RELEASES: AtomicUsize = AtomicUsize::new(0);
        fn release() {
            RELEASES.fetch_add(1, Ordering::SeqCst);
        }
        let first = Running::start(&COUNT, release);
        let second = Running::start(&COUNT, release);
        drop(first);
        assert_eq!(RELEASES.load(Ordering::SeqCst), 0, "another hash still runs");
        let third = Running::start(&COUNT, release);
        drop(second);
        drop(third);
        assert_eq!(RELEASES.load(Ordering::SeqCst), 1, "the last one out releases, once");
        let panicking = std::thread::spawn(|| {
            let _running = Running::start(&COUNT, release);
            panic!("a hash that fails still ends");
        });
        assert!(panicking.join().is_err());
        assert_eq!(RELEASES.load(Ordering::SeqCst), 2, "a panicking hash counts out too");
        assert_eq!(COUNT.load(Ordering::SeqCst), 0);
    }

    /// Review of Hardening III: the slot was released when a request went away while its hash kept running, so
    /// connect-send-disconnect piled up argon2 work beyond the slots.
    #[tokio::test]
    async fn a_request_that_goes_away_keeps_its_slot_until_the_work_is_done() {
        let slots = Arc::new(Semaphore::new(1));
        let held = slots.clone();
        let request =
            tokio::spawn(
                async move { in_slot(&held, || std::thread::sleep(std::time::Duration::from_millis(300))).await },
            );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        request.abort();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert_eq!(slots.available_permits(), 0, "the hash still runs: its slot is still taken");
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        assert_eq!(slots.available_permits(), 1, "given back once the work is done");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_the_dummy_never_matches() {
        let stored = hash("correct horse battery".into()).await.expect("hash");
        assert!(stored.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{stored}");
        assert!(verify(Some(stored.clone()), "correct horse battery".into()).await);
        assert!(!verify(Some(stored), "wrong horse battery".into()).await);
        assert!(!verify(None, "anything at all".into()).await);
        assert!(check_new("short").is_err() && check_new("twelve chars").is_ok());
    }
}
