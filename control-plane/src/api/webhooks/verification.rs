//! An endpoint's `verification` as written: checked by building its verifier, stored as settings without secrets
//! beside the secrets sealed under the master key, and audited (scheme, mode and how many secrets; never a secret).

use crate::api::admin::audit::{self, AuditEvent};
use crate::auth::Actor;
use crate::capture::signing::seal_secrets;
use crate::capture::stored_verification::StoredVerification;
use crate::crypto::MasterKey;
use crate::error::{ApiError, ApiResult};
use crate::signature::Verifier;
use hookflow_shared::api::signatures::{Verification, VerificationSettings};
use hookflow_shared::{OrgId, WebhookId};
use sqlx::PgConnection;

/// Refuses settings no verifier can be built from, naming the field.
pub fn check(settings: Option<&VerificationSettings>) -> ApiResult<()> {
    let Some(settings) = settings else { return Ok(()) };
    Verifier::new(settings).map(drop).map_err(|e| ApiError::invalid(format!("`{}`: {}", e.field, e.message)))
}

/// What reads answer: the settings without their secrets.
pub fn view(settings: &VerificationSettings) -> Verification {
    Verification {
        scheme: settings.scheme,
        secrets_count: u8::try_from(settings.secrets.len()).unwrap_or(u8::MAX),
        tolerance_s: settings.tolerance_s,
        mode: settings.mode,
        header: settings.header.clone(),
        algorithm: settings.algorithm,
        encoding: settings.encoding,
        prefix: settings.prefix.clone(),
        timestamp_header: settings.timestamp_header.clone(),
        separator: settings.separator.clone(),
    }
}

/// Who changes an endpoint's verification.
#[derive(Debug, Clone, Copy)]
pub struct Writer<'a> {
    pub master: &'a MasterKey,
    pub org_id: OrgId,
    pub actor: &'a Actor,
}

/// Stores (or with `None` removes) an endpoint's verification, in the caller's transaction, and audits it.
pub async fn store(
    conn: &mut PgConnection,
    writer: Writer<'_>,
    webhook_id: WebhookId,
    settings: Option<&VerificationSettings>,
) -> ApiResult<()> {
    let sealed = settings.map(|s| seal_secrets(writer.master, writer.org_id, webhook_id, &s.secrets));
    sqlx::query(
        "UPDATE webhooks SET verification = $3, verification_secrets = $4, verification_nonce = $5,
                verification_key_version = $6
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(writer.org_id)
    .bind(webhook_id)
    .bind(settings.map(|s| sqlx::types::Json(StoredVerification::new(view(s)))))
    .bind(sealed.as_ref().map(|s| s.ciphertext.as_slice()))
    .bind(sealed.as_ref().map(|s| s.nonce.as_slice()))
    .bind(sealed.as_ref().map(|s| s.key_version))
    .execute(&mut *conn)
    .await?;
    let (action, details) = match settings {
        Some(s) => ("webhook.verification.set", serde_json::to_value(view(s)).unwrap_or_default()),
        None => ("webhook.verification.removed", serde_json::Value::Null),
    };
    let event =
        AuditEvent { org_id: writer.org_id, actor: *writer.actor, action, target: webhook_id.to_string(), details };
    audit::record(conn, event).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookflow_shared::api::signatures::{SignatureScheme, VerificationMode};

    #[test]
    fn the_view_counts_secrets_and_never_holds_them() {
        let secrets = vec!["first-secret-value".into(), "second-secret-value".into()];
        let settings = VerificationSettings {
            mode: VerificationMode::Enforce,
            ..VerificationSettings::new(SignatureScheme::Github, secrets)
        };
        let text = serde_json::to_string(&view(&settings)).expect("json");
        assert!(text.contains("\"secrets_count\":2"), "{text}");
        assert!(!text.contains("secret-value"), "{text}");
    }
}
