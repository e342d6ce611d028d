//! Encryption of secrets at rest: XChaCha20-Poly1305 under the master key, a random 24-byte nonce per value, and
//! associated data binding organization, name and key version.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use rand::Rng as _;
use uuid::Uuid;

/// The version of the master key in use; stored with each value so keys can be rotated later.
pub const KEY_VERSION: i32 = 1;

/// The 32-byte master key. Its Debug output never shows it.
#[derive(Clone)]
pub struct MasterKey([u8; 32]);

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the secret cannot be decrypted (wrong key, or the value belongs to another organization or name)")]
pub struct OpenError;

fn associated_data(org_id: Uuid, name: &str, key_version: i32) -> Vec<u8> {
    format!("hookflow-secret\u{0}{org_id}\u{0}{name}\u{0}{key_version}").into_bytes()
}

impl MasterKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// A fresh random key (tests and benchmarks; servers load theirs from configuration).
    pub fn random() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self(bytes)
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&Key::from(self.0))
    }

    pub fn seal(&self, org_id: Uuid, name: &str, plaintext: &[u8]) -> Sealed {
        let mut nonce = [0u8; 24];
        rand::rng().fill_bytes(&mut nonce);
        let aad = associated_data(org_id, name, KEY_VERSION);
        let ciphertext =
            self.cipher().encrypt(&XNonce::from(nonce), Payload { msg: plaintext, aad: &aad }).unwrap_or_default();
        Sealed { ciphertext, nonce: nonce.to_vec(), key_version: KEY_VERSION }
    }

    pub fn open(&self, org_id: Uuid, name: &str, sealed: &Sealed) -> Result<Vec<u8>, OpenError> {
        let nonce: [u8; 24] = sealed.nonce.as_slice().try_into().map_err(|_| OpenError)?;
        let aad = associated_data(org_id, name, sealed.key_version);
        self.cipher()
            .decrypt(&XNonce::from(nonce), Payload { msg: &sealed.ciphertext, aad: &aad })
            .map_err(|_| OpenError)
    }
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
        let (org, other) = (Uuid::now_v7(), Uuid::now_v7());
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
}
