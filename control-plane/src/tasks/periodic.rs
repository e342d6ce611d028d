//! A pass run on an interval until shutdown: the one loop every periodic background task shares.

use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Runs `pass` every `interval` until shutdown; a failed pass is logged as `what` and tried again next time.
pub async fn every<F, Fut, T, E>(shutdown: CancellationToken, interval: Duration, what: &str, mut pass: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::fmt::Display,
{
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.cancelled() => return,
        }
        if let Err(e) = pass().await {
            tracing::warn!(error = %e, "{what} failed; retrying");
        }
    }
}
