//! The runner protocol (API.md section 2, Runner): registration, heartbeats, claims and result reports.

use crate::api::fields::{Labels, Name, RunnerText};
use crate::api::node_results::NodeResult;
use crate::ids::{CaptureId, ExecutionId, FlowId, JobId, RunnerId, WebhookId};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Host {
    #[schema(schema_with = crate::api::rules::runner_text)]
    pub hostname: String,
    #[schema(schema_with = crate::api::rules::runner_text)]
    pub os: String,
    #[schema(schema_with = crate::api::rules::runner_text)]
    pub arch: String,
    #[schema(maximum = 2_147_483_647_i64)]
    pub cpus: u32,
    #[schema(maximum = 9_223_372_036_854_775_807_i64)]
    pub memory_bytes: u64,
}

/// `POST /runners`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterRunner {
    #[schema(schema_with = crate::api::rules::name)]
    pub name: Name,
    #[serde(default)]
    #[schema(schema_with = crate::api::rules::labels)]
    pub labels: Labels,
    #[schema(schema_with = crate::api::rules::runner_text)]
    pub version: RunnerText,
    #[schema(minimum = 1, maximum = 1000)]
    pub max_concurrency: u32,
    pub host: Host,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Registered {
    pub id: RunnerId,
    pub heartbeat_interval_s: u64,
    pub poll_timeout_s: u64,
    pub lease_s: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    pub cpu_percent: f64,
    #[schema(maximum = 9_223_372_036_854_775_807_i64)]
    pub memory_used_bytes: u64,
    pub load_avg_1m: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Runner {
    pub id: RunnerId,
    pub name: String,
    pub labels: Vec<String>,
    pub version: String,
    pub max_concurrency: i32,
    /// `online` when it was seen within three heartbeat intervals, else `offline`.
    pub status: String,
    pub last_seen_at: Timestamp,
    pub running_jobs: i32,
    /// The machine the runner reported; `null` for the server's embedded runner (a machine every tenant shares).
    pub host: Option<Host>,
    pub metrics: Option<Metrics>,
    pub registered_at: Timestamp,
}

/// `POST /runners/{id}/heartbeat`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    #[serde(default)]
    #[schema(max_items = 10_000)]
    pub running_jobs: Vec<JobId>,
    pub metrics: Option<Metrics>,
}

/// Jobs the runner should stop: cancelled by a user, or no longer its to run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HeartbeatReply {
    pub cancel: Vec<JobId>,
}

/// `POST /runner/deregister`: the runner leaves; the jobs it still holds go back to the queue at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Deregister {
    pub runner_id: RunnerId,
}

/// `POST /runner/jobs/next`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NextJob {
    pub runner_id: RunnerId,
    /// Seconds to wait for a job: at most 60, default 30.
    #[schema(minimum = 0, maximum = 60)]
    pub wait_s: Option<u64>,
    /// **Added.** Claim up to this many jobs at once (a runner's free slots), answered as `{jobs: [...]}`; without
    /// it the answer is one job, as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100)]
    pub max_jobs: Option<u32>,
}

pub const MAX_WAIT_S: u64 = 60;
pub const DEFAULT_WAIT_S: u64 = 30;
/// Most jobs one poll may claim.
pub const MAX_JOBS_PER_POLL: u32 = 100;

/// **Added.** The answer to a poll that gave `max_jobs`: every job claimed, each with its own job token.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct JobBatch {
    pub jobs: Vec<Job>,
}

/// What a poll answers with 200: one job, or a batch when the poll gave `max_jobs`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum Claimed {
    Batch(JobBatch),
    One(Box<Job>),
}

/// Told apart by the batch's `jobs` key. Not derived: an untagged enum buffers its input in serde's own content
/// type, from which a job's definition (JSON text, `RawValue`) cannot be read.
impl<'de> Deserialize<'de> for Claimed {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let claimed = if value.get("jobs").is_some() {
            serde_json::from_value(value).map(Claimed::Batch)
        } else {
            serde_json::from_value(value).map(|job| Claimed::One(Box::new(job)))
        };
        claimed.map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct JobFlow {
    pub id: FlowId,
    pub name: String,
    /// The published version; null for the draft.
    pub version: Option<i32>,
    /// The definition's JSON text as stored: passed through by the control plane without being parsed again, and
    /// parsed once by the engine, straight into its typed form (`flow::definition::validate_text`).
    #[schema(value_type = crate::flow::definition::FlowDefinition)]
    pub definition: Box<RawValue>,
}

impl JobFlow {
    /// The JSON text of a definition held as a value.
    pub fn text_of(definition: &Value) -> Box<RawValue> {
        // A value always encodes (its keys are strings); were it ever refused, `null` fails the definition's check.
        serde_json::value::to_raw_value(definition).unwrap_or_else(|_| RawValue::NULL.to_owned())
    }
}

/// Where a run's requests may go, as the claim tells the engine: public addresses only, `private` (anything but
/// link-local and cloud metadata addresses), or `any` (installed runners: the networks they were placed in).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum NetworkPolicy {
    Public,
    Private,
    #[default]
    Any,
}

/// Secret values by name; `Debug` never prints them.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretValues(pub BTreeMap<String, String>);

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

/// A claim: everything a runner needs to execute one attempt of an execution.
#[derive(Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Job {
    pub job_id: JobId,
    pub execution_id: ExecutionId,
    pub attempt: i32,
    pub flow: JobFlow,
    /// The environment's key, if one was chosen.
    pub environment: Option<String>,
    /// Launch variables over environment variables over organization variables.
    pub variables: BTreeMap<String, String>,
    /// Only the secrets the definition, its modules and the variables reference.
    #[schema(value_type = BTreeMap<String, String>)]
    pub secrets: SecretValues,
    /// Definitions of the published versions module nodes run, by `<flow id>@<version or latest>`.
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, crate::flow::definition::FlowDefinition>)]
    pub modules: BTreeMap<String, Value>,
    pub job_token: String,
    pub lease_expires_at: Timestamp,
    pub timeout_s: u64,
    /// Where the run's requests may go; absent (older servers) means `any`.
    #[serde(default)]
    pub network: NetworkPolicy,
    /// `variables` layer by layer; absent in claims of older servers, which send `variables` alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<VariableLayers>,
    /// Hosts each secret may be sent to, for the secrets that name them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secret_hosts: BTreeMap<String, Vec<String>>,
    /// Secrets the run references that this claim does not carry (kept for registered runners).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld_secrets: Vec<String>,
    /// Why `timeout_s` is shorter than the flow asked for (the embedded runner's cap on a run), for the error of
    /// a run that times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_note: Option<String>,
    /// How deep in a chain of triggered runs this one is (1: launched by a capture no run sent); every request
    /// of the run carries it in `Hookflow-Trigger-Depth`. Absent (0) for runs no capture launched.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trigger_depth: u32,
    /// The execution's own capture URL (`{{execution.capture_url}}`); absent from older servers and local runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_url: Option<String>,
}

fn is_zero(depth: &u32) -> bool {
    *depth == 0
}

/// `POST /runner/jobs/{job_id}/captures` (under the job token): a webhook node's long poll for the earliest
/// capture, received since the execution was launched, that matches its rendered search.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CaptureWait {
    /// The node waiting (for the server's logs and errors).
    pub node_id: String,
    /// An endpoint of the execution's organization; absent: the execution's own capture URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_id: Option<WebhookId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<crate::api::webhooks::SearchFilter>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<crate::flow::webhook_node::RequiredSignature>,
    /// Captures other nodes of this run took already (at most 100).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(max_items = 100)]
    pub exclude: Vec<CaptureId>,
    /// How long to wait for one, in milliseconds (default 25,000, at most 55,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 55_000)]
    pub wait_ms: Option<u64>,
    /// When nothing matches: count the captures seen and say why the closest did not match (the node's last poll).
    #[serde(default)]
    pub explain: bool,
}

/// The answer to a [`CaptureWait`]: the capture, or none within `wait_ms`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CaptureWaitReply {
    /// The earliest matching capture, with its whole body.
    pub capture: Option<Box<crate::api::webhooks::Capture>>,
    /// With `explain` and no capture: captures received at the watched URL since the execution was launched.
    #[serde(default)]
    pub seen: u64,
    /// With `explain` and no capture: why the capture that came closest did not match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closest: Option<String>,
    /// The endpoint's verification is the generic `hmac` scheme with a `timestamp_header`: its valid captures
    /// cannot be replayed past the tolerance (runners keep the values of captures of schemes that sign no
    /// timestamp tainted; older servers leave this out, and their `hmac` captures count as signing none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hmac_timestamp: bool,
}

/// The variables of a claim by where they came from, lowest first. Only environment values are templates (they
/// may name secrets); launch values, organization and collection values are plain values.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct VariableLayers {
    /// Collection variables under organization variables.
    pub base: BTreeMap<String, String>,
    /// The environment's variables.
    pub environment: BTreeMap<String, String>,
    /// The launch's variables.
    pub launch: BTreeMap<String, String>,
}

impl Job {
    /// A job to run a definition without a control plane (local runs, benchmarks): no token, no secrets.
    pub fn standalone(name: &str, definition: Value, timeout_s: u64) -> Self {
        Job {
            job_id: JobId::now_v7(),
            execution_id: ExecutionId::now_v7(),
            attempt: 1,
            flow: JobFlow {
                id: FlowId::now_v7(),
                name: name.to_owned(),
                version: None,
                definition: JobFlow::text_of(&definition),
            },
            environment: None,
            variables: BTreeMap::new(),
            secrets: SecretValues::default(),
            modules: BTreeMap::new(),
            job_token: String::new(),
            lease_expires_at: Timestamp::now(),
            timeout_s,
            network: NetworkPolicy::Any,
            layers: None,
            secret_hosts: BTreeMap::new(),
            withheld_secrets: Vec::new(),
            trigger_depth: 0,
            timeout_note: None,
            capture_url: None,
        }
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("job_id", &self.job_id)
            .field("execution_id", &self.execution_id)
            .field("attempt", &self.attempt)
            .field("flow", &self.flow.id)
            .field("secrets", &self.secrets)
            .finish_non_exhaustive()
    }
}

/// The key of a module's definition in [`Job::modules`].
pub fn module_key(flow_id: FlowId, version: Option<u32>) -> String {
    match version {
        Some(n) => format!("{flow_id}@{n}"),
        None => format!("{flow_id}@latest"),
    }
}

/// `POST /runner/jobs/{job_id}/nodes`: one node result, or several.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum NodeReport {
    Many(NodeResults),
    One(Box<NodeResult>),
}

/// Several node results in one report.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NodeResults {
    pub results: Vec<NodeResult>,
}

impl NodeReport {
    pub fn into_results(self) -> Vec<NodeResult> {
        match self {
            NodeReport::Many(many) => many.results,
            NodeReport::One(result) => vec![*result],
        }
    }
}

/// The several-results form of [`NodeReport`] as runners send it, encoded result by result as they are added,
/// so a batch knows its size before it is sent.
#[derive(Debug, Clone, Default)]
pub struct NodeReportBatch {
    /// `{"results":[` and the results so far, comma-separated; closed by [`NodeReportBatch::into_body`].
    body: Vec<u8>,
    results: usize,
}

impl NodeReportBatch {
    const OPEN: &'static [u8] = br#"{"results":["#;

    /// Adds `result`; the batch is left as it was when it cannot be encoded.
    pub fn push(&mut self, result: &NodeResult) -> Result<(), serde_json::Error> {
        let before = self.body.len();
        self.body.extend_from_slice(if self.results == 0 { Self::OPEN } else { b"," });
        if let Err(e) = serde_json::to_writer(&mut self.body, result) {
            self.body.truncate(before);
            return Err(e);
        }
        self.results += 1;
        Ok(())
    }

    /// Results added so far.
    pub fn len(&self) -> usize {
        self.results
    }

    pub fn is_empty(&self) -> bool {
        self.results == 0
    }

    /// Bytes encoded so far.
    pub fn encoded_len(&self) -> usize {
        self.body.len()
    }

    /// The JSON body of a completion carrying this batch's results: `{"status":..,"error":..,"results":[..]}`,
    /// or without `results` for an empty batch (the results are not encoded again).
    pub fn completion_body(&self, status: FinalStatus, error: Option<String>) -> Result<Vec<u8>, serde_json::Error> {
        let mut body = serde_json::to_vec(&Complete::new(status, error))?;
        if self.results > 0 {
            body.pop();
            body.extend_from_slice(br#","results":["#);
            body.extend_from_slice(&self.body[Self::OPEN.len()..]);
            body.extend_from_slice(b"]}");
        }
        Ok(body)
    }

    /// The JSON body: `{"results":[..]}`, `{"results":[]}` for an empty batch (a keep-alive).
    pub fn into_body(mut self) -> Vec<u8> {
        if self.results == 0 {
            self.body.clear();
            self.body.extend_from_slice(Self::OPEN);
        }
        self.body.extend_from_slice(b"]}");
        self.body
    }
}

/// Answer to a node report: whether the runner should stop the job.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReportReply {
    pub accepted: usize,
    pub cancel: bool,
}

/// `succeeded`, `failed`, `cancelled` or `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FinalStatus {
    Succeeded,
    Failed,
    Cancelled,
    Error,
}

impl FinalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            FinalStatus::Succeeded => "succeeded",
            FinalStatus::Failed => "failed",
            FinalStatus::Cancelled => "cancelled",
            FinalStatus::Error => "error",
        }
    }
}

/// `POST /runner/jobs/{job_id}/complete`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Complete {
    pub status: FinalStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// **Added:** node results not reported yet, stored with the completion as `POST /runner/jobs/{job_id}/nodes`
    /// would have stored them first (a runner whose flow ended before its last results were posted sends them
    /// here: one request and one statement instead of two).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<NodeResult>,
}

impl Complete {
    /// A completion with no results of its own.
    pub fn new(status: FinalStatus, error: Option<String>) -> Self {
        Self { status, error, results: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::node_results::NodeStatus;

    fn result(node_id: &str) -> NodeResult {
        NodeResult {
            node_id: node_id.to_owned(),
            attempt: 1,
            status: NodeStatus::Passed,
            started_at: Timestamp::now(),
            duration_ms: 3,
            request: None,
            response: None,
            extracted: BTreeMap::from([("token".to_owned(), Value::from("a\"b"))]),
            assertions: Vec::new(),
            error: None,
            retries: 0,
            capture: None,
            items: None,
        }
    }

    /// A job's definition (JSON text) survives every way a job is read: from text, from a value, one job or a
    /// batch of them.
    #[test]
    fn a_job_reads_back_with_its_definition_from_text_and_from_a_value() {
        let definition = serde_json::json!({"nodes": [{"id": "a", "kind": "delay", "delay_ms": 1}]});
        let job = Job::standalone("j", definition.clone(), 5);
        let definition_of = |job: &Job| serde_json::from_str::<Value>(job.flow.definition.get()).expect("json");
        let one = serde_json::to_string(&Claimed::One(Box::new(job.clone()))).expect("encodes");
        let batch = serde_json::to_string(&Claimed::Batch(JobBatch { jobs: vec![job.clone()] })).expect("encodes");
        for text in [&one, &batch] {
            let jobs = match serde_json::from_str::<Claimed>(text).expect("a claim") {
                Claimed::One(job) => vec![*job],
                Claimed::Batch(batch) => batch.jobs,
            };
            assert_eq!(jobs.len(), 1);
            assert_eq!(definition_of(&jobs[0]), definition);
        }
        assert!(matches!(serde_json::from_str::<Claimed>(&batch), Ok(Claimed::Batch(_))));
        let value = serde_json::to_value(&job).expect("a value");
        assert_eq!(value["flow"]["definition"], definition);
        assert_eq!(definition_of(&serde_json::from_value::<Job>(value).expect("a job")), definition);
    }

    #[test]
    fn a_batch_encodes_what_the_server_reads_and_counts_its_bytes() {
        let empty = NodeReportBatch::default();
        assert!(empty.is_empty());
        let read = |body: Vec<u8>| serde_json::from_slice::<NodeReport>(&body).expect("a report").into_results();
        assert!(read(empty.into_body()).is_empty(), "an empty batch is the keep-alive `{{\"results\":[]}}`");

        let mut batch = NodeReportBatch::default();
        for id in ["a", "b", "c"] {
            batch.push(&result(id)).expect("encodes");
        }
        assert_eq!(batch.len(), 3);
        let encoded = batch.encoded_len();
        let body = batch.into_body();
        assert_eq!(body.len(), encoded + 2, "only the closing `]}}` is added");
        let results = read(body);
        let ids: Vec<&str> = results.iter().map(|r| r.node_id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(results[1].extracted["token"], "a\"b");
    }

    #[test]
    fn a_batch_goes_with_a_completion() {
        let read = |body: Vec<u8>| serde_json::from_slice::<Complete>(&body).expect("a completion");
        let empty = NodeReportBatch::default().completion_body(FinalStatus::Succeeded, None).expect("encodes");
        assert_eq!(empty, br#"{"status":"succeeded"}"#, "no results: the completion as older runners send it");
        let mut batch = NodeReportBatch::default();
        for id in ["a", "b"] {
            batch.push(&result(id)).expect("encodes");
        }
        let complete = read(batch.completion_body(FinalStatus::Failed, Some("it \"broke\"".into())).expect("encodes"));
        assert_eq!((complete.status, complete.error.as_deref()), (FinalStatus::Failed, Some("it \"broke\"")));
        let ids: Vec<&str> = complete.results.iter().map(|r| r.node_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(complete.results[0].extracted["token"], "a\"b");
    }
}
