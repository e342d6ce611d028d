//! Monitors (issue #50), alerts as a process: turns schedules' state transitions (`schedule_transitions`, the
//! outbox the execution's end writes) into alerts (`transitions`), and sends pending alerts to their channels
//! (`send`: webhook and Slack through `outbound::signed`, the one signed-request sender; email through the
//! mailer), with the texts of `render`; and evaluates alert rules (`rules`: unclaimed schedules, offline runners). Every replica runs one; rows are taken with `FOR UPDATE SKIP LOCKED`, so
//! each transition makes one alert and each alert is sent once.

pub mod render;
pub mod rules;
pub mod send;
pub mod transitions;

use crate::state::AppState;
use std::sync::Arc;
use std::time::Duration;

/// How often the outbox and pending alerts are looked at.
const POLL: Duration = Duration::from_millis(500);
/// How often alert rules are evaluated.
const RULES_EVERY: Duration = Duration::from_secs(2);

/// Makes and sends alerts until shutdown.
pub async fn run(app: AppState) {
    let clients = Arc::new(crate::outbound::signed::Clients::default());
    let mut rules_at = std::time::Instant::now();
    loop {
        if let Err(e) = transitions::handle_pending(&app).await {
            tracing::warn!(error = %e, "turning schedule transitions into alerts failed; retried");
        }
        if rules_at.elapsed() >= RULES_EVERY {
            rules_at = std::time::Instant::now();
            if let Err(e) = rules::evaluate(&app).await {
                tracing::warn!(error = %e, "evaluating alert rules failed; retried");
            }
        }
        match send::claim(&app).await {
            Ok(alerts) => {
                for alert in alerts {
                    let (app, clients) = (app.clone(), clients.clone());
                    tokio::spawn(async move {
                        let id = alert.id;
                        if let Err(e) = send::send(&app, &clients, alert).await {
                            tracing::warn!(error = %e, alert_id = %id, "recording an alert's outcome failed");
                        }
                    });
                }
            }
            Err(e) => tracing::warn!(error = %e, "claiming alerts failed; retried"),
        }
        tokio::select! {
            () = app.shutdown.cancelled() => return,
            () = tokio::time::sleep(POLL) => {}
        }
    }
}
