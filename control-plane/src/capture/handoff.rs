//! Fresh deliveries handed from the capture path to this replica's sender in memory (issue #49): a capture whose
//! replica's sender has room for its organization (`accepts`) has the deliveries that sender can make at once
//! written leased to it by the capture's own statement (`batch`); once the capture is stored they are handed over
//! with the capture as it arrived (`give`), and the sender attempts them without claiming them or reading the
//! capture back: no claim statement, no wake-up, no body read. What cannot be handed (no sender, its queue full,
//! the sender gone) is given back to the claims at once (`give_back`: the lease cleared, the claims woken); a
//! replica that dies with deliveries in hand leaves them to the claims when their lease ends, as a claimed row.

use bytes::Bytes;
use hookflow_shared::{CaptureId, DeliveryId, DestinationId, OrgId, WebhookId};
use sqlx::PgPool;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::mpsc;

/// What a delivery's lease adds past twice its attempt's timeout (a held row may wait one round of attempts
/// before its own; the margin covers a rate limit's slot too), for claimed and handed rows alike.
pub const LEASE_MARGIN_S: f64 = 33.0;
/// Stored captures waiting for the sender to take their deliveries.
const QUEUE: usize = 1024;

/// The sender's side of the gate: whether it has room for one more capture's deliveries of `org`.
pub trait SenderRoom: Send + Sync + std::fmt::Debug {
    fn has_room(&self, org: OrgId) -> bool;
}

/// A stored capture as it arrived, with the deliveries handed to the sender under `lease`.
#[derive(Debug)]
pub struct HandedCapture {
    pub org_id: OrgId,
    pub webhook_id: WebhookId,
    pub capture_id: CaptureId,
    pub method: String,
    pub path: String,
    pub query_string: String,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    pub signature_verdict: String,
    pub lease: uuid::Uuid,
    /// Each delivery, its destination and that destination's version (`updated_at`) when it was written.
    pub deliveries: Vec<(DeliveryId, DestinationId, chrono::DateTime<chrono::Utc>)>,
    /// The organization may reach private addresses (as the capture's statement saw it).
    pub private_network: bool,
    /// The endpoint verifies signatures.
    pub verifying: bool,
    /// When the capture's statement returned (its deliveries' leases began just before).
    pub handed_at: tokio::time::Instant,
}

/// The hand-over between the capture path and this replica's sender.
#[derive(Debug)]
pub struct Handoff {
    pool: PgPool,
    room: OnceLock<Arc<dyn SenderRoom>>,
    queue: mpsc::Sender<HandedCapture>,
    waiting: Mutex<Option<mpsc::Receiver<HandedCapture>>>,
}

impl Handoff {
    pub fn new(pool: PgPool) -> Self {
        let (queue, waiting) = mpsc::channel(QUEUE);
        Self { pool, room: OnceLock::new(), queue, waiting: Mutex::new(Some(waiting)) }
    }

    /// Whether a capture of `org` may have its deliveries handed over: a sender took the queue and has room.
    pub fn accepts(&self, org: OrgId) -> bool {
        self.room.get().is_some_and(|room| room.has_room(org)) && self.queue.capacity() > 0
    }

    /// The sender's end of the queue, taken once, with the room that gates it.
    pub fn take(&self, room: Arc<dyn SenderRoom>) -> Option<mpsc::Receiver<HandedCapture>> {
        let waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        let _ = self.room.set(room);
        Some(waiting)
    }

    /// Hands a stored capture's deliveries to the sender; what it cannot take goes back to the claims.
    pub fn give(&self, capture: HandedCapture) {
        if let Err(refused) = self.queue.try_send(capture) {
            let capture = refused.into_inner();
            let ids: Vec<DeliveryId> = capture.deliveries.iter().map(|(id, _, _)| *id).collect();
            let pool = self.pool.clone();
            tokio::spawn(async move {
                if let Err(e) = give_back(&pool, capture.lease, &ids).await {
                    tracing::warn!(error = %e, "giving deliveries back failed; their lease brings them back");
                }
            });
        }
    }
}

/// Gives deliveries still pending under `lease` back to the claims (due at once) and wakes them.
pub async fn give_back(pool: &PgPool, lease: uuid::Uuid, ids: &[DeliveryId]) -> Result<(), sqlx::Error> {
    sqlx::query(
        "WITH back AS (
             UPDATE deliveries SET leased_until = NULL
             WHERE id = ANY($1) AND lease = $2 AND status = 'pending' RETURNING 1)
         SELECT pg_notify('hookflow_deliveries', '') WHERE EXISTS (SELECT 1 FROM back)",
    )
    .bind(ids)
    .bind(lease)
    .execute(pool)
    .await
    .map(drop)
}
