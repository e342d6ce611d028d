//! The parts every request as written carries alike (headers, query, body), declared once for the bodies that
//! hold them: an inline request of a flow, a reference's overrides, a collection's request.

/// Declares a request as written (inline in a flow, a reference's overrides, a collection's request): its own
/// fields, then the headers and query (`name: value`, absent is empty) and the body every one carries alike, then
/// its fields after those. These bodies refuse unknown fields, which rules out a flattened common part.
macro_rules! with_request_parts {
    (
        $(#[$doc:meta])*
        pub struct $name:ident {
            $($(#[$meta:meta])* pub $field:ident: $ty:ty,)*
            ..parts,
            $($(#[$after_meta:meta])* pub $after:ident: $after_ty:ty,)*
        }
    ) => {
        $(#[$doc])*
        pub struct $name {
            $($(#[$meta])* pub $field: $ty,)*
            #[serde(default)]
            pub headers: std::collections::BTreeMap<String, String>,
            #[serde(default)]
            pub query: std::collections::BTreeMap<String, String>,
            pub body: Option<String>,
            $($(#[$after_meta])* pub $after: $after_ty,)*
        }
    };
}
pub(crate) use with_request_parts;

/// The HTTP methods a request node may use.
pub const METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

/// The parts of a request that are checked, wherever the request comes from (an inline request, a reference's
/// overrides, a collection request); absent parts are not checked.
#[derive(Debug, Clone, Copy)]
pub struct RequestParts<'a> {
    pub method: Option<&'a str>,
    pub url: Option<&'a str>,
    pub headers: &'a std::collections::BTreeMap<String, String>,
    pub query: &'a std::collections::BTreeMap<String, String>,
    pub body: Option<&'a str>,
}

/// Problems of a request's method and templates as `(field, message)`; `at` (may be empty) prefixes the fields.
pub fn request_problems(at: &str, parts: RequestParts<'_>) -> Vec<(String, String)> {
    let field = |name: &str| if at.is_empty() { name.to_owned() } else { format!("{at}.{name}") };
    let mut problems = Vec::new();
    if let Some(method) = parts.method.filter(|m| !METHODS.contains(m)) {
        problems.push((field("method"), format!("`{method}` is not one of {}", METHODS.join(", "))));
    }
    let mut templated: Vec<(String, &str)> = parts.url.map(|u| (field("url"), u)).into_iter().collect();
    templated.extend(parts.headers.iter().map(|(k, v)| (field(&format!("headers.{k}")), v.as_str())));
    templated.extend(parts.query.iter().map(|(k, v)| (field(&format!("query.{k}")), v.as_str())));
    templated.extend(parts.body.map(|b| (field("body"), b)));
    for (name, text) in templated {
        if let Err(e) = crate::flow::template::check(text) {
            problems.push((name, e.to_string()));
        }
    }
    problems
}
