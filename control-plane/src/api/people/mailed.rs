//! What the mailed one-time links share: the sender when SMTP is configured (404 otherwise, naming SMTP), the
//! app's link for a token, the one answer a bad token gets, and the bounded background work that lets a request
//! answer the same, in the same time, whether or not the email it names is known (the lookup, the token and the
//! mail happen after the answer).

use crate::error::{ApiError, ApiResult};
use crate::mail::Mailer;
use crate::state::AppState;
use hookflow_shared::ErrorCode;
use std::sync::{Arc, LazyLock};
use tokio::sync::Semaphore;

/// Mail requests (resets, sign-ups) being worked on in the background at once in this process; past it, new ones
/// are dropped (and logged) rather than queued without bound.
const IN_BACKGROUND: usize = 64;

static SLOTS: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(IN_BACKGROUND)));

/// The sender, or 404 naming `what` when this server has no SMTP settings.
pub fn mailer(app: &AppState, what: &str) -> ApiResult<Mailer> {
    app.mailer.clone().ok_or_else(|| ApiError::not_found(&format!("{what} (no SMTP is configured on this server)")))
}

/// The app's page for a token: `<public URL>/#/<route>/<token>` (a fragment: the token never reaches a server's
/// access log when the link is opened).
pub fn link(app: &AppState, route: &str, token: &str) -> String {
    format!("{}/#/{route}/{token}", app.settings.public_url.trim_end_matches('/'))
}

/// The answer to an unknown, used or expired token.
pub fn invalid_token() -> ApiError {
    ApiError::new(ErrorCode::InvalidToken, "the link is unknown, used or expired; ask for a new one")
}

/// Runs `work` after the answer, within this process's budget of such work; `what` names it in the log.
pub fn in_background<F>(what: &'static str, work: F)
where
    F: Future<Output = ApiResult<()>> + Send + 'static,
{
    let Ok(slot) = SLOTS.clone().try_acquire_owned() else {
        tracing::warn!(what, "too many mail requests at once: this one is dropped");
        return;
    };
    tokio::spawn(async move {
        let _slot = slot;
        if let Err(e) = work.await {
            tracing::warn!(what, error = %e, "a mail request failed");
        }
    });
}
