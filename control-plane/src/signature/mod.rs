//! Signature verification of captures (placeholder interface; the schemes land from the `signature-schemes` branch).

use chrono::{DateTime, Utc};
use hookflow_shared::api::signatures::{ExpectedSignature, SignatureScheme, Verdict, VerificationSettings};

#[derive(Debug, Clone)]
pub struct SettingsError {
    pub field: String,
    pub message: String,
}

#[derive(Debug)]
pub struct Message<'a> {
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    pub url: &'a str,
    pub received_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub struct Check {
    pub verdict: Verdict,
    pub reason: Option<String>,
    pub secret_index: Option<u8>,
    pub message_id: Option<String>,
    pub expected: Option<ExpectedSignature>,
}

#[derive(Debug)]
pub struct Verifier {
    scheme: SignatureScheme,
}

impl Verifier {
    pub fn new(settings: &VerificationSettings) -> Result<Verifier, SettingsError> {
        Ok(Verifier { scheme: settings.scheme })
    }
    pub fn with_secret(&self, _secret: &str) -> Result<Verifier, SettingsError> {
        Ok(Verifier { scheme: self.scheme })
    }
    pub fn scheme(&self) -> SignatureScheme {
        self.scheme
    }
    pub fn check(&self, _message: &Message) -> Check {
        Check { verdict: Verdict::Missing, reason: None, secret_index: None, message_id: None, expected: None }
    }
}
