//! The lease rescuer: every `rescue_interval`, executions whose lease expired are released
//! (`crate::queue::release`): requeued as their next attempt, or failed once attempts are used up.

use crate::state::AppState;

/// Runs the rescuer until shutdown.
pub async fn run(app: AppState) {
    let (shutdown, interval) = (app.shutdown.clone(), app.settings.rescue_interval);
    super::periodic::every(shutdown, interval, "lease rescue", || crate::queue::release::rescue_expired(&app.pool))
        .await;
}
