//! What a capture URL answers once the request is stored (#51): the first that applies of a CORS preflight from an
//! allowed origin, a request the endpoint's handshake preset recognises, the first matching response rule, the
//! endpoint's `response`, the receipt; an answer to an allowed origin carries the CORS headers. A rule's delay is
//! waited by the caller after this returns, holding nothing shared. A mock of a collection answers 404 where no
//! rule matches. `POST /webhooks/{id}/rules/test` asks the same
//! function, so it says exactly what the capture URL would answer.

pub mod cors;
pub mod request;
pub mod rules;
pub mod sandbox;
pub mod template;

use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use hookflow_shared::api::answers::{Cors, ResponseRule};
use hookflow_shared::api::webhooks::{CaptureReceipt, CustomResponse};
use hookflow_shared::{CaptureId, Timestamp};
pub use request::Incoming;
use rules::{CompiledRule, RuleCond};
use sandbox::custom_response;
use sqlx::PgPool;
use std::time::Duration;

/// An endpoint's answering settings as the capture path holds them.
#[derive(Debug, Clone, Default)]
pub struct Answers {
    pub rules: Vec<CompiledRule>,
    pub cors: Option<Cors>,
    /// A mock of a collection: a request no rule matches gets 404 (not the `response` or the receipt).
    pub mock: bool,
}

impl Answers {
    /// Compiles stored rules (with their conditions, index by index) and CORS; a stored rule that no longer
    /// compiles answers nothing (and is logged).
    pub fn compile(rules: Vec<ResponseRule>, conditions: Vec<Vec<RuleCond>>, cors: Option<Cors>) -> Self {
        let mut conditions = conditions.into_iter();
        let rules = rules
            .into_iter()
            .filter_map(|rule| {
                let conds = conditions.next().unwrap_or_default();
                CompiledRule::compile(rule, conds)
                    .inspect_err(|e| tracing::warn!(error = %e, "a stored response rule does not compile; skipped"))
                    .ok()
            })
            .collect();
        Answers { rules, cors, mock: false }
    }

    /// The same, answering as a mock (404 when no rule matches) when `mock`.
    pub fn mocking(self, mock: bool) -> Self {
        Answers { mock, ..self }
    }

    /// Whether answering needs the request's details (else the receipt or the `response` answer at once).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.cors.is_none() && !self.mock
    }
}

/// The answer to a stored request.
#[derive(Debug)]
pub struct Answer {
    /// The rule that answers, by index.
    pub rule_index: Option<usize>,
    /// How long to wait before answering.
    pub delay: Duration,
    pub response: Response,
}

/// The stored request's answer (`request_id` is its capture's id).
pub async fn answer(
    pool: &PgPool,
    answers: &Answers,
    custom: Option<&CustomResponse>,
    incoming: &Incoming<'_>,
    request_id: CaptureId,
) -> Answer {
    let origin = answers.cors.as_ref().and_then(|c| cors::allowed_origin(c, incoming.headers));
    // 1. A CORS preflight from an allowed origin.
    if let (Some(settings), Some(origin)) = (&answers.cors, origin)
        && cors::is_preflight(incoming.method, incoming.headers)
    {
        return Answer { rule_index: None, delay: Duration::ZERO, response: cors::preflight(settings, origin) };
    }
    // 2. A request the endpoint's handshake preset recognises: #51 part B's check goes here.
    // 3. The first matching rule; 4. the endpoint's `response`; 5. the receipt.
    let mut answer = match rules::first_match(pool, &answers.rules, incoming).await {
        Some((index, params)) => rule_answer(&answers.rules[index], index, &params, incoming, request_id),
        None if answers.mock => Answer { rule_index: None, delay: Duration::ZERO, response: unmocked(incoming) },
        None => Answer {
            rule_index: None,
            delay: Duration::ZERO,
            response: ordinary(custom, request_id, incoming.received_at),
        },
    };
    if let Some(origin) = origin {
        cors::mark(&mut answer.response, origin);
    }
    answer
}

/// A mock's answer to a request none of its rules matches: 404 `not_found`.
fn unmocked(incoming: &Incoming<'_>) -> Response {
    let path = if incoming.path.is_empty() { "/" } else { incoming.path };
    let message =
        format!("this mock has no operation for {} {}", incoming.method, path.chars().take(200).collect::<String>());
    crate::error::ApiError::new(hookflow_shared::ErrorCode::NotFound, message).into_response()
}

/// The endpoint's own `response`, or the receipt.
pub fn ordinary(custom: Option<&CustomResponse>, request_id: CaptureId, received_at: DateTime<Utc>) -> Response {
    match custom {
        Some(custom) => custom_response(custom),
        None => axum::Json(CaptureReceipt {
            message: "Request captured".into(),
            request_id,
            received_at: Timestamp(received_at),
        })
        .into_response(),
    }
}

/// A rule's answer: its status and headers (sandboxed like `response`), its body template rendered for the
/// request (values escaped as JSON string content when the answer's `Content-Type` is JSON).
fn rule_answer(
    rule: &CompiledRule,
    index: usize,
    params: &[(String, String)],
    incoming: &Incoming<'_>,
    request_id: CaptureId,
) -> Answer {
    let content_type = rule.rule.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("content-type"));
    let json = content_type.is_some_and(|(_, v)| is_json(v));
    let values = template::Values {
        method: incoming.method,
        path: incoming.path,
        params,
        query: incoming.query,
        headers: incoming.headers,
        body: incoming.body,
        request_id: request_id.to_string(),
    };
    let body = rule.body.render(&values, json);
    let custom = CustomResponse { status: rule.rule.status, headers: rule.rule.headers.clone(), body };
    Answer {
        rule_index: Some(index),
        delay: Duration::from_millis(rule.rule.delay_ms.unwrap_or(0)),
        response: custom_response(&custom),
    }
}

/// Whether a media type is JSON: `application/json` or any `+json` type, parameters aside.
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}
