//! Encryption of secrets at rest: XChaCha20-Poly1305 under the master key, a random 24-byte nonce per value, and
//! associated data binding organization, name and key version. The master key is a keyring: the current key
//! seals, the previous keys still open what they sealed until `hookflow-server keys rotate-master` re-encrypts it.
//! A key's version is its fingerprint, so any server holding a key can tell which values it opens; values of the
//! first release carry version 1 and are tried with every key.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use hookflow_shared::OrgId;
use rand::Rng as _;
use sha2::Digest as _;
use std::sync::{Arc, RwLock};

/// The version values sealed before keys carried fingerprints: open it with every key of the ring.
pub const LEGACY_VERSION: i32 = 1;

/// One key and its version.
#[derive(Clone)]
struct RingKey {
    bytes: [u8; 32],
    version: i32,
}

impl RingKey {
    fn new(bytes: [u8; 32]) -> Self {
        Self { version: fingerprint(&bytes), bytes }
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&Key::from(self.bytes))
    }
}

/// A key's version: 31 bits of a SHA-256 of it, never the legacy 1 (nor 0).
pub fn fingerprint(key: &[u8; 32]) -> i32 {
    let digest = sha2::Sha256::new().chain_update(b"hookflow-master-key\0").chain_update(key).finalize();
    let value = i32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]) & i32::MAX;
    if value <= LEGACY_VERSION { value + 2 } else { value }
}

#[derive(Clone)]
struct Ring {
    current: RingKey,
    previous: Vec<RingKey>,
}

/// The master keyring: the key that seals and the keys that still open. Clones share one ring, which
/// [`MasterKey::replace`] swaps for all of them (a rotation announced by another process). Debug never shows a key.
#[derive(Clone)]
pub struct MasterKey(Arc<RwLock<Ring>>);

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey([REDACTED])")
    }
}

/// A sealed value: what is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub ciphertext: Vec<u8>,
    pub nonce: Vec<u8>,
    pub key_version: i32,
}

impl Sealed {
    /// A sealed value from its three nullable columns; `None` unless all three are set.
    pub fn from_columns(ciphertext: Option<Vec<u8>>, nonce: Option<Vec<u8>>, key_version: Option<i32>) -> Option<Self> {
        Some(Self { ciphertext: ciphertext?, nonce: nonce?, key_version: key_version? })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the secret cannot be decrypted (wrong key, or the value belongs to another organization or name)")]
pub struct OpenError;

fn associated_data(org_id: OrgId, name: &str, key_version: i32) -> Vec<u8> {
    format!("hookflow-secret\u{0}{org_id}\u{0}{name}\u{0}{key_version}").into_bytes()
}

impl MasterKey {
    /// A ring of one key.
    pub fn new(bytes: [u8; 32]) -> Self {
        Self::with_previous(bytes, Vec::new())
    }

    /// A ring that seals with `current` and still opens with each of `previous`.
    pub fn with_previous(current: [u8; 32], previous: Vec<[u8; 32]>) -> Self {
        Self(Arc::new(RwLock::new(Self::ring(current, previous))))
    }

    fn ring(current: [u8; 32], previous: Vec<[u8; 32]>) -> Ring {
        let current = RingKey::new(current);
        let previous = previous.into_iter().map(RingKey::new).filter(|k| k.version != current.version).collect();
        Ring { current, previous }
    }

    /// A fresh random key (tests and benchmarks; servers load theirs from configuration).
    pub fn random() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self::new(bytes)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Ring> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Swaps the keys of this ring (and of every clone of it).
    pub fn replace(&self, current: [u8; 32], previous: Vec<[u8; 32]>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Self::ring(current, previous);
    }

    /// The version new values are sealed under.
    pub fn current_version(&self) -> i32 {
        self.read().current.version
    }

    pub fn seal(&self, org_id: OrgId, name: &str, plaintext: &[u8]) -> Sealed {
        let key = self.read().current.clone();
        let mut nonce = [0u8; 24];
        rand::rng().fill_bytes(&mut nonce);
        let aad = associated_data(org_id, name, key.version);
        let ciphertext =
            key.cipher().encrypt(&XNonce::from(nonce), Payload { msg: plaintext, aad: &aad }).unwrap_or_default();
        Sealed { ciphertext, nonce: nonce.to_vec(), key_version: key.version }
    }

    pub fn open(&self, org_id: OrgId, name: &str, sealed: &Sealed) -> Result<Vec<u8>, OpenError> {
        let nonce: [u8; 24] = sealed.nonce.as_slice().try_into().map_err(|_| OpenError)?;
        let aad = associated_data(org_id, name, sealed.key_version);
        let ring = self.read();
        std::iter::once(&ring.current)
            .chain(&ring.previous)
            .filter(|key| sealed.key_version == LEGACY_VERSION || key.version == sealed.key_version)
            .find_map(|key| {
                key.cipher().decrypt(&XNonce::from(nonce), Payload { msg: &sealed.ciphertext, aad: &aad }).ok()
            })
            .ok_or(OpenError)
    }
}

impl MasterKey {
    /// A 128-bit tag of `data` under the current key (HMAC-SHA-256 with `label` separating its uses): values the
    /// server hands out and must later recognise, without storing them.
    pub fn tag(&self, label: &str, data: &[u8]) -> [u8; 16] {
        tag_with(&self.read().current, label, data)
    }

    /// Whether `tag` is [`MasterKey::tag`] of `data` under any key of the ring (so values handed out before a
    /// rotation keep working), compared in constant time.
    pub fn check_tag(&self, label: &str, data: &[u8], tag: &[u8]) -> bool {
        let ring = self.read();
        std::iter::once(&ring.current)
            .chain(&ring.previous)
            .any(|key| aws_lc_rs::constant_time::verify_slices_are_equal(&tag_with(key, label, data), tag).is_ok())
    }
}

fn tag_with(key: &RingKey, label: &str, data: &[u8]) -> [u8; 16] {
    use aws_lc_rs::hmac;
    let key = hmac::Key::new(hmac::HMAC_SHA256, &key.bytes);
    let mut context = hmac::Context::with_key(&key);
    context.update(label.as_bytes());
    context.update(&[0]);
    context.update(data);
    let full = context.sign();
    let mut tag = [0u8; 16];
    tag.copy_from_slice(&full.as_ref()[..16]);
    tag
}

/// A new random token of `kind` (`hf_`, `hfj_`, `hfr_`), with its checksum.
pub fn new_token(kind: hookflow_shared::token::TokenKind) -> String {
    let mut random = [0u8; hookflow_shared::token::BODY_LEN];
    rand::rng().fill_bytes(&mut random);
    kind.assemble(&random)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_and_open_bind_organization_and_name() {
        let key = MasterKey::random();
        let (org, other) = (OrgId::now_v7(), OrgId::now_v7());
        let sealed = key.seal(org, "API_PASSWORD", b"hunter2");
        assert!(!sealed.ciphertext.windows(7).any(|w| w == b"hunter2"));
        assert_eq!(key.open(org, "API_PASSWORD", &sealed), Ok(b"hunter2".to_vec()));
        assert_eq!(key.open(other, "API_PASSWORD", &sealed), Err(OpenError), "another organization");
        assert_eq!(key.open(org, "OTHER", &sealed), Err(OpenError), "another name");
        assert_eq!(MasterKey::random().open(org, "API_PASSWORD", &sealed), Err(OpenError), "another key");
        let again = key.seal(org, "API_PASSWORD", b"hunter2");
        assert_ne!(again.nonce, sealed.nonce, "a fresh nonce per value");
        assert_eq!(format!("{key:?}"), "MasterKey([REDACTED])");
    }

    #[test]
    fn a_ring_seals_with_its_current_key_and_opens_with_every_key() {
        let (old, new) = ([1u8; 32], [2u8; 32]);
        let org = OrgId::now_v7();
        let before = MasterKey::new(old);
        let sealed_old = before.seal(org, "S", b"v1");
        assert_eq!(sealed_old.key_version, fingerprint(&old));
        let ring = MasterKey::with_previous(new, vec![old]);
        let sealed_new = ring.seal(org, "S", b"v2");
        assert_eq!(sealed_new.key_version, fingerprint(&new));
        assert_ne!(fingerprint(&old), fingerprint(&new));
        assert_eq!(ring.open(org, "S", &sealed_old), Ok(b"v1".to_vec()), "a previous key still opens");
        assert_eq!(ring.open(org, "S", &sealed_new), Ok(b"v2".to_vec()));
        assert_eq!(before.open(org, "S", &sealed_new), Err(OpenError), "the old ring knows no new key");
        assert_eq!(MasterKey::new(new).open(org, "S", &sealed_old), Err(OpenError), "a retired key opens nothing");
        // A clone follows a replacement of the ring.
        let clone = before.clone();
        before.replace(new, vec![old]);
        assert_eq!(clone.open(org, "S", &sealed_new), Ok(b"v2".to_vec()));
        assert_eq!(clone.current_version(), fingerprint(&new));
    }

    #[test]
    fn values_of_the_first_release_open_with_any_key_of_the_ring() {
        let (old, new) = ([3u8; 32], [4u8; 32]);
        let org = OrgId::now_v7();
        // Sealed as the first release did: version 1 in the associated data and the row.
        let nonce = [9u8; 24];
        let aad = associated_data(org, "S", LEGACY_VERSION);
        let ciphertext = RingKey::new(old)
            .cipher()
            .encrypt(&XNonce::from(nonce), Payload { msg: b"legacy", aad: &aad })
            .expect("seal");
        let legacy = Sealed { ciphertext, nonce: nonce.to_vec(), key_version: LEGACY_VERSION };
        assert_eq!(MasterKey::with_previous(new, vec![old]).open(org, "S", &legacy), Ok(b"legacy".to_vec()));
        assert_eq!(MasterKey::new(new).open(org, "S", &legacy), Err(OpenError));
    }
}
