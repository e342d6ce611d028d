//! Background loops, started once per server and stopped by its shutdown token: the LISTEN connection that
//! fans notifications out (`listener`), retention (`retention`), the lease rescuer (`rescuer`) and the cron
//! scheduler (`scheduler`). The capture writer is started with the state it belongs to.

pub mod listener;
pub mod rescuer;
pub mod retention;
pub mod scheduler;

use crate::state::AppState;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Starts every background loop of a server.
pub fn start(app: &AppState) {
    tokio::spawn(listener::run(app.clone()));
    tokio::spawn(retention::run(app.clone()));
    tokio::spawn(rescuer::run(app.clone()));
    tokio::spawn(scheduler::run(app.clone()));
    let allowances = app.allowances.clone();
    let shrink = move || {
        allowances.shrink();
        std::future::ready(Ok::<(), std::convert::Infallible>(()))
    };
    tokio::spawn(every(app.shutdown.clone(), std::time::Duration::from_secs(60), "shrinking rate state", shrink));
}

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
