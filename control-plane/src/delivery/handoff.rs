//! Taking the deliveries the capture path hands over (`capture::handoff`): each delivery becomes a row as a claim
//! returns it (the capture as it arrived, its destination as it was written for, its organization's and endpoint's
//! policy as the capture's statement saw them), held and sent the same way. Destinations are kept in memory by
//! version (`updated_at`, moved by every change): only a destination not known at that version is read, in one
//! statement for the captures that arrived together. A delivery whose destination is gone, disabled or changed
//! so the server cannot send it at once goes back to the claims (they decide: a disabled destination's waits).

use crate::api::webhooks::destinations::claim::Claimed;
use crate::capture::handoff::{HandedCapture, HandedQueue, give_back};
use crate::delivery::room::Room;
use chrono::{DateTime, Utc};
use hookflow_shared::{DeliveryId, DestinationId};
use sqlx::types::Json;
use std::collections::HashMap;
use std::sync::Arc;

/// Stored captures taken from the queue at once.
pub const TAKE: usize = 64;
/// Destinations kept in memory at most (all are forgotten past it).
const KEPT: usize = 4096;
/// How long a destination read is used at most, whatever its version (its sealed secret re-encrypted by a key
/// rotation does not move it).
const KEPT_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// What a handed delivery's attempt needs of its destination, at one version.
#[derive(Debug, sqlx::FromRow)]
struct Target {
    id: DestinationId,
    updated_at: DateTime<Utc>,
    url: String,
    retry_schedule_s: Vec<i32>,
    timeout_ms: i32,
    signing_secret: Option<Vec<u8>>,
    signing_nonce: Option<Vec<u8>>,
    signing_key_version: Option<i32>,
    /// The server may send its deliveries at once (enabled, no `q`/`filter`, no runner, no rate limit).
    sendable: bool,
    #[sqlx(skip)]
    read_at: Option<std::time::Instant>,
}

impl Target {
    /// Whether this read may serve a delivery written for `version`: the very version the capture's statement saw
    /// (its lease was made of that version's timeout), read not long ago.
    fn serves(&self, version: DateTime<Utc>) -> bool {
        self.updated_at == version && self.read_at.is_some_and(|at| at.elapsed() < KEPT_FOR)
    }
}

/// The destinations handed deliveries went to, by id, at the version last read.
#[derive(Debug, Default)]
pub struct Targets(HashMap<DestinationId, Arc<Target>>);

/// Turns handed captures' deliveries into rows to send, each counted into the room as it is taken; a delivery
/// that cannot be sent here (its destination gone, changed or no longer sendable at once; no room left for its
/// organization or the replica) goes back to the claims, one statement per lease.
pub async fn take(pool: &sqlx::PgPool, known: &mut Targets, room: &Room, captures: &[HandedCapture]) -> Vec<Claimed> {
    let mut wanted: Vec<DestinationId> = captures
        .iter()
        .flat_map(|c| c.handed.deliveries.iter())
        .filter(|(_, id, version)| known.0.get(id).is_none_or(|t| !t.serves(*version)))
        .map(|(_, id, _)| *id)
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    if !wanted.is_empty() {
        if known.0.len() + wanted.len() > KEPT {
            known.0.clear();
        }
        match targets(pool, &wanted).await {
            Ok(found) => {
                let now = std::time::Instant::now();
                known.0.extend(found.into_iter().map(|t| (t.id, Arc::new(Target { read_at: Some(now), ..t }))));
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading handed deliveries' destinations failed; the claims take them")
            }
        }
    }
    let mut rows = Vec::new();
    let mut back: HashMap<uuid::Uuid, Vec<DeliveryId>> = HashMap::new();
    for capture in captures {
        for (id, destination, version) in &capture.handed.deliveries {
            match known.0.get(destination) {
                Some(target)
                    if target.sendable
                        && target.serves(*version)
                        && room.try_hold_handed(capture.org_id, capture.body.len()) =>
                {
                    rows.push(row(capture, *id, target));
                }
                _ => back.entry(capture.handed.lease).or_default().push(*id),
            }
        }
    }
    for (lease, ids) in back {
        if let Err(e) = give_back(pool, lease, &ids).await {
            tracing::warn!(error = %e, "giving deliveries back failed; their lease brings them back");
        }
    }
    rows
}

/// Gives back the deliveries of every capture still queued (the sender is stopping).
pub async fn give_all_back(pool: &sqlx::PgPool, mut queue: HandedQueue) {
    queue.close();
    let mut captures = Vec::new();
    while queue.recv_many(&mut captures, TAKE).await > 0 {
        for capture in captures.drain(..) {
            capture.handed.give_back(pool).await;
        }
    }
}

/// The destinations among `ids` (those gone are missing), as an attempt needs them.
async fn targets(pool: &sqlx::PgPool, ids: &[DestinationId]) -> Result<Vec<Target>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, updated_at, url, retry_schedule_s, timeout_ms, signing_secret, signing_nonce, signing_key_version,
                enabled AND cardinality(runner_labels) = 0 AND rate_limit_per_s IS NULL AND q IS NULL
                    AND filter IS NULL AS sendable
         FROM destinations WHERE id = ANY($1)",
    )
    .bind(ids)
    .fetch_all(pool)
    .await
}

/// A handed delivery as a claim would have returned it.
fn row(capture: &HandedCapture, id: DeliveryId, target: &Target) -> Claimed {
    Claimed {
        id,
        organization_id: capture.org_id,
        destination_id: target.id,
        webhook_id: capture.webhook_id,
        capture_id: capture.capture_id,
        matched: Some(true),
        attempts: 0,
        round_start: 0,
        url: target.url.clone(),
        q: None,
        filter: None,
        retry_schedule_s: target.retry_schedule_s.clone(),
        timeout_ms: target.timeout_ms,
        rate_limit_per_s: None,
        signing_secret: target.signing_secret.clone(),
        signing_nonce: target.signing_nonce.clone(),
        signing_key_version: target.signing_key_version,
        private_network: capture.handed.private_network,
        method: Some(capture.method.clone()),
        path: Some(capture.path.clone()),
        query_string: Some(capture.query_string.clone()),
        headers: Some(Json(capture.headers.clone())),
        body: Some(capture.body.to_vec()),
        signature_verdict: Some(capture.signature_verdict.clone()),
        verifying: capture.handed.verifying,
        claimed_at: Some(capture.handed_at),
        lease: Some(capture.handed.lease),
        slot_in_s: None,
        trimmed: false,
    }
}
