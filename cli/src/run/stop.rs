//! Stopping a run early: `--timeout`, `--fail-fast` or an interrupt cancels every flow still running and keeps the
//! ones not launched yet from starting. The first reason wins.

use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    TimedOut,
    FailFast,
    Interrupted,
}

#[derive(Debug, Default)]
pub struct Stop {
    token: CancellationToken,
    reason: Mutex<Option<StopReason>>,
}

impl Stop {
    pub fn stop(&self, reason: StopReason) {
        if let Ok(mut current) = self.reason.lock() {
            current.get_or_insert(reason);
        }
        self.token.cancel();
    }

    pub fn reason(&self) -> Option<StopReason> {
        self.reason.lock().ok().and_then(|r| *r)
    }

    pub fn is_stopped(&self) -> bool {
        self.token.is_cancelled()
    }

    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// A cancelled flow's status: `timed_out` when `--timeout` stopped the run, else `cancelled`.
    pub fn cancelled_status(&self) -> crate::run::outcome::RunStatus {
        use crate::run::outcome::RunStatus;
        match self.reason() {
            Some(StopReason::TimedOut) => RunStatus::TimedOut,
            _ => RunStatus::Cancelled,
        }
    }
}
