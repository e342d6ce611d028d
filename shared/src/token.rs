//! Secret token formats: API keys (`hf_`), job tokens (`hfj_`) and refresh tokens (`hfr_`), each 32 base62 characters plus a 6-character
//! CRC32 checksum, so a mistyped or truncated token is refused before any database lookup. Only SHA-256 hashes
//! of tokens are stored.

use sha2::{Digest, Sha256};

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// Random characters in every token.
pub const BODY_LEN: usize = 32;
const CHECKSUM_LEN: usize = 6;
/// Random characters shown in a key's display prefix.
const DISPLAY_CHARS: usize = 8;

/// Which kind of secret a token is; the kind decides its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    ApiKey,
    Job,
    /// A browser session's single-use refresh token.
    Refresh,
    /// An invitation to an organization, accepted once by whoever signs in with it.
    Invitation,
    /// A password reset's link (mailed), used once within 30 minutes.
    PasswordReset,
    /// A sign-up's confirmation link (mailed), used once.
    SignupConfirmation,
}

impl TokenKind {
    pub fn prefix(self) -> &'static str {
        match self {
            TokenKind::ApiKey => "hf_",
            TokenKind::Job => "hfj_",
            TokenKind::Refresh => "hfr_",
            TokenKind::Invitation => "hfi_",
            TokenKind::PasswordReset => "hfp_",
            TokenKind::SignupConfirmation => "hfs_",
        }
    }

    /// Builds a token from `BODY_LEN` random bytes (each mapped onto the base62 alphabet).
    pub fn assemble(self, random: &[u8; BODY_LEN]) -> String {
        // 62 * 4 = 248: rejecting bytes >= 248 would be unbiased; the caller's bytes are uniform, and the tiny
        // bias of modulo over 256 costs under 0.1 bit of the 190 bits of entropy, so plain modulo is used.
        let body: String = random.iter().map(|b| BASE62[usize::from(*b) % 62] as char).collect();
        let mut token = String::with_capacity(self.prefix().len() + BODY_LEN + CHECKSUM_LEN);
        token.push_str(self.prefix());
        token.push_str(&body);
        token.push_str(&checksum(&body));
        token
    }

    /// Checks prefix, length, alphabet and checksum. Needs no storage: a failure here means the token was never
    /// issued.
    pub fn check(self, token: &str) -> Result<(), TokenFormatError> {
        let rest = token.strip_prefix(self.prefix()).ok_or(TokenFormatError::Prefix)?;
        if rest.len() != BODY_LEN + CHECKSUM_LEN {
            return Err(TokenFormatError::Length);
        }
        if !rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(TokenFormatError::Alphabet);
        }
        let (body, sum) = rest.split_at(BODY_LEN);
        if checksum(body) != sum {
            return Err(TokenFormatError::Checksum);
        }
        Ok(())
    }

    /// The non-secret prefix stored and shown to identify a key, e.g. `hf_a1B2c3D4`.
    pub fn display_prefix(self, token: &str) -> String {
        let end = (self.prefix().len() + DISPLAY_CHARS).min(token.len());
        token.get(..end).unwrap_or(token).to_owned()
    }
}

/// Why a string is not a well-formed token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenFormatError {
    #[error("wrong prefix")]
    Prefix,
    #[error("wrong length")]
    Length,
    #[error("characters outside base62")]
    Alphabet,
    #[error("checksum mismatch")]
    Checksum,
}

/// The SHA-256 of a token: the only form in which tokens are stored.
pub fn hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

fn checksum(body: &str) -> String {
    let mut n = crc32fast::hash(body.as_bytes());
    let mut out = [b'0'; CHECKSUM_LEN];
    for slot in out.iter_mut().rev() {
        *slot = BASE62[(n % 62) as usize];
        n /= 62;
    }
    out.iter().map(|b| *b as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(kind: TokenKind, seed: u8) -> String {
        let mut random = [0u8; BODY_LEN];
        for (i, b) in random.iter_mut().enumerate() {
            *b = seed.wrapping_mul(31).wrapping_add(i as u8 * 7);
        }
        kind.assemble(&random)
    }

    #[test]
    fn assembled_tokens_check() {
        for seed in 0..50 {
            let key = sample(TokenKind::ApiKey, seed);
            assert!(key.starts_with("hf_"));
            assert_eq!(key.len(), 3 + 32 + 6);
            assert_eq!(TokenKind::ApiKey.check(&key), Ok(()));
            let job = sample(TokenKind::Job, seed);
            assert_eq!(TokenKind::Job.check(&job), Ok(()));
            assert_eq!(TokenKind::ApiKey.check(&job), Err(TokenFormatError::Prefix));
        }
    }

    #[test]
    fn any_single_character_change_is_caught() {
        let key = sample(TokenKind::ApiKey, 9);
        for i in 3..key.len() {
            let mut bytes = key.clone().into_bytes();
            bytes[i] = if bytes[i] == b'a' { b'b' } else { b'a' };
            let typo = String::from_utf8(bytes).expect("ascii");
            assert_eq!(TokenKind::ApiKey.check(&typo), Err(TokenFormatError::Checksum), "position {i}");
        }
    }

    #[test]
    fn malformed_tokens_are_refused() {
        let key = sample(TokenKind::ApiKey, 3);
        assert_eq!(TokenKind::ApiKey.check(&key[..key.len() - 1]), Err(TokenFormatError::Length));
        assert_eq!(TokenKind::ApiKey.check(""), Err(TokenFormatError::Prefix));
        let mut bad = key.clone();
        bad.replace_range(5..6, "-");
        assert_eq!(TokenKind::ApiKey.check(&bad), Err(TokenFormatError::Alphabet));
    }

    #[test]
    fn display_prefix_and_hash() {
        let key = sample(TokenKind::ApiKey, 1);
        assert_eq!(TokenKind::ApiKey.display_prefix(&key), key[..11]);
        assert_eq!(hash(&key).len(), 32);
        assert_ne!(hash(&key), hash(&sample(TokenKind::ApiKey, 2)));
    }
}
