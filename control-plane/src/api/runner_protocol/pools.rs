//! The scaler endpoint (issue #53): `GET /runner/pools` and `GET /runner/pools/{pool}`, each declared pool's
//! backlog, running work, runners and slots within the caller's organization (`crate::pools` counts them), for
//! KEDA's `metrics-api` trigger or anything else that polls JSON. A runner key (`runner:complete`) or a key that
//! reads runners (`runners:read`) may ask; since KEDA sends one header, an API key without `X-Organization-Id`
//! is taken to mean its own organization.

use crate::auth::{Caller, keys, scope};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiPath;
use crate::state::AppState;
use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::HeaderValue;
use axum::http::request::Parts;
use hookflow_shared::api::pools::{PoolList, PoolStatus};
use hookflow_shared::wire::{header, runner_route};
use hookflow_shared::{OrgId, Scope};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_pools)).routes(routes!(get_pool))
}

/// Who asks: an organization, through a key (or a person) holding `runner:complete` or `runners:read`.
#[derive(Debug, Clone, Copy)]
struct PoolReader {
    org_id: OrgId,
}

impl FromRequestParts<AppState> for PoolReader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let key = parts.headers.get(header::API_KEY).and_then(|v| v.to_str().ok()).map(str::trim);
        if parts.headers.get(header::ORGANIZATION).is_none()
            && crate::auth::bearer_token(parts).is_none()
            && let Some(key) = key
        {
            // The key's own organization, then the usual checks as if the caller had named it.
            let address = crate::auth::client_address(&state.auth, parts);
            let identity = keys::authenticate_key(&state.auth, key, address).await?;
            let org = HeaderValue::from_str(&identity.org_id.to_string()).map_err(ApiError::internal_because)?;
            parts.headers.insert(header::ORGANIZATION, org);
        }
        let caller = Box::pin(Caller::<scope::Any>::from_request_parts(parts, state)).await?;
        if !caller.scopes.grants(Scope::RunnerComplete) && !caller.scopes.grants(Scope::RunnersRead) {
            return Err(ApiError::new(
                hookflow_shared::ErrorCode::InsufficientScope,
                "this operation needs the scope `runner:complete` or `runners:read`",
            ));
        }
        Ok(Self { org_id: caller.org_id })
    }
}

async fn counted(app: &AppState, org_id: OrgId) -> ApiResult<Vec<PoolStatus>> {
    let online_within = app.settings.heartbeat_interval * 3;
    let mut conn = app.pool.acquire().await?;
    Ok(crate::pools::counts(&mut conn, Some(org_id), &app.settings.runner_pools, online_within).await?)
}

/// Every declared runner pool's numbers in the caller's organization, `default` first.
#[utoipa::path(get, operation_id = "list_runner_pools", path = runner_route::POOLS,
    responses((status = 200, body = PoolList)))]
async fn list_pools(State(app): State<AppState>, reader: PoolReader) -> ApiResult<Json<PoolList>> {
    Ok(Json(PoolList { items: counted(&app, reader.org_id).await? }))
}

/// One runner pool's numbers in the caller's organization (what an autoscaler polls).
#[utoipa::path(get, operation_id = "get_runner_pool", path = runner_route::POOL,
    params(("pool" = String, Path, description = "A pool's name, as declared with `--runner-pool`")),
    responses((status = 200, body = PoolStatus), (status = 404, description = "No pool of that name is declared")))]
async fn get_pool(
    State(app): State<AppState>,
    reader: PoolReader,
    ApiPath(pool): ApiPath<String>,
) -> ApiResult<Json<PoolStatus>> {
    let Some(declared) = app.settings.runner_pools.iter().find(|p| p.name == pool) else {
        return Err(ApiError::not_found("runner pool"));
    };
    let one = std::slice::from_ref(declared);
    let online_within = app.settings.heartbeat_interval * 3;
    let mut conn = app.pool.acquire().await?;
    let mut counted = crate::pools::counts(&mut conn, Some(reader.org_id), one, online_within).await?;
    counted.pop().map(Json).ok_or_else(|| ApiError::internal_because("a pool counted nothing"))
}
