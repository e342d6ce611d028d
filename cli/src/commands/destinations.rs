//! `hookflow destinations list|create|delete|replay`: where an endpoint's captures are delivered, and replaying
//! its dead deliveries.

use crate::api::Api;
use crate::error::CliError;
use crate::output::{print_json, print_list};
use clap::Subcommand;
use hookflow_shared::api::destinations::{CreateDestination, DeliveryStatus, Destination, ReplayDeliveries, Signing};
use hookflow_shared::api::fields::Labels;
use hookflow_shared::{DestinationId, WebhookId};

#[derive(Debug, Subcommand)]
pub enum DestinationsCommand {
    /// List an endpoint's destinations.
    List {
        /// The endpoint.
        webhook: WebhookId,
        #[arg(long)]
        json: bool,
    },
    /// Deliver an endpoint's captures (all, or those a search matches) to a URL, with retries.
    Create {
        /// The endpoint.
        webhook: WebhookId,
        #[arg(long)]
        name: String,
        /// Where to deliver: http(s); each capture's sub-path and query are appended. (`--url` is the server's.)
        #[arg(long, value_name = "URL")]
        to: String,
        /// Deliver only captures this search matches (the capture search language).
        #[arg(long)]
        q: Option<String>,
        /// Deliver through an installed runner with these labels (repeat the flag for several).
        #[arg(long = "runner-label", value_name = "LABEL")]
        runner_labels: Vec<String>,
        /// Delays in seconds after each failed attempt, comma-separated (default 5,30,120,600,1800,3600,7200,14400).
        #[arg(long, value_name = "S,S,...", value_delimiter = ',')]
        retry_schedule: Option<Vec<u32>>,
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u32>,
        #[arg(long, value_name = "N")]
        rate_limit_per_s: Option<u32>,
        /// Sign deliveries the Standard Webhooks way; the secret is printed once.
        #[arg(long)]
        sign: bool,
        #[arg(long)]
        json: bool,
    },
    /// Delete a destination and its deliveries.
    Delete { webhook: WebhookId, destination: DestinationId },
    /// Deliver a destination's dead deliveries again (all, or those whose captures a search matches).
    Replay {
        webhook: WebhookId,
        destination: DestinationId,
        /// Only dead deliveries whose captures this search matches.
        #[arg(long)]
        q: Option<String>,
    },
}

pub async fn run(api: &Api, command: DestinationsCommand) -> Result<(), CliError> {
    match command {
        DestinationsCommand::List { webhook, json } => {
            let page = api.client().destinations(webhook).list().await.map_err(|e| api.error(e))?;
            print_list(json, &page.items, &["ID", "NAME", "URL", "ENABLED", "RUNNER LABELS"], |d: &Destination| {
                let enabled = match &d.disabled_reason {
                    Some(reason) if !d.enabled => format!("no ({reason})"),
                    _ => if d.enabled { "yes" } else { "no" }.to_owned(),
                };
                vec![d.id.to_string(), d.name.clone(), d.url.clone(), enabled, d.runner_labels.join(",")]
            });
        }
        DestinationsCommand::Create {
            webhook,
            name,
            to,
            q,
            runner_labels,
            retry_schedule,
            timeout_ms,
            rate_limit_per_s,
            sign,
            json,
        } => {
            let labels: Labels = CliError::option("--runner-label", runner_labels)?;
            let mut body = CreateDestination::new(CliError::option("--name", name)?, to);
            body.q = q;
            body.runner_labels = labels;
            body.retry_schedule_s = retry_schedule;
            body.timeout_ms = timeout_ms;
            body.rate_limit_per_s = rate_limit_per_s;
            body.signing = sign.then_some(Signing::StandardWebhooks);
            let made = api.client().destinations(webhook).create(&body).await.map_err(|e| api.error(e))?;
            if json {
                print_json(&made);
            } else {
                println!("created destination {} ({}) delivering to {}", made.id, made.name, made.url);
                if let Some(secret) = &made.signing_secret {
                    println!("signing secret (shown once): {secret}");
                }
            }
        }
        DestinationsCommand::Delete { webhook, destination } => {
            api.client().destinations(webhook).delete(destination).await.map_err(|e| api.error(e))?;
            println!("deleted destination {destination}");
        }
        DestinationsCommand::Replay { webhook, destination, q } => {
            let replay = match q {
                Some(q) => ReplayDeliveries { q: Some(q), ..ReplayDeliveries::default() },
                None => ReplayDeliveries { status: Some(DeliveryStatus::Dead), ..ReplayDeliveries::default() },
            };
            let replayed =
                api.client().destinations(webhook).replay(destination, &replay).await.map_err(|e| api.error(e))?;
            println!("replayed {} deliveries", replayed.replayed);
        }
    }
    Ok(())
}
