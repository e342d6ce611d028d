//! People: the built-in identity provider's sessions and passwords, sign-up, organizations made by people, the
//! organization's members and invitations (by one-time token), leaving, linking external identities, and the
//! throttles of the password endpoints. Authenticating their tokens is `auth`'s.

pub mod identities;
pub mod invitations;
pub mod leaving;
pub mod members;
pub mod membership;
pub mod passwords;
pub mod sessions;
pub mod signup;
pub mod store;
pub mod tokens;

use crate::state::AppState;
use utoipa_axum::router::OpenApiRouter;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(sessions::routes())
        .merge(signup::routes())
        .merge(members::routes())
        .merge(invitations::routes())
        .merge(identities::routes())
}
