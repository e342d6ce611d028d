//! The secrets a run references, opened for what runs it: only the names `{{secret.NAME}}` appears with in the
//! definitions that run and the environment's values (launch values and organization variables are plain values
//! and never name a secret), with the hosts each may go to; `runners_only` secrets are withheld from whoever is
//! not a registered runner. Claims use it, and so does trying a node.

use crate::crypto::MasterKey;
use crate::error::ApiResult;
use hookflow_shared::OrgId;
use hookflow_shared::api::runners::SecretValues;
use hookflow_shared::flow::template;
use sqlx::PgConnection;
use std::collections::BTreeMap;

/// Every `{{secret.NAME}}` in any string of a JSON value, added to `names` once each.
pub fn collect_names(value: &serde_json::Value, names: &mut Vec<String>) {
    match value {
        serde_json::Value::String(text) => collect_in_text(text, names),
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_names(v, names)),
        serde_json::Value::Object(map) => map.values().for_each(|v| collect_names(v, names)),
        _ => {}
    }
}

fn collect_in_text(text: &str, names: &mut Vec<String>) {
    for name in template::secret_names(text) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
}

/// What a run references: its definitions (`parts`: the flow's and its modules') and its environment's values.
#[derive(Debug)]
pub struct Wanted<'a, P, E>
where
    P: Iterator<Item = &'a serde_json::Value>,
    E: Iterator<Item = &'a String>,
{
    pub org_id: OrgId,
    pub parts: P,
    pub environment: E,
    /// Leave out (and list as withheld) the secrets kept for registered runners.
    pub withhold_runners_only: bool,
}

impl<'a, P, E> Wanted<'a, P, E>
where
    P: Iterator<Item = &'a serde_json::Value>,
    E: Iterator<Item = &'a String>,
{
    /// The names referenced, in the order first seen.
    pub fn names(self) -> Vec<String> {
        let mut names = Vec::new();
        for part in self.parts {
            collect_names(part, &mut names);
        }
        for value in self.environment {
            collect_in_text(value, &mut names);
        }
        names
    }
}

/// The secrets of a run: their values, the hosts of those that list hosts, and the names withheld.
#[derive(Debug, Default)]
pub struct RunSecrets {
    pub values: SecretValues,
    pub hosts: BTreeMap<String, Vec<String>>,
    pub withheld: Vec<String>,
}

type SealedRow = (String, Vec<u8>, Vec<u8>, i32, Vec<String>, bool);

/// Decrypts only the secrets `wanted` references. A name with no secret is left out: the node that uses it fails
/// with "not defined".
pub async fn resolve<'a, P, E>(
    conn: &mut PgConnection,
    master_key: &MasterKey,
    wanted: Wanted<'a, P, E>,
) -> ApiResult<RunSecrets>
where
    P: Iterator<Item = &'a serde_json::Value>,
    E: Iterator<Item = &'a String>,
{
    let (org_id, withhold) = (wanted.org_id, wanted.withhold_runners_only);
    let names = wanted.names();
    if names.is_empty() {
        return Ok(RunSecrets::default());
    }
    let sealed: Vec<SealedRow> = sqlx::query_as(
        "SELECT name, ciphertext, nonce, key_version, allowed_hosts, runners_only
         FROM secrets WHERE organization_id = $1 AND name = ANY($2)",
    )
    .bind(org_id)
    .bind(&names)
    .fetch_all(conn)
    .await?;
    let mut secrets = RunSecrets::default();
    for (name, ciphertext, nonce, key_version, allowed_hosts, runners_only) in sealed {
        if runners_only && withhold {
            secrets.withheld.push(name);
            continue;
        }
        let sealed = crate::crypto::Sealed { ciphertext, nonce, key_version };
        match master_key.open(org_id, &name, &sealed) {
            Ok(plain) => {
                if !allowed_hosts.is_empty() {
                    secrets.hosts.insert(name.clone(), allowed_hosts);
                }
                secrets.values.0.insert(name, String::from_utf8_lossy(&plain).into_owned());
            }
            Err(_) => tracing::error!(secret = %name, "a secret cannot be decrypted with the configured master key"),
        }
    }
    Ok(secrets)
}
