//! Background loops, started once per server and stopped by its shutdown token: the LISTEN connection that
//! fans notifications out (`listener`), retention (`retention`), the quotas' usage (`quotas`), the lease rescuer
//! (`rescuer`), the cron scheduler (`scheduler`) and the fold of the pools' queued tally (`crate::pools::compact`);
//! and the trigger dispatcher (`triggers`, a component of its own). The capture writer is started with the state
//! it belongs to.

pub mod listener;
pub mod periodic;
pub mod quotas;
pub mod rescuer;
pub mod retention;
pub mod scheduler;

use crate::state::AppState;

/// Starts every background loop of a server.
pub fn start(app: &AppState) {
    tokio::spawn(listener::run(app.clone()));
    tokio::spawn(retention::run(app.clone()));
    tokio::spawn(quotas::run(app.clone()));
    tokio::spawn(rescuer::run(app.clone()));
    tokio::spawn(scheduler::run(app.clone()));
    tokio::spawn(crate::triggers::run(app.clone()));
    tokio::spawn(crate::delivery::run(app.clone()));
    tokio::spawn(crate::alerts::run(app.clone()));
    let pool = app.pool.clone();
    let fold = move || {
        let pool = pool.clone();
        async move { crate::pools::compact(&mut *pool.acquire().await?, None).await }
    };
    tokio::spawn(periodic::every(app.shutdown.clone(), crate::pools::FOLD_INTERVAL, "folding the queued tally", fold));
    let allowances = app.allowances.clone();
    let shrink = move || {
        allowances.shrink();
        std::future::ready(Ok::<(), std::convert::Infallible>(()))
    };
    tokio::spawn(periodic::every(
        app.shutdown.clone(),
        std::time::Duration::from_secs(60),
        "shrinking rate state",
        shrink,
    ));
}
