//! What handlers take: `Ctx<S>`, the application and a caller holding scope `S` (handlers declare their scope in
//! their signature), and `Person`, the application and a signed-in person whatever the organization.

use crate::auth::identity::BearerIdentity;
use crate::auth::{Caller, bearer, bearer_token, password_change_required, scope};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;

/// A handler's context: the application state and the caller, who holds scope `S`. Handlers take it as
/// `Ctx { app, caller }: Ctx<scope::WebhooksRead>`, declaring their scope in their signature.
#[derive(Debug)]
pub struct Ctx<S = scope::Any> {
    pub app: AppState,
    pub caller: Caller<S>,
}

impl<S: scope::Required + Send> FromRequestParts<AppState> for Ctx<S> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let caller = Caller::from_request_parts(parts, state).await?;
        Ok(Self { app: state.clone(), caller })
    }
}

/// A signed-in person, whatever the organization: the Auth routes and `POST /organizations`. A session opened
/// with a one-time password passes; handlers that need it changed call [`Person::require_password_changed`].
#[derive(Debug)]
pub struct Person {
    pub app: AppState,
    pub identity: BearerIdentity,
}

impl FromRequestParts<AppState> for Person {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let token = bearer_token(parts).ok_or_else(ApiError::unauthorized)?;
        let identity = bearer::authenticate(&state.auth, token).await?;
        state.allowances.key_request(identity.user_id.into())?;
        Ok(Self { app: state.clone(), identity })
    }
}

impl Person {
    pub fn require_password_changed(&self) -> ApiResult<()> {
        if self.identity.password_change_required { Err(password_change_required()) } else { Ok(()) }
    }
}
