//! The capture writer: one task per server that takes captures from a queue and stores them many rows per
//! transaction (group commit: whatever arrived while earlier batches ran goes into the next), with a few batches
//! in flight on separate connections. In the same transaction a batch bumps its slot of the endpoints' counts and
//! of the per-minute analytics counters, and NOTIFYs the streams. A capture is acknowledged only after its
//! transaction commits. Ids (UUIDv7) are assigned here in batch order and batches commit in that order, so
//! "captures after id X" is gap-free for live streams and resumption.

use crate::capture::batch;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use tokio::sync::{Semaphore, mpsc, oneshot};
use uuid::Uuid;

/// Rows per transaction at most.
const MAX_BATCH: usize = 512;
/// Batches in flight at once, each on its own connection and counter slot; their commits are ordered.
const IN_FLIGHT: usize = 2;
/// Captures waiting for the writer before senders wait too (back-pressure).
const QUEUE: usize = 8192;

/// A request to store.
#[derive(Debug)]
pub struct CaptureRecord {
    pub org_id: Uuid,
    pub webhook_id: Uuid,
    pub method: String,
    pub path: String,
    pub query_string: String,
    /// The query as JSON (`{name: [values]}`), encoded by the request's handler.
    pub query_json: String,
    /// The headers as JSON (`[[name, value], ...]`), encoded by the request's handler.
    pub headers_json: String,
    pub content_type: Option<String>,
    pub body: bytes::Bytes,
    pub body_sha256: Vec<u8>,
    pub body_utf8: bool,
    pub source_ip: String,
    pub received_at: DateTime<Utc>,
}

/// What became of a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Stored(Uuid),
    /// The endpoint was deleted while the capture waited.
    EndpointGone,
    /// This row cannot be stored (a value the database refuses); its neighbours were.
    Rejected,
    /// The transaction failed (database down): nothing was stored.
    Failed,
}

/// A capture waiting for its batch, with where its outcome goes.
type Pending = (CaptureRecord, oneshot::Sender<Outcome>);

#[derive(Debug, Clone)]
pub struct CaptureWriter {
    queue: mpsc::Sender<Pending>,
}

impl CaptureWriter {
    /// Starts the writer task; it ends when every `CaptureWriter` clone is dropped and the queue is drained.
    pub fn start(pool: sqlx::PgPool) -> Self {
        let (queue, pending) = mpsc::channel(QUEUE);
        tokio::spawn(run(pool, pending));
        Self { queue }
    }

    /// Stores a capture; returns once it is committed (or failed).
    pub async fn store(&self, record: CaptureRecord) -> Outcome {
        let (reply, outcome) = oneshot::channel();
        if self.queue.send((record, reply)).await.is_err() {
            return Outcome::Failed;
        }
        outcome.await.unwrap_or(Outcome::Failed)
    }
}

async fn run(pool: sqlx::PgPool, mut pending: mpsc::Receiver<Pending>) {
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut previous: Option<oneshot::Receiver<()>> = None;
    let mut sequence: usize = 0;
    loop {
        // Take a slot first, so the batch keeps filling while every slot is busy.
        let Ok(permit) = permits.clone().acquire_owned().await else { return };
        let mut batch: Vec<Pending> = Vec::with_capacity(MAX_BATCH);
        if pending.recv_many(&mut batch, MAX_BATCH).await == 0 {
            break;
        }
        // Ids are taken here, in batch order; commits happen in the same order.
        let ids: Vec<Uuid> = batch.iter().map(|_| Uuid::now_v7()).collect();
        let slot = (sequence % IN_FLIGHT) as i16;
        sequence += 1;
        let (committed, next) = oneshot::channel();
        // A batch waits for its predecessor's commit only while that one is still in flight.
        let after = previous.replace(next).filter(|p| p.is_empty());
        let pool = pool.clone();
        tokio::spawn(async move {
            let records: Vec<&CaptureRecord> = batch.iter().map(|(r, _)| r).collect();
            let outcomes = match batch::write(&pool, batch::Batch { records: &records, ids: &ids, slot }, after).await {
                Ok(outcomes) => outcomes,
                Err(e) => {
                    tracing::error!(error = %e, rows = records.len(), "storing captures failed; answering 503");
                    vec![Outcome::Failed; records.len()]
                }
            };
            let _ = committed.send(());
            let stored = outcomes.iter().filter(|o| matches!(o, Outcome::Stored(_))).count();
            crate::metrics::capture_batch(stored, outcomes.len() - stored);
            for ((_, reply), outcome) in batch.into_iter().zip(outcomes) {
                let _ = reply.send(outcome);
            }
            drop(permit);
        });
    }
    // Queue closed: wait until every batch in flight has answered.
    let _ = permits.acquire_many(IN_FLIGHT as u32).await;
}
