//! People: the built-in identity provider's sessions and passwords, sign-up (confirmed by mail when SMTP is
//! configured), password resets by mail, organizations made by people, the organization's members and invitations
//! (by one-time token, mailed when SMTP is configured), leaving, linking external identities, and the throttles of
//! the password endpoints. Authenticating their tokens is `auth`'s.

pub mod accounts;
pub mod confirmations;
pub mod identities;
pub mod invitations;
pub mod leaving;
pub mod mailed;
pub mod members;
pub mod membership;
pub mod passwords;
pub mod recovery;
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
        .merge(confirmations::routes())
        .merge(recovery::routes())
        .merge(members::routes())
        .merge(invitations::routes())
        .merge(identities::routes())
}
