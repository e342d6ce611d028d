//! `GET /app/config.json`: what the app needs to know before anyone signs in: the external OpenID providers it may
//! offer (those configured with a public `client_id`), whether sign-up is open and whether mail is on (password
//! resets; sign-ups confirmed by mail). Nothing secret.

use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde::Serialize;

#[derive(Debug, Serialize)]
struct AppConfig {
    providers: Vec<Provider>,
    signup: bool,
    mail: bool,
}

#[derive(Debug, Serialize)]
struct Provider {
    issuer: String,
    client_id: String,
    resource: Option<String>,
}

pub async fn serve(State(app): State<AppState>) -> impl IntoResponse {
    let providers = app
        .settings
        .issuers
        .iter()
        .filter_map(|issuer| {
            Some(Provider {
                issuer: issuer.issuer.clone(),
                client_id: issuer.app_client_id.clone()?,
                resource: issuer.app_resource.clone(),
            })
        })
        .collect();
    let config = AppConfig { providers, signup: app.settings.signup, mail: app.mailer.is_some() };
    ([(header::CACHE_CONTROL, "no-cache")], Json(config)).into_response()
}

/// The origins of the providers the app signs in with (the page fetches their discovery documents and tokens).
pub fn provider_origins(app: &AppState) -> Vec<String> {
    app.settings
        .issuers
        .iter()
        .filter(|issuer| issuer.app_client_id.is_some())
        .filter_map(|issuer| reqwest::Url::parse(&issuer.issuer).ok())
        .map(|url| url.origin().ascii_serialization())
        .collect()
}
