//! Captures that start flows. A capture of an endpoint with `triggers` owes one launch per trigger, written by the
//! capture batch's own statement (`capture::batch`: the outbox `trigger_launches`, committed with the capture, so
//! the sender's answer is never held up and a crash loses nothing). The dispatcher here launches what is owed:
//! woken by the batch's NOTIFY and by a periodic sweep (crash recovery, lost notifications), it runs passes
//! (`dispatch`, one organization's turn each, round-robin) until nothing is left. Deciding one owed launch
//! (`decide`), the rules that hold launches back (`guard`) and the variables a capture gives its run (`variables`)
//! are its parts.

pub mod decide;
pub mod dispatch;
pub mod guard;
pub mod variables;

use crate::state::AppState;
use std::time::Duration;

/// How long the dispatcher waits after a failed pass (the database is down) before it tries again.
const AFTER_FAILURE: Duration = Duration::from_secs(1);

/// Launches owed launches until shutdown; does nothing on a server started with `--trigger-dispatch false`.
pub async fn run(app: AppState) {
    if !app.settings.triggers.dispatch {
        return;
    }
    let sweep = app.settings.triggers.sweep;
    // The organization whose turn was last: the next pass takes the next one.
    let mut cursor = None;
    loop {
        // Passes until one finds nothing owed (or all of it held by other replicas).
        loop {
            match dispatch::pass(&app, &mut cursor).await {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "launching what captures owe failed; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(AFTER_FAILURE) => {}
                        () = app.shutdown.cancelled() => return,
                    }
                    break;
                }
            }
            if app.shutdown.is_cancelled() {
                return;
            }
        }
        tokio::select! {
            () = app.trigger_wakes.notified() => {}
            () = tokio::time::sleep(sweep) => {}
            () = app.shutdown.cancelled() => return,
        }
    }
}
