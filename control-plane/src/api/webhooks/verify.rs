//! The re-check of a stored capture's signature (`POST /webhooks/{id}/requests/{request_id}/verify`): with the
//! endpoint's stored secrets or a candidate that is not stored, judged against the capture's `received_at`, and
//! when invalid, what was expected (the digest of the signed bytes, the first characters of the signature). Bodies
//! over [`BLOCKING_BODY`] are checked on the blocking pool, never on the async workers that serve every request.

use crate::api::context::Ctx;
use crate::api::webhooks::captures::fetch_capture;
use crate::auth::scope;
use crate::capture::row::CaptureRow;
use crate::capture::signing::{open_secrets, settings};
use crate::capture::stored_verification::StoredVerification;
use crate::crypto::Sealed;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, Id};
use crate::signature::{Message, Verifier};
use axum::Json;
use hookflow_shared::api::signatures::{Verdict, VerifyCapture, VerifyResult};
use hookflow_shared::{CaptureId, WebhookId};

/// Bodies larger than this are checked off the async workers (a check costs at least a hash of the body).
const BLOCKING_BODY: usize = 64 * 1024;

type StoredColumns = (Option<sqlx::types::Json<StoredVerification>>, Option<Vec<u8>>, Option<Vec<u8>>, Option<i32>);

/// Check a capture's signature again: with the endpoint's secrets (`{}`), or with a candidate secret that is not
/// stored (`{"secret": "..."}`). Duplicates are not judged here: a repeated `webhook-id` with a good signature is
/// `valid`.
#[utoipa::path(post, operation_id = "verify_webhook_request", path = "/webhooks/{id}/requests/{request_id}/verify",
    params(Id, ("request_id" = Uuid, Path)), request_body = VerifyCapture,
    responses((status = 200, body = VerifyResult)))]
pub async fn verify_request(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    ApiPath((id, request_id)): ApiPath<(WebhookId, CaptureId)>,
    ApiJson(body): ApiJson<VerifyCapture>,
) -> ApiResult<Json<VerifyResult>> {
    let stored: Option<StoredColumns> = sqlx::query_as(
        "SELECT verification, verification_secrets, verification_nonce, verification_key_version
         FROM webhooks WHERE organization_id = $1 AND id = $2",
    )
    .bind(caller.org_id)
    .bind(id)
    .fetch_optional(&app.pool)
    .await?;
    let (verification, ciphertext, nonce, key_version) = stored.ok_or_else(|| ApiError::not_found("webhook"))?;
    let row = fetch_capture(&app, caller.org_id, id, request_id).await?;
    let Some(verification) = verification.map(|v| v.0.into_verification()) else {
        let reason = Some("the endpoint verifies no signatures: set its `verification` first".to_owned());
        return Ok(Json(VerifyResult { verdict: Verdict::Unverified, reason, secret_index: None, expected: None }));
    };
    let candidate = body.secret.is_some();
    let verifier = match body.secret {
        Some(candidate) => Verifier::new(&settings(&verification, vec![candidate]))
            .map_err(|e| ApiError::invalid(format!("`secret`: {}", e.message)))?,
        None => {
            let sealed = Sealed::from_columns(ciphertext, nonce, key_version);
            let opened = sealed.and_then(|s| open_secrets(&app.settings.master_key, caller.org_id, id, &s));
            let secrets = opened.ok_or_else(|| {
                ApiError::invalid("the endpoint's secrets cannot be decrypted with this server's master keys")
            })?;
            Verifier::new(&settings(&verification, secrets)).map_err(|e| ApiError::invalid(e.message))?
        }
    };
    if row.body.as_ref().is_some_and(|b| b.len() > BLOCKING_BODY) {
        let capture_url = app.settings.capture_url.clone();
        let checked = tokio::task::spawn_blocking(move || recheck(&capture_url, &verifier, id, &row, candidate));
        return Ok(Json(checked.await.map_err(ApiError::internal_because)?));
    }
    Ok(Json(recheck(&app.settings.capture_url, &verifier, id, &row, candidate)))
}

fn recheck(capture_url: &str, verifier: &Verifier, id: WebhookId, row: &CaptureRow, candidate: bool) -> VerifyResult {
    let url = crate::capture::signed_url(capture_url, id, &row.path, &row.query_string);
    let body = row.body.as_deref().unwrap_or_default();
    let message = Message { headers: &row.headers.0, body, url: &url, received_at: row.received_at };
    let check = verifier.check(&message);
    VerifyResult {
        verdict: check.verdict,
        reason: check.reason,
        secret_index: if candidate { None } else { check.secret_index },
        expected: if check.verdict == Verdict::Invalid { check.expected } else { None },
    }
}
