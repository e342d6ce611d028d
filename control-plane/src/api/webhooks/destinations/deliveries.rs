//! A destination's deliveries: listed by status (newest first), one read, its attempts, and replay (dead ones,
//! those whose captures a `q` matches, or named ones become `pending` again with a fresh schedule, their
//! attempts kept), audited `destination.replayed`.

use crate::api::context::Ctx;
use crate::api::webhooks::destinations::crud::{fetch, record};
use crate::api::webhooks::search::{self, push_cond};
use crate::auth::scope;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::pagination::{self, ListParams, Listed};
use axum::Json;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use hookflow_shared::api::destinations::{
    Delivery, DeliveryAttempt, DeliveryAttempts, DeliveryStatus, LastAttempt, ReplayDeliveries, Replayed,
};
use hookflow_shared::api::triggers::TRIGGER_Q_MAX;
use hookflow_shared::{CaptureId, DeliveryId, DestinationId, RunnerId, WebhookId};
use sqlx::types::Json as SqlJson;
use sqlx::{Postgres, QueryBuilder};
use uuid::Uuid;

/// Most deliveries one replay names.
const REPLAY_IDS_MAX: usize = 1_000;

const DELIVERY_COLUMNS: &str = "id, destination_id, capture_id, status, attempts, NULLIF(next_attempt_at, 'infinity') AS next_attempt_at, \
     last_attempt, created_at, delivered_at";

#[derive(Debug, sqlx::FromRow)]
struct DeliveryRow {
    id: DeliveryId,
    destination_id: DestinationId,
    capture_id: CaptureId,
    status: String,
    attempts: i32,
    /// `None`: waiting for its destination to be enabled.
    next_attempt_at: Option<DateTime<Utc>>,
    last_attempt: Option<SqlJson<LastAttempt>>,
    created_at: DateTime<Utc>,
    delivered_at: Option<DateTime<Utc>>,
}

impl From<DeliveryRow> for Delivery {
    fn from(row: DeliveryRow) -> Self {
        let status = DeliveryStatus::parse(&row.status).unwrap_or(DeliveryStatus::Pending);
        Delivery {
            id: row.id,
            destination_id: row.destination_id,
            request_id: row.capture_id,
            status,
            attempts: u32::try_from(row.attempts).unwrap_or_default(),
            next_attempt_at: row.next_attempt_at.filter(|_| status == DeliveryStatus::Pending).map(Into::into),
            last_attempt: row.last_attempt.map(|a| a.0),
            created_at: row.created_at.into(),
            delivered_at: row.delivered_at.map(Into::into),
        }
    }
}

/// The query of a delivery list.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeliveryParams {
    /// Only deliveries in this status: `pending`, `delivered`, `dead` or `cancelled`.
    #[param(value_type = Option<DeliveryStatus>)]
    pub status: Option<String>,
    /// Items per page: default 50, values above 100 are clamped to 100.
    #[param(minimum = 1, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// List a destination's deliveries, newest first.
#[utoipa::path(get, path = "/webhooks/{id}/destinations/{destination_id}/deliveries",
    params(("id" = Uuid, Path), ("destination_id" = Uuid, Path), DeliveryParams),
    responses((status = 200, body = Page<Delivery>)))]
pub async fn list_deliveries(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    ApiPath((webhook_id, id)): ApiPath<(WebhookId, DestinationId)>,
    ApiQuery(params): ApiQuery<DeliveryParams>,
) -> Listed<Delivery> {
    let status =
        match params.status.as_deref() {
            None => None,
            Some(s) => Some(DeliveryStatus::parse(s).ok_or_else(|| {
                ApiError::invalid("invalid field `status`: one of pending, delivered, dead, cancelled")
            })?),
        };
    let mut conn = app.pool.acquire().await?;
    fetch(&mut conn, caller.org_id, webhook_id, id).await?;
    let page = ListParams { limit: params.limit, cursor: params.cursor }.page::<(DateTime<Utc>, Uuid)>()?;
    let rows: Vec<DeliveryRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {DELIVERY_COLUMNS} FROM deliveries
         WHERE destination_id = $1 AND organization_id = $2 AND ($3::text IS NULL OR status = $3)
           AND matched IS DISTINCT FROM false
           AND ($4::timestamptz IS NULL OR (created_at, id) < ($4, $5))
         ORDER BY created_at DESC, id DESC LIMIT $6"
    )))
    .bind(id)
    .bind(caller.org_id)
    .bind(status.map(DeliveryStatus::as_str))
    .bind(page.after.map(|a| a.0))
    .bind(page.after.map(|a| a.1))
    .bind(page.fetch_limit())
    .fetch_all(&mut *conn)
    .await?;
    let items: Vec<Delivery> = rows.into_iter().map(Delivery::from).collect();
    Ok(Json(pagination::finish(items, &page, |d| (d.created_at.0, Uuid::from(d.id)))?))
}

async fn fetch_delivery(
    conn: &mut sqlx::PgConnection,
    org_id: hookflow_shared::OrgId,
    destination_id: DestinationId,
    id: DeliveryId,
) -> ApiResult<DeliveryRow> {
    let row: Option<DeliveryRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE organization_id = $1 AND destination_id = $2 AND id = $3
             AND matched IS DISTINCT FROM false"
    )))
    .bind(org_id)
    .bind(destination_id)
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.ok_or_else(|| ApiError::not_found("delivery"))
}

/// Read a delivery.
#[utoipa::path(get, path = "/webhooks/{id}/destinations/{destination_id}/deliveries/{delivery_id}",
    params(("id" = Uuid, Path), ("destination_id" = Uuid, Path), ("delivery_id" = Uuid, Path)),
    responses((status = 200, body = Delivery)))]
pub async fn get_delivery(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    ApiPath((webhook_id, destination_id, id)): ApiPath<(WebhookId, DestinationId, DeliveryId)>,
) -> ApiResult<Json<Delivery>> {
    let mut conn = app.pool.acquire().await?;
    fetch(&mut conn, caller.org_id, webhook_id, destination_id).await?;
    Ok(Json(fetch_delivery(&mut conn, caller.org_id, destination_id, id).await?.into()))
}

#[derive(Debug, sqlx::FromRow)]
struct AttemptRow {
    attempt: i32,
    at: DateTime<Utc>,
    status_code: Option<i32>,
    error: Option<String>,
    duration_ms: i32,
    runner_id: Option<RunnerId>,
}

/// Every attempt of a delivery, first first.
#[utoipa::path(get, path = "/webhooks/{id}/destinations/{destination_id}/deliveries/{delivery_id}/attempts",
    params(("id" = Uuid, Path), ("destination_id" = Uuid, Path), ("delivery_id" = Uuid, Path)),
    responses((status = 200, body = DeliveryAttempts)))]
pub async fn list_attempts(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    ApiPath((webhook_id, destination_id, id)): ApiPath<(WebhookId, DestinationId, DeliveryId)>,
) -> ApiResult<Json<DeliveryAttempts>> {
    let mut conn = app.pool.acquire().await?;
    fetch(&mut conn, caller.org_id, webhook_id, destination_id).await?;
    fetch_delivery(&mut conn, caller.org_id, destination_id, id).await?;
    let rows: Vec<AttemptRow> = sqlx::query_as(
        "SELECT attempt, at, status_code, error, duration_ms, runner_id FROM delivery_attempts
         WHERE delivery_id = $1 ORDER BY attempt",
    )
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    let items = rows
        .into_iter()
        .map(|r| DeliveryAttempt {
            attempt: u32::try_from(r.attempt).unwrap_or_default(),
            at: r.at.into(),
            status_code: r.status_code.and_then(|s| u16::try_from(s).ok()),
            error: r.error,
            duration_ms: u64::try_from(r.duration_ms).unwrap_or_default(),
            runner_id: r.runner_id,
        })
        .collect();
    Ok(Json(DeliveryAttempts { items }))
}

/// Replay deliveries: `{"status": "dead"}` (all dead ones), `{"q": "..."}` (dead ones whose captures match) or
/// `{"delivery_ids": [..]}` (any but pending). Each becomes `pending` with its attempts kept and a fresh schedule.
#[utoipa::path(post, path = "/webhooks/{id}/destinations/{destination_id}/deliveries/replay",
    params(("id" = Uuid, Path), ("destination_id" = Uuid, Path)), request_body = ReplayDeliveries,
    responses((status = 202, body = Replayed)))]
pub async fn replay_deliveries(
    Ctx { app, caller }: Ctx<scope::WebhooksWrite>,
    ApiPath((webhook_id, id)): ApiPath<(WebhookId, DestinationId)>,
    ApiJson(body): ApiJson<ReplayDeliveries>,
) -> ApiResult<(StatusCode, Json<Replayed>)> {
    let given = [body.status.is_some(), body.q.is_some(), body.delivery_ids.is_some()];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(ApiError::invalid("give exactly one of `status`, `q` or `delivery_ids`"));
    }
    if body.status.is_some_and(|s| s != DeliveryStatus::Dead) {
        return Err(ApiError::invalid("invalid field `status`: only `dead` deliveries are replayed by status"));
    }
    if body.delivery_ids.as_ref().is_some_and(|ids| ids.len() > REPLAY_IDS_MAX) {
        return Err(ApiError::invalid(format!("invalid field `delivery_ids`: at most {REPLAY_IDS_MAX}")));
    }
    let conds = match &body.q {
        Some(q) if q.chars().count() > TRIGGER_Q_MAX => {
            return Err(ApiError::invalid(format!("invalid field `q`: at most {TRIGGER_Q_MAX} characters")));
        }
        Some(q) => {
            let conds =
                search::from_text(q).map_err(|e| ApiError::invalid(format!("invalid field `q`: {}", e.message)))?;
            search::check_conditions(&conds)
                .map_err(|e| ApiError::invalid(format!("invalid field `q`: {}", e.message)))?;
            conds
        }
        None => Vec::new(),
    };
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    fetch(&mut tx, caller.org_id, webhook_id, id).await?;
    let mut b = QueryBuilder::<Postgres>::new(
        "UPDATE deliveries d SET status = 'pending', round_start = d.attempts,
             next_attempt_at = CASE WHEN (SELECT enabled FROM destinations WHERE id = d.destination_id) THEN now()
                                    ELSE 'infinity'::timestamptz END,
             delivered_at = NULL
         WHERE d.destination_id = ",
    );
    b.push_bind(id).push(" AND d.organization_id = ").push_bind(caller.org_id);
    match &body.delivery_ids {
        Some(ids) => {
            b.push(" AND d.status <> 'pending' AND d.matched IS DISTINCT FROM false AND d.id = ANY(")
                .push_bind(ids.clone())
                .push(")");
        }
        None => {
            b.push(" AND d.status = 'dead'");
        }
    }
    if !conds.is_empty() {
        b.push(" AND EXISTS (SELECT 1 FROM captures WHERE organization_id = ")
            .push_bind(caller.org_id)
            .push(" AND id = d.capture_id");
        for cond in &conds {
            push_cond(&mut b, cond);
        }
        b.push(")");
    }
    let replayed = b.build().execute(&mut *tx).await?.rows_affected();
    if replayed > 0 {
        sqlx::query("SELECT pg_notify('hookflow_deliveries', '')").execute(&mut *tx).await?;
    }
    let details = serde_json::json!({"count": replayed});
    record(&mut tx, caller.org_id, caller.actor, "destination.replayed", id, details).await?;
    tx.commit().await?;
    Ok((StatusCode::ACCEPTED, Json(Replayed { replayed })))
}

use hookflow_shared::api::Page;
