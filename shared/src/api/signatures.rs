//! Signature verification bodies: an endpoint's `verification` settings, a capture's `signature` verdict and the
//! re-check (`POST /webhooks/{id}/requests/{request_id}/verify`).

use serde::{Deserialize, Serialize};

/// The most secrets an endpoint holds at once (two during a rotation).
pub const MAX_SECRETS: usize = 2;
/// The default and the largest timestamp tolerance, in seconds.
pub const DEFAULT_TOLERANCE_S: u32 = 300;
pub const MAX_TOLERANCE_S: u32 = 604_800;
/// The longest secret accepted, in bytes.
pub const MAX_SECRET_BYTES: usize = 1024;

/// How a sender signs its webhooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SignatureScheme {
    Stripe,
    Github,
    Slack,
    Shopify,
    /// Standard Webhooks and Svix (`webhook-*` or `svix-*` headers, `whsec_` secrets).
    StandardWebhooks,
    Twilio,
    Paddle,
    Gitlab,
    Linear,
    Zoom,
    Square,
    /// The secret is the application's hex Ed25519 public key.
    Discord,
    /// A generic HMAC described by `header`, `algorithm`, `encoding`, `prefix`, `timestamp_header`, `separator`.
    Hmac,
}

impl SignatureScheme {
    pub const ALL: [SignatureScheme; 13] = [
        Self::Stripe,
        Self::Github,
        Self::Slack,
        Self::Shopify,
        Self::StandardWebhooks,
        Self::Twilio,
        Self::Paddle,
        Self::Gitlab,
        Self::Linear,
        Self::Zoom,
        Self::Square,
        Self::Discord,
        Self::Hmac,
    ];

    /// The name on the wire (`standard_webhooks`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stripe => "stripe",
            Self::Github => "github",
            Self::Slack => "slack",
            Self::Shopify => "shopify",
            Self::StandardWebhooks => "standard_webhooks",
            Self::Twilio => "twilio",
            Self::Paddle => "paddle",
            Self::Gitlab => "gitlab",
            Self::Linear => "linear",
            Self::Zoom => "zoom",
            Self::Square => "square",
            Self::Discord => "discord",
            Self::Hmac => "hmac",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether the scheme signs a timestamp held to the endpoint's tolerance, so that a valid signature cannot be
    /// replayed later over a body of the replayer's choosing from what it observed: Twilio, GitLab, GitHub,
    /// Shopify and Square sign none; the generic `hmac` does when its settings name a `timestamp_header` (`None`
    /// here: the settings say).
    pub fn signs_timestamp(self) -> Option<bool> {
        match self {
            Self::Stripe
            | Self::Slack
            | Self::StandardWebhooks
            | Self::Paddle
            | Self::Linear
            | Self::Zoom
            | Self::Discord => Some(true),
            Self::Github | Self::Shopify | Self::Twilio | Self::Gitlab | Self::Square => Some(false),
            Self::Hmac => None,
        }
    }

    /// Whether the scheme signs the URL the sender called (the others never read it).
    pub fn signs_url(self) -> bool {
        matches!(self, Self::Twilio | Self::Square)
    }
}

/// The digest of the generic `hmac` scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HmacAlgorithm {
    Sha1,
    #[default]
    Sha256,
    Sha512,
}

/// How the generic `hmac` scheme writes the signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SignatureEncoding {
    #[default]
    Hex,
    Base64,
}

/// `record` stores every capture with its verdict; `enforce` also answers the sender 401 on an `invalid`,
/// `missing` or `duplicate` signature (the capture is still stored); `reject` answers those 401 and stores nothing
/// (they are only counted in the endpoint's analytics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum VerificationMode {
    #[default]
    Record,
    Enforce,
    Reject,
}

impl VerificationMode {
    /// Whether an `invalid`, `missing` or `duplicate` signature is answered 401 (`enforce` and `reject`).
    pub fn refuses(self) -> bool {
        matches!(self, Self::Enforce | Self::Reject)
    }
}

fn default_tolerance() -> u32 {
    DEFAULT_TOLERANCE_S
}

/// Declares the settings as written and as read: their own fields, then the options of the generic `hmac` scheme
/// that both carry alike (the written one refuses unknown fields, which rules out a flattened common part).
macro_rules! with_hmac_options {
    ($(#[$doc:meta])* pub struct $name:ident { $($(#[$meta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        pub struct $name {
            $($(#[$meta])* pub $field: $ty,)*
            /// The header carrying the signature (required for `hmac`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schema(min_length = 1, max_length = 200, pattern = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]
            pub header: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub algorithm: Option<HmacAlgorithm>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub encoding: Option<SignatureEncoding>,
            /// Text before the signature in the header, such as `sha256=` (default empty).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schema(max_length = 100)]
            pub prefix: Option<String>,
            /// A header carrying a signed timestamp: the signed content is then `<timestamp><separator><body>`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schema(min_length = 1, max_length = 200, pattern = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]
            pub timestamp_header: Option<String>,
            /// Between the timestamp and the body (default `.`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schema(max_length = 100)]
            pub separator: Option<String>,
        }
    };
}

with_hmac_options! {
    /// How an endpoint's senders sign (the `hmac` options only with `"scheme": "hmac"`). Written with its secrets;
    /// read back without them. Its `Debug` shows how many secrets, never one.
    #[derive(Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
    #[serde(deny_unknown_fields)]
    pub struct VerificationSettings {
        pub scheme: SignatureScheme,
        /// One secret, or two during a rotation: used as given (UTF-8 bytes), except `standard_webhooks` (`whsec_`
        /// then base64) and `discord` (a hex Ed25519 public key). Never answered.
        #[schema(min_items = 1, max_items = 2)]
        pub secrets: Vec<String>,
        /// Seconds a signed timestamp may lie from the time of receipt, past or future (schemes that sign one).
        #[serde(default = "default_tolerance")]
        #[schema(minimum = 0, maximum = 604_800, default = 300)]
        pub tolerance_s: u32,
        #[serde(default)]
        pub mode: VerificationMode,
    }
}

/// Secrets as `Debug` shows them: how many, never their text.
struct Redacted(usize);

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{} redacted]", self.0)
    }
}

impl std::fmt::Debug for VerificationSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerificationSettings")
            .field("scheme", &self.scheme)
            .field("secrets", &Redacted(self.secrets.len()))
            .field("tolerance_s", &self.tolerance_s)
            .field("mode", &self.mode)
            .field("header", &self.header)
            .field("algorithm", &self.algorithm)
            .field("encoding", &self.encoding)
            .field("prefix", &self.prefix)
            .field("timestamp_header", &self.timestamp_header)
            .field("separator", &self.separator)
            .finish()
    }
}

impl VerificationSettings {
    /// A scheme with these secrets and the defaults: a tolerance of 300 s, `record`, no `hmac` options.
    pub fn new(scheme: SignatureScheme, secrets: Vec<String>) -> Self {
        VerificationSettings {
            scheme,
            secrets,
            tolerance_s: DEFAULT_TOLERANCE_S,
            mode: VerificationMode::default(),
            header: None,
            algorithm: None,
            encoding: None,
            prefix: None,
            timestamp_header: None,
            separator: None,
        }
    }
}

with_hmac_options! {
    /// An endpoint's verification as read: the settings without their secrets.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
    pub struct Verification {
        pub scheme: SignatureScheme,
        /// How many secrets are stored (1, or 2 during a rotation).
        pub secrets_count: u8,
        pub tolerance_s: u32,
        pub mode: VerificationMode,
    }
}

/// What became of a capture's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// A stored secret verified it (`secret_index` says which).
    Valid,
    /// A signature is there but does not verify (`reason` says why).
    Invalid,
    /// The endpoint expects a signature and the capture carries none.
    Missing,
    /// The endpoint has no verification.
    Unverified,
    /// Standard Webhooks: a valid signature on a `webhook-id` this endpoint received before.
    Duplicate,
}

impl Verdict {
    pub const ALL: [Verdict; 5] = [Self::Valid, Self::Invalid, Self::Missing, Self::Unverified, Self::Duplicate];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Valid => "valid",
            Self::Invalid => "invalid",
            Self::Missing => "missing",
            Self::Unverified => "unverified",
            Self::Duplicate => "duplicate",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == name)
    }
}

/// A capture's signature verdict, computed when it arrived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Signature {
    pub verdict: Verdict,
    pub scheme: Option<SignatureScheme>,
    pub reason: Option<String>,
    /// Which stored secret verified it (0 or 1).
    pub secret_index: Option<u8>,
}

impl Signature {
    /// The verdict of a capture on an endpoint without verification.
    pub fn unverified() -> Self {
        Self { verdict: Verdict::Unverified, scheme: None, reason: None, secret_index: None }
    }

    /// Whether what the capture says is its signer's, said lately: a valid signature of a scheme that signs a
    /// timestamp. `hmac_timestamp`: the endpoint's generic `hmac` verification names a `timestamp_header`.
    /// Anything else may be a stranger's choice (no signature) or a replay (a signature observed once).
    pub fn vouches(&self, hmac_timestamp: bool) -> bool {
        self.verdict == Verdict::Valid
            && self.scheme.is_some_and(|scheme| scheme.signs_timestamp().unwrap_or(hmac_timestamp))
    }
}

/// `POST /webhooks/{id}/requests/{request_id}/verify`: `{}` checks with the stored secrets, `{"secret": ...}` with
/// a candidate that is not stored. Its `Debug` never shows the candidate.
#[derive(Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyCapture {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 1024)]
    pub secret: Option<String>,
}

impl std::fmt::Debug for VerifyCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret = self.secret.as_ref().map(|_| Redacted(1));
        f.debug_struct("VerifyCapture").field("secret", &secret).finish()
    }
}

/// What a signature check would have needed, answered when it is `invalid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExpectedSignature {
    /// Hex SHA-256 of the exact bytes that were signed (for example `t.body` for Stripe).
    pub signed_content_sha256: String,
    /// The first 8 characters of the signature computed with the first secret, as the header would carry it
    /// without a scheme prefix such as `sha256=`, `v0=`, `v1=` or `v1,`.
    pub signature_prefix: String,
}

/// The answer to a re-check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct VerifyResult {
    pub verdict: Verdict,
    pub reason: Option<String>,
    pub secret_index: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<ExpectedSignature>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_a_secret() {
        let secret = "whsec_c2VjcmV0LXRoYXQtbXVzdC1ub3Qtc2hvdw";
        let settings = VerificationSettings::new(
            SignatureScheme::StandardWebhooks,
            vec![secret.into(), "second-secret-value".into()],
        );
        let candidate = VerifyCapture { secret: Some(secret.into()) };
        for text in [format!("{settings:?}"), format!("{settings:#?}"), format!("{candidate:?}")] {
            assert!(!text.contains(secret) && !text.contains("second-secret-value"), "{text}");
            assert!(text.contains("redacted"), "{text}");
        }
        assert!(format!("{settings:?}").contains("[2 redacted]"), "{settings:?}");
        assert!(format!("{:?}", VerifyCapture::default()).contains("None"));
    }
}
