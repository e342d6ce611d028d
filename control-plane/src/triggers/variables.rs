//! What a capture gives the run its trigger launches, as launch variables: the request's facts (`capture.method`,
//! `capture.headers.<name>`, ...), the names the trigger extracts from its JSON body, and the trigger's own
//! `variables`. All are plain values, the launch's layer, never rendered as templates: a sender cannot name a
//! secret. Also the depth in a chain of triggered runs a capture was sent from.

use hookflow_shared::api::triggers::{CAPTURE_PREFIX, WebhookTrigger};
use hookflow_shared::wire::header::TRIGGER_DEPTH;
use hookflow_shared::{CaptureId, WebhookId};
use std::collections::BTreeMap;

/// Longest `capture.body`, in bytes: a longer body is cut at a character boundary and `capture.body_truncated` is
/// `"true"`, so a stranger's 1 MiB captures do not store 1 MiB in every execution they launch. Extracted names
/// read the whole body.
pub const BODY_VARIABLE_MAX: usize = 64 * 1024;

/// The parts of a stored capture its launch variables come from.
#[derive(Debug, Clone)]
pub struct Captured {
    pub request_id: CaptureId,
    pub webhook_id: WebhookId,
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub query: BTreeMap<String, Vec<String>>,
    pub body: Vec<u8>,
    pub body_utf8: bool,
    /// The signature's verdict (`unverified` when the endpoint verifies nothing).
    pub verdict: String,
}

/// The launch variables of `capture` for `trigger`: its own variables, what it extracts, then the `capture.` names
/// (no name of the first two can start with `capture.`: names hold no dot).
pub fn launch_variables(trigger: &WebhookTrigger, capture: &Captured) -> BTreeMap<String, String> {
    let mut variables: BTreeMap<String, String> =
        trigger.variables.iter().map(|(name, value)| (name.clone(), value.clone())).collect();
    variables.extend(trigger.extract.values_in(&capture.body));
    let mut set = |name: &str, value: String| {
        variables.entry(format!("{CAPTURE_PREFIX}{name}")).or_insert(value);
    };
    set("request_id", capture.request_id.to_string());
    set("webhook_id", capture.webhook_id.to_string());
    set("method", capture.method.clone());
    set("path", capture.path.clone());
    set("signature", capture.verdict.clone());
    // First values: the first of a repeated header or query parameter is the one taken.
    for (name, value) in &capture.headers {
        set(&format!("headers.{}", name.to_ascii_lowercase()), value.clone());
    }
    for (name, values) in &capture.query {
        if let Some(first) = values.first() {
            set(&format!("query.{name}"), first.clone());
        }
    }
    let (body, truncated) = body_text(&capture.body, capture.body_utf8);
    set("body", body);
    if truncated {
        set("body_truncated", "true".into());
    }
    variables
}

/// The body as text (UTF-8 as it is, anything else in base64, as captures show it), cut to
/// [`BODY_VARIABLE_MAX`] bytes.
fn body_text(body: &[u8], utf8: bool) -> (String, bool) {
    let text = match std::str::from_utf8(body) {
        Ok(text) if utf8 => text.to_owned(),
        _ => base64::Engine::encode(&base64::engine::general_purpose::STANDARD, body),
    };
    if text.len() <= BODY_VARIABLE_MAX {
        return (text, false);
    }
    let mut end = BODY_VARIABLE_MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_owned(), true)
}

/// The depth of the run that sent a capture (`Hookflow-Trigger-Depth`, the highest if repeated); 0 when no run
/// of a trigger sent it.
pub fn sent_depth(headers: &[(String, String)]) -> u32 {
    headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case(TRIGGER_DEPTH))
        .filter_map(|(_, value)| value.trim().parse::<u32>().ok())
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn capture(body: &str) -> Captured {
        Captured {
            request_id: CaptureId::now_v7(),
            webhook_id: WebhookId::new(uuid::Uuid::new_v4()),
            method: "POST".into(),
            path: "/orders".into(),
            headers: vec![("X-Event".into(), "paid".into()), ("x-event".into(), "second".into())],
            query: [("page".to_owned(), vec!["2".to_owned(), "3".to_owned()])].into(),
            body: body.as_bytes().to_vec(),
            body_utf8: true,
            verdict: "unverified".into(),
        }
    }

    fn trigger(extra: serde_json::Value) -> WebhookTrigger {
        let mut value = json!({"flow_id": uuid::Uuid::now_v7()});
        value.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        serde_json::from_value(value).expect("a trigger")
    }

    #[test]
    fn a_capture_gives_its_facts_first_values_extracts_and_the_triggers_own() {
        let trigger = trigger(json!({"variables": {"team": "payments"},
            "extract": {"order": "$.data.id", "amount": "$.data.amount", "tags": "$.tags[*]", "none": "$.nope"}}));
        let captured = capture(r#"{"data": {"id": "ord_1", "amount": 12.5}, "tags": ["a", "b"]}"#);
        let vars = launch_variables(&trigger, &captured);
        let get = |name: &str| vars.get(name).map(String::as_str);
        assert_eq!(get("capture.method"), Some("POST"));
        assert_eq!(get("capture.path"), Some("/orders"));
        assert_eq!(get("capture.headers.x-event"), Some("paid"));
        assert_eq!(get("capture.query.page"), Some("2"));
        assert_eq!(get("capture.signature"), Some("unverified"));
        assert_eq!(get("capture.request_id"), Some(captured.request_id.to_string().as_str()));
        assert_eq!(get("capture.body"), Some(std::str::from_utf8(&captured.body).expect("text")));
        assert_eq!((get("order"), get("amount"), get("tags")), (Some("ord_1"), Some("12.5"), Some(r#"["a","b"]"#)));
        assert_eq!((get("team"), get("none"), get("capture.body_truncated")), (Some("payments"), None, None));
    }

    #[test]
    fn large_and_binary_bodies_are_cut_or_encoded() {
        let mut captured = capture(&"é".repeat(BODY_VARIABLE_MAX));
        let vars = launch_variables(&trigger(json!({})), &captured);
        assert!(vars["capture.body"].len() <= BODY_VARIABLE_MAX && vars["capture.body"].len() > BODY_VARIABLE_MAX - 2);
        assert_eq!(vars["capture.body_truncated"], "true");
        captured.body = vec![0xff, 0x00];
        captured.body_utf8 = false;
        assert_eq!(launch_variables(&trigger(json!({})), &captured)["capture.body"], "/wA=");
    }

    #[test]
    fn the_depth_a_capture_was_sent_from() {
        let headers = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
        };
        assert_eq!(sent_depth(&headers(&[])), 0);
        assert_eq!(sent_depth(&headers(&[("Hookflow-Trigger-Depth", "3")])), 3);
        assert_eq!(sent_depth(&headers(&[("hookflow-trigger-depth", "1"), ("HOOKFLOW-TRIGGER-DEPTH", "4")])), 4);
        assert_eq!(sent_depth(&headers(&[("hookflow-trigger-depth", "deep")])), 0);
    }
}
