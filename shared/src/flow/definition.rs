//! The flow definition (API.md section 3) and its validation into precise problems (`node_id`, `field`,
//! `message`). Definitions are stored as given; these types are how the server checks them and the runner reads
//! them.

use crate::api::catalog::Assertion;
use crate::flow::assert::Operator;
use crate::flow::extract::Extractor;
use crate::flow::names;
use crate::flow::request_body::{BodyParts, body_problems};
pub use crate::flow::request_body::{GraphqlRequest, MultipartPart};
use crate::flow::request_parts::with_request_parts;
use crate::flow::template;
use crate::ids::{CollectionId, CollectionRequestId, FlowId};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};

/// A flow definition (API.md section 3): nodes run in order, with the flow's own variables and time budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FlowDefinition {
    /// Variables every node can use as `{{name}}`, under environment and launch variables.
    #[serde(default)]
    pub variables: BTreeMap<String, String>,
    /// Longest the whole run may take, in seconds.
    #[schema(minimum = 1, maximum = 86_400)]
    pub timeout_s: Option<u64>,
    /// The nodes, each a `kind` with its own fields.
    #[schema(min_items = 1)]
    pub nodes: Vec<Node>,
    /// Where an editor placed the nodes; any JSON, kept as given.
    #[serde(default)]
    pub layout: Value,
    /// `false` turns the run's cookie jar off for every request node (#54); absent or `true`: on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookies: Option<bool>,
}

use crate::flow::node_parts::node_kind;
pub use crate::flow::node_parts::{MAX_FLOW_TIMEOUT_S, check_evaluations};
pub use crate::flow::request_parts::METHODS;
pub use crate::flow::request_parts::{RequestParts, request_problems};
pub use crate::flow::webhook_node::{RequiredSignature, WaitFor, WebhookNode};

/// Read by `node_reader` (a kind's fields only from an object); written as the tagged object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Node {
    Request(Box<RequestNode>),
    Delay(DelayNode),
    Module(ModuleNode),
    SetVariables(SetVariablesNode),
    Webhook(Box<WebhookNode>),
}

node_kind! {
    pub struct RequestNode {
        pub request: Option<RequestSpec>,
        pub request_ref: Option<RequestRef>,
        #[serde(default)]
        pub extractors: Vec<Extractor>,
        #[serde(default)]
        pub assertions: Vec<Assertion>,
        pub retry: Option<Retry>,
        #[schema(minimum = 1, maximum = 300_000)]
        pub timeout_ms: Option<u64>,
    }
}

with_request_parts! {
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
    #[serde(deny_unknown_fields)]
    pub struct RequestSpec {
        pub method: String,
        pub url: String,
        ..parts,
        /// Urlencoded pairs sent as the body (instead of `body`): `[[name, value], ...]`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(schema_with = crate::flow::request_body::form_schema)]
        pub form: Option<Vec<(String, String)>>,
        /// `multipart/form-data` parts sent as the body, with a boundary the engine chooses.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub multipart: Option<Vec<MultipartPart>>,
        /// A GraphQL operation sent as the GraphQL-over-HTTP POST.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub graphql: Option<GraphqlRequest>,
        /// `false`: this request neither sends the run's cookies nor keeps the ones it gets (absent: `true`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cookies: Option<bool>,
        /// `{{secret.NAME}}`: a PEM certificate chain and its PKCS#8 key, presented to servers asking for one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub client_certificate: Option<String>,
    }
}

/// A request of a collection used instead of an inline request, with optional overrides. The server resolves it
/// when the flow is launched, so the run uses the request as it is then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestRef {
    pub collection_id: CollectionId,
    pub request_id: CollectionRequestId,
    pub overrides: Option<RequestOverrides>,
}

with_request_parts! {
    /// What a flow changes in a referenced request: method, URL and body replace; headers and query merge over the
    /// request's (an empty value removes the entry).
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
    #[serde(deny_unknown_fields)]
    pub struct RequestOverrides {
        pub method: Option<String>,
        pub url: Option<String>,
        ..parts,
    }
}

impl RequestOverrides {
    /// The referenced request with these overrides applied.
    pub fn apply(&self, mut request: RequestSpec) -> RequestSpec {
        if let Some(method) = &self.method {
            method.clone_into(&mut request.method);
        }
        if let Some(url) = &self.url {
            url.clone_into(&mut request.url);
        }
        if let Some(body) = &self.body {
            request.body = Some(body.clone());
        }
        for (into, from) in [(&mut request.headers, &self.headers), (&mut request.query, &self.query)] {
            for (name, value) in from {
                if value.is_empty() {
                    into.remove(name);
                } else {
                    into.insert(name.clone(), value.clone());
                }
            }
        }
        request
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    pub count: u32,
    #[serde(default)]
    pub interval_ms: u64,
}

node_kind! {
    pub struct DelayNode {
        pub delay_ms: u64,
    }
}

/// Which published version a module node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum VersionSelector {
    Number(u32),
    Latest(Latest),
}

/// The newest published version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = LatestVersion)]
pub enum Latest {
    Latest,
}

node_kind! {
    pub struct ModuleNode {
        pub flow_id: FlowId,
        #[schema(schema_with = crate::api::rules::version_selector)]
        pub version: Option<VersionSelector>,
        #[serde(default)]
        pub inputs: BTreeMap<String, String>,
        /// Runs the module once per item of this JSON array (a template, e.g. `{{ids}}`; at most 1,000 items),
        /// with the inputs `item` (a string item as it is, any other its JSON text) and `index`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub foreach: Option<String>,
        /// With `foreach`: how many items run at once (1 to 32; default 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(minimum = 1, maximum = 32)]
        pub parallel: Option<u32>,
    }
}

/// Items a `foreach` takes at most.
pub const MAX_FOREACH_ITEMS: usize = 1_000;
/// Items of a `foreach` in flight at most.
pub const MAX_FOREACH_PARALLEL: u32 = 32;

node_kind! {
    pub struct SetVariablesNode {
        pub variables: BTreeMap<String, String>,
    }
}

impl Node {
    pub fn id(&self) -> &str {
        match self {
            Node::Request(n) => &n.id,
            Node::Delay(n) => &n.id,
            Node::Module(n) => &n.id,
            Node::SetVariables(n) => &n.id,
            Node::Webhook(n) => &n.id,
        }
    }

    fn condition(&self) -> Option<&Assertion> {
        match self {
            Node::Request(n) => n.condition.as_ref(),
            Node::Delay(n) => n.condition.as_ref(),
            Node::Module(n) => n.condition.as_ref(),
            Node::SetVariables(n) => n.condition.as_ref(),
            Node::Webhook(n) => n.condition.as_ref(),
        }
    }
}

/// One thing wrong with a definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Problem {
    /// The node at fault; `null` for the flow as a whole.
    pub node_id: Option<String>,
    /// The field, relative to the node (or to the definition).
    pub field: String,
    pub message: String,
}

/// The HTTP methods a request node may use.
pub const MAX_RETRIES: u32 = 10;
pub const MAX_NODE_TIMEOUT_MS: u64 = 300_000;
pub const MAX_DELAY_MS: u64 = 3_600_000;
/// Webhook nodes a definition may hold (each capture they take is excluded from the next one's wait).
pub const MAX_WEBHOOK_NODES: usize = 100;
/// How long a flow may run when its definition sets no `timeout_s`.
pub const DEFAULT_FLOW_TIMEOUT_S: u64 = 300;

/// Parses and checks a definition. `Ok` holds the typed definition; `Err` every problem found.
pub fn validate(raw: &Value) -> Result<FlowDefinition, Vec<Problem>> {
    // Tracking the path costs as much again as the parse itself: it is only needed to say where a shape is wrong.
    let definition = match FlowDefinition::deserialize(raw) {
        Ok(definition) => definition,
        Err(_) => match serde_path_to_error::deserialize::<_, FlowDefinition>(raw) {
            Ok(definition) => definition,
            Err(e) => {
                let path = e.path().to_string();
                return Err(vec![shape_problem(raw, &path, e.into_inner().to_string())]);
            }
        },
    };
    check(definition)
}

/// As [`validate`], from the definition's JSON text: parsed once, straight into its typed form (the engine's way
/// into a job, whose definition the control plane passes through as text). Only a definition whose shape is wrong
/// is parsed again as a value, to say where.
pub fn validate_text(raw: &serde_json::value::RawValue) -> Result<FlowDefinition, Vec<Problem>> {
    match serde_json::from_str::<FlowDefinition>(raw.get()) {
        Ok(definition) => check(definition),
        Err(shape) => match serde_json::from_str::<Value>(raw.get()) {
            Ok(value) => validate(&value),
            Err(_) => Err(vec![Problem { node_id: None, field: String::new(), message: shape.to_string() }]),
        },
    }
}

/// The checks a definition of the right shape must pass.
fn check(definition: FlowDefinition) -> Result<FlowDefinition, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut flow_problem =
        |field: &str, message: String| problems.push(Problem { node_id: None, field: field.into(), message });
    if definition.nodes.is_empty() {
        flow_problem("nodes", "a flow needs at least one node".into());
    }
    if definition.timeout_s.is_some_and(|t| t == 0 || t > MAX_FLOW_TIMEOUT_S) {
        flow_problem("timeout_s", format!("must be between 1 and {MAX_FLOW_TIMEOUT_S}"));
    }
    for (name, value) in &definition.variables {
        if let Some(message) = names::definable_problem(name) {
            flow_problem(&format!("variables.{name}"), message);
        }
        if let Err(e) = template::check(value) {
            flow_problem(&format!("variables.{name}"), e.to_string());
        }
    }
    let mut seen = HashSet::new();
    for node in &definition.nodes {
        check_node(node, &mut seen, &mut problems);
    }
    let waits = definition.nodes.iter().filter(|n| matches!(n, Node::Webhook(_))).count();
    if waits > MAX_WEBHOOK_NODES {
        flow_problem_after(
            "nodes",
            format!("at most {MAX_WEBHOOK_NODES} webhook nodes in a flow (it has {waits})"),
            &mut problems,
        );
    }
    let flow_ms = definition.timeout_s.unwrap_or(DEFAULT_FLOW_TIMEOUT_S).saturating_mul(1000);
    for node in &definition.nodes {
        if let Node::Webhook(webhook) = node
            && webhook.webhook.timeout_ms.is_some_and(|t| t > flow_ms)
        {
            problems.push(Problem {
                node_id: Some(webhook.id.clone()),
                field: "webhook.timeout_ms".into(),
                message: format!("at most the flow's timeout ({flow_ms} ms)"),
            });
        }
    }
    check_secret_oracles(&definition, &mut problems);
    if problems.is_empty() { Ok(definition) } else { Err(problems) }
}

fn flow_problem_after(field: &str, message: String, problems: &mut Vec<Problem>) {
    problems.push(Problem { node_id: None, field: field.into(), message });
}

/// Conditions and assertions may not look inside a variable the flow fills from a secret (beyond exists,
/// notExists and isType): a comparison that passes or fails would reveal the secret a guess at a time. The runner
/// refuses the same at run time for values that hold a secret whatever their origin.
fn check_secret_oracles(definition: &FlowDefinition, problems: &mut Vec<Problem>) {
    let mut secret_bearing: HashSet<&str> = definition
        .variables
        .iter()
        .filter(|(_, value)| !template::secret_names(value).is_empty())
        .map(|(name, _)| name.as_str())
        .collect();
    let looks_inside = |a: &Assertion| !matches!(a.operator, Operator::Exists | Operator::NotExists | Operator::IsType);
    for node in &definition.nodes {
        let mut checked: Vec<(&str, &Assertion)> = node.condition().map(|c| ("condition", c)).into_iter().collect();
        match node {
            Node::Request(request) => checked.extend(request.assertions.iter().map(|a| ("assertions", a))),
            Node::Webhook(webhook) => checked.extend(webhook.assertions.iter().map(|a| ("assertions", a))),
            _ => {}
        }
        for (field, assertion) in checked {
            if secret_bearing.contains(assertion.source.as_str()) && looks_inside(assertion) {
                problems.push(Problem {
                    node_id: Some(node.id().to_owned()),
                    field: format!("{field}.source"),
                    message: format!(
                        "`{}` holds a secret: conditions and assertions may only check it with exists, notExists or \
                         isType",
                        assertion.source
                    ),
                });
            }
        }
        if let Node::SetVariables(set) = node {
            for (name, value) in &set.variables {
                let uses_secret = !template::secret_names(value).is_empty()
                    || template::names(value).iter().any(|n| secret_bearing.contains(n.as_str()));
                if uses_secret {
                    secret_bearing.insert(name.as_str());
                }
            }
        }
    }
}

/// The problems of one node: its id (well formed, not taken by an earlier node), its condition, its kind's fields.
fn check_node<'n>(node: &'n Node, seen: &mut HashSet<&'n str>, problems: &mut Vec<Problem>) {
    let id = node.id();
    let mut problem = |field: &str, message: String| {
        problems.push(Problem { node_id: Some(id.to_owned()), field: field.into(), message });
    };
    if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-')) {
        problem("id", "use 1 to 64 letters, digits, _ or -".into());
    }
    if matches!(node, Node::Module(_)) && id == "execution" {
        problem("id", "a module node's values come back as `<id>.<name>`, and `execution.` names are built in".into());
    }
    if !seen.insert(id) {
        problem("id", format!("`{id}` is used by another node"));
    }
    if let Some(condition) = node.condition()
        && condition.operator.takes_expected()
        && condition.expected.is_none()
    {
        problem("condition.expected", format!("{} needs an expected value", condition.operator.name()));
    }
    match node {
        Node::Request(n) => check_request(n, &mut problem),
        Node::Webhook(n) => n.check(&mut problem),
        Node::Delay(n) => {
            if n.delay_ms > MAX_DELAY_MS {
                problem("delay_ms", format!("at most {MAX_DELAY_MS} (one hour)"));
            }
        }
        Node::Module(n) => {
            if let Some(VersionSelector::Number(v)) = n.version
                && (v == 0 || i32::try_from(v).is_err())
            {
                problem("version", format!("a published version is 1 to {}; {v} cannot exist", i32::MAX));
            }
            check_foreach(n, &mut problem);
            for (name, value) in &n.inputs {
                if let Some(message) = names::reserved_problem(name) {
                    problem(&format!("inputs.{name}"), message);
                }
                if let Err(e) = template::check(value) {
                    problem(&format!("inputs.{name}"), e.to_string());
                }
            }
        }
        Node::SetVariables(n) => {
            for (name, value) in &n.variables {
                if let Some(message) = names::definable_problem(name) {
                    problem(&format!("variables.{name}"), message);
                }
                if let Err(e) = template::check(value) {
                    problem(&format!("variables.{name}"), e.to_string());
                }
            }
        }
    }
}

/// A module node's `foreach` (a template) and `parallel` (1 to 32, only with `foreach`); with `foreach`, the
/// inputs `item` and `index` are the engine's.
fn check_foreach(n: &ModuleNode, problem: &mut impl FnMut(&str, String)) {
    if let Some(parallel) = n.parallel {
        if n.foreach.is_none() {
            problem("parallel", "`parallel` needs `foreach`".into());
        } else if !(1..=MAX_FOREACH_PARALLEL).contains(&parallel) {
            problem("parallel", format!("1 to {MAX_FOREACH_PARALLEL}"));
        }
    }
    let Some(foreach) = &n.foreach else { return };
    if foreach.trim().is_empty() {
        problem("foreach", "name the array, e.g. `{{ids}}`".into());
    } else if let Err(e) = template::check(foreach) {
        problem("foreach", e.to_string());
    }
    for name in ["item", "index"] {
        if n.inputs.contains_key(name) {
            problem(&format!("inputs.{name}"), format!("with `foreach`, `{name}` is given by the engine"));
        }
    }
}

impl<'a> From<&'a RequestSpec> for RequestParts<'a> {
    fn from(r: &'a RequestSpec) -> Self {
        Self {
            method: Some(&r.method),
            url: Some(&r.url),
            headers: &r.headers,
            query: &r.query,
            body: r.body.as_deref(),
        }
    }
}

impl RequestSpec {
    /// The body alternatives and the client certificate, for their checks.
    pub fn body_parts(&self) -> BodyParts<'_> {
        BodyParts {
            body: self.body.as_deref(),
            form: self.form.as_deref(),
            multipart: self.multipart.as_deref(),
            graphql: self.graphql.as_ref(),
            client_certificate: self.client_certificate.as_deref(),
        }
    }
}

impl<'a> From<&'a RequestOverrides> for RequestParts<'a> {
    fn from(o: &'a RequestOverrides) -> Self {
        Self {
            method: o.method.as_deref(),
            url: o.url.as_deref(),
            headers: &o.headers,
            query: &o.query,
            body: o.body.as_deref(),
        }
    }
}

fn check_request(n: &RequestNode, problem: &mut impl FnMut(&str, String)) {
    match (&n.request, &n.request_ref) {
        (None, None) => problem("request", "give `request` or `request_ref`".into()),
        (Some(_), Some(_)) => problem("request_ref", "give `request` or `request_ref`, not both".into()),
        (Some(request), None) => {
            if request.url.trim().is_empty() {
                problem("request.url", "must not be empty".into());
            }
            for (field, message) in request_problems("request", request.into()) {
                problem(&field, message);
            }
            for (field, message) in body_problems("request", request.body_parts()) {
                problem(&field, message);
            }
        }
        (None, Some(reference)) => {
            let overrides = reference.overrides.as_ref().map(|o| request_problems("request_ref.overrides", o.into()));
            for (field, message) in overrides.unwrap_or_default() {
                problem(&field, message);
            }
        }
    }
    check_evaluations(&n.extractors, &n.assertions, problem);
    if n.extractors.iter().any(|e| e.kind == crate::flow::extract::ExtractorKind::Signature) {
        problem("extractors", "only webhook nodes have a signature verdict to extract".into());
    }
    if let Some(retry) = n.retry
        && (retry.count > MAX_RETRIES || retry.interval_ms > 60_000)
    {
        problem("retry", format!("count at most {MAX_RETRIES}, interval_ms at most 60000"));
    }
    if n.timeout_ms.is_some_and(|t| t == 0 || t > MAX_NODE_TIMEOUT_MS) {
        problem("timeout_ms", format!("must be between 1 and {MAX_NODE_TIMEOUT_MS}"));
    }
}

/// A problem from a shape error at `path` (`nodes[2].delay_ms`), naming the node by its id when it has one.
fn shape_problem(raw: &Value, path: &str, message: String) -> Problem {
    if let Some(rest) = path.strip_prefix("nodes[")
        && let Some((index, field)) = rest.split_once(']')
        && let Ok(index) = index.parse::<usize>()
    {
        let node = &raw["nodes"][index];
        let node_id = node["id"].as_str().map(str::to_owned).or_else(|| Some(format!("#{index}")));
        let field = field.trim_start_matches('.');
        if field.is_empty()
            && let Some((field, message)) = node_problem(node)
        {
            return Problem { node_id, field, message };
        }
        return Problem { node_id, field: field.to_owned(), message };
    }
    let field = if path == "." { missing_field(&message).unwrap_or_default() } else { path.to_owned() };
    Problem { node_id: None, field, message }
}

/// The field a "missing field `x`" error names.
fn missing_field(message: &str) -> Option<String> {
    message.strip_prefix("missing field `")?.split('`').next().map(str::to_owned)
}

/// Re-reads one node as its own kind, to name the field at fault (a tagged enum hides it).
fn node_problem(node: &Value) -> Option<(String, String)> {
    fn field_error<T: serde::de::DeserializeOwned>(node: &Value) -> Option<(String, String)> {
        serde_path_to_error::deserialize::<_, T>(node).err().map(|e| {
            let path = e.path().to_string();
            (if path == "." { String::new() } else { path }, e.into_inner().to_string())
        })
    }
    let mut node = node.clone();
    let kind = node.as_object_mut()?.shift_remove("kind")?;
    let (field, message) = match kind.as_str()? {
        "request" => field_error::<RequestNode>(&node),
        "delay" => field_error::<DelayNode>(&node),
        "module" => field_error::<ModuleNode>(&node),
        "set_variables" => field_error::<SetVariablesNode>(&node),
        "webhook" => field_error::<WebhookNode>(&node),
        other => Some((
            "kind".into(),
            format!("unknown node kind `{other}`: use request, delay, module, set_variables or webhook"),
        )),
    }?;
    let field = if field.is_empty() { missing_field(&message).unwrap_or_default() } else { field };
    Some((field, message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The example of API.md section 3.
    fn example() -> Value {
        json!({"variables": {"base_url": "https://api.example.com"},
         "timeout_s": 300,
         "nodes": [
          {"id": "login", "kind": "request", "name": "Log in", "enabled": true, "condition": null,
           "request": {"method": "POST", "url": "{{base_url}}/login", "headers": {"content-type": "application/json"},
                       "query": {}, "body": "{\"user\": \"{{user}}\", \"password\": \"{{secret.API_PASSWORD}}\"}"},
           "request_ref": null,
           "extractors": [{"name": "token", "kind": "jsonPath", "expression": "$.token"},
                          {"name": "status", "kind": "statusCode"}],
           "assertions": [{"source": "status", "operator": "equals", "expected": 200},
                          {"source": "token", "operator": "exists"}],
           "retry": {"count": 0, "interval_ms": 1000}, "timeout_ms": 30000},
          {"id": "wait", "kind": "delay", "delay_ms": 500},
          {"id": "orders", "kind": "module", "flow_id": "0195f2c4-8a8b-7cc1-9a1e-123456789abc", "version": "latest",
           "inputs": {"token": "{{token}}"}},
          {"id": "set", "kind": "set_variables", "variables": {"order_count": "{{count}}"}}
         ],
         "layout": {}})
    }

    /// From text, a definition gets the same answer as from a value: typed alike when valid, the same problems
    /// (with where the shape is wrong) when not, and a text the quick way refuses (a repeated key) read as a value.
    #[test]
    fn a_definition_read_from_text_is_judged_as_one_read_from_a_value() {
        let text = |value: &Value| serde_json::value::RawValue::from_string(value.to_string()).expect("json");
        let valid = validate_text(&text(&example())).expect("valid");
        assert_eq!(format!("{valid:?}"), format!("{:?}", validate(&example()).expect("valid")));
        let mut misshapen = example();
        misshapen["nodes"][1]["delay_ms"] = json!("soon");
        let mut unchecked = example();
        unchecked["nodes"][3]["id"] = json!("login");
        for wrong in [misshapen, unchecked, json!({"nodes": []}), json!([1])] {
            let problems = validate_text(&text(&wrong)).expect_err("invalid");
            assert_eq!(problems, validate(&wrong).expect_err("invalid"), "{wrong}");
        }
        let repeated = r#"{"timeout_s": 5, "timeout_s": 9, "nodes": [{"id": "a", "kind": "delay", "delay_ms": 1}]}"#;
        let repeated = serde_json::value::RawValue::from_string(repeated.to_owned()).expect("json");
        assert_eq!(validate_text(&repeated).expect("the last one counts").timeout_s, Some(9));
    }

    #[test]
    fn the_contract_example_is_valid() {
        let definition = validate(&example()).expect("valid");
        assert_eq!(definition.nodes.len(), 4);
        assert!(
            matches!(&definition.nodes[2], Node::Module(m) if m.version == Some(VersionSelector::Latest(Latest::Latest)))
        );
        let mut pinned = example();
        pinned["nodes"][2]["version"] = json!(3);
        assert!(
            matches!(&validate(&pinned).expect("valid").nodes[2], Node::Module(m) if m.version == Some(VersionSelector::Number(3)))
        );
        for impossible in [0_u64, 2_147_483_648] {
            let found = problems(|d| d["nodes"][2]["version"] = json!(impossible));
            assert_eq!(found.len(), 1, "{impossible}: {found:?}");
            assert_eq!(found[0].field, "version");
        }
    }

    fn problems(change: impl FnOnce(&mut Value)) -> Vec<Problem> {
        let mut raw = example();
        change(&mut raw);
        validate(&raw).expect_err("invalid")
    }

    fn one(node: Option<&str>, field: &str, problems: &[Problem]) {
        assert!(
            problems.iter().any(|p| p.node_id.as_deref() == node && p.field == field),
            "expected a problem at {node:?} {field}: {problems:?}"
        );
    }

    #[test]
    fn shape_errors_name_the_node_and_field() {
        one(Some("wait"), "delay_ms", &problems(|r| r["nodes"][1]["delay_ms"] = json!("soon")));
        one(Some("login"), "colour", &problems(|r| r["nodes"][0]["colour"] = json!("red")));
        one(Some("#1"), "kind", &problems(|r| r["nodes"][1] = json!({"kind": "teleport"})));
        one(Some("orders"), "flow_id", &problems(|r| r["nodes"][2]["flow_id"] = json!("not-a-uuid")));
        one(Some("wait"), "delay_ms", &problems(|r| r["nodes"][1] = json!({"id": "wait", "kind": "delay"})));
        one(Some("login"), "request.method", &problems(|r| r["nodes"][0]["request"]["method"] = json!(7)));
        one(None, "nodes", &problems(|r| r.as_object_mut().expect("object").remove("nodes").map(|_| ()).unwrap_or(())));
    }

    #[test]
    fn semantic_problems_are_precise() {
        one(Some("login"), "request.method", &problems(|r| r["nodes"][0]["request"]["method"] = json!("FETCH")));
        one(Some("login"), "request.url", &problems(|r| r["nodes"][0]["request"]["url"] = json!("{{base_url")));
        one(Some("login"), "extractors[0]", &problems(|r| r["nodes"][0]["extractors"][0]["expression"] = json!("$.[")));
        one(
            Some("login"),
            "extractors[1].name",
            &problems(|r| r["nodes"][0]["extractors"][1]["name"] = json!("token")),
        );
        one(
            Some("login"),
            "assertions[0].expected",
            &problems(|r| r["nodes"][0]["assertions"][0] = json!({"source": "s", "operator": "equals"})),
        );
        one(Some("login"), "retry", &problems(|r| r["nodes"][0]["retry"]["count"] = json!(99)));
        one(Some("login"), "timeout_ms", &problems(|r| r["nodes"][0]["timeout_ms"] = json!(0)));
        one(Some("login"), "request", &problems(|r| r["nodes"][0]["request"] = json!(null)));
        one(Some("login"), "id", &problems(|r| r["nodes"][1]["id"] = json!("login")));
        one(Some("bad id!"), "id", &problems(|r| r["nodes"][1]["id"] = json!("bad id!")));
        one(Some("wait"), "delay_ms", &problems(|r| r["nodes"][1]["delay_ms"] = json!(7_200_000)));
        one(Some("set"), "variables.9lives", &problems(|r| r["nodes"][3]["variables"] = json!({"9lives": "x"})));
        one(None, "timeout_s", &problems(|r| r["timeout_s"] = json!(0)));
        one(None, "nodes", &problems(|r| r["nodes"] = json!([])));
        let many = problems(|r| {
            r["nodes"][0]["request"]["method"] = json!("FETCH");
            r["nodes"][1]["delay_ms"] = json!(7_200_000);
        });
        assert_eq!(many.len(), 2, "every problem is reported: {many:?}");
    }

    #[test]
    fn names_under_execution_are_built_in() {
        let defined = |value: Value| json!({"execution.capture_url": value});
        one(None, "variables.execution.capture_url", &problems(|r| r["variables"] = defined(json!("x"))));
        let set = problems(|r| r["nodes"][3]["variables"] = defined(json!("x")));
        one(Some("set"), "variables.execution.capture_url", &set);
        one(
            Some("login"),
            "extractors[0].name",
            &problems(|r| r["nodes"][0]["extractors"][0]["name"] = json!("execution.t")),
        );
        one(
            Some("orders"),
            "inputs.execution.capture_url",
            &problems(|r| r["nodes"][2]["inputs"] = defined(json!("x"))),
        );
        assert!(set[0].message.contains("reserved"), "{set:?}");
        let mut uses = example();
        uses["variables"]["callback"] = json!("{{execution.capture_url}}/done");
        assert!(validate(&uses).is_ok(), "using a built-in name is fine");
    }
}
