//! The deployment files in `deploy/` stay true to the binaries: every flag they pass and every `HOOKFLOW_`,
//! `SERVICE_` and `RUNNER_` variable they set exists in `hookflow-server --help` or `hookflow-runner --help`, and
//! every YAML document parses (Kubernetes documents name their apiVersion and kind; the compose file has the
//! services the README promises).

use crate::RUNNER;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const SERVER: &str = env!("CARGO_BIN_EXE_hookflow-server-under-test");

fn help(binary: &str) -> String {
    let out = std::process::Command::new(binary).arg("--help").output().expect("--help");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read deploy/") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files(&path, found);
        } else {
            found.push(path);
        }
    }
}

/// `--flags` on the lines that run a hookflow binary: ExecStart, ENTRYPOINT/CMD, and YAML `args`/`command` lists.
fn flags(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        let runs = line.starts_with("ExecStart=")
            || line.starts_with("ENTRYPOINT")
            || line.starts_with("command:")
            || line.starts_with("args:");
        if !runs || line.starts_with('#') {
            continue;
        }
        for word in line.split(|c: char| c.is_whitespace() || matches!(c, '"' | ',' | '[' | ']' | '=')) {
            if word.starts_with("--") && word.len() > 2 {
                found.insert(word.to_owned());
            }
        }
    }
    found
}

/// Every `HOOKFLOW_*`, `SERVICE_*` and `RUNNER_*` name in a text.
fn variables(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let bytes = text.as_bytes();
    for prefix in ["HOOKFLOW_", "SERVICE_", "RUNNER_"] {
        for (at, _) in text.match_indices(prefix) {
            let starts_word = at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
            if !starts_word {
                continue;
            }
            let name: String =
                text[at..].chars().take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_').collect();
            found.insert(name);
        }
    }
    found
}

#[test]
fn deploy_files_name_only_real_settings_and_their_yaml_parses() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let known = format!("{}\n{}", help(SERVER), help(RUNNER));
    let mut all = Vec::new();
    files(&deploy, &mut all);
    let (mut checked_flags, mut checked_variables, mut documents) = (0, 0, 0);
    for path in &all {
        // The CI action drives the `hookflow` CLI; its own tests cover it.
        if path.components().any(|c| c.as_os_str() == "github-action") {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("text");
        for flag in flags(&text) {
            assert!(
                known.contains(&format!("{flag} ")) || known.contains(&format!("{flag}\n")),
                "{}: {flag} is not a flag of hookflow-server or hookflow-runner",
                path.display()
            );
            checked_flags += 1;
        }
        for variable in variables(&text) {
            assert!(known.contains(&format!("env: {variable}")), "{}: {variable} is no setting", path.display());
            checked_variables += 1;
        }
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            for document in yaml_serde::Deserializer::from_str(&text) {
                let value = <yaml_serde::Value as serde::Deserialize>::deserialize(document)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                if path.components().any(|c| c.as_os_str() == "kubernetes") {
                    assert!(value.get("apiVersion").is_some() && value.get("kind").is_some(), "{}", path.display());
                }
                if path.ends_with("compose.yaml") {
                    let services = value.get("services").expect("services");
                    for name in ["postgres", "server", "runner-1", "runner-2"] {
                        assert!(services.get(name).is_some(), "compose.yaml has {name}");
                    }
                }
                documents += 1;
            }
        }
    }
    // The files exist and say something: containers, compose, Kubernetes, systemd.
    for expected in [
        "container/Containerfile.server",
        "container/Containerfile.runner",
        "compose.yaml",
        "kubernetes/kustomization.yaml",
        "systemd/hookflow-server.service",
        "systemd/hookflow-runner.service",
    ] {
        assert!(deploy.join(expected).is_file(), "deploy/{expected}");
    }
    assert!(
        checked_flags >= 6 && checked_variables >= 15 && documents >= 8,
        "{checked_flags} flags, {checked_variables} variables, {documents} YAML documents"
    );
}

/// The strings of a YAML list (`args`, `command`), or none.
fn strings(value: Option<&yaml_serde::Value>) -> Vec<String> {
    value.and_then(|v| v.as_sequence()).into_iter().flatten().filter_map(|v| v.as_str().map(str::to_owned)).collect()
}

/// The containers of a pod template found under `spec` at `path` (`["template"]`, `["jobTargetRef", "template"]`).
fn containers<'a>(document: &'a yaml_serde::Value, path: &[&str]) -> Vec<&'a yaml_serde::Value> {
    let mut at = document.get("spec");
    for step in path {
        at = at.and_then(|v| v.get(*step));
    }
    let list = at.and_then(|t| t.get("spec")).and_then(|s| s.get("containers")).and_then(|c| c.as_sequence());
    list.map(|l| l.iter().collect()).unwrap_or_default()
}

/// Issue #53's KEDA manifests: they parse; the ScaledJob runs one-shot runners (`--max-jobs 1 --idle-exit-s 10`)
/// from zero, the ScaledObject long-lived ones that drain on SIGTERM within the pod's grace period; both poll
/// `queued` of `GET /runner/pools/{pool}` through KEDA's `metrics-api` trigger with the runner key as `X-Api-Key`;
/// every flag and variable their containers name is in `hookflow-runner --help`, read from the parsed lists (the
/// line-based check above sees only one-line `args:`).
#[test]
fn keda_manifests_scale_runners_on_the_scaler_endpoint_with_real_flags() {
    let keda = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes/keda");
    let runner_help = help(RUNNER);
    let mut kinds = BTreeSet::new();
    let mut checked = 0;
    for name in ["scaledjob.yaml", "scaledobject.yaml", "trigger-auth.yaml", "kustomization.yaml"] {
        let text = std::fs::read_to_string(keda.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        for document in yaml_serde::Deserializer::from_str(&text) {
            let document = <yaml_serde::Value as serde::Deserialize>::deserialize(document)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let kind = document.get("kind").and_then(|k| k.as_str()).expect("kind").to_owned();
            let path: &[&str] = match kind.as_str() {
                "ScaledJob" => &["jobTargetRef", "template"],
                "Deployment" => &["template"],
                _ => &[],
            };
            for container in containers(&document, path) {
                let args = [strings(container.get("args")), strings(container.get("command"))].concat();
                for flag in args.iter().filter(|a| a.starts_with("--")) {
                    assert!(runner_help.contains(&format!("{flag} ")), "{name}: {flag} is not a runner flag");
                    checked += 1;
                }
                let env = container.get("env").and_then(|e| e.as_sequence()).into_iter().flatten();
                for variable in env.filter_map(|e| e.get("name").and_then(|n| n.as_str())) {
                    assert!(runner_help.contains(&format!("env: {variable}")), "{name}: {variable} is no setting");
                    checked += 1;
                }
                if kind == "ScaledJob" {
                    let joined = args.join(" ");
                    assert!(joined.contains("--max-jobs 1") && joined.contains("--idle-exit-s 10"), "{joined}");
                }
                if kind == "Deployment" {
                    let grace = args.iter().position(|a| a == "--grace-s").map(|i| args[i + 1].parse::<u64>().unwrap());
                    let pod = document["spec"]["template"]["spec"]["terminationGracePeriodSeconds"].as_u64();
                    assert!(pod > grace, "the pod's grace period outlasts the drain: {pod:?} > {grace:?}");
                }
            }
            if kind == "ScaledJob" || kind == "ScaledObject" {
                assert_eq!(document["spec"]["minReplicaCount"].as_u64(), Some(if kind == "ScaledJob" { 0 } else { 1 }));
                assert!(document["spec"]["maxReplicaCount"].as_u64().is_some_and(|n| n >= 1));
                let trigger = &document["spec"]["triggers"][0];
                assert_eq!(trigger["type"].as_str(), Some("metrics-api"));
                let url = trigger["metadata"]["url"].as_str().expect("url");
                assert!(url.contains("/runner/pools/"), "{url}");
                assert_eq!(trigger["metadata"]["valueLocation"].as_str(), Some("queued"));
                assert_eq!(trigger["metadata"]["keyParamName"].as_str(), Some("X-Api-Key"));
                assert_eq!(trigger["authenticationRef"]["name"].as_str(), Some("hookflow-pool-reader"));
            }
            kinds.insert(kind);
        }
    }
    let expected = ["Deployment", "Kustomization", "ScaledJob", "ScaledObject", "TriggerAuthentication"];
    assert_eq!(kinds, expected.iter().map(|k| k.to_string()).collect());
    assert!(checked >= 12, "{checked} flags and variables checked");
}
