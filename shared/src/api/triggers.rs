//! Captures that start flows: an endpoint's `triggers` (which flow each matching capture launches, and with what),
//! the link from a triggered execution to its capture (`trigger_request`) and back (`executions` of a capture),
//! and the names of the launch variables a capture gives its run.

use crate::api::fields::{CollectionVariables, Refusal};
pub use crate::api::rules::{EXTRACTS_MAX, TRIGGERS_MAX};
use crate::api::rules::{SHORT_TEXT_MAX, is_key};
use crate::api::search::SearchFilter;
use crate::flow::definition::VersionSelector;
use crate::ids::{CaptureId, ExecutionId, FlowId, WebhookId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Longest `q` of a trigger, in characters.
pub const TRIGGER_Q_MAX: usize = SHORT_TEXT_MAX;
/// Where a capture's launch variables are named: `capture.method`, `capture.headers.<name>`, ...
pub const CAPTURE_PREFIX: &str = "capture.";

/// A flow an endpoint's captures launch: every capture that matches `q` and `filter` (both optional; none
/// matches everything) launches `flow_id` once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookTrigger {
    /// A flow of the endpoint's organization.
    pub flow_id: FlowId,
    /// Search terms a capture must match (the `q` of a capture search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 2000)]
    pub q: Option<String>,
    /// A search filter a capture must match (the `filter` of a capture search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<SearchFilter>,
    /// Key of one of the flow's environments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::environment_key_or_null)]
    pub environment: Option<String>,
    /// A published version number or `"latest"`; absent runs the draft.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::api::rules::version_selector)]
    pub version: Option<VersionSelector>,
    /// Launch variables of every run it starts (plain values, never templates).
    #[serde(default, skip_serializing_if = "CollectionVariables::is_empty")]
    #[schema(schema_with = crate::api::rules::collection_variables)]
    pub variables: CollectionVariables,
    /// Launch variables taken from the capture's JSON body: `{"name": "<RFC 9535 JSONPath>"}`.
    #[serde(default, skip_serializing_if = "Extracts::is_empty")]
    #[schema(schema_with = crate::api::rules::trigger_extracts)]
    pub extract: Extracts,
    /// Priority of every run it starts (issue #53): 1 (highest) to 5 (lowest); absent: 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<crate::api::fields::Priority>,
}

impl WebhookTrigger {
    /// A trigger of `flow_id` that every capture matches, launching the draft.
    pub fn new(flow_id: FlowId) -> Self {
        Self {
            flow_id,
            q: None,
            filter: None,
            environment: None,
            version: None,
            variables: CollectionVariables::default(),
            extract: Extracts::default(),
            priority: None,
        }
    }
}

/// An endpoint's triggers: at most [`TRIGGERS_MAX`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<WebhookTrigger>")]
pub struct Triggers(Vec<WebhookTrigger>);

impl Triggers {
    pub fn into_inner(self) -> Vec<WebhookTrigger> {
        self.0
    }
}

impl std::ops::Deref for Triggers {
    type Target = [WebhookTrigger];

    fn deref(&self) -> &[WebhookTrigger] {
        &self.0
    }
}

impl TryFrom<Vec<WebhookTrigger>> for Triggers {
    type Error = Refusal;

    fn try_from(triggers: Vec<WebhookTrigger>) -> Result<Self, Refusal> {
        if triggers.len() > TRIGGERS_MAX {
            return Err(Refusal::new(format!("invalid field `{{field}}`: at most {TRIGGERS_MAX} triggers")));
        }
        Ok(Triggers(triggers))
    }
}

/// What a trigger takes from the body: names (as collection variables are named) to RFC 9535 JSONPaths.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "BTreeMap<String, String>")]
pub struct Extracts(BTreeMap<String, String>);

impl Extracts {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The names found in a JSON body: a string as it is, anything else as JSON text, several matches as a JSON
    /// array. A name whose path matches nothing (or a body that is not JSON) is left out, so a template naming it
    /// fails saying so; so is one whose value would be longer than [`MAX_EXTRACTED_BYTES`] or that matches more than
    /// [`MAX_EXTRACTED_MATCHES`] values (a sender's body must not make the server build copies of itself: `$..*`
    /// over a deep body matches every level). Values are written out within that budget, never copied whole.
    pub fn values_in(&self, body: &[u8]) -> BTreeMap<String, String> {
        let mut found = BTreeMap::new();
        if self.0.is_empty() {
            return found;
        }
        let Ok(document) = serde_json::from_slice::<serde_json::Value>(body) else { return found };
        for (name, path) in &self.0 {
            // Stored before the budget existed, a path past it is skipped (it could list billions of matches).
            if crate::flow::budget::check_capture_json_path(path).is_err() {
                continue;
            }
            let Ok(path) = serde_json_path::JsonPath::parse(path) else { continue };
            let matches = path.query(&document).all();
            let text = match matches.as_slice() {
                [] => continue,
                [serde_json::Value::String(text)] if text.len() <= MAX_EXTRACTED_BYTES => Some(text.clone()),
                [serde_json::Value::String(_)] => None,
                [one] => bounded_json(one),
                many if many.len() <= MAX_EXTRACTED_MATCHES => bounded_json(&many),
                _ => None,
            };
            if let Some(text) = text {
                found.insert(name.clone(), text);
            }
        }
        found
    }
}

/// The longest value a trigger's `extract` name takes (its JSON text).
pub const MAX_EXTRACTED_BYTES: usize = 64 * 1024;
/// The most values one `extract` path may match.
pub const MAX_EXTRACTED_MATCHES: usize = 1_000;

/// `value` as JSON text, or `None` once it would pass [`MAX_EXTRACTED_BYTES`] (writing stops there).
fn bounded_json(value: &impl Serialize) -> Option<String> {
    struct Bounded(Vec<u8>);
    impl std::io::Write for Bounded {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if self.0.len() + bytes.len() > MAX_EXTRACTED_BYTES {
                return Err(std::io::Error::other("over the budget"));
            }
            self.0.extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Bounded(Vec::new());
    serde_json::to_writer(&mut out, value).ok()?;
    String::from_utf8(out.0).ok()
}

impl std::ops::Deref for Extracts {
    type Target = BTreeMap<String, String>;

    fn deref(&self) -> &BTreeMap<String, String> {
        &self.0
    }
}

impl TryFrom<BTreeMap<String, String>> for Extracts {
    type Error = Refusal;

    fn try_from(paths: BTreeMap<String, String>) -> Result<Self, Refusal> {
        if paths.len() > EXTRACTS_MAX {
            return Err(Refusal::new(format!("invalid field `{{field}}`: at most {EXTRACTS_MAX} names")));
        }
        for (name, path) in &paths {
            if !is_key(name, 100) {
                return Err(Refusal::new(format!(
                    "invalid field `{{field}}`: `{name}` is not a variable name (1 to 100 letters, digits, `_`, `-`)"
                )));
            }
            let parsed = crate::flow::budget::check_capture_json_path(path)
                .and_then(|()| serde_json_path::JsonPath::parse(path).map(drop).map_err(|e| e.to_string()));
            if let Err(detail) = parsed {
                return Err(Refusal::new(format!("`{{field}}.{name}`: `{path}` is not a valid JSONPath: {detail}")));
            }
        }
        Ok(Extracts(paths))
    }
}

/// The capture that launched an execution (`trigger: webhook`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TriggerRequest {
    pub webhook_id: WebhookId,
    pub request_id: CaptureId,
}

/// An execution a capture launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CaptureExecution {
    pub flow_id: FlowId,
    pub execution_id: ExecutionId,
}

/// A name a trigger both sets (`variables`) and extracts: one would shadow the other, so it is refused.
pub fn shadowed_name(trigger: &WebhookTrigger) -> Option<&str> {
    trigger.extract.keys().find(|name| trigger.variables.contains_key(*name)).map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(value: serde_json::Value) -> String {
        serde_json::from_value::<Triggers>(value).expect_err("refused").to_string()
    }

    #[test]
    fn a_trigger_reads_its_fields_and_writes_only_those_it_has() {
        let id = FlowId::now_v7();
        let text = json!([{"flow_id": id, "q": "method:POST", "version": "latest", "extract": {"order": "$.id"}}]);
        let triggers: Triggers = serde_json::from_value(text.clone()).expect("triggers");
        assert_eq!(triggers[0].extract.get("order").map(String::as_str), Some("$.id"));
        assert_eq!(serde_json::to_value(&triggers).expect("json"), text);
        assert_eq!(serde_json::to_value(WebhookTrigger::new(id)).expect("json"), json!({"flow_id": id}));
    }

    #[test]
    fn refuses_more_than_ten_bad_names_and_bad_paths() {
        let one = json!({"flow_id": FlowId::now_v7()});
        assert!(refused(json!(vec![one; 11])).contains("at most 10 triggers"));
        let with = |extract: serde_json::Value| json!([{"flow_id": FlowId::now_v7(), "extract": extract}]);
        assert!(refused(with(json!({"a.b": "$.x"}))).contains("`a.b` is not a variable name"));
        assert!(refused(with(json!({"id": "$.["}))).contains("`$.[` is not a valid JSONPath"));
        let many: BTreeMap<String, String> = (0..21).map(|i| (format!("n{i}"), "$.x".to_owned())).collect();
        assert!(refused(with(json!(many))).contains("at most 20 names"));
    }

    #[test]
    fn a_name_both_set_and_extracted_is_found() {
        let mut trigger: WebhookTrigger = serde_json::from_value(
            json!({"flow_id": FlowId::now_v7(), "variables": {"id": "1"}, "extract": {"id": "$.id"}}),
        )
        .expect("trigger");
        assert_eq!(shadowed_name(&trigger), Some("id"));
        trigger.variables = CollectionVariables::default();
        assert_eq!(shadowed_name(&trigger), None);
    }

    #[test]
    fn a_senders_deep_body_cannot_make_extract_copy_it_level_by_level() {
        // 100 levels around a 1 MiB string: `$..*` matches every level, each holding the whole string.
        let big = "x".repeat(1024 * 1024);
        let mut body = serde_json::json!(big);
        for _ in 0..100 {
            body = serde_json::json!({"a": body});
        }
        let body = serde_json::to_vec(&body).expect("json");
        let extracts: Extracts =
            serde_json::from_value(serde_json::json!({"all": "$..*", "deep": "$.a.a", "small": "$.a.a.a"}))
                .expect("extracts");
        let started = std::time::Instant::now();
        let found = extracts.values_in(&body);
        assert!(found.is_empty(), "every value is over the budget: {:?}", found.keys().collect::<Vec<_>>());
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "bounded work: {:?}", started.elapsed());
        let fine: Extracts =
            serde_json::from_value(serde_json::json!({"id": "$.data.id", "both": "$..id"})).expect("ok");
        let found = fine.values_in(br#"{"data": {"id": "pay_1"}, "id": 7}"#);
        assert_eq!(found["id"], "pay_1");
        assert_eq!(found["both"], "[7,\"pay_1\"]");
    }
}
