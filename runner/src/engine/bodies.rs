//! The bodies a request node sends besides text (#54): urlencoded `form` pairs, `multipart/form-data` parts with a
//! boundary chosen here (one that occurs in no part), and the GraphQL-over-HTTP POST; and what a GraphQL answer's
//! `errors` means for the node. Results show a multipart body as its parts' headers and sizes, never its bytes.

use base64::Engine as _;
use bytes::Bytes;
use hookflow_shared::flow::definition::{GraphqlRequest, MultipartPart, RequestSpec};
use hookflow_shared::flow::template::{self, Scope, TemplateError};
use serde_json::{Map, Value};
use std::hash::{BuildHasher, Hasher};

/// A body as it is sent and as results show it, with the content type it goes with.
#[derive(Debug, Default)]
pub struct Built {
    pub bytes: Option<Bytes>,
    pub shown: Option<String>,
    pub content_type: Option<String>,
    /// GraphQL is always a POST.
    pub post: bool,
}

/// Renders a template at `field`, or says why not.
pub type Render<'f> = dyn Fn(&str, &str) -> Result<String, String> + 'f;

/// The body of `spec`, rendered.
pub fn build(spec: &RequestSpec, render: &Render<'_>, scope: &Scope<'_>) -> Result<Built, String> {
    if let Some(pairs) = &spec.form {
        let mut form = form_urlencoded::Serializer::new(String::new());
        for (i, (name, value)) in pairs.iter().enumerate() {
            let name = render(&format!("form[{i}][0]"), name)?;
            let value = render(&format!("form[{i}][1]"), value)?;
            form.append_pair(&name, &value);
        }
        let text = form.finish();
        return Ok(Built {
            bytes: Some(Bytes::from(text.clone())),
            shown: Some(text),
            content_type: Some("application/x-www-form-urlencoded".into()),
            post: false,
        });
    }
    if let Some(parts) = &spec.multipart {
        return multipart(parts, render);
    }
    if let Some(graphql) = &spec.graphql {
        return graphql_body(graphql, render, scope);
    }
    let body = spec.body.as_deref().map(|b| render("body", b)).transpose()?;
    Ok(Built { bytes: body.clone().map(Bytes::from), shown: body, content_type: None, post: false })
}

/// A boundary no part's bytes hold.
fn boundary(contents: &[Vec<u8>]) -> String {
    loop {
        let state = std::collections::hash_map::RandomState::new();
        let (mut a, mut b) = (state.build_hasher(), state.build_hasher());
        a.write_u8(1);
        b.write_u8(2);
        let candidate = format!("hookflow-{:016x}{:016x}", a.finish(), b.finish());
        let needle = candidate.as_bytes();
        if !contents.iter().any(|c| c.windows(needle.len()).any(|w| w == needle)) {
            return candidate;
        }
    }
}

fn multipart(parts: &[MultipartPart], render: &Render<'_>) -> Result<Built, String> {
    let mut contents = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        let bytes = if let Some(value) = &part.value {
            render(&format!("multipart[{i}].value"), value)?.into_bytes()
        } else if let Some(encoded) = &part.base64 {
            base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .map_err(|_| format!("multipart[{i}].base64: not valid base64"))?
        } else if let Some(secret) = &part.secret {
            render(&format!("multipart[{i}].secret"), secret)?.into_bytes()
        } else {
            Vec::new()
        };
        contents.push(bytes);
    }
    let boundary = boundary(&contents);
    let total: usize = contents.iter().map(|c| c.len() + 256).sum();
    let mut body = Vec::with_capacity(total);
    let mut shown = String::new();
    for (part, content) in parts.iter().zip(&contents) {
        let mut head = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{}\"", part.name);
        if let Some(filename) = &part.filename {
            head.push_str(&format!("; filename=\"{filename}\""));
        }
        head.push_str("\r\n");
        if let Some(content_type) = &part.content_type {
            head.push_str(&format!("Content-Type: {content_type}\r\n"));
        }
        head.push_str("\r\n");
        body.extend_from_slice(head.as_bytes());
        body.extend_from_slice(content);
        body.extend_from_slice(b"\r\n");
        shown.push_str(&head);
        match &part.value {
            Some(_) if part.filename.is_none() => shown.push_str(&String::from_utf8_lossy(content)),
            _ => shown.push_str(&format!("[{} bytes]", content.len())),
        }
        shown.push_str("\r\n");
    }
    let end = format!("--{boundary}--\r\n");
    body.extend_from_slice(end.as_bytes());
    shown.push_str(&end);
    Ok(Built {
        bytes: Some(Bytes::from(body)),
        shown: Some(shown),
        content_type: Some(format!("multipart/form-data; boundary={boundary}")),
        post: false,
    })
}

/// Renders every string inside a JSON value as a template.
fn render_json(value: &Value, scope: &Scope<'_>) -> Result<Value, TemplateError> {
    Ok(match value {
        Value::String(text) => Value::String(template::render(text, scope)?),
        Value::Array(items) => Value::Array(items.iter().map(|v| render_json(v, scope)).collect::<Result<_, _>>()?),
        Value::Object(map) => {
            let mut rendered = Map::new();
            for (key, v) in map {
                rendered.insert(key.clone(), render_json(v, scope)?);
            }
            Value::Object(rendered)
        }
        other => other.clone(),
    })
}

fn graphql_body(graphql: &GraphqlRequest, render: &Render<'_>, scope: &Scope<'_>) -> Result<Built, String> {
    let mut body = Map::new();
    body.insert("query".into(), Value::String(render("graphql.query", &graphql.query)?));
    if let Some(variables) = graphql.variables.as_ref().filter(|v| !v.is_null()) {
        let variables = render_json(variables, scope).map_err(|e| format!("graphql.variables: {e}"))?;
        body.insert("variables".into(), variables);
    }
    if let Some(name) = &graphql.operation_name {
        body.insert("operationName".into(), Value::String(render("graphql.operation_name", name)?));
    }
    let text = Value::Object(body).to_string();
    Ok(Built {
        bytes: Some(Bytes::from(text.clone())),
        shown: Some(text),
        content_type: Some("application/json".into()),
        post: true,
    })
}

/// The GraphQL answer's first error message, when its `errors` is a non-empty list.
pub fn graphql_error(body: &str) -> Option<String> {
    let answer: Value = serde_json::from_str(body).ok()?;
    let errors = answer.get("errors")?.as_array().filter(|e| !e.is_empty())?;
    let first = errors[0].get("message").and_then(Value::as_str).unwrap_or("(no message)");
    let first: String = first.chars().take(500).collect();
    Some(format!("the GraphQL answer has {} error(s); the first: {first}", errors.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multipart_bodies_are_byte_exact() {
        let parts: Vec<MultipartPart> = serde_json::from_value(serde_json::json!([
            {"name": "note", "value": "hi"},
            {"name": "file", "base64": "AAEC", "filename": "a.bin", "content_type": "application/octet-stream"}
        ]))
        .expect("parts");
        let render = |_: &str, text: &str| Ok(text.to_owned());
        let built = multipart(&parts, &render).expect("built");
        let boundary = built.content_type.as_deref().and_then(|c| c.strip_prefix("multipart/form-data; boundary="));
        let boundary = boundary.expect("boundary");
        let expected = format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n--{boundary}\r\nContent-Disposition: \
             form-data; name=\"file\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n\0\x01\x02\r\n\
             --{boundary}--\r\n"
        );
        assert_eq!(built.bytes.as_deref(), Some(expected.as_bytes()));
        assert!(built.shown.expect("shown").contains("[3 bytes]"));
        assert_eq!(
            graphql_error(r#"{"data":null,"errors":[{"message":"no pet"}]}"#).as_deref().map(|e| e.ends_with("no pet")),
            Some(true)
        );
        assert_eq!(graphql_error(r#"{"data":{},"errors":[]}"#), None);
    }
}
