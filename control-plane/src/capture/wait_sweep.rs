//! The one statement that serves every waiter of a target: it reads the newest captures at the target since the
//! earliest waiter's execution began (at most [`WINDOW`]), and for each waiter the earliest of them that matches
//! its search, is not excluded and was not already looked at for it. A waiter's search travels as rows of data
//! ([`WaitCond`]), not as SQL text, so the statement is the same whatever the waiters ask and one execution
//! weighs every waiter's conditions; bodies are parsed as JSON once per capture, and only when a waiter reads them
//! so. A waiter whose search holds an equality on a header, a query value or a JSONPath (its key, [`key_of`]) is
//! weighed only against the captures that hold that value, found by hashing: 1,000 waiters each keyed to its own
//! capture cost about what one does, not 1,000 times the captures.
//! The conditions mean what the capture search's (`api::webhooks::search::push_cond`) mean, side by side below,
//! except that a JSONPath error (a `strict` path that finds nothing) is no match rather than a failed statement:
//! one waiter's search never fails the sweep of the others.
use crate::capture::row::{CAPTURE_COLUMNS_FULL, CaptureRow};
use crate::capture::target::CaptureTarget;
use chrono::{DateTime, Utc};
use hookflow_shared::{CaptureId, OrgId};
use sqlx::types::Json;
use sqlx::{FromRow as _, PgPool, Row as _};

/// A wait looks at the newest this many captures since its execution began, never more.
pub const WINDOW: i64 = 1_000;

/// One condition of a search, as data. `kind` names the condition (`methods`, `after`, `before`, `header`,
/// `query`, `body`, `json`, `jsontext`, `content_type`, `min_size`, `max_size`, `ip`, `path`, `signatures`);
/// the other fields are what that kind reads.
#[derive(Debug, Clone)]
pub struct WaitCond {
    pub negate: bool,
    pub kind: &'static str,
    /// A header or query name, or a JSONPath.
    pub name: String,
    /// `eq`, `ne`, `contains`, `prefix` or `exists`.
    pub op: &'static str,
    pub text: String,
    /// A JSON value (`json` with `eq`/`ne`), or the list of `methods` and `signatures`.
    pub json: serde_json::Value,
    pub number: i64,
    pub at: DateTime<Utc>,
}

impl WaitCond {
    pub fn new(kind: &'static str) -> Self {
        Self {
            negate: false,
            kind,
            name: String::new(),
            op: "eq",
            text: String::new(),
            json: serde_json::Value::Null,
            number: 0,
            at: DateTime::<Utc>::UNIX_EPOCH,
        }
    }
}

/// What one waiter looks for.
#[derive(Debug, Clone)]
pub struct WaitSpec {
    pub org_id: OrgId,
    pub target: CaptureTarget,
    /// When its execution began: older captures never match.
    pub since: DateTime<Utc>,
    /// The endpoint enforces signatures: captures it refused satisfy nothing.
    pub enforced: bool,
    /// Captures other nodes of the run took.
    pub exclude: Vec<CaptureId>,
    pub conds: Vec<WaitCond>,
}

/// A waiter as a sweep sees it: its slot, the generation it joined in, and its search.
#[derive(Debug)]
pub struct Asking<'a> {
    pub slot: i64,
    pub generation: i64,
    pub spec: &'a WaitSpec,
}

/// What a sweep found: each served waiter's capture, and every capture of the window (now looked at for every
/// waiter of the sweep's generation).
#[derive(Debug, Default)]
pub struct Swept {
    pub found: Vec<(i64, CaptureRow)>,
    pub window: Vec<CaptureId>,
}

/// Whether a condition of `k` fails for the capture `t`: the condition's SQL, as `push_cond` writes it.
pub const EVAL: &str = "CASE k.kind
    WHEN 'methods' THEN t.method = ANY(ARRAY(SELECT jsonb_array_elements_text(k.jval)))
    WHEN 'after' THEN t.received_at >= k.at
    WHEN 'before' THEN t.received_at < k.at
    WHEN 'header' THEN (k.op = 'ne') <> EXISTS (SELECT 1 FROM jsonb_array_elements(t.headers) h
        WHERE lower(h->>0) = k.name AND (CASE k.op WHEN 'contains' THEN strpos(h->>1, k.val) > 0
            WHEN 'prefix' THEN starts_with(h->>1, k.val) WHEN 'exists' THEN true ELSE h->>1 = k.val END))
    WHEN 'query' THEN (k.op = 'ne') <> EXISTS (SELECT 1 FROM jsonb_array_elements_text(COALESCE(t.query->k.name, '[]')) v
        WHERE (CASE k.op WHEN 'contains' THEN strpos(v, k.val) > 0
            WHEN 'prefix' THEN starts_with(v, k.val) WHEN 'exists' THEN true ELSE v = k.val END))
    WHEN 'body' THEN position(convert_to(k.val, 'UTF8') in t.body) > 0
    WHEN 'json' THEN (SELECT CASE k.op WHEN 'eq' THEN v = k.jval WHEN 'ne' THEN v IS DISTINCT FROM k.jval
            WHEN 'contains' THEN strpos(v #>> '{}', k.val) > 0 WHEN 'prefix' THEN starts_with(v #>> '{}', k.val)
            ELSE v IS NOT NULL END
        FROM jsonb_path_query_first(t.json, k.name::jsonpath, '{}', true) AS v)
    WHEN 'jsontext' THEN (SELECT CASE k.op WHEN 'exists' THEN v IS NOT NULL ELSE v #>> '{}' = k.val END
        FROM jsonb_path_query_first(t.json, k.name::jsonpath, '{}', true) AS v)
    WHEN 'content_type' THEN starts_with(lower(COALESCE(t.content_type, '')), k.val)
    WHEN 'min_size' THEN t.body_size >= k.num
    WHEN 'max_size' THEN t.body_size <= k.num
    WHEN 'ip' THEN t.source_ip = k.val
    WHEN 'path' THEN strpos(t.path, k.val) > 0
    WHEN 'signatures' THEN t.signature_verdict = ANY(ARRAY(SELECT jsonb_array_elements_text(k.jval)))
    WHEN 'handshake' THEN t.handshake IS NOT DISTINCT FROM k.val
END";

fn statement(column: &str) -> String {
    // A waiter with a key (an equality its search must hold: a header, a query value, a JSONPath's value) is paired
    // only with the captures that hold its key, found by hashing each capture's headers, query values and the
    // JSONPaths waiters read (each evaluated once per capture) against the keys: a sweep's work grows with the
    // captures and the waiters, not with their product. A waiter without a key is paired with every capture it has
    // not looked at (new captures times waiters, and the window times new waiters). Only pairs are then weighed
    // against every condition of their waiter, so what a key selects is always checked in full.
    format!(
        "WITH w AS (SELECT * FROM unnest($1::int8[], $2::int8[], $3::timestamptz[], $4::bool[], $23::bool[])
                AS w(slot, gen, since, enforced, keyed)),
            seen AS (SELECT * FROM unnest($5::uuid[]) AS s(id)),
            win AS (SELECT id, received_at FROM captures
                WHERE organization_id = $7 AND {column} = $8 AND received_at >= $9
                ORDER BY received_at DESC, id DESC LIMIT {WINDOW}),
            fresh AS (SELECT f.id, f.received_at, EXISTS (SELECT 1 FROM seen s WHERE s.id = f.id) AS was_seen
                FROM win f),
            t AS MATERIALIZED (SELECT c.id, c.method, c.path, c.headers, c.query, c.content_type,
                CASE WHEN $22 THEN c.body END AS body, c.body_size,
                c.source_ip, c.signature_verdict, c.handshake, c.received_at, CASE WHEN $21 THEN hookflow_try_jsonb(c.body) END AS json
                FROM captures c WHERE c.organization_id = $7 AND c.id IN (SELECT id FROM fresh
                    WHERE NOT was_seen OR received_at >= (SELECT min(since) FROM w WHERE w.gen > $6))),
            kk AS (SELECT * FROM unnest($24::int8[], $25::text[], $26::text[], $27::text[], $28::jsonb[])
                AS kk(slot, kind, name, val, jval)),
            hdr AS MATERIALIZED (SELECT t.id, lower(h->>0) AS name, h->>1 AS val
                FROM t CROSS JOIN LATERAL jsonb_array_elements(t.headers) h
                WHERE EXISTS (SELECT 1 FROM kk WHERE kk.kind = 'header')),
            qry AS MATERIALIZED (SELECT t.id, q.key AS name, v AS val
                FROM t CROSS JOIN LATERAL jsonb_each(COALESCE(t.query, '{{}}')) q
                CROSS JOIN LATERAL jsonb_array_elements_text(CASE jsonb_typeof(q.value) WHEN 'array' THEN q.value
                    ELSE '[]' END) v
                WHERE EXISTS (SELECT 1 FROM kk WHERE kk.kind = 'query')),
            paths AS (SELECT DISTINCT name FROM kk WHERE kind IN ('json', 'jsontext')),
            jv AS MATERIALIZED (SELECT t.id, p.name, jsonb_path_query_first(t.json, p.name::jsonpath, '{{}}', true) AS v
                FROM t CROSS JOIN paths p),
            km AS (SELECT kk.slot, hdr.id FROM kk JOIN hdr ON hdr.name = kk.name AND hdr.val = kk.val
                    WHERE kk.kind = 'header'
                UNION SELECT kk.slot, qry.id FROM kk JOIN qry ON qry.name = kk.name AND qry.val = kk.val
                    WHERE kk.kind = 'query'
                UNION SELECT kk.slot, jv.id FROM kk JOIN jv ON jv.name = kk.name AND jv.v #>> '{{}}' = kk.val
                    WHERE kk.kind = 'jsontext'
                UNION SELECT kk.slot, jv.id FROM kk JOIN jv ON jv.name = kk.name AND jv.v = kk.jval
                    WHERE kk.kind = 'json'),
            pairs AS (
                SELECT w.slot, f.id, f.received_at FROM fresh f JOIN w ON f.received_at >= w.since
                WHERE NOT w.keyed AND (NOT f.was_seen OR w.gen > $6)
                UNION ALL
                SELECT w.slot, f.id, f.received_at FROM km JOIN fresh f ON f.id = km.id JOIN w ON w.slot = km.slot
                WHERE w.keyed AND f.received_at >= w.since AND (NOT f.was_seen OR w.gen > $6)),
            k AS (SELECT * FROM unnest($10::int8[], $11::bool[], $12::text[], $13::text[], $14::text[], $15::text[],
                $16::jsonb[], $17::int8[], $18::timestamptz[]) AS k(slot, negate, kind, name, op, val, jval, num, at)),
            x AS (SELECT * FROM unnest($19::int8[], $20::uuid[]) AS x(slot, id)),
            failed AS (SELECT DISTINCT p.slot, p.id FROM pairs p JOIN k ON k.slot = p.slot JOIN t ON t.id = p.id
                WHERE CASE WHEN k.negate THEN ({EVAL}) IS NOT FALSE ELSE ({EVAL}) IS NOT TRUE END),
            matched AS (SELECT DISTINCT ON (p.slot) p.slot AS m_slot, p.id AS m_id
                FROM pairs p JOIN t ON t.id = p.id JOIN w ON w.slot = p.slot
                WHERE (NOT w.enforced OR t.signature_verdict NOT IN ('invalid', 'missing', 'duplicate'))
                  AND NOT EXISTS (SELECT 1 FROM x WHERE x.slot = p.slot AND x.id = p.id)
                  AND NOT EXISTS (SELECT 1 FROM failed f WHERE f.slot = p.slot AND f.id = p.id)
                ORDER BY p.slot, p.received_at, p.id)
         SELECT (SELECT COALESCE(array_agg(id), '{{}}') FROM win) AS window_ids, m.m_slot, served.*
         FROM (SELECT 1) AS one
         LEFT JOIN (matched m JOIN LATERAL (SELECT {CAPTURE_COLUMNS_FULL} FROM captures WHERE captures.id = m.m_id)
             AS served ON true) ON true"
    )
}

/// The condition of a search that selects the captures a waiter is weighed against: the first equality it must
/// hold on a header, a query value or a JSONPath's value (`None`: the waiter is weighed against every capture).
fn key_of(spec: &WaitSpec) -> Option<&WaitCond> {
    spec.conds.iter().find(|c| !c.negate && c.op == "eq" && matches!(c.kind, "header" | "query" | "json" | "jsontext"))
}

/// Captures a sweep looked at for every waiter that had joined by `generation`.
#[derive(Debug, Clone, Default)]
pub struct Seen {
    pub ids: Vec<CaptureId>,
    pub generation: i64,
}

/// Runs the sweep of one target for `asking` (all of one target), skipping the captures `seen` for the waiters
/// that had joined by its generation.
pub async fn sweep(pool: &PgPool, asking: &[Asking<'_>], seen: &Seen) -> sqlx::Result<Swept> {
    let Some(first) = asking.first() else { return Ok(Swept::default()) };
    let (column, target): (&str, uuid::Uuid) = match first.spec.target {
        CaptureTarget::Webhook(id) => ("webhook_id", id.into()),
        CaptureTarget::Execution(id) => ("execution_id", id.into()),
    };
    let since = asking.iter().map(|a| a.spec.since).min().unwrap_or(first.spec.since);
    let mut k = Columns::default();
    // Bodies are parsed only when some waiter reads them as JSON.
    let needs_json = asking.iter().flat_map(|a| &a.spec.conds).any(|c| matches!(c.kind, "json" | "jsontext"));
    let needs_body = asking.iter().flat_map(|a| &a.spec.conds).any(|c| c.kind == "body");
    let (mut x_slot, mut x_id) = (Vec::new(), Vec::new());
    let mut keys = Keys::default();
    for a in asking {
        if let Some(key) = key_of(a.spec) {
            keys.push(a.slot, key);
        }
        for cond in &a.spec.conds {
            k.push(a.slot, cond);
        }
        for id in &a.spec.exclude {
            x_slot.push(a.slot);
            x_id.push(*id);
        }
    }
    let rows = sqlx::query(sqlx::AssertSqlSafe(statement(column)))
        .bind(asking.iter().map(|a| a.slot).collect::<Vec<_>>())
        .bind(asking.iter().map(|a| a.generation).collect::<Vec<_>>())
        .bind(asking.iter().map(|a| a.spec.since).collect::<Vec<_>>())
        .bind(asking.iter().map(|a| a.spec.enforced).collect::<Vec<_>>())
        .bind(&seen.ids)
        .bind(seen.generation)
        .bind(first.spec.org_id)
        .bind(target)
        .bind(since)
        .bind(k.slot)
        .bind(k.negate)
        .bind(k.kind)
        .bind(k.name)
        .bind(k.op)
        .bind(k.text)
        .bind(k.json)
        .bind(k.number)
        .bind(k.at)
        .bind(x_slot)
        .bind(x_id)
        .bind(needs_json)
        .bind(needs_body)
        .bind(asking.iter().map(|a| key_of(a.spec).is_some()).collect::<Vec<_>>())
        .bind(keys.slot)
        .bind(keys.kind)
        .bind(keys.name)
        .bind(keys.text)
        .bind(keys.json)
        .fetch_all(pool)
        .await?;
    let mut swept = Swept::default();
    for row in &rows {
        if swept.window.is_empty() {
            swept.window = row.try_get("window_ids")?;
        }
        if let Some(slot) = row.try_get::<Option<i64>, _>("m_slot")? {
            swept.found.push((slot, CaptureRow::from_row(row)?));
        }
    }
    Ok(swept)
}

/// The conditions of every waiter, column by column (`unnest` reads them back as rows).
#[derive(Default)]
struct Columns {
    slot: Vec<i64>,
    negate: Vec<bool>,
    kind: Vec<&'static str>,
    name: Vec<String>,
    op: Vec<&'static str>,
    text: Vec<String>,
    json: Vec<Json<serde_json::Value>>,
    number: Vec<i64>,
    at: Vec<DateTime<Utc>>,
}

impl Columns {
    fn push(&mut self, slot: i64, cond: &WaitCond) {
        self.slot.push(slot);
        self.negate.push(cond.negate);
        self.kind.push(cond.kind);
        self.name.push(cond.name.clone());
        self.op.push(cond.op);
        self.text.push(cond.text.clone());
        self.json.push(Json(cond.json.clone()));
        self.number.push(cond.number);
        self.at.push(cond.at);
    }
}

/// The waiters' keys ([`key_of`]), column by column.
#[derive(Default)]
struct Keys {
    slot: Vec<i64>,
    kind: Vec<&'static str>,
    name: Vec<String>,
    text: Vec<String>,
    json: Vec<Json<serde_json::Value>>,
}

impl Keys {
    fn push(&mut self, slot: i64, cond: &WaitCond) {
        self.slot.push(slot);
        self.kind.push(cond.kind);
        self.name.push(cond.name.clone());
        self.text.push(cond.text.clone());
        self.json.push(Json(cond.json.clone()));
    }
}
