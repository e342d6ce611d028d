//! `hookflow webhooks create|list|tail|forward`: endpoints, and following their captures live.

use crate::api::Api;
use crate::commands::forward::{self, Forwarder};
use crate::error::CliError;
use crate::output::{Style, Tone, print_json, print_list};
use crate::sse::EventStream;
use clap::Subcommand;
use hookflow_shared::WebhookId;
use hookflow_shared::api::signatures::{SignatureScheme, VerificationSettings};
use hookflow_shared::api::webhooks::{Capture, CreateWebhook, Webhook};

#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Create a capture endpoint; prints its id and capture URL.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        description: Option<String>,
        /// Largest body accepted, in bytes (default 1 MiB, at most 10 MiB).
        #[arg(long, value_name = "BYTES")]
        max_body_bytes: Option<i64>,
        /// Verify every capture's signature with this scheme (stripe, github, slack, standard_webhooks, hmac, ...:
        /// docs/signatures.md lists them).
        #[arg(long, value_name = "SCHEME", requires = "verification_secret")]
        verification_scheme: Option<String>,
        /// The scheme's secret; give it twice during a rotation (the server never shows it again).
        #[arg(long, value_name = "SECRET", requires = "verification_scheme")]
        verification_secret: Vec<String>,
        /// record (default: store every capture with its verdict), enforce (answer 401 to bad signatures) or
        /// reject (answer 401 and store nothing).
        #[arg(long, value_name = "MODE", requires = "verification_scheme")]
        verification_mode: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// List capture endpoints.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Print captures as they arrive; survives dropped connections (resumes with Last-Event-ID).
    Tail {
        id: WebhookId,
        /// Print each capture as one JSON line instead of a summary line.
        #[arg(long)]
        json: bool,
        /// Stop after this many captures.
        #[arg(long, value_name = "N")]
        count: Option<u64>,
        /// Start after this event id (from an earlier tail) instead of now.
        #[arg(long, value_name = "EVENT_ID")]
        after: Option<String>,
    },
    /// Resend every capture, as it arrives, to a local server: method, path, query, headers and the exact body bytes.
    Forward {
        id: WebhookId,
        /// Target base URL; the capture's path (after /webhook/ID) and query are appended.
        #[arg(long, value_name = "URL")]
        to: String,
        /// Stop after this many captures.
        #[arg(long, value_name = "N")]
        count: Option<u64>,
        /// Start after this event id instead of now.
        #[arg(long, value_name = "EVENT_ID")]
        after: Option<String>,
    },
}

/// The `verification` of `webhooks create`, from its flags: the scheme and mode are read as the API spells them,
/// so a misspelt one is refused here, naming the flag.
fn verification_settings(
    scheme: &str,
    secrets: Vec<String>,
    mode: Option<&str>,
) -> Result<VerificationSettings, CliError> {
    let scheme: SignatureScheme =
        serde_json::from_value(serde_json::Value::String(scheme.to_owned())).map_err(|_| {
            CliError::usage(format!("--verification-scheme: `{scheme}` is not a scheme (docs/signatures.md)"))
        })?;
    let mut settings = VerificationSettings::new(scheme, secrets);
    if let Some(mode) = mode {
        settings.mode = serde_json::from_value(serde_json::Value::String(mode.to_owned()))
            .map_err(|_| CliError::usage(format!("--verification-mode: `{mode}` is not record, enforce or reject")))?;
    }
    Ok(settings)
}

fn summary_line(capture: &Capture, style: Style) -> String {
    let query = if capture.query_string.is_empty() { String::new() } else { format!("?{}", capture.query_string) };
    let path = if capture.path.is_empty() { "/" } else { &capture.path };
    format!(
        "{} {} {path}{query} {} B {} from {} {}",
        style.paint(&capture.received_at.to_string(), Tone::Muted),
        capture.method,
        capture.body_size,
        capture.content_type.as_deref().unwrap_or("-"),
        capture.source_ip,
        style.paint(&capture.id.to_string(), Tone::Muted),
    )
}

/// Follows the endpoint's stream, handing each capture to `each`; stops after `count` captures if given.
async fn follow<F, Fut>(
    api: &Api,
    id: WebhookId,
    after: Option<String>,
    count: Option<u64>,
    doing: &str,
    mut each: F,
) -> Result<(), CliError>
where
    F: FnMut(String, serde_json::Value) -> Fut,
    Fut: Future<Output = Result<(), CliError>>,
{
    let notice: crate::sse::Notice = Box::new(|text| eprintln!("hookflow: {text}"));
    let mut events = EventStream::new(api.clone(), format!("/webhooks/{id}/stream"), after, notice);
    events.open().await?;
    eprintln!("hookflow: {doing} (Ctrl-C to stop)");
    let mut seen = 0;
    while count.is_none_or(|limit| seen < limit) {
        let event = tokio::select! {
            event = events.next() => event?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        match event.data["type"].as_str() {
            Some("request.captured") => {
                seen += 1;
                each(event.id, event.data).await?;
            }
            Some("stream.lagged") => {
                eprintln!("hookflow: fell behind by {} captures; catching up", event.data["missed"]);
                events.reconnect_soon();
            }
            _ => {}
        }
    }
    Ok(())
}

pub async fn run(api: &Api, command: WebhooksCommand, style: Style) -> Result<(), CliError> {
    match command {
        WebhooksCommand::Create {
            name,
            description,
            max_body_bytes,
            verification_scheme,
            verification_secret,
            verification_mode,
            json,
        } => {
            let verification = verification_scheme
                .map(|scheme| verification_settings(&scheme, verification_secret, verification_mode.as_deref()))
                .transpose()?;
            let body = CreateWebhook {
                name: CliError::option("--name", name)?,
                description: description.map(|d| CliError::option("--description", d)).transpose()?,
                max_body_bytes,
                retention: None,
                response: None,
                verification,
                handshake: None,
                triggers: Default::default(),
            };
            let webhook: Webhook = api.client().webhooks().create(&body).await.map_err(|e| api.error(e))?;
            if json {
                print_json(&webhook);
            } else {
                println!("created webhook {} ({})\ncapture URL: {}", webhook.id, webhook.name, webhook.capture_url);
            }
        }
        WebhooksCommand::List { json } => {
            let webhooks: Vec<Webhook> = api.list_all("/webhooks", &[]).await?;
            print_list(json, &webhooks, &["ID", "NAME", "REQUESTS", "CAPTURE URL"], |w| {
                vec![w.id.to_string(), w.name.clone(), w.request_count.to_string(), w.capture_url.clone()]
            });
        }
        WebhooksCommand::Tail { id, json, count, after } => {
            let doing = format!("listening for requests to webhook {id}");
            follow(api, id, after, count, &doing, |event_id, data| async move {
                if json {
                    println!("{data}");
                } else {
                    let capture: Capture = serde_json::from_value(data)
                        .map_err(|e| CliError::Network(format!("event {event_id} is not a capture: {e}")))?;
                    println!("{}", summary_line(&capture, style));
                }
                Ok(())
            })
            .await?;
        }
        WebhooksCommand::Forward { id, to, count, after } => {
            let forwarder = Forwarder::new(api.clone(), id, &to)?;
            let doing = format!("forwarding requests to webhook {id} to {to}");
            follow(api, id, after, count, &doing, |event_id, data| {
                let forwarder = &forwarder;
                async move {
                    let capture: Capture = serde_json::from_value(data)
                        .map_err(|e| CliError::Network(format!("event {event_id} is not a capture: {e}")))?;
                    let line = forward::describe(&capture, forwarder.forward(&capture).await, style);
                    println!("{line}");
                    Ok(())
                }
            })
            .await?;
        }
    }
    Ok(())
}
