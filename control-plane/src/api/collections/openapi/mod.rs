//! OpenAPI descriptions: fetched (with the SSRF guard, size and time limits) or given as text, parsed as JSON or
//! YAML, checked by the maintained parser for their version (`openapiv3` for 3.0, `oas3` for 3.1) so a malformed
//! description is a 400 naming where, then mapped into collection requests (`mapping`).

pub mod fingerprint;
pub mod mapping;
pub mod responses;
pub mod schema;
pub mod yaml;

use crate::error::{ApiError, ApiResult};
use crate::outbound;
use crate::state::AppState;
use hookflow_shared::OrgId;
use hookflow_shared::api::collections::OpenApiSource;
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use std::time::Duration;

/// Largest description accepted, given or fetched.
pub const MAX_DOCUMENT_BYTES: usize = 10 * 1024 * 1024;
/// How long fetching a description may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// A parsed, checked description.
#[derive(Debug)]
pub struct Loaded {
    pub document: Value,
    pub sha256: String,
    /// Where it was fetched from, to resolve relative server URLs.
    pub url: Option<reqwest::Url>,
}

/// Checks that exactly one of `url` and `document` is given.
pub fn check_source(source: &OpenApiSource) -> ApiResult<()> {
    match (&source.url, &source.document) {
        (Some(_), Some(_)) | (None, None) => {
            Err(ApiError::invalid("invalid field `source`: give exactly one of `url` and `document`"))
        }
        (Some(url), None) => reqwest::Url::parse(url)
            .map(|_| ())
            .map_err(|e| ApiError::invalid(format!("invalid field `source.url`: not a URL ({e})"))),
        (None, Some(document)) if document.len() > MAX_DOCUMENT_BYTES => {
            Err(ApiError::invalid("invalid field `source.document`: larger than 10 MiB"))
        }
        (None, Some(_)) => Ok(()),
    }
}

/// Fetches a description through the guarded client under the organization's policy: 2xx, at most 10 MiB.
pub async fn fetch(app: &AppState, org_id: OrgId, url: &reqwest::Url) -> ApiResult<String> {
    let policy = outbound::policy_for(&app.pool, app.settings.allow_private_targets, org_id).await?;
    let client = outbound::client_for(url, policy, FETCH_TIMEOUT, "source.url")?;
    let response = client
        .get(url.clone())
        .header("accept", "application/json, application/yaml, text/yaml, */*")
        .send()
        .await
        .map_err(|e| outbound::failed("source.url", &e))?;
    if !response.status().is_success() {
        return Err(ApiError::invalid(format!("invalid field `source.url`: it answered {}", response.status())));
    }
    let body = outbound::read("source.url", response, MAX_DOCUMENT_BYTES).await?;
    String::from_utf8(body.to_vec())
        .map_err(|_| ApiError::invalid("invalid field `source.url`: the description is not UTF-8 text"))
}

/// Loads and checks the description a source names.
pub async fn load(app: &AppState, org_id: OrgId, source: &OpenApiSource) -> ApiResult<Loaded> {
    check_source(source)?;
    let (text, url) = match (&source.url, &source.document) {
        (Some(url), _) => {
            let url =
                reqwest::Url::parse(url).map_err(|e| ApiError::invalid(format!("invalid field `source.url`: {e}")))?;
            (fetch(app, org_id, &url).await?, Some(url))
        }
        (None, Some(document)) => (document.clone(), None),
        (None, None) => return Err(ApiError::invalid("invalid field `source`: give `url` or `document`")),
    };
    let sha256 = hex::encode(Sha256::digest(text.as_bytes()));
    // Parsing a large description takes a while: off the async workers.
    let document = tokio::task::spawn_blocking(move || parse(&text)).await.map_err(|_| ApiError::internal())??;
    Ok(Loaded { document, sha256, url })
}

/// Maps a loaded description to requests, off the async workers; a description whose example generation spent
/// its whole budget is refused with 400 naming the limit.
pub async fn map_loaded(document: Value, url: Option<reqwest::Url>) -> ApiResult<mapping::Mapped> {
    let mapped = tokio::task::spawn_blocking(move || mapping::map(&document, url.as_ref()))
        .await
        .map_err(ApiError::internal_because)?;
    if mapped.budget_exhausted {
        return Err(ApiError::invalid(format!(
            "the description's schemas reference each other too widely: generating example bodies needed more than \
             {} steps",
            schema::DOCUMENT_STEPS
        )));
    }
    Ok(mapped)
}

/// Parses JSON or YAML text and checks it with the parser for its OpenAPI version.
pub fn parse(text: &str) -> ApiResult<Value> {
    let document = if text.trim_start().starts_with('{') {
        serde_json::from_str::<Value>(text)
            .map_err(|e| ApiError::invalid(format!("the description is not valid JSON: {e}")))?
    } else {
        yaml::to_json(text).map_err(|e| ApiError::invalid(format!("the description is not valid YAML or JSON: {e}")))?
    };
    check_version(&document)?;
    Ok(document)
}

/// Reads `openapi` and checks the whole description with the parser for that version; the error names the place.
fn check_version(document: &Value) -> ApiResult<()> {
    if document.get("swagger").is_some() {
        return Err(ApiError::invalid("this is a Swagger 2.0 description; convert it to OpenAPI 3 first"));
    }
    let Some(version) = document.get("openapi").and_then(Value::as_str) else {
        return Err(ApiError::invalid("not an OpenAPI description: the `openapi` version field is missing"));
    };
    if version.starts_with("3.0.") {
        checked::<openapiv3::OpenAPI, openapiv3::PathItem>(version, document)
    } else if version.starts_with("3.1.") {
        checked::<oas3::Spec, oas3::spec::PathItem>(version, document)
    } else {
        Err(ApiError::invalid(format!("OpenAPI {version} is not supported: use a 3.0 or 3.1 description")))
    }
}

/// Deserializes the whole description as `Spec`. The parsers lose their place inside `paths` (a custom map), so an
/// error there is located by checking each path item on its own.
fn checked<Spec, Item>(version: &str, document: &Value) -> Result<(), ApiError>
where
    Spec: serde::de::DeserializeOwned,
    Item: serde::de::DeserializeOwned,
{
    let Err(error) = serde_path_to_error::deserialize::<_, Spec>(document) else { return Ok(()) };
    let mut path = error.path().to_string();
    let mut message = error.inner().to_string();
    if path == "paths" {
        for (name, item) in document["paths"].as_object().into_iter().flatten() {
            if let Err(inner) = serde_path_to_error::deserialize::<_, Item>(item) {
                path = format!("paths.{name}.{}", inner.path());
                message = inner.inner().to_string();
                break;
            }
        }
    }
    Err(ApiError::invalid(format!("invalid OpenAPI {version} description at `{path}`: {message}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths:\n  /pets:\n    get:\n      responses:\n        200: {description: ok}\n";

    #[test]
    fn yaml_with_numeric_keys_parses_and_checks() {
        let document = parse(SMALL).expect("valid");
        assert!(document["paths"]["/pets"]["get"]["responses"]["200"].is_object());
    }

    #[test]
    fn malformed_descriptions_name_the_place() {
        let broken = SMALL.replace("responses:\n        200: {description: ok}", "responses: 12");
        let message = parse(&broken).expect_err("invalid").message;
        assert!(message.contains("paths./pets.get.responses"), "{message}");
        let syntax = parse("openapi: 3.0.3\ninfo: [unclosed").expect_err("bad yaml").message;
        assert!(syntax.contains("line"), "{syntax}");
        assert!(parse("{\"swagger\": \"2.0\"}").expect_err("swagger").message.contains("Swagger 2.0"));
        assert!(parse("{\"openapi\": \"4.0.0\"}").expect_err("v4").message.contains("not supported"));
    }
}
