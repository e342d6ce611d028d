//! The capture writer: one task per server that takes captures from a queue and stores them many rows per
//! statement (group commit: whatever arrived while a batch was being stored goes into the next), one batch at a
//! time. In the same statement a batch bumps this writer's slot of the endpoints' counts and of the per-minute
//! analytics counters, and NOTIFYs the streams. A capture is acknowledged only after its batch commits. Ids
//! (UUIDv7) are assigned here in batch order and batches commit in that order, so "captures after id X" is
//! gap-free for live streams and resumption. Bodies are held within a byte budget while they wait (a sender whose
//! body would pass it is answered 503 before its body is read), and a batch closes at `BATCH_BYTES`: 150 bodies of
//! 10 MiB never become one statement of 1.5 GB that PostgreSQL refuses with its small neighbours.
//!
//! Why one at a time: two batches in flight need an explicit transaction each (BEGIN, the statement, a wait for
//! the earlier commit, COMMIT: three round trips instead of one) to keep commits in order, and split the waiting
//! captures into smaller batches. Measured side by side (`hookflow-bench capture`, 64 connections): 22-24k
//! captures/s with two in flight, 31-33k with one.

use crate::capture::batch;
use crate::db::byte_budget::{self, ByteBudget, Reservation};
use crate::error::ApiError;
use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

/// Rows per statement at most.
const MAX_BATCH: usize = 512;
/// Counter slots writers spread over (slot 0 is where deletions and retention subtract): each server's writer
/// takes one at random, so the writers of several replicas rarely wait on each other's counter rows.
const WRITER_SLOTS: u32 = 8;
/// Captures waiting for the writer before senders wait too (back-pressure).
const QUEUE: usize = 8192;
/// Bytes one statement carries at most; a capture larger than this goes alone.
const BATCH_BYTES: usize = 16 * 1024 * 1024;
/// Bytes of large bodies (over 64 KiB each) read and waiting for the writer at once.
const WAITING_BYTES: usize = 160 * 1024 * 1024;

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
    budget: ByteBudget,
}

impl CaptureRecord {
    /// About how many bytes the row takes in a statement.
    fn bytes(&self) -> usize {
        256 + self.body.len()
            + self.headers_json.len()
            + self.query_json.len()
            + self.query_string.len()
            + self.path.len()
    }
}

impl CaptureWriter {
    /// Starts the writer task; it ends when every `CaptureWriter` clone is dropped and the queue is drained.
    pub fn start(pool: sqlx::PgPool) -> Self {
        let (queue, pending) = mpsc::channel(QUEUE);
        tokio::spawn(run(pool, pending));
        Self { queue, budget: ByteBudget::new(WAITING_BYTES, "captures") }
    }

    /// Reserves room for a body of up to `bytes` before it is read (held until the capture is answered), or 503
    /// with `Retry-After` when large bodies already fill the budget.
    pub fn reserve(&self, bytes: usize) -> Result<Reservation, ApiError> {
        self.budget.reserve(bytes)
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
    let slot = 1 + (rand::random::<u32>() % WRITER_SLOTS) as i16;
    let mut batch: Vec<Pending> = Vec::with_capacity(MAX_BATCH);
    // Ends when every sender is gone and the queue is drained; the last batch has been answered by then.
    while pending.recv_many(&mut batch, MAX_BATCH).await > 0 {
        for run in byte_budget::cut(batch.iter().map(|(r, _)| r.bytes()), BATCH_BYTES) {
            write_run(&pool, slot, batch.drain(..run)).await;
        }
    }
}

/// Stores one batch and answers its captures. Ids are taken here, in batch order; batches commit one after the
/// other.
async fn write_run(pool: &sqlx::PgPool, slot: i16, run: impl Iterator<Item = Pending>) {
    let (records, replies): (Vec<CaptureRecord>, Vec<_>) = run.unzip();
    let ids: Vec<Uuid> = records.iter().map(|_| Uuid::now_v7()).collect();
    let rows: Vec<&CaptureRecord> = records.iter().collect();
    let outcomes = match batch::write(pool, batch::Batch { records: &rows, ids: &ids, slot }).await {
        Ok(outcomes) => outcomes,
        Err(e) => {
            tracing::error!(error = %e, rows = rows.len(), "storing captures failed; answering 503");
            vec![Outcome::Failed; rows.len()]
        }
    };
    let stored = outcomes.iter().filter(|o| matches!(o, Outcome::Stored(_))).count();
    crate::metrics::capture_batch(stored, outcomes.len() - stored);
    for (reply, outcome) in replies.into_iter().zip(outcomes) {
        let _ = reply.send(outcome);
    }
}
