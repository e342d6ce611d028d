//! First start: against an empty database, create an organization, an admin key with every scope and a 30-day
//! expiry, and an owner user with a one-time password, exactly once even when several servers start together.

use crate::api::admin::{keys, organization};
use crate::api::people::{passwords, store};
use crate::auth::Actor;
use crate::auth::users::normalize_email;
use crate::db::storage::BoxError;
use hookflow_shared::api::admin::{CreatedApiKey, Organization};
use hookflow_shared::{Role, ScopeSet};
use sqlx::PgPool;

/// What the first start created; printed once by the server.
#[derive(Debug)]
pub struct Bootstrapped {
    pub organization: Organization,
    pub key: CreatedApiKey,
    pub owner_email: String,
    /// Shown once; the first sign-in must change it.
    pub owner_password: String,
}

/// Creates the first organization and admin key when there is no organization yet.
pub async fn first_start(pool: &PgPool, owner_email: &str) -> Result<Option<Bootstrapped>, BoxError> {
    let owner_email = normalize_email(owner_email).ok_or_else(|| format!("`{owner_email}` is not an email address"))?;
    let owner_password = passwords::one_time();
    let hash = passwords::hash(owner_password.clone()).await?;
    let mut tx = crate::db::begin::begin(&pool).await?;
    // Serialises concurrent first starts; released at commit.
    sqlx::query("SELECT pg_advisory_xact_lock(7460201)").execute(&mut *tx).await?;
    let any: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM organizations)").fetch_one(&mut *tx).await?;
    if any {
        return Ok(None);
    }
    let mut organization = organization::create(&mut tx, "Default organization", Actor::Operator).await?;
    // The first start's organization may test APIs on this machine and its networks through the embedded runner.
    organization::set_private_network(&mut tx, organization.id, true).await?;
    organization.private_network = true;
    let key = keys::create(
        &mut tx,
        keys::NewKey {
            org_id: organization.id,
            name: "admin (created at first start)".into(),
            scopes: ScopeSet::all(),
            expires_at: Some(chrono::Utc::now() + chrono::Duration::days(30)),
            actor: Actor::Operator,
        },
    )
    .await?;
    let owner = match store::find_by_email(&mut tx, &owner_email).await? {
        Some(existing) => existing.id,
        None => store::create_user(&mut tx, &owner_email, &hash, true).await?,
    };
    crate::api::people::signup::add_membership(&mut tx, organization.id, owner, Role::Owner).await?;
    tx.commit().await?;
    Ok(Some(Bootstrapped { organization, key, owner_email, owner_password }))
}

/// The lines printed once after a first start.
pub fn announcement(done: &Bootstrapped, public_url: &str) -> String {
    let expires = done.key.record.expires_at.map(|t| t.to_string()).unwrap_or_else(|| "never".into());
    format!(
        "\nhookflow: first start. Created an organization and an admin API key with every scope.\n\
         The key is shown this once; store it now (it expires {expires}).\n\n  \
         organization id: {org}\n  api key:         {key}\n\nTry it:\n  \
         curl -H \"{key_header}: {key}\" -H \"{org_header}: {org}\" {public_url}/permissions\n\n\
         Create narrower keys with POST /api-keys (or `hookflow-server keys create`), then delete this one.\n\n\
         Sign in to the app at {public_url}/ as the owner:\n  \
         email:              {owner_email}\n  one-time password:  {owner_password}\n\
         (shown this once; the first sign-in asks for a password of your own)\n",
        owner_email = done.owner_email,
        owner_password = done.owner_password,
        org = done.organization.id,
        key = done.key.key,
        key_header = hookflow_shared::wire::header::API_KEY,
        org_header = hookflow_shared::wire::header::ORGANIZATION,
    )
}
