//! What an alert says: its one-line title, and the text of a Slack message and of a mail (naming the flow, the
//! schedule with its cron and zone, the node, the error as written, and the link to the execution).

use hookflow_shared::api::alerts::AlertMessage;
use serde_json::Value;

/// A short title: `flow "nightly" is failing`.
pub fn title(message: &AlertMessage) -> String {
    let flow = message.flow_name.as_deref().unwrap_or("?");
    match message.kind.as_str() {
        "test" => "test message from a notification channel".to_owned(),
        "flow.failing" => format!("flow \"{flow}\" is failing"),
        "flow.recovered" => format!("flow \"{flow}\" recovered"),
        "schedule.unclaimed" => format!("a schedule of flow \"{flow}\" was not claimed by any runner"),
        "schedule.claimed" => format!("a schedule of flow \"{flow}\" is claimed again"),
        "runners.offline" => "runners are offline".to_owned(),
        "runners.online" => "runners are online again".to_owned(),
        other => other.to_owned(),
    }
}

/// The lines of the message, each `label: value`, for what applies.
pub fn lines(message: &AlertMessage, context: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    if message.kind == "test" {
        lines.push("This channel works: hookflow will send its alerts here.".to_owned());
        return lines;
    }
    if let Some(flow) = &message.flow_name {
        lines.push(format!("Flow: {flow}"));
    }
    if let Some(schedule) = message.schedule_id {
        let cron = context.get("cron").and_then(Value::as_str).unwrap_or("?");
        let zone = context.get("timezone").and_then(Value::as_str).unwrap_or("UTC");
        lines.push(format!("Schedule: {cron} ({zone}), id {schedule}"));
    }
    if let Some(labels) = context.get("runner_labels").and_then(Value::as_array) {
        let labels: Vec<&str> = labels.iter().filter_map(Value::as_str).collect();
        lines.push(format!("Runner labels: {}", labels.join(", ")));
    }
    if let Some(runs) = message.failed_runs {
        lines.push(format!("Consecutive failed runs: {runs}"));
    }
    if let Some(node) = &message.node_id {
        lines.push(format!("Node: {node}"));
    }
    if let Some(error) = &message.error {
        lines.push(format!("Error: {error}"));
    }
    if let Some(url) = &message.execution_url {
        lines.push(format!("Execution: {url}"));
    }
    lines.push(format!(
        "At: {}",
        serde_json::to_value(&message.at).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
    ));
    lines
}

/// A Slack incoming webhook's body: `{"text": ...}`.
pub fn slack(message: &AlertMessage, context: &Value) -> Value {
    let mut text = format!("*[hookflow] {}*", title(message));
    for line in lines(message, context) {
        text.push('\n');
        text.push_str(&line);
    }
    serde_json::json!({"text": text})
}

/// A mail's subject (the mailer adds `[hookflow]`) and text.
pub fn mail(message: &AlertMessage, context: &Value) -> (String, String) {
    let mut text = format!("hookflow: {}.\n\n", title(message));
    for line in lines(message, context) {
        text.push_str(&line);
        text.push('\n');
    }
    (title(message), text)
}
