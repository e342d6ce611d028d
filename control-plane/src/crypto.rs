//! Encryption of secrets at rest: XChaCha20-Poly1305 under the master key, a random 24-byte nonce per value, and
//! associated data binding organization, name and key version. The master key is a keyring: the current key
//! seals, the previous keys still open what they sealed until `hookflow-server keys rotate-master` re-encrypts it.
//! A key's version is its fingerprint, so any server holding a key can tell which values it opens; values of the
//! first release carry version 1 and are tried with every key. Keys made since Hardening IV (a first start's, a
//! rotation's `--new-key`; written `v2:<base64>`) are never used as they are: each use (sealing, tagging) has a
//! subkey derived from the key (HMAC-SHA-256 of the key over the use's label, the expand step of HKDF with the key
//! as its pseudo-random key), and their values carry the key's derived version (a fingerprint under another
//! label). Keys made before are used as they were, so a previous release beside this one during a rolling upgrade
//! opens every value either seals; a rotation to a new key moves everything to subkeys.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use hookflow_shared::OrgId;
use rand::Rng as _;
use sha2::Digest as _;
use std::sync::{Arc, RwLock};

/// The version values sealed before keys carried fingerprints: open it with every key of the ring.
pub const LEGACY_VERSION: i32 = 1;

/// A master key as configured: its 32 bytes and whether it is used through subkeys (keys made since Hardening
/// IV) or as it is (keys made before, whose values a previous release must still open).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyMaterial {
    pub bytes: [u8; 32],
    pub derived: bool,
}

impl std::fmt::Debug for KeyMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyMaterial([REDACTED], derived: {})", self.derived)
    }
}

impl KeyMaterial {
    /// A key used through subkeys: what new keys are.
    pub fn derived(bytes: [u8; 32]) -> Self {
        Self { bytes, derived: true }
    }
}

/// A bare array is a key of the first kind, used as it is.
impl From<[u8; 32]> for KeyMaterial {
    fn from(bytes: [u8; 32]) -> Self {
        Self { bytes, derived: false }
    }
}

/// One key, its versions and the subkeys of its uses.
#[derive(Clone)]
struct RingKey {
    /// The key as configured: opens values sealed with it before subkeys (`raw_version`) and checks old tags.
    bytes: [u8; 32],
    /// The version of values sealed with it as it is (before Hardening IV).
    raw_version: i32,
    /// The version of values sealed with `seal_key`.
    derived_version: i32,
    /// Whether this key seals and tags through its subkeys (else with its bytes, as before).
    derived: bool,
    seal_key: [u8; 32],
    tag_key: [u8; 32],
    /// The sealing subkey, which opens values of `derived_version` whether or not this key seals with it.
    derived_seal_key: [u8; 32],
}

impl RingKey {
    fn new(material: impl Into<KeyMaterial>) -> Self {
        let KeyMaterial { bytes, derived } = material.into();
        let raw_version = fingerprint(&bytes);
        let mut derived_version = fingerprint_labelled(b"hookflow-master-key-derived\0", &bytes);
        if derived_version == raw_version {
            derived_version = if derived_version == i32::MAX { LEGACY_VERSION + 1 } else { derived_version + 1 };
        }
        let derived_seal_key = subkey(&bytes, "seal secrets at rest");
        let (seal_key, tag_key) =
            if derived { (derived_seal_key, subkey(&bytes, "tag values handed out")) } else { (bytes, bytes) };
        Self { raw_version, derived_version, derived, seal_key, tag_key, derived_seal_key, bytes }
    }

    /// The version this key seals under.
    fn version(&self) -> i32 {
        if self.derived { self.derived_version } else { self.raw_version }
    }

    /// The cipher that opens a value of `version` with this key, if it is one of this key's.
    fn cipher_for(&self, version: i32) -> Option<XChaCha20Poly1305> {
        if version == self.derived_version {
            Some(XChaCha20Poly1305::new(&Key::from(self.derived_seal_key)))
        } else if version == self.raw_version || version == LEGACY_VERSION {
            Some(XChaCha20Poly1305::new(&Key::from(self.bytes)))
        } else {
            None
        }
    }
}

/// The subkey of one use of a master key: HMAC-SHA-256 keyed with the master key over a label naming the use.
fn subkey(master: &[u8; 32], purpose: &str) -> [u8; 32] {
    use aws_lc_rs::hmac;
    let key = hmac::Key::new(hmac::HMAC_SHA256, master);
    let mut context = hmac::Context::with_key(&key);
    context.update(b"hookflow-subkey\0");
    context.update(purpose.as_bytes());
    context.update(&[1]);
    let mut out = [0u8; 32];
    out.copy_from_slice(context.sign().as_ref());
    out
}

/// A key's raw version: 31 bits of a SHA-256 of it, never the legacy 1 (nor 0).
pub fn fingerprint(key: &[u8; 32]) -> i32 {
    fingerprint_labelled(b"hookflow-master-key\0", key)
}

fn fingerprint_labelled(label: &[u8], key: &[u8; 32]) -> i32 {
    let digest = sha2::Sha256::new().chain_update(label).chain_update(key).finalize();
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
    pub fn new(key: impl Into<KeyMaterial>) -> Self {
        Self::with_previous(key, Vec::<KeyMaterial>::new())
    }

    /// A ring that seals with `current` and still opens with each of `previous`.
    pub fn with_previous<K: Into<KeyMaterial>>(current: impl Into<KeyMaterial>, previous: Vec<K>) -> Self {
        Self(Arc::new(RwLock::new(Self::ring(current, previous))))
    }

    fn ring<K: Into<KeyMaterial>>(current: impl Into<KeyMaterial>, previous: Vec<K>) -> Ring {
        let current = RingKey::new(current);
        let previous = previous.into_iter().map(RingKey::new).filter(|k| k.bytes != current.bytes).collect();
        Ring { current, previous }
    }

    /// A fresh random key (tests and benchmarks; servers load theirs from configuration).
    pub fn random() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self::new(KeyMaterial::derived(bytes))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Ring> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Swaps the keys of this ring (and of every clone of it).
    pub fn replace<K: Into<KeyMaterial>>(&self, current: impl Into<KeyMaterial>, previous: Vec<K>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Self::ring(current, previous);
    }

    /// The version new values are sealed under.
    pub fn current_version(&self) -> i32 {
        self.read().current.version()
    }

    pub fn seal(&self, org_id: OrgId, name: &str, plaintext: &[u8]) -> Sealed {
        let key = self.read().current.clone();
        let mut nonce = [0u8; 24];
        rand::rng().fill_bytes(&mut nonce);
        let aad = associated_data(org_id, name, key.version());
        let cipher = XChaCha20Poly1305::new(&Key::from(key.seal_key));
        let ciphertext =
            cipher.encrypt(&XNonce::from(nonce), Payload { msg: plaintext, aad: &aad }).unwrap_or_default();
        Sealed { ciphertext, nonce: nonce.to_vec(), key_version: key.version() }
    }

    pub fn open(&self, org_id: OrgId, name: &str, sealed: &Sealed) -> Result<Vec<u8>, OpenError> {
        let nonce: [u8; 24] = sealed.nonce.as_slice().try_into().map_err(|_| OpenError)?;
        let aad = associated_data(org_id, name, sealed.key_version);
        let ring = self.read();
        std::iter::once(&ring.current)
            .chain(&ring.previous)
            .filter_map(|key| key.cipher_for(sealed.key_version))
            .find_map(|cipher| {
                cipher.decrypt(&XNonce::from(nonce), Payload { msg: &sealed.ciphertext, aad: &aad }).ok()
            })
            .ok_or(OpenError)
    }
}

impl MasterKey {
    /// A 128-bit tag of `data` under the current key's tagging subkey (HMAC-SHA-256 with `label` separating its
    /// uses): values the server hands out and must later recognise, without storing them.
    pub fn tag(&self, label: &str, data: &[u8]) -> [u8; 16] {
        tag_with(&self.read().current.tag_key, label, data)
    }

    /// Whether `tag` is [`MasterKey::tag`] of `data` under any key of the ring, by its subkey or (tags made before
    /// Hardening IV) the key itself, so values handed out before a rotation keep working; compared in constant time.
    pub fn check_tag(&self, label: &str, data: &[u8], tag: &[u8]) -> bool {
        let ring = self.read();
        std::iter::once(&ring.current)
            .chain(&ring.previous)
            .flat_map(|key| [&key.tag_key, &key.bytes])
            .any(|key| aws_lc_rs::constant_time::verify_slices_are_equal(&tag_with(key, label, data), tag).is_ok())
    }
}

fn tag_with(key: &[u8; 32], label: &str, data: &[u8]) -> [u8; 16] {
    use aws_lc_rs::hmac;
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
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
        assert_eq!(sealed_old.key_version, RingKey::new(old).version());
        let ring = MasterKey::with_previous(new, vec![old]);
        let sealed_new = ring.seal(org, "S", b"v2");
        assert_eq!(sealed_new.key_version, RingKey::new(new).version());
        assert_ne!(RingKey::new(old).version(), RingKey::new(new).version());
        assert_eq!(ring.open(org, "S", &sealed_old), Ok(b"v1".to_vec()), "a previous key still opens");
        assert_eq!(ring.open(org, "S", &sealed_new), Ok(b"v2".to_vec()));
        assert_eq!(before.open(org, "S", &sealed_new), Err(OpenError), "the old ring knows no new key");
        assert_eq!(MasterKey::new(new).open(org, "S", &sealed_old), Err(OpenError), "a retired key opens nothing");
        // A clone follows a replacement of the ring.
        let clone = before.clone();
        before.replace(new, vec![old]);
        assert_eq!(clone.open(org, "S", &sealed_new), Ok(b"v2".to_vec()));
        assert_eq!(clone.current_version(), RingKey::new(new).version());
    }

    #[test]
    fn values_of_the_first_release_open_with_any_key_of_the_ring() {
        let (old, new) = ([3u8; 32], [4u8; 32]);
        let org = OrgId::now_v7();
        // Sealed as the first release did: version 1 in the associated data and the row.
        let nonce = [9u8; 24];
        let aad = associated_data(org, "S", LEGACY_VERSION);
        let ciphertext = XChaCha20Poly1305::new(&Key::from(old))
            .encrypt(&XNonce::from(nonce), Payload { msg: b"legacy", aad: &aad })
            .expect("seal");
        let legacy = Sealed { ciphertext, nonce: nonce.to_vec(), key_version: LEGACY_VERSION };
        assert_eq!(MasterKey::with_previous(new, vec![old]).open(org, "S", &legacy), Ok(b"legacy".to_vec()));
        assert_eq!(MasterKey::new(new).open(org, "S", &legacy), Err(OpenError));
    }

    /// Hardening IV (16): a new key serves its two primitives through subkeys of their own; a key of before is used
    /// as it was (a previous release beside this one opens what either seals), and what it sealed or tagged
    /// still opens and checks once a rotation makes a new key current.
    #[test]
    fn new_keys_seal_and_tag_with_subkeys_and_old_keys_work_as_before() {
        let (old, new) = ([7u8; 32], [9u8; 32]);
        let org = OrgId::now_v7();
        let before = MasterKey::new(old);
        let raw_sealed = before.seal(org, "S", b"raw");
        assert_eq!(raw_sealed.key_version, fingerprint(&old), "an old key seals as before");
        let raw_tag = before.tag("label", b"data");
        assert_eq!(raw_tag, tag_with(&old, "label", b"data"));

        let ring = MasterKey::with_previous(KeyMaterial::derived(new), vec![KeyMaterial::from(old)]);
        let ring_key = RingKey::new(KeyMaterial::derived(new));
        assert_ne!(ring_key.seal_key, new);
        assert_ne!(ring_key.tag_key, new);
        assert_ne!(ring_key.seal_key, ring_key.tag_key, "one subkey per use");
        assert_ne!(ring_key.derived_version, ring_key.raw_version);
        assert_ne!(ring_key.derived_version, LEGACY_VERSION);

        // Sealed with the new key: under its derived version, and its bytes alone do not open it.
        let sealed = ring.seal(org, "S", b"derived");
        assert_eq!(sealed.key_version, ring_key.derived_version);
        let aad = associated_data(org, "S", sealed.key_version);
        let nonce = XNonce::from(<[u8; 24]>::try_from(sealed.nonce.as_slice()).expect("nonce"));
        let raw_cipher = XChaCha20Poly1305::new(&Key::from(new));
        assert!(raw_cipher.decrypt(&nonce, Payload { msg: &sealed.ciphertext, aad: &aad }).is_err());
        assert_eq!(ring.open(org, "S", &sealed), Ok(b"derived".to_vec()));
        assert_eq!(ring.open(org, "S", &raw_sealed), Ok(b"raw".to_vec()), "the old key's values still open");
        let mislabelled = Sealed { key_version: ring_key.derived_version, ..sealed.clone() };
        assert_eq!(MasterKey::new(old).open(org, "S", &mislabelled), Err(OpenError));

        // Tags: the new key's through its tagging subkey; the old key's still check.
        let tag = ring.tag("label", b"data");
        assert_ne!(tag, tag_with(&new, "label", b"data"));
        assert!(ring.check_tag("label", b"data", &tag));
        assert!(ring.check_tag("label", b"data", &raw_tag));
        assert!(!ring.check_tag("label", b"other", &tag));
        assert!(!MasterKey::new([8u8; 32]).check_tag("label", b"data", &tag));
    }
}
