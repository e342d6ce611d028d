//! Organization resources: secrets (write-only, encrypted at rest, with the hosts they may go to) and plain
//! variables. Names are what templates use: `{{secret.NAME}}` and `{{NAME}}`.

pub mod fields;
pub mod secrets;
pub mod variables;

use crate::state::AppState;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(secrets::list_secrets))
        .routes(routes!(secrets::put_secret, secrets::delete_secret))
        .routes(routes!(variables::list_variables))
        .routes(routes!(variables::put_variable, variables::delete_variable))
}
