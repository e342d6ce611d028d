//! Response rules as the capture path holds them: each rule's method, path template and body template compiled
//! once (when the endpoint is loaded), and its `q` / `filter` as the capture search's condition rows
//! ([`RuleCond`], compiled by the API when the rules are written). [`first_match`] finds the rule that answers a
//! request: method and path in memory; the search conditions of the candidates, when any has some, in one
//! statement that weighs them with the waiters' own condition SQL (`wait_sweep::EVAL`) against the request's
//! values (nothing is read from the stored capture), under a statement timeout of its own.

use crate::capture::answer::request::Incoming;
use crate::capture::answer::template::Template;
use crate::capture::wait_sweep::{EVAL, WaitCond};
use chrono::{DateTime, Utc};
use hookflow_shared::api::answers::{ResponseRule, RuleMethod};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use sqlx::types::Json;
use std::time::Duration;

/// How long a rules' search may run: past it the conditional rules count as not matching.
pub const MATCH_TIMEOUT: Duration = Duration::from_secs(1);

/// One condition of a rule's search, as data: a [`WaitCond`] that can be stored with the endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleCond {
    #[serde(default)]
    pub negate: bool,
    pub kind: String,
    #[serde(default)]
    pub name: String,
    pub op: String,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub json: serde_json::Value,
    #[serde(default)]
    pub number: i64,
    pub at: DateTime<Utc>,
}

impl From<&WaitCond> for RuleCond {
    fn from(c: &WaitCond) -> Self {
        RuleCond {
            negate: c.negate,
            kind: c.kind.to_owned(),
            name: c.name.clone(),
            op: c.op.to_owned(),
            text: c.text.clone(),
            json: c.json.clone(),
            number: c.number,
            at: c.at,
        }
    }
}

/// One segment of a path template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Param(String),
}

/// A rule's path template: `/orders/{id}`, `/files/*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathTemplate {
    segments: Vec<Segment>,
    /// Ends in `*`: any rest (none included) matches.
    rest: bool,
}

impl PathTemplate {
    /// Parses a template, or says what is wrong with it.
    pub fn parse(template: &str) -> Result<Self, String> {
        let Some(inner) = template.strip_prefix('/') else { return Err("must start with `/`".into()) };
        let mut segments = Vec::new();
        let mut rest = false;
        let parts: Vec<&str> = if inner.is_empty() { Vec::new() } else { inner.split('/').collect() };
        for (i, part) in parts.iter().enumerate() {
            if *part == "*" {
                if i + 1 != parts.len() {
                    return Err("`*` may only be the last segment".into());
                }
                rest = true;
            } else if let Some(name) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                if !hookflow_shared::api::rules::is_key(name, 64) {
                    return Err(format!("`{{{name}}}` is not a parameter name (letters, digits, `_`, `-`)"));
                }
                if segments.iter().any(|s| s == &Segment::Param(name.to_owned())) {
                    return Err(format!("the parameter `{name}` appears twice"));
                }
                segments.push(Segment::Param(name.to_owned()));
            } else if part.contains(['{', '}', '*']) {
                return Err(format!("`{part}`: a parameter is a whole segment `{{name}}`, `*` only the last one"));
            } else {
                segments.push(Segment::Literal((*part).to_owned()));
            }
        }
        Ok(PathTemplate { segments, rest })
    }

    /// Each segment's kind, literal `0` or parameter `1` (a rest `*` is `2`): of two templates of as many segments,
    /// the smaller answers first where both match.
    pub fn specificity(&self) -> Vec<u8> {
        let mut kinds: Vec<u8> = self.segments.iter().map(|s| u8::from(matches!(s, Segment::Param(_)))).collect();
        if self.rest {
            kinds.push(2);
        }
        kinds
    }

    /// The template's parameters when `path` (a capture's path: empty or `/...`) matches it.
    pub fn matches(&self, path: &str) -> Option<Vec<(String, String)>> {
        let inner = path.strip_prefix('/').unwrap_or(path);
        let parts: Vec<&str> = if inner.is_empty() { Vec::new() } else { inner.split('/').collect() };
        if parts.len() < self.segments.len() || (!self.rest && parts.len() != self.segments.len()) {
            return None;
        }
        let mut params = Vec::new();
        for (segment, part) in self.segments.iter().zip(&parts) {
            match segment {
                Segment::Literal(literal) if literal == part => {}
                Segment::Literal(_) => return None,
                Segment::Param(_) if part.is_empty() => return None,
                Segment::Param(name) => params.push((name.clone(), percent_decoded(part))),
            }
        }
        Some(params)
    }
}

/// `%XX` escapes decoded (invalid UTF-8 read as U+FFFD; a `%` not followed by two hex digits kept).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(Some(high)), Some(Some(low))) =
                (bytes.get(i + 1).map(|b| hex(*b)), bytes.get(i + 2).map(|b| hex(*b)))
        {
            out.push((high * 16 + low) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A rule as the capture path uses it.
#[derive(Debug, Clone)]
pub struct CompiledRule {
    pub rule: ResponseRule,
    pub path: Option<PathTemplate>,
    pub body: Template,
    pub conds: Vec<RuleCond>,
}

impl CompiledRule {
    /// Compiles a stored rule with its conditions; `Err` says which part is wrong.
    pub fn compile(rule: ResponseRule, conds: Vec<RuleCond>) -> Result<Self, String> {
        let path = rule.path.as_deref().map(PathTemplate::parse).transpose().map_err(|e| format!("path: {e}"))?;
        let body = Template::parse(rule.body.as_deref().unwrap_or_default()).map_err(|e| format!("body: {e}"))?;
        Ok(CompiledRule { rule, path, body, conds })
    }

    /// The path parameters when the request's method and path fit this rule (`GET` also answers `HEAD`).
    fn fits(&self, method: &str, path: &str) -> Option<Vec<(String, String)>> {
        let method_fits = match self.rule.method {
            None => true,
            Some(RuleMethod::Get) => method == "GET" || method == "HEAD",
            Some(m) => m.as_str() == method,
        };
        if !method_fits {
            return None;
        }
        match &self.path {
            None => Some(Vec::new()),
            Some(template) => template.matches(path),
        }
    }
}

/// The first rule answering `incoming`, with its path parameters.
pub async fn first_match(
    pool: &PgPool,
    rules: &[CompiledRule],
    incoming: &Incoming<'_>,
) -> Option<(usize, Vec<(String, String)>)> {
    let mut candidates = Vec::new();
    for (index, rule) in rules.iter().enumerate() {
        if let Some(params) = rule.fits(incoming.method, incoming.path) {
            let unconditional = rule.conds.is_empty();
            candidates.push((index, params));
            if unconditional {
                break;
            }
        }
    }
    let first = candidates.first()?;
    if rules[first.0].conds.is_empty() {
        return candidates.into_iter().next();
    }
    let failed = match failing(pool, rules, &candidates, incoming).await {
        Ok(failed) => failed,
        Err(e) => {
            tracing::warn!(error = %e, "a capture's response rules could not be weighed; its conditional rules do not answer");
            candidates.iter().filter(|(i, _)| !rules[*i].conds.is_empty()).map(|(i, _)| *i as i32).collect()
        }
    };
    candidates.into_iter().find(|(i, _)| !failed.contains(&(*i as i32)))
}

/// The candidates whose conditions `incoming` does not meet, weighed in one statement.
async fn failing(
    pool: &PgPool,
    rules: &[CompiledRule],
    candidates: &[(usize, Vec<(String, String)>)],
    incoming: &Incoming<'_>,
) -> Result<Vec<i32>, sqlx::Error> {
    let mut k = Columns::default();
    for (index, _) in candidates {
        for cond in &rules[*index].conds {
            k.push(*index as i32, cond);
        }
    }
    let needs_json = k.kind.iter().any(|kind| kind == "json" || kind == "jsontext");
    let needs_body = needs_json || k.kind.iter().any(|kind| kind == "body");
    // The capture search's conditions read the request as a capture row; `handshake` is null (a request a
    // handshake preset recognised is answered by it and never reaches the rules).
    let statement = format!(
        "WITH t AS (SELECT $1::text AS method, $2::text AS path, $3::jsonb AS headers, $4::jsonb AS query,
                $5::text AS content_type, $6::bytea AS body, $7::int8 AS body_size, $8::text AS source_ip,
                $9::text AS signature_verdict, NULL::text AS handshake, $10::timestamptz AS received_at,
                CASE WHEN $11 THEN hookflow_try_jsonb($6) END AS json),
            k AS (SELECT * FROM unnest($12::int4[], $13::bool[], $14::text[], $15::text[], $16::text[], $17::text[],
                $18::jsonb[], $19::int8[], $20::timestamptz[]) AS k(rule, negate, kind, name, op, val, jval, num, at))
         SELECT COALESCE(array_agg(DISTINCT k.rule), '{{}}') FROM k CROSS JOIN t
         WHERE CASE WHEN k.negate THEN ({EVAL}) IS NOT FALSE ELSE ({EVAL}) IS NOT TRUE END"
    );
    let mut tx = crate::db::begin::begin(pool).await?;
    sqlx::query("SELECT set_config('statement_timeout', $1, true)")
        .bind(format!("{}ms", MATCH_TIMEOUT.as_millis()))
        .execute(&mut *tx)
        .await?;
    let body: &[u8] = if needs_body { incoming.body } else { &[] };
    let failed: Vec<i32> = sqlx::query_scalar(sqlx::AssertSqlSafe(statement))
        .bind(incoming.method)
        .bind(incoming.path)
        .bind(Json(incoming.headers))
        .bind(Json(incoming.query))
        .bind(incoming.content_type)
        .bind(body)
        .bind(i64::try_from(incoming.body.len()).unwrap_or(i64::MAX))
        .bind(incoming.source_ip)
        .bind(incoming.verdict)
        .bind(incoming.received_at)
        .bind(needs_json)
        .bind(k.rule)
        .bind(k.negate)
        .bind(k.kind)
        .bind(k.name)
        .bind(k.op)
        .bind(k.text)
        .bind(k.json)
        .bind(k.number)
        .bind(k.at)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(failed)
}

/// The candidates' conditions, column by column (`unnest` reads them back as rows).
#[derive(Default)]
struct Columns {
    rule: Vec<i32>,
    negate: Vec<bool>,
    kind: Vec<String>,
    name: Vec<String>,
    op: Vec<String>,
    text: Vec<String>,
    json: Vec<Json<serde_json::Value>>,
    number: Vec<i64>,
    at: Vec<DateTime<Utc>>,
}

impl Columns {
    fn push(&mut self, rule: i32, cond: &RuleCond) {
        self.rule.push(rule);
        self.negate.push(cond.negate);
        self.kind.push(cond.kind.clone());
        self.name.push(cond.name.clone());
        self.op.push(cond.op.clone());
        self.text.push(cond.text.clone());
        self.json.push(Json(cond.json.clone()));
        self.number.push(cond.number);
        self.at.push(cond.at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_templates_match_segments_parameters_and_rests() {
        let orders = PathTemplate::parse("/orders/{id}").expect("template");
        assert_eq!(orders.matches("/orders/42"), Some(vec![("id".into(), "42".into())]));
        assert_eq!(orders.matches("/orders/a%20b"), Some(vec![("id".into(), "a b".into())]));
        assert_eq!(orders.matches("/orders"), None);
        assert_eq!(orders.matches("/orders/"), None);
        assert_eq!(orders.matches("/orders/1/2"), None);
        let root = PathTemplate::parse("/").expect("root");
        assert!(root.matches("").is_some());
        assert!(root.matches("/").is_some());
        assert!(root.matches("/x").is_none());
        let rest = PathTemplate::parse("/files/*").expect("rest");
        assert!(rest.matches("/files").is_some());
        assert!(rest.matches("/files/a/b").is_some());
        assert!(rest.matches("/filesx").is_none());
        assert!(PathTemplate::parse("orders").is_err());
        assert!(PathTemplate::parse("/a/*/b").is_err());
        assert!(PathTemplate::parse("/a{id}").is_err());
        assert!(PathTemplate::parse("/{a}/{a}").is_err());
    }
}
