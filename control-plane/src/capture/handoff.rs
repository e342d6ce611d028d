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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::sync::mpsc;

/// What a delivery's lease adds past twice its attempt's timeout (a held row may wait one round of attempts
/// before its own, a quick organization's more rounds of quick ones; the margin covers a rate limit's slot too),
/// for claimed and handed rows alike.
pub const LEASE_MARGIN_S: f64 = 33.0;
/// Stored captures waiting for the sender to take their deliveries.
const QUEUE: usize = 1024;
/// Body bytes of the captures waiting, at most: past it captures are left to the claims.
const QUEUED_BYTES: usize = 32 * 1024 * 1024;
/// The largest body handed over (a larger one is read back by a claim when its turn comes, not held meanwhile).
const HANDED_BODY: usize = 1024 * 1024;

/// The sender's side of the gate: whether it has room for more of `org`'s deliveries (a first look: the sender
/// counts each delivery in when it takes it, and gives back what no longer fits).
pub trait SenderRoom: Send + Sync + std::fmt::Debug {
    fn has_room(&self, org: OrgId) -> bool;
}

/// The deliveries of a stored capture written leased to this replica's sender (`capture::handoff`), under one
/// lease: each with its destination and the version (`updated_at`) of the destination it was written for; and
/// what the sending policy needs as the capture's statement saw it (its organization may reach private
/// addresses; its endpoint verifies signatures).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handed {
    pub lease: uuid::Uuid,
    pub deliveries: Vec<(DeliveryId, DestinationId, chrono::DateTime<chrono::Utc>)>,
    pub private_network: bool,
    pub verifying: bool,
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
    /// Its deliveries, their lease and the policy the capture's statement saw.
    pub handed: Handed,
    /// When the capture was submitted to its statement (its deliveries' leases began after).
    pub handed_at: tokio::time::Instant,
}

/// The hand-over between the capture path and this replica's sender.
#[derive(Debug)]
pub struct Handoff {
    pool: PgPool,
    room: OnceLock<Arc<dyn SenderRoom>>,
    queue: mpsc::Sender<HandedCapture>,
    /// Body bytes of the captures in the queue.
    queued: Arc<AtomicUsize>,
    waiting: Mutex<Option<mpsc::Receiver<HandedCapture>>>,
}

/// The sender's end of the hand-over: the stored captures waiting, their bytes counted out as they are taken.
#[derive(Debug)]
pub struct HandedQueue {
    waiting: mpsc::Receiver<HandedCapture>,
    queued: Arc<AtomicUsize>,
}

impl HandedQueue {
    /// Waits for captures and takes up to `limit` of them; 0 once the queue is closed and empty. Cancel-safe.
    pub async fn recv_many(&mut self, into: &mut Vec<HandedCapture>, limit: usize) -> usize {
        let from = into.len();
        let n = self.waiting.recv_many(into, limit).await;
        let bytes: usize = into[from..].iter().map(|c| c.body.len()).sum();
        self.queued.fetch_sub(bytes, Ordering::Relaxed);
        n
    }

    /// Closes the queue: what is in it can still be taken, nothing more comes.
    pub fn close(&mut self) {
        self.waiting.close();
    }
}

impl Handoff {
    pub fn new(pool: PgPool) -> Self {
        let (queue, waiting) = mpsc::channel(QUEUE);
        Self { pool, room: OnceLock::new(), queue, queued: Arc::default(), waiting: Mutex::new(Some(waiting)) }
    }

    /// Whether a capture of `org` with a body of `bytes` may have its deliveries handed over: a sender took the
    /// queue and has room for the organization, the queue has room, the body is small enough to hold.
    pub fn accepts(&self, org: OrgId, bytes: usize) -> bool {
        bytes <= HANDED_BODY
            && self.queue.capacity() > 0
            && self.queued.load(Ordering::Relaxed) + bytes <= QUEUED_BYTES
            && self.room.get().is_some_and(|room| room.has_room(org))
    }

    /// The sender's end of the queue, taken once, with the room that gates it.
    pub fn take(&self, room: Arc<dyn SenderRoom>) -> Option<HandedQueue> {
        let waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        let _ = self.room.set(room);
        Some(HandedQueue { waiting, queued: self.queued.clone() })
    }

    /// Hands a stored capture's deliveries to the sender; what it cannot take goes back to the claims.
    pub fn give(&self, capture: HandedCapture) {
        let bytes = capture.body.len();
        self.queued.fetch_add(bytes, Ordering::Relaxed);
        if let Err(refused) = self.queue.try_send(capture) {
            self.queued.fetch_sub(bytes, Ordering::Relaxed);
            let handed = refused.into_inner().handed;
            let pool = self.pool.clone();
            tokio::spawn(async move { handed.give_back(&pool).await });
        }
    }
}

impl Handed {
    /// Gives all these deliveries back to the claims (a failure is logged: their lease brings them back).
    pub async fn give_back(&self, pool: &PgPool) {
        let ids: Vec<DeliveryId> = self.deliveries.iter().map(|(id, _, _)| *id).collect();
        if let Err(e) = give_back(pool, self.lease, &ids).await {
            tracing::warn!(error = %e, "giving deliveries back failed; their lease brings them back");
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
