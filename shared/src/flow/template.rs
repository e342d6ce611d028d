//! Templating: `{{name}}` is replaced by a variable's value and `{{secret.NAME}}` by a secret's; an undefined
//! name is an error that names it. Lookup order (narrowest first: extracted values, built-in names, launch,
//! environment, the flow's defaults, organization variables) is the caller's, given as layers from first to last.

use std::collections::HashMap;

/// Where names are looked up: `layers` in order, then `secrets` for `secret.` names.
#[derive(Debug, Default)]
pub struct Scope<'a> {
    pub layers: Vec<&'a HashMap<String, String>>,
    pub secrets: Option<&'a HashMap<String, String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("`{{{{{0}}}}}` is not defined")]
    Undefined(String),
    #[error("an opening `{{{{` has no closing `}}}}`")]
    Unclosed,
    /// A value that would change the meaning of the text it is rendered into.
    #[error("{0}")]
    Refused(String),
}

impl Scope<'_> {
    fn lookup(&self, name: &str) -> Option<&str> {
        match name.strip_prefix("secret.") {
            Some(secret) => self.secrets?.get(secret).map(String::as_str),
            None => self.layers.iter().find_map(|layer| layer.get(name)).map(String::as_str),
        }
    }
}

/// Replaces every `{{ name }}` (spaces around the name allowed) in `text`; a text that would render past
/// [`MAX_RENDERED`](super::budget::MAX_RENDERED) bytes is refused (one value named a million times would otherwise
/// take the process's memory).
pub fn render(text: &str, scope: &Scope<'_>) -> Result<String, TemplateError> {
    use super::budget::MAX_RENDERED;
    let too_long = || TemplateError::Refused(format!("it renders past {} MiB", MAX_RENDERED >> 20));
    let push = |out: &mut String, piece: &str| {
        if out.len() + piece.len() > MAX_RENDERED {
            return Err(too_long());
        }
        out.push_str(piece);
        Ok(())
    };
    let mut out = String::with_capacity(text.len().min(MAX_RENDERED));
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        push(&mut out, &rest[..start])?;
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or(TemplateError::Unclosed)?;
        let name = after[..end].trim();
        push(&mut out, scope.lookup(name).ok_or_else(|| TemplateError::Undefined(name.to_owned()))?)?;
        rest = &after[end + 2..];
    }
    push(&mut out, rest)?;
    Ok(out)
}

/// Checks that every `{{` is closed and names something, without resolving names.
pub fn check(text: &str) -> Result<(), TemplateError> {
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or(TemplateError::Unclosed)?;
        if after[..end].trim().is_empty() {
            return Err(TemplateError::Undefined(String::new()));
        }
        rest = &after[end + 2..];
    }
    Ok(())
}

/// Every `{{ reference }}` of a text, trimmed, in order (repeats included).
fn references(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let start = rest.find("{{")?;
        let after = &rest[start + 2..];
        let end = after.find("}}")?;
        rest = &after[end + 2..];
        Some(after[..end].trim())
    })
}

/// Names kept once each, in the order first seen.
fn once<'a>(found: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in found {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// The variable names a text references (not secrets), each once.
pub fn names(text: &str) -> Vec<String> {
    once(references(text).filter(|name| !name.starts_with("secret.")))
}

/// The secret names a text references (`{{secret.NAME}}`), to resolve only those at claim time.
pub fn secret_names(text: &str) -> Vec<String> {
    once(references(text).filter_map(|name| name.strip_prefix("secret.")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_text_rendering_past_the_budget_is_refused_before_it_is_built() {
        let big = "a".repeat(4 * 1024 * 1024);
        let vars = map(&[("x", big.as_str())]);
        let scope = Scope { layers: vec![&vars], secrets: None };
        assert_eq!(render("{{x}}{{x}}{{x}}{{x}}", &scope).map(|r| r.len()), Ok(16 * 1024 * 1024));
        let refused = render(&"{{x}}".repeat(1_000_000), &scope).expect_err("a million times 4 MiB");
        assert!(refused.to_string().contains("renders past 16 MiB"), "{refused}");
    }

    #[test]
    fn layers_resolve_in_order_and_secrets_by_prefix() {
        let extracted = map(&[("token", "t-1")]);
        let flow = map(&[("token", "shadowed"), ("base_url", "https://api.example.com")]);
        let secrets = map(&[("API_PASSWORD", "hunter2")]);
        let scope = Scope { layers: vec![&extracted, &flow], secrets: Some(&secrets) };
        assert_eq!(
            render("{{base_url}}/login?t={{ token }}&p={{secret.API_PASSWORD}}", &scope),
            Ok("https://api.example.com/login?t=t-1&p=hunter2".into())
        );
        assert_eq!(render("no templates {here}", &scope), Ok("no templates {here}".into()));
    }

    #[test]
    fn undefined_names_and_unclosed_braces_are_errors() {
        let scope = Scope::default();
        assert_eq!(render("{{user}}", &scope), Err(TemplateError::Undefined("user".into())));
        assert_eq!(TemplateError::Undefined("user".into()).to_string(), "`{{user}}` is not defined");
        assert_eq!(render("{{secret.X}}", &scope), Err(TemplateError::Undefined("secret.X".into())));
        assert_eq!(render("oops {{user", &scope), Err(TemplateError::Unclosed));
    }

    #[test]
    fn referenced_secrets_are_listed_once() {
        let text = "{{secret.A}} {{ secret.B }} {{secret.A}} {{plain}}";
        assert_eq!(secret_names(text), ["A", "B"]);
    }

    #[test]
    fn referenced_variables_are_listed_once_without_secrets() {
        let text = "{{ a }}{{secret.S}} {{b}} {{a}} {{unclosed";
        assert_eq!(names(text), ["a", "b"]);
    }
}
