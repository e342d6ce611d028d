//! An endpoint's `handshake` as written (issue #51): checked (the preset's need for a secret, the secret's shape),
//! stored as the preset beside its own secret sealed under the master key (`webhook-handshake:<id>`), read back as
//! the preset and `secret_set`, and audited (the preset and whether a secret is set; never the secret).

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::webhooks::verification::Writer;
use crate::capture::handshake::sealed_name;
use crate::error::{ApiError, ApiResult};
use hookflow_shared::WebhookId;
use hookflow_shared::api::webhooks::{Handshake, HandshakePreset, HandshakeSettings};
use sqlx::PgConnection;

/// Longest handshake secret.
pub const SECRET_MAX: usize = 256;

/// Refuses a handshake whose secret is malformed, given to a preset that takes none, or missing where the preset
/// needs one and the endpoint has no verification secret to use (`verifies`).
pub fn check(settings: Option<&HandshakeSettings>, verifies: bool) -> ApiResult<()> {
    let Some(settings) = settings else { return Ok(()) };
    let preset = settings.preset.as_str();
    match &settings.secret {
        Some(secret) => {
            if !settings.preset.takes_secret() {
                return Err(ApiError::invalid(format!("`handshake.secret`: the `{preset}` preset takes no secret")));
            }
            if secret.is_empty() || secret.len() > SECRET_MAX || !secret.bytes().all(|b| (0x20..0x7f).contains(&b)) {
                return Err(ApiError::invalid(format!(
                    "`handshake.secret` must be 1 to {SECRET_MAX} printable ASCII characters"
                )));
            }
        }
        None if settings.preset.needs_secret() && !verifies => {
            return Err(ApiError::invalid(format!(
                "`handshake.secret`: the `{preset}` preset needs a secret (or the endpoint's verification secret)"
            )));
        }
        None => {}
    }
    Ok(())
}

/// What reads answer.
pub fn view(preset: Option<&str>, secret_set: bool) -> Option<Handshake> {
    Some(Handshake { preset: HandshakePreset::parse(preset?)?, secret_set })
}

/// Whether the stored endpoint verifies signatures (its verification secret can serve a handshake).
pub async fn stored_verifies(conn: &mut PgConnection, writer: Writer<'_>, webhook_id: WebhookId) -> ApiResult<bool> {
    let verifies: Option<bool> =
        sqlx::query_scalar("SELECT verification IS NOT NULL FROM webhooks WHERE organization_id = $1 AND id = $2")
            .bind(writer.org_id)
            .bind(webhook_id)
            .fetch_optional(&mut *conn)
            .await?;
    verifies.ok_or_else(|| ApiError::not_found("webhook"))
}

/// Stores (or with `None` removes) an endpoint's handshake, in the caller's transaction, and audits it.
pub async fn store(
    conn: &mut PgConnection,
    writer: Writer<'_>,
    webhook_id: WebhookId,
    settings: Option<&HandshakeSettings>,
) -> ApiResult<()> {
    let secret = settings.and_then(|s| s.secret.as_deref());
    let sealed = secret.map(|s| writer.master.seal(writer.org_id, &sealed_name(webhook_id), s.as_bytes()));
    sqlx::query(
        "UPDATE webhooks SET handshake = $3, handshake_secret = $4, handshake_nonce = $5, handshake_key_version = $6
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(writer.org_id)
    .bind(webhook_id)
    .bind(settings.map(|s| s.preset.as_str()))
    .bind(sealed.as_ref().map(|s| s.ciphertext.as_slice()))
    .bind(sealed.as_ref().map(|s| s.nonce.as_slice()))
    .bind(sealed.as_ref().map(|s| s.key_version))
    .execute(&mut *conn)
    .await?;
    let (action, details) = match settings {
        Some(s) => ("webhook.handshake.set", serde_json::json!({"preset": s.preset, "secret_set": secret.is_some()})),
        None => ("webhook.handshake.removed", serde_json::Value::Null),
    };
    let event =
        AuditEvent { org_id: writer.org_id, actor: *writer.actor, action, target: webhook_id.to_string(), details };
    audit::record(conn, event).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(preset: HandshakePreset, secret: Option<&str>) -> HandshakeSettings {
        HandshakeSettings { preset, secret: secret.map(str::to_owned) }
    }

    #[test]
    fn secrets_are_checked_against_what_the_preset_takes() {
        assert!(check(Some(&settings(HandshakePreset::Zoom, Some("zoom-secret"))), false).is_ok());
        assert!(check(Some(&settings(HandshakePreset::Zoom, None)), true).is_ok(), "the verification secret serves");
        assert!(check(Some(&settings(HandshakePreset::Slack, None)), false).is_ok(), "slack's is optional");
        for (preset, secret, verifies) in [
            (HandshakePreset::Zoom, None, false),
            (HandshakePreset::Meta, Some(""), false),
            (HandshakePreset::Twitch, Some("tab\there"), false),
            (HandshakePreset::Dropbox, Some("x"), false),
            (HandshakePreset::Trello, Some("x"), true),
        ] {
            let refused = check(Some(&settings(preset, secret)), verifies).expect_err("refused");
            assert!(refused.message.contains("`handshake.secret`"), "{}", refused.message);
        }
        let long = "a".repeat(SECRET_MAX + 1);
        assert!(check(Some(&settings(HandshakePreset::Twitter, Some(&long))), false).is_err());
    }
}
