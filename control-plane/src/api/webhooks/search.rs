//! Searching captured requests: the structured `filter` and the `q` terms become SQL conditions (always within
//! one endpoint of the caller's organization), sorted by received_at, body_size or method with keyset
//! pagination. The history list and the export use the same machinery.

use crate::api::context::Ctx;
use crate::api::webhooks::model::ensure_exists;
use crate::api::webhooks::query_text::{self, Field};
use crate::auth::scope;
use crate::capture::row::{CAPTURE_COLUMNS_INLINE, CaptureRow};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ApiJson, ApiPath, Id};
use crate::pagination::{ListParams, Listed, encode_cursor, page_size};
use axum::Json;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use hookflow_shared::api::Page;
use hookflow_shared::api::signatures::Verdict;
use hookflow_shared::api::webhooks::{
    Capture, HandshakePreset, MatchOp, SearchFilter, SearchRequests, SearchSort, SortField, SortOrder,
};
use hookflow_shared::{CaptureId, OrgId, WebhookId};
use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Postgres, QueryBuilder};

/// One condition on captures.
#[derive(Debug, Clone)]
pub enum Cond {
    Methods(Vec<String>),
    ReceivedAfter(DateTime<Utc>),
    ReceivedBefore(DateTime<Utc>),
    Header {
        name: String,
        op: MatchOp,
        value: Option<String>,
    },
    Query {
        name: String,
        op: MatchOp,
        value: Option<String>,
    },
    BodyContains(String),
    BodyJson {
        path: String,
        op: MatchOp,
        value: Option<serde_json::Value>,
    },
    /// The value at a JSONPath, as text (strings without quotes), equal to `value`; `None`: any value there.
    BodyJsonText {
        path: String,
        value: Option<String>,
    },
    ContentType(String),
    MinSize(i64),
    MaxSize(i64),
    SourceIp(String),
    PathContains(String),
    /// Any of these signature verdicts.
    Signatures(Vec<Verdict>),
    /// Recognised by this handshake preset.
    Handshake(HandshakePreset),
    Not(Box<Cond>),
}

fn needs_value(op: MatchOp, what: &str) -> ApiResult<()> {
    Err(ApiError::invalid(format!("`{what}`: op `{}` needs a `value`", op.as_str())))
}

/// The conditions of a structured filter.
pub fn from_filter(filter: &SearchFilter) -> ApiResult<Vec<Cond>> {
    let mut conds = Vec::new();
    if let Some(methods) = &filter.methods {
        conds.push(Cond::Methods(methods.iter().map(|m| m.to_ascii_uppercase()).collect()));
    }
    conds.extend(filter.received_after.map(|t| Cond::ReceivedAfter(t.0)));
    conds.extend(filter.received_before.map(|t| Cond::ReceivedBefore(t.0)));
    for (i, m) in filter.headers.iter().enumerate() {
        if m.op != MatchOp::Exists && m.value.is_none() {
            needs_value(m.op, &format!("filter.headers[{i}]"))?;
        }
        conds.push(Cond::Header { name: m.name.to_ascii_lowercase(), op: m.op, value: m.value.clone() });
    }
    for (i, m) in filter.query.iter().enumerate() {
        if m.op != MatchOp::Exists && m.value.is_none() {
            needs_value(m.op, &format!("filter.query[{i}]"))?;
        }
        conds.push(Cond::Query { name: m.name.clone(), op: m.op, value: m.value.clone() });
    }
    conds.extend(filter.body_contains.clone().map(Cond::BodyContains));
    for (i, m) in filter.body_json.iter().enumerate() {
        if m.op != MatchOp::Exists && m.value.is_none() {
            needs_value(m.op, &format!("filter.body_json[{i}]"))?;
        }
        conds.push(Cond::BodyJson { path: m.path.clone(), op: m.op, value: m.value.clone() });
    }
    conds.extend(filter.content_type.clone().map(Cond::ContentType));
    conds.extend(filter.min_size.map(Cond::MinSize));
    conds.extend(filter.max_size.map(Cond::MaxSize));
    conds.extend(filter.source_ip.clone().map(Cond::SourceIp));
    conds.extend(filter.signatures.clone().map(Cond::Signatures));
    Ok(conds)
}

/// The conditions of a `q` text.
pub fn from_text(q: &str) -> ApiResult<Vec<Cond>> {
    query_text::parse(q)?
        .into_iter()
        .map(|term| {
            let exists_or_eq =
                |v: &str| if v == "*" { (MatchOp::Exists, None) } else { (MatchOp::Eq, Some(v.to_owned())) };
            let cond = match term.field {
                Field::Method => Cond::Methods(vec![term.value.to_ascii_uppercase()]),
                Field::Path => Cond::PathContains(term.value),
                Field::Header(name) => {
                    let (op, value) = exists_or_eq(&term.value);
                    Cond::Header { name, op, value }
                }
                Field::Query(name) => {
                    let (op, value) = exists_or_eq(&term.value);
                    Cond::Query { name, op, value }
                }
                Field::Body => Cond::BodyContains(term.value),
                Field::BodyJson(path) => Cond::BodyJsonText { path, value: (term.value != "*").then_some(term.value) },
                Field::ContentType => Cond::ContentType(term.value),
                Field::Ip => Cond::SourceIp(term.value),
                Field::Signature => {
                    Cond::Signatures(vec![Verdict::parse(&term.value.to_ascii_lowercase()).ok_or_else(|| {
                        ApiError::invalid(format!(
                            "`signature:{}` in `q`: a verdict is valid, invalid, missing, unverified or duplicate",
                            term.value
                        ))
                    })?])
                }
                Field::Handshake => {
                    Cond::Handshake(HandshakePreset::parse(&term.value.to_ascii_lowercase()).ok_or_else(|| {
                        ApiError::invalid(format!(
                            "`handshake:{}` in `q`: a preset is slack, meta, msgraph, zoom, dropbox, twitter, \
                             twitch, smartsheet or trello",
                            term.value
                        ))
                    })?)
                }
            };
            Ok(if term.negate { Cond::Not(Box::new(cond)) } else { cond })
        })
        .collect()
}

/// JSONPaths are checked by PostgreSQL before use, so a bad one is a 400 naming it rather than a failed query.
pub async fn check_json_paths(pool: &PgPool, conds: &[Cond]) -> ApiResult<()> {
    for cond in conds {
        if let Cond::BodyJson { path, .. } | Cond::BodyJsonText { path, .. } = cond {
            let valid: Result<String, sqlx::Error> =
                sqlx::query_scalar("SELECT $1::jsonpath::text").bind(path).fetch_one(pool).await;
            if let Err(e) = valid {
                if crate::error::is_unavailable(&e) {
                    return Err(e.into());
                }
                return Err(ApiError::invalid(format!("`{path}` is not a valid JSONPath (e.g. $.action)")));
            }
        }
    }
    Ok(())
}

fn push_text_op(b: &mut QueryBuilder<Postgres>, expr: &str, op: MatchOp, value: &Option<String>) {
    let value = value.clone().unwrap_or_default();
    match op {
        MatchOp::Eq | MatchOp::Ne => b.push(format!(" AND {expr} = ")).push_bind(value),
        MatchOp::Contains => b.push(format!(" AND strpos({expr}, ")).push_bind(value).push(") > 0"),
        MatchOp::Prefix => b.push(format!(" AND starts_with({expr}, ")).push_bind(value).push(")"),
        MatchOp::Exists => b,
    };
}

/// Writes one condition as SQL with bound values. One match over the condition kinds on purpose: each arm is
/// the whole SQL of its kind, side by side with the others.
pub fn push_cond(b: &mut QueryBuilder<Postgres>, cond: &Cond) {
    b.push(" AND ");
    match cond {
        Cond::Methods(methods) => {
            b.push("method = ANY(").push_bind(methods.clone()).push(")");
        }
        Cond::ReceivedAfter(t) => {
            b.push("received_at >= ").push_bind(*t);
        }
        Cond::ReceivedBefore(t) => {
            b.push("received_at < ").push_bind(*t);
        }
        Cond::Header { name, op, value } => {
            b.push(if *op == MatchOp::Ne { "NOT " } else { "" });
            b.push("EXISTS (SELECT 1 FROM jsonb_array_elements(headers) h WHERE lower(h->>0) = ")
                .push_bind(name.clone());
            push_text_op(b, "h->>1", *op, value);
            b.push(")");
        }
        Cond::Query { name, op, value } => {
            b.push(if *op == MatchOp::Ne { "NOT " } else { "" });
            b.push("EXISTS (SELECT 1 FROM jsonb_array_elements_text(COALESCE(query->").push_bind(name.clone());
            b.push(", '[]')) v WHERE true");
            push_text_op(b, "v", *op, value);
            b.push(")");
        }
        Cond::BodyContains(text) => {
            b.push("position(convert_to(").push_bind(text.clone()).push(", 'UTF8') in body) > 0");
        }
        Cond::BodyJson { path, op, value } => {
            b.push("(SELECT ");
            match op {
                MatchOp::Eq => b.push("v = ").push_bind(value.clone().unwrap_or_default()),
                MatchOp::Ne => b.push("v IS DISTINCT FROM ").push_bind(value.clone().unwrap_or_default()),
                MatchOp::Contains => b.push("strpos(v #>> '{}', ").push_bind(json_text(value)).push(") > 0"),
                MatchOp::Prefix => b.push("starts_with(v #>> '{}', ").push_bind(json_text(value)).push(")"),
                MatchOp::Exists => b.push("v IS NOT NULL"),
            };
            b.push(" FROM jsonb_path_query_first(hookflow_try_jsonb(body), ").push_bind(path.clone());
            b.push("::jsonpath) AS v)");
        }
        Cond::BodyJsonText { path, value } => {
            b.push("(SELECT ");
            match value {
                Some(value) => b.push("v #>> '{}' = ").push_bind(value.clone()),
                None => b.push("v IS NOT NULL"),
            };
            b.push(" FROM jsonb_path_query_first(hookflow_try_jsonb(body), ").push_bind(path.clone());
            b.push("::jsonpath) AS v)");
        }
        Cond::ContentType(prefix) => {
            b.push("starts_with(lower(COALESCE(content_type, '')), ").push_bind(prefix.to_ascii_lowercase()).push(")");
        }
        Cond::MinSize(n) => {
            b.push("body_size >= ").push_bind(*n);
        }
        Cond::MaxSize(n) => {
            b.push("body_size <= ").push_bind(*n);
        }
        Cond::SourceIp(ip) => {
            b.push("source_ip = ").push_bind(ip.clone());
        }
        Cond::PathContains(text) => {
            b.push("strpos(path, ").push_bind(text.clone()).push(") > 0");
        }
        Cond::Signatures(verdicts) => {
            let names: Vec<&str> = verdicts.iter().map(|v| v.as_str()).collect();
            b.push("signature_verdict = ANY(").push_bind(names).push(")");
        }
        Cond::Handshake(preset) => {
            b.push("handshake IS NOT DISTINCT FROM ").push_bind(preset.as_str());
        }
        Cond::Not(inner) => {
            b.push("NOT (true");
            push_cond(b, inner);
            b.push(")");
        }
    }
}

/// A JSON value as text for contains/prefix: strings without their quotes.
fn json_text(value: &Option<serde_json::Value>) -> String {
    match value {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// Where a page ends: the sort it belongs to, the sort value and the id of the last row.
#[derive(Debug, Serialize, Deserialize)]
struct Cursor {
    f: SortField,
    o: SortOrder,
    v: serde_json::Value,
    id: CaptureId,
}

/// A search within one endpoint.
#[derive(Debug)]
pub struct Search {
    pub org_id: OrgId,
    pub webhook_id: WebhookId,
    pub conds: Vec<Cond>,
    pub sort: SearchSort,
    /// `limit` and `cursor`, as in every list.
    pub page: ListParams,
}

/// Conditions one search may combine (structured filter and `q` terms together).
pub const MAX_CONDITIONS: usize = 32;

/// Refuses searches of more conditions than [`MAX_CONDITIONS`].
pub fn check_conditions(conds: &[Cond]) -> ApiResult<()> {
    if conds.len() > MAX_CONDITIONS {
        return Err(ApiError::invalid(format!(
            "the search has {} conditions; at most {MAX_CONDITIONS} (filter and `q` terms together)",
            conds.len()
        )));
    }
    Ok(())
}

pub async fn run(pool: &PgPool, search: Search) -> ApiResult<Page<Capture>> {
    check_conditions(&search.conds)?;
    let limit = page_size(search.page.limit)?;
    let (column, value_of): (&str, fn(&Capture) -> serde_json::Value) = match search.sort.field {
        SortField::ReceivedAt => ("received_at", |c| serde_json::json!(c.received_at)),
        SortField::BodySize => ("body_size", |c| serde_json::json!(c.body_size)),
        SortField::Method => ("method", |c| serde_json::json!(c.method)),
    };
    let (direction, comparison) = match search.sort.order {
        SortOrder::Asc => ("ASC", ">"),
        SortOrder::Desc => ("DESC", "<"),
    };
    let mut b = QueryBuilder::<Postgres>::new(format!(
        "SELECT {CAPTURE_COLUMNS_INLINE} FROM captures WHERE organization_id = "
    ));
    b.push_bind(search.org_id).push(" AND webhook_id = ").push_bind(search.webhook_id);
    for cond in &search.conds {
        push_cond(&mut b, cond);
    }
    if let Some(cursor) = search.page.cursor.as_deref().filter(|c| !c.is_empty()) {
        let cursor = decode(cursor)?;
        if cursor.f != search.sort.field || cursor.o != search.sort.order {
            return Err(ApiError::invalid("`cursor` belongs to a different sort; start again without it"));
        }
        b.push(format!(" AND ({column}, id) {comparison} ("));
        match search.sort.field {
            SortField::ReceivedAt => {
                let t =
                    cursor.v.as_str().and_then(|s| hookflow_shared::Timestamp::parse(s).ok()).ok_or_else(bad_cursor)?;
                b.push_bind(t.0);
            }
            SortField::BodySize => {
                b.push_bind(cursor.v.as_i64().and_then(|n| i32::try_from(n).ok()).ok_or_else(bad_cursor)?);
            }
            SortField::Method => {
                b.push_bind(cursor.v.as_str().ok_or_else(bad_cursor)?.to_owned());
            }
        }
        b.push(", ").push_bind(cursor.id).push(")");
    }
    b.push(format!(" ORDER BY {column} {direction}, id {direction} LIMIT ")).push_bind(limit + 1);
    let rows: Vec<CaptureRow> = b.build_query_as().fetch_all(pool).await?;
    let mut items: Vec<Capture> = rows.into_iter().map(Into::into).collect();
    let next_cursor = if items.len() as i64 > limit {
        items.truncate(limit as usize);
        let cursor_of = |last: &Capture| {
            encode_cursor(&Cursor { f: search.sort.field, o: search.sort.order, v: value_of(last), id: last.id })
        };
        items.last().map(cursor_of).transpose()?
    } else {
        None
    };
    Ok(Page { items, next_cursor })
}

fn bad_cursor() -> ApiError {
    ApiError::invalid("`cursor` is not a cursor this search gave out")
}

fn decode(cursor: &str) -> ApiResult<Cursor> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(bad_cursor)
}

/// Search captured requests with a filter, `q` terms and a sort.
#[utoipa::path(post, operation_id = "search_webhook_requests", path = "/webhooks/{id}/requests/search", params(Id),
    request_body = SearchRequests,
    responses((status = 200, body = Page<Capture>)))]
pub async fn search_requests(
    Ctx { app, caller }: Ctx<scope::WebhooksRead>,
    ApiPath(id): ApiPath<WebhookId>,
    ApiJson(body): ApiJson<SearchRequests>,
) -> Listed<Capture> {
    ensure_exists(&app.pool, caller.org_id, id).await?;
    let mut conds = from_filter(&body.filter)?;
    if let Some(q) = &body.q {
        conds.extend(from_text(q)?);
    }
    check_json_paths(&app.read_pool, &conds).await?;
    let search = Search {
        org_id: caller.org_id,
        webhook_id: id,
        conds,
        sort: body.sort,
        page: ListParams { limit: body.limit, cursor: body.cursor },
    };
    Ok(Json(run(&app.read_pool, search).await?))
}
