//! Claim: one statement picks up to N queued executions (`FOR UPDATE SKIP LOCKED`), leases them, records each
//! job with its hashed token, and logs each `running` status and first `node.started` event; then the secrets
//! each run references are decrypted for its claim. A runner serving every organization (the embedded runner)
//! takes one execution of each organization per statement, least recently served organization first, and never
//! more than an organization's share of its slots; it finds those organizations by walking the queue's own index
//! (one probe per organization with queued work), so its cost does not grow with the number of organizations.

use crate::error::{ApiError, ApiResult};
use crate::queue::events::{LOG, bump};
use crate::queue::secrets;
use chrono::{DateTime, Utc};
use hookflow_shared::api::runners::{Job, JobFlow, NetworkPolicy, VariableLayers};
use hookflow_shared::token::{self, TokenKind};
use hookflow_shared::{ExecutionId, FlowId, JobId, OrgId, RunnerId};
use serde_json::value::RawValue;
use sqlx::PgConnection;
use std::collections::BTreeMap;
use std::time::Duration;

/// What a claim needs of the server's settings.
#[derive(Debug, Clone, Copy)]
pub struct ClaimSettings<'a> {
    /// How long a claim holds a job.
    pub lease: Duration,
    /// Whether the embedded runner may reach private networks for every organization.
    pub allow_private_targets: bool,
    /// How long the embedded runner runs a flow at most (`--embedded-runner-max-run-s`).
    pub embedded_max_run: Duration,
    /// Opens the secrets a run references, and tags executions' capture URLs.
    pub master_key: &'a crate::crypto::MasterKey,
    /// The base of capture URLs (`--capture-url`), for each job's `capture_url`.
    pub capture_url: &'a str,
}

/// Who claims, which decides where the run's requests may go.
#[derive(Debug, Clone, Copy)]
pub enum Claimer {
    /// A registered runner; `embedded` for the server's own, which runs every organization's flows.
    Runner { id: RunnerId, embedded: bool },
    /// The caller of an ephemeral launch (the CLI), who runs the flow on its own machine.
    Caller,
}

impl Claimer {
    fn runner_id(self) -> Option<RunnerId> {
        match self {
            Claimer::Runner { id, .. } => Some(id),
            Claimer::Caller => None,
        }
    }

    /// Installed runners and callers reach the networks they were placed in; the embedded runner reaches private
    /// networks only for organizations the operator allowed.
    fn network(self, private_allowed: bool) -> NetworkPolicy {
        match self {
            Claimer::Runner { embedded: true, .. } if private_allowed => NetworkPolicy::Private,
            Claimer::Runner { embedded: true, .. } => NetworkPolicy::Public,
            Claimer::Runner { .. } | Claimer::Caller => NetworkPolicy::Any,
        }
    }
}

impl Claimer {
    /// How long the run may last: what the flow asked for, cut to `--embedded-runner-max-run-s` on the embedded
    /// runner (one tenant's day-long runs must not hold its shared slots), with a note saying so.
    fn run_time(self, asked_s: u64, settings: &ClaimSettings<'_>) -> (u64, Option<String>) {
        let cap = settings.embedded_max_run.as_secs();
        match self {
            Claimer::Runner { embedded: true, .. } if asked_s > cap => (
                cap,
                Some(format!(
                    "the server's embedded runner runs a flow for at most {cap} s (--embedded-runner-max-run-s); \
                     this flow asked for {asked_s} s: run it on an installed runner"
                )),
            ),
            _ => (asked_s, None),
        }
    }
}

/// Which execution to claim.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// The queued execution of one organization whose labels the runner carries, highest priority first (1), then
    /// the oldest, while the runner exists (`executions_queued` holds them in that order).
    Organization { org_id: OrgId, labels: &'a [String] },
    /// The same (within each organization, highest priority first, then the oldest) across organizations, least
    /// recently served organization first, skipping organizations that
    /// hold `org_slots` of this runner's jobs already (the embedded runner).
    AnyOrganization { labels: &'a [String], org_slots: u32 },
    /// One queued execution, for an ephemeral launch.
    Execution { org_id: OrgId, execution_id: ExecutionId },
    /// An ephemeral claim whose answer was lost: handed out again with a new job and token while nothing has
    /// been reported under the old one, which then gets 409.
    Reissue { org_id: OrgId, execution_id: ExecutionId },
}

impl Target<'_> {
    /// The `picked` CTE: `id`, `attempt`, `first_node` of the rows to claim (at most one per job id in `$2`),
    /// locked. Its parameters start at `$5`.
    fn pick(&self) -> &'static str {
        match self {
            // Only while the runner exists: its poll may have taken its labels from memory (`queue::seen`).
            Target::Organization { .. } => {
                "WITH picked AS (
                    SELECT id, attempt, node_ids[1] AS first_node FROM executions
                    WHERE organization_id = $5 AND status = 'queued' AND runner_labels <@ $6
                        AND EXISTS (SELECT 1 FROM runners r WHERE r.id = $1 AND r.organization_id = $5)
                    ORDER BY priority, id LIMIT cardinality($2::uuid[]) FOR UPDATE SKIP LOCKED)"
            }
            // `queued` walks `executions_queued` from one organization with queued work to the next (a loose index
            // scan); each is then looked up by its key (scalar subqueries: never a join the planner could turn into
            // a scan of every organization), and skipped while it holds `$6` of this runner's jobs.
            Target::AnyOrganization { .. } => {
                "WITH RECURSIVE queued(org) AS (
                    (SELECT organization_id FROM executions WHERE status = 'queued' ORDER BY organization_id LIMIT 1)
                    UNION ALL
                    SELECT (SELECT e.organization_id FROM executions e
                            WHERE e.status = 'queued' AND e.organization_id > q.org
                            ORDER BY e.organization_id LIMIT 1)
                    FROM queued q WHERE q.org IS NOT NULL),
                turns AS (
                    SELECT q.org AS id,
                        (SELECT o.last_claim_at FROM organizations o WHERE o.id = q.org) AS last_claim_at
                    FROM queued q
                    WHERE q.org IS NOT NULL
                        AND (SELECT count(*) FROM executions r
                             WHERE r.organization_id = q.org AND r.status = 'running' AND r.runner_id = $1) < $6),
                picked AS (
                    SELECT q.* FROM (SELECT id FROM turns ORDER BY last_claim_at NULLS FIRST, id) o
                    CROSS JOIN LATERAL (
                        SELECT id, attempt, node_ids[1] AS first_node FROM executions
                        WHERE organization_id = o.id AND status = 'queued' AND runner_labels <@ $5
                        ORDER BY priority, id LIMIT 1 FOR UPDATE SKIP LOCKED) q
                    LIMIT cardinality($2::uuid[]))"
            }
            Target::Execution { .. } => {
                "WITH picked AS (
                    SELECT id, attempt, node_ids[1] AS first_node FROM executions
                    WHERE organization_id = $5 AND id = $6 AND status = 'queued' FOR UPDATE)"
            }
            Target::Reissue { .. } => {
                "WITH picked AS (
                    SELECT id, attempt, node_ids[1] AS first_node FROM executions e
                    WHERE organization_id = $5 AND id = $6 AND status = 'running' AND runner_id IS NULL
                        AND NOT EXISTS (SELECT 1 FROM node_results r WHERE r.execution_id = e.id)
                    FOR UPDATE)"
            }
        }
    }

    /// The organization's turn is recorded only when runners serve several.
    fn served(&self) -> &'static str {
        match self {
            Target::AnyOrganization { .. } => {
                ",
served AS (UPDATE organizations o SET last_claim_at = now()
    WHERE o.id = ANY(ARRAY(SELECT organization_id FROM transition)))"
            }
            _ => "",
        }
    }
}

/// The claim after the pick: `$1` runner, `$2` job ids, `$3` lease seconds, `$4` token hashes (the n-th picked
/// row, by id, takes the n-th job id and hash); the target's parameters follow (public so tests and benchmarks
/// can look at its plan).
pub fn statement(target: &Target<'_>) -> String {
    format!(
        "{},
numbered AS (SELECT p.*, row_number() OVER (ORDER BY p.id) AS n FROM picked p),
events AS (
    SELECT id, n, array_remove(ARRAY[
        jsonb_build_object('type', 'execution.status', 'status', 'running', 'attempt', attempt,
            'runner_id', $1::uuid)::text,
        CASE WHEN first_node IS NOT NULL THEN
            jsonb_build_object('type', 'node.started', 'node_id', first_node, 'attempt', attempt)::text END
    ], NULL) AS events
    FROM numbered),
transition AS (
    UPDATE executions e SET status = 'running', runner_id = $1, job_id = ($2::uuid[])[ev.n],
        lease_expires_at = now() + make_interval(secs => $3), started_at = COALESCE(e.started_at, now()),
        {}
    FROM events ev WHERE e.id = ev.id
    RETURNING e.id, e.event_count, ev.events, e.watchers, ev.n, e.job_id, e.organization_id, e.attempt, e.flow_id,
        e.flow_name,
        e.flow_version, e.definition, e.modules, e.environment, e.variables, e.variable_layers, e.lease_expires_at,
        e.timeout_s, e.trigger_depth,
        (SELECT o.private_network FROM organizations o WHERE o.id = e.organization_id) AS private_network),
job AS (
    INSERT INTO jobs (id, execution_id, organization_id, attempt, runner_id, token_hash)
    SELECT job_id, id, organization_id, attempt, $1, ($4::bytea[])[n] FROM transition){}{}",
        target.pick(),
        bump("ev.events"),
        target.served(),
        *LOG
    )
}

#[derive(Debug, sqlx::FromRow)]
struct Claimed {
    id: ExecutionId,
    job_id: JobId,
    organization_id: OrgId,
    attempt: i32,
    /// NULL for an inline definition's execution.
    flow_id: Option<FlowId>,
    flow_name: String,
    flow_version: Option<i32>,
    /// JSON text (the columns are text: nothing queries into a snapshot).
    definition: String,
    modules: String,
    environment: Option<String>,
    variables: serde_json::Value,
    variable_layers: Option<sqlx::types::Json<VariableLayers>>,
    lease_expires_at: DateTime<Utc>,
    timeout_s: i32,
    trigger_depth: i32,
    private_network: bool,
}

/// Claims an execution for `claimer`; `None` when nothing matched.
pub async fn claim(
    conn: &mut PgConnection,
    settings: &ClaimSettings<'_>,
    claimer: Claimer,
    target: Target<'_>,
) -> ApiResult<Option<Job>> {
    Ok(claim_many(conn, settings, claimer, target, 1).await?.pop())
}

/// Claims up to `n` executions for `claimer` in one statement, highest priority first, then the oldest (empty
/// when nothing matched).
pub async fn claim_many(
    conn: &mut PgConnection,
    settings: &ClaimSettings<'_>,
    claimer: Claimer,
    target: Target<'_>,
    n: usize,
) -> ApiResult<Vec<Job>> {
    let job_ids: Vec<JobId> = (0..n).map(|_| JobId::now_v7()).collect();
    let tokens: Vec<String> = (0..n).map(|_| crate::crypto::new_token(TokenKind::Job)).collect();
    let hashes: Vec<Vec<u8>> = tokens.iter().map(|t| token::hash(t)).collect();
    let query = sqlx::query_as::<_, Claimed>(sqlx::AssertSqlSafe(statement(&target)))
        .bind(claimer.runner_id())
        .bind(&job_ids)
        .bind(settings.lease.as_secs_f64())
        .bind(&hashes);
    let query = match target {
        Target::Organization { org_id, labels } => query.bind(org_id).bind(labels),
        Target::AnyOrganization { labels, org_slots } => query.bind(labels).bind(i64::from(org_slots.max(1))),
        Target::Execution { org_id, execution_id } | Target::Reissue { org_id, execution_id } => {
            query.bind(org_id).bind(execution_id)
        }
    };
    let rows = query.fetch_all(&mut *conn).await?;
    crate::metrics::claimed(rows.len());
    let mut tokens: Vec<Option<String>> = tokens.into_iter().map(Some).collect();
    let mut jobs = Vec::with_capacity(rows.len());
    for row in rows {
        let token = job_ids.iter().position(|id| *id == row.job_id).and_then(|i| tokens[i].take());
        let token =
            token.ok_or_else(|| ApiError::internal_because("a claimed row came back with a job id not given"))?;
        jobs.push(job_of(conn, settings, claimer, row, token).await?);
    }
    jobs.sort_by_key(|job| job.execution_id);
    Ok(jobs)
}

/// The job of one claimed row: its run, variables and the secrets it references.
async fn job_of(
    conn: &mut PgConnection,
    settings: &ClaimSettings<'_>,
    claimer: Claimer,
    row: Claimed,
    job_token: String,
) -> ApiResult<Job> {
    let layers = row.variable_layers.as_ref().map(|l| l.0.clone());
    // The definition is handed on as the text stored, checked to be JSON but not parsed into a value.
    let definition = RawValue::from_string(row.definition).map_err(ApiError::internal_because)?;
    let modules: BTreeMap<String, serde_json::Value> =
        serde_json::from_str(&row.modules).map_err(ApiError::internal_because)?;
    let parts = std::iter::once(secrets::Part::Text(&definition)).chain(modules.values().map(secrets::Part::Value));
    let environment = layers.iter().flat_map(|l| l.environment.values());
    // Secrets kept for registered runners are withheld from the callers of ephemeral launches.
    let withhold = matches!(claimer, Claimer::Caller);
    let wanted = secrets::Wanted { org_id: row.organization_id, parts, environment, withhold_runners_only: withhold };
    let mut secrets = secrets::resolve(conn, settings.master_key, wanted).await?;
    if row.flow_id.is_none() {
        // An inline definition names its own hosts: a secret without a host list (which goes only where the stored
        // flow points) is not handed to it (its launch was refused already; this holds if the list changed since).
        let hosts = &secrets.hosts;
        secrets.values.0.retain(|name, _| hosts.contains_key(name));
    }
    let network = claimer.network(row.private_network || settings.allow_private_targets);
    let (timeout_s, timeout_note) = claimer.run_time(u64::try_from(row.timeout_s).unwrap_or(0), settings);
    Ok(Job {
        job_id: row.job_id,
        execution_id: row.id,
        attempt: row.attempt,
        // An inline run has no flow: the nil id (runners read the id as a plain UUID).
        flow: JobFlow {
            id: row.flow_id.unwrap_or(FlowId::nil()),
            name: row.flow_name,
            version: row.flow_version,
            definition,
        },
        environment: row.environment,
        variables: serde_json::from_value(row.variables).map_err(ApiError::internal_because)?,
        secrets: secrets.values,
        modules,
        job_token,
        lease_expires_at: row.lease_expires_at.into(),
        timeout_s,
        network,
        layers,
        secret_hosts: secrets.hosts,
        withheld_secrets: secrets.withheld,
        timeout_note,
        trigger_depth: u32::try_from(row.trigger_depth).unwrap_or(0),
        capture_url: Some(crate::capture::sinks::capture_url(settings.capture_url, settings.master_key, row.id)),
    })
}
