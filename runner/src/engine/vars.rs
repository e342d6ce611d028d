//! The variables a run sees, in lookup order: extracted (and set) values, flow variables, then launch variables
//! (already layered over environment and organization variables by the server); `secret.` names read secrets.

use hookflow_shared::flow::template::{self, Scope};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, Default)]
pub struct Variables {
    extracted: BTreeMap<String, Value>,
    extracted_text: HashMap<String, String>,
    flow: HashMap<String, String>,
    launch: HashMap<String, String>,
    secrets: HashMap<String, String>,
}

/// The text a value stands for in a template: strings as they are, anything else as JSON.
pub fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

impl Variables {
    /// Variable values may themselves hold templates (an environment value of `{{secret.TOKEN}}`): they are
    /// rendered once here; a value naming something undefined is kept as written.
    pub fn new(
        flow: &BTreeMap<String, String>,
        launch: &BTreeMap<String, String>,
        secrets: &BTreeMap<String, String>,
    ) -> Self {
        let mut vars = Self {
            flow: flow.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            launch: launch.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            secrets: secrets.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            ..Self::default()
        };
        let render_all = |map: &HashMap<String, String>, vars: &Variables| -> HashMap<String, String> {
            map.iter()
                .map(|(k, v)| {
                    let rendered = if v.contains("{{") {
                        template::render(v, &vars.scope()).unwrap_or_else(|_| v.clone())
                    } else {
                        v.clone()
                    };
                    (k.clone(), rendered)
                })
                .collect()
        };
        vars.launch = render_all(&vars.launch, &vars);
        vars.flow = render_all(&vars.flow, &vars);
        vars
    }

    pub fn scope(&self) -> Scope<'_> {
        Scope { layers: vec![&self.extracted_text, &self.flow, &self.launch], secrets: Some(&self.secrets) }
    }

    /// Values extracted or set during the run.
    pub fn extracted(&self) -> &BTreeMap<String, Value> {
        &self.extracted
    }

    pub fn secret_values(&self) -> impl Iterator<Item = &str> {
        self.secrets.values().map(String::as_str)
    }

    pub fn set(&mut self, name: &str, value: Value) {
        self.extracted_text.insert(name.to_owned(), as_text(&value));
        self.extracted.insert(name.to_owned(), value);
    }

    /// Every value by name for assertions and conditions, `extra` (a node's fresh extractions) winning.
    pub fn values_with(&self, extra: &BTreeMap<String, Value>) -> BTreeMap<String, Value> {
        let mut values: BTreeMap<String, Value> =
            self.launch.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        values.extend(self.flow.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))));
        values.extend(self.extracted.iter().map(|(k, v)| (k.clone(), v.clone())));
        values.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        values
    }

    /// A module's variables: its own flow variables, with the rendered inputs over what the parent launched with.
    pub fn for_module(&self, flow: &BTreeMap<String, String>, inputs: BTreeMap<String, String>) -> Self {
        let mut launch: BTreeMap<String, String> = self.launch.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        launch.extend(inputs);
        let secrets: BTreeMap<String, String> = self.secrets.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        Self::new(flow, &launch, &secrets)
    }
}
