//! One claimed delivery's attempt by the server: prepared (matched, signed: `api::webhooks::destinations::
//! attempts`), sent in its rate limit's slot through the guarded client (`outbound::signed`), then recorded by the
//! sender's group-commit recorder (`api::webhooks::destinations::recording`: the attempts that finished meanwhile
//! share one statement).

use crate::api::webhooks::destinations::attempts::prepare;
use crate::api::webhooks::destinations::claim::Claimed;
use crate::api::webhooks::destinations::recording::{AttemptRecord, Recording};
use crate::db::group_commit::GroupCommit;
use crate::error::ApiResult;
use crate::outbound::signed::{Attempted, Clients, send};
use crate::state::AppState;
use std::time::Duration;

/// The sender's recorder of finished attempts.
pub type Recorder = GroupCommit<AttemptRecord>;

/// Sends one claimed delivery; `None` when there was nothing to send. The caller records what it answers.
/// Fails only when the database does (the lease then brings the delivery back).
pub async fn send_one(app: &AppState, clients: &Clients, mut row: Claimed) -> ApiResult<Option<AttemptRecord>> {
    let Some(prepared) = prepare(app, &mut row).await? else { return Ok(None) };
    if let (Some(wait), Some(claimed_at)) = (row.slot_in, row.claimed_at) {
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
