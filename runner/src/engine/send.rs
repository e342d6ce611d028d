//! Sending one request of a request node, through the guarded client: redirects are followed here, each hop
//! checked by the guard; a secret goes only to hosts the stored flow and its environment name (a launch variable
//! cannot choose the host a secret goes to) or to the hosts the secret lists; a redirect to another origin drops
//! the headers that carry a secret (and credentials), and is not followed when the body carries one. Responses
//! are read within a size limit.

use crate::engine::cookies::Jar;
use crate::engine::mask::Masker;
use crate::outbound::{Guard, read_limited, refusal};
use hookflow_shared::api::runners::NetworkPolicy;
use reqwest::{Method, StatusCode, Url};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Redirects followed at most.
const MAX_REDIRECTS: usize = 10;
/// Largest response body read (extractors see the whole body; results keep 64 KiB of it).
pub const MAX_RESPONSE_BODY: usize = 32 * 1024 * 1024;
/// Headers never sent to another origin.
const CREDENTIAL_HEADERS: [&str; 3] = ["authorization", "cookie", "proxy-authorization"];

/// A rendered request.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub method: String,
    pub url: String,
    /// The URL as it would be had no launch variable chosen anything (`None`: it could not be rendered so).
    pub untainted_url: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: Option<bytes::Bytes>,
    /// Secrets the request carries outside its text (a client certificate), bound to hosts like any other.
    pub secrets: Vec<String>,
}

/// A response as received.
#[derive(Debug)]
pub struct Received {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: bytes::Bytes,
    pub ttfb: Duration,
    pub total: Duration,
    /// The run's cookie jar added cookies to the request (to the last hop's).
    pub sent_cookies: bool,
}

/// Where requests and secrets may go.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    pub guard_policy: NetworkPolicy,
    pub secret_hosts: &'a BTreeMap<String, Vec<String>>,
}

/// The run's cookie jar, when the request uses it.
pub type CookieJar<'a> = Option<&'a std::sync::Mutex<Jar>>;

/// Sends `outgoing` and reads the whole response within `timeout`.
pub async fn send(
    client: &reqwest::Client,
    outgoing: &Outgoing,
    rules: &Rules<'_>,
    masker: &Masker,
    timeout: Duration,
    jar: CookieJar<'_>,
) -> Result<Received, String> {
    match tokio::time::timeout(timeout, follow(client, outgoing, rules, masker, jar)).await {
        Ok(result) => result,
        Err(_) => Err(format!("no response within {} ms", timeout.as_millis())),
    }
}

/// One request and the redirects after it.
struct Hop {
    method: Method,
    url: Url,
    headers: Vec<(String, String)>,
    body: Option<bytes::Bytes>,
    secrets: Vec<String>,
}

/// Sends `outgoing`, following redirects; timings count from the first send.
async fn follow(
    client: &reqwest::Client,
    outgoing: &Outgoing,
    rules: &Rules<'_>,
    masker: &Masker,
    jar: CookieJar<'_>,
) -> Result<Received, String> {
    let started = Instant::now();
    let method = Method::from_bytes(outgoing.method.as_bytes()).map_err(|_| "the method is not valid".to_owned())?;
    let url = Url::parse(&outgoing.url).map_err(|e| format!("the URL is not valid: {e}"))?;
    check_launch_hosts(&url, outgoing, rules, masker)?;
    let mut hop = Hop {
        method,
        url,
        headers: outgoing.headers.clone(),
        body: outgoing.body.clone(),
        secrets: outgoing.secrets.clone(),
    };
    let guard = Guard::new(rules.guard_policy);
    for _ in 0..=MAX_REDIRECTS {
        guard.check_url(&hop.url).map_err(|e| e.to_string())?;
        check_allowed_hosts(&hop, rules, masker)?;
        let mut request = client.request(hop.method.clone(), hop.url.clone());
        let from_jar = jar.and_then(|jar| jar.lock().ok()?.header_for(&hop.url));
        let mut own_cookie = None;
        for (name, value) in &hop.headers {
            if from_jar.is_some() && name.eq_ignore_ascii_case("cookie") {
                own_cookie = Some(value.as_str());
                continue;
            }
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some(cookies) = &from_jar {
            let value = own_cookie.map_or_else(|| cookies.clone(), |own| format!("{own}; {cookies}"));
            request = request.header(reqwest::header::COOKIE, value);
        }
        if let Some(body) = &hop.body {
            request = request.body(body.clone());
        }
        let response = request.send().await.map_err(|e| describe(&e))?;
        let ttfb = started.elapsed();
        if let Some(jar) = jar
            && let Ok(mut jar) = jar.lock()
        {
            for value in response.headers().get_all(reqwest::header::SET_COOKIE) {
                if let Ok(value) = value.to_str() {
                    jar.store(&hop.url, value);
                }
            }
        }
        if let Some(next) = redirect(&response, &hop.url) {
            hop = redirected(hop, response.status(), next, masker)?;
            continue;
        }
        let status = response.status().as_u16();
        let headers = crate::outbound::header_pairs(response.headers());
        let body = read_limited(response, MAX_RESPONSE_BODY).await.map_err(|e| e.to_string())?;
        let sent_cookies = from_jar.is_some();
        return Ok(Received { status, headers, body, ttfb, total: started.elapsed(), sent_cookies });
    }
    Err(format!("more than {MAX_REDIRECTS} redirects"))
}

/// The next URL when the response is a redirect with a usable `Location`.
fn redirect(response: &reqwest::Response, from: &Url) -> Option<Url> {
    if !response.status().is_redirection() || response.status() == StatusCode::NOT_MODIFIED {
        return None;
    }
    let location = response.headers().get(reqwest::header::LOCATION)?.to_str().ok()?;
    from.join(location).ok()
}

/// The request after a redirect: 303 (and 301/302 after a POST) become a GET without body; another origin gets
/// no credentials and no header carrying a secret, and a body carrying a secret stops the redirect there.
fn redirected(mut hop: Hop, status: StatusCode, next: Url, masker: &Masker) -> Result<Hop, String> {
    let becomes_get = status == StatusCode::SEE_OTHER
        || (matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND) && hop.method == Method::POST);
    if becomes_get {
        hop.method = Method::GET;
        hop.body = None;
        hop.headers.retain(|(name, _)| !name.eq_ignore_ascii_case("content-type"));
    }
    if next.origin() != hop.url.origin() {
        hop.headers.retain(|(name, value)| {
            !CREDENTIAL_HEADERS.iter().any(|c| name.eq_ignore_ascii_case(c)) && masker.carried(value).is_empty()
        });
        // The client certificate is for the origin the node names.
        if !hop.secrets.is_empty() {
            return Err(format!(
                "a redirect to {} would present the client certificate to another host; it was not followed",
                next.origin().ascii_serialization()
            ));
        }
        if hop.body.as_deref().is_some_and(|body| !masker.carried(&String::from_utf8_lossy(body)).is_empty()) {
            return Err(format!(
                "a redirect to {} would resend a secret in the body to another host; it was not followed",
                next.origin().ascii_serialization()
            ));
        }
    }
    hop.url = next;
    Ok(hop)
}

/// The secrets a request carries in its URL, headers, body or TLS handshake.
fn carried<'m>(
    masker: &'m Masker,
    url: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
    secrets: &'m [String],
) -> Vec<&'m str> {
    let mut names = masker.carried(url);
    let body = body.map(String::from_utf8_lossy);
    for name in secrets {
        if !names.contains(&name.as_str()) {
            names.push(name);
        }
    }
    for text in headers.iter().map(|(_, v)| v.as_str()).chain(body.as_deref()) {
        for name in masker.carried(text) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// A secret without a host list goes only where the stored flow points: not to a host a launch variable chose.
fn check_launch_hosts(url: &Url, outgoing: &Outgoing, rules: &Rules<'_>, masker: &Masker) -> Result<(), String> {
    let untainted = outgoing.untainted_url.as_deref().and_then(|u| Url::parse(u).ok());
    let same_place = untainted.is_some_and(|u| u.origin() == url.origin());
    if same_place {
        return Ok(());
    }
    let names = carried(masker, &outgoing.url, &outgoing.headers, outgoing.body.as_deref(), &outgoing.secrets);
    match names.iter().find(|name| !rules.secret_hosts.contains_key(**name)) {
        Some(name) => Err(format!(
            "the request would send secret `{name}` to {}, a host a launch variable chose; secrets go only to hosts \
             the flow and its environment name, or to the hosts the secret allows",
            url.host_str().unwrap_or("?")
        )),
        None => Ok(()),
    }
}

/// A secret that lists hosts goes only to those (`api.example.com`, or `*.example.com` for its subdomains).
fn check_allowed_hosts(hop: &Hop, rules: &Rules<'_>, masker: &Masker) -> Result<(), String> {
    let host = hop.url.host_str().unwrap_or_default().to_ascii_lowercase();
    for name in carried(masker, hop.url.as_str(), &hop.headers, hop.body.as_deref(), &hop.secrets) {
        let Some(allowed) = rules.secret_hosts.get(name) else { continue };
        if !allowed.iter().any(|pattern| host_matches(&host, pattern)) {
            return Err(format!(
                "the request would send secret `{name}` to {host}, which is not among its allowed hosts"
            ));
        }
    }
    Ok(())
}

/// `api.example.com` matches itself; `*.example.com` matches every subdomain of example.com.
pub fn host_matches(host: &str, pattern: &str) -> bool {
    let pattern = pattern.trim().to_ascii_lowercase();
    match pattern.strip_prefix("*.") {
        Some(domain) => host.strip_suffix(domain).is_some_and(|rest| rest.ends_with('.') && rest.len() > 1),
        None => host == pattern,
    }
}

/// A transport error in a sentence, without the URL (which may hold a secret the masker hides anyway).
fn describe(error: &reqwest::Error) -> String {
    if let Some(refused) = refusal(error) {
        return refused.to_string();
    }
    let kind = if error.is_connect() {
        "could not connect"
    } else if error.is_timeout() {
        "timed out"
    } else if error.is_body() || error.is_decode() {
        "the response body could not be read"
    } else {
        "the request failed"
    };
    let mut source = std::error::Error::source(error);
    let mut detail = String::new();
    while let Some(cause) = source {
        detail = cause.to_string();
        source = cause.source();
    }
    if detail.is_empty() { kind.to_owned() } else { format!("{kind}: {detail}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns_match_hosts_and_subdomains() {
        assert!(host_matches("api.example.com", "api.example.com"));
        assert!(host_matches("api.example.com", "API.example.com"));
        assert!(host_matches("eu.api.example.com", "*.example.com"));
        assert!(!host_matches("example.com", "*.example.com"));
        assert!(!host_matches("evilexample.com", "*.example.com"));
        assert!(!host_matches("api.example.com.evil", "api.example.com"));
    }
}
