//! The variables a run sees, narrowest first: extracted (and set) values, the built-in names
//! (`{{execution.capture_url}}`), launch variables (inside a module: its inputs), environment variables, the flow's
//! own variables (its defaults), then organization and collection variables; `secret.` names read secrets. Only
//! the flow's and the environment's values are templates: launch values are plain values, so a launch can never
//! name a secret. Names whose value a launch chose (directly or through a template or set_variables that used one)
//! are tainted, so a request's host can be checked for having been chosen by a launch.

use hookflow_shared::api::runners::Job;
use hookflow_shared::flow::names::{self, CAPTURE_URL};
use hookflow_shared::flow::template::{self, Scope, TemplateError};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};

#[cfg(test)]
mod tests;

/// What tainted names read as when a host is computed without the launch's say.
const POISON: &str = "launch-chosen.invalid";

/// Why `{{execution.capture_url}}` is undefined in a run.
const NO_CAPTURE_URL: &str = "this run has no capture URL: only a hookflow server that gives executions one hands it \
                              out with the job (a local run without a server, or an older server, has none)";

#[derive(Debug, Clone, Default)]
pub struct Variables {
    extracted: BTreeMap<String, Value>,
    extracted_text: HashMap<String, String>,
    /// The built-in names: `execution.capture_url` when the job has one. Never tainted.
    builtin: HashMap<String, String>,
    launch: HashMap<String, String>,
    environment: HashMap<String, String>,
    /// The flow's own variables (its defaults), rendered.
    flow: HashMap<String, String>,
    /// Organization variables over collection variables.
    base: HashMap<String, String>,
    secrets: HashMap<String, String>,
    tainted: HashSet<String>,
    /// Bytes set by `set_variables` nodes so far ([`Variables::set_bytes`]).
    set_bytes: usize,
    /// Names whose template uses `{{execution.capture_url}}` in a run without one: left undefined, and explained.
    need_capture_url: HashSet<String>,
}

/// The text a value stands for in a template: strings as they are, anything else as JSON.
pub fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A layer of values, without built-in names (which servers refuse to store; older ones did not).
fn map(values: &BTreeMap<String, String>) -> HashMap<String, String> {
    values.iter().filter(|(k, _)| !names::is_reserved(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Renders templates in `values` against `scope`; a value naming something undefined is kept as written, except
/// one that uses a name of `unavailable` (a capture URL the run lacks): that one is left out and listed.
fn render_all(
    values: &HashMap<String, String>,
    scope: &Scope<'_>,
    unavailable: &HashSet<String>,
) -> (HashMap<String, String>, Vec<String>) {
    let mut rendered = HashMap::with_capacity(values.len());
    let mut left_out = Vec::new();
    for (name, value) in values {
        if !value.contains("{{") {
            rendered.insert(name.clone(), value.clone());
            continue;
        }
        match template::render(value, scope) {
            Ok(text) => {
                rendered.insert(name.clone(), text);
            }
            Err(_) if template::names(value).iter().any(|n| unavailable.contains(n)) => left_out.push(name.clone()),
            Err(_) => {
                rendered.insert(name.clone(), value.clone());
            }
        }
    }
    (rendered, left_out)
}

impl Variables {
    /// The variables of a job whose definition declares `flow`.
    pub fn for_job(job: &Job, flow: &BTreeMap<String, String>) -> Self {
        let secrets = job.secrets.0.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let builtin = job.capture_url.iter().map(|url| (CAPTURE_URL.to_owned(), url.clone())).collect();
        let mut vars = Self { builtin, flow: map(flow), secrets, ..Self::default() };
        let environment = match &job.layers {
            Some(layers) => {
                vars.base = map(&layers.base);
                vars.launch = map(&layers.launch);
                vars.tainted = vars.launch.keys().cloned().collect();
                map(&layers.environment)
            }
            // A claim of an older server: one merged layer (launch over environment over organization), above
            // the flow's defaults and rendered as it always was.
            None => map(&job.variables),
        };
        let scope = Scope { layers: vec![&vars.builtin, &environment, &vars.base], secrets: Some(&vars.secrets) };
        let (rendered, left_out) = render_all(&environment, &scope, &vars.unavailable());
        vars.environment = rendered;
        vars.withhold(left_out);
        vars.settle_flow();
        vars
    }

    /// Names known to be undefined for want of a capture URL (none when the run has one).
    fn unavailable(&self) -> HashSet<String> {
        if self.builtin.contains_key(CAPTURE_URL) {
            return HashSet::new();
        }
        self.need_capture_url.iter().cloned().chain([CAPTURE_URL.to_owned()]).collect()
    }

    /// Leaves `left_out` undefined under the launch: their templates need a capture URL the run does not have.
    fn withhold(&mut self, left_out: Vec<String>) {
        for name in left_out {
            self.environment.remove(&name);
            self.flow.remove(&name);
            self.base.remove(&name);
            if !self.launch.contains_key(&name) {
                self.tainted.remove(&name);
            }
            self.need_capture_url.insert(name);
        }
    }

    /// Renders the flow's own variables (its defaults) against every layer, in lookup order. A default no launch
    /// or environment value shadows is tainted when its template uses a tainted name; a shadowed one is not seen
    /// (a launch's value of its name is the launch's, so tainted).
    fn settle_flow(&mut self) {
        let raw = std::mem::take(&mut self.flow);
        let tainted: Vec<String> = raw
            .iter()
            .filter(|(k, v)| {
                !self.launch.contains_key(*k) && !self.environment.contains_key(*k) && self.uses_tainted(v)
            })
            .map(|(k, _)| k.clone())
            .collect();
        self.tainted.extend(tainted);
        let layers = vec![&self.builtin, &self.launch, &self.environment, &raw, &self.base];
        let (rendered, left_out) =
            render_all(&raw, &Scope { layers, secrets: Some(&self.secrets) }, &self.unavailable());
        self.flow = rendered;
        self.withhold(left_out);
    }

    fn uses_tainted(&self, text: &str) -> bool {
        template::names(text).iter().any(|name| self.tainted.contains(name))
    }

    pub fn scope(&self) -> Scope<'_> {
        Scope {
            layers: vec![&self.extracted_text, &self.builtin, &self.launch, &self.environment, &self.flow, &self.base],
            secrets: Some(&self.secrets),
        }
    }

    /// Says what went wrong rendering a template, explaining a capture URL the run does not have.
    pub fn explain(&self, error: &TemplateError) -> String {
        match error {
            TemplateError::Undefined(name) if name == CAPTURE_URL => NO_CAPTURE_URL.to_owned(),
            TemplateError::Undefined(name) if self.need_capture_url.contains(name) => {
                format!("`{{{{{name}}}}}` uses `{{{{{CAPTURE_URL}}}}}`, and {NO_CAPTURE_URL}")
            }
            other => other.to_string(),
        }
    }

    /// Renders `text` with every tainted name reading as a placeholder host: what `text` would be had no launch
    /// chosen anything. `None` when that cannot be rendered.
    pub fn render_untainted(&self, text: &str) -> Option<String> {
        let poison: HashMap<String, String> = self.tainted.iter().map(|n| (n.clone(), POISON.to_owned())).collect();
        let mut scope = self.scope();
        scope.layers.insert(0, &poison);
        template::render(text, &scope).ok()
    }

    /// Values extracted or set during the run.
    pub fn extracted(&self) -> &BTreeMap<String, Value> {
        &self.extracted
    }

    /// Secrets by name, for masking.
    pub fn secrets(&self) -> impl Iterator<Item = (&str, &str)> {
        self.secrets.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Sets an extracted value (from a response: not tainted).
    pub fn set(&mut self, name: &str, value: Value) {
        self.set_tainted(name, value, false);
    }

    /// Sets a value that a launch chose when `tainted` (a module's value that was tainted inside it).
    pub fn set_tainted(&mut self, name: &str, value: Value, tainted: bool) {
        self.tainted.remove(name);
        self.extracted_text.insert(name.to_owned(), as_text(&value));
        self.extracted.insert(name.to_owned(), value);
        if tainted {
            self.tainted.insert(name.to_owned());
        }
    }

    /// Sets a value rendered from `template` (set_variables), tainted when the template used a tainted name.
    pub fn set_rendered(&mut self, name: &str, template: &str, value: String) {
        self.set_bytes = self.set_bytes.saturating_add(value.len());
        let tainted = self.uses_tainted(template);
        self.set_tainted(name, Value::String(value), tainted);
    }

    /// Bytes the run's `set_variables` nodes have set so far, every value counted (a name set again counts again:
    /// each node's result keeps its own copy).
    pub fn set_bytes(&self) -> usize {
        self.set_bytes
    }

    /// Whether the value of `name` was chosen by a launch.
    pub fn is_tainted(&self, name: &str) -> bool {
        self.tainted.contains(name)
    }

    /// Every value by name for assertions and conditions, `extra` (a node's fresh extractions) winning.
    pub fn values_with(&self, extra: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
        let widest_first = [&self.base, &self.flow, &self.environment, &self.launch, &self.builtin];
        let mut values: BTreeMap<String, Value> = BTreeMap::new();
        for layer in widest_first {
            values.extend(layer.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))));
        }
        values.extend(self.extracted.iter().map(|(k, v)| (k.clone(), v.clone())));
        values.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        values
    }

    /// A module's variables: the rendered inputs over what the parent launched with play the launch's part, over
    /// the parent's environment, over the module's own flow variables (its defaults), over the parent's base.
    /// Inputs rendered from tainted names stay tainted.
    pub fn for_module(&self, flow: &BTreeMap<String, String>, inputs: Vec<(String, String, bool)>) -> Self {
        let mut launch = self.launch.clone();
        let mut tainted: HashSet<String> = self.tainted.iter().filter(|n| launch.contains_key(*n)).cloned().collect();
        for (name, value, from_tainted) in inputs.into_iter().filter(|(name, ..)| !names::is_reserved(name)) {
            if from_tainted {
                tainted.insert(name.clone());
            } else {
                tainted.remove(&name);
            }
            launch.insert(name, value);
        }
        let mut vars = Self {
            builtin: self.builtin.clone(),
            launch,
            environment: self.environment.clone(),
            flow: map(flow),
            base: self.base.clone(),
            secrets: self.secrets.clone(),
            tainted,
            need_capture_url: self.need_capture_url.clone(),
            ..Self::default()
        };
        vars.settle_flow();
        vars
    }

    /// Whether a template uses a name a launch chose.
    pub fn is_tainted_template(&self, text: &str) -> bool {
        self.uses_tainted(text)
    }
}
