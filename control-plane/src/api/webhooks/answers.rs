//! An endpoint's `rules` and `cors` as written (#51): each rule checked with every refusal naming its field
//! (`rules[2].path`), its `q` and `filter` compiled by the capture search (as triggers' are) into the condition rows
//! the capture path weighs (stored beside the rules); and `POST /webhooks/{id}/rules/test`, which asks the capture
//! path's own answering (and the endpoint's handshake preset) what the capture URL would answer to a request,
//! storing nothing.

use crate::api::context::Ctx;
use crate::api::runner_protocol::wait_conds;
use crate::api::webhooks::search;
use crate::auth::scope;
use crate::capture::answer::rules::{PathTemplate, RuleCond};
use crate::capture::answer::template::Template;
use crate::capture::answer::{self, Answers, Incoming};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, Id};
use axum::Json;
use hookflow_shared::api::answers::{
    Cors, RENDERED_MAX, RULE_BODY_MAX, RULE_DELAY_MAX_MS, RULE_PATH_MAX, RULE_Q_MAX, RULES_MAX, ResponseRule,
    RuleMethod, RulesTest, RulesTestResult,
};
use hookflow_shared::api::webhooks::CustomResponse;
use hookflow_shared::{CaptureId, WebhookId};
use sqlx::PgPool;
use sqlx::types::Json as SqlJson;
use std::collections::BTreeMap;

fn invalid(field: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::invalid(format!("invalid field `{field}`: {why}"))
}

/// Checks `rules` and compiles each rule's `q` and `filter` (one list of conditions per rule, in order).
pub async fn compile(pool: &PgPool, rules: &[ResponseRule]) -> ApiResult<Vec<Vec<RuleCond>>> {
    if rules.len() > RULES_MAX {
        return Err(invalid("rules", format!("at most {RULES_MAX} rules, not {}", rules.len())));
    }
    let mut compiled = Vec::with_capacity(rules.len());
    for (i, rule) in rules.iter().enumerate() {
        let field = |name: &str| format!("rules[{i}].{name}");
        check_rule(rule, &field)?;
        let mut conds = match &rule.filter {
            Some(filter) => search::from_filter(filter).map_err(|e| invalid(&field("filter"), e.message))?,
            None => Vec::new(),
        };
        if let Some(q) = &rule.q {
            conds.extend(search::from_text(q).map_err(|e| invalid(&field("q"), e.message))?);
        }
        search::check_conditions(&conds).map_err(|e| invalid(&field("q"), e.message))?;
        search::check_json_paths(pool, &conds).await.map_err(|e| match e.code {
            hookflow_shared::ErrorCode::InvalidRequest => invalid(&field("filter"), e.message),
            _ => e,
        })?;
        compiled.push(conds.iter().map(|c| RuleCond::from(&wait_conds::of(c))).collect());
    }
    Ok(compiled)
}

fn check_rule(rule: &ResponseRule, field: &dyn Fn(&str) -> String) -> ApiResult<()> {
    if rule.name.as_ref().is_some_and(|n| n.chars().count() > 200 || hookflow_shared::api::rules::is_blank(n)) {
        return Err(invalid(&field("name"), "1 to 200 characters, not only spaces"));
    }
    if let Some(path) = &rule.path {
        if path.chars().count() > RULE_PATH_MAX {
            return Err(invalid(&field("path"), format!("at most {RULE_PATH_MAX} characters")));
        }
        PathTemplate::parse(path).map_err(|e| invalid(&field("path"), e))?;
    }
    if rule.q.as_ref().is_some_and(|q| q.chars().count() > RULE_Q_MAX) {
        return Err(invalid(&field("q"), format!("at most {RULE_Q_MAX} characters")));
    }
    if !(200..=599).contains(&rule.status) || (300..400).contains(&rule.status) {
        return Err(invalid(&field("status"), "an HTTP status from 200 to 599, not a redirect"));
    }
    for (name, value) in &rule.headers {
        if axum::http::HeaderName::try_from(name.as_str()).is_err()
            || axum::http::HeaderValue::try_from(value.as_str()).is_err()
        {
            return Err(invalid(&field("headers"), format!("`{name}` is not a valid header")));
        }
        if !hookflow_shared::api::rules::custom_response_header_allowed(name) {
            return Err(invalid(
                &field("headers"),
                format!(
                    "`{name}` cannot be set on a capture answer: only Content-Type, Content-Language, Retry-After \
                     and `X-` headers of your own (it is served on the API's origin)"
                ),
            ));
        }
    }
    if let Some(body) = &rule.body {
        if body.chars().count() > RULE_BODY_MAX {
            return Err(invalid(&field("body"), format!("at most {RULE_BODY_MAX} characters")));
        }
        Template::parse(body).map_err(|e| invalid(&field("body"), e))?;
    }
    if rule.delay_ms.is_some_and(|d| d > RULE_DELAY_MAX_MS) {
        return Err(invalid(&field("delay_ms"), format!("0 to {RULE_DELAY_MAX_MS} milliseconds")));
    }
    Ok(())
}

/// Checks `cors`.
pub fn check_cors(cors: Option<&Cors>) -> ApiResult<()> {
    cors.map_or(Ok(()), |c| answer::cors::check(c).map_err(ApiError::invalid))
}

type AnswerColumns = (
    Option<SqlJson<Vec<ResponseRule>>>,
    Option<SqlJson<Vec<Vec<RuleCond>>>>,
    Option<SqlJson<Cors>>,
    Option<SqlJson<CustomResponse>>,
    bool,
    bool,
);

/// The answer of the endpoint's handshake preset, when it has one and it recognises the request (a CORS preflight
/// from an allowed origin comes first): the endpoint as the capture path holds it, with its opened secret.
async fn handshake_answer(
    app: &crate::state::AppState,
    id: WebhookId,
    org_id: hookflow_shared::OrgId,
    answers: &Answers,
    incoming: &Incoming<'_>,
    query: &str,
) -> ApiResult<Option<answer::Answer>> {
    let origin = answers.cors.as_ref().and_then(|c| answer::cors::allowed_origin(c, incoming.headers));
    if origin.is_some() && answer::cors::is_preflight(incoming.method, incoming.headers) {
        return Ok(None);
    }
    let capture = &app.capture;
    let endpoint = match capture.endpoints.lookup(id) {
        crate::capture::cache::Lookup::Known(endpoint) => Some(endpoint),
        _ => capture.endpoints.load(&app.pool, &capture.master_key, id, capture.max_rate_per_s).await?,
    };
    let Some(endpoint) = endpoint.filter(|e| e.org_id == org_id) else { return Ok(None) };
    let Some(handshake) = &endpoint.handshake else { return Ok(None) };
    let method = axum::http::Method::from_bytes(incoming.method.as_bytes()).map_err(ApiError::internal_because)?;
    let mut headers = axum::http::HeaderMap::new();
    for (name, value) in incoming.headers {
        if let (Ok(name), Ok(value)) =
            (axum::http::HeaderName::try_from(name.as_str()), axum::http::HeaderValue::try_from(value.as_str()))
        {
            headers.append(name, value);
        }
    }
    let now_s = incoming.received_at.timestamp();
    let parts =
        crate::capture::handshake::Parts { method: &method, query, headers: &headers, body: incoming.body, now_s };
    let Some(recognised) = handshake.recognise(&parts) else { return Ok(None) };
    let mut response = crate::capture::handshake::response(&recognised);
    if let Some(origin) = origin {
        answer::cors::mark(&mut response, origin);
    }
    Ok(Some(answer::Answer { rule_index: None, delay: std::time::Duration::ZERO, response }))
}

/// Test the endpoint's response rules: what its capture URL would answer to this request (the rule that answers,
/// its status, headers and rendered body; `rule_index` is null for the endpoint's `response` or the receipt).
/// The endpoint's `handshake` preset is asked first, as at the capture URL (`rule_index` null for its answer).
/// Nothing is stored; `{{request.id}}` reads a fresh id, `signature:` terms see `unverified` and `ip:` terms an
/// empty address; signatures are not verified.
#[utoipa::path(post, operation_id = "test_webhook_rules", path = "/webhooks/{id}/rules/test", params(Id),
    request_body = RulesTest, responses((status = 200, body = RulesTestResult)))]
pub async fn test_rules(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    Id(id): Id<WebhookId>,
    ApiJson(body): ApiJson<RulesTest>,
) -> ApiResult<Json<RulesTestResult>> {
    if !body.path.starts_with('/') || body.path.chars().count() > 2048 {
        return Err(invalid("path", "a path relative to the capture URL, starting with `/` (at most 2048 bytes)"));
    }
    if body.path.contains(['?', '#']) || body.path.chars().any(char::is_control) {
        return Err(invalid("path", "a path only: the query goes in `query`"));
    }
    if body.query.as_ref().is_some_and(|q| q.chars().count() > 8192) {
        return Err(invalid("query", "at most 8192 characters"));
    }
    if body.body.as_ref().is_some_and(|b| b.chars().count() > 1_048_576) {
        return Err(invalid("body", "at most 1048576 characters"));
    }
    let mut headers = Vec::new();
    for (name, value) in body.headers.iter().flatten() {
        if axum::http::HeaderName::try_from(name.as_str()).is_err()
            || axum::http::HeaderValue::try_from(value.as_str()).is_err()
        {
            return Err(invalid("headers", format!("`{name}` is not a valid header")));
        }
        headers.push((name.clone(), value.clone()));
    }
    let stored: Option<AnswerColumns> = sqlx::query_as(
        "SELECT rules, rule_conditions, cors, response, mock_of IS NOT NULL, handshake IS NOT NULL FROM webhooks WHERE organization_id = $1 AND id = $2",
    )
    .bind(caller.org_id)
    .bind(id)
    .fetch_optional(&app.pool)
    .await?;
    let Some((rules, conditions, cors, response, mock, has_handshake)) = stored else {
        return Err(ApiError::not_found("webhook"));
    };
    let answers = Answers::compile(
        rules.map(|r| r.0).unwrap_or_default(),
        conditions.map(|c| c.0).unwrap_or_default(),
        cors.map(|c| c.0),
    )
    .mocking(mock);
    let query = crate::capture::query_map(body.query.as_deref().unwrap_or_default());
    // Captures store the capture URL's own path as empty.
    let path = if body.path == "/" { "" } else { body.path.as_str() };
    let content_type = headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("content-type")).map(|(_, v)| v.as_str());
    let request_body = body.body.as_deref().unwrap_or_default().as_bytes();
    let incoming = Incoming {
        method: body.method.as_str(),
        path,
        query: &query,
        headers: &headers,
        content_type,
        body: request_body,
        source_ip: "",
        verdict: "unverified",
        received_at: chrono::Utc::now(),
    };
    let request_id = CaptureId::new(uuid::Uuid::new_v4());
    let shaken = match has_handshake {
        true => {
            handshake_answer(&app, id, caller.org_id, &answers, &incoming, body.query.as_deref().unwrap_or_default())
                .await?
        }
        false => None,
    };
    let answered = match shaken {
        Some(answered) => answered,
        None => answer::answer(&app.pool, &answers, response.as_ref().map(|r| &r.0), &incoming, request_id).await,
    };
    // An error answer (a mock's 404, a refused handshake) gets the error body the capture URL's sender reads, with
    // this test's own request id.
    let method = axum::http::Method::from_bytes(body.method.as_str().as_bytes()).map_err(ApiError::internal_because)?;
    let rule_index = answered.rule_index;
    let response = crate::error::with_error_body(answered.response, &request_id.to_string(), &method, path);
    let mut result_headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in response.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        result_headers
            .entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    let status = response.status().as_u16();
    let bytes =
        axum::body::to_bytes(response.into_body(), RENDERED_MAX + 1).await.map_err(ApiError::internal_because)?;
    // A HEAD is answered without a body.
    let text =
        if body.method == RuleMethod::Head { String::new() } else { String::from_utf8_lossy(&bytes).into_owned() };
    Ok(Json(RulesTestResult { rule_index, status, headers: result_headers, body: text }))
}
