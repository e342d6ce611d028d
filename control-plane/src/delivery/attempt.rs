//! One claimed delivery's attempt by the server: prepared (matched, signed: `api::webhooks::destinations::
//! attempts`), sent in its rate limit's slot through the guarded client (`outbound::signed`), recorded.

use crate::api::webhooks::destinations::attempts::{Recording, prepare, record};
use crate::api::webhooks::destinations::claim::Claimed;
use crate::outbound::signed::{Attempted, Clients, send};
use crate::state::AppState;
use std::time::Duration;

/// Attempts one claimed delivery. Fails only when the database does (the lease then brings it back).
pub async fn attempt(app: &AppState, clients: &Clients, mut row: Claimed) -> Result<(), sqlx::Error> {
    let Some(prepared) = prepare(app, &mut row).await? else { return Ok(()) };
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
    record(app, &Recording::of(&row, None), &attempted).await
}
