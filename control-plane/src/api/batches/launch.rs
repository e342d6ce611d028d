//! A launch with `rows`: validated (1 to 10,000 rows of string values, no built-in names), resolved once, and
//! queued once per row as one batch in one transaction (with `Idempotency-Key`, a retry answers the same batch).

use crate::api::executions::idempotency::{self, Claim, Reservation};
use crate::api::executions::resolve::{LaunchRequest, resolve};
use crate::error::{ApiError, ApiResult, to_json};
use crate::queue::batch::create_batch;
use crate::state::AppState;
use axum::Json;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hookflow_shared::api::batches::MAX_ROWS;
use hookflow_shared::api::executions::{Launch, LaunchMode, Trigger};
use hookflow_shared::flow::names;
use hookflow_shared::wire::header;
use hookflow_shared::{FlowId, OrgId};
use std::collections::BTreeMap;

/// The rows' problems: how many, and each row's names (launch variables' rules, named `rows[i].name`).
pub fn check_rows(rows: &[BTreeMap<String, String>]) -> ApiResult<()> {
    if rows.is_empty() || rows.len() > MAX_ROWS {
        return Err(ApiError::invalid(format!(
            "invalid field `rows`: 1 to {MAX_ROWS} rows; this launch has {}",
            rows.len()
        )));
    }
    for (i, row) in rows.iter().enumerate() {
        if let Some((name, message)) = row.keys().find_map(|name| names::reserved_problem(name).map(|m| (name, m))) {
            return Err(ApiError::invalid(format!("invalid field `rows[{i}].{name}`: {message}")));
        }
    }
    Ok(())
}

/// `POST /flows/{id}/launch` with `rows`: 201 `{"batch_id", "executions"}`.
pub async fn launch_rows(
    app: &AppState,
    org_id: OrgId,
    flow_id: FlowId,
    trigger: Trigger,
    mut launch: Launch,
    key: Option<Claim>,
) -> ApiResult<Response> {
    let rows = launch.rows.take().unwrap_or_default();
    check_rows(&rows)?;
    if launch.mode == Some(LaunchMode::Ephemeral) {
        return Err(ApiError::invalid("invalid field `mode`: a launch with `rows` is queued, never ephemeral"));
    }
    let _turn = app.shares.take(org_id).await?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    if let Some(key) = &key
        && let Reservation::Replay(body) = idempotency::reserve(&mut tx, org_id, key).await?
    {
        // As the launch's own replays answer (this file cannot use theirs: the launch route calls this one).
        let mut response = (StatusCode::OK, Json(body)).into_response();
        response.headers_mut().insert(header::IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
        return Ok(response);
    }
    let request = LaunchRequest::new(app, org_id, flow_id, trigger, &launch);
    let new = resolve(&mut tx, &request).await?;
    let launched = create_batch(&mut tx, &new, &rows).await?;
    if let Some(key) = &key {
        idempotency::store(&mut tx, org_id, key, &to_json(&launched)?).await?;
    }
    tx.commit().await?;
    app.queue.wake(org_id);
    Ok((StatusCode::CREATED, Json(launched)).into_response())
}
