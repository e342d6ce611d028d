//! The process's one LISTEN connection: endpoint changes invalidate the capture cache, stored captures wake the
//! stream topics, queued executions wake long polls and execution events wake execution streams. When the
//! connection drops, everything that depends on notifications is refreshed.

use crate::executions::events::EXECUTIONS_CHANNEL;
use crate::runner_protocol::QUEUE_CHANNEL;
use crate::state::AppState;
use sqlx::postgres::PgListener;
use std::time::Duration;
use uuid::Uuid;

pub const WEBHOOKS_CHANNEL: &str = "hookflow_webhooks";
pub const CAPTURES_CHANNEL: &str = "hookflow_captures";

pub async fn run(app: AppState) {
    let mut delay = Duration::from_millis(100);
    loop {
        let listening = async {
            let mut listener = PgListener::connect_with(&app.pool).await?;
            listener.listen_all([WEBHOOKS_CHANNEL, CAPTURES_CHANNEL, QUEUE_CHANNEL, EXECUTIONS_CHANNEL]).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        let mut listener = tokio::select! {
            listener = listening => match listener {
                Ok(listener) => listener,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot LISTEN; retrying in {delay:?}");
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
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
        app.endpoints.clear();
        app.hub.wake_all();
        app.queue.wake_all();
        loop {
            let received = tokio::select! {
                received = listener.try_recv() => received,
                () = app.shutdown.cancelled() => return,
            };
            match received {
                Ok(Some(notification)) => {
                    let Ok(id) = Uuid::parse_str(notification.payload()) else { continue };
                    match notification.channel() {
                        WEBHOOKS_CHANNEL => app.endpoints.invalidate(id),
                        CAPTURES_CHANNEL => app.hub.wake(id),
                        QUEUE_CHANNEL => app.queue.wake(id),
                        EXECUTIONS_CHANNEL => {
                            let _ = app.execution_wakes.send(id);
                        }
                        _ => {}
                    }
                }
                Ok(None) => {
                    tracing::warn!("the LISTEN connection dropped; reconnecting");
                    app.endpoints.clear();
                    app.hub.wake_all();
                    app.queue.wake_all();
                }
                Err(e) => {
                    tracing::warn!(error = %e, "LISTEN failed; reconnecting");
                    break;
                }
            }
        }
    }
}
