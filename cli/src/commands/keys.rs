//! `hookflow keys create|list|delete|rotate`. A key's secret is printed once, at creation, on standard output only.

use crate::api::Api;
use crate::error::CliError;
use crate::output::{print_json, print_list};
use chrono::{Duration as Span, Utc};
use clap::Subcommand;
use hookflow_shared::ApiKeyId;
use hookflow_shared::api::admin::{ApiKey, CreateApiKey, CreatedApiKey};
use hookflow_shared::time::Timestamp;

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key; its secret is shown this once.
    Create {
        #[arg(long)]
        name: String,
        /// A scope the key carries (repeatable; see `GET /permissions`). At most the caller's own.
        #[arg(long = "scope", value_name = "SCOPE", conflicts_with = "preset", required_unless_present = "preset")]
        scopes: Vec<String>,
        /// A preset instead of scopes: `ci`, `runner` or `read-only`.
        #[arg(long)]
        preset: Option<String>,
        /// Expiry from now: `30d`, `12h`, `2w`.
        #[arg(long, value_name = "SPAN", value_parser = parse_span, conflicts_with = "expires_at")]
        expires_in: Option<Span>,
        /// Expiry as an RFC 3339 time.
        #[arg(long, value_name = "TIME")]
        expires_at: Option<chrono::DateTime<Utc>>,
        #[arg(long)]
        json: bool,
    },
    /// List keys (never their secrets).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Delete a key: it stops working at once.
    Delete { id: ApiKeyId },
    /// Create the replacement of a key (same scopes, a new expiry) and print the steps to finish the rotation.
    Rotate {
        id: ApiKeyId,
        /// Expiry of the new key from now.
        #[arg(long, value_name = "SPAN", value_parser = parse_span, default_value = "90d")]
        expires_in: Span,
    },
}

/// `90d`, `12h`, `2w`, `30m`.
pub fn parse_span(text: &str) -> Result<Span, String> {
    let bad = || format!("expected a number and a unit (m, h, d or w), such as 90d; got {text:?}");
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let n: i64 = number.parse().map_err(|_| bad())?;
    if n <= 0 {
        return Err(bad());
    }
    match unit {
        "m" => Ok(Span::minutes(n)),
        "h" => Ok(Span::hours(n)),
        "d" => Ok(Span::days(n)),
        "w" => Ok(Span::weeks(n)),
        _ => Err(bad()),
    }
}

fn expiry(key: &ApiKey) -> String {
    key.expires_at.as_ref().map_or_else(|| "never".to_owned(), ToString::to_string)
}

fn show_created(created: &CreatedApiKey, json: bool) {
    if json {
        print_json(created);
        return;
    }
    let key = &created.record;
    println!("created key {} ({}), scopes {}, expires {}", key.id, key.name, scope_list(key), expiry(key));
    println!("{}", created.key);
    eprintln!("Store the key now: it is never shown again.");
}

fn scope_list(key: &ApiKey) -> String {
    key.scopes.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
}

pub async fn run(api: &Api, command: KeysCommand) -> Result<(), CliError> {
    match command {
        KeysCommand::Create { name, scopes, preset, expires_in, expires_at, json } => {
            let expires_at = expires_in.map(|span| Utc::now() + span).or(expires_at).map(Timestamp);
            let scopes = (!scopes.is_empty()).then_some(scopes);
            let body = CreateApiKey { name: CliError::option("--name", name)?, scopes, preset, expires_at };
            let created = api.client().keys().create(&body).await.map_err(|e| api.error(e))?;
            show_created(&created, json);
        }
        KeysCommand::List { json } => {
            let keys: Vec<ApiKey> = api.list_all("/api-keys", &[]).await?;
            print_list(json, &keys, &["ID", "NAME", "PREFIX", "SCOPES", "EXPIRES"], |k| {
                vec![k.id.to_string(), k.name.clone(), k.prefix.clone(), scope_list(k), expiry(k)]
            });
        }
        KeysCommand::Delete { id } => {
            api.client().keys().delete(id).await.map_err(|e| api.error(e))?;
            println!("deleted key {id}");
        }
        KeysCommand::Rotate { id, expires_in } => {
            let old = api.client().keys().get(id).await.map_err(|e| api.error(e))?;
            let today = Utc::now().format("%Y-%m-%d");
            let base_name = old.name.split(" (rotated ").next().unwrap_or(&old.name);
            let body = CreateApiKey {
                name: CliError::option("name", format!("{base_name} (rotated {today})"))?,
                scopes: Some(old.scopes.iter().map(ToString::to_string).collect()),
                preset: None,
                expires_at: Some(Timestamp(Utc::now() + expires_in)),
            };
            let created = api.client().keys().create(&body).await.map_err(|e| api.error(e))?;
            show_created(&created, false);
            println!(
                "\nTo finish the rotation:\n  1. Store the new key where the old one is kept (for CI, the secret behind SERVICE_API_KEY).\n  \
                 2. Run a pipeline or `hookflow keys list` with the new key to check it works.\n  \
                 3. Delete the old key: hookflow keys delete {id}\n\
                 The old key ({}) keeps working until you delete it{}.",
                old.prefix,
                old.expires_at.as_ref().map_or_else(String::new, |t| format!(" or it expires at {t}"))
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_parse() {
        assert_eq!(parse_span("90d"), Ok(Span::days(90)));
        assert_eq!(parse_span("2w"), Ok(Span::weeks(2)));
        assert_eq!(parse_span("12h"), Ok(Span::hours(12)));
        assert!(parse_span("0d").is_err());
        assert!(parse_span("d").is_err());
        assert!(parse_span("5y").is_err());
    }
}
