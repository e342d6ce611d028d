//! The cookie jar of one run (#54): `Set-Cookie` answers kept per domain and path as browsers keep them
//! (RFC 6265: host-only unless `Domain` names a parent the host is in, default path from the request's, `Secure`
//! only over HTTPS, `Max-Age` before `Expires`, a past expiry deletes), sent on the run's later requests. Bounded:
//! a cookie's size, the count kept. Values never leave the engine but in the `Cookie` header itself: results show
//! them as `***`.

use reqwest::Url;
use std::time::{Duration, Instant};

/// Cookies a jar keeps at most (the oldest go first).
const MAX_COOKIES: usize = 300;
/// Largest cookie kept (name and value together), as browsers bound it.
const MAX_COOKIE_BYTES: usize = 4096;

#[derive(Debug, Clone)]
struct Cookie {
    name: String,
    value: String,
    domain: String,
    host_only: bool,
    path: String,
    secure: bool,
    expires: Option<Instant>,
}

/// The cookies one run has been given.
#[derive(Debug, Default)]
pub struct Jar {
    cookies: Vec<Cookie>,
}

/// The path a cookie without `Path` gets: the request path up to its last `/` (RFC 6265 5.1.4).
fn default_path(url: &Url) -> String {
    let path = url.path();
    match path.rfind('/') {
        Some(0) | None => "/".to_owned(),
        Some(at) => path[..at].to_owned(),
    }
}

fn path_matches(request: &str, cookie: &str) -> bool {
    request == cookie
        || (request.starts_with(cookie) && (cookie.ends_with('/') || request[cookie.len()..].starts_with('/')))
}

fn domain_matches(host: &str, domain: &str) -> bool {
    host == domain
        || (host.ends_with(domain)
            && host[..host.len() - domain.len()].ends_with('.')
            && host.parse::<std::net::IpAddr>().is_err())
}

impl Jar {
    /// The `Cookie` header value for a request to `url`, if any cookie applies (longer paths first).
    pub fn header_for(&mut self, url: &Url) -> Option<String> {
        let now = Instant::now();
        self.cookies.retain(|c| c.expires.is_none_or(|at| at > now));
        let host = url.host_str()?.to_ascii_lowercase();
        let mut found: Vec<&Cookie> = self
            .cookies
            .iter()
            .filter(|c| if c.host_only { host == c.domain } else { domain_matches(&host, &c.domain) })
            .filter(|c| path_matches(url.path(), &c.path))
            .filter(|c| !c.secure || url.scheme() == "https")
            .collect();
        if found.is_empty() {
            return None;
        }
        found.sort_by(|a, b| b.path.len().cmp(&a.path.len()));
        let pairs: Vec<String> = found.iter().map(|c| format!("{}={}", c.name, c.value)).collect();
        Some(pairs.join("; "))
    }

    /// Keeps (or deletes) what one `Set-Cookie` value of a response from `url` says.
    pub fn store(&mut self, url: &Url, header: &str) {
        let Some(host) = url.host_str().map(str::to_ascii_lowercase) else { return };
        let mut pieces = header.split(';');
        let Some((name, value)) = pieces.next().and_then(|pair| pair.split_once('=')) else { return };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() || name.len() + value.len() > MAX_COOKIE_BYTES {
            return;
        }
        let mut cookie = Cookie {
            name: name.to_owned(),
            value: value.to_owned(),
            domain: host.clone(),
            host_only: true,
            path: default_path(url),
            secure: false,
            expires: None,
        };
        let mut max_age: Option<i64> = None;
        let mut expires: Option<chrono::DateTime<chrono::FixedOffset>> = None;
        for attribute in pieces {
            let (key, val) = attribute.split_once('=').unwrap_or((attribute, ""));
            let (key, val) = (key.trim().to_ascii_lowercase(), val.trim());
            match key.as_str() {
                "domain" if !val.is_empty() => {
                    let domain = val.trim_start_matches('.').to_ascii_lowercase();
                    // A cookie for another site, or for a whole top-level domain, is refused.
                    if !domain_matches(&host, &domain) || !domain.contains('.') {
                        return;
                    }
                    cookie.host_only = false;
                    cookie.domain = domain;
                }
                "path" if val.starts_with('/') => val.clone_into(&mut cookie.path),
                "secure" => cookie.secure = true,
                "max-age" => max_age = val.parse().ok(),
                "expires" => expires = chrono::DateTime::parse_from_rfc2822(&val.replace('-', " ")).ok(),
                _ => {}
            }
        }
        let now = Instant::now();
        let gone = match (max_age, expires) {
            (Some(seconds), _) if seconds <= 0 => true,
            (Some(seconds), _) => {
                cookie.expires = now.checked_add(Duration::from_secs(seconds.unsigned_abs()));
                false
            }
            (None, Some(at)) => {
                let left = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
                match left.to_std() {
                    Ok(left) if !left.is_zero() => {
                        cookie.expires = now.checked_add(left);
                        false
                    }
                    _ => true,
                }
            }
            (None, None) => false,
        };
        self.cookies.retain(|c| !(c.name == cookie.name && c.domain == cookie.domain && c.path == cookie.path));
        if gone {
            return;
        }
        if self.cookies.len() >= MAX_COOKIES {
            self.cookies.remove(0);
        }
        self.cookies.push(cookie);
    }
}

/// A `Set-Cookie` value as results show it: the value hidden, the attributes kept.
pub fn masked_set_cookie(header: &str) -> String {
    let (pair, attributes) = header.split_once(';').map_or((header, None), |(p, a)| (p, Some(a)));
    let name = pair.split_once('=').map_or(pair, |(name, _)| name).trim();
    match attributes {
        Some(attributes) => format!("{name}=***;{attributes}"),
        None => format!("{name}=***"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).expect("url")
    }

    #[test]
    fn cookies_go_back_to_their_host_and_path_only() {
        let mut jar = Jar::default();
        jar.store(&url("https://api.example.com/auth/login"), "sid=abc; Path=/; HttpOnly");
        jar.store(&url("https://api.example.com/auth/login"), "step=2");
        jar.store(&url("https://api.example.com/"), "wide=1; Domain=example.com");
        jar.store(&url("https://api.example.com/"), "evil=1; Domain=other.com");
        jar.store(&url("https://api.example.com/"), "tld=1; Domain=com");
        jar.store(&url("https://api.example.com/"), "safe=1; Secure");
        assert_eq!(jar.header_for(&url("https://api.example.com/me")).as_deref(), Some("sid=abc; wide=1; safe=1"));
        assert_eq!(jar.header_for(&url("http://api.example.com/auth/x")).as_deref(), Some("step=2; sid=abc; wide=1"));
        assert_eq!(jar.header_for(&url("https://www.example.com/")).as_deref(), Some("wide=1"));
        assert_eq!(jar.header_for(&url("https://other.com/")), None);
        jar.store(&url("https://api.example.com/"), "sid=gone; Path=/; Max-Age=0");
        jar.store(
            &url("https://api.example.com/"),
            "wide=x; Domain=example.com; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
        );
        assert_eq!(jar.header_for(&url("https://api.example.com/me")).as_deref(), Some("safe=1"));
        assert_eq!(masked_set_cookie("sid=abc; Path=/"), "sid=***; Path=/");
    }
}
