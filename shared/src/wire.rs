//! The wire contract spelled once: the header names every client and the server use, the runner protocol's
//! paths, the header parameters the OpenAPI document declares, and reading the error body of any answer.

use crate::error::{ErrorBody, ErrorCode};

/// Header names, lower case as HTTP/2 carries them (HTTP/1 compares them without case).
pub mod header {
    /// An API key: `hf_...`.
    pub const API_KEY: &str = "x-api-key";
    /// The organization a request acts in.
    pub const ORGANIZATION: &str = "x-organization-id";
    /// Marks launches from the CLI so executions show `trigger: cli`.
    pub const TRIGGER: &str = "x-hookflow-trigger";
    /// Launches: retries with the same key and body replay the first answer.
    pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
    /// On a replayed launch answer.
    pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";
    /// Streams: resume after this event id.
    pub const LAST_EVENT_ID: &str = "last-event-id";
    /// On every response; given by the caller or made by the server.
    pub const REQUEST_ID: &str = "x-request-id";
    /// The CSRF guard of cookie-borne refresh tokens: any value, which a cross-site form cannot send.
    pub const CSRF: &str = "x-hookflow-csrf";
    /// Sent by the engine on every request of a run an endpoint's trigger launched: how deep in a chain of
    /// triggered runs it is. A capture carrying it launches one deeper, up to the server's stated depth.
    pub const TRIGGER_DEPTH: &str = "hookflow-trigger-depth";
}

/// The runner protocol's paths, relative to the base URL.
pub mod runner_route {
    use crate::ids::{JobId, RunnerId};

    /// `POST`: register a runner.
    pub const RUNNERS: &str = "/runners";
    /// `GET`, `DELETE`: one runner (OpenAPI form).
    pub const RUNNER: &str = "/runners/{id}";
    /// `POST`: a runner's heartbeat (OpenAPI form).
    pub const HEARTBEAT: &str = "/runners/{id}/heartbeat";
    /// `POST`: long poll for the next job(s).
    pub const NEXT_JOB: &str = "/runner/jobs/next";
    /// `POST` under the job token: node results (OpenAPI form).
    pub const JOB_NODES: &str = "/runner/jobs/{job_id}/nodes";
    /// `POST` under the job token: completion (OpenAPI form).
    pub const JOB_COMPLETE: &str = "/runner/jobs/{job_id}/complete";
    /// `POST` under the job token: a webhook node's long poll for a capture (OpenAPI form).
    pub const JOB_CAPTURES: &str = "/runner/jobs/{job_id}/captures";
    /// `POST`: a runner leaving (`--max-jobs`, `--idle-exit-s`, a SIGTERM drain) removes itself (issue #53).
    pub const DEREGISTER: &str = "/runner/deregister";
    /// `GET`: every runner pool's numbers, for autoscalers (issue #53).
    pub const POOLS: &str = "/runner/pools";
    /// `GET`: one runner pool's numbers (OpenAPI form).
    pub const POOL: &str = "/runner/pools/{pool}";
    /// `POST`: long poll for deliveries to destinations with runner labels (issue #49).
    pub const NEXT_DELIVERIES: &str = "/runner/deliveries/next";
    /// `POST`: what one delivery's attempt came to (OpenAPI form).
    pub const DELIVERY_RESULT: &str = "/runner/deliveries/{delivery_id}/result";

    /// [`DELIVERY_RESULT`] for one delivery.
    pub fn delivery_result(id: crate::ids::DeliveryId) -> String {
        DELIVERY_RESULT.replace("{delivery_id}", &id.to_string())
    }

    /// [`RUNNER`] for one runner.
    pub fn runner(id: RunnerId) -> String {
        RUNNER.replace("{id}", &id.to_string())
    }

    /// [`HEARTBEAT`] for one runner.
    pub fn heartbeat(id: RunnerId) -> String {
        HEARTBEAT.replace("{id}", &id.to_string())
    }

    /// [`JOB_NODES`] for one job.
    pub fn job_nodes(job: JobId) -> String {
        JOB_NODES.replace("{job_id}", &job.to_string())
    }

    /// [`JOB_CAPTURES`] for one job.
    pub fn job_captures(job: JobId) -> String {
        JOB_CAPTURES.replace("{job_id}", &job.to_string())
    }

    /// [`JOB_COMPLETE`] for one job.
    pub fn job_complete(job: JobId) -> String {
        JOB_COMPLETE.replace("{job_id}", &job.to_string())
    }
}

/// The `Idempotency-Key` header parameter of launch operations.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyHeader {
    /// Retries with the same key and body replay the first answer (1 to 255 characters).
    #[param(rename = "Idempotency-Key", pattern = "^[!-~]([\t -~]{0,253}[!-~])?$")]
    pub idempotency_key: Option<String>,
}

/// The `Last-Event-ID` header parameter of streams.
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub struct LastEventIdHeader {
    /// Resume after this event id.
    #[param(rename = "Last-Event-ID")]
    pub last_event_id: Option<String>,
}

/// An error answer as a client reads it: the contract's body when there is one, else what the status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    /// `None` when the body was not the contract's error body (a proxy's page, say).
    pub code: Option<ErrorCode>,
    pub message: String,
    pub request_id: Option<String>,
}

impl Refusal {
    /// Reads an error answer's body; never fails.
    pub fn parse(status: u16, body: &[u8]) -> Self {
        match serde_json::from_slice::<ErrorBody>(body) {
            Ok(ErrorBody { error }) => Refusal {
                status,
                code: Some(error.code),
                message: error.message,
                request_id: Some(error.request_id).filter(|id| !id.is_empty()),
            },
            Err(_) => {
                Refusal { status, code: None, message: format!("the server answered {status}"), request_id: None }
            }
        }
    }

    /// The code's name, or `error` when the body had none.
    pub fn code_name(&self) -> &'static str {
        self.code.map_or("error", ErrorCode::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{JobId, RunnerId};

    #[test]
    fn refusals_read_the_contract_body_and_survive_anything_else() {
        let body = br#"{"error": {"code": "not_found", "message": "flow not found", "request_id": "r-1"}}"#;
        let refusal = Refusal::parse(404, body);
        assert_eq!(refusal.code, Some(ErrorCode::NotFound));
        assert_eq!(refusal.message, "flow not found");
        assert_eq!(refusal.request_id.as_deref(), Some("r-1"));
        let proxy = Refusal::parse(502, b"<html>bad gateway</html>");
        assert_eq!((proxy.code, proxy.code_name()), (None, "error"));
        assert_eq!(proxy.message, "the server answered 502");
    }

    #[test]
    fn runner_routes_fill_in_their_ids() {
        let (job, runner) = (JobId::nil(), RunnerId::nil());
        assert_eq!(runner_route::job_complete(job), format!("/runner/jobs/{job}/complete"));
        assert_eq!(runner_route::heartbeat(runner), format!("/runners/{runner}/heartbeat"));
        assert!(!runner_route::job_nodes(job).contains('{'));
    }
}
