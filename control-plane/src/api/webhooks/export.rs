//! Export of an endpoint's history (all of it, or what `q` selects), oldest first, streamed page by page:
//! NDJSON (one captured request per line, whole bodies) or a HAR 1.2 document. A page holds at most 200 captures
//! and, past its first, 8 MiB of bodies, so an export holds a bounded amount in memory however large the bodies.

use crate::api::context::Ctx;
use crate::api::webhooks::endpoints::ensure_exists;
use crate::api::webhooks::search::{self, Cond};
use crate::auth::scope;
use crate::capture::row::{CAPTURE_COLUMNS_FULL, CaptureRow};
use crate::error::ApiResult;
use crate::extract::{ApiPath, ApiQuery, Id};
use axum::body::Body;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use hookflow_shared::api::webhooks::{BodyEncoding, Capture};
use hookflow_shared::{CaptureId, OrgId, WebhookId};
use serde_json::json;
use sqlx::{PgPool, Postgres, QueryBuilder};

/// Captures per page at most.
const PAGE: i64 = 200;
/// Bytes of bodies per page at most (a single larger capture still makes a page of its own).
const PAGE_BYTES: i64 = 8 * 1024 * 1024;

#[derive(Debug, Clone, Copy, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExportFormat {
    #[default]
    Ndjson,
    Har,
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportParams {
    /// `ndjson` (default) or `har`.
    #[serde(default)]
    #[param(inline)]
    pub format: ExportFormat,
    /// Optional `q` search terms selecting what to export.
    pub q: Option<String>,
}

/// Export captured requests as NDJSON or HAR.
#[utoipa::path(get, operation_id = "export_webhook_requests", path = "/webhooks/{id}/requests/export", params(Id, ExportParams),
    responses((status = 200, description = "NDJSON lines (`format=ndjson`) or a HAR 1.2 document (`format=har`)",
        content((hookflow_shared::api::documents::CaptureLines = "application/x-ndjson"),
            (hookflow_shared::api::documents::HarDocument = "application/json")))))]
pub async fn export_requests(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    ApiPath(id): ApiPath<WebhookId>,
    ApiQuery(params): ApiQuery<ExportParams>,
) -> ApiResult<Response> {
    ensure_exists(&app.pool, caller.org_id, id).await?;
    let conds = match &params.q {
        Some(q) => {
            let conds = search::from_text(q)?;
            search::check_conditions(&conds)?;
            conds
        }
        None => Vec::new(),
    };
    let pages =
        Pages { pool: app.read_pool.clone(), org_id: caller.org_id, webhook_id: id, conds, after: None, done: false };
    let format = params.format;
    let base = format!("{}/webhook/{id}", app.settings.public_url);
    let state = (pages, true, false);
    let stream = futures_util::stream::unfold(state, move |(mut pages, first, finished)| {
        let base = base.clone();
        async move {
            if finished {
                return None;
            }
            let rows = match pages.next().await {
                Ok(rows) => rows,
                Err(e) => {
                    tracing::error!(error = %e, "export stopped by a database error");
                    return Some((Err(std::io::Error::other("export interrupted")), (pages, first, true)));
                }
            };
            let last = rows.is_empty();
            let mut chunk = String::new();
            match format {
                ExportFormat::Ndjson => {
                    for row in rows {
                        match serde_json::to_string(&Capture::from(row)) {
                            Ok(line) => chunk.push_str(&line),
                            Err(e) => {
                                tracing::error!(error = %e, "export stopped: a capture cannot be encoded");
                                return Some((Err(std::io::Error::other("export interrupted")), (pages, first, true)));
                            }
                        }
                        chunk.push('\n');
                    }
                }
                ExportFormat::Har => {
                    if first {
                        chunk.push_str(r#"{"log":{"version":"1.2","creator":{"name":"hookflow","version":""#);
                        chunk.push_str(env!("CARGO_PKG_VERSION"));
                        chunk.push_str(r#""},"entries":["#);
                    }
                    for (i, row) in rows.into_iter().enumerate() {
                        if !(first && i == 0) {
                            chunk.push(',');
                        }
                        chunk.push_str(&har_entry(&base, row.into()).to_string());
                    }
                    if last {
                        chunk.push_str("]}}");
                    }
                }
            }
            Some((Ok(bytes::Bytes::from(chunk)), (pages, first && last, last)))
        }
    });
    let (content_type, extension) = match format {
        ExportFormat::Ndjson => ("application/x-ndjson", "ndjson"),
        ExportFormat::Har => ("application/json", "har"),
    };
    let mut response = Body::from_stream(stream).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Ok(disposition) = HeaderValue::from_str(&format!("attachment; filename=\"webhook-{id}.{extension}\"")) {
        response.headers_mut().insert(header::CONTENT_DISPOSITION, disposition);
    }
    Ok(response)
}

/// Walks the selected captures oldest first, a page at a time.
struct Pages {
    pool: PgPool,
    org_id: OrgId,
    webhook_id: WebhookId,
    conds: Vec<Cond>,
    after: Option<CaptureId>,
    done: bool,
}

impl Pages {
    async fn next(&mut self) -> Result<Vec<CaptureRow>, sqlx::Error> {
        if self.done {
            return Ok(Vec::new());
        }
        // The next page's ids and sizes first, then the rows of the prefix that fits the byte budget.
        let mut b = QueryBuilder::<Postgres>::new("SELECT id, body_size::int8 FROM captures WHERE organization_id = ");
        b.push_bind(self.org_id).push(" AND webhook_id = ").push_bind(self.webhook_id);
        for cond in &self.conds {
            search::push_cond(&mut b, cond);
        }
        if let Some(after) = self.after {
            b.push(" AND id > ").push_bind(after);
        }
        b.push(" ORDER BY id LIMIT ").push_bind(PAGE);
        let sizes: Vec<(CaptureId, i64)> = b.build_query_as().fetch_all(&self.pool).await?;
        let mut total = 0;
        let ids: Vec<CaptureId> = sizes
            .iter()
            .take_while(|(_, size)| {
                total += size;
                total - size == 0 || total <= PAGE_BYTES
            })
            .map(|(id, _)| *id)
            .collect();
        self.done = (sizes.len() as i64) < PAGE && ids.len() == sizes.len();
        self.after = ids.last().copied();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {CAPTURE_COLUMNS_FULL} FROM captures WHERE organization_id = $1 AND id = ANY($2) ORDER BY id"
        )))
        .bind(self.org_id)
        .bind(&ids)
        .fetch_all(&self.pool)
        .await
    }
}

fn har_entry(base: &str, capture: Capture) -> serde_json::Value {
    let url = if capture.query_string.is_empty() {
        format!("{base}{}", capture.path)
    } else {
        format!("{base}{}?{}", capture.path, capture.query_string)
    };
    let headers: Vec<_> = capture.headers.iter().map(|(n, v)| json!({"name": n, "value": v})).collect();
    let query: Vec<_> =
        capture.query.iter().flat_map(|(n, vs)| vs.iter().map(move |v| json!({"name": n, "value": v}))).collect();
    let mut post_data = json!({"mimeType": capture.content_type.clone().unwrap_or_default(), "text": capture.body});
    if capture.body_encoding == BodyEncoding::Base64 {
        post_data["encoding"] = json!("base64");
    }
    json!({
        "startedDateTime": capture.received_at,
        "time": 0,
        "request": {"method": capture.method, "url": url, "httpVersion": "HTTP/1.1", "cookies": [],
            "headers": headers, "queryString": query, "postData": post_data, "headersSize": -1,
            "bodySize": capture.body_size},
        "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/1.1", "cookies": [], "headers": [],
            "content": {"size": 0, "mimeType": "application/json"}, "redirectURL": "", "headersSize": -1,
            "bodySize": -1},
        "cache": {},
        "timings": {"send": 0, "wait": 0, "receive": 0},
        "comment": format!("hookflow capture {}", capture.id),
        // A custom field (HAR allows names starting with `_`): the signature verdict.
        "_signature": capture.signature,
    })
}
