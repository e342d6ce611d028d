//! A capture to store and what became of it, and one batch of captures in one statement: the rows, the endpoints'
//! counts, the per-minute counters, the launches the captures owe their endpoints' triggers and the NOTIFYs. A row
//! the database refuses never fails its neighbours: the batch is stored again in halves under savepoints until the
//! refused rows stand alone, and only they are answered `Rejected`. A body written in parts beforehand (`staged`) is
//! assembled from them by the statement that stores its capture, which deletes the parts.

use crate::capture::handoff::Handed;
use crate::capture::target::CaptureTarget;
use chrono::{DateTime, Utc};
use hookflow_shared::api::signatures::Signature;
use hookflow_shared::api::webhooks::HandshakePreset;
use hookflow_shared::{CaptureId, DeliveryId, DestinationId, ExecutionId, OrgId, WebhookId};

/// A request to store.
#[derive(Debug)]
pub struct CaptureRecord {
    pub org_id: OrgId,
    /// The endpoint, or the execution whose own URL, the capture was sent to.
    pub target: CaptureTarget,
    pub method: String,
    pub path: String,
    pub query_string: String,
    /// The query as JSON (`{name: [values]}`), encoded by the request's handler.
    pub query_json: String,
    /// The headers as JSON (`[[name, value], ...]`), encoded by the request's handler.
    pub headers_json: String,
    pub content_type: Option<String>,
    pub body: bytes::Bytes,
    /// The upload its body was written to in parts (`staged`): the statement assembles it from there, and `body`
    /// (the same bytes, still held for answering) is not bound.
    pub staged: Option<uuid::Uuid>,
    pub body_sha256: Vec<u8>,
    pub body_utf8: bool,
    pub source_ip: String,
    pub received_at: DateTime<Utc>,
    /// The signature's verdict, computed before the capture was queued.
    pub signature: CaptureSignature,
    /// The handshake preset that recognised it (issue #51).
    pub handshake: Option<HandshakePreset>,
    /// Whether this replica's sender takes the capture's deliveries from memory (`capture::handoff`): those its
    /// sender can make at once are written leased to it.
    pub hand: bool,
}

/// A capture's signature verdict as stored: as the API answers it, and Standard Webhooks' `webhook-id` of a
/// validly signed capture (the next one with this id is a duplicate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureSignature {
    pub answer: Signature,
    pub message_id: Option<String>,
}

impl CaptureSignature {
    pub fn unverified() -> Self {
        Self { answer: Signature::unverified(), message_id: None }
    }
}

/// A batch's outcomes, each with the deliveries handed to this replica's sender.
pub type Written = Vec<(Outcome, Option<Handed>)>;

/// What became of a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Stored(CaptureId),
    /// The endpoint was deleted while the capture waited.
    EndpointGone,
    /// This row cannot be stored (a value the database refuses); its neighbours were.
    Rejected,
    /// The transaction failed (database down): nothing was stored.
    Failed,
}

/// Stores one batch with one statement (atomic on its own, one round trip): the rows, the endpoints' counts, the
/// per-minute counters and the NOTIFYs (for endpoints a replica watches, and always for executions' own URLs,
/// whose captures are rare and always awaited). Rows whose endpoint vanished, or whose execution is gone or ended
/// more than `sinks::GRACE_MINUTES` ago, are skipped, and so are an execution's rows past its 1,000th capture
/// (the URL is handed to others): its rows in the batch are ranked oldest first and take the room left, exactly,
/// under the execution's lock (`lock_executions`). Execution captures count in no endpoint's counters.
/// Captures of endpoints with `triggers` owe a launch per trigger (`trigger_launches`, the dispatchers' outbox,
/// woken by a NOTIFY), committed with them: a reference to the trigger (its endpoint, index and the SHA-256 of its
/// JSON text), not a copy; a capture its endpoint's `enforce` refused owes none, nor does one sent to an
/// execution's own URL. Endpoints without triggers cost one look at their row per batch. Likewise a capture owes
/// each destination of its endpoint a delivery (`deliveries`, `pending`; `matched` left NULL when the destination
/// has `q`/`filter`, for the sender to match), woken by `hookflow_deliveries`: one index look per row when the
/// endpoint has none. A capture whose replica's sender has room (`hand`) has the deliveries that sender can make
/// at once (enabled, no `q`/`filter`, no runner, no rate limit) written leased to it and returned, for the sender
/// to take from memory without claiming them (`capture::handoff`); only the others wake the claims, and only when
/// one is due (a disabled destination's wait: its enabling wakes them). A delivery's id is a UUIDv7 of its
/// capture's moment (the capture id's first 8 bytes, then 8 random ones): deliveries enter their primary key in
/// time order, at its right edge, not on random pages (measured with `pgbench`, 64 captures x 2 destinations a
/// statement: 5.7 against 6.6 us a row).
const WRITE_BATCH: &str = "
WITH raw AS (
    SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[],
                         $8::text[], $9::text[], $10::bytea[], $11::bytea[], $12::bool[], $13::text[], $14::timestamptz[],
                         $16::text[], $17::text[], $18::text[], $19::int2[], $20::text[], $21::uuid[], $22::text[],
                         $23::uuid[], $24::bool[])
        AS u(id, org, webhook, method, path, qs, query, headers, ct, body, sha, utf8, ip, at,
             verdict, scheme, reason, secret_index, message_id, execution, handshake, staged, hand)
), input AS (
    SELECT u.id, u.org, u.webhook, u.method, u.path, u.qs, u.query, u.headers, u.ct,
           -- Parts that are gone leave the body NULL: the row is refused (never stored with another body).
           CASE WHEN u.staged IS NULL THEN u.body
                ELSE (SELECT string_agg(p.data, ''::bytea ORDER BY p.seq) FROM capture_body_parts p
                      WHERE p.upload_id = u.staged) END AS body,
           u.sha, u.utf8, u.ip, u.at, u.verdict, u.scheme, u.reason, u.secret_index, u.message_id, u.execution,
           u.handshake
    FROM raw u
), assembled AS (
    DELETE FROM capture_body_parts WHERE upload_id IN (SELECT staged FROM raw WHERE staged IS NOT NULL)
), room AS (
    SELECT x.execution,
           1000 - (SELECT count(*) FROM (SELECT 1 FROM captures c WHERE c.execution_id = x.execution LIMIT 1000) n)
               AS room
    FROM (SELECT DISTINCT execution FROM input WHERE execution IS NOT NULL) x
    WHERE EXISTS (SELECT 1 FROM executions e WHERE e.id = x.execution
                  AND (e.finished_at IS NULL OR e.finished_at > now() - interval '15 minutes'))
), ranked AS (
    SELECT id, execution, row_number() OVER (PARTITION BY execution ORDER BY id) AS rank
    FROM input WHERE execution IS NOT NULL
), stored AS (
    INSERT INTO captures (id, organization_id, webhook_id, method, path, query_string, query, headers, content_type,
                          body, body_size, body_sha256, body_utf8, source_ip, received_at, signature_verdict,
                          signature_scheme, signature_reason, signature_secret_index, signature_message_id,
                          execution_id, handshake)
    SELECT u.id, u.org, u.webhook, u.method, u.path, u.qs, u.query::jsonb, u.headers::jsonb, u.ct, u.body,
           length(u.body), u.sha, u.utf8, u.ip, u.at, u.verdict, u.scheme, u.reason, u.secret_index, u.message_id,
           u.execution, u.handshake
    FROM input u
    WHERE EXISTS (SELECT 1 FROM webhooks w WHERE w.id = u.webhook)
       OR EXISTS (SELECT 1 FROM room r JOIN ranked k ON k.execution = r.execution
                  WHERE k.id = u.id AND k.rank <= r.room)
    RETURNING id, organization_id, webhook_id, execution_id, method, received_at, signature_verdict
), endpoints AS (
    INSERT INTO webhook_counters AS c (webhook_id, slot, stored, last_request_at)
    SELECT webhook_id, $15, count(*), max(received_at) FROM stored WHERE webhook_id IS NOT NULL GROUP BY webhook_id
    ON CONFLICT (webhook_id, slot) DO UPDATE SET stored = c.stored + EXCLUDED.stored,
        last_request_at = GREATEST(c.last_request_at, EXCLUDED.last_request_at)
    RETURNING c.webhook_id
), counters AS (
    INSERT INTO capture_counts AS c (webhook_id, organization_id, minute, method, slot, count, valid, invalid)
    SELECT webhook_id, organization_id, date_trunc('minute', received_at, 'UTC'), method, $15, count(*),
           count(*) FILTER (WHERE signature_verdict = 'valid'), count(*) FILTER (WHERE signature_verdict = 'invalid')
    FROM stored WHERE webhook_id IS NOT NULL GROUP BY 1, 2, 3, 4
    ON CONFLICT (webhook_id, minute, method, slot) DO UPDATE SET count = c.count + EXCLUDED.count,
        valid = c.valid + EXCLUDED.valid, invalid = c.invalid + EXCLUDED.invalid
), notified AS (
    SELECT pg_notify('hookflow_captures', e.webhook_id::text) FROM endpoints e
    WHERE EXISTS (SELECT 1 FROM capture_watchers cw
                  WHERE cw.webhook_id = e.webhook_id AND cw.seen_at > now() - interval '5 minutes')
    UNION ALL
    SELECT pg_notify('hookflow_captures', x.execution_id::text)
    FROM (SELECT DISTINCT execution_id FROM stored WHERE execution_id IS NOT NULL) x
), armed AS (
    SELECT w.id, w.triggers, w.verification->>'mode' IN ('enforce', 'reject') AS enforced FROM webhooks w
    WHERE w.id IN (SELECT s.webhook_id FROM stored s WHERE s.webhook_id IS NOT NULL) AND w.triggers <> '[]'
        AND jsonb_typeof(w.triggers) = 'array'
), owed AS (
    INSERT INTO trigger_launches (capture_id, trigger_index, organization_id, webhook_id, trigger_sha256)
    SELECT s.id, t.n - 1, s.organization_id, s.webhook_id, sha256(convert_to(t.trigger::text, 'UTF8'))
    FROM armed w JOIN stored s ON s.webhook_id = w.id
    CROSS JOIN LATERAL jsonb_array_elements(w.triggers) WITH ORDINALITY AS t(trigger, n)
    WHERE NOT (w.enforced IS TRUE AND s.signature_verdict IN ('invalid', 'missing', 'duplicate'))
    RETURNING 1
), woken AS (
    SELECT pg_notify('hookflow_triggers', '') WHERE EXISTS (SELECT 1 FROM owed)
), aimed AS (
    INSERT INTO deliveries (id, organization_id, destination_id, webhook_id, capture_id, matched, by_runner,
                            next_attempt_at, leased_until, lease)
    SELECT encode(substring(uuid_send(s.id) FROM 1 FOR 8) || substring(uuid_send(gen_random_uuid()) FROM 9 FOR 8),
                  'hex')::uuid,
           s.organization_id, d.id, s.webhook_id, s.id,
           CASE WHEN d.q IS NULL AND d.filter IS NULL THEN true END, cardinality(d.runner_labels) > 0,
           CASE WHEN d.enabled THEN now() ELSE 'infinity'::timestamptz END,
           CASE WHEN h.handed THEN now() + make_interval(secs => d.timeout_ms / 500.0 + $26::float8) END,
           CASE WHEN h.handed THEN $25::uuid END
    FROM stored s JOIN raw r ON r.id = s.id JOIN destinations d ON d.webhook_id = s.webhook_id
    CROSS JOIN LATERAL (
        SELECT r.hand AND d.enabled AND d.q IS NULL AND d.filter IS NULL AND cardinality(d.runner_labels) = 0
               AND d.rate_limit_per_s IS NULL AS handed) h
    WHERE s.webhook_id IS NOT NULL
      AND NOT (s.signature_verdict IN ('invalid', 'missing', 'duplicate') AND EXISTS (
          SELECT 1 FROM webhooks w WHERE w.id = s.webhook_id AND w.verification->>'mode' IN ('enforce', 'reject')))
    RETURNING id, capture_id, destination_id, lease IS NOT NULL AS handed, next_attempt_at < 'infinity' AS due
), sending AS (
    SELECT pg_notify('hookflow_deliveries', '') WHERE EXISTS (SELECT 1 FROM aimed WHERE due AND NOT handed)
), handed AS (
    SELECT a.capture_id, array_agg(a.id ORDER BY a.id) AS ids,
           array_agg(a.destination_id ORDER BY a.id) AS destinations, array_agg(t.updated_at ORDER BY a.id) AS versions
    FROM aimed a JOIN destinations t ON t.id = a.destination_id WHERE a.handed GROUP BY a.capture_id
)
SELECT s.id, h.ids, h.destinations, h.versions, o.private_network, w.verification IS NOT NULL
FROM stored s LEFT JOIN handed h ON h.capture_id = s.id
LEFT JOIN organizations o ON h.ids IS NOT NULL AND o.id = s.organization_id
LEFT JOIN webhooks w ON h.ids IS NOT NULL AND w.id = s.webhook_id
WHERE (SELECT count(*) FROM notified) >= 0 AND (SELECT count(*) FROM woken) >= 0
    AND (SELECT count(*) FROM sending) >= 0";

/// The rows of one batch with their ids, and the writer's counter slot.
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    pub records: &'a [&'a CaptureRecord],
    pub ids: &'a [CaptureId],
    pub slot: i16,
    /// The lease the deliveries handed to this replica's sender are written with.
    pub lease: uuid::Uuid,
}

/// Stores `batch`: one statement that commits on its own, in one round trip. A batch holding a row the database
/// refuses is stored again in halves under savepoints until the refused rows are alone, so every other row is
/// stored.
pub async fn write(conn: &mut sqlx::PgConnection, batch: Batch<'_>) -> Result<Written, sqlx::Error> {
    use sqlx::Connection as _;
    let Batch { records, ids, slot, lease } = batch;
    let executions = executions_of(records);
    if !executions.is_empty() {
        // Captures of executions' own URLs (rare): counted against each execution's cap under its lock, so
        // concurrent batches (other writers, other replicas) never pass it between them.
        let mut tx = conn.begin().await?;
        lock_executions(&mut tx, &executions).await?;
        let outcomes = isolate(&mut tx, records, ids, slot, lease).await?;
        tx.commit().await?;
        return Ok(outcomes);
    }
    match bind(ids, records, slot, lease).fetch_all(&mut *conn).await {
        Ok(stored) => Ok(finish(ids, stored, lease)),
        Err(e) if is_row_error(&e) => {
            let mut tx = conn.begin().await?;
            let outcomes = isolate(&mut tx, records, ids, slot, lease).await?;
            tx.commit().await?;
            Ok(outcomes)
        }
        Err(e) => Err(e),
    }
}

fn isolate<'a>(
    conn: &'a mut sqlx::PgConnection,
    records: &'a [&'a CaptureRecord],
    ids: &'a [CaptureId],
    slot: i16,
    lease: uuid::Uuid,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Written, sqlx::Error>> + Send + 'a>> {
    Box::pin(async move {
        sqlx::query("SAVEPOINT part").execute(&mut *conn).await?;
        match bind(ids, records, slot, lease).fetch_all(&mut *conn).await {
            Ok(stored) => {
                sqlx::query("RELEASE SAVEPOINT part").execute(&mut *conn).await?;
                Ok(finish(ids, stored, lease))
            }
            Err(e) if is_row_error(&e) => {
                sqlx::query("ROLLBACK TO SAVEPOINT part").execute(&mut *conn).await?;
                sqlx::query("RELEASE SAVEPOINT part").execute(&mut *conn).await?;
                if records.len() == 1 {
                    tracing::warn!(error = %e, target = ?records[0].target, "a capture cannot be stored");
                    let gone = matches!(&e, sqlx::Error::Database(db) if db.code().as_deref() == Some("23503"));
                    return Ok(vec![(if gone { Outcome::EndpointGone } else { Outcome::Rejected }, None)]);
                }
                let middle = records.len() / 2;
                let mut outcomes = isolate(conn, &records[..middle], &ids[..middle], slot, lease).await?;
                outcomes.extend(isolate(conn, &records[middle..], &ids[middle..], slot, lease).await?);
                Ok(outcomes)
            }
            Err(e) => Err(e),
        }
    })
}

/// The executions whose own URLs rows of the batch were sent to, sorted (the order their locks are taken in).
fn executions_of(records: &[&CaptureRecord]) -> Vec<ExecutionId> {
    let mut executions: Vec<ExecutionId> = records.iter().filter_map(|r| r.execution_id()).collect();
    executions.sort_unstable();
    executions.dedup();
    executions
}

/// Takes the transaction's advisory lock of each execution, in order (no two batches wait on each other in a
/// circle): the next statement counts their captures after any concurrent batch for them has committed.
async fn lock_executions(conn: &mut sqlx::PgConnection, executions: &[ExecutionId]) -> Result<(), sqlx::Error> {
    sqlx::query(
        "SELECT pg_advisory_xact_lock(4747, x.h)
         FROM (SELECT DISTINCT hashtext(e::text) AS h FROM unnest($1::uuid[]) AS e) x ORDER BY x.h",
    )
    .bind(executions)
    .execute(conn)
    .await
    .map(drop)
}

/// An error of the rows, not of the database: a value it refuses (class 22) or a constraint (class 23).
fn is_row_error(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.code().is_some_and(|c| c.starts_with("22") || c.starts_with("23")))
}

/// A stored row: the capture's id, the deliveries handed to this replica's sender (their destinations and those
/// destinations' versions), its organization's `private_network` and whether its endpoint verifies.
type StoredRow = (
    CaptureId,
    Option<Vec<DeliveryId>>,
    Option<Vec<DestinationId>>,
    Option<Vec<DateTime<Utc>>>,
    Option<bool>,
    Option<bool>,
);

fn finish(ids: &[CaptureId], stored: Vec<StoredRow>, lease: uuid::Uuid) -> Written {
    let mut stored: std::collections::HashMap<CaptureId, Option<Handed>> = stored
        .into_iter()
        .map(|(id, deliveries, destinations, versions, private_network, verifying)| {
            let deliveries: Vec<_> = deliveries
                .unwrap_or_default()
                .into_iter()
                .zip(destinations.unwrap_or_default())
                .zip(versions.unwrap_or_default())
                .map(|((delivery, destination), version)| (delivery, destination, version))
                .collect();
            let handed = (!deliveries.is_empty()).then(|| Handed {
                lease,
                deliveries,
                private_network: private_network.unwrap_or(false),
                verifying: verifying.unwrap_or(false),
            });
            (id, handed)
        })
        .collect();
    ids.iter()
        .map(|id| match stored.remove(id) {
            Some(handed) => (Outcome::Stored(*id), handed),
            None => (Outcome::EndpointGone, None),
        })
        .collect()
}

type Arguments = <sqlx::Postgres as sqlx::Database>::Arguments;

fn bind<'q>(
    ids: &'q [CaptureId],
    records: &'q [&'q CaptureRecord],
    slot: i16,
    lease: uuid::Uuid,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, StoredRow, Arguments> {
    sqlx::query_as(WRITE_BATCH)
        .bind(ids)
        .bind(records.iter().map(|r| r.org_id).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.webhook_id()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.method.as_str()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.path.as_str()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.query_string.as_str()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.query_json.as_str()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.headers_json.as_str()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.content_type.as_deref()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.staged.is_none().then_some(r.body.as_ref())).collect::<Vec<Option<&[u8]>>>())
        .bind(records.iter().map(|r| r.body_sha256.as_slice()).collect::<Vec<&[u8]>>())
        .bind(records.iter().map(|r| r.body_utf8).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.source_ip.as_str()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.received_at).collect::<Vec<_>>())
        .bind(slot)
        .bind(records.iter().map(|r| r.signature.answer.verdict.as_str()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.signature.answer.scheme.map(|s| s.as_str())).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.signature.answer.reason.as_deref()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.signature.answer.secret_index.map(i16::from)).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.signature.message_id.as_deref()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.execution_id()).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.handshake.map(HandshakePreset::as_str)).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.staged).collect::<Vec<_>>())
        .bind(records.iter().map(|r| r.hand).collect::<Vec<_>>())
        .bind(lease)
        .bind(crate::capture::handoff::LEASE_MARGIN_S)
}

impl CaptureRecord {
    fn webhook_id(&self) -> Option<WebhookId> {
        match self.target {
            CaptureTarget::Webhook(id) => Some(id),
            CaptureTarget::Execution(_) => None,
        }
    }

    fn execution_id(&self) -> Option<ExecutionId> {
        match self.target {
            CaptureTarget::Execution(id) => Some(id),
            CaptureTarget::Webhook(_) => None,
        }
    }
}
