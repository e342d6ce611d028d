//! `Verifier`: an endpoint's verification settings made ready once (keys precomputed, options checked), then
//! asked about each capture. Its `Debug` shows the scheme and how many secrets, never a secret.

use super::common::{Check, Judge, Message};
use super::settings::{Keys, SettingsError, prepare};
use super::{body, discord, generic, slack, standard_webhooks, stripe, twilio};
use hookflow_shared::api::signatures::{SignatureScheme, VerificationSettings};

/// Verifies captures against one endpoint's settings.
pub struct Verifier {
    /// The settings without their secrets (`secrets` is empty).
    settings: VerificationSettings,
    keys: Keys,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("scheme", &self.settings.scheme.as_str())
            .field("secrets", &self.keys.len())
            .field("tolerance_s", &self.settings.tolerance_s)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// Checks the settings (the scheme's secret format, 1 or 2 secrets of at most `MAX_SECRET_BYTES`, the
    /// tolerance, the `hmac` options only with `hmac` and its `header`) and makes the keys.
    pub fn new(settings: &VerificationSettings) -> Result<Verifier, SettingsError> {
        let keys = prepare(settings)?;
        Ok(Verifier { settings: VerificationSettings { secrets: Vec::new(), ..settings.clone() }, keys })
    }

    /// The same settings with a candidate secret instead of the stored ones (the re-check), checked the same
    /// way; a refused secret is the field `secret`.
    pub fn with_secret(&self, secret: &str) -> Result<Verifier, SettingsError> {
        let candidate = VerificationSettings { secrets: vec![secret.to_owned()], ..self.settings.clone() };
        Verifier::new(&candidate).map_err(|e| match e.field.starts_with("verification.secrets") {
            true => SettingsError { field: "secret".to_owned(), message: e.message },
            false => e,
        })
    }

    pub fn scheme(&self) -> SignatureScheme {
        self.settings.scheme
    }

    /// The verdict on one message: `Valid`, `Invalid` or `Missing`.
    pub fn check(&self, message: &Message) -> Check {
        let judge = |keys| Judge { keys, tolerance_s: self.settings.tolerance_s, received_at: message.received_at };
        let hmac = judge(&self.keys.hmac);
        match self.settings.scheme {
            SignatureScheme::Stripe => stripe::stripe(&hmac, message),
            SignatureScheme::Paddle => stripe::paddle(&hmac, message),
            SignatureScheme::Github => body::github(&hmac, message),
            SignatureScheme::Shopify => body::shopify(&hmac, message),
            SignatureScheme::Linear => body::linear(&hmac, message),
            SignatureScheme::Square => body::square(&hmac, message),
            SignatureScheme::Gitlab => body::gitlab(&self.keys.raw, message),
            SignatureScheme::Slack => slack::slack(&hmac, message),
            SignatureScheme::Zoom => slack::zoom(&hmac, message),
            SignatureScheme::StandardWebhooks => standard_webhooks::check(&hmac, message),
            SignatureScheme::Twilio => twilio::check(&hmac, &judge(&self.keys.sha256), message),
            SignatureScheme::Discord => discord::check(&self.keys.raw, self.settings.tolerance_s, message),
            SignatureScheme::Hmac => generic::check(&self.settings, &hmac, message),
        }
    }
}
