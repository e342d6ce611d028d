//! A fake payment provider, as a real one behaves toward a webhook integration: `POST /payments` (JSON
//! `{"amount", "callback_url"?}`) answers `201 {"id": "pay_<n>"}` at once and, after a delay, sends a
//! Stripe-signed `payment.succeeded` webhook for that payment to the callback URL the request named, or to the
//! endpoint registered with the provider. Told to, it sends the wrong payment's id, or nothing at all.

use crate::signers::{Sign, stripe};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the provider does after a payment is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Sends the payment's webhook.
    Send,
    /// Sends a webhook for another payment (`pay_other`).
    WrongId,
    /// Sends nothing.
    Never,
}

/// How the provider is set up.
#[derive(Debug, Clone)]
pub struct ProviderOptions {
    pub behaviour: Behaviour,
    /// Between answering the payment and sending its webhook.
    pub delay: Duration,
    /// The Stripe signing secret.
    pub secret: String,
    /// Where webhooks go when a payment names no `callback_url` (the endpoint registered with the provider).
    pub endpoint: Option<String>,
}

impl Default for ProviderOptions {
    fn default() -> Self {
        Self {
            behaviour: Behaviour::Send,
            delay: Duration::from_millis(300),
            secret: "whsec_fake_provider".into(),
            endpoint: None,
        }
    }
}

#[derive(Debug)]
struct Shared {
    options: ProviderOptions,
    created: AtomicUsize,
    sent: AtomicUsize,
    client: reqwest::Client,
}

/// A running provider, stopped when dropped.
#[derive(Debug)]
pub struct Provider {
    /// `http://<address>`.
    pub url: String,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Provider {
    /// A provider on 127.0.0.1.
    pub async fn spawn(options: ProviderOptions) -> Self {
        Self::spawn_on("127.0.0.1:0", options).await
    }

    /// A provider listening on `address`.
    pub async fn spawn_on(address: &str, options: ProviderOptions) -> Self {
        let shared = Arc::new(Shared {
            options,
            created: AtomicUsize::new(0),
            sent: AtomicUsize::new(0),
            client: reqwest::Client::new(),
        });
        let router =
            axum::Router::new().route("/payments", axum::routing::post(create_payment)).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(address).await.expect("bind the provider");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).with_graceful_shutdown(stopped.cancelled_owned()).await;
        });
        Self { url, shared, stop }
    }

    /// Webhooks sent so far (answered or not).
    pub fn sent(&self) -> usize {
        self.shared.sent.load(Ordering::SeqCst)
    }
}

async fn create_payment(State(shared): State<Arc<Shared>>, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    let n = shared.created.fetch_add(1, Ordering::SeqCst) + 1;
    let id = format!("pay_{n}_{}", uuid::Uuid::new_v4().simple());
    let callback = body["callback_url"].as_str().map(str::to_owned).or_else(|| shared.options.endpoint.clone());
    if let Some(callback) = callback.filter(|_| shared.options.behaviour != Behaviour::Never) {
        let (shared, id) = (shared.clone(), id.clone());
        tokio::spawn(async move {
            tokio::time::sleep(shared.options.delay).await;
            let paid = if shared.options.behaviour == Behaviour::WrongId { "pay_other".to_owned() } else { id };
            let event = json!({"type": "payment.succeeded", "data": {"id": paid, "amount": body["amount"]}});
            let body = serde_json::to_vec(&event).expect("json");
            let timestamp = chrono::Utc::now().timestamp();
            let signed = stripe(Sign { secret: &shared.options.secret, body: &body, timestamp, url: &callback });
            let mut request =
                shared.client.post(&callback).header("content-type", "application/json").body(signed.body);
            for (name, value) in signed.headers {
                request = request.header(name, value);
            }
            shared.sent.fetch_add(1, Ordering::SeqCst);
            let _ = request.send().await;
        });
    }
    (StatusCode::CREATED, Json(json!({"id": id, "status": "pending"})))
}
