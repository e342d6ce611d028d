//! A capture's signature verdict on the capture path: the endpoint's verification, opened from its sealed secrets
//! once when the endpoint is loaded into the capture cache; the check of each capture against it; and Standard
//! Webhooks duplicates (a validly signed `webhook-id` the endpoint already holds, or one in flight on this server).

use crate::cache::BoundedCache;
use crate::capture::batch::CaptureSignature;
use crate::crypto::{MasterKey, Sealed};
use crate::signature::{Message, Verifier};
use hookflow_shared::api::signatures::{
    Signature, SignatureScheme, Verdict, Verification, VerificationMode, VerificationSettings,
};
use hookflow_shared::{OrgId, WebhookId};
use sqlx::PgPool;
use std::time::Duration;

/// Bodies at least this large are verified off the async workers (an HMAC over 10 MiB takes milliseconds).
const BLOCKING_BODY: usize = 1024 * 1024;
/// `webhook-id`s remembered per endpoint between the check and the commit (concurrent duplicates).
const RECENT_IDS: usize = 4096;

/// The name a verification's secrets are sealed under (with the endpoint's organization).
pub fn sealed_name(webhook_id: WebhookId) -> String {
    format!("webhook-verification:{webhook_id}")
}

/// The settings to verify with: what is stored, with its opened secrets.
pub fn settings(stored: &Verification, secrets: Vec<String>) -> VerificationSettings {
    VerificationSettings {
        scheme: stored.scheme,
        secrets,
        tolerance_s: stored.tolerance_s,
        mode: stored.mode,
        header: stored.header.clone(),
        algorithm: stored.algorithm,
        encoding: stored.encoding,
        prefix: stored.prefix.clone(),
        timestamp_header: stored.timestamp_header.clone(),
        separator: stored.separator.clone(),
    }
}

/// Opens sealed secrets (a JSON array of strings).
pub fn open_secrets(master: &MasterKey, org_id: OrgId, webhook_id: WebhookId, sealed: &Sealed) -> Option<Vec<String>> {
    let plain = master.open(org_id, &sealed_name(webhook_id), sealed).ok()?;
    serde_json::from_slice(&plain).ok()
}

/// Seals secrets for storage.
pub fn seal_secrets(master: &MasterKey, org_id: OrgId, webhook_id: WebhookId, secrets: &[String]) -> Sealed {
    let plain = serde_json::to_vec(secrets).unwrap_or_default();
    master.seal(org_id, &sealed_name(webhook_id), &plain)
}

/// An endpoint's verification, ready for the capture path.
#[derive(Debug)]
pub struct EndpointVerification {
    pub scheme: SignatureScheme,
    pub mode: VerificationMode,
    /// `Err(reason)` when the stored settings cannot be used (secrets no key of the ring opens).
    verifier: Result<Verifier, String>,
    recent: BoundedCache<String, bool>,
}

impl EndpointVerification {
    pub fn open(
        master: &MasterKey,
        org_id: OrgId,
        webhook_id: WebhookId,
        stored: &Verification,
        sealed: &Sealed,
    ) -> Self {
        let verifier = match open_secrets(master, org_id, webhook_id, sealed) {
            None => {
                tracing::warn!(%webhook_id, "an endpoint's verification secrets open with no master key of the ring");
                Err("the endpoint's secrets cannot be decrypted with this server's master keys".to_owned())
            }
            Some(secrets) => Verifier::new(&settings(stored, secrets)).map_err(|e| e.message),
        };
        let ttl = Duration::from_secs(u64::from(stored.tolerance_s).max(60) * 2);
        Self { scheme: stored.scheme, mode: stored.mode, verifier, recent: BoundedCache::new(RECENT_IDS).with_ttl(ttl) }
    }

    /// The verdict of one capture of `webhook_id`.
    pub async fn judge(&self, pool: &PgPool, webhook_id: WebhookId, message: Message<'_>) -> CaptureSignature {
        let verifier = match &self.verifier {
            Ok(verifier) => verifier,
            Err(reason) => return self.verdict(Verdict::Invalid, Some(reason.clone()), None),
        };
        let check = if message.body.len() >= BLOCKING_BODY {
            tokio::task::block_in_place(|| verifier.check(&message))
        } else {
            verifier.check(&message)
        };
        let mut signature = self.verdict(check.verdict, check.reason, check.secret_index);
        if check.verdict == Verdict::Valid
            && let Some(id) = check.message_id
        {
            if self.seen(pool, webhook_id, &id).await {
                signature.answer.verdict = Verdict::Duplicate;
                signature.answer.reason = Some(format!("webhook-id `{id}` was received before on this endpoint"));
            }
            signature.message_id = Some(id);
        }
        signature
    }

    fn verdict(&self, verdict: Verdict, reason: Option<String>, secret_index: Option<u8>) -> CaptureSignature {
        let answer = Signature { verdict, scheme: Some(self.scheme), reason, secret_index };
        CaptureSignature { answer, message_id: None }
    }

    /// Whether `id` was received before: in flight on this server, or stored. A database that cannot answer
    /// leaves the capture `valid` (the capture itself is what matters).
    async fn seen(&self, pool: &PgPool, webhook_id: WebhookId, id: &str) -> bool {
        let in_flight = self.recent.upsert(id.to_owned(), || false, |seen, _| std::mem::replace(seen, true));
        if in_flight {
            return true;
        }
        let stored = sqlx::query_scalar::<_, bool>(
            "SELECT EXISTS (SELECT 1 FROM captures WHERE webhook_id = $1 AND signature_message_id = $2)",
        )
        .bind(webhook_id)
        .bind(id)
        .fetch_one(pool)
        .await;
        stored.unwrap_or(false)
    }

    /// Checks a stored capture again (the re-check endpoint), with a candidate secret when given.
    pub fn verifier(&self) -> Result<&Verifier, &str> {
        self.verifier.as_ref().map_err(String::as_str)
    }
}
