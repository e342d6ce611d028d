//! Deliveries to destinations with runner labels (issue #49): a task long-polls the control plane for them and
//! sends each, exactly as handed out (headers already signed by the server), from this runner's network, then
//! reports the outcome. A 2xx answer delivers; anything else is a failed attempt the control plane retries.

use crate::client::{Client, ClientError};
use crate::outbound::{ClientOptions, Guard, refusal};
use base64::Engine as _;
use hookflow_shared::RunnerId;
use hookflow_shared::api::destinations::{DeliveryResult, RunnerDelivery};
use hookflow_shared::api::runners::NetworkPolicy;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Polls and delivers until `stop`; stops early when the control plane refuses this runner.
pub async fn run(client: Client, runner_id: RunnerId, wait_s: u64, stop: CancellationToken) {
    let http = Guard::new(NetworkPolicy::Any).client(&ClientOptions::default());
    loop {
        let polled = tokio::select! {
            polled = client.next_deliveries(runner_id, wait_s) => polled,
            () = stop.cancelled() => return,
        };
        match polled {
            Ok(deliveries) => {
                let sends = deliveries.into_iter().map(|delivery| {
                    let (client, http) = (client.clone(), http.clone());
                    async move {
                        let id = delivery.delivery_id;
                        let result = deliver(&http, runner_id, delivery).await;
                        if let Err(e) = client.report_delivery(id, &result).await {
                            tracing::warn!(error = %e, delivery_id = %id, "a delivery's result was not taken");
                        }
                    }
                });
                futures_util::future::join_all(sends).await;
            }
            Err(ClientError::Status { status, .. }) if status == reqwest::StatusCode::NOT_FOUND => return,
            Err(e) if e.is_transient() => {
                tracing::warn!(error = %e, "polling for deliveries failed; retrying");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(2)) => {}
                    () = stop.cancelled() => return,
                }
            }
            // An older control plane without the route, or refused credentials: no deliveries from here.
            Err(e) => {
                tracing::info!(error = %e, "this control plane hands out no deliveries");
                return;
            }
        }
    }
}

/// Sends one delivery and says what came of it.
async fn deliver(http: &reqwest::Client, runner_id: RunnerId, delivery: RunnerDelivery) -> DeliveryResult {
    let started = Instant::now();
    let lease = delivery.lease;
    let result = |status_code: Option<u16>, error: Option<String>| DeliveryResult {
        runner_id,
        lease,
        status_code,
        error,
        duration_ms: started.elapsed().as_millis() as u64,
    };
    let (Ok(method), Ok(url), Ok(body)) = (
        reqwest::Method::from_bytes(delivery.method.as_bytes()),
        reqwest::Url::parse(&delivery.url),
        base64::engine::general_purpose::STANDARD.decode(&delivery.body),
    ) else {
        return result(None, Some("the delivery cannot be sent as handed out".to_owned()));
    };
    let mut request = http.request(method, url).timeout(Duration::from_millis(u64::from(delivery.timeout_ms)));
    for (name, value) in &delivery.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    match request.body(body).send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let _ = crate::outbound::read_limited(response, 64 * 1024).await;
            let error = (!(200..300).contains(&status)).then(|| format!("answered {status}"));
            result(Some(status), error)
        }
        Err(e) => {
            let error = match refusal(&e) {
                Some(refused) => format!("blocked: {refused}"),
                None if e.is_timeout() => "timed out".to_owned(),
                None if e.is_connect() => "the connection failed".to_owned(),
                None => "the request failed".to_owned(),
            };
            result(None, Some(error))
        }
    }
}
