//! Catalog and sandboxes, backed by the same code in `shared` the runner uses: extractor kinds and an evaluator,
//! the 15 assertion operators and an evaluator, and the special node kinds.

use crate::auth::{Caller, scope};
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::Json;
use hookflow_shared::api::catalog::{
    AssertionResults, EvaluateAssertions, EvaluateExtractor, Extracted, Field, KindInfo, KindList, OperatorInfo,
    OperatorList,
};
use hookflow_shared::flow::assert::Operator;
use hookflow_shared::flow::extract::{ExtractorKind, ResponseView};
use utoipa_axum::{router::OpenApiRouter, routes};

/// Assertions one sandbox call may evaluate.
const MAX_ASSERTIONS: usize = 1000;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_extractors))
        .routes(routes!(evaluate_extractor))
        .routes(routes!(list_operators))
        .routes(routes!(evaluate_assertions))
        .routes(routes!(list_special_nodes))
}

fn field(name: &str, kind: &str, required: bool) -> Field {
    Field { name: name.into(), kind: kind.into(), required }
}

/// The seven extractor kinds and their fields.
#[utoipa::path(get, path = "/extractors", responses((status = 200, body = KindList)))]
async fn list_extractors(_caller: Caller<scope::Any>) -> Json<KindList> {
    let items = ExtractorKind::ALL
        .iter()
        .map(|kind| {
            let mut fields = vec![field("name", "string", true)];
            fields.extend(kind.fields().iter().map(|f| field(f.name, f.kind, f.required)));
            KindInfo { kind: kind.name().into(), description: kind.description().into(), fields }
        })
        .collect();
    Json(KindList { items })
}

/// Run an extractor on a sample response.
#[utoipa::path(post, path = "/extractors/evaluate", request_body = EvaluateExtractor,
    responses((status = 200, body = Extracted)))]
async fn evaluate_extractor(
    _caller: Caller<scope::Any>,
    ApiJson(body): ApiJson<EvaluateExtractor>,
) -> ApiResult<Json<Extracted>> {
    body.extractor.check().map_err(|e| ApiError::invalid(e.to_string()))?;
    if !(100..=599).contains(&body.response.status) {
        return Err(ApiError::invalid("invalid field `response.status`: an HTTP status from 100 to 599"));
    }
    // Parsing is CPU work bounded by budgets: off the async workers all the same.
    let extracted = tokio::task::spawn_blocking(move || {
        let headers: Vec<(String, String)> = body.response.headers.into_iter().collect();
        let response = ResponseView {
            status: body.response.status,
            method: None,
            signature: None,
            headers: &headers,
            body: &body.response.body,
            duration_ms: None,
        };
        body.extractor.extract(response)
    })
    .await
    .map_err(ApiError::internal_because)?;
    let value = extracted.map_err(|e| ApiError::invalid(e.to_string()))?;
    Ok(Json(Extracted { value }))
}

/// The 15 assertion operators.
#[utoipa::path(get, operation_id = "list_assertion_operators", path = "/assertions/operators", responses((status = 200, body = OperatorList)))]
async fn list_operators(_caller: Caller<scope::Any>) -> Json<OperatorList> {
    let items = Operator::ALL
        .iter()
        .map(|op| OperatorInfo {
            name: op.name().into(),
            description: op.description().into(),
            takes_expected: op.takes_expected(),
        })
        .collect();
    Json(OperatorList { items })
}

/// Evaluate assertions against named values, in order.
#[utoipa::path(post, path = "/assertions/evaluate", request_body = EvaluateAssertions,
    responses((status = 200, body = AssertionResults)))]
async fn evaluate_assertions(
    _caller: Caller<scope::Any>,
    ApiJson(body): ApiJson<EvaluateAssertions>,
) -> ApiResult<Json<AssertionResults>> {
    if body.assertions.len() > MAX_ASSERTIONS {
        return Err(ApiError::invalid(format!("`assertions`: at most {MAX_ASSERTIONS} per call")));
    }
    for (i, assertion) in body.assertions.iter().enumerate() {
        if assertion.operator.takes_expected() && assertion.expected.is_none() {
            return Err(ApiError::invalid(format!(
                "`assertions[{i}].expected` is required by {}",
                assertion.operator.name()
            )));
        }
    }
    Ok(Json(AssertionResults { results: body.assertions.iter().map(|a| a.evaluate(&body.values)).collect() }))
}

/// The special (non-request) node kinds.
#[utoipa::path(get, path = "/special-nodes", responses((status = 200, body = KindList)))]
async fn list_special_nodes(_caller: Caller<scope::Any>) -> Json<KindList> {
    let node = |kind: &str, description: &str, fields: Vec<Field>| KindInfo {
        kind: kind.into(),
        description: description.into(),
        fields: [vec![field("id", "string", true)], fields].concat(),
    };
    Json(KindList {
        items: vec![
            node("delay", "Waits, cancellably, before the next node.", vec![field("delay_ms", "integer", true)]),
            node(
                "module",
                "Runs another flow's published version inline; its extracted values come back as <node id>.<name>.",
                vec![
                    field("flow_id", "string", true),
                    field("version", "integer|\"latest\"", false),
                    field("inputs", "object", false),
                ],
            ),
            node(
                "set_variables",
                "Sets variables (templated) for the nodes after it.",
                vec![field("variables", "object", true)],
            ),
            node(
                "webhook",
                "Waits for a captured request (on an endpoint, or on the execution's own {{execution.capture_url}}) \
                 received since the execution started and matching `webhook.q` / `webhook.filter` (templates \
                 allowed) and, with `webhook.signature: \"valid\"`, validly signed; fails with `timeout` after \
                 `webhook.timeout_ms` (default 30000). Extractors and assertions read the capture as a response \
                 (statusCode is its method; signature its verdict).",
                vec![
                    field("webhook", "object", true),
                    field("webhook.webhook_id", "string", false),
                    field("webhook.q", "string", false),
                    field("webhook.filter", "object", false),
                    field("webhook.signature", "\"valid\"", false),
                    field("webhook.timeout_ms", "integer", false),
                    field("extractors", "array", false),
                    field("assertions", "array", false),
                ],
            ),
        ],
    })
}
