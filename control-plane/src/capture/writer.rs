//! The capture writer: one task per server that takes captures from a queue and stores them many rows per
//! transaction (group commit: whatever arrived while earlier batches ran goes into the next), with a few batches
//! in flight on separate connections. In the same transaction a batch bumps its slot of the endpoints' counts and
//! of the per-minute analytics counters, and NOTIFYs the streams. A capture is acknowledged only after its
//! transaction commits. Ids (UUIDv7) are assigned here in batch order and batches commit in that order, so
//! "captures after id X" is gap-free for live streams and resumption.

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
            let outcomes = match write(&pool, &records, &ids, slot, after).await {
                Ok(outcomes) => outcomes,
                Err(e) => {
                    tracing::error!(error = %e, rows = records.len(), "storing captures failed; answering 503");
                    vec![Outcome::Failed; records.len()]
                }
            };
            let _ = committed.send(());
            for ((_, reply), outcome) in batch.into_iter().zip(outcomes) {
                let _ = reply.send(outcome);
            }
            drop(permit);
        });
    }
    // Queue closed: wait until every batch in flight has answered.
    let _ = permits.acquire_many(IN_FLIGHT as u32).await;
}

/// Stores one batch with one statement (atomic on its own, one round trip): the rows, the endpoints' counts, the
/// per-minute counters and the NOTIFYs. Rows whose endpoint vanished are skipped.
const WRITE_BATCH: &str = "
WITH input AS (
    SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[],
                         $8::text[], $9::text[], $10::bytea[], $11::bytea[], $12::bool[], $13::text[], $14::timestamptz[])
        AS u(id, org, webhook, method, path, qs, query, headers, ct, body, sha, utf8, ip, at)
), stored AS (
    INSERT INTO captures (id, organization_id, webhook_id, method, path, query_string, query, headers, content_type,
                          body, body_size, body_sha256, body_utf8, source_ip, received_at)
    SELECT u.id, u.org, u.webhook, u.method, u.path, u.qs, u.query::jsonb, u.headers::jsonb, u.ct, u.body,
           length(u.body), u.sha, u.utf8, u.ip, u.at
    FROM input u JOIN webhooks w ON w.id = u.webhook
    RETURNING id, organization_id, webhook_id, method, received_at
), endpoints AS (
    INSERT INTO webhook_counters AS c (webhook_id, slot, stored, last_request_at)
    SELECT webhook_id, $15, count(*), max(received_at) FROM stored GROUP BY webhook_id
    ON CONFLICT (webhook_id, slot) DO UPDATE SET stored = c.stored + EXCLUDED.stored,
        last_request_at = GREATEST(c.last_request_at, EXCLUDED.last_request_at)
    RETURNING c.webhook_id
), counters AS (
    INSERT INTO capture_counts AS c (webhook_id, organization_id, minute, method, slot, count)
    SELECT webhook_id, organization_id, date_trunc('minute', received_at, 'UTC'), method, $15, count(*)
    FROM stored GROUP BY 1, 2, 3, 4
    ON CONFLICT (webhook_id, minute, method, slot) DO UPDATE SET count = c.count + EXCLUDED.count
), notified AS (
    SELECT pg_notify('hookflow_captures', webhook_id::text) FROM endpoints
)
SELECT id FROM stored WHERE (SELECT count(*) FROM notified) >= 0";

async fn write(
    pool: &sqlx::PgPool,
    records: &[&CaptureRecord],
    ids: &[Uuid],
    slot: i16,
    after: Option<oneshot::Receiver<()>>,
) -> Result<Vec<Outcome>, sqlx::Error> {
    let Some(after) = after else {
        // Nothing earlier in flight: the statement commits on its own, in one round trip.
        return finish(ids, bind(ids, records, slot).fetch_all(pool).await?);
    };
    let mut tx = pool.begin().await?;
    let stored = bind(ids, records, slot).fetch_all(&mut *tx).await?;
    // Commit after the previous batch did: ids become visible in order, so "after id X" never skips a row.
    let _ = after.await;
    tx.commit().await?;
    finish(ids, stored)
}

fn finish(ids: &[Uuid], stored: Vec<Uuid>) -> Result<Vec<Outcome>, sqlx::Error> {
    let stored: std::collections::HashSet<Uuid> = stored.into_iter().collect();
    Ok(ids.iter().map(|id| if stored.contains(id) { Outcome::Stored(*id) } else { Outcome::EndpointGone }).collect())
}

type Arguments = <sqlx::Postgres as sqlx::Database>::Arguments;

fn bind<'q>(
    ids: &'q [Uuid],
    records: &'q [&'q CaptureRecord],
    slot: i16,
) -> sqlx::query::QueryScalar<'q, sqlx::Postgres, Uuid, Arguments> {
    sqlx::query_scalar(WRITE_BATCH)
        .bind(ids)
        .bind(records.iter().map(|r| r.org_id).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.webhook_id).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.method.as_str()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.path.as_str()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.query_string.as_str()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.query_json.as_str()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.headers_json.as_str()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.content_type.as_deref()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.body.as_ref()).collect::<Vec<&[u8]>>())
        .bind(records.iter().map(|r| r.body_sha256.as_slice()).collect::<Vec<&[u8]>>())
        .bind(records.iter().map(|r| r.body_utf8).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.source_ip.as_str()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.received_at).collect::<Vec<_>>())
        .bind(slot)
}
