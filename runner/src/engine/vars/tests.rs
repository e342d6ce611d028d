//! The lookup order of [`Variables`] layer by layer, taint through every layer and module, and the built-in
//! `{{execution.capture_url}}`.

use super::*;
use hookflow_shared::api::runners::{SecretValues, VariableLayers};

fn pairs(list: &[(&str, &str)]) -> BTreeMap<String, String> {
    list.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn job(launch: &[(&str, &str)], environment: &[(&str, &str)]) -> Job {
    let mut job = Job::standalone("t", serde_json::json!({}), 10);
    job.layers = Some(VariableLayers { base: BTreeMap::new(), environment: pairs(environment), launch: pairs(launch) });
    job.secrets = SecretValues(BTreeMap::from([("TOKEN".to_owned(), "s3cret".to_owned())]));
    job
}

fn render(vars: &Variables, text: &str) -> String {
    template::render(text, &vars.scope()).expect("render")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    Extracted,
    Builtin,
    Launch,
    Environment,
    Flow,
    Base,
}

const NARROWEST_FIRST: [Layer; 6] =
    [Layer::Extracted, Layer::Builtin, Layer::Launch, Layer::Environment, Layer::Flow, Layer::Base];

fn label(layer: Layer) -> String {
    format!("{layer:?}").to_lowercase()
}

/// The variables of a job where each of `layers` gives `name` a value naming its layer.
fn defined_in(name: &str, layers: &[Layer]) -> Variables {
    let mut job = job(&[], &[]);
    let mut flow = BTreeMap::new();
    let given = job.layers.as_mut().expect("layers");
    for &layer in layers {
        let (name, value) = (name.to_owned(), label(layer));
        match layer {
            Layer::Builtin => job.capture_url = Some(value),
            Layer::Launch => drop(given.launch.insert(name, value)),
            Layer::Environment => drop(given.environment.insert(name, value)),
            Layer::Flow => drop(flow.insert(name, value)),
            Layer::Base => drop(given.base.insert(name, value)),
            Layer::Extracted => {}
        }
    }
    let mut vars = Variables::for_job(&job, &flow);
    if layers.contains(&Layer::Extracted) {
        vars.set(name, Value::String(label(Layer::Extracted)));
    }
    vars
}

#[test]
fn each_layer_wins_over_every_wider_one() {
    for (i, &narrow) in NARROWEST_FIRST.iter().enumerate() {
        for &wide in &NARROWEST_FIRST[i + 1..] {
            // The built-in layer holds one name; other layers cannot define it (an older server's are dropped).
            let name = if [narrow, wide].contains(&Layer::Builtin) { CAPTURE_URL } else { "x" };
            let vars = defined_in(name, &[wide, narrow]);
            assert_eq!(render(&vars, &format!("{{{{{name}}}}}")), label(narrow), "{narrow:?} over {wide:?}");
            let values = vars.values_with(&BTreeMap::new());
            assert_eq!(values[name], Value::String(label(narrow)), "{narrow:?} over {wide:?} in conditions");
        }
    }
    let all = defined_in("x", &NARROWEST_FIRST);
    assert_eq!(render(&all, "{{x}}"), "extracted");
    let mut fresh = BTreeMap::new();
    fresh.insert("x".to_owned(), Value::String("fresh".into()));
    assert_eq!(all.values_with(&fresh)["x"], "fresh", "a node's own extractions win in its assertions");
}

#[test]
fn flow_defaults_are_templates_over_the_layers_in_lookup_order() {
    let mut job = job(&[("region", "us")], &[("host", "env.example"), ("region", "eu")]);
    job.layers.as_mut().expect("layers").base = pairs(&[("host", "org.example"), ("team", "core")]);
    let flow = pairs(&[
        ("url", "https://{{host}}/{{region}}/{{team}}"),
        ("auth", "Bearer {{secret.TOKEN}}"),
        ("team", "flow-team"),
    ]);
    let vars = Variables::for_job(&job, &flow);
    assert_eq!(render(&vars, "{{url}}"), "https://env.example/us/flow-team");
    assert_eq!(render(&vars, "{{auth}}"), "Bearer s3cret");
}

#[test]
fn an_older_servers_merged_layer_wins_over_flow_defaults() {
    let mut job = Job::standalone("t", serde_json::json!({}), 10);
    job.variables = pairs(&[("x", "merged"), ("execution.capture_url", "https://evil.example")]);
    let vars = Variables::for_job(&job, &pairs(&[("x", "default"), ("y", "{{x}}/y")]));
    assert_eq!(render(&vars, "{{x}} {{y}}"), "merged merged/y");
    assert_eq!(vars.render_untainted("{{y}}").as_deref(), Some("merged/y"), "older claims carry no taint");
    let undefined = template::render("{{execution.capture_url}}", &vars.scope()).expect_err("not a built-in");
    assert!(vars.explain(&undefined).starts_with("this run has no capture URL"), "{}", vars.explain(&undefined));
}

#[test]
fn launch_values_are_values_and_environment_values_are_templates() {
    let job = job(&[("x", "{{secret.TOKEN}}")], &[("auth", "Bearer {{secret.TOKEN}}")]);
    let vars = Variables::for_job(&job, &BTreeMap::new());
    assert_eq!(render(&vars, "{{x}}"), "{{secret.TOKEN}}");
    assert_eq!(render(&vars, "{{auth}}"), "Bearer s3cret");
}

#[test]
fn a_host_chosen_by_a_launch_is_told_apart() {
    let job = job(&[("base_url", "https://evil.example")], &[("base_url", "https://api.example")]);
    let flow = BTreeMap::from([("login".to_owned(), "{{base_url}}/login".to_owned())]);
    let mut vars = Variables::for_job(&job, &flow);
    assert_eq!(render(&vars, "{{base_url}}"), "https://evil.example");
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

#[test]
fn taint_follows_whichever_layer_a_name_reads_from() {
    let job =
        job(&[("host", "evil.example"), ("base", "https://evil.example")], &[("shadowed", "https://env.example")]);
    let flow = pairs(&[
        ("base", "https://default.example"), // shadowed by the launch: the launch's value, tainted
        ("uses", "https://{{host}}/x"),      // a default using a launch name: tainted
        ("shadowed", "https://{{host}}"),    // a default the environment shadows: the environment's, clean
        ("plain", "https://api.example"),    // a default of its own: clean
    ]);
    let vars = Variables::for_job(&job, &flow);
    let untainted = |text: &str| vars.render_untainted(text).expect("renders");
    assert_eq!(render(&vars, "{{base}}"), "https://evil.example");
    assert_eq!(untainted("{{base}}"), POISON);
    assert_eq!(render(&vars, "{{uses}}"), "https://evil.example/x");
    assert_eq!(untainted("{{uses}}"), POISON);
    assert_eq!(untainted("{{shadowed}}"), "https://env.example");
    assert_eq!(untainted("{{plain}}"), "https://api.example");
}

#[test]
fn a_modules_inputs_win_over_its_defaults_and_keep_their_taint() {
    let job = job(&[("host", "evil.example"), ("mode", "launch")], &[("region", "eu")]);
    let parent = Variables::for_job(&job, &BTreeMap::new());
    let defaults = pairs(&[
        ("token", "module-default"),
        ("host", "module.example"),
        ("region", "module-region"),
        ("url", "https://{{host}}/{{token}}"),
        ("mode", "module-mode"),
    ]);
    let inputs = vec![("token".to_owned(), "input".to_owned(), false), ("mode".to_owned(), "clean".to_owned(), false)];
    let mut inner = parent.for_module(&defaults, inputs);
    assert_eq!(render(&inner, "{{token}}"), "input", "an input wins over the module's default");
    assert_eq!(render(&inner, "{{region}}"), "eu", "the environment wins over the module's default");
    assert_eq!(render(&inner, "{{host}}"), "evil.example", "the parent's launch wins over the module's default");
    assert_eq!(render(&inner, "{{url}}"), "https://evil.example/input");
    assert_eq!(inner.render_untainted("{{url}}").as_deref(), Some(POISON), "a default using a tainted name");
    assert_eq!(inner.render_untainted("{{mode}}").as_deref(), Some("clean"), "a clean input over a tainted one");
    let tainted_input = parent.for_module(&defaults, vec![("token".to_owned(), "t".to_owned(), true)]);
    assert_eq!(tainted_input.render_untainted("{{token}}").as_deref(), Some(POISON));
    inner.set_rendered("out", "{{host}}", "evil.example".into());
    assert!(inner.is_tainted("out"), "a value set from a tainted name inside a module comes back tainted");
}

#[test]
fn the_capture_url_is_built_in_and_never_tainted() {
    let mut job = job(&[("execution.capture_url", "https://evil.example")], &[("cb", "{{execution.capture_url}}/e")]);
    job.capture_url = Some("https://hooks.example/webhook/abc".into());
    let flow = pairs(&[("callback", "{{execution.capture_url}}/done")]);
    let vars = Variables::for_job(&job, &flow);
    assert_eq!(render(&vars, "{{execution.capture_url}}"), "https://hooks.example/webhook/abc");
    assert_eq!(
        render(&vars, "{{callback}} {{cb}}"),
        "https://hooks.example/webhook/abc/done https://hooks.example/webhook/abc/e"
    );
    assert_eq!(
        vars.render_untainted("{{execution.capture_url}}").as_deref(),
        Some("https://hooks.example/webhook/abc")
    );
    let inner = vars.for_module(&BTreeMap::new(), vec![("execution.capture_url".into(), "x".into(), true)]);
    assert_eq!(render(&inner, "{{execution.capture_url}}"), "https://hooks.example/webhook/abc", "modules share it");
}

#[test]
fn a_run_without_a_capture_url_says_so() {
    let mut job = job(&[], &[("cb", "{{execution.capture_url}}/e")]);
    job.layers.as_mut().expect("layers").base = pairs(&[("callback", "org-value"), ("cb", "org-value")]);
    let flow = pairs(&[("callback", "{{execution.capture_url}}/done")]);
    let vars = Variables::for_job(&job, &flow);
    // Not the organization's value of the same name either: the flow's and the environment's are narrower.
    for name in ["execution.capture_url", "callback", "cb"] {
        let error = template::render(&format!("{{{{{name}}}}}"), &vars.scope()).expect_err(name);
        let explained = vars.explain(&error);
        assert!(explained.contains("this run has no capture URL: "), "{name}: {explained}");
    }
    let error = template::render("{{callback}}", &vars.scope()).expect_err("undefined");
    assert!(vars.explain(&error).starts_with("`{{callback}}` uses `{{execution.capture_url}}`"));
    let other = template::render("{{nowhere}}", &vars.scope()).expect_err("undefined");
    assert_eq!(vars.explain(&other), "`{{nowhere}}` is not defined");
}
