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
mod room;

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::webhooks::destinations::claim::{self, Sender};
use crate::api::webhooks::destinations::recording;
use crate::auth::Actor;
use crate::outbound::signed;
use crate::state::AppState;
use hookflow_shared::{DestinationId, OrgId, WebhookId};
use room::Room;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Rows one claim takes at most.
const CLAIM_BATCH: i64 = 64;
/// Capture body bytes one claim takes at most (the first row whatever its size).
const CLAIM_BYTES: i64 = 16 * 1024 * 1024;
/// How often due rows are looked for without a wake-up.
const POLL: Duration = Duration::from_millis(500);
/// How often failing destinations are looked for.
const BREAKER_EVERY: Duration = Duration::from_secs(5);

/// Sends deliveries until shutdown.
pub async fn run(app: AppState) {
    let clients = Arc::new(signed::Clients::default());
    let recorder = attempt::Recorder::start(app.pool.clone(), recording::MAX_BATCH, "delivery attempts");
    let room = Arc::new(Room::default());
    let mut breaker_at = Instant::now();
    loop {
        if breaker_at.elapsed() >= BREAKER_EVERY {
            breaker_at = Instant::now();
            if let Err(e) = disable_failing(&app).await {
                tracing::warn!(error = %e, "checking failing destinations failed");
            }
        }
        // Claims wait for room worth a statement; rows are held up to twice what may be in flight, so the next
        // ones are at hand when attempts end.
        let mut full = false;
        if let Some(next) = room.next_claim(CLAIM_BATCH) {
            let limits = claim::Limits {
                rows: next.rows,
                per_org: next.per_org,
                bytes: next.bytes.min(CLAIM_BYTES),
                busy: &next.busy,
                held: &next.held,
                per_limited_destination: i64::MAX,
            };
            match claim::claim(&app.pool, Sender::Server, limits).await {
                Ok(claim) => {
                    full = claim.more;
                    let sizes: Vec<(OrgId, usize)> =
                        claim.rows.iter().map(|r| (r.organization_id, body_size(r))).collect();
                    room.hold(&sizes, &next, full);
                    for (row, (org, bytes)) in claim.rows.into_iter().zip(sizes) {
                        let (app, clients, room, recorder) =
                            (app.clone(), clients.clone(), room.clone(), recorder.clone());
                        tokio::spawn(async move {
                            let id = row.id;
                            let Some(turn) = room.turn(org, bytes).await else { return };
                            let sent = attempt::send_one(&app, &clients, row).await;
                            // The room is given back once the request is done (or by a panic, dropping the turn):
                            // its record waits for the recorder's next statement (bounded by the recorder's queue)
                            // under the delivery's lease.
                            drop(turn);
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
        if full {
            continue;
        }
        tokio::select! {
            // New deliveries: a few milliseconds gather those of the captures that follow into the same claim.
            () = app.delivery_wakes.notified() => tokio::time::sleep(GATHER).await,
            () = room.freed.notified() => {}
            () = tokio::time::sleep(POLL) => {}
            () = app.shutdown.cancelled() => return,
        }
    }
}

/// The body bytes a claimed row holds.
fn body_size(row: &claim::Claimed) -> usize {
    row.body.as_ref().map_or(0, Vec::len)
}

/// How long a wake-up by new deliveries waits for those of the next captures before claiming.
const GATHER: Duration = Duration::from_millis(3);

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
