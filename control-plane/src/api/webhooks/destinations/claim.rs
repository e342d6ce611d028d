//! Claiming due deliveries, in one short transaction: pending rows whose time has come, of enabled destinations
//! the server delivers itself, taken `FOR UPDATE SKIP LOCKED` (replicas share them, never one twice at once) and
//! leased by pushing `next_attempt_at` past the attempt (a sender that dies leaves them due again: at least
//! once). A rate-limited destination's attempts each take the next slot of its shared clock (`next_slot_at`,
//! advanced by 1/rate in the database, so every replica draws from the one clock), at most a second's worth at a
//! time.

use hookflow_shared::{CaptureId, DeliveryId, DestinationId, OrgId, WebhookId};
use sqlx::PgPool;
use sqlx::types::Json;
use std::collections::HashMap;

/// Slots are 1/rate apart, widened by this factor.
const SLOT_WIDENING: f64 = 1.05;
/// What a lease adds past an attempt's slot and timeout.
const LEASE_MARGIN_S: f64 = 30.0;

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
    /// How long after the claim its rate-limited slot begins (the database's clock); `None`: at once.
    #[sqlx(skip)]
    pub slot_in: Option<std::time::Duration>,
    /// When the claim was made (this process's clock): the slot is counted from it.
    #[sqlx(skip)]
    pub claimed_at: Option<tokio::time::Instant>,
}

/// Who sends what is claimed: the server (destinations without `runner_labels`), or an installed runner of an
/// organization carrying `labels` (that organization's destinations whose labels it has all of).
#[derive(Debug, Clone, Copy)]
pub enum Sender<'a> {
    Server,
    Runner { org_id: OrgId, labels: &'a [String] },
}

/// Claims up to `limit` due deliveries for `sender`.
pub async fn claim(pool: &PgPool, sender: Sender<'_>, limit: i64) -> Result<Vec<Claimed>, sqlx::Error> {
    let (org, labels) = match sender {
        Sender::Server => (None, &[][..]),
        Sender::Runner { org_id, labels } => (Some(org_id), labels),
    };
    let mut tx = pool.begin().await?;
    let mut rows: Vec<Claimed> = sqlx::query_as(
        "SELECT d.id, d.organization_id, d.destination_id, d.webhook_id, d.capture_id, d.matched, d.attempts,
                d.round_start, t.url, t.q, t.filter, t.retry_schedule_s, t.timeout_ms, t.rate_limit_per_s,
                t.signing_secret, t.signing_nonce, t.signing_key_version, COALESCE(o.private_network, false)
                    AS private_network, c.method, c.path, c.query_string, c.headers, c.body
         FROM deliveries d
         JOIN destinations t ON t.id = d.destination_id
         LEFT JOIN organizations o ON o.id = d.organization_id
         LEFT JOIN captures c ON c.organization_id = d.organization_id AND c.id = d.capture_id
         WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND t.enabled
           AND (($2::uuid IS NULL AND cardinality(t.runner_labels) = 0)
                OR (d.organization_id = $2 AND cardinality(t.runner_labels) > 0 AND t.runner_labels <@ $3::text[]))
           AND (t.rate_limit_per_s IS NULL OR t.next_slot_at < now() + interval '1 second')
         ORDER BY d.next_attempt_at
         LIMIT $1
         FOR UPDATE OF d SKIP LOCKED",
    )
    .bind(limit)
    .bind(org)
    .bind(labels)
    .fetch_all(&mut *tx)
    .await?;
    if rows.is_empty() {
        return Ok(rows);
    }
    // Rate-limited destinations: at most a second's worth each, every row given its slot.
    let mut per_destination: HashMap<DestinationId, (i32, Vec<usize>)> = HashMap::new();
    for (i, row) in rows.iter().enumerate() {
        if let Some(rate) = row.rate_limit_per_s {
            let entry = per_destination.entry(row.destination_id).or_insert((rate.max(1), Vec::new()));
            if entry.1.len() < entry.0 as usize {
                entry.1.push(i);
            }
        }
    }
    let mut keep = vec![true; rows.len()];
    for (i, row) in rows.iter().enumerate() {
        if row.rate_limit_per_s.is_some() {
            keep[i] = per_destination.get(&row.destination_id).is_some_and(|(_, taken)| taken.contains(&i));
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
    let mut kept = Vec::with_capacity(rows.len());
    let claimed_at = tokio::time::Instant::now();
    for (mut row, keep) in rows.into_iter().zip(keep) {
        if keep {
            row.claimed_at = Some(claimed_at);
            kept.push(row);
        }
    }
    let ids: Vec<DeliveryId> = kept.iter().map(|r| r.id).collect();
    let leases: Vec<f64> = kept
        .iter()
        .map(|r| r.slot_in.map_or(0.0, |s| s.as_secs_f64()) + f64::from(r.timeout_ms) / 1000.0 + LEASE_MARGIN_S)
        .collect();
    sqlx::query(
        "UPDATE deliveries d SET next_attempt_at = now() + make_interval(secs => u.lease)
         FROM unnest($1::uuid[], $2::float8[]) AS u(id, lease) WHERE d.id = u.id",
    )
    .bind(&ids)
    .bind(&leases)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(kept)
}
