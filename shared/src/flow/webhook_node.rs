//! The `webhook` node: waits for a captured request (on an endpoint of the organization, or on the execution's own
//! capture URL) that matches a search (`q`, `filter`, templates in both) and optionally a valid signature, then
//! lets its extractors and assertions read the capture as they read a response.

use crate::api::catalog::Assertion;
use crate::api::search::SearchFilter;
use crate::flow::extract::Extractor;
use crate::flow::node_parts::node_kind;
use crate::flow::template;
use crate::ids::WebhookId;
use serde::{Deserialize, Serialize};

/// How long a webhook node waits when it does not say.
pub const DEFAULT_WAIT_MS: u64 = 30_000;
/// The longest a webhook node may wait (as long as a flow may run).
pub const MAX_WAIT_MS: u64 = crate::flow::node_parts::MAX_FLOW_TIMEOUT_S * 1000;
/// `q` as written, at most this long.
pub const MAX_Q_CHARS: usize = 4096;

/// The signature a waited-for capture must carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RequiredSignature {
    /// Verified by the endpoint's verification.
    Valid,
}

/// What a webhook node waits for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitFor {
    /// An endpoint of the organization; absent: the execution's own URL (`{{execution.capture_url}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_id: Option<WebhookId>,
    /// The search language of captures (`body.$.data.id:{{payment_id}} header.stripe-signature:*`); templates are
    /// rendered before the search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_length = 4096)]
    pub q: Option<String>,
    /// The structured search filter; templates are rendered in its string values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<SearchFilter>,
    /// `valid`: only a capture whose signature the endpoint verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<RequiredSignature>,
    /// How long to wait, from the node's start (default 30,000; at most the flow's timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub timeout_ms: Option<u64>,
}

node_kind! {
    pub struct WebhookNode {
        pub webhook: WaitFor,
        #[serde(default)]
        pub extractors: Vec<Extractor>,
        #[serde(default)]
        pub assertions: Vec<Assertion>,
    }
}

impl WaitFor {
    /// How long the node waits.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout_ms.unwrap_or(DEFAULT_WAIT_MS)
    }

    /// Every text of the search that may hold templates, with its field: `q` and the filter's string values.
    pub fn templated(&self) -> Vec<(String, &str)> {
        let mut texts: Vec<(String, &str)> = self.q.iter().map(|q| ("webhook.q".to_owned(), q.as_str())).collect();
        let Some(filter) = &self.filter else { return texts };
        let at = |field: &str| format!("webhook.filter.{field}");
        texts.extend(filter.body_contains.iter().map(|v| (at("body_contains"), v.as_str())));
        texts.extend(filter.content_type.iter().map(|v| (at("content_type"), v.as_str())));
        texts.extend(filter.source_ip.iter().map(|v| (at("source_ip"), v.as_str())));
        for (i, m) in filter.headers.iter().enumerate() {
            texts.extend(m.value.iter().map(|v| (at(&format!("headers[{i}].value")), v.as_str())));
        }
        for (i, m) in filter.query.iter().enumerate() {
            texts.extend(m.value.iter().map(|v| (at(&format!("query[{i}].value")), v.as_str())));
        }
        for (i, m) in filter.body_json.iter().enumerate() {
            if let Some(serde_json::Value::String(v)) = &m.value {
                texts.push((at(&format!("body_json[{i}].value")), v.as_str()));
            }
        }
        texts
    }

    /// This search with every template rendered by `render` (the first failure, with its field, stops it).
    pub fn rendered(
        &self,
        mut render: impl FnMut(&str) -> Result<String, template::TemplateError>,
    ) -> Result<Self, (String, template::TemplateError)> {
        let mut out = self.clone();
        let field = |name: &str| format!("webhook.{name}");
        if let Some(q) = &self.q {
            out.q = Some(render_search(q, &mut render).map_err(|e| (field("q"), e))?);
        }
        let Some(filter) = out.filter.as_mut() else { return Ok(out) };
        for (name, value) in [
            ("filter.body_contains", &mut filter.body_contains),
            ("filter.content_type", &mut filter.content_type),
            ("filter.source_ip", &mut filter.source_ip),
        ] {
            if let Some(text) = value {
                *text = render(text).map_err(|e| (field(name), e))?;
            }
        }
        for (i, m) in filter.headers.iter_mut().chain(filter.query.iter_mut()).enumerate() {
            if let Some(text) = &mut m.value {
                *text = render(text).map_err(|e| (field(&format!("filter.match[{i}].value")), e))?;
            }
        }
        for (i, m) in filter.body_json.iter_mut().enumerate() {
            if let Some(serde_json::Value::String(text)) = &mut m.value {
                *text = render(text).map_err(|e| (field(&format!("filter.body_json[{i}].value")), e))?;
            }
        }
        Ok(out)
    }
}

/// Renders the templates of a `q` text so that a value stays a value: one with spaces or a leading `-`, outside
/// quotes, is quoted; one holding a quote, or a lone `*` (any value), is refused. A rendered value can then never
/// add, drop or negate a term of the search.
fn render_search(
    q: &str,
    render: &mut impl FnMut(&str) -> Result<String, template::TemplateError>,
) -> Result<String, template::TemplateError> {
    let mut out = String::with_capacity(q.len());
    let (mut rest, mut quoted) = (q, false);
    while let Some(start) = rest.find("{{") {
        let before = &rest[..start];
        quoted ^= before.matches('"').count() % 2 == 1;
        out.push_str(before);
        let after = &rest[start..];
        let end = after.find("}}").ok_or(template::TemplateError::Unclosed)? + 2;
        let value = render(&after[..end])?;
        let refuse = |why: &str| template::TemplateError::Refused(format!("`{}` renders {why}", &after[..end]));
        if value.contains('"') {
            return Err(refuse("a double quote, which the search cannot hold"));
        }
        if value == "*" {
            return Err(refuse("`*`, which would match any value"));
        }
        if out.len() + value.len() > crate::flow::budget::MAX_RENDERED {
            return Err(template::TemplateError::Refused(format!(
                "the search renders past {} MiB",
                crate::flow::budget::MAX_RENDERED >> 20
            )));
        }
        let needs_quotes =
            !quoted && (value.is_empty() || value.contains(char::is_whitespace) || value.starts_with('-'));
        if needs_quotes {
            out.push('"');
            out.push_str(&value);
            out.push('"');
        } else {
            out.push_str(&value);
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    Ok(out)
}

impl WebhookNode {
    /// The node's own problems (its search's templates and sizes, its timeout, its extractors and assertions).
    pub(crate) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        let wait = &self.webhook;
        if wait.q.as_ref().is_some_and(|q| q.chars().count() > MAX_Q_CHARS) {
            problem("webhook.q", format!("at most {MAX_Q_CHARS} characters"));
        }
        for (field, text) in wait.templated() {
            if let Err(e) = template::check(text) {
                problem(&field, e.to_string());
            }
        }
        if wait.timeout_ms.is_some_and(|t| t == 0 || t > MAX_WAIT_MS) {
            problem("webhook.timeout_ms", format!("must be between 1 and {MAX_WAIT_MS}"));
        }
        crate::flow::node_parts::check_evaluations(&self.extractors, &self.assertions, problem);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(q: &str, value: &str) -> Result<String, template::TemplateError> {
        render_search(q, &mut |text: &str| Ok(text.replace("{{v}}", value)))
    }

    #[test]
    fn a_search_naming_a_large_value_many_times_is_refused_past_the_budget() {
        // Each name renders on its own (each within the template budget): the whole search is bounded too.
        let value = "a".repeat(4 * 1024 * 1024);
        assert!(rendered(&"{{v}} ".repeat(3), &value).is_ok());
        let refused = rendered(&"{{v}} ".repeat(800), &value).expect_err("800 x 4 MiB");
        assert!(refused.to_string().contains("renders past 16 MiB"), "{refused}");
    }

    #[test]
    fn a_rendered_value_stays_one_value_of_one_term() {
        assert_eq!(rendered("body.$.id:{{v}}", "pay_1").expect("plain"), "body.$.id:pay_1");
        assert_eq!(rendered("body.$.id:{{v}}", "x -body:y").expect("quoted"), "body.$.id:\"x -body:y\"");
        assert_eq!(rendered("{{v}}", "-header.a:*").expect("not a negation"), "\"-header.a:*\"");
        assert_eq!(rendered("body.$.id:\"{{v}}\"", "a b").expect("already quoted"), "body.$.id:\"a b\"");
        assert!(rendered("body.$.id:{{v}}", "*").is_err(), "any value");
        assert!(rendered("body.$.id:{{v}}", "a\" b").is_err(), "a quote");
    }
}
