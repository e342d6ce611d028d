//! The built-in identity provider's Ed25519 signing keys. They live in the database, the private half sealed
//! under the master key, so every replica signs and verifies alike. The newest key signs; the newest two verify
//! and are published at `/.well-known/jwks.json`, so a rotation (`hookflow-server keys rotate-signing`) never
//! ends the sessions signed just before it. Each replica keeps the keys in memory and reloads them when a token
//! names a key it does not know (at most once per [`RELOAD_INTERVAL`]) or when a rotation is announced.

use crate::crypto::{MasterKey, Sealed};
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair as _};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hookflow_shared::OrgId;
use hookflow_shared::api::people::{Jwk, Jwks};
use jsonwebtoken::{DecodingKey, EncodingKey};
use sqlx::PgPool;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Keys that verify: the newest (which signs) and the one before it.
const PUBLISHED: i64 = 2;
/// Reloads caused by unknown key ids, at most one per interval (a flood of made-up ids costs one query).
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// One published key.
#[derive(Clone)]
struct PublicKey {
    kid: String,
    raw: Vec<u8>,
}

#[derive(Default)]
struct Loaded {
    signing: Option<(String, EncodingKey)>,
    published: Vec<PublicKey>,
    stale: bool,
}

/// The keys in memory.
#[derive(Default)]
pub struct SigningKeys {
    loaded: RwLock<Loaded>,
    last_reload: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for SigningKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKeys { .. }")
    }
}

/// The sealed private key's name (binds the ciphertext to its key id).
pub fn sealed_name(kid: &str) -> String {
    format!("signing-key:{kid}")
}

/// Creates a new signing key; it signs from the next reload of every replica on. Answers its key id.
pub async fn create(pool: &PgPool, master: &MasterKey) -> Result<String, SigningError> {
    let pair = Ed25519KeyPair::generate().map_err(|_| SigningError::Crypto)?;
    let pkcs8 = pair.to_pkcs8v1().map_err(|_| SigningError::Crypto)?;
    let kid = Uuid::now_v7().simple().to_string();
    let sealed = master.seal(OrgId::nil(), &sealed_name(&kid), pkcs8.as_ref());
    sqlx::query(
        "INSERT INTO signing_keys (kid, private_key, nonce, key_version, public_key) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&kid)
    .bind(&sealed.ciphertext)
    .bind(&sealed.nonce)
    .bind(sealed.key_version)
    .bind(pair.public_key().as_ref())
    .execute(pool)
    .await?;
    Ok(kid)
}

impl SigningKeys {
    /// Marks the keys for reloading (a rotation was announced).
    pub fn forget(&self) {
        self.loaded.write().unwrap_or_else(|e| e.into_inner()).stale = true;
    }

    /// The key that signs, loading (and on an empty installation creating) keys first if needed.
    pub async fn signing_key(&self, pool: &PgPool, master: &MasterKey) -> Result<(String, EncodingKey), SigningError> {
        {
            let loaded = self.loaded.read().unwrap_or_else(|e| e.into_inner());
            if let (Some(key), false) = (&loaded.signing, loaded.stale) {
                return Ok(key.clone());
            }
        }
        self.reload(pool, master).await?;
        if self.loaded.read().unwrap_or_else(|e| e.into_inner()).signing.is_none() {
            create(pool, master).await?;
            self.reload(pool, master).await?;
        }
        self.loaded.read().unwrap_or_else(|e| e.into_inner()).signing.clone().ok_or(SigningError::Crypto)
    }

    /// The key that verifies tokens naming `kid`; an unknown id reloads the keys (throttled) once.
    pub async fn verifying_key(&self, pool: &PgPool, master: &MasterKey, kid: &str) -> Option<DecodingKey> {
        if let Some(key) = self.find(kid) {
            return Some(key);
        }
        let due = {
            let mut last = self.last_reload.lock().unwrap_or_else(|e| e.into_inner());
            let due = last.is_none_or(|at| at.elapsed() >= RELOAD_INTERVAL);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if due || self.loaded.read().unwrap_or_else(|e| e.into_inner()).stale {
            self.reload(pool, master).await.ok()?;
        }
        self.find(kid)
    }

    fn find(&self, kid: &str) -> Option<DecodingKey> {
        let loaded = self.loaded.read().unwrap_or_else(|e| e.into_inner());
        if loaded.stale {
            return None;
        }
        loaded.published.iter().find(|k| k.kid == kid).map(|k| DecodingKey::from_ed_der(&k.raw))
    }

    /// The JSON Web Key Set of the published keys.
    pub async fn jwks(&self, pool: &PgPool, master: &MasterKey) -> Result<Jwks, SigningError> {
        self.signing_key(pool, master).await?;
        let loaded = self.loaded.read().unwrap_or_else(|e| e.into_inner());
        let keys = loaded
            .published
            .iter()
            .map(|k| Jwk {
                kty: "OKP".to_owned(),
                crv: "Ed25519".to_owned(),
                alg: "EdDSA".to_owned(),
                use_: "sig".to_owned(),
                kid: k.kid.clone(),
                x: URL_SAFE_NO_PAD.encode(&k.raw),
            })
            .collect();
        Ok(Jwks { keys })
    }

    async fn reload(&self, pool: &PgPool, master: &MasterKey) -> Result<(), SigningError> {
        type KeyRow = (String, Vec<u8>, Vec<u8>, i32, Vec<u8>);
        let rows: Vec<KeyRow> = sqlx::query_as(
            "SELECT kid, private_key, nonce, key_version, public_key FROM signing_keys
             ORDER BY created_at DESC, kid DESC LIMIT $1",
        )
        .bind(PUBLISHED)
        .fetch_all(pool)
        .await?;
        let signing = match rows.first() {
            Some((kid, ciphertext, nonce, key_version, _)) => {
                let sealed = Sealed { ciphertext: ciphertext.clone(), nonce: nonce.clone(), key_version: *key_version };
                let pkcs8 = master.open(OrgId::nil(), &sealed_name(kid), &sealed).map_err(|_| SigningError::Sealed)?;
                Some((kid.clone(), EncodingKey::from_ed_der(&pkcs8)))
            }
            None => None,
        };
        let published = rows.into_iter().map(|(kid, _, _, _, raw)| PublicKey { kid, raw }).collect();
        *self.loaded.write().unwrap_or_else(|e| e.into_inner()) = Loaded { signing, published, stale: false };
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("the signing keys cannot be read: {0}")]
    Database(#[from] sqlx::Error),
    #[error("a signing key cannot be opened with this master key (was it changed?)")]
    Sealed,
    #[error("a signing key could not be made")]
    Crypto,
}
