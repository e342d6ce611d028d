//! `hookflow-server keys rotate-master`: re-encrypts every secret and signing key under the current master key,
//! online. Rows are taken in key order in batches, each locked while it is rewritten and committed alone, so
//! servers keep reading and writing throughout; a value written meanwhile under an older key is counted as
//! remaining, and running the command again takes it. With the embedded default's key file, `--new-key` first
//! puts a new key at its head and tells every server to read the file again.

use crate::crypto::{MasterKey, Sealed};
use crate::db::data_dir::{self, MasterKeys};
use crate::db::storage::BoxError;
use crate::signals::Invalidation;
use hookflow_shared::{OrgId, WebhookId};
use sqlx::PgPool;

const BATCH: i64 = 200;

/// What a pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    pub secrets: u64,
    pub signing_keys: u64,
    /// Endpoints' signature verification secrets.
    pub verification_secrets: u64,
    /// Destinations' signing secrets.
    pub destination_secrets: u64,
    /// Notification channels' signing secrets (`webhook` channels).
    pub channel_secrets: u64,
    /// Values no key of the ring opens (left as they are).
    pub unreadable: u64,
    /// Values still under another key after the pass (written meanwhile, or unreadable).
    pub remaining: i64,
}

pub async fn command(pool: &PgPool, mut keys: MasterKeys, new_key: bool, retire: bool) -> Result<(), BoxError> {
    if new_key {
        let path = keys.file.clone().ok_or(
            "--new-key works with the embedded default's <data-dir>/master.key; with --master-key, set the new key \
             and --previous-master-keys on every server instead (README: Runbook)",
        )?;
        keys = data_dir::add_new_key(&path)?;
        announce(pool).await?;
        println!("a new master key heads {}: running servers seal with it from now on", path.display());
    }
    let keyring = keys.keyring();
    let report = reencrypt(pool, &keyring).await?;
    println!(
        "re-encrypted {} secrets, {} signing keys, {} endpoints' verification secrets, {} destinations' and {} notification channels' signing secrets under key version {}; {} values remain under other keys",
        report.secrets,
        report.signing_keys,
        report.verification_secrets,
        report.destination_secrets,
        report.channel_secrets,
        keyring.current_version(),
        report.remaining
    );
    if report.unreadable > 0 {
        return Err(format!(
            "{} values open with no key of the ring: configure the key that sealed them (--previous-master-keys, or \
             a line of master.key) and run this again",
            report.unreadable
        )
        .into());
    }
    if retire {
        let path = keys.file.as_ref().ok_or(
            "--retire-previous edits <data-dir>/master.key; with --master-key, \
             remove the old key from --previous-master-keys on every server instead",
        )?;
        if report.remaining > 0 {
            return Err("values were written under an old key meanwhile: run this again before retiring keys".into());
        }
        data_dir::retire_previous_keys(path)?;
        announce(pool).await?;
        println!("previous keys removed from {}", path.display());
    }
    Ok(())
}

/// Tells every running server to read its key file again.
async fn announce(pool: &PgPool) -> Result<(), sqlx::Error> {
    let mut conn = pool.acquire().await?;
    Invalidation::MasterKeys.announce(&mut conn).await
}

/// One pass over secrets and signing keys not sealed under `keyring`'s current key.
pub async fn reencrypt(pool: &PgPool, keyring: &MasterKey) -> Result<Report, sqlx::Error> {
    let mut report = Report::default();
    let (secrets, unreadable) = reencrypt_secrets(pool, keyring).await?;
    report.secrets = secrets;
    report.unreadable += unreadable;
    let (signing, unreadable) = reencrypt_signing_keys(pool, keyring).await?;
    report.signing_keys = signing;
    report.unreadable += unreadable;
    let (verification, unreadable) = reencrypt_verification_secrets(pool, keyring).await?;
    report.verification_secrets = verification;
    report.unreadable += unreadable;
    let (destinations, unreadable) = reencrypt_destination_secrets(pool, keyring).await?;
    report.destination_secrets = destinations;
    report.unreadable += unreadable;
    let (channels, unreadable) = reencrypt_channel_secrets(pool, keyring).await?;
    report.channel_secrets = channels;
    report.unreadable += unreadable;
    report.remaining = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM secrets WHERE key_version <> $1)
              + (SELECT count(*) FROM signing_keys WHERE key_version <> $1)
              + (SELECT count(*) FROM webhooks WHERE verification_key_version <> $1)
              + (SELECT count(*) FROM webhooks WHERE handshake_key_version <> $1)
              + (SELECT count(*) FROM destinations WHERE signing_key_version <> $1)
              + (SELECT count(*) FROM notification_channels WHERE signing_key_version <> $1)",
    )
    .bind(keyring.current_version())
    .fetch_one(pool)
    .await?;
    Ok(report)
}

type SecretRow = (OrgId, String, Vec<u8>, Vec<u8>, i32);

/// The value sealed again under the ring's current key; `None` when no key of the ring opens it.
fn reseal(keyring: &MasterKey, org: OrgId, name: &str, sealed: Sealed) -> Option<Sealed> {
    let plain = keyring.open(org, name, &sealed).ok()?;
    Some(keyring.seal(org, name, &plain))
}

async fn reencrypt_secrets(pool: &PgPool, keyring: &MasterKey) -> Result<(u64, u64), sqlx::Error> {
    let (mut done, mut unreadable) = (0, 0);
    let mut after = (OrgId::nil(), String::new());
    loop {
        let mut tx = crate::db::begin::begin(&pool).await?;
        let rows: Vec<SecretRow> = sqlx::query_as(
            "SELECT organization_id, name, ciphertext, nonce, key_version FROM secrets
             WHERE key_version <> $1 AND (organization_id, name) > ($2, $3)
             ORDER BY organization_id, name LIMIT $4 FOR UPDATE",
        )
        .bind(keyring.current_version())
        .bind(after.0)
        .bind(&after.1)
        .bind(BATCH)
        .fetch_all(&mut *tx)
        .await?;
        let Some(last) = rows.last() else { return Ok((done, unreadable)) };
        after = (last.0, last.1.clone());
        for (org, name, ciphertext, nonce, key_version) in rows {
            let Some(sealed) = reseal(keyring, org, &name, Sealed { ciphertext, nonce, key_version }) else {
                unreadable += 1;
                continue;
            };
            let update = sqlx::query(
                "UPDATE secrets SET ciphertext = $3, nonce = $4, key_version = $5
                 WHERE organization_id = $1 AND name = $2",
            );
            bind_sealed(update.bind(org).bind(&name), &sealed).execute(&mut *tx).await?;
            done += 1;
        }
        tx.commit().await?;
    }
}

async fn reencrypt_signing_keys(pool: &PgPool, keyring: &MasterKey) -> Result<(u64, u64), sqlx::Error> {
    let (mut done, mut unreadable) = (0, 0);
    let mut tx = crate::db::begin::begin(&pool).await?;
    let rows: Vec<(String, Vec<u8>, Vec<u8>, i32)> = sqlx::query_as(
        "SELECT kid, private_key, nonce, key_version FROM signing_keys WHERE key_version <> $1 ORDER BY kid FOR UPDATE",
    )
    .bind(keyring.current_version())
    .fetch_all(&mut *tx)
    .await?;
    for (kid, ciphertext, nonce, key_version) in rows {
        let name = crate::auth::signing::sealed_name(&kid);
        let Some(sealed) = reseal(keyring, OrgId::nil(), &name, Sealed { ciphertext, nonce, key_version }) else {
            unreadable += 1;
            continue;
        };
        let update =
            sqlx::query("UPDATE signing_keys SET private_key = $2, nonce = $3, key_version = $4 WHERE kid = $1");
        bind_sealed(update.bind(&kid), &sealed).execute(&mut *tx).await?;
        done += 1;
    }
    tx.commit().await?;
    Ok((done, unreadable))
}

/// An endpoint's id, organization and sealed verification (or handshake) secrets.
/// A row holding one sealed column: its id, organization, ciphertext, nonce and key version.
type SealedRow = (uuid::Uuid, OrgId, Vec<u8>, Vec<u8>, i32);

/// One sealed column of a table (`<secret>`, `<prefix>_nonce`, `<prefix>_key_version`), each value sealed under
/// `name(id)`.
struct SealedColumn {
    table: &'static str,
    secret: &'static str,
    prefix: &'static str,
    name: fn(uuid::Uuid) -> String,
}

/// Endpoints' sealed secrets: their verification secrets, and their handshakes' own secrets (issue #51), counted
/// together.
async fn reencrypt_verification_secrets(pool: &PgPool, keyring: &MasterKey) -> Result<(u64, u64), sqlx::Error> {
    let verification = SealedColumn {
        table: "webhooks",
        secret: "verification_secrets",
        prefix: "verification",
        name: |id| crate::capture::signing::sealed_name(WebhookId::from(id)),
    };
    let (done, unreadable) = reencrypt_column(pool, keyring, &verification).await?;
    let handshake = SealedColumn {
        table: "webhooks",
        secret: "handshake_secret",
        prefix: "handshake",
        name: |id| crate::capture::handshake::sealed_name(WebhookId::from(id)),
    };
    let (more, more_unreadable) = reencrypt_column(pool, keyring, &handshake).await?;
    Ok((done + more, unreadable + more_unreadable))
}

async fn reencrypt_destination_secrets(pool: &PgPool, keyring: &MasterKey) -> Result<(u64, u64), sqlx::Error> {
    let column = SealedColumn {
        table: "destinations",
        secret: "signing_secret",
        prefix: "signing",
        name: |id| crate::api::webhooks::destinations::model::secret_name(id.into()),
    };
    reencrypt_column(pool, keyring, &column).await
}

/// `webhook` channels' signing secrets (other kinds have none: their version is null and never taken).
async fn reencrypt_channel_secrets(pool: &PgPool, keyring: &MasterKey) -> Result<(u64, u64), sqlx::Error> {
    let column = SealedColumn {
        table: "notification_channels",
        secret: "signing_secret",
        prefix: "signing",
        name: crate::api::alerts::channels::secret_name,
    };
    reencrypt_column(pool, keyring, &column).await
}

/// Re-seals `column` under the current key, `BATCH` rows a transaction; answers (re-sealed, unreadable).
async fn reencrypt_column(
    pool: &PgPool,
    keyring: &MasterKey,
    column: &SealedColumn,
) -> Result<(u64, u64), sqlx::Error> {
    let SealedColumn { table, secret, prefix, name } = column;
    let (mut done, mut unreadable) = (0, 0);
    let mut after = uuid::Uuid::nil();
    loop {
        let mut tx = crate::db::begin::begin(pool).await?;
        let rows: Vec<SealedRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT id, organization_id, {secret}, {prefix}_nonce, {prefix}_key_version FROM {table}
             WHERE {prefix}_key_version <> $1 AND {secret} IS NOT NULL AND {prefix}_nonce IS NOT NULL AND id > $2
             ORDER BY id LIMIT $3 FOR UPDATE"
        )))
        .bind(keyring.current_version())
        .bind(after)
        .bind(BATCH)
        .fetch_all(&mut *tx)
        .await?;
        let Some(last) = rows.last() else { return Ok((done, unreadable)) };
        after = last.0;
        for (id, org, ciphertext, nonce, key_version) in rows {
            let Some(sealed) = reseal(keyring, org, &name(id), Sealed { ciphertext, nonce, key_version }) else {
                unreadable += 1;
                continue;
            };
            let update = sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {table} SET {secret} = $2, {prefix}_nonce = $3, {prefix}_key_version = $4 WHERE id = $1"
            )));
            bind_sealed(update.bind(id), &sealed).execute(&mut *tx).await?;
            done += 1;
        }
        tx.commit().await?;
    }
}

type Update<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// Binds a sealed value's ciphertext, nonce and key version, the next three parameters of `query`.
fn bind_sealed<'q>(query: Update<'q>, sealed: &'q Sealed) -> Update<'q> {
    query.bind(&sealed.ciphertext).bind(&sealed.nonce).bind(sealed.key_version)
}
