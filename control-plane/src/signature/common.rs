//! What every scheme shares: the message and the check, header lookup, the signatures a header offers (decoded,
//! at most [`MAX_ENTRIES`]), signed timestamps and their tolerance, and the HMAC judgement (one HMAC per secret,
//! constant-time comparison, the `expected` hint when nothing matched).

use aws_lc_rs::{constant_time, hmac};
use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use chrono::{DateTime, Utc};
use hookflow_shared::api::signatures::{ExpectedSignature, Verdict};
use sha2::{Digest as _, Sha256};

/// The most signatures of one header that are considered (a header with thousands of entries costs no more).
pub const MAX_ENTRIES: usize = 16;
/// The longest signature any scheme carries: SHA-512 and Ed25519, 64 bytes.
const MAX_SIGNATURE_BYTES: usize = 64;

/// A captured request as the sender made it.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    /// As received: names in any case, repeated names possible (the first counts).
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    /// The URL the sender called (Twilio, Square): capture URL, path, then `?` and the query when there is one.
    pub url: &'a str,
    pub received_at: DateTime<Utc>,
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// `Valid`, `Invalid` or `Missing` (duplicates and unverified endpoints are the caller's).
    pub verdict: Verdict,
    /// Why, when not valid; short and human, never a secret or a signature.
    pub reason: Option<String>,
    /// Which secret verified it (0 or 1), when valid.
    pub secret_index: Option<u8>,
    /// Standard Webhooks: the `webhook-id` (or `svix-id`) value, for duplicate detection.
    pub message_id: Option<String>,
    /// When invalid and computable: the digest of the signed bytes and the start of the signature the first
    /// secret gives.
    pub expected: Option<ExpectedSignature>,
}

impl Check {
    pub(super) fn valid(index: usize) -> Self {
        let index = u8::try_from(index).ok();
        Self { verdict: Verdict::Valid, reason: None, secret_index: index, message_id: None, expected: None }
    }

    pub(super) fn invalid(reason: impl Into<String>) -> Self {
        Self {
            verdict: Verdict::Invalid,
            reason: Some(reason.into()),
            secret_index: None,
            message_id: None,
            expected: None,
        }
    }

    /// The scheme's signature header is absent.
    pub(super) fn missing(header: &str) -> Self {
        Self { verdict: Verdict::Missing, ..Self::invalid(format!("missing header {header}")) }
    }

    /// A header the signature needs beside it is absent: the message is signed but cannot be verified.
    pub(super) fn missing_beside(header: &str) -> Self {
        Self::invalid(format!("missing header {header}"))
    }

    pub(super) fn malformed(header: &str, what: &str) -> Self {
        Self::invalid(format!("malformed {header} header: {what}"))
    }

    pub(super) fn with_message_id(mut self, id: Option<&str>) -> Self {
        self.message_id = id.map(str::to_owned);
        self
    }
}

/// The first header of that name (ASCII case-insensitive), trimmed; an empty value counts as absent.
pub(super) fn header<'a>(message: &Message<'a>, name: &str) -> Option<&'a str> {
    message.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim()).filter(|v| !v.is_empty())
}

/// How a header writes a signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Encoding {
    /// Either case.
    Hex,
    /// The standard alphabet, padded or not.
    Base64,
    /// Either base64 alphabet (standard or URL-safe), padded or not: the generic scheme.
    AnyBase64,
}

const INDIFFERENT: GeneralPurposeConfig =
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
const STANDARD: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::STANDARD, INDIFFERENT);
const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&base64::alphabet::URL_SAFE, INDIFFERENT);

impl Encoding {
    /// Decodes a signature of exactly `size` bytes into `out`.
    fn decode(self, text: &str, size: usize, out: &mut [u8; MAX_SIGNATURE_BYTES]) -> bool {
        let out = &mut out[..size];
        match self {
            Self::Hex => text.len() == size * 2 && hex::decode_to_slice(text, out).is_ok(),
            Self::Base64 => base64_exact(&STANDARD, text, out),
            Self::AnyBase64 => base64_exact(&STANDARD, text, out) || base64_exact(&URL_SAFE, text, out),
        }
    }

    /// The signature as a header would carry it (standard base64, padded; lowercase hex).
    pub(super) fn encode(self, bytes: &[u8]) -> String {
        match self {
            Self::Hex => hex::encode(bytes),
            Self::Base64 | Self::AnyBase64 => base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    /// What a readable signature looks like, for a "malformed" reason.
    pub(super) fn describe(self, size: usize) -> String {
        match self {
            Self::Hex => format!("{} hex characters", size * 2),
            Self::Base64 | Self::AnyBase64 => format!("the base64 of {size} bytes"),
        }
    }
}

fn base64_exact(engine: &GeneralPurpose, text: &str, out: &mut [u8]) -> bool {
    // Longer text cannot be `out.len()` bytes; refusing it first keeps the scratch buffer small.
    if text.len() > out.len().div_ceil(3) * 4 {
        return false;
    }
    let mut scratch = [0u8; MAX_SIGNATURE_BYTES + 3];
    match engine.decode_slice(text, &mut scratch) {
        Ok(n) if n == out.len() => {
            out.copy_from_slice(&scratch[..n]);
            true
        }
        _ => false,
    }
}

/// The signatures a header offers, decoded: at most [`MAX_ENTRIES`] are kept, the rest only counted.
pub(super) struct Offered {
    encoding: Encoding,
    size: usize,
    kept: [[u8; MAX_SIGNATURE_BYTES]; MAX_ENTRIES],
    len: usize,
    /// Entries seen, kept or not.
    seen: usize,
    /// Entries considered that did not decode to `size` bytes.
    unreadable: usize,
}

impl Offered {
    /// Signatures of `size` bytes written in `encoding`.
    pub(super) fn new(encoding: Encoding, size: usize) -> Self {
        debug_assert!(size <= MAX_SIGNATURE_BYTES);
        Self { encoding, size, kept: [[0; MAX_SIGNATURE_BYTES]; MAX_ENTRIES], len: 0, seen: 0, unreadable: 0 }
    }

    pub(super) fn push(&mut self, text: &str) {
        self.seen += 1;
        if self.seen > MAX_ENTRIES {
            return;
        }
        if self.encoding.decode(text.trim(), self.size, &mut self.kept[self.len]) {
            self.len += 1;
        } else {
            self.unreadable += 1;
        }
    }

    pub(super) fn seen(&self) -> usize {
        self.seen
    }

    pub(super) fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The reason when entries were offered but none decodes: `None` when at least one is readable.
    pub(super) fn unreadable(&self, header: &str, entry: &str) -> Option<Check> {
        if self.len > 0 {
            return None;
        }
        let what = self.encoding.describe(self.size);
        let label = if self.seen > 1 { format!("no {entry} signature is {what}") } else { format!("not {what}") };
        Some(Check::malformed(header, &label))
    }

    pub(super) fn signatures(&self) -> impl Iterator<Item = &[u8]> {
        self.kept[..self.len].iter().map(|s| &s[..self.size])
    }

    fn matches(&self, tag: &[u8]) -> bool {
        self.signatures().any(|s| constant_time::verify_slices_are_equal(s, tag).is_ok())
    }

    /// The no-match reason, noting the entries that were left out.
    fn no_match(&self, reason: &str) -> String {
        if self.seen > MAX_ENTRIES {
            format!("{reason} (only the first {MAX_ENTRIES} of {} signatures were tried)", self.seen)
        } else {
            reason.to_owned()
        }
    }
}

/// A signed timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stamp {
    Seconds(i64),
    Millis(i64),
}

impl Stamp {
    /// Unix seconds, digits only.
    pub(super) fn seconds(text: &str) -> Option<Self> {
        digits(text).map(Self::Seconds)
    }

    /// Unix milliseconds, digits only.
    pub(super) fn millis(text: &str) -> Option<Self> {
        digits(text).map(Self::Millis)
    }

    /// The generic scheme's timestamp: unix seconds, milliseconds when above 10^12, or RFC 3339.
    pub(super) fn guess(text: &str) -> Option<Self> {
        match digits(text) {
            Some(n) if n > 1_000_000_000_000 => Some(Self::Millis(n)),
            Some(n) => Some(Self::Seconds(n)),
            None => DateTime::parse_from_rfc3339(text).ok().map(|t| Self::Millis(t.timestamp_millis())),
        }
    }

    /// `None` when within `tolerance_s` of `received_at` (past or future), else the reason.
    pub(super) fn outside(self, received_at: DateTime<Utc>, tolerance_s: u32) -> Option<String> {
        let early_ms = match self {
            Self::Seconds(s) => received_at.timestamp().saturating_sub(s).saturating_mul(1000),
            Self::Millis(ms) => received_at.timestamp_millis().saturating_sub(ms),
        };
        if early_ms.unsigned_abs() <= u64::from(tolerance_s) * 1000 {
            return None;
        }
        let off = early_ms.unsigned_abs().div_ceil(1000);
        let side = if early_ms > 0 { "old" } else { "in the future" };
        Some(format!("timestamp outside the tolerance of {tolerance_s} s ({off} s {side})"))
    }
}

/// A non-negative integer of at most 18 digits.
fn digits(text: &str) -> Option<i64> {
    let text = text.trim();
    if text.is_empty() || text.len() > 18 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// What a scheme found in a message, ready to be judged against the secrets.
pub(super) struct Claim<'a> {
    /// The signed bytes, in pieces (never copied together).
    pub content: &'a [&'a [u8]],
    pub offered: &'a Offered,
    /// The reason when no signature matches, such as "no v1 signature matched".
    pub no_match: &'a str,
    pub stamp: Option<Stamp>,
}

/// The verifier's part of a judgement: the secrets' keys and the tolerance.
#[derive(Clone, Copy)]
pub(super) struct Judge<'a> {
    pub keys: &'a [hmac::Key],
    pub tolerance_s: u32,
    pub received_at: DateTime<Utc>,
}

impl Judge<'_> {
    /// One HMAC per secret over the content; the first secret whose tag one offered signature equals wins.
    pub(super) fn hmac(&self, claim: &Claim) -> Check {
        let mut first = None;
        for (index, key) in self.keys.iter().enumerate() {
            let tag = sign(key, claim.content);
            let matched = claim.offered.matches(tag.as_ref());
            if first.is_none() {
                first = Some(tag);
            }
            if matched {
                let Some(reason) = claim.stamp.and_then(|s| s.outside(self.received_at, self.tolerance_s)) else {
                    return Check::valid(index);
                };
                return self.expected(Check::invalid(reason), claim, first.as_ref());
            }
        }
        let reason = claim.offered.no_match(claim.no_match);
        self.expected(Check::invalid(reason), claim, first.as_ref())
    }

    /// Which secret's tag over `content` is among the offered signatures, without a verdict (Twilio tries a
    /// second form of the URL before it concludes).
    pub(super) fn any_match(&self, content: &[&[u8]], offered: &Offered) -> Option<usize> {
        self.keys.iter().position(|key| offered.matches(sign(key, content).as_ref()))
    }

    /// The verdict when [`Judge::any_match`] found nothing: invalid, with what the first secret gives.
    pub(super) fn mismatch(&self, claim: &Claim) -> Check {
        let tag = self.keys.first().map(|key| sign(key, claim.content));
        self.expected(Check::invalid(claim.offered.no_match(claim.no_match)), claim, tag.as_ref())
    }

    fn expected(&self, mut check: Check, claim: &Claim, first: Option<&hmac::Tag>) -> Check {
        check.expected = first.map(|tag| expected(claim.content, tag.as_ref(), claim.offered.encoding()));
        check
    }
}

fn sign(key: &hmac::Key, content: &[&[u8]]) -> hmac::Tag {
    let mut context = hmac::Context::with_key(key);
    for piece in content {
        context.update(piece);
    }
    context.sign()
}

/// The digest of the signed bytes and the first 8 characters of the signature, as the header writes it.
pub(super) fn expected(content: &[&[u8]], tag: &[u8], encoding: Encoding) -> ExpectedSignature {
    let mut digest = Sha256::new();
    for piece in content {
        digest.update(piece);
    }
    let mut prefix = encoding.encode(tag);
    prefix.truncate(8);
    ExpectedSignature { signed_content_sha256: hex::encode(digest.finalize()), signature_prefix: prefix }
}

/// The hex SHA-256 of some bytes.
pub(super) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
