//! Delivering captures to their endpoints' destinations (issue #49). The capture batch writes each capture's
//! deliveries in its own statement (`capture::batch`, `deliveries`); this sender takes them: woken by the
//! batch's NOTIFY (`hookflow_deliveries`) and by a periodic poll (retries coming due, lost notifications, a
//! crashed sender's leases), it claims due deliveries in small batches (`claim`), attempts each concurrently
//! within a bound (`attempt`, which sends through `outbound::signed`, the one signed-request sender notification
//! channels use too), records the finished attempts through one group-commit writer (one statement for all that
//! finished meanwhile; destinations with `runner_labels` are claimed by runners instead, `api::runner_protocol::
//! deliveries`) and disables destinations whose attempts have all failed for their `disable_after_failing_s`
//! (`destination.disabled`, audited). Every replica runs one; the database shares the work and the rate limits.

pub mod attempt;

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::webhooks::destinations::claim::{self, Sender};
use crate::api::webhooks::destinations::recording;
use crate::auth::Actor;
use crate::outbound::signed;
use crate::state::AppState;
use hookflow_shared::{DestinationId, OrgId, WebhookId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// Attempts in flight at once on one replica.
const IN_FLIGHT: usize = 128;
/// Rows one claim takes at most.
const CLAIM_BATCH: i64 = 64;
/// Rows of one organization one claim takes at most (organizations are served in turn).
const CLAIM_PER_ORG: i64 = 16;
/// Attempts of one organization in flight at once on one replica (a tenant whose receivers hold every attempt
/// to its timeout never takes more than this share of [`IN_FLIGHT`]).
const ORG_IN_FLIGHT: usize = 32;
/// Capture body bytes one claim takes at most (the first row whatever its size).
const CLAIM_BYTES: i64 = 32 * 1024 * 1024;
/// How often due rows are looked for without a wake-up.
const POLL: Duration = Duration::from_millis(500);
/// How often failing destinations are looked for.
const BREAKER_EVERY: Duration = Duration::from_secs(5);

/// Sends deliveries until shutdown.
pub async fn run(app: AppState) {
    let clients = Arc::new(signed::Clients::default());
    let recorder = attempt::Recorder::start(app.pool.clone(), recording::MAX_BATCH, "delivery attempts");
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let freed = Arc::new(tokio::sync::Notify::new());
    let in_flight: Arc<Mutex<HashMap<OrgId, usize>>> = Arc::default();
    let mut any_busy;
    let mut breaker_at = Instant::now();
    loop {
        if breaker_at.elapsed() >= BREAKER_EVERY {
            breaker_at = Instant::now();
            if let Err(e) = disable_failing(&app).await {
                tracing::warn!(error = %e, "checking failing destinations failed");
            }
        }
        let mut claimed_any = false;
        let available = permits.available_permits();
        let busy: Vec<OrgId> = {
            let counts = in_flight.lock().unwrap_or_else(|e| e.into_inner());
            counts.iter().filter(|(_, n)| **n >= ORG_IN_FLIGHT).map(|(org, _)| *org).collect()
        };
        any_busy = !busy.is_empty();
        // Claims wait for a quarter of the room to be free: one claim's statements serve many attempts.
        if available >= IN_FLIGHT / 4 {
            let limits = claim::Limits {
                rows: (available as i64).min(CLAIM_BATCH),
                per_org: CLAIM_PER_ORG,
                bytes: CLAIM_BYTES,
                busy: &busy,
                per_limited_destination: i64::MAX,
            };
            match claim::claim(&app.pool, Sender::Server, limits).await {
                Ok(claim) => {
                    claimed_any = claim.more;
                    for row in claim.rows {
                        let Ok(permit) = permits.clone().acquire_owned().await else { return };
                        let (app, clients, freed, in_flight) =
                            (app.clone(), clients.clone(), freed.clone(), in_flight.clone());
                        let org = row.organization_id;
                        *in_flight.lock().unwrap_or_else(|e| e.into_inner()).entry(org).or_default() += 1;
                        let recorder = recorder.clone();
                        tokio::spawn(async move {
                            let id = row.id;
                            let sent = attempt::send_one(&app, &clients, row).await;
                            // The room is given back once the request is done: its record waits for the recorder's
                            // next statement (bounded by the recorder's queue) under the delivery's lease.
                            {
                                let mut counts = in_flight.lock().unwrap_or_else(|e| e.into_inner());
                                if let Some(n) = counts.get_mut(&org) {
                                    *n -= 1;
                                    if *n == 0 {
                                        counts.remove(&org);
                                    }
                                }
                            }
                            drop(permit);
                            freed.notify_one();
                            let recorded = match sent {
                                Ok(Some(record)) => recorder.submit(record).await.map(drop),
                                Ok(None) => Ok(()),
                                Err(e) => Err(e),
                            };
                            if let Err(e) = recorded {
                                tracing::warn!(error = %e, delivery_id = %id, "recording a delivery failed; it is retried");
                            }
                        });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "claiming deliveries failed; retrying"),
            }
        }
        if claimed_any {
            continue;
        }
        tokio::select! {
            () = app.delivery_wakes.notified() => {}
            () = freed.notified(), if available < IN_FLIGHT / 4 || any_busy => {}
            () = tokio::time::sleep(POLL) => {}
            () = app.shutdown.cancelled() => return,
        }
    }
}

/// Disables the destinations whose attempts have all failed for their `disable_after_failing_s`, with a reason,
/// audited `destination.disabled`. Their pending deliveries wait.
async fn disable_failing(app: &AppState) -> Result<(), sqlx::Error> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    let disabled: Vec<(DestinationId, OrgId, WebhookId, String)> = sqlx::query_as(
        "UPDATE destinations SET enabled = false, updated_at = now(),
             disabled_reason = format('every attempt failed for %s seconds', disable_after_failing_s)
         WHERE enabled AND failing_since IS NOT NULL
           AND failing_since <= now() - make_interval(secs => disable_after_failing_s)
         RETURNING id, organization_id, webhook_id, disabled_reason",
    )
    .fetch_all(&mut *tx)
    .await?;
    for (id, org_id, webhook_id, reason) in &disabled {
        tracing::info!(destination_id = %id, "a destination failing too long was disabled");
        let event = AuditEvent {
            org_id: *org_id,
            actor: Actor::Webhook(*webhook_id),
            action: "destination.disabled",
            target: id.to_string(),
            details: serde_json::json!({"reason": reason}),
        };
        audit::record(&mut tx, event).await?;
    }
    tx.commit().await
}
