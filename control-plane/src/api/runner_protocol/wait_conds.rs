//! A capture search's conditions as the waiters' sweep reads them: data, one row per condition
//! (`capture::wait_sweep::WaitCond`), so one statement weighs every waiter's search.

use crate::api::webhooks::search::Cond;
use crate::capture::wait_sweep::WaitCond;
use hookflow_shared::api::webhooks::MatchOp;

/// The condition as data; a negated condition (`-term` in `q`) is its inner condition with `negate` set.
pub fn of(cond: &Cond) -> WaitCond {
    let field = |kind, name: &str, op: MatchOp, value: &Option<String>| WaitCond {
        name: name.to_owned(),
        op: op.as_str(),
        text: value.clone().unwrap_or_default(),
        ..WaitCond::new(kind)
    };
    match cond {
        Cond::Methods(methods) => WaitCond { json: serde_json::json!(methods), ..WaitCond::new("methods") },
        Cond::ReceivedAfter(at) => WaitCond { at: *at, ..WaitCond::new("after") },
        Cond::ReceivedBefore(at) => WaitCond { at: *at, ..WaitCond::new("before") },
        Cond::Header { name, op, value } => field("header", name, *op, value),
        Cond::Query { name, op, value } => field("query", name, *op, value),
        Cond::BodyContains(text) => WaitCond { text: text.clone(), ..WaitCond::new("body") },
        Cond::BodyJson { path, op, value } => WaitCond {
            name: path.clone(),
            op: op.as_str(),
            text: json_text(value),
            json: value.clone().unwrap_or_default(),
            ..WaitCond::new("json")
        },
        Cond::BodyJsonText { path, value } => WaitCond {
            name: path.clone(),
            op: if value.is_some() { "eq" } else { "exists" },
            text: value.clone().unwrap_or_default(),
            ..WaitCond::new("jsontext")
        },
        Cond::ContentType(prefix) => WaitCond { text: prefix.to_ascii_lowercase(), ..WaitCond::new("content_type") },
        Cond::MinSize(n) => WaitCond { number: *n, ..WaitCond::new("min_size") },
        Cond::MaxSize(n) => WaitCond { number: *n, ..WaitCond::new("max_size") },
        Cond::SourceIp(ip) => WaitCond { text: ip.clone(), ..WaitCond::new("ip") },
        Cond::PathContains(text) => WaitCond { text: text.clone(), ..WaitCond::new("path") },
        Cond::Signatures(verdicts) => {
            let names: Vec<&str> = verdicts.iter().map(|v| v.as_str()).collect();
            WaitCond { json: serde_json::json!(names), ..WaitCond::new("signatures") }
        }
        Cond::Handshake(preset) => WaitCond { text: preset.as_str().to_owned(), ..WaitCond::new("handshake") },
        Cond::Not(inner) => {
            let mut negated = of(inner);
            negated.negate = !negated.negate;
            negated
        }
    }
}

/// A JSON value as text for contains/prefix: strings without their quotes (as the search reads it).
fn json_text(value: &Option<serde_json::Value>) -> String {
    match value {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}
