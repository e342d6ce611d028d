//! `GET /permissions`: the closed scope catalog and the presets offered when creating keys.

use crate::auth::{Caller, scope};
use crate::state::AppState;
use axum::Json;
use hookflow_shared::Scope;
use hookflow_shared::api::admin::{Permissions, PresetInfo, ScopeInfo};
use hookflow_shared::scope::Preset;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_permissions))
}

/// The catalog every key's scopes come from.
pub fn catalog() -> Permissions {
    Permissions {
        scopes: Scope::ALL.iter().map(|s| ScopeInfo { scope: *s, description: s.description().to_owned() }).collect(),
        presets: Preset::ALL
            .iter()
            .map(|p| PresetInfo {
                name: p.name().to_owned(),
                scopes: p.scopes().iter().collect(),
                description: p.description().to_owned(),
            })
            .collect(),
    }
}

/// List every scope and the key presets.
#[utoipa::path(get, path = "/permissions", responses((status = 200, body = Permissions)))]
async fn get_permissions(_caller: Caller<scope::Any>) -> Json<Permissions> {
    Json(catalog())
}
