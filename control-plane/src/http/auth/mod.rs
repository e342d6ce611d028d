//! Authentication and tenancy. The `Caller<S>` extractor checks, in the contract's order: credentials (401),
//! `X-Organization-Id` (400), that the key belongs to that organization (403 `organization_mismatch`) and that it
//! carries the scope `S` (403 `insufficient_scope`). Handlers declare their scope in their signature.

pub mod key_cache;

use crate::http::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use chrono::{DateTime, Utc};
use hookflow_shared::token::{self, TokenKind};
use hookflow_shared::wire::header;
use hookflow_shared::{ErrorCode, Scope, ScopeSet};
use key_cache::{Cached, KeyIdentity};
use std::marker::PhantomData;
use uuid::Uuid;

/// Who is acting, as written to the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    Key(Uuid),
    Operator,
}

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Actor::Key(id) => write!(f, "key:{id}"),
            Actor::Operator => f.write_str("operator"),
        }
    }
}

/// An authenticated caller acting in one organization, holding scope `S`.
#[derive(Debug)]
pub struct Caller<S = scope::Any> {
    pub org_id: Uuid,
    pub scopes: ScopeSet,
    pub actor: Actor,
    /// When the caller's credential stops working: what it makes never outlives it.
    pub expires_at: Option<DateTime<Utc>>,
    _scope: PhantomData<S>,
}

/// Marker types naming the scope an operation needs: `Caller<scope::KeysWrite>`.
pub mod scope {
    use hookflow_shared::Scope;

    pub trait Required {
        const SCOPE: Option<Scope>;
    }

    /// Any valid credential will do.
    #[derive(Debug)]
    pub struct Any;
    impl Required for Any {
        const SCOPE: Option<Scope> = None;
    }

    macro_rules! markers {
        ($($name:ident),*) => {$(
            #[derive(Debug)]
            pub struct $name;
            impl Required for $name {
                const SCOPE: Option<Scope> = Some(Scope::$name);
            }
        )*};
    }

    markers!(
        WebhooksRead,
        WebhooksWrite,
        FlowsRead,
        FlowsWrite,
        FlowsExecute,
        CollectionsRead,
        CollectionsWrite,
        ResourcesRead,
        ResourcesWrite,
        KeysRead,
        KeysWrite,
        OrganizationRead,
        OrganizationWrite,
        RunnersRead,
        RunnersWrite,
        RunnerComplete
    );
}

impl<S: scope::Required + Send> FromRequestParts<AppState> for Caller<S> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let key = parts.headers.get(header::API_KEY).and_then(|v| v.to_str().ok()).map(str::trim);
        let Some(key) = key else {
            // Browser sessions (Authorization: Bearer) are not accepted yet: the same 401 as any bad credential.
            return Err(ApiError::unauthorized());
        };
        let identity = authenticate_key(state, key).await?;
        state.allowances.key_request(identity.key_id)?;
        let org_id = organization_header(parts)?;
        if org_id != identity.org_id {
            return Err(ApiError::new(
                ErrorCode::OrganizationMismatch,
                "the API key does not belong to the organization in X-Organization-Id",
            ));
        }
        if let Some(required) = S::SCOPE
            && !identity.scopes.grants(required)
        {
            return Err(ApiError::insufficient_scope(required));
        }
        Ok(Caller {
            org_id,
            scopes: identity.scopes,
            actor: Actor::Key(identity.key_id),
            expires_at: identity.expires_at,
            _scope: PhantomData,
        })
    }
}

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

impl<S> Caller<S> {
    /// The credential allowances are counted against (streams held open, requests per second).
    pub fn credential_id(&self) -> Uuid {
        match self.actor {
            Actor::Key(id) => id,
            Actor::Operator => Uuid::nil(),
        }
    }

    /// Checks a second scope some operations need in addition to the one in the signature.
    pub fn require(&self, scope: Scope) -> ApiResult<()> {
        if self.scopes.grants(scope) { Ok(()) } else { Err(ApiError::insufficient_scope(scope)) }
    }
}

/// Reads `X-Organization-Id`; missing or not a UUID answers 400 `organization_required`.
pub fn organization_header(parts: &Parts) -> ApiResult<Uuid> {
    parts
        .headers
        .get(header::ORGANIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| Uuid::parse_str(v.trim()).ok())
        .ok_or_else(|| {
            ApiError::new(ErrorCode::OrganizationRequired, "send X-Organization-Id with your organization's id")
        })
}

/// Resolves an API key: the checksum is verified first (a typo never reaches the database), then the cache or
/// the database; unknown, deleted and expired keys all answer the same 401.
async fn authenticate_key(state: &AppState, key: &str) -> ApiResult<KeyIdentity> {
    TokenKind::ApiKey.check(key).map_err(|_| ApiError::unauthorized())?;
    let hash = token::hash(key);
    let identity = match state.keys.get(&hash) {
        Cached::Hit { identity, record_use } => {
            if record_use {
                record_last_use(state, identity.key_id);
            }
            identity
        }
        Cached::Miss => {
            let identity = lookup_key(state, &hash).await?.ok_or_else(ApiError::unauthorized)?;
            record_last_use(state, identity.key_id);
            state.keys.insert(hash, identity.clone());
            identity
        }
    };
    if identity.is_expired() {
        return Err(ApiError::unauthorized());
    }
    Ok(identity)
}

async fn lookup_key(state: &AppState, hash: &[u8]) -> ApiResult<Option<KeyIdentity>> {
    type KeyRow = (Uuid, Uuid, Vec<String>, Option<DateTime<Utc>>);
    let row: Option<KeyRow> =
        sqlx::query_as("SELECT id, organization_id, scopes, expires_at FROM api_keys WHERE key_hash = $1")
            .bind(hash)
            .fetch_optional(&state.pool)
            .await?;
    // Scopes were validated when the key was made; a name dropped from the catalog since simply grants nothing.
    Ok(row.map(|(key_id, org_id, scopes, expires_at)| KeyIdentity {
        key_id,
        org_id,
        scopes: scopes.iter().filter_map(|s| s.parse().ok()).collect(),
        expires_at,
    }))
}

/// Writes a key's last use, off the request's path (at most once a minute per key and replica).
fn record_last_use(state: &AppState, key_id: Uuid) {
    let pool = state.pool.clone();
    tokio::spawn(async move {
        let _ = sqlx::query(
            "UPDATE api_keys SET last_used_at = now()
             WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')",
        )
        .bind(key_id)
        .execute(&pool)
        .await;
    });
}
