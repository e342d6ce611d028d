//! The secrets a run references, opened for what runs it: only the names `{{secret.NAME}}` appears with in the
//! definitions that run and the environment's values (launch values and organization variables are plain values
//! and never name a secret), with the hosts each may go to; `runners_only` secrets are withheld from whoever is
//! not a registered runner. Claims use it, and so does trying a node.

use crate::crypto::MasterKey;
use crate::error::ApiResult;
use hookflow_shared::OrgId;
use hookflow_shared::api::runners::SecretValues;
use hookflow_shared::flow::template;
use serde_json::value::RawValue;
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

/// As [`collect_names`], over JSON text: its strings are visited as they are read, without building a value (a
/// claim of a 1,000-node flow read the whole definition into a value for this alone). Object keys are passed
/// over, as above. Text the walk cannot finish (nested past serde_json's limit, a number out of range: a
/// `RawValue` is checked for neither, and the server never writes either) names what came before, and is logged:
/// the run then fails on the secrets it lacks, where reading it as a value failed its claim.
pub fn collect_names_in_json(text: &RawValue, names: &mut Vec<String>) {
    let mut deserializer = serde_json::Deserializer::from_str(text.get());
    if let Err(e) = serde::de::DeserializeSeed::deserialize(Strings(names), &mut deserializer) {
        tracing::error!(error = %e, "a stored definition could not be read to its end for the secrets it names");
    }
}

/// Visits every string value of a JSON document (not the keys), collecting the secrets each names.
struct Strings<'n>(&'n mut Vec<String>);

impl<'de> serde::de::DeserializeSeed<'de> for Strings<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Strings<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<(), E> {
        collect_in_text(text, self.0);
        Ok(())
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        while items.next_element_seed(Strings(&mut *self.0))?.is_some() {}
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut entries: A) -> Result<(), A::Error> {
        while entries.next_key::<serde::de::IgnoredAny>()?.is_some() {
            entries.next_value_seed(Strings(&mut *self.0))?;
        }
        Ok(())
    }
}

fn collect_in_text(text: &str, names: &mut Vec<String>) {
    for name in template::secret_names(text) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
}

/// A definition a run references secrets in: as a value, or as its JSON text.
#[derive(Debug, Clone, Copy)]
pub enum Part<'a> {
    Value(&'a serde_json::Value),
    Text(&'a RawValue),
}

/// What a run references: its definitions (`parts`: the flow's and its modules') and its environment's values.
#[derive(Debug)]
pub struct Wanted<'a, P, E>
where
    P: Iterator<Item = Part<'a>>,
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
    P: Iterator<Item = Part<'a>>,
    E: Iterator<Item = &'a String>,
{
    /// The names referenced, in the order first seen.
    pub fn names(self) -> Vec<String> {
        let mut names = Vec::new();
        for part in self.parts {
            match part {
                Part::Value(value) => collect_names(value, &mut names),
                Part::Text(text) => collect_names_in_json(text, &mut names),
            }
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
    P: Iterator<Item = Part<'a>>,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The names found in a definition's text are the names found in its value, escapes and all.
    #[test]
    fn the_text_names_what_the_value_names() {
        let text = r#"{"nodes": [{"id": "{{secret.not_a_value_but_an_id}}", "kind": "request",
            "request": {"url": "https://x/{{secret.b}}", "headers": {"{{secret.key}}": "Bearer {{ secret.a }}"},
                "body": "\u007b\u007bsecret.escaped}} and {{secret.b}}"},
            "assertions": [{"expected": 1}, {"expected": [true, null, 2.5, -3, "{{secret.deep}}"]}]}],
            "variables": {"{{secret.in_a_key}}": "plain"}}"#;
        let raw = RawValue::from_string(text.to_owned()).expect("json");
        let (mut from_text, mut from_value) = (Vec::new(), Vec::new());
        collect_names_in_json(&raw, &mut from_text);
        collect_names(&serde_json::from_str(text).expect("json"), &mut from_value);
        assert_eq!(from_text, from_value);
        assert_eq!(from_text, ["not_a_value_but_an_id", "b", "a", "escaped", "deep"]);
    }

    /// Text the walk cannot finish names what came before the point it could not read.
    #[test]
    fn unreadable_text_names_what_came_before() {
        let raw = RawValue::from_string(r#"["{{secret.a}}", 1e400, "{{secret.b}}"]"#.to_owned()).expect("checked");
        let mut names = Vec::new();
        collect_names_in_json(&raw, &mut names);
        assert_eq!(names, ["a"]);
    }
}
