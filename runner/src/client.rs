//! The runner-protocol client: registration, heartbeats, long-poll claims and reports, over reqwest (rustls).
//! Only outbound HTTP(S) to the control plane is needed. Requests are built by `hookflow_client::Client` (the base
//! URL, the key and organization headers, job tokens); this module keeps the protocol's own answers (204 as none,
//! job calls' 401/409 as a lost job) and its cheap report bodies (encoded once, sent as bytes).

use hookflow_shared::api::runners::{
    CaptureWait, CaptureWaitReply, Deregister, FinalStatus, Heartbeat, HeartbeatReply, Job, JobBatch, Metrics, NextJob,
    NodeReportBatch, RegisterRunner, Registered, ReportReply,
};
use hookflow_shared::redacted::Redacted;
use hookflow_shared::wire::{Refusal, runner_route};
use hookflow_shared::{JobId, OrgId, RunnerId};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The credentials were refused: retrying will not help.
    #[error("the control plane refused the credentials ({0})")]
    Refused(StatusCode),
    /// A job's report was refused because the attempt is no longer current or its token is dead.
    #[error("the job is no longer ours ({0})")]
    JobLost(StatusCode),
    #[error("the control plane answered {status}: {message}")]
    Status { status: StatusCode, code: &'static str, message: String },
    #[error("cannot reach the control plane: {0}")]
    Transport(String),
}

impl ClientError {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Transport(_) => true,
            ClientError::Status { status, .. } => status.is_server_error() || *status == StatusCode::TOO_MANY_REQUESTS,
            _ => false,
        }
    }
}

/// Where and as whom to connect.
#[derive(Debug, Clone)]
pub struct Connection {
    pub base_url: String,
    pub api_key: Redacted<String>,
    /// `None` only for the server's embedded runner.
    pub organization_id: Option<OrgId>,
}

#[derive(Debug, Clone)]
pub struct Client {
    api: hookflow_client::Client,
    /// Set once the control plane refused results carried by a completion (it predates them).
    results_refused: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// Checks a control plane's base URL: http or https, and plain http only to a loopback host unless
/// `insecure_http` (the key would cross the network in clear text). Answers it without a trailing slash.
pub fn check_base_url(url: &str, insecure_http: bool) -> Result<String, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL ({e})"))?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => return Err(format!("`{url}` has no host")),
    };
    match parsed.scheme() {
        "https" => {}
        "http" if loopback || insecure_http => {}
        "http" => {
            return Err(format!(
                "`{url}` is plain http to another machine: the API key would cross the network in clear text; use \
                 https, or allow it with --insecure-http (SERVICE_INSECURE_HTTP=1)"
            ));
        }
        _ => return Err(format!("`{url}` must be an http or https URL")),
    }
    Ok(url.trim_end_matches('/').to_owned())
}

/// The HTTP client for a control plane: redirects are never followed (the key must not go to another host).
pub fn api_http_client(user_agent: &str) -> reqwest::Client {
    crate::tls::shared(reqwest::Client::builder())
        .user_agent(user_agent)
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "the HTTP client could not be built with its settings");
            reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap_or_default()
        })
}

impl Client {
    pub fn new(connection: Connection) -> Self {
        let http = api_http_client(concat!("hookflow-runner/", env!("CARGO_PKG_VERSION")));
        Self::with_http(connection, http)
    }

    /// A client that never goes through a proxy, whatever the environment says (the server's embedded runner,
    /// talking to its own listener).
    pub fn direct(connection: Connection) -> Self {
        let http = crate::tls::shared(reqwest::Client::builder())
            .user_agent(concat!("hookflow-runner/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "the HTTP client could not be built with its settings");
                reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .no_proxy()
                    .build()
                    .unwrap_or_default()
            });
        Self::with_http(connection, http)
    }

    fn with_http(connection: Connection, http: reqwest::Client) -> Self {
        let credentials = hookflow_client::Credentials::ApiKey {
            key: connection.api_key.expose().clone(),
            org: connection.organization_id,
        };
        Self {
            api: hookflow_client::Client::with_http(http, &connection.base_url, credentials),
            results_refused: std::sync::Arc::default(),
        }
    }

    /// Whether completions may carry results (until the control plane refused them once).
    pub fn completions_take_results(&self) -> bool {
        !self.results_refused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Remembers that the control plane refuses results carried by completions.
    pub fn refuse_results_with_completions(&self) {
        self.results_refused.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// A `POST` to `path` with the key (and organization) headers.
    fn post_with_key(&self, path: &str) -> reqwest::RequestBuilder {
        self.api.request(Method::POST, path)
    }

    /// A `POST` to `path` under a job's token.
    fn post_as_job(&self, path: &str, job: &Job) -> reqwest::RequestBuilder {
        self.api.request_as_job(Method::POST, path, &job.job_token)
    }

    async fn send<T: DeserializeOwned>(
        &self,
        builder: reqwest::RequestBuilder,
        job_call: bool,
    ) -> Result<Option<T>, ClientError> {
        let response = builder.send().await.map_err(|e| ClientError::Transport(e.to_string()))?;
        let status = response.status();
        if status == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        if status.is_success() {
            return response.json().await.map(Some).map_err(|e| ClientError::Transport(e.to_string()));
        }
        if job_call && matches!(status, StatusCode::UNAUTHORIZED | StatusCode::CONFLICT) {
            return Err(ClientError::JobLost(status));
        }
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return Err(ClientError::Refused(status));
        }
        let body = response.bytes().await.unwrap_or_default();
        let refusal = Refusal::parse(status.as_u16(), &body);
        Err(ClientError::Status { status, code: refusal.code_name(), message: refusal.message })
    }

    async fn post_key<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<Option<T>, ClientError> {
        self.send(self.post_with_key(path).json(body), false).await
    }

    pub async fn register(&self, registration: &RegisterRunner) -> Result<Registered, ClientError> {
        self.post_key(runner_route::RUNNERS, registration)
            .await?
            .ok_or_else(|| ClientError::Transport("empty answer".into()))
    }

    pub async fn heartbeat(
        &self,
        runner_id: RunnerId,
        running_jobs: Vec<JobId>,
        metrics: Option<Metrics>,
    ) -> Result<HeartbeatReply, ClientError> {
        let body = Heartbeat { running_jobs, metrics };
        Ok(self.post_key(&runner_route::heartbeat(runner_id), &body).await?.unwrap_or_default())
    }

    /// Removes this runner from the control plane as it leaves; what it still holds goes back to the queue.
    pub async fn deregister(&self, runner_id: RunnerId) -> Result<(), ClientError> {
        self.post_key::<_, serde_json::Value>(runner_route::DEREGISTER, &Deregister { runner_id }).await.map(|_| ())
    }

    /// Long-polls for up to `max_jobs` jobs (a runner's free slots); empty when none came within `wait_s`.
    pub async fn next_jobs(&self, runner_id: RunnerId, wait_s: u64, max_jobs: u32) -> Result<Vec<Job>, ClientError> {
        let request = self
            .post_with_key(runner_route::NEXT_JOB)
            .json(&NextJob { runner_id, wait_s: Some(wait_s), max_jobs: Some(max_jobs) })
            .timeout(Duration::from_secs(wait_s + 15));
        Ok(self.send::<JobBatch>(request, false).await?.map(|batch| batch.jobs).unwrap_or_default())
    }

    /// Long-polls for deliveries to destinations this runner's labels serve (issue #49); empty when none came.
    pub async fn next_deliveries(
        &self,
        runner_id: RunnerId,
        wait_s: u64,
    ) -> Result<Vec<hookflow_shared::api::destinations::RunnerDelivery>, ClientError> {
        use hookflow_shared::api::destinations::{NextDeliveries, RunnerDeliveries};
        let request = self
            .post_with_key(runner_route::NEXT_DELIVERIES)
            .json(&NextDeliveries { runner_id, wait_s: Some(wait_s) })
            .timeout(Duration::from_secs(wait_s + 15));
        Ok(self.send::<RunnerDeliveries>(request, false).await?.map(|d| d.deliveries).unwrap_or_default())
    }

    /// Reports what one delivery's attempt came to.
    pub async fn report_delivery(
        &self,
        delivery: hookflow_shared::DeliveryId,
        result: &hookflow_shared::api::destinations::DeliveryResult,
    ) -> Result<(), ClientError> {
        self.send::<serde_json::Value>(self.post_with_key(&runner_route::delivery_result(delivery)).json(result), false)
            .await
            .map(drop)
    }

    /// Posts a report body of `count` results under the job token (made by
    /// [`hookflow_shared::api::runners::NodeReportBatch::into_body`]).
    pub async fn report(&self, job: &Job, body: bytes::Bytes, count: usize) -> Result<ReportReply, ClientError> {
        let request = self
            .post_as_job(&runner_route::job_nodes(job.job_id), job)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        let reply = self.send(request, true).await?.unwrap_or_default();
        metrics::counter!("hookflow_runner_results_posted_total").increment(count as u64);
        Ok(reply)
    }

    pub async fn complete(&self, job: &Job, status: FinalStatus, error: Option<String>) -> Result<(), ClientError> {
        self.complete_with(job, status, error, &NodeReportBatch::default()).await
    }

    /// Completes the job carrying `results` (the ones not reported yet) in the same request: one request and one
    /// statement on the server instead of a report and a completion. A server older than `results` answers 400.
    pub async fn complete_with(
        &self,
        job: &Job,
        status: FinalStatus,
        error: Option<String>,
        results: &NodeReportBatch,
    ) -> Result<(), ClientError> {
        let body = results.completion_body(status, error).map_err(|e| ClientError::Transport(e.to_string()))?;
        let request = self
            .post_as_job(&runner_route::job_complete(job.job_id), job)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        // The answer (the execution as it ended) is not needed: it is read without being kept.
        self.send::<serde::de::IgnoredAny>(request, true).await?;
        metrics::counter!("hookflow_runner_results_posted_total").increment(results.len() as u64);
        Ok(())
    }
}

impl crate::engine::webhook::CaptureSource for Client {
    fn wait<'a>(
        &'a self,
        job: &'a Job,
        wait: &'a CaptureWait,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<CaptureWaitReply, crate::engine::webhook::PollFailed>> + Send + 'a>,
    > {
        Box::pin(async move {
            let request = self
                .post_as_job(&runner_route::job_captures(job.job_id), job)
                .json(wait)
                .timeout(Duration::from_millis(wait.wait_ms.unwrap_or(25_000)) + Duration::from_secs(15));
            match self.send::<CaptureWaitReply>(request, true).await {
                Ok(reply) => Ok(reply.unwrap_or_default()),
                Err(e) => {
                    let refused = matches!(&e, ClientError::Status { status, .. } if status.is_client_error()
                        && *status != StatusCode::TOO_MANY_REQUESTS)
                        || matches!(e, ClientError::JobLost(_) | ClientError::Refused(_));
                    Err(crate::engine::webhook::PollFailed { refused, message: e.to_string() })
                }
            }
        })
    }
}
