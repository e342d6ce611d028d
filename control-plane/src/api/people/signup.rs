//! New organizations made by people: `POST /organizations` (the signed-in caller becomes its owner) and
//! `POST /auth/signup` (a new user with a new organization; off unless the operator enabled it).

pub use crate::api::people::accounts::add_membership;

use crate::api::admin::organization;
use crate::api::context::Person;
use crate::api::people::accounts::{create_account, signed_up};
use crate::api::people::{confirmations, passwords, store};
use crate::auth::Actor;
use crate::error::{ApiError, ApiResult, Created};
use crate::extract::ApiJson;
use crate::http::client_address::{ClientAddress, budget_key};
use crate::signals::Invalidation;
use crate::state::AppState;
use crate::validate::field;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use hookflow_shared::api::fields::Name;
use hookflow_shared::api::people::{CreateOrganization, OrganizationRole, SignedUp, Signup, SignupPending};
use hookflow_shared::{Role, UserId};
use sqlx::PgConnection;

/// Create an organization; the caller becomes its owner (people only, not API keys). A person makes at most
/// `--max-organizations-per-person` (403 `quota_exceeded` past it). Only the maker's memberships are announced
/// as changed: nobody else's cached keys or sessions are touched.
#[utoipa::path(post, path = "/organizations", request_body = CreateOrganization,
    security(("bearer" = [])),
    responses((status = 201, body = OrganizationRole),
        (status = 403, description = "`quota_exceeded`: the caller made as many organizations as one person may")))]
async fn create_organization(person: Person, ApiJson(body): ApiJson<CreateOrganization>) -> Created<OrganizationRole> {
    person.require_password_changed()?;
    // The name stays plain text in the body: a password to change answers first.
    let name = field::<Name>("name", body.name)?;
    let user_id = person.identity.user_id;
    let mut tx = crate::db::begin::begin(&person.app.pool).await?;
    check_organization_quota(&mut tx, user_id, person.app.settings.max_organizations_per_person).await?;
    let org = organization::create(&mut tx, name.as_str(), Actor::User(user_id)).await?;
    add_membership(&mut tx, org.id, user_id, Role::Owner).await?;
    Invalidation::Joined(user_id).announce(&mut tx).await?;
    tx.commit().await?;
    person.app.invalidate(Invalidation::Joined(user_id));
    Ok((StatusCode::CREATED, Json(OrganizationRole { id: org.id, name: org.name, role: Role::Owner })))
}

/// Refuses a person who made `max` organizations already. Their user row stays locked until the transaction
/// ends, so concurrent creations are counted one after the other.
async fn check_organization_quota(conn: &mut PgConnection, user_id: UserId, max: u32) -> ApiResult<()> {
    // The lock first, the count in a statement of its own: its snapshot is taken once the lock is held, so it
    // sees what a concurrent creation committed.
    sqlx::query("SELECT 1 FROM users WHERE id = $1 FOR UPDATE")
        .bind(user_id)
        .fetch_optional(&mut *conn)
        .await?
        .ok_or_else(ApiError::unauthorized)?;
    let made: i64 = sqlx::query_scalar("SELECT count(*) FROM organizations WHERE created_by_user = $1")
        .bind(user_id)
        .fetch_one(&mut *conn)
        .await?;
    if made >= i64::from(max) {
        return Err(ApiError::new(
            hookflow_shared::ErrorCode::QuotaExceeded,
            format!(
                "you have made {made} organizations, the most one person may on this server \
                 (--max-organizations-per-person); ask an operator, or an owner to invite you"
            ),
        ));
    }
    Ok(())
}

/// Sign up: a new user and a new organization they own, signed in (only when the operator enabled it). With SMTP
/// configured, the email is confirmed first: the answer is 202 `{"status": "confirmation_sent"}` whether or not
/// the email has an account, and the mailed link's token makes the account (`POST /auth/signup/confirm`).
#[utoipa::path(post, operation_id = "sign_up", path = "/auth/signup", request_body = Signup, security(()),
    responses((status = 201, body = SignedUp, description = "Signed up (no SMTP configured)"),
        (status = 202, body = SignupPending, description = "SMTP configured: a confirmation link was mailed (the same \
            answer for a registered email, whose owner is told someone tried to sign up with it)"),
        (status = 404, description = "Signing up is not enabled"),
        (status = 409, description = "A user with this email exists (no SMTP configured)"),
        (status = 429, description = "Too many sign-ups from this address")))]
async fn signup(
    State(app): State<AppState>,
    ClientAddress(client): ClientAddress,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    if !app.settings.signup {
        return Err(ApiError::not_found("signing up (not enabled on this server)"));
    }
    app.sign_ins.sign_up(client)?;
    let body: Signup = crate::extract::parse_json(&body)?;
    let email = body.email.as_str().to_owned();
    passwords::check_new(&body.password).map_err(|e| ApiError::invalid(format!("invalid field `password`: {e}")))?;
    let hash = passwords::hash(body.password).await.map_err(ApiError::internal_because)?;
    if let Some(mailer) = app.mailer.clone() {
        let (organization_name, requester) = (body.organization_name.as_str().to_owned(), budget_key(client));
        return confirmations::pending(app, mailer, email, hash, organization_name, requester);
    }
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    if store::find_by_email(&mut tx, &email).await?.is_some() {
        return Err(ApiError::conflict("a user with this email exists; sign in instead"));
    }
    let (user_id, org) = create_account(&mut tx, &email, &hash, body.organization_name.as_str()).await?;
    signed_up(&app, &headers, tx, user_id, email, org).await
}

pub fn routes() -> utoipa_axum::router::OpenApiRouter<AppState> {
    use utoipa_axum::routes;
    utoipa_axum::router::OpenApiRouter::new().routes(routes!(create_organization)).routes(routes!(signup))
}
