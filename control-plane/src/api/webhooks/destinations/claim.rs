//! Claiming due deliveries, in one statement: pending rows whose time has come, of enabled destinations the
//! server delivers itself, taken `FOR UPDATE SKIP LOCKED` (replicas share them, never one twice at once) and
//! leased until past the attempt (`leased_until`, a column no index names: a sender that dies leaves them due again
//! when it passes, at least once). A rate-limited destination's attempts each take the next slot of its shared clock (`next_slot_at`,
//! advanced by 1/rate in the database, so every replica draws from the one clock), at most a second's worth at a
//! time. Organizations are served in turn: each claim walks the organizations with pending rows (from a random
//! point of the index, wrapping around), takes at most `per_org` rows of each and orders them first rows of every
//! organization first, so a tenant's backlog never fills a claim others wait behind; the rate limit's trim and a
//! byte budget of capture bodies apply before the claim's limit, and bodies are read only for the rows kept.

use hookflow_shared::{CaptureId, DeliveryId, DestinationId, OrgId, WebhookId};
use sqlx::PgPool;
use sqlx::types::Json;

/// Slots are 1/rate apart, widened by this factor.
const SLOT_WIDENING: f64 = 1.05;
/// What a lease adds past twice an attempt's timeout (the capture path's hand-over writes the same). A row that
/// waited longer is not sent: see [`lease_left_for`].
pub use crate::capture::handoff::LEASE_MARGIN_S;

/// Whether a claimed row still has lease enough for its attempt after waiting `waited` since its claim: its own
/// timeout and 5 s to spare.
pub fn lease_left_for(timeout_ms: i32, waited: std::time::Duration) -> bool {
    let timeout = f64::from(timeout_ms.max(0)) / 1000.0;
    let lease = 2.0 * timeout + LEASE_MARGIN_S;
    lease - waited.as_secs_f64() >= timeout + 5.0
}
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
    /// When the claim was made (this process's clock): the slot is counted from it.
    #[sqlx(skip)]
    pub claimed_at: Option<tokio::time::Instant>,
    /// This claim's lease (a runner's result must carry it).
    pub lease: Option<uuid::Uuid>,
    /// How long after the claim its rate-limited slot begins, in seconds (the database's clock); `None`: at once.
    pub slot_in_s: Option<f64>,
    /// Whether the claim's byte budget left due rows behind (more may be due).
    pub trimmed: bool,
}

impl Claimed {
    /// How long after the claim its rate-limited slot begins; `None`: at once.
    pub fn slot_in(&self) -> Option<std::time::Duration> {
        self.slot_in_s.map(std::time::Duration::from_secs_f64)
    }
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
    /// Rows each organization holds already (sending or waiting): its rows are `per_org` less these.
    pub held: &'a [(OrgId, i64)],
    /// Rows of one rate-limited destination (at most its rate in any case): a runner takes one, handed out when
    /// its slot comes.
    pub per_limited_destination: i64,
}

/// What a claim took, and whether more may be due (it took `rows`, or its byte budget left rows behind).
#[derive(Debug, Default)]
pub struct Claim {
    pub rows: Vec<Claimed>,
    pub more: bool,
}

/// The claim, one statement (only fixed text goes into it): the organizations with due rows walked in turn (see
/// the module's text), each one's due rows taken locked up to its room, the rate limit's trim and the byte budget
/// applied, the kept rows leased (`leased_until` past the attempt, a fresh `lease`) and rate-limited
/// destinations' clocks advanced by the slots taken, then everything the attempts need read back, bodies included,
/// in the claim's order.
fn claim_sql(sender: Sender<'_>) -> String {
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
                 SELECT d.id, d.organization_id, d.destination_id, d.capture_id, d.next_attempt_at, t.rate_limit_per_s,
                        t.timeout_ms
                 FROM deliveries d JOIN destinations t ON t.id = d.destination_id
                 WHERE d.organization_id = o.org AND d.{due} AND d.next_attempt_at <= now() AND t.enabled
                   AND (d.leased_until IS NULL OR d.leased_until <= now())
                   AND (($2::uuid IS NULL AND cardinality(t.runner_labels) = 0)
                        OR (d.organization_id = $2 AND cardinality(t.runner_labels) > 0
                            AND t.runner_labels <@ $3::text[]))
                   AND (t.rate_limit_per_s IS NULL OR t.next_slot_at < now() + interval '1 second')
                 ORDER BY d.next_attempt_at
                 LIMIT GREATEST(0, $4 - COALESCE((SELECT sum(f.n)::int8 FROM unnest($10::uuid[], $11::int8[]) AS f(org, n)
                                                  WHERE f.org = o.org), 0))
                 FOR UPDATE OF d SKIP LOCKED) p
         ), fair AS (
             SELECT p.*, COALESCE(c.body_size, 0)::int8 AS size
             FROM picked p
             LEFT JOIN captures c ON c.organization_id = p.organization_id AND c.id = p.capture_id
             WHERE p.rate_limit_per_s IS NULL OR p.in_destination <= LEAST(p.rate_limit_per_s, $9)
             ORDER BY p.in_org, p.next_attempt_at
             LIMIT $1
         ), kept AS (
             SELECT f.*, row_number() OVER (ORDER BY in_org, next_attempt_at, id) AS n,
                    row_number() OVER (PARTITION BY destination_id ORDER BY in_org, next_attempt_at, id) AS in_slot
             FROM (SELECT f.*, sum(size) OVER (ORDER BY in_org, next_attempt_at, id) - size AS before FROM fair f) f
             WHERE before < $8
         ), clocks AS (
             UPDATE destinations t
             SET next_slot_at = GREATEST(t.next_slot_at, now()) + make_interval(secs => {widening} / t.rate_limit_per_s * k.taken)
             FROM (SELECT destination_id, count(*) AS taken FROM kept WHERE rate_limit_per_s IS NOT NULL
                   GROUP BY destination_id) k
             WHERE t.id = k.destination_id
             RETURNING t.id, {widening} / t.rate_limit_per_s AS step,
                       extract(epoch FROM t.next_slot_at - now())::float8 - {widening} / t.rate_limit_per_s * k.taken
                           AS first
         ), leased AS (
             UPDATE deliveries d
             SET leased_until = now() + make_interval(secs => k.timeout_ms / 500.0 + {lease_margin}), lease = gen_random_uuid()
             FROM kept k WHERE d.id = k.id
             RETURNING d.id, d.organization_id, d.destination_id, d.webhook_id, d.capture_id, d.matched, d.attempts,
                       d.round_start, d.lease, k.n, k.in_slot
         )
         SELECT l.id, l.organization_id, l.destination_id, l.webhook_id, l.capture_id, l.matched, l.attempts,
                l.round_start, l.lease, t.url, t.q, t.filter, t.retry_schedule_s, t.timeout_ms,
                t.rate_limit_per_s, t.signing_secret, t.signing_nonce, t.signing_key_version,
                COALESCE(o.private_network, false) AS private_network, c.method, c.path, c.query_string, c.headers,
                c.body, c.signature_verdict, COALESCE(w.verification IS NOT NULL, false) AS verifying,
                CASE WHEN s.id IS NOT NULL THEN GREATEST(0, s.first + s.step * (l.in_slot - 1)) END AS slot_in_s,
                (SELECT count(*) FROM fair) > (SELECT count(*) FROM kept) AS trimmed
         FROM leased l
         JOIN destinations t ON t.id = l.destination_id
         LEFT JOIN clocks s ON s.id = l.destination_id
         LEFT JOIN organizations o ON o.id = l.organization_id
         LEFT JOIN webhooks w ON w.id = l.webhook_id
         LEFT JOIN captures c ON c.organization_id = l.organization_id AND c.id = l.capture_id
         ORDER BY l.n",
        widening = SLOT_WIDENING,
        lease_margin = LEASE_MARGIN_S,
    )
}

/// Claims due deliveries for `sender`, within `limits`, in one statement.
pub async fn claim(pool: &PgPool, sender: Sender<'_>, limits: Limits<'_>) -> Result<Claim, sqlx::Error> {
    let (org, labels) = match sender {
        Sender::Server => (None, &[][..]),
        Sender::Runner { org_id, labels } => (Some(org_id), labels),
    };
    let busy: Vec<uuid::Uuid> = limits.busy.iter().map(|o| o.as_uuid()).collect();
    let (taken_orgs, taken): (Vec<uuid::Uuid>, Vec<i64>) =
        limits.held.iter().map(|(org, n)| (org.as_uuid(), *n)).unzip();
    let mut rows: Vec<Claimed> = sqlx::query_as(sqlx::AssertSqlSafe(claim_sql(sender)))
        .bind(limits.rows)
        .bind(org)
        .bind(labels)
        .bind(limits.per_org)
        .bind(uuid::Uuid::new_v4())
        .bind(&busy)
        .bind(ORGS_PER_CLAIM)
        .bind(limits.bytes)
        .bind(limits.per_limited_destination)
        .bind(&taken_orgs)
        .bind(&taken)
        .fetch_all(pool)
        .await?;
    let more = rows.len() as i64 == limits.rows || rows.first().is_some_and(|r| r.trimmed);
    let claimed_at = tokio::time::Instant::now();
    for row in &mut rows {
        row.claimed_at = Some(claimed_at);
    }
    Ok(Claim { rows, more })
}
