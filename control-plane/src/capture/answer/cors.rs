//! CORS at capture URLs: which origins an endpoint's `cors` allows, the preflight it answers (204 with the allowed
//! methods, headers and max age), and the `Access-Control-Allow-Origin` / `Vary: Origin` every other answer to an
//! allowed origin carries. `Access-Control-Allow-Credentials` is never sent.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hookflow_shared::api::answers::{CORS_LIST_MAX, CORS_MAX_AGE_DEFAULT, CORS_MAX_AGE_MAX, Cors};

/// The methods a preflight allows: the five captured methods and HEAD.
pub const ALLOWED_METHODS: &str = "GET, POST, PUT, PATCH, DELETE, HEAD";

/// Says what is wrong with `cors`, naming the field.
pub fn check(cors: &Cors) -> Result<(), String> {
    if cors.allow_origins.is_empty() || cors.allow_origins.len() > CORS_LIST_MAX {
        return Err(format!("invalid field `cors.allow_origins`: 1 to {CORS_LIST_MAX} origins"));
    }
    let any = cors.allow_origins.iter().any(|o| o == "*");
    if any && cors.allow_origins.len() > 1 {
        return Err("invalid field `cors.allow_origins`: `*` stands alone (`[\"*\"]`)".into());
    }
    for (i, origin) in cors.allow_origins.iter().enumerate() {
        if origin != "*" && !is_origin(origin) {
            return Err(format!(
                "invalid field `cors.allow_origins[{i}]`: `{origin}` is not an origin (`https://host[:port]`, no path)"
            ));
        }
    }
    let headers = cors.allow_headers.as_deref().unwrap_or_default();
    if headers.len() > CORS_LIST_MAX {
        return Err(format!("invalid field `cors.allow_headers`: at most {CORS_LIST_MAX} names"));
    }
    for (i, name) in headers.iter().enumerate() {
        if axum::http::HeaderName::try_from(name.as_str()).is_err() {
            return Err(format!("invalid field `cors.allow_headers[{i}]`: `{name}` is not a header name"));
        }
    }
    if cors.max_age_s.is_some_and(|s| s > CORS_MAX_AGE_MAX) {
        return Err(format!("invalid field `cors.max_age_s`: 0 to {CORS_MAX_AGE_MAX}"));
    }
    Ok(())
}

/// `scheme://host[:port]` with `http` or `https`, a host of letters, digits, `-` and `.` (or `[v6]`), an optional
/// port 1 to 65535, nothing after.
pub fn is_origin(origin: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else { return false };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return false;
    }
    let (host, port) = match rest.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((address, after)) if address.parse::<std::net::Ipv6Addr>().is_ok() => ("v6", after),
            _ => return false,
        },
        None => match rest.rsplit_once(':') {
            Some((host, port)) => (host, &rest[host.len()..][..port.len() + 1]),
            None => (rest, ""),
        },
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && !host.starts_with(['.', '-'])
        && !host.ends_with(['.', '-']);
    let port_ok = match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(digits) => {
            !digits.is_empty() && digits.len() <= 5 && digits.parse::<u32>().is_ok_and(|p| (1..=65_535).contains(&p))
        }
    };
    host_ok && port_ok
}

/// The request's `Origin` when `cors` allows it.
pub fn allowed_origin<'a>(cors: &Cors, headers: &'a [(String, String)]) -> Option<&'a str> {
    let origin = headers.iter().find(|(n, _)| n.eq_ignore_ascii_case("origin")).map(|(_, v)| v.as_str())?;
    let allowed = cors.allow_origins.iter().any(|o| o == "*" || o.eq_ignore_ascii_case(origin));
    (allowed && HeaderValue::from_str(origin).is_ok()).then_some(origin)
}

/// Whether a request is a CORS preflight: `OPTIONS` with `Origin` and `Access-Control-Request-Method`.
pub fn is_preflight(method: &str, headers: &[(String, String)]) -> bool {
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    method == "OPTIONS" && has("origin") && has("access-control-request-method")
}

/// The answer to a preflight from `origin`, an allowed one.
pub fn preflight(cors: &Cors, origin: &str) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    let allow_headers = match cors.allow_headers.as_deref() {
        Some(names) => names.join(", "),
        None => "Content-Type".to_owned(),
    };
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(ALLOWED_METHODS));
    if let Ok(value) = HeaderValue::try_from(allow_headers) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, value);
    }
    let max_age = cors.max_age_s.unwrap_or(CORS_MAX_AGE_DEFAULT);
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from(max_age));
    mark(&mut response, origin);
    response
}

/// Marks an answer to an allowed `origin`: `Access-Control-Allow-Origin` naming it, and `Vary: Origin`.
pub fn mark(response: &mut Response, origin: &str) {
    if let Ok(value) = HeaderValue::from_str(origin) {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
        headers.append(header::VARY, HeaderValue::from_static("Origin"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_host_and_port_only() {
        for good in ["https://app.example.com", "http://localhost:8080", "http://127.0.0.1:1", "https://[::1]:443"] {
            assert!(is_origin(good), "{good}");
        }
        for bad in [
            "app.example.com",
            "ftp://a.com",
            "https://a.com/",
            "https://a.com/x",
            "https://a.com:0",
            "https://a.com:99999",
            "https://",
            "https://a b.com",
            "https://a.com:",
            "https://[nope]",
        ] {
            assert!(!is_origin(bad), "{bad}");
        }
    }
}
