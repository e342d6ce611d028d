//! Operator subcommands (`orgs create|list|limits|private-network`, `keys create|rotate-signing|rotate-master`,
//! `users create|reset-password`):
//! set up a multi-tenant installation from a shell, straight against the database, printing each secret once.

use crate::api::admin::{keys, limits, organization};
use crate::api::people::{passwords, store};
use crate::auth::Actor;
use crate::auth::sessions;
use crate::auth::users::normalize_email;
use crate::crypto::MasterKey;
use crate::db::data_dir::MasterKeys;
use crate::db::storage::BoxError;
use crate::server::config::{KeysCommand, OrgsCommand, UsersCommand};
use crate::signals::Invalidation;
use hookflow_shared::api::fields::Name;
use hookflow_shared::scope::Preset;
use hookflow_shared::{OrgId, ScopeSet};
use sqlx::PgPool;

pub async fn orgs(pool: &PgPool, command: OrgsCommand) -> Result<(), BoxError> {
    let mut conn = pool.acquire().await?;
    match command {
        OrgsCommand::Create { name } => {
            let name = Name::try_from(name).map_err(|refusal| refusal.for_field("name"))?;
            let org = organization::create(&mut conn, name.as_str(), Actor::Operator).await?;
            println!("created organization {:?}\n  organization id: {}", org.name, org.id);
            println!("next: hookflow-server keys create --org {} --preset ci --expires-in 30d", org.id);
        }
        OrgsCommand::List => {
            for org in organization::list_all(&mut conn).await? {
                let private = if org.private_network { "  (private network allowed)" } else { "" };
                println!("{}  {}{private}", org.id, org.name);
            }
        }
        OrgsCommand::Limits {
            org,
            execution_retention_days,
            audit_retention_days,
            stored_bytes,
            endpoints,
            flows,
            captures_per_day,
        } => {
            let limits = limits::OrgLimits {
                execution_retention_days: execution_retention_days.map(|d| d.0),
                audit_retention_days: audit_retention_days.map(|d| d.0),
                stored_bytes: stored_bytes.map(|n| n.0),
                endpoints: endpoints.map(|n| n.0),
                flows: flows.map(|n| n.0),
                captures_per_day: captures_per_day.map(|n| n.0),
            };
            if limits.is_empty() {
                return Err("name a limit to set: --execution-retention-days, --audit-retention-days, \
                            --stored-bytes, --endpoints, --flows or --captures-per-day"
                    .into());
            }
            let mut tx = crate::db::begin::begin(&pool).await?;
            let Some(now) = limits::set(&mut tx, org, limits).await? else {
                return Err(format!("no organization {org}; `hookflow-server orgs list` shows them").into());
            };
            tx.commit().await?;
            let days =
                |d: Option<i32>| d.map_or("as long as the server's default says".to_owned(), |d| format!("{d} days"));
            println!(
                "organization {org} keeps finished executions {} and audit entries {} (never less than the \
                 server's --min-audit-retention-days)",
                days(now.execution_retention_days),
                days(now.audit_retention_days)
            );
            let quota = |n: Option<i64>| n.map_or("the server's default".to_owned(), |n| n.to_string());
            println!(
                "quotas: stored_bytes {}, endpoints {}, flows {}, captures_per_day {} (servers apply a new limit \
                 within --quota-refresh-ms)",
                quota(now.stored_bytes),
                quota(now.endpoints),
                quota(now.flows),
                quota(now.captures_per_day)
            );
        }
        OrgsCommand::PrivateNetwork { org, allow, .. } => {
            let mut tx = crate::db::begin::begin(&pool).await?;
            if !organization::set_private_network(&mut tx, org, allow).await? {
                return Err(format!("no organization {org}; `hookflow-server orgs list` shows them").into());
            }
            tx.commit().await?;
            let what = if allow { "may now reach" } else { "may no longer reach" };
            println!("organization {org} {what} loopback and private addresses from the server");
        }
    }
    Ok(())
}

pub async fn keys(pool: &PgPool, master: MasterKeys, command: KeysCommand) -> Result<(), BoxError> {
    let (org, name, scopes, preset, expires_in) = match command {
        KeysCommand::Create { org, name, scopes, preset, expires_in } => (org, name, scopes, preset, expires_in),
        KeysCommand::RotateSigning => return rotate_signing(pool, &master.keyring()).await,
        KeysCommand::RotateMaster { new_key, retire_previous } => {
            return crate::server::rotate::command(pool, master, new_key, retire_previous).await;
        }
    };
    let scopes = match preset {
        Some(p) => {
            Preset::from_name(&p).ok_or_else(|| format!("unknown preset `{p}`: use ci, runner or read-only"))?.scopes()
        }
        None => ScopeSet::parse(scopes.iter().map(|s| s.trim()))?,
    };
    if scopes.is_empty() {
        return Err("name at least one scope with --scopes, or use --preset".into());
    }
    let mut tx = crate::db::begin::begin(&pool).await?;
    ensure_organization(&mut tx, org).await?;
    let expires_at = expires_in.0.map(|d| chrono::Utc::now() + d);
    let created =
        keys::create(&mut tx, keys::NewKey { org_id: org, name, scopes, expires_at, actor: Actor::Operator }).await?;
    tx.commit().await?;
    let expiry = created.record.expires_at.map(|t| t.to_string()).unwrap_or_else(|| "never".into());
    println!("created API key {} ({})", created.record.id, created.record.name);
    println!("  scopes:  {}", created.record.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(","));
    println!("  expires: {expiry}");
    println!("  key:     {}", created.key);
    println!("The key is shown this once: store it now.");
    Ok(())
}

async fn rotate_signing(pool: &PgPool, master: &MasterKey) -> Result<(), BoxError> {
    let kid = crate::auth::signing::create(pool, master).await?;
    let mut conn = pool.acquire().await?;
    Invalidation::SigningKeys.announce(&mut conn).await?;
    println!("created signing key {kid}: it signs new access tokens from now on; the previous key still verifies");
    Ok(())
}

pub async fn users(pool: &PgPool, command: UsersCommand) -> Result<(), BoxError> {
    let one_time = passwords::one_time();
    let hash = passwords::hash(one_time.clone()).await?;
    let mut tx = crate::db::begin::begin(&pool).await?;
    match command {
        UsersCommand::Create { email, org, role } => {
            let email = normalize_email(&email).ok_or_else(|| format!("`{email}` is not an email address"))?;
            if store::find_by_email(&mut tx, &email).await?.is_some() {
                return Err(
                    format!("a user with {email} exists; `users reset-password` gives them a new password").into()
                );
            }
            ensure_organization(&mut tx, org).await?;
            let user_id = store::create_user(&mut tx, &email, &hash, true).await?;
            crate::api::people::signup::add_membership(&mut tx, org, user_id, role).await?;
            tx.commit().await?;
            println!("created user {email} ({user_id}), {role} of organization {org}");
        }
        UsersCommand::ResetPassword { email } => {
            let email = normalize_email(&email).ok_or_else(|| format!("`{email}` is not an email address"))?;
            let user = store::find_by_email(&mut tx, &email).await?.ok_or_else(|| format!("no user {email}"))?;
            store::set_password(&mut tx, user.id, &hash, true).await?;
            sessions::revoke_other_sessions(&mut tx, user.id, None).await?;
            Invalidation::User(user.id).announce(&mut tx).await?;
            tx.commit().await?;
            println!("reset the password of {email}; their sessions ended");
        }
    }
    println!("  one-time password: {one_time}");
    println!("It is shown this once; the first sign-in must change it (PUT /auth/password).");
    Ok(())
}

/// An operator command's organization must exist.
async fn ensure_organization(conn: &mut sqlx::PgConnection, org: OrgId) -> Result<(), BoxError> {
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM organizations WHERE id = $1)")
        .bind(org)
        .fetch_one(conn)
        .await?;
    if !exists {
        return Err(format!("no organization {org}; `hookflow-server orgs list` shows them").into());
    }
    Ok(())
}
