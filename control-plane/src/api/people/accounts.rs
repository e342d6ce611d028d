//! The account a sign-up makes (at once, or when its mailed link is used): the user, the organization they own,
//! the membership, and the first session's answer.

use crate::api::admin::organization;
use crate::api::people::{store, tokens};
use crate::auth::Actor;
use crate::auth::sessions;
use crate::error::ApiResult;
use crate::state::AppState;
use axum::Json;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hookflow_shared::api::people::{OrganizationRole, SignedUp};
use hookflow_shared::{OrgId, Role, UserId};
use sqlx::PgConnection;

/// Makes `user_id` a member of `org_id` with `role`.
pub async fn add_membership(
    conn: &mut PgConnection,
    org_id: OrgId,
    user_id: UserId,
    role: Role,
) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, $3)")
        .bind(org_id)
        .bind(user_id)
        .bind(role.as_str())
        .execute(conn)
        .await
        .map(|_| ())
}

/// The account a sign-up makes: the user and the organization they own; (the user, the organization).
pub async fn create_account(
    conn: &mut PgConnection,
    email: &str,
    password_hash: &str,
    organization_name: &str,
) -> ApiResult<(UserId, hookflow_shared::api::admin::Organization)> {
    let user_id = store::create_user(conn, email, password_hash, false).await?;
    let org = organization::create(conn, organization_name, Actor::User(user_id)).await?;
    add_membership(conn, org.id, user_id, Role::Owner).await?;
    Ok((user_id, org))
}

/// Opens the new account's first session in `tx`, commits, and answers 201 with its tokens (the refresh token in
/// the cookie for the app).
pub async fn signed_up(
    app: &AppState,
    headers: &HeaderMap,
    mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
    user_id: UserId,
    email: String,
    org: hookflow_shared::api::admin::Organization,
) -> ApiResult<Response> {
    let session_ends = chrono::Utc::now() + app.settings.session_ttl;
    let (session_id, refresh) = sessions::open_session(&mut tx, user_id, session_ends).await?;
    tx.commit().await?;
    let (access_token, expires_at) = tokens::access_token(app, user_id, session_id).await?;
    let cookie = tokens::wants_cookie(headers);
    let body = SignedUp {
        user: hookflow_shared::api::people::User { id: user_id, email },
        organization: OrganizationRole { id: org.id, name: org.name, role: Role::Owner },
        access_token,
        refresh_token: (!cookie).then(|| refresh.clone()),
        expires_at: expires_at.into(),
    };
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    if cookie {
        response.headers_mut().insert(header::SET_COOKIE, tokens::refresh_cookie(app, &refresh, session_ends));
    }
    Ok(response)
}
