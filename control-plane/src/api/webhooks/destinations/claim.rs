//! Claiming due deliveries, in one short transaction: pending rows whose time has come, of enabled destinations
//! the server delivers itself, taken `FOR UPDATE SKIP LOCKED` (replicas share them, never one twice at once) and
//! leased by pushing `next_attempt_at` past the attempt (a sender that dies leaves them due again: at least
//! once). A rate-limited destination's attempts each take the next slot of its shared clock (`next_slot_at`,
//! advanced by 1/rate in the database, so every replica draws from the one clock), at most a second's worth at a
//! time. Organizations are served in turn: each claim walks the organizations with pending rows (from a random
//! point of the index, wrapping around), takes at most `per_org` rows of each and orders them first rows of every
//! organization first, so a tenant's backlog never fills a claim others wait behind; the rate limit's trim and a
//! byte budget of capture bodies apply before the claim's limit, and bodies are read only for the rows kept.

use hookflow_shared::{CaptureId, DeliveryId, DestinationId, OrgId, WebhookId};
use sqlx::PgPool;
use sqlx::types::Json;
use std::collections::HashMap;

/// Slots are 1/rate apart, widened by this factor.
const SLOT_WIDENING: f64 = 1.05;
/// What a lease adds past an attempt's slot and timeout.
const LEASE_MARGIN_S: f64 = 30.0;
/// Organizations one claim looks at, at most (from a random point: the others come in later claims).
const ORGS_PER_CLAIM: i64 = 256;

/// A claimed delivery with what its attempt needs.
#[derive(Debug, sqlx::FromRow)]
pub struct Claimed {
    pub id: DeliveryId,
    pub organization_id: OrgId,
    pub destination_id: DestinationId,
    pub webhook_id: WebhookId,
    pub capture_id: CaptureId,
    pub matched: Option<bool>,
    pub attempts: i32,
    pub round_start: i32,
    pub url: String,
    pub q: Option<String>,
    pub filter: Option<Json<hookflow_shared::api::search::SearchFilter>>,
    pub retry_schedule_s: Vec<i32>,
    pub timeout_ms: i32,
    pub rate_limit_per_s: Option<i32>,
    pub signing_secret: Option<Vec<u8>>,
    pub signing_nonce: Option<Vec<u8>>,
    pub signing_key_version: Option<i32>,
    pub private_network: bool,
    /// The capture as sent (`None` when it is gone: the delivery is cancelled).
    pub method: Option<String>,
    pub path: Option<String>,
    pub query_string: Option<String>,
    pub headers: Option<Json<Vec<(String, String)>>>,
    pub body: Option<Vec<u8>>,
    /// The capture's signature verdict (`None`: the capture is gone).
    pub signature_verdict: Option<String>,
    /// Whether the endpoint verifies signatures (has `verification`).
    pub verifying: bool,
    /// How long after the claim its rate-limited slot begins (the database's clock); `None`: at once.
    #[sqlx(skip)]
    pub slot_in: Option<std::time::Duration>,
    /// When the claim was made (this process's clock): the slot is counted from it.
    #[sqlx(skip)]
    pub claimed_at: Option<tokio::time::Instant>,
    /// This claim's lease (a runner's result must carry it).
    #[sqlx(skip)]
    pub lease: Option<uuid::Uuid>,
}

/// Who sends what is claimed: the server (destinations without `runner_labels`), or an installed runner of an
/// organization carrying `labels` (that organization's destinations whose labels it has all of).
#[derive(Debug, Clone, Copy)]
pub enum Sender<'a> {
    Server,
    Runner { org_id: OrgId, labels: &'a [String] },
}

/// How much one claim may take.
#[derive(Debug, Clone, Copy)]
pub struct Limits<'a> {
    /// Rows in all.
    pub rows: i64,
    /// Rows of one organization.
    pub per_org: i64,
    /// Capture body bytes in all (the first row is taken whatever its size).
    pub bytes: i64,
    /// Organizations not to claim for (at their cap of attempts in flight).
    pub busy: &'a [OrgId],
    /// Rows of one rate-limited destination (at most its rate in any case): a runner takes one, handed out when
    /// its slot comes.
    pub per_limited_destination: i64,
}

/// What a claim took, and whether more may be due (it was full, or an organization reached `per_org`).
#[derive(Debug, Default)]
pub struct Claim {
    pub rows: Vec<Claimed>,
    pub more: bool,
}

/// The ids a claim takes, locked, in turn by organization (see the module's text); only fixed text goes into it.
fn pick_sql(sender: Sender<'_>) -> String {
    let (due, orgs) = match sender {
        Sender::Server => (
            "status = 'pending' AND NOT by_runner",
            "SELECT org FROM orgs WHERE org <> $5 AND NOT (org = ANY($6::uuid[])) LIMIT $7",
        ),
        Sender::Runner { .. } => ("status = 'pending' AND by_runner", "SELECT $2::uuid AS org"),
    };
    format!(
        "WITH RECURSIVE orgs(org, wrapped) AS (
             SELECT $5::uuid, false
           UNION ALL
             SELECT n.org, n.wrapped FROM orgs
             CROSS JOIN LATERAL (SELECT (SELECT organization_id FROM deliveries WHERE {due} AND organization_id > orgs.org
                                         ORDER BY organization_id LIMIT 1) AS after) a
             CROSS JOIN LATERAL (SELECT CASE WHEN a.after IS NOT NULL THEN a.after
                                             WHEN NOT orgs.wrapped THEN (SELECT organization_id FROM deliveries
                                                 WHERE {due} ORDER BY organization_id LIMIT 1) END AS org,
                                        orgs.wrapped OR a.after IS NULL AS wrapped) n
             WHERE n.org IS NOT NULL AND NOT (n.wrapped AND n.org >= $5)
         ), picked AS (
             SELECT p.*, row_number() OVER (PARTITION BY p.organization_id ORDER BY p.next_attempt_at) AS in_org,
                    row_number() OVER (PARTITION BY p.destination_id ORDER BY p.next_attempt_at) AS in_destination
             FROM ({orgs}) o
             CROSS JOIN LATERAL (
                 SELECT d.id, d.organization_id, d.destination_id, d.capture_id, d.next_attempt_at, t.rate_limit_per_s
                 FROM deliveries d JOIN destinations t ON t.id = d.destination_id
                 WHERE d.organization_id = o.org AND d.{due} AND d.next_attempt_at <= now() AND t.enabled
                   AND (($2::uuid IS NULL AND cardinality(t.runner_labels) = 0)
                        OR (d.organization_id = $2 AND cardinality(t.runner_labels) > 0
                            AND t.runner_labels <@ $3::text[]))
                   AND (t.rate_limit_per_s IS NULL OR t.next_slot_at < now() + interval '1 second')
                 ORDER BY d.next_attempt_at
                 LIMIT $4
                 FOR UPDATE OF d SKIP LOCKED) p
         ), fair AS (
             SELECT p.id, p.in_org, p.next_attempt_at, COALESCE(c.body_size, 0)::int8 AS size
             FROM picked p
             LEFT JOIN captures c ON c.organization_id = p.organization_id AND c.id = p.capture_id
             WHERE p.rate_limit_per_s IS NULL OR p.in_destination <= LEAST(p.rate_limit_per_s, $9)
             ORDER BY p.in_org, p.next_attempt_at
             LIMIT $1
         )
         SELECT id, in_org FROM (
             SELECT id, in_org, next_attempt_at,
                    sum(size) OVER (ORDER BY in_org, next_attempt_at, id) - size AS before
             FROM fair) f
         WHERE before < $8
         ORDER BY in_org, next_attempt_at, id"
    )
}

/// Claims due deliveries for `sender`, within `limits`.
pub async fn claim(pool: &PgPool, sender: Sender<'_>, limits: Limits<'_>) -> Result<Claim, sqlx::Error> {
    let (org, labels) = match sender {
        Sender::Server => (None, &[][..]),
        Sender::Runner { org_id, labels } => (Some(org_id), labels),
    };
    let busy: Vec<uuid::Uuid> = limits.busy.iter().map(|o| o.as_uuid()).collect();
    let mut tx = crate::db::begin::begin(&pool).await?;
    let picked: Vec<(DeliveryId, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(pick_sql(sender)))
        .bind(limits.rows)
        .bind(org)
        .bind(labels)
        .bind(limits.per_org)
        .bind(uuid::Uuid::new_v4())
        .bind(&busy)
        .bind(ORGS_PER_CLAIM)
        .bind(limits.bytes)
        .bind(limits.per_limited_destination)
        .fetch_all(&mut *tx)
        .await?;
    if picked.is_empty() {
        return Ok(Claim::default());
    }
    let more = picked.len() as i64 == limits.rows || picked.iter().any(|(_, in_org)| *in_org >= limits.per_org);
    let ids: Vec<DeliveryId> = picked.iter().map(|(id, _)| *id).collect();
    // Only the kept rows' captures are read, bodies included.
    let mut rows: Vec<Claimed> = sqlx::query_as(
        "SELECT d.id, d.organization_id, d.destination_id, d.webhook_id, d.capture_id, d.matched, d.attempts,
                d.round_start, t.url, t.q, t.filter, t.retry_schedule_s, t.timeout_ms, t.rate_limit_per_s,
                t.signing_secret, t.signing_nonce, t.signing_key_version, COALESCE(o.private_network, false)
                    AS private_network, c.method, c.path, c.query_string, c.headers, c.body,
                c.signature_verdict, COALESCE(w.verification IS NOT NULL, false) AS verifying
         FROM unnest($1::uuid[]) WITH ORDINALITY AS u(id, n)
         JOIN deliveries d ON d.id = u.id
         JOIN destinations t ON t.id = d.destination_id
         LEFT JOIN organizations o ON o.id = d.organization_id
         LEFT JOIN webhooks w ON w.id = d.webhook_id
         LEFT JOIN captures c ON c.organization_id = d.organization_id AND c.id = d.capture_id
         ORDER BY u.n",
    )
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await?;
    // Rate-limited destinations: every row given its slot (the SQL took at most a second's worth of each).
    let mut per_destination: HashMap<DestinationId, (i32, Vec<usize>)> = HashMap::new();
    for (i, row) in rows.iter().enumerate() {
        if let Some(rate) = row.rate_limit_per_s {
            per_destination.entry(row.destination_id).or_insert((rate.max(1), Vec::new())).1.push(i);
        }
    }
    for (destination, (rate, taken)) in &per_destination {
        // A little wider than 1/rate: a slot's attempt that starts late (a busy replica) never crowds the
        // receiver's second past the limit.
        let step = SLOT_WIDENING / f64::from(*rate);
        // The first slot, and how far it is from the database's now.
        let first: f64 = sqlx::query_scalar(
            "WITH moved AS (
                 UPDATE destinations SET next_slot_at = GREATEST(next_slot_at, now()) + make_interval(secs => $2)
                 WHERE id = $1
                 RETURNING next_slot_at - make_interval(secs => $2) AS first)
             SELECT extract(epoch FROM first - now())::float8 FROM moved",
        )
        .bind(destination)
        .bind(step * taken.len() as f64)
        .fetch_one(&mut *tx)
        .await?;
        for (n, i) in taken.iter().enumerate() {
            let at = (first + step * n as f64).max(0.0);
            rows[*i].slot_in = Some(std::time::Duration::from_secs_f64(at));
        }
    }
    let claimed_at = tokio::time::Instant::now();
    for row in &mut rows {
        row.claimed_at = Some(claimed_at);
        row.lease = Some(uuid::Uuid::new_v4());
    }
    let lease_ids: Vec<uuid::Uuid> = rows.iter().filter_map(|r| r.lease).collect();
    let ids: Vec<DeliveryId> = rows.iter().map(|r| r.id).collect();
    let leases: Vec<f64> = rows
        .iter()
        .map(|r| r.slot_in.map_or(0.0, |s| s.as_secs_f64()) + f64::from(r.timeout_ms) / 1000.0 + LEASE_MARGIN_S)
        .collect();
    sqlx::query(
        "UPDATE deliveries d SET next_attempt_at = now() + make_interval(secs => u.lease), lease = u.lease_id
         FROM unnest($1::uuid[], $2::float8[], $3::uuid[]) AS u(id, lease, lease_id) WHERE d.id = u.id",
    )
    .bind(&ids)
    .bind(&leases)
    .bind(&lease_ids)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Claim { rows, more })
}
