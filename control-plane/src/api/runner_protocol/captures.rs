//! A webhook node's wait, under its job token: a long poll for the earliest capture received (since the execution
//! was launched; among the newest 1,000) at an endpoint of the execution's organization or at the execution's own
//! URL, matching the node's rendered search, and taken by no other node of the run. The poll holds no database
//! connection while it waits and reads nothing itself: it registers with its target's waiters
//! (`capture::waiters`), whose one sweep serves them all. On its last poll the node asks why nothing matched
//! (`explain`). Waits are counted per job, organization and server before anything is read.

use crate::api::runner_protocol::report::{JobCall, read_body};
use crate::api::runner_protocol::wait_conds;
use crate::api::webhooks::search::{self, Cond};
use crate::capture::cache::CaptureTarget;
use crate::capture::wait_sweep::{WINDOW, WaitSpec};
use crate::error::{ApiError, ApiResult};
use crate::extract::parse_json;
use crate::state::AppState;
use axum::Json;
use axum::body::Body;
use chrono::{DateTime, Utc};
use hookflow_shared::api::runners::{CaptureWait, CaptureWaitReply};
use hookflow_shared::api::signatures::Verdict;
use hookflow_shared::api::webhooks::MatchOp;
use hookflow_shared::flow::webhook_node::RequiredSignature;
use hookflow_shared::wire::runner_route;
use hookflow_shared::{CaptureId, ExecutionId, OrgId, WebhookId};
use sqlx::{PgPool, Postgres, QueryBuilder, Row as _};
use std::time::Duration;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(wait_for_capture))
}

/// A wait is a node id, a search and a list of taken ids.
const WAIT_BODY_LIMIT: usize = 64 * 1024;
const DEFAULT_WAIT_MS: u64 = 25_000;
const MAX_WAIT_MS: u64 = 55_000;
const MAX_EXCLUDED: usize = 100;
/// Captures an explanation looks at, newest first.
const EXPLAINED: i64 = 50;

/// Wait for a capture (a webhook node's long poll): the earliest capture received at the watched URL since the
/// execution was launched that matches the search and was not taken by another node. Answers within `wait_ms`.
#[utoipa::path(post, operation_id = "wait_for_capture", path = runner_route::JOB_CAPTURES,
    params(("job_id" = Uuid, Path)),
    request_body = CaptureWait,
    responses((status = 200, description = "The capture, or none within `wait_ms`", body = CaptureWaitReply),
        (status = 400, description = "The search is not valid"), (status = 401),
        (status = 404, description = "`webhook_id` is not an endpoint of the execution's organization"),
        (status = 409), (status = 429, description = "The job has 4 waits open already, the organization or the \
            server its limit of waits (`--max-waits-per-organization`, `--max-waits`), or the job token made more \
            than 50 requests in the last second")),
    security(("job_token" = [])))]
async fn wait_for_capture(call: JobCall, body: Body) -> ApiResult<Json<CaptureWaitReply>> {
    let app = call.app.clone();
    // This future lives as long as the wait: the statements' futures are boxed, so they take memory only while
    // they run, and it holds nothing of the request's head (as in the runner's claim, which says why).
    let job = Box::pin(async { call.authorize(&mut *app.pool.acquire().await?, false).await }).await?;
    call.proven();
    // Counted before anything else is read: past its job's, its organization's or the server's limit, a wait costs
    // nothing more.
    let _open = app.waiters.open(job.job_id, job.org_id)?;
    let wait: CaptureWait = parse_json(&read_body(body, WAIT_BODY_LIMIT).await?)?;
    if wait.exclude.len() > MAX_EXCLUDED {
        return Err(ApiError::invalid(format!("`exclude` holds at most {MAX_EXCLUDED} captures")));
    }
    let matcher = Box::pin(Matcher::new(&app.pool, job.execution_id, &wait)).await?;
    let wait_ms = wait.wait_ms.unwrap_or(DEFAULT_WAIT_MS).min(MAX_WAIT_MS);
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    let mut waiting = app.waiters.wait(matcher.spec()).await;
    let found = tokio::select! {
        row = waiting.found() => Some(row),
        () = tokio::time::sleep_until(deadline) => None,
        () = app.shutdown.cancelled() => None,
    };
    drop(waiting);
    if let Some(row) = found {
        return Ok(Json(CaptureWaitReply {
            capture: Some(Box::new(row.into())),
            hmac_timestamp: matcher.hmac_timestamp,
            ..CaptureWaitReply::default()
        }));
    }
    let mut reply = CaptureWaitReply::default();
    if wait.explain {
        (reply.seen, reply.closest) = Box::pin(matcher.explain(&app.pool)).await?;
    }
    Ok(Json(reply))
}

/// What a wait looks for, checked and turned into conditions.
struct Matcher {
    org_id: OrgId,
    target: CaptureTarget,
    since: DateTime<Utc>,
    /// The search's conditions, each with how it reads in `q`.
    conds: Vec<(Cond, String)>,
    exclude: Vec<CaptureId>,
    /// The endpoint enforces signatures: captures it refused satisfy nothing.
    enforced: bool,
    /// The endpoint verifies the generic `hmac` scheme with a timestamp (`CaptureWaitReply::hmac_timestamp`).
    hmac_timestamp: bool,
}

impl Matcher {
    async fn new(pool: &PgPool, execution_id: ExecutionId, wait: &CaptureWait) -> ApiResult<Self> {
        let (org_id, since, definition, modules): (OrgId, DateTime<Utc>, String, String) =
            sqlx::query_as("SELECT organization_id, created_at, definition, modules FROM executions WHERE id = $1")
                .bind(execution_id)
                .fetch_optional(pool)
                .await?
                .ok_or_else(|| ApiError::not_found("execution"))?;
        let (target, (enforced, hmac_timestamp)) = match wait.webhook_id {
            None => (CaptureTarget::Execution(execution_id), (false, false)),
            // A job token reads only the endpoints its run's webhook nodes name: it is not a key with
            // `webhooks:read` (an ephemeral caller holds one with `flows:execute` alone).
            Some(webhook_id) if !names_endpoint(&definition, &modules, webhook_id) => {
                return Err(ApiError::not_found("webhook"));
            }
            Some(webhook_id) => {
                let enforced: Option<(bool, bool)> = sqlx::query_as(
                    "SELECT COALESCE(verification->>'mode' IN ('enforce', 'reject'), false),
                            COALESCE(verification->>'scheme' = 'hmac'
                                     AND verification->>'timestamp_header' IS NOT NULL, false)
                     FROM webhooks WHERE id = $1 AND organization_id = $2",
                )
                .bind(webhook_id)
                .bind(org_id)
                .fetch_optional(pool)
                .await?;
                (CaptureTarget::Webhook(webhook_id), enforced.ok_or_else(|| ApiError::not_found("webhook"))?)
            }
        };
        let mut conds: Vec<Cond> = search::from_text(wait.q.as_deref().unwrap_or_default())?;
        if let Some(filter) = &wait.filter {
            conds.extend(search::from_filter(filter)?);
        }
        search::check_conditions(&conds)?;
        search::check_json_paths(pool, &conds).await?;
        if wait.signature == Some(RequiredSignature::Valid) {
            conds.push(Cond::Signatures(vec![Verdict::Valid]));
        }
        let conds = conds.into_iter().map(|cond| (describe(&cond), cond)).map(|(text, cond)| (cond, text)).collect();
        // Ids are kept as given: one of another execution's captures simply never matches.
        Ok(Self { org_id, target, since, conds, exclude: wait.exclude.clone(), enforced, hmac_timestamp })
    }

    /// `FROM captures WHERE` the watched URL, since the execution was launched (and not refused by `enforce`).
    fn scope(&self, b: &mut QueryBuilder<Postgres>) {
        b.push(" FROM captures WHERE organization_id = ").push_bind(self.org_id);
        match self.target {
            CaptureTarget::Webhook(id) => b.push(" AND webhook_id = ").push_bind(id),
            CaptureTarget::Execution(id) => b.push(" AND execution_id = ").push_bind(id),
        };
        b.push(" AND received_at >= ").push_bind(self.since);
        if self.enforced {
            b.push(" AND signature_verdict NOT IN ('invalid', 'missing', 'duplicate')");
        }
    }

    /// What the waiters' sweep looks for (`capture::wait_sweep`).
    fn spec(&self) -> WaitSpec {
        WaitSpec {
            org_id: self.org_id,
            target: self.target,
            since: self.since,
            enforced: self.enforced,
            exclude: self.exclude.clone(),
            conds: self.conds.iter().map(|(cond, _)| wait_conds::of(cond)).collect(),
        }
    }

    /// How many captures arrived at the watched URL since the launch, and why the one that came closest (most
    /// conditions met; the latest among equals) did not match.
    async fn explain(&self, pool: &PgPool) -> ApiResult<(u64, Option<String>)> {
        // Counted over the newest captures a wait looks at, never over all of them.
        let mut count = QueryBuilder::new("SELECT count(*) FROM (SELECT 1");
        self.scope(&mut count);
        count.push(" ORDER BY received_at DESC, id DESC LIMIT ").push_bind(WINDOW).push(") AS newest");
        let seen: i64 = count.build_query_scalar().fetch_one(pool).await?;
        // The conditions are read over the newest few captures only, never over all of them.
        let mut b = QueryBuilder::new("SELECT id, (id = ANY(");
        b.push_bind(self.exclude.clone()).push(")) AS taken");
        for (i, (cond, _)) in self.conds.iter().enumerate() {
            b.push(", COALESCE((true");
            search::push_cond(&mut b, cond);
            b.push(format!("), false) AS m{i}"));
            if let Cond::BodyJsonText { path, .. } = cond {
                b.push(", (SELECT left(v #>> '{}', 80) FROM jsonb_path_query_first(hookflow_try_jsonb(body), ");
                b.push_bind(path.clone()).push(format!("::jsonpath) AS v) AS a{i}"));
            }
        }
        b.push(" FROM (SELECT *");
        self.scope(&mut b);
        b.push(" ORDER BY received_at DESC, id DESC LIMIT ").push_bind(EXPLAINED);
        b.push(") AS newest ORDER BY received_at DESC, id DESC");
        let rows = b.build().fetch_all(pool).await?;
        let mut closest: Option<(usize, CaptureId, String)> = None;
        for row in &rows {
            let id: CaptureId = row.try_get("id")?;
            let mut met = 0;
            let mut failed = None;
            for (i, (cond, text)) in self.conds.iter().enumerate() {
                if row.try_get::<bool, _>(format!("m{i}").as_str())? {
                    met += 1;
                } else if failed.is_none() {
                    let actual = match cond {
                        Cond::BodyJsonText { .. } => {
                            match row.try_get::<Option<String>, _>(format!("a{i}").as_str())? {
                                Some(value) => format!(" (it has `{value}` there)"),
                                None => " (it has nothing there)".to_owned(),
                            }
                        }
                        _ => String::new(),
                    };
                    failed = Some(format!("it does not match `{text}`{actual}"));
                }
            }
            let reason = match failed {
                None if row.try_get::<bool, _>("taken")? => "another node of this run took it".to_owned(),
                None => "it arrived while this node was not waiting; it matches now".to_owned(),
                Some(reason) => reason,
            };
            if closest.as_ref().is_none_or(|(best, _, _)| met > *best) {
                closest = Some((met, id, reason));
            }
        }
        let total = self.conds.len();
        let closest =
            closest.map(|(met, id, reason)| format!("capture {id} met {met} of {total} conditions: {reason}"));
        Ok((u64::try_from(seen).unwrap_or(0), closest))
    }
}

/// Whether a webhook node of the run (in its definition or a module's) waits on `webhook_id`.
fn names_endpoint(definition: &str, modules: &str, webhook_id: WebhookId) -> bool {
    let id = webhook_id.to_string();
    let definition = serde_json::from_str::<serde_json::Value>(definition).ok();
    let modules = serde_json::from_str::<serde_json::Value>(modules).ok();
    let modules = modules.as_ref().and_then(serde_json::Value::as_object).into_iter().flat_map(|m| m.values());
    definition.iter().chain(modules).any(|flow| {
        flow["nodes"].as_array().is_some_and(|nodes| {
            nodes.iter().any(|node| node["kind"] == "webhook" && node["webhook"]["webhook_id"] == id.as_str())
        })
    })
}

/// A condition as `q` would write it.
fn describe(cond: &Cond) -> String {
    let value = |v: &Option<String>| v.clone().unwrap_or_else(|| "*".to_owned());
    let field = |name: String, op: MatchOp, v: &Option<String>| match op {
        MatchOp::Eq | MatchOp::Exists => format!("{name}:{}", value(v)),
        other => format!("{name} {} {}", other.as_str(), value(v)),
    };
    match cond {
        Cond::Methods(methods) => format!("method:{}", methods.join(",")),
        Cond::ReceivedAfter(t) => format!("received_after:{}", t.to_rfc3339()),
        Cond::ReceivedBefore(t) => format!("received_before:{}", t.to_rfc3339()),
        Cond::Header { name, op, value: v } => field(format!("header.{name}"), *op, v),
        Cond::Query { name, op, value: v } => field(format!("query.{name}"), *op, v),
        Cond::BodyContains(text) => format!("body:{text}"),
        Cond::BodyJson { path, op, value: v } => {
            format!("body {path} {} {}", op.as_str(), v.as_ref().map_or("*".to_owned(), ToString::to_string))
        }
        Cond::BodyJsonText { path, value: v } => format!("body.{path}:{}", value(v)),
        Cond::ContentType(prefix) => format!("content_type:{prefix}"),
        Cond::MinSize(n) => format!("min_size:{n}"),
        Cond::MaxSize(n) => format!("max_size:{n}"),
        Cond::SourceIp(ip) => format!("ip:{ip}"),
        Cond::PathContains(text) => format!("path:{text}"),
        Cond::Signatures(verdicts) => {
            format!("signature:{}", verdicts.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(","))
        }
        Cond::Handshake(preset) => format!("handshake:{}", preset.as_str()),
        Cond::Not(inner) => format!("-{}", describe(inner)),
    }
}
