//! The organization: create (operator and bootstrap), read and change its name and defaults, and its audit log.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::context::Ctx;
use crate::auth::{Actor, scope};
use crate::db::update::Update;
use crate::error::{ApiError, ApiResult, to_json};
use crate::extract::ApiJson;
use crate::pagination::{self, ListParams, Listed};
use crate::signals::Invalidation;
use crate::state::AppState;
use axum::Json;
use chrono::{DateTime, Utc};
use hookflow_shared::OrgId;
use hookflow_shared::api::admin::{AuditEntry, Organization, Retention, UpdateOrganization};
use hookflow_shared::api::{Page, Patch};
use sqlx::PgConnection;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

/// The largest body limit an endpoint may have: 10 MiB.
pub const MAX_BODY_BYTES_LIMIT: i64 = 10 * 1024 * 1024;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_organization, update_organization)).routes(routes!(list_audit_log))
}

#[derive(sqlx::FromRow)]
struct OrgRow {
    id: OrgId,
    name: String,
    default_max_age_days: Option<i32>,
    default_max_requests: Option<i64>,
    default_max_body_bytes: i64,
    capture_rate_limit_per_s: i32,
    private_network: bool,
    created_at: DateTime<Utc>,
}

impl From<OrgRow> for Organization {
    fn from(row: OrgRow) -> Self {
        Organization {
            id: row.id,
            name: row.name,
            default_retention: Retention {
                max_age_days: row.default_max_age_days,
                max_requests: row.default_max_requests,
            },
            default_max_body_bytes: row.default_max_body_bytes,
            capture_rate_limit_per_s: row.capture_rate_limit_per_s,
            private_network: row.private_network,
            created_at: row.created_at.into(),
        }
    }
}

const ORG_COLUMNS: &str = "id, name, default_max_age_days, default_max_requests, default_max_body_bytes, \
                           capture_rate_limit_per_s, private_network, created_at";

/// Creates an organization with default settings; a person who makes one is remembered as its maker.
pub async fn create(conn: &mut PgConnection, name: &str, actor: Actor) -> Result<Organization, sqlx::Error> {
    let id = OrgId::now_v7();
    let row: OrgRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO organizations (id, name, created_by_user) VALUES ($1, $2, $3) RETURNING {ORG_COLUMNS}"
    )))
    .bind(id)
    .bind(name)
    .bind(match actor {
        Actor::User(user_id) => Some(user_id),
        Actor::Key(_) | Actor::Address(_) | Actor::Operator | Actor::Webhook(_) | Actor::Schedule(_) => None,
    })
    .fetch_one(&mut *conn)
    .await?;
    audit::record(
        conn,
        AuditEvent {
            org_id: id,
            actor,
            action: "organization.created",
            target: id.to_string(),
            details: serde_json::json!({"name": name}),
        },
    )
    .await?;
    Ok(row.into())
}

/// Puts an organization on the private-network allow-list, or takes it off (operator).
pub async fn set_private_network(conn: &mut PgConnection, org_id: OrgId, allowed: bool) -> Result<bool, sqlx::Error> {
    let found = sqlx::query("UPDATE organizations SET private_network = $2 WHERE id = $1")
        .bind(org_id)
        .bind(allowed)
        .execute(&mut *conn)
        .await?;
    if found.rows_affected() == 0 {
        return Ok(false);
    }
    let event = AuditEvent {
        org_id,
        actor: Actor::Operator,
        action: "organization.private_network",
        target: org_id.to_string(),
        details: serde_json::json!({"allowed": allowed}),
    };
    audit::record(conn, event).await?;
    Ok(true)
}

/// What an operator may set of an organization's retention (`hookflow-server orgs limits`): for each, absent
/// keeps it, `Some(None)` clears it (the server's default applies).
#[derive(Debug, Clone, Copy, Default)]
pub struct RetentionLimits {
    pub execution_retention_days: Option<Option<u32>>,
    pub audit_retention_days: Option<Option<u32>>,
}

/// Sets what `limits` names of the organization's retention, audited (`organization.limits`, as
/// `limits::set`); answers the values now in force (`None`: the server's default), or `None` when there is no such
/// organization.
pub async fn set_retention(
    conn: &mut PgConnection,
    org_id: OrgId,
    limits: RetentionLimits,
) -> Result<Option<(Option<i32>, Option<i32>)>, sqlx::Error> {
    let limits = crate::api::admin::limits::OrgLimits {
        execution_retention_days: limits.execution_retention_days,
        audit_retention_days: limits.audit_retention_days,
        ..Default::default()
    };
    let now = crate::api::admin::limits::set(conn, org_id, limits).await?;
    Ok(now.map(|now| (now.execution_retention_days, now.audit_retention_days)))
}

/// All organizations, oldest first (operator listing).
pub async fn list_all(conn: &mut PgConnection) -> Result<Vec<Organization>, sqlx::Error> {
    let rows: Vec<OrgRow> =
        sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {ORG_COLUMNS} FROM organizations ORDER BY id")))
            .fetch_all(conn)
            .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

async fn fetch(conn: &mut PgConnection, org_id: OrgId) -> ApiResult<Organization> {
    let row: Option<OrgRow> =
        sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {ORG_COLUMNS} FROM organizations WHERE id = $1")))
            .bind(org_id)
            .fetch_optional(conn)
            .await?;
    row.map(Into::into).ok_or_else(|| ApiError::not_found("organization"))
}

/// Read the caller's organization.
#[utoipa::path(get, path = "/organization", responses((status = 200, body = Organization)))]
async fn get_organization(Ctx { app, caller }: Ctx<scope::OrganizationRead>) -> ApiResult<Json<Organization>> {
    let mut conn = app.pool.acquire().await?;
    Ok(Json(fetch(&mut conn, caller.org_id).await?))
}

/// Checks what the body's types do not hold already (its name is one); answers the new name, trimmed.
fn validate_update(body: &UpdateOrganization, max_capture_rate: i32) -> ApiResult<Option<String>> {
    if let Some(retention) = body.default_retention {
        if retention.max_age_days.is_some_and(|d| d < 1) {
            return Err(ApiError::invalid("`default_retention.max_age_days` must be at least 1 (or null)"));
        }
        if retention.max_requests.is_some_and(|n| n < 1) {
            return Err(ApiError::invalid("`default_retention.max_requests` must be at least 1 (or null)"));
        }
    }
    if body.default_max_body_bytes.is_some_and(|n| !(1..=MAX_BODY_BYTES_LIMIT).contains(&n)) {
        return Err(ApiError::invalid("`default_max_body_bytes` must be between 1 and 10485760"));
    }
    if body.capture_rate_limit_per_s.is_some_and(|n| !(1..=max_capture_rate).contains(&n)) {
        return Err(ApiError::invalid(format!(
            "`capture_rate_limit_per_s` must be between 1 and {max_capture_rate} (this server's ceiling)"
        )));
    }
    Ok(body.name.as_ref().map(|n| n.as_str().to_owned()))
}

/// Change the organization's name, default retention or capture limits.
#[utoipa::path(patch, path = "/organization", request_body = UpdateOrganization,
    responses((status = 200, body = Organization)))]
async fn update_organization(
    Ctx { app, caller }: Ctx<scope::OrganizationWrite>,
    ApiJson(body): ApiJson<UpdateOrganization>,
) -> ApiResult<Json<Organization>> {
    let name = validate_update(&body, app.settings.max_capture_rate_per_s)?;
    let details = to_json(&body)?;
    // A retention replaces both of its defaults.
    let (max_age_days, max_requests) = match body.default_retention {
        Some(r) => (Patch::from_option(r.max_age_days), Patch::from_option(r.max_requests)),
        None => (Patch::Keep, Patch::Keep),
    };
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    Update::new("organizations")
        .set_some("name", name)
        .patch("default_max_age_days", max_age_days)
        .patch("default_max_requests", max_requests)
        .set_some("default_max_body_bytes", body.default_max_body_bytes)
        .set_some("capture_rate_limit_per_s", body.capture_rate_limit_per_s)
        .execute_organization(&mut tx, caller.org_id)
        .await?;
    audit::record(
        &mut tx,
        AuditEvent {
            org_id: caller.org_id,
            actor: caller.actor,
            action: "organization.updated",
            target: caller.org_id.to_string(),
            details,
        },
    )
    .await?;
    let org = fetch(&mut tx, caller.org_id).await?;
    // Capture limits of every endpoint of the organization change with it.
    Invalidation::Organization(caller.org_id).announce(&mut tx).await?;
    tx.commit().await?;
    app.invalidate(Invalidation::Organization(caller.org_id));
    Ok(Json(org))
}

/// An audit-log row: id, action, actor, target, details, time.
type AuditRow = (Uuid, String, String, String, serde_json::Value, DateTime<Utc>);

/// Security-relevant changes, newest first.
#[utoipa::path(get, path = "/audit-log", params(ListParams), responses((status = 200, body = Page<AuditEntry>)))]
async fn list_audit_log(Ctx { app, caller }: Ctx<scope::OrganizationRead>, params: ListParams) -> Listed<AuditEntry> {
    let sql = "SELECT id, action, actor, target, details, created_at FROM audit_log
         WHERE organization_id = $1 AND ($2::uuid IS NULL OR id < $2) ORDER BY id DESC LIMIT $3";
    let into = |(id, action, actor, target, details, created_at): AuditRow| AuditEntry {
        id,
        action,
        actor,
        target,
        details,
        created_at: created_at.into(),
    };
    let org = (caller.org_id, None);
    Ok(Json(pagination::keyset_page(&app.pool, sql.into(), org, &params, into, |e| e.id).await?))
}
