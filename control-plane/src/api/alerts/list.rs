//! The organization's alerts, newest first (test sends are not listed).

use crate::api::context::Ctx;
use crate::auth::scope;
use crate::pagination::{ListParams, Listed, keyset_page};
use chrono::{DateTime, Utc};
use hookflow_shared::api::Page;
use hookflow_shared::api::alerts::{AlertOutcome, AlertRecord};
use uuid::Uuid;

#[derive(Debug, sqlx::FromRow)]
struct AlertRow {
    id: Uuid,
    seq: i64,
    #[sqlx(rename = "type")]
    kind: String,
    at: DateTime<Utc>,
    channel_ids: Vec<Uuid>,
    outcome: Option<String>,
}

/// **Added.** Alerts sent to the organization's channels, newest first; `outcome` is `sent` when every channel
/// took the alert, `failed` otherwise (null while being sent).
#[utoipa::path(get, path = "/alerts", params(ListParams), responses((status = 200, body = Page<AlertRecord>)))]
pub async fn list_alerts(Ctx { app, caller }: Ctx<scope::OrganizationRead>, params: ListParams) -> Listed<AlertRecord> {
    let page = keyset_page(
        &app.pool,
        "SELECT id, seq, type, at, channel_ids, outcome FROM alerts
         WHERE organization_id = $1 AND NOT test AND ($2::bigint IS NULL OR seq < $2)
         ORDER BY seq DESC LIMIT $3"
            .to_owned(),
        (caller.org_id, None),
        &params,
        |row: AlertRow| (row.seq, row),
        |(seq, _)| *seq,
    )
    .await?;
    Ok(axum::Json(Page {
        next_cursor: page.next_cursor,
        items: page
            .items
            .into_iter()
            .map(|(_, row)| AlertRecord {
                id: row.id,
                kind: row.kind,
                at: row.at.into(),
                channel_ids: row.channel_ids,
                outcome: row.outcome.map(|o| if o == "sent" { AlertOutcome::Sent } else { AlertOutcome::Failed }),
            })
            .collect(),
    }))
}
