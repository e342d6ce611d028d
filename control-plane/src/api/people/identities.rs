//! Linking an external identity to an account: only that account's signed-in person does it
//! (`POST /auth/identities` with the external provider's access token), so an identity never attaches itself to an
//! account by its email, the first-start owner's included. The issuer's email domains, when the operator named
//! some, apply.

use crate::api::admin::audit::{self, AuditEvent};
use crate::api::context::Person;
use crate::auth::Actor;
use crate::auth::bearer::{self, Signer};
use crate::auth::users::{link_identity, memberships};
use crate::error::{ApiError, Created};
use crate::extract::ApiJson;
use crate::signals::Invalidation;
use crate::state::AppState;
use axum::Json;
use axum::http::StatusCode;
use hookflow_shared::api::people::{LinkIdentity, LinkedIdentity};

/// Link an external provider's identity to the signed-in account: send one of that provider's access tokens.
/// That identity's tokens then speak for this account.
#[utoipa::path(post, operation_id = "link_identity", path = "/auth/identities", request_body = LinkIdentity,
    security(("bearer" = [])),
    responses((status = 201, body = LinkedIdentity),
        (status = 400, description = "Not a valid token of a configured provider, or outside its email domains"),
        (status = 409, description = "The identity is linked to another account")))]
async fn link(person: Person, ApiJson(body): ApiJson<LinkIdentity>) -> Created<LinkedIdentity> {
    person.require_password_changed()?;
    let (app, user_id) = (&person.app, person.identity.user_id);
    let refused = |_| ApiError::invalid("invalid field `token`: not a valid access token of a configured provider");
    let signer = bearer::authenticate_signer(&app.auth, &body.token).await.map_err(refused)?;
    let unlinked = match signer {
        Signer::Unlinked(unlinked) => unlinked,
        Signer::Known(identity) if identity.external_token.is_none() => {
            return Err(ApiError::invalid("invalid field `token`: give an external provider's token"));
        }
        Signer::Known(_) => return Err(ApiError::conflict("this identity is linked to an account already")),
    };
    unlinked.check_domain(&body.token).await?;
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    if !link_identity(&mut tx, &unlinked.issuer, &unlinked.subject, user_id).await? {
        return Err(ApiError::conflict("this identity is linked to an account already"));
    }
    for (org_id, _) in memberships(&mut tx, user_id).await? {
        let details = serde_json::json!({ "issuer": unlinked.issuer });
        let event = AuditEvent {
            org_id,
            actor: Actor::User(user_id),
            action: "user.identity_linked",
            target: user_id.to_string(),
            details,
        };
        audit::record(&mut tx, event).await?;
    }
    Invalidation::User(user_id).announce(&mut tx).await?;
    tx.commit().await?;
    app.invalidate(Invalidation::User(user_id));
    tracing::info!(issuer = %unlinked.issuer, user = %user_id, "external identity linked by its account's person");
    Ok((StatusCode::CREATED, Json(LinkedIdentity { issuer: unlinked.issuer, subject: unlinked.subject })))
}

pub fn routes() -> utoipa_axum::router::OpenApiRouter<AppState> {
    use utoipa_axum::routes;
    utoipa_axum::router::OpenApiRouter::new().routes(routes!(link))
}
