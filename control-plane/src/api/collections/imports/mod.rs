//! `POST /collections/import` and its preview: documents of other tools (Postman collections and environments,
//! Insomnia exports, HAR, curl command lines, Swagger 2.0, OpenAPI) converted into a collection, optionally a flow
//! of the requests in order, with a report of what was not converted. Each converter is its own module; all of
//! them work within the budgets of `model` (requests, folder depth, script lines) and `detect` (nesting depth,
//! YAML expansion), on documents of at most 10 MiB given or fetched through the guarded client.

pub mod build;
pub mod curl;
pub mod detect;
pub mod har;
pub mod insomnia;
pub mod model;
pub mod postman;
pub mod scripts;
pub mod store;
pub mod swagger2;

use crate::api::collections::imports::model::{Body, Converted, Prepared, Request};
use crate::api::collections::openapi;
use crate::api::context::Ctx;
use crate::auth::{Caller, scope};
use crate::error::{ApiError, ApiResult, Created};
use crate::extract::ApiJson;
use crate::state::AppState;
use axum::Json;
use axum::http::StatusCode;
use hookflow_shared::Scope;
use hookflow_shared::api::imports::{ImportAnswer, ImportDocument, ImportFormat};
use serde_json::Value;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(import_document)).routes(routes!(preview_import))
}

/// Import a Postman collection or environment, an Insomnia export, a HAR, curl command lines, a Swagger 2.0 or
/// OpenAPI description as a new collection (and, with `flow`, a flow of its requests in order).
#[utoipa::path(post, operation_id = "import_document", path = "/collections/import", request_body = ImportDocument,
    responses((status = 201, body = ImportAnswer), (status = 400), (status = 404), (status = 409), (status = 413)))]
async fn import_document(
    Ctx { app, caller }: Ctx<scope::CollectionsWrite>,
    ApiJson(body): ApiJson<ImportDocument>,
) -> Created<ImportAnswer> {
    let answer = run(&app, &caller, body, true).await?;
    Ok((StatusCode::CREATED, Json(answer)))
}

/// The import's answer, nothing stored (ids in it are placeholders).
#[utoipa::path(post, operation_id = "preview_import", path = "/collections/import/preview", request_body = ImportDocument,
    responses((status = 200, body = ImportAnswer), (status = 400), (status = 404), (status = 413)))]
async fn preview_import(
    Ctx { app, caller }: Ctx<scope::CollectionsWrite>,
    ApiJson(body): ApiJson<ImportDocument>,
) -> ApiResult<Json<ImportAnswer>> {
    run(&app, &caller, body, false).await.map(Json)
}

async fn run(
    app: &AppState,
    caller: &Caller<scope::CollectionsWrite>,
    body: ImportDocument,
    store: bool,
) -> ApiResult<ImportAnswer> {
    openapi::check_source(&body.source)?;
    if body.flow.is_some() || body.flow_id.is_some() {
        caller.require(Scope::FlowsWrite)?;
    }
    let text = match (&body.source.url, &body.source.document) {
        (Some(url), _) => {
            let url =
                reqwest::Url::parse(url).map_err(|e| ApiError::invalid(format!("invalid field `source.url`: {e}")))?;
            openapi::fetch(app, caller.org_id, &url).await?
        }
        (None, Some(document)) => document.clone(),
        (None, None) => return Err(ApiError::invalid("invalid field `source`: give `url` or `document`")),
    };
    let url = body.source.url.as_deref().and_then(|u| reqwest::Url::parse(u).ok());
    let format = body.format;
    // Parsing and converting a large document takes a while: off the async workers.
    let prepared = tokio::task::spawn_blocking(move || prepare(&text, format, url.as_ref()))
        .await
        .map_err(ApiError::internal_because)??;
    if body.flow_id.is_some() && prepared.format != ImportFormat::PostmanEnvironment {
        return Err(ApiError::invalid("invalid field `flow_id`: only a Postman environment goes into a flow"));
    }
    if body.flow_id.is_some() && body.flow.is_some() {
        return Err(ApiError::invalid("invalid field `flow`: give `flow` or `flow_id`, not both"));
    }
    store::apply(app, caller, &body, prepared, store).await
}

/// Parses, detects and converts (blocking work).
fn prepare(text: &str, format: Option<ImportFormat>, url: Option<&reqwest::Url>) -> ApiResult<Prepared> {
    let curl = format == Some(ImportFormat::Curl) || (format.is_none() && detect::is_curl(text));
    if curl {
        let mut converted = curl::lines(text)?;
        converted.finish();
        return Ok(Prepared { format: ImportFormat::Curl, converted, openapi: None, sha256: None });
    }
    let document = detect::parse(text)?;
    let format = match format {
        Some(format) => format,
        None => detect::detect(&document)?,
    };
    let mut converted = match format {
        ImportFormat::Openapi | ImportFormat::Swagger2 => return described(text, format, document, url),
        ImportFormat::Postman => postman::collection(&document)?,
        ImportFormat::PostmanEnvironment => postman::environment(&document)?,
        ImportFormat::Insomnia => insomnia::export(&document)?,
        ImportFormat::Har => har::log(&document)?,
        ImportFormat::Curl => unreachable!("read above"),
    };
    converted.finish();
    Ok(Prepared { format, converted, openapi: None, sha256: None })
}

/// An OpenAPI description (a Swagger 2.0 one converted first), checked and mapped as `POST
/// /collections/import/openapi` does.
fn described(text: &str, format: ImportFormat, document: Value, url: Option<&reqwest::Url>) -> ApiResult<Prepared> {
    use sha2::{Digest as _, Sha256};
    let document = match format {
        ImportFormat::Swagger2 => {
            if document["swagger"] != "2.0" {
                return Err(ApiError::invalid("not a Swagger 2.0 description: `swagger` is not \"2.0\""));
            }
            let converted = swagger2::convert(&document).ok_or_else(|| {
                ApiError::invalid(
                    "the Swagger 2.0 description is too large to convert (its schemas repeat under too many media \
                     types or operations)",
                )
            })?;
            let text = serde_json::to_string(&converted).map_err(ApiError::internal_because)?;
            openapi::parse(&text)
                .map_err(|e| ApiError::invalid(format!("after conversion to OpenAPI 3.0: {}", e.message)))?
        }
        _ => openapi::parse(text)?,
    };
    let mapped = openapi::mapping::map(&document, url);
    if mapped.budget_exhausted {
        return Err(ApiError::invalid(format!(
            "the description's schemas reference each other too widely: generating example bodies needed more than \
             {} steps",
            openapi::schema::DOCUMENT_STEPS
        )));
    }
    let requests = mapped
        .requests
        .iter()
        .map(|g| {
            let r = &g.request;
            Request {
                name: r.name.clone(),
                folder: r.folder.clone(),
                method: r.method.clone(),
                url: r.url.clone(),
                headers: r.headers.clone(),
                query: r.query.clone(),
                body: r.body.clone().map_or(Body::None, Body::Text),
                ..Request::default()
            }
        })
        .collect();
    let mut converted = Converted {
        title: mapped.title.clone(),
        variables: mapped.variables.clone(),
        requests,
        ..Converted::default()
    };
    converted.report.warnings = mapped.warnings.clone();
    converted.finish();
    let sha256 = hex::encode(Sha256::digest(text.as_bytes()));
    Ok(Prepared { format, converted, openapi: Some(mapped), sha256: Some(sha256) })
}
