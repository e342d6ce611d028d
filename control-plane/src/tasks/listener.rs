//! The process's one LISTEN connection: queued executions wake long polls, execution events wake execution
//! streams, stored captures wake capture streams, owed trigger launches wake the trigger dispatcher, and
//! invalidations drop cached entries. The connection follows the primary: when it drops, or the primary moves to
//! another host, it is made again (on the host the pool now points at) and, once it listens, everything that
//! depends on notifications is refreshed, since whatever was sent meanwhile is unknown.

use crate::signals::{
    CAPTURES_CHANNEL, CHANNELS, DELIVERIES_CHANNEL, EXECUTIONS_CHANNEL, INVALIDATE_CHANNEL, Invalidation,
    QUEUE_CHANNEL, TRIGGERS_CHANNEL,
};
use crate::state::AppState;
use sqlx::postgres::{PgListener, PgNotification};
use std::time::Duration;
use uuid::Uuid;

pub async fn run(app: AppState) {
    let mut delay = Duration::from_millis(100);
    let mut moves = app.databases.primary.changes();
    loop {
        moves.mark_unchanged();
        let listening = async {
            let mut listener = PgListener::connect_with(&app.pool).await?;
            listener.listen_all(CHANNELS).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        let mut listener = tokio::select! {
            listener = listening => match listener {
                Ok(listener) => listener,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot LISTEN; retrying in {delay:?}");
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        // The pool found the new primary: try there at once.
                        _ = moves.changed() => {}
                        () = app.shutdown.cancelled() => return,
                    }
                    delay = (delay * 2).min(Duration::from_secs(5));
                    continue;
                }
            },
            () = app.shutdown.cancelled() => return,
        };
        delay = Duration::from_millis(100);
        // Whatever happened while we were not listening is unknown.
        refresh_everything(&app);
        loop {
            let received = tokio::select! {
                received = listener.try_recv() => received,
                _ = moves.changed() => {
                    tracing::warn!("the primary moved; LISTEN moves with it");
                    break;
                }
                () = app.shutdown.cancelled() => return,
            };
            match received {
                Ok(Some(notification)) => dispatch(&app, &notification),
                Ok(None) => {
                    tracing::warn!("the LISTEN connection dropped; reconnecting");
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "LISTEN failed; reconnecting");
                    break;
                }
            }
        }
    }
}

fn refresh_everything(app: &AppState) {
    app.forget_cached();
    app.hub.wake_all();
    app.waiters.wake_all();
    app.queue.wake_all();
    app.trigger_wakes.notify_one();
    app.delivery_wakes.notify_one();
}

fn dispatch(app: &AppState, notification: &PgNotification) {
    let payload = notification.payload();
    match notification.channel() {
        INVALIDATE_CHANNEL => {
            if let Some(invalidation) = Invalidation::parse(payload) {
                app.invalidate(invalidation);
            }
        }
        TRIGGERS_CHANNEL => app.trigger_wakes.notify_one(),
        DELIVERIES_CHANNEL => app.delivery_wakes.notify_one(),
        channel => {
            let Ok(id) = Uuid::parse_str(payload) else { return };
            match channel {
                CAPTURES_CHANNEL => {
                    app.hub.wake(id.into());
                    app.waiters.wake(id);
                }
                QUEUE_CHANNEL => app.queue.wake(id.into()),
                EXECUTIONS_CHANNEL => {
                    let _ = app.execution_wakes.send(id.into());
                }
                _ => {}
            }
        }
    }
}
