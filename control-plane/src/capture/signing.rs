//! A capture's signature verdict on the capture path: the endpoint's verification, opened from its sealed secrets
//! once when the endpoint is loaded into the capture cache; the check of each capture against it; and Standard
//! Webhooks duplicates (a validly signed `webhook-id` the endpoint received before, or one in flight on this
//! server).
//!
//! Received ids are remembered apart from the captures (`signature_message_ids`, written by a trigger with the
//! capture that carries one, so they commit together): for twice the endpoint's tolerance whatever the captures'
//! retention, then forgotten by the retention task ([`forget_expired_ids`]). Only the id's SHA-256 is kept. The
//! in-flight mark of an id is removed when its capture was not stored ([`EndpointVerification::forget`]), so the
//! sender's retry of a capture answered 503 is not a duplicate.

use crate::cache::BoundedCache;
use crate::capture::batch::CaptureSignature;
use crate::crypto::{MasterKey, Sealed};
use crate::signature::{Message, Verifier};
use hookflow_shared::api::signatures::{
    Signature, SignatureScheme, Verdict, Verification, VerificationMode, VerificationSettings,
};
use hookflow_shared::{OrgId, WebhookId};
use sha2::{Digest as _, Sha256};
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

    /// Whether `id` was received before: in flight on this server, or among the endpoint's remembered ids (kept
    /// whatever the captures' retention). A database that cannot answer leaves the capture `valid` (the capture
    /// itself is what matters).
    async fn seen(&self, pool: &PgPool, webhook_id: WebhookId, id: &str) -> bool {
        let in_flight = self.recent.upsert(id.to_owned(), || false, |seen, _| std::mem::replace(seen, true));
        if in_flight {
            return true;
        }
        let stored = sqlx::query_scalar::<_, bool>(
            "SELECT EXISTS (SELECT 1 FROM signature_message_ids
                            WHERE webhook_id = $1 AND id_sha256 = $2 AND expires_at > now())",
        )
        .bind(webhook_id)
        .bind(Sha256::digest(id.as_bytes()).as_slice())
        .fetch_one(pool)
        .await;
        stored.unwrap_or(false)
    }

    /// Removes the in-flight mark a `valid` capture set for its `webhook-id` when that capture was not stored (a
    /// 503, a refused row, an endpoint deleted meanwhile): the sender's retry is then judged afresh.
    pub fn forget(&self, signature: &CaptureSignature) {
        if signature.answer.verdict == Verdict::Valid
            && let Some(id) = &signature.message_id
        {
            self.recent.remove(id.as_str());
        }
    }

    /// Checks a stored capture again (the re-check endpoint), with a candidate secret when given.
    pub fn verifier(&self) -> Result<&Verifier, &str> {
        self.verifier.as_ref().map_err(String::as_str)
    }
}

/// Forgets remembered `webhook-id`s past twice their endpoint's tolerance, a bounded batch at a time; returns how
/// many.
pub async fn forget_expired_ids(pool: &PgPool) -> Result<u64, sqlx::Error> {
    const BATCH: i64 = 5_000;
    let mut forgotten = 0;
    loop {
        let done = sqlx::query(
            "DELETE FROM signature_message_ids WHERE ctid IN (
                SELECT ctid FROM signature_message_ids WHERE expires_at <= now() LIMIT $1)",
        )
        .bind(BATCH)
        .execute(pool)
        .await?
        .rows_affected();
        forgotten += done;
        if done < BATCH as u64 {
            return Ok(forgotten);
        }
    }
}
