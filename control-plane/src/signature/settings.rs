//! The checks on an endpoint's verification settings, and the keys made from its secrets once, so that a check
//! on the capture path only signs. An error names the field and never repeats a secret.

use aws_lc_rs::hmac;
use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use hookflow_shared::api::signatures::{
    HmacAlgorithm, MAX_SECRET_BYTES, MAX_SECRETS, MAX_TOLERANCE_S, SignatureScheme, VerificationSettings,
};
use sha2::{Digest as _, Sha256};

/// The longest header name and prefix or separator, as the contract's schema says.
const MAX_HEADER_NAME: usize = 200;
const MAX_AFFIX: usize = 100;

/// Settings that cannot verify anything: which field, and why (never the secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    /// Such as `verification.secrets[0]`, or `secret` for a candidate secret.
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for SettingsError {}

fn error(field: impl Into<String>, message: impl Into<String>) -> SettingsError {
    SettingsError { field: field.into(), message: message.into() }
}

/// The secrets, ready to use, one entry per secret in order, in the field the scheme uses.
#[derive(Default)]
pub(super) struct Keys {
    /// HMAC keys of the scheme's algorithm (Twilio: HMAC-SHA1).
    pub hmac: Vec<hmac::Key>,
    /// Twilio: the same secrets for HMAC-SHA256, which a Webhooks Rule may ask for.
    pub sha256: Vec<hmac::Key>,
    /// GitLab: the SHA-256 of each token; Discord: each Ed25519 public key.
    pub raw: Vec<[u8; 32]>,
}

impl Keys {
    pub(super) fn len(&self) -> usize {
        self.hmac.len().max(self.raw.len())
    }
}

/// Checks the settings and makes their keys.
pub(super) fn prepare(settings: &VerificationSettings) -> Result<Keys, SettingsError> {
    check_options(settings)?;
    if settings.tolerance_s > MAX_TOLERANCE_S {
        return Err(error("verification.tolerance_s", format!("must be at most {MAX_TOLERANCE_S} seconds")));
    }
    if settings.secrets.is_empty() || settings.secrets.len() > MAX_SECRETS {
        return Err(error("verification.secrets", "give one secret, or two during a rotation"));
    }
    let mut keys = Keys::default();
    for (index, secret) in settings.secrets.iter().enumerate() {
        let field = format!("verification.secrets[{index}]");
        if secret.trim().is_empty() {
            return Err(error(field, "must not be empty"));
        }
        if secret.len() > MAX_SECRET_BYTES {
            return Err(error(field, format!("must be at most {MAX_SECRET_BYTES} bytes")));
        }
        add(&mut keys, settings, secret).map_err(|message| error(field, message))?;
    }
    Ok(keys)
}

/// Adds one secret's key; the error is the message.
fn add(keys: &mut Keys, settings: &VerificationSettings, secret: &str) -> Result<(), &'static str> {
    let bytes = secret.as_bytes();
    match settings.scheme {
        SignatureScheme::Gitlab => keys.raw.push(Sha256::digest(bytes).into()),
        SignatureScheme::Discord => {
            let mut key = [0u8; 32];
            hex::decode_to_slice(secret.trim(), &mut key)
                .map_err(|_| "must be the application's Ed25519 public key: 64 hex characters")?;
            keys.raw.push(key);
        }
        SignatureScheme::Twilio => {
            keys.hmac.push(hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, bytes));
            keys.sha256.push(hmac::Key::new(hmac::HMAC_SHA256, bytes));
        }
        SignatureScheme::StandardWebhooks => keys.hmac.push(hmac::Key::new(hmac::HMAC_SHA256, &whsec(secret)?)),
        SignatureScheme::Hmac => keys.hmac.push(hmac::Key::new(algorithm(settings.algorithm), bytes)),
        SignatureScheme::Stripe
        | SignatureScheme::Github
        | SignatureScheme::Slack
        | SignatureScheme::Shopify
        | SignatureScheme::Paddle
        | SignatureScheme::Linear
        | SignatureScheme::Zoom
        | SignatureScheme::Square => keys.hmac.push(hmac::Key::new(hmac::HMAC_SHA256, bytes)),
    }
    Ok(())
}

/// A Standard Webhooks secret: `whsec_`, then the key in base64 (padded or not).
fn whsec(secret: &str) -> Result<Vec<u8>, &'static str> {
    const MESSAGE: &str = "must be whsec_ followed by the key in base64";
    const ENGINE: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let encoded = secret.strip_prefix("whsec_").ok_or(MESSAGE)?;
    let key = ENGINE.decode(encoded).map_err(|_| MESSAGE)?;
    if key.is_empty() {
        return Err(MESSAGE);
    }
    Ok(key)
}

fn algorithm(algorithm: Option<HmacAlgorithm>) -> hmac::Algorithm {
    match algorithm.unwrap_or_default() {
        HmacAlgorithm::Sha1 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        HmacAlgorithm::Sha256 => hmac::HMAC_SHA256,
        HmacAlgorithm::Sha512 => hmac::HMAC_SHA512,
    }
}

/// The `hmac` options: only with that scheme, `header` required, names that are header names.
fn check_options(s: &VerificationSettings) -> Result<(), SettingsError> {
    let present = [
        ("header", s.header.is_some()),
        ("algorithm", s.algorithm.is_some()),
        ("encoding", s.encoding.is_some()),
        ("prefix", s.prefix.is_some()),
        ("timestamp_header", s.timestamp_header.is_some()),
        ("separator", s.separator.is_some()),
    ];
    if s.scheme != SignatureScheme::Hmac {
        return match present.iter().find(|(_, set)| *set) {
            Some((name, _)) => Err(error(format!("verification.{name}"), "only with the scheme hmac")),
            None => Ok(()),
        };
    }
    match s.header.as_deref() {
        None => return Err(error("verification.header", "required with the scheme hmac")),
        Some(name) => header_name("verification.header", name)?,
    }
    if let Some(name) = s.timestamp_header.as_deref() {
        header_name("verification.timestamp_header", name)?;
    } else if s.separator.is_some() {
        return Err(error("verification.separator", "only with timestamp_header"));
    }
    for (field, value) in [("verification.prefix", &s.prefix), ("verification.separator", &s.separator)] {
        if value.as_ref().is_some_and(|v| v.len() > MAX_AFFIX) {
            return Err(error(field, format!("must be at most {MAX_AFFIX} bytes")));
        }
    }
    Ok(())
}

/// An HTTP header name: 1 to 200 token characters (RFC 9110).
fn header_name(field: &str, name: &str) -> Result<(), SettingsError> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || name.len() > MAX_HEADER_NAME || !name.bytes().all(token) {
        return Err(error(
            field,
            format!("must be a header name: 1 to {MAX_HEADER_NAME} letters, digits or !#$%&'*+-.^_`|~"),
        ));
    }
    Ok(())
}
