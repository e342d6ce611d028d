//! One claimed delivery's attempt by the server: prepared (matched, signed: `api::webhooks::destinations::
//! attempts`), sent in its rate limit's slot through the guarded client (`outbound::signed`), then recorded by the
//! sender's group-commit recorder (`api::webhooks::destinations::recording`: the attempts that finished meanwhile
//! share one statement).

use crate::api::webhooks::destinations::attempts::prepare;
use crate::api::webhooks::destinations::claim::{Claimed, lease_left_for};
use crate::api::webhooks::destinations::recording::{AttemptRecord, Recording};
use crate::capture::handoff::give_back;
use crate::db::group_commit::GroupCommit;
use crate::error::ApiResult;
use crate::outbound::signed::{Attempted, Clients, send};
use crate::state::AppState;
use std::time::Duration;

/// The sender's recorder of finished attempts.
pub type Recorder = GroupCommit<AttemptRecord>;

/// Sends one claimed delivery once its turn came; `None` when there was nothing to send. The caller records what
/// it answers. Fails only when the database does (the lease then brings the delivery back).
/// A row whose turn came too late is not sent but given back, due at once: one whose lease could run out during its
/// attempt (another claim could then send it too), or a rate-limited one past its slot by more than a slot's width
/// (sent now, the rows held behind slow attempts would reach the receiver in a burst); its next claim takes a new
/// slot.
pub async fn send_one(app: &AppState, clients: &Clients, mut row: Claimed) -> ApiResult<Option<AttemptRecord>> {
    if too_late(&row) {
        if let Some(lease) = row.lease {
            give_back(&app.pool, lease, &[row.id]).await?;
        }
        app.delivery_wakes.notify_one();
        return Ok(None);
    }
    let Some(prepared) = prepare(app, &mut row).await? else { return Ok(None) };
    if let (Some(wait), Some(claimed_at)) = (row.slot_in(), row.claimed_at) {
        tokio::time::sleep_until(claimed_at + wait).await;
    }
    let attempted = match prepared.url {
        Some(url) => {
            let client = clients.get(prepared.policy);
            send(&client, prepared.policy, &prepared.method, url, &prepared.headers, prepared.body, prepared.timeout)
                .await
        }
        None => Attempted {
            status_code: None,
            error: Some("the destination URL and the capture's path make no URL".to_owned()),
            duration: Duration::ZERO,
        },
    };
    Ok(Some(AttemptRecord::new(&Recording::of(&row, None), &attempted)))
}

/// Whether a held row's turn came too late to send it (see [`send_one`]).
fn too_late(row: &Claimed) -> bool {
    let Some(claimed_at) = row.claimed_at else { return false };
    let waited = claimed_at.elapsed();
    let past_slot = match (row.slot_in(), row.rate_limit_per_s) {
        (Some(slot), Some(rate)) => waited.saturating_sub(slot).as_secs_f64() > 1.0 / f64::from(rate.max(1)),
        _ => false,
    };
    past_slot || !lease_left_for(row.timeout_ms, waited)
}
