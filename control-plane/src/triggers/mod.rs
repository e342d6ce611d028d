//! Captures that start flows. A capture of an endpoint with `triggers` owes one launch per trigger, written by the
//! capture batch's own statement (`capture::batch`: the outbox `trigger_launches`, committed with the capture, so
//! the sender's answer is never held up and a crash loses nothing). The dispatcher here launches what is owed:
//! woken by the batch's NOTIFY and by a periodic sweep (crash recovery, lost notifications), it runs passes
//! (`dispatch`) until nothing is left. The rules that hold launches back (`guard`) and the variables a capture gives
//! its run (`variables`) are its parts.

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
    loop {
        // Passes until one comes back short: a full one means more may be owed.
        loop {
            match dispatch::pass(&app).await {
                Ok(taken) if taken == dispatch::BATCH as usize => {}
                Ok(_) => break,
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
