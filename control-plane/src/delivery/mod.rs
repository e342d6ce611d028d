//! Delivering captures to their endpoints' destinations (issue #49). The capture batch writes each capture's
//! deliveries in its own statement (`capture::batch`, `deliveries`). Those this replica can send at once come to it
//! in memory with their capture (`capture::handoff`, taken by `handoff`): no claim, no wake-up, no body read back.
//! The others (and retries, replays, a crashed sender's rows) are claimed: woken by the batch's NOTIFY
//! (`hookflow_deliveries`), at the moment a retry this replica recorded comes due (`retries`) and by a periodic
//! poll (other replicas' retries, lost notifications, expired leases), the sender claims due deliveries in small
//! batches (`claim`). Either way each is attempted concurrently within the room's bounds (`room`, `attempt`, which
//! sends through `outbound::signed`, the one signed-request sender notification channels use too; yielding to the
//! capture path while it is pressed) and the finished
//! attempts are recorded through one group-commit writer (one statement for all that finished meanwhile).
//! Destinations with `runner_labels` are claimed by runners instead (`api::runner_protocol::deliveries`).
//! Destinations whose attempts have all failed for their `disable_after_failing_s` are disabled
//! (`destination.disabled`, audited), and rows a capture wrote waiting while its destination was being enabled are
//! made due (`release_stranded`). Every replica runs one; the database shares the work and the rate limits.

pub mod attempt;
mod handoff;
mod retries;
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
    let room = Arc::new(Room::yielding_to(app.capture.writer.pressure()));
    if let Some(queue) = app.capture.handoff.take(room.clone()) {
        tokio::spawn(take_handed(app.clone(), clients.clone(), room.clone(), recorder.clone(), queue));
    }
    let mut breaker_at = Instant::now();
    loop {
        if breaker_at.elapsed() >= BREAKER_EVERY {
            breaker_at = Instant::now();
            if let Err(e) = disable_failing(&app).await {
                tracing::warn!(error = %e, "checking failing destinations failed");
            }
            match release_stranded(&app).await {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(deliveries = n, "deliveries written during their destination's enabling made due");
                    app.delivery_wakes.notify_one();
                }
                Err(e) => tracing::warn!(error = %e, "looking for deliveries left waiting failed"),
            }
        }
        // Claims wait for room worth a statement; rows are held up to twice what may be in flight, so the next
        // ones are at hand when attempts end.
        let (mut full, mut came_up_empty) = (false, false);
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
                    came_up_empty = claim.rows.is_empty() && !next.busy.is_empty();
                    let sizes: Vec<(OrgId, usize)> =
                        claim.rows.iter().map(|r| (r.organization_id, body_size(r))).collect();
                    room.hold(&sizes, &next, full);
                    for row in claim.rows {
                        dispatch(&app, &clients, &room, &recorder, row);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "claiming deliveries failed; retrying"),
            }
        }
        if full {
            continue;
        }
        // New deliveries: a few milliseconds gather those of the captures that follow into the same claim. After a
        // claim that found nothing but left busy organizations out, new deliveries are most likely theirs (a busy
        // tenant's flood wakes the loop at every capture batch): the loop rests longer before claiming again, and
        // those organizations' own room wakes it when they fall to half.
        let gather = if came_up_empty { EMPTY_REST } else { GATHER };
        tokio::select! {
            () = app.delivery_wakes.notified() => tokio::time::sleep(gather).await,
            () = room.freed.notified() => {}
            () = room.retries.next_due() => {}
            () = tokio::time::sleep(POLL) => {}
            () = app.shutdown.cancelled() => return,
        }
    }
}

/// Sends a held row when its turn comes, then records the attempt (the room is given back once the request is
/// done, or by a panic dropping the turn; the record waits for the recorder's next statement under the lease).
fn dispatch(
    app: &AppState,
    clients: &Arc<signed::Clients>,
    room: &Arc<Room>,
    recorder: &attempt::Recorder,
    row: claim::Claimed,
) {
    // Counted as the room held it: before the attempt takes the body out of the row.
    let (org, bytes) = (row.organization_id, body_size(&row));
    let (app, clients, room, recorder) = (app.clone(), clients.clone(), room.clone(), recorder.clone());
    tokio::spawn(async move {
        let id = row.id;
        let Some(mut turn) = room.turn(org, bytes).await else { return };
        if row.rate_limit_per_s.is_none() {
            room.yield_to_captures().await;
        }
        let started = std::time::Instant::now();
        let sent = attempt::send_one(&app, &clients, row).await;
        if let Ok(Some(_)) = &sent {
            turn.sent(started.elapsed());
        }
        drop(turn);
        let recorded = match sent {
            Ok(Some(record)) => {
                let retry_in = record.retry_in();
                let recorded = recorder.submit(record).await;
                if let (Ok(true), Some(retry_in)) = (&recorded, retry_in) {
                    room.retries.at(tokio::time::Instant::now() + retry_in);
                }
                recorded.map(drop)
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = recorded {
            tracing::warn!(error = %e, delivery_id = %id, "recording a delivery failed; it is retried");
        }
    });
}

/// Sends the deliveries the capture path hands over (`capture::handoff`) until shutdown, then gives back what
/// is still queued.
async fn take_handed(
    app: AppState,
    clients: Arc<signed::Clients>,
    room: Arc<Room>,
    recorder: attempt::Recorder,
    mut queue: crate::capture::handoff::HandedQueue,
) {
    let mut known = handoff::Targets::default();
    let mut captures = Vec::with_capacity(handoff::TAKE);
    loop {
        // Only the wait is given up at shutdown: captures taken are always sent or given back.
        let taken = tokio::select! {
            n = queue.recv_many(&mut captures, handoff::TAKE) => n,
            () = app.shutdown.cancelled() => 0,
        };
        if taken == 0 {
            break;
        }
        for row in handoff::take(&app.pool, &mut known, &room, &captures).await {
            dispatch(&app, &clients, &room, &recorder, row);
        }
        captures.clear();
    }
    handoff::give_all_back(&app.pool, queue).await;
}

/// The body bytes a claimed row holds.
fn body_size(row: &claim::Claimed) -> usize {
    row.body.as_ref().map_or(0, Vec::len)
}

/// How long a wake-up by new deliveries waits for those of the next captures before claiming.
const GATHER: Duration = Duration::from_millis(3);
/// How long it waits after a claim that came up empty for want of room (see `run`).
const EMPTY_REST: Duration = Duration::from_millis(25);

/// Makes due the pending deliveries a capture wrote waiting (`'infinity'`: its statement saw the destination
/// disabled) while an enabling committed: the enabling's update could not see them yet, so nothing else would. Only
/// destinations changed in the last minute are looked at, and only their rows written since a minute before that
/// change (the destination index: a few rows). Answers how many were made due.
async fn release_stranded(app: &AppState) -> Result<u64, sqlx::Error> {
    let released = sqlx::query(
        "UPDATE deliveries d SET next_attempt_at = now()
         FROM destinations t
         WHERE t.enabled AND t.updated_at > now() - interval '1 minute'
           AND d.destination_id = t.id AND d.created_at >= t.updated_at - interval '1 minute'
           AND d.status = 'pending' AND d.next_attempt_at = 'infinity'",
    )
    .execute(&app.pool)
    .await?;
    Ok(released.rows_affected())
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
