//! Operator subcommands (`orgs create|list`, `keys create`): set up a multi-tenant installation from a shell,
//! straight against the database, printing each key once.

use crate::admin::{keys, organization};
use crate::db::storage::BoxError;
use crate::http::auth::Actor;
use crate::server::config::{KeysCommand, OrgsCommand};
use hookflow_shared::ScopeSet;
use hookflow_shared::scope::Preset;
use sqlx::PgPool;

pub async fn orgs(pool: &PgPool, command: OrgsCommand) -> Result<(), BoxError> {
    let mut conn = pool.acquire().await?;
    match command {
        OrgsCommand::Create { name } => {
            let name = crate::http::validate::display_name("name", &name).map_err(|e| e.message)?;
            let org = organization::create(&mut conn, &name, Actor::Operator).await?;
            println!("created organization {:?}\n  organization id: {}", org.name, org.id);
            println!("next: hookflow-server keys create --org {} --preset ci --expires-in 30d", org.id);
        }
        OrgsCommand::List => {
            for org in organization::list_all(&mut conn).await? {
                let private = if org.private_network { "  (private network allowed)" } else { "" };
                println!("{}  {}{private}", org.id, org.name);
            }
        }
        OrgsCommand::PrivateNetwork { org, allow, .. } => {
            let mut tx = pool.begin().await?;
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

pub async fn keys(pool: &PgPool, command: KeysCommand) -> Result<(), BoxError> {
    let KeysCommand::Create { org, name, scopes, preset, expires_in } = command;
    let scopes = match preset {
        Some(p) => {
            Preset::from_name(&p).ok_or_else(|| format!("unknown preset `{p}`: use ci, runner or read-only"))?.scopes()
        }
        None => ScopeSet::parse(scopes.iter().map(|s| s.trim()))?,
    };
    if scopes.is_empty() {
        return Err("name at least one scope with --scopes, or use --preset".into());
    }
    let mut tx = pool.begin().await?;
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM organizations WHERE id = $1)")
        .bind(org)
        .fetch_one(&mut *tx)
        .await?;
    if !exists {
        return Err(format!("no organization {org}; `hookflow-server orgs list` shows them").into());
    }
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
