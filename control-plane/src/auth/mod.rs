//! Authentication and tenancy. The `Caller<S>` extractor checks, in the contract's order: credentials (401: an
//! API key, or a person's bearer token), `X-Organization-Id` (400), that the key belongs to that organization or
//! the person is a member of it (403 `organization_mismatch`) and that the key or the person's role carries the
//! scope `S` (403 `insufficient_scope`). Handlers declare their scope in their signature. It reads the component
//! `Auth` (`component`), from any state that gives one (`FromRef`).

pub mod bearer;
pub mod component;
pub mod external;
pub mod external_tokens;
pub mod failures;
pub mod identity;
pub mod key_cache;
pub mod keys;
pub mod people_cache;
pub mod sessions;
pub mod signing;
pub mod throttle;
pub mod users;

use crate::error::{ApiError, ApiResult};
use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use chrono::{DateTime, Utc};
use component::Auth;
use hookflow_shared::wire::header;
use hookflow_shared::{ApiKeyId, ErrorCode, OrgId, Role, ScheduleId, Scope, ScopeSet, UserId, WebhookId};
use identity::BearerIdentity;
use std::marker::PhantomData;
use std::sync::Arc;
use uuid::Uuid;

/// Who is acting, as written to the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    Key(ApiKeyId),
    User(UserId),
    /// Someone not signed in (a failed sign-in), by client address.
    Address(std::net::IpAddr),
    Operator,
    /// A capture of this endpoint, whose trigger the server acted on (a refused launch).
    Webhook(WebhookId),
    /// A schedule the server acted on (a skipped occurrence).
    Schedule(ScheduleId),
}

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Actor::Key(id) => write!(f, "key:{id}"),
            Actor::User(id) => write!(f, "user:{id}"),
            Actor::Address(ip) => write!(f, "address:{ip}"),
            Actor::Operator => f.write_str("operator"),
            Actor::Webhook(id) => write!(f, "webhook:{id}"),
            Actor::Schedule(id) => write!(f, "schedule:{id}"),
        }
    }
}

/// An authenticated caller acting in one organization, holding scope `S`.
#[derive(Debug)]
pub struct Caller<S = scope::Any> {
    pub org_id: OrgId,
    pub scopes: ScopeSet,
    pub actor: Actor,
    /// When the caller's credential stops working: what it makes never outlives it.
    pub expires_at: Option<DateTime<Utc>>,
    /// The scopes a key this caller makes may hold: a key's own scopes, or a person's role's key scopes (owners
    /// and admins may make runner keys without acting as a runner themselves).
    pub grantable: ScopeSet,
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

impl<S: scope::Required + Send, A: Send + Sync> FromRequestParts<A> for Caller<S>
where
    Arc<Auth>: FromRef<A>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &A) -> Result<Self, Self::Rejection> {
        let auth = Arc::<Auth>::from_ref(state);
        if let Some(token) = bearer_token(parts) {
            let person = bearer::authenticate(&auth, token).await?;
            let user_id = person.user_id;
            let caller = Self::person(parts, &auth, person).await?;
            // Only a request that passed every check proves its connection: a 429 or 403 proves nothing.
            crate::http::listener::prove(&parts.extensions, user_id.into());
            return Ok(caller);
        }
        let key = parts.headers.get(header::API_KEY).and_then(|v| v.to_str().ok()).map(str::trim);
        let identity =
            keys::authenticate_key(&auth, key.ok_or_else(ApiError::unauthorized)?, client_address(&auth, parts))
                .await?;
        auth.allowances.key_request(identity.key_id.into())?;
        let org_id = organization_header(parts)?;
        if org_id != identity.org_id {
            return Err(ApiError::new(
                ErrorCode::OrganizationMismatch,
                "the API key does not belong to the organization in X-Organization-Id",
            ));
        }
        let grantable = identity.scopes.clone();
        let key_id = identity.key_id;
        let caller = Self::holding(org_id, identity.scopes, grantable, Actor::Key(key_id), identity.expires_at)?;
        crate::http::listener::prove(&parts.extensions, key_id.into());
        Ok(caller)
    }
}

impl<S: scope::Required> Caller<S> {
    /// A caller that holds `scopes`, if they grant `S`.
    fn holding(
        org_id: OrgId,
        scopes: ScopeSet,
        grantable: ScopeSet,
        actor: Actor,
        expires_at: Option<DateTime<Utc>>,
    ) -> ApiResult<Self> {
        if let Some(required) = S::SCOPE
            && !scopes.grants(required)
        {
            return Err(ApiError::insufficient_scope(required));
        }
        Ok(Caller { org_id, scopes, actor, expires_at, grantable, _scope: PhantomData })
    }

    /// A person acting in the organization of `X-Organization-Id`, with the scopes of their role there.
    async fn person(parts: &Parts, auth: &Auth, person: BearerIdentity) -> ApiResult<Self> {
        auth.allowances.key_request(person.user_id.into())?;
        if person.password_change_required {
            return Err(password_change_required());
        }
        let org_id = organization_header(parts)?;
        let role = role_in(auth, person.user_id, org_id).await?.ok_or_else(|| {
            ApiError::new(
                ErrorCode::OrganizationMismatch,
                "you are not a member of the organization in X-Organization-Id",
            )
        })?;
        Self::holding(org_id, role.scopes(), role.key_scopes(), Actor::User(person.user_id), None)
    }
}

/// The 403 of a session opened with a one-time password, for anything but changing it.
pub fn password_change_required() -> ApiError {
    ApiError::new(
        ErrorCode::PasswordChangeRequired,
        "change your one-time password first (PUT /auth/password); nothing else works until then",
    )
}

/// The `Authorization: Bearer` token, if the request carries one.
pub fn bearer_token(parts: &Parts) -> Option<&str> {
    bearer_in(&parts.headers)
}

/// The `Authorization: Bearer` token of these headers, if any.
pub fn bearer_in(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// A person's role in an organization (memberships are cached, and dropped when they change).
pub async fn role_in(auth: &Auth, user_id: UserId, org_id: OrgId) -> ApiResult<Option<Role>> {
    let memberships = match auth.people.memberships(user_id) {
        Some(known) => known,
        None => {
            let mut conn = auth.pool.acquire().await?;
            let found = users::memberships(&mut conn, user_id).await?;
            auth.people.store_memberships(user_id, found.clone());
            found
        }
    };
    Ok(memberships.into_iter().find(|(org, _)| *org == org_id).map(|(_, role)| role))
}

impl<S> Caller<S> {
    /// The credential allowances are counted against (streams held open, requests per second).
    pub fn credential_id(&self) -> Uuid {
        match self.actor {
            Actor::Key(id) => id.into(),
            Actor::User(id) => id.into(),
            Actor::Address(_) | Actor::Operator | Actor::Webhook(_) | Actor::Schedule(_) => Uuid::nil(),
        }
    }

    /// Checks a second scope some operations need in addition to the one in the signature.
    pub fn require(&self, scope: Scope) -> ApiResult<()> {
        if self.scopes.grants(scope) { Ok(()) } else { Err(ApiError::insufficient_scope(scope)) }
    }
}

/// The client's address, as the listener saw it (none when the router is called without one).
pub fn client_address(auth: &Auth, parts: &Parts) -> Option<std::net::IpAddr> {
    let peer = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|info| info.0.ip())?;
    Some(auth.trusted_proxies.client(peer, &parts.headers))
}

/// Reads `X-Organization-Id`; missing or not a UUID answers 400 `organization_required`.
pub fn organization_header(parts: &Parts) -> ApiResult<OrgId> {
    parts
        .headers
        .get(header::ORGANIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| {
            ApiError::new(ErrorCode::OrganizationRequired, "send X-Organization-Id with your organization's id")
        })
}
