//! The variables a run sees, in lookup order: extracted (and set) values, flow variables, launch variables, then
//! the stored layers (environment over organization and collection variables); `secret.` names read secrets.
//! Only the flow's and the environment's values are templates: launch values are plain values, so a launch can
//! never name a secret. Names whose value a launch chose (directly or through a template or set_variables that
//! used one) are tainted, so a request's host can be checked for having been chosen by a launch.

use hookflow_shared::api::runners::Job;
use hookflow_shared::flow::template::{self, Scope};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};

/// What tainted names read as when a host is computed without the launch's say.
const POISON: &str = "launch-chosen.invalid";

#[derive(Debug, Clone, Default)]
pub struct Variables {
    extracted: BTreeMap<String, Value>,
    extracted_text: HashMap<String, String>,
    flow: HashMap<String, String>,
    launch: HashMap<String, String>,
    stored: HashMap<String, String>,
    secrets: HashMap<String, String>,
    tainted: HashSet<String>,
}

/// The text a value stands for in a template: strings as they are, anything else as JSON.
pub fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn map(values: &BTreeMap<String, String>) -> HashMap<String, String> {
    values.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Renders templates in `values` against `scope`; a value naming something undefined is kept as written.
fn render_all(values: &HashMap<String, String>, scope: &Scope<'_>) -> HashMap<String, String> {
    values
        .iter()
        .map(|(k, v)| {
            let rendered =
                if v.contains("{{") { template::render(v, scope).unwrap_or_else(|_| v.clone()) } else { v.clone() };
            (k.clone(), rendered)
        })
        .collect()
}

impl Variables {
    /// The variables of a job whose definition declares `flow`.
    pub fn for_job(job: &Job, flow: &BTreeMap<String, String>) -> Self {
        let secrets = job.secrets.0.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut vars = Self { flow: map(flow), secrets, ..Self::default() };
        match &job.layers {
            Some(layers) => {
                let environment = map(&layers.environment);
                let base = map(&layers.base);
                let scope = Scope { layers: vec![&environment, &base], secrets: Some(&vars.secrets) };
                let mut stored = base.clone();
                stored.extend(render_all(&environment, &scope));
                vars.stored = stored;
                vars.launch = map(&layers.launch);
                vars.tainted = vars.launch.keys().cloned().collect();
            }
            // A claim of an older server: one merged layer, rendered as it always was.
            None => {
                let merged = map(&job.variables);
                let scope = Scope { layers: vec![&merged], secrets: Some(&vars.secrets) };
                vars.stored = render_all(&merged, &scope);
            }
        }
        vars.settle_flow();
        vars
    }

    /// Renders the flow's own variables over the rest, tainting those that used a tainted name; a flow variable
    /// shadows a launch variable of its name.
    fn settle_flow(&mut self) {
        let raw = std::mem::take(&mut self.flow);
        let tainted: Vec<String> = raw.iter().filter(|(_, v)| self.uses_tainted(v)).map(|(k, _)| k.clone()).collect();
        for name in raw.keys() {
            self.tainted.remove(name);
        }
        self.tainted.extend(tainted);
        let layers = vec![&raw, &self.launch, &self.stored];
        self.flow = render_all(&raw, &Scope { layers, secrets: Some(&self.secrets) });
    }

    fn uses_tainted(&self, text: &str) -> bool {
        template::names(text).iter().any(|name| self.tainted.contains(name))
    }

    pub fn scope(&self) -> Scope<'_> {
        Scope {
            layers: vec![&self.extracted_text, &self.flow, &self.launch, &self.stored],
            secrets: Some(&self.secrets),
        }
    }

    /// Renders `text` with every tainted name reading as a placeholder host: what `text` would be had no launch
    /// chosen anything. `None` when that cannot be rendered.
    pub fn render_untainted(&self, text: &str) -> Option<String> {
        let poison: HashMap<String, String> = self.tainted.iter().map(|n| (n.clone(), POISON.to_owned())).collect();
        let layers = vec![&poison, &self.extracted_text, &self.flow, &self.launch, &self.stored];
        template::render(text, &Scope { layers, secrets: Some(&self.secrets) }).ok()
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
        self.tainted.remove(name);
        self.extracted_text.insert(name.to_owned(), as_text(&value));
        self.extracted.insert(name.to_owned(), value);
    }

    /// Sets a value rendered from `template` (set_variables), tainted when the template used a tainted name.
    pub fn set_rendered(&mut self, name: &str, template: &str, value: String) {
        let tainted = self.uses_tainted(template);
        self.set(name, Value::String(value));
        if tainted {
            self.tainted.insert(name.to_owned());
        }
    }

    /// Every value by name for assertions and conditions, `extra` (a node's fresh extractions) winning.
    pub fn values_with(&self, extra: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
        let mut values: BTreeMap<String, Value> =
            self.stored.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        values.extend(self.launch.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))));
        values.extend(self.flow.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))));
        values.extend(self.extracted.iter().map(|(k, v)| (k.clone(), v.clone())));
        values.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        values
    }

    /// A module's variables: its own flow variables over the rendered inputs, over what the parent launched with.
    /// Inputs rendered from tainted names stay tainted.
    pub fn for_module(&self, flow: &BTreeMap<String, String>, inputs: Vec<(String, String, bool)>) -> Self {
        let mut launch = self.launch.clone();
        let mut tainted: HashSet<String> = self.tainted.iter().filter(|n| launch.contains_key(*n)).cloned().collect();
        for (name, value, from_tainted) in inputs {
            if from_tainted {
                tainted.insert(name.clone());
            } else {
                tainted.remove(&name);
            }
            launch.insert(name, value);
        }
        let mut vars = Self {
            flow: map(flow),
            launch,
            stored: self.stored.clone(),
            secrets: self.secrets.clone(),
            tainted,
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

#[cfg(test)]
mod tests {
    use super::*;
    use hookflow_shared::api::runners::{SecretValues, VariableLayers};

    fn job(launch: &[(&str, &str)], environment: &[(&str, &str)]) -> Job {
        let mut job = Job::standalone("t", serde_json::json!({}), 10);
        let pairs = |list: &[(&str, &str)]| list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        job.layers =
            Some(VariableLayers { base: BTreeMap::new(), environment: pairs(environment), launch: pairs(launch) });
        job.secrets = SecretValues(BTreeMap::from([("TOKEN".to_owned(), "s3cret".to_owned())]));
        job
    }

    #[test]
    fn launch_values_are_values_and_environment_values_are_templates() {
        let job = job(&[("x", "{{secret.TOKEN}}")], &[("auth", "Bearer {{secret.TOKEN}}")]);
        let vars = Variables::for_job(&job, &BTreeMap::new());
        assert_eq!(template::render("{{x}}", &vars.scope()).expect("render"), "{{secret.TOKEN}}");
        assert_eq!(template::render("{{auth}}", &vars.scope()).expect("render"), "Bearer s3cret");
    }

    #[test]
    fn a_host_chosen_by_a_launch_is_told_apart() {
        let job = job(&[("base_url", "https://evil.example")], &[("base_url", "https://api.example")]);
        let flow = BTreeMap::from([("login".to_owned(), "{{base_url}}/login".to_owned())]);
        let mut vars = Variables::for_job(&job, &flow);
        assert_eq!(template::render("{{base_url}}", &vars.scope()).expect("render"), "https://evil.example");
        assert_eq!(vars.render_untainted("{{login}}").as_deref(), Some("launch-chosen.invalid"));
        assert_eq!(
            vars.render_untainted("https://api.example/{{base_url}}").as_deref(),
            Some("https://api.example/launch-chosen.invalid")
        );
        vars.set_rendered("copy", "{{base_url}}", "https://evil.example".into());
        assert!(vars.is_tainted_template("{{copy}}"));
        vars.set("copy", Value::String("https://api.example".into()));
        assert!(!vars.is_tainted_template("{{copy}}"));
    }
}
