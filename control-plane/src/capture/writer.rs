//! The capture writer: one task per server that takes captures from a queue and stores them many rows per
//! transaction (group commit: whatever arrived while the previous commit ran goes into the next). In the same
//! transaction it bumps the endpoints' counts and per-minute analytics counters and NOTIFYs the streams. A
//! capture is acknowledged only after its transaction commits. Ids (UUIDv7) are assigned here, in commit order,
//! so "captures after id X" is gap-free for stream resumption.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use std::collections::{BTreeMap, HashMap};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

/// Rows per transaction at most.
const MAX_BATCH: usize = 512;
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
    pub query: BTreeMap<String, Vec<String>>,
    pub headers: Vec<(String, String)>,
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

type Job = (CaptureRecord, oneshot::Sender<Outcome>);

#[derive(Debug, Clone)]
pub struct CaptureWriter {
    queue: mpsc::Sender<Job>,
}

impl CaptureWriter {
    /// Starts the writer task; it ends when every `CaptureWriter` clone is dropped and the queue is drained.
    pub fn start(pool: sqlx::PgPool) -> Self {
        let (queue, jobs) = mpsc::channel(QUEUE);
        tokio::spawn(run(pool, jobs));
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

async fn run(pool: sqlx::PgPool, mut jobs: mpsc::Receiver<Job>) {
    let mut batch: Vec<Job> = Vec::with_capacity(MAX_BATCH);
    while jobs.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let records: Vec<&CaptureRecord> = batch.iter().map(|(r, _)| r).collect();
        let outcomes = match write(&pool, &records).await {
            Ok(outcomes) => outcomes,
            Err(e) => {
                tracing::error!(error = %e, rows = records.len(), "storing captures failed; answering 503");
                vec![Outcome::Failed; records.len()]
            }
        };
        for ((_, reply), outcome) in batch.drain(..).zip(outcomes) {
            let _ = reply.send(outcome);
        }
    }
}

/// Stores one batch in one transaction; rows whose endpoint vanished are skipped.
async fn write(pool: &sqlx::PgPool, records: &[&CaptureRecord]) -> Result<Vec<Outcome>, sqlx::Error> {
    let ids: Vec<Uuid> = records.iter().map(|_| Uuid::now_v7()).collect();
    let mut tx = pool.begin().await?;
    let stored: Vec<Uuid> = sqlx::query_scalar(
        "INSERT INTO captures (id, organization_id, webhook_id, method, path, query_string, query, headers,
                               content_type, body, body_size, body_sha256, body_utf8, source_ip, received_at)
         SELECT u.id, u.org, u.webhook, u.method, u.path, u.qs, u.query::jsonb, u.headers::jsonb, u.ct, u.body,
                length(u.body), u.sha, u.utf8, u.ip, u.at
         FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                     $9::text[], $10::bytea[], $11::bytea[], $12::bool[], $13::text[], $14::timestamptz[])
              AS u(id, org, webhook, method, path, qs, query, headers, ct, body, sha, utf8, ip, at)
         JOIN webhooks w ON w.id = u.webhook
         RETURNING id",
    )
    .bind(&ids)
    .bind(records.iter().map(|r| r.org_id).collect::<Vec<_>>())
    .bind(records.iter().map(|r| r.webhook_id).collect::<Vec<_>>())
    .bind(records.iter().map(|r| r.method.as_str()).collect::<Vec<_>>())
    .bind(records.iter().map(|r| r.path.as_str()).collect::<Vec<_>>())
    .bind(records.iter().map(|r| r.query_string.as_str()).collect::<Vec<_>>())
    .bind(records.iter().map(|r| serde_json::to_string(&r.query).unwrap_or_default()).collect::<Vec<_>>())
    .bind(records.iter().map(|r| serde_json::to_string(&r.headers).unwrap_or_default()).collect::<Vec<_>>())
    .bind(records.iter().map(|r| r.content_type.as_deref()).collect::<Vec<_>>())
    .bind(records.iter().map(|r| r.body.as_ref()).collect::<Vec<&[u8]>>())
    .bind(records.iter().map(|r| r.body_sha256.as_slice()).collect::<Vec<&[u8]>>())
    .bind(records.iter().map(|r| r.body_utf8).collect::<Vec<_>>())
    .bind(records.iter().map(|r| r.source_ip.as_str()).collect::<Vec<_>>())
    .bind(records.iter().map(|r| r.received_at).collect::<Vec<_>>())
    .fetch_all(&mut *tx)
    .await?;
    let stored: std::collections::HashSet<Uuid> = stored.into_iter().collect();

    // Per endpoint: rows stored and the newest receipt; per endpoint, minute and method: the analytics counter.
    let mut per_endpoint: HashMap<Uuid, (i64, DateTime<Utc>)> = HashMap::new();
    let mut per_minute: HashMap<(Uuid, Uuid, DateTime<Utc>, &str), i64> = HashMap::new();
    let outcomes: Vec<Outcome> = records
        .iter()
        .zip(&ids)
        .map(|(record, id)| {
            if !stored.contains(id) {
                return Outcome::EndpointGone;
            }
            let endpoint = per_endpoint.entry(record.webhook_id).or_insert((0, record.received_at));
            endpoint.0 += 1;
            endpoint.1 = endpoint.1.max(record.received_at);
            let minute = record.received_at.duration_trunc(TimeDelta::minutes(1)).unwrap_or(record.received_at);
            *per_minute.entry((record.webhook_id, record.org_id, minute, record.method.as_str())).or_default() += 1;
            Outcome::Stored(*id)
        })
        .collect();
    if per_endpoint.is_empty() {
        tx.commit().await?;
        return Ok(outcomes);
    }
    let (endpoints, counts): (Vec<Uuid>, Vec<(i64, DateTime<Utc>)>) = per_endpoint.into_iter().unzip();
    sqlx::query(
        "UPDATE webhooks w SET request_count = w.request_count + v.n,
                last_request_at = GREATEST(w.last_request_at, v.last)
         FROM UNNEST($1::uuid[], $2::bigint[], $3::timestamptz[]) AS v(id, n, last) WHERE w.id = v.id",
    )
    .bind(&endpoints)
    .bind(counts.iter().map(|c| c.0).collect::<Vec<_>>())
    .bind(counts.iter().map(|c| c.1).collect::<Vec<_>>())
    .execute(&mut *tx)
    .await?;
    let keys: Vec<_> = per_minute.keys().copied().collect();
    sqlx::query(
        "INSERT INTO capture_counts (webhook_id, organization_id, minute, method, count)
         SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::timestamptz[], $4::text[], $5::bigint[])
         ON CONFLICT (webhook_id, minute, method) DO UPDATE SET count = capture_counts.count + EXCLUDED.count",
    )
    .bind(keys.iter().map(|k| k.0).collect::<Vec<_>>())
    .bind(keys.iter().map(|k| k.1).collect::<Vec<_>>())
    .bind(keys.iter().map(|k| k.2).collect::<Vec<_>>())
    .bind(keys.iter().map(|k| k.3).collect::<Vec<_>>())
    .bind(keys.iter().map(|k| per_minute[k]).collect::<Vec<_>>())
    .execute(&mut *tx)
    .await?;
    sqlx::query("SELECT pg_notify('hookflow_captures', id::text) FROM UNNEST($1::uuid[]) AS id")
        .bind(&endpoints)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(outcomes)
}
