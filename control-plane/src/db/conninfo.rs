//! libpq's connection strings, which sqlx reads only in part: the URL with several hosts
//! (`postgres://h1:5432,h2:5432/db?target_session_attrs=read-write`), the `host=`/`port=` lists in a URL's query,
//! and the keyword/value form (`host=a,b port=1,2 dbname=hookflow`). Each becomes a [`Target`]: the hosts in order,
//! what a session must be (`target_session_attrs`), and sqlx's options for each host. A string naming one host
//! and no session attributes is handed to sqlx as it is, as before.

use sqlx::postgres::PgConnectOptions;
use std::str::FromStr;

/// `target_session_attrs`: what a host must be for a session there (libpq 14's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAttrs {
    Any,
    ReadWrite,
    ReadOnly,
    Primary,
    Standby,
    PreferStandby,
}

impl SessionAttrs {
    pub fn parse(text: &str) -> Result<Self, String> {
        Ok(match text {
            "any" => Self::Any,
            "read-write" => Self::ReadWrite,
            "read-only" => Self::ReadOnly,
            "primary" => Self::Primary,
            "standby" => Self::Standby,
            "prefer-standby" => Self::PreferStandby,
            other => {
                return Err(format!(
                    "target_session_attrs `{other}`: use any, read-write, read-only, primary, standby or prefer-standby"
                ));
            }
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Any => "any",
            Self::ReadWrite => "read-write",
            Self::ReadOnly => "read-only",
            Self::Primary => "primary",
            Self::Standby => "standby",
            Self::PreferStandby => "prefer-standby",
        }
    }

    /// Whether a host in this state suits (`prefer-standby` takes any host; a standby first is the caller's
    /// order).
    pub fn accepts(self, role: HostRole) -> bool {
        match self {
            Self::Any | Self::PreferStandby => true,
            Self::ReadWrite => !role.read_only,
            Self::ReadOnly => role.read_only,
            Self::Primary => !role.in_recovery,
            Self::Standby => role.in_recovery,
        }
    }

    /// Whether a host's state must be asked before it is used.
    pub fn needs_check(self) -> bool {
        self != Self::Any
    }
}

/// What a host said it is: `pg_is_in_recovery()` and `transaction_read_only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostRole {
    pub in_recovery: bool,
    pub read_only: bool,
}

/// One host of a target: a name, an address or a socket directory, and its port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') && !self.host.starts_with(['/', '[']) {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Where a pool connects: hosts in order, each with its options, and what a session there must be.
#[derive(Debug, Clone)]
pub struct Target {
    /// Each host with the options of a connection to it.
    pub hosts: Vec<(Endpoint, PgConnectOptions)>,
    /// `target_session_attrs` when the string named it.
    pub attrs: Option<SessionAttrs>,
}

impl Target {
    /// One host, asked nothing: what sqlx alone would do.
    pub fn is_plain(&self) -> bool {
        self.hosts.len() == 1 && self.attrs.is_none()
    }

    /// A target of one set of options (the embedded cluster's, a test's pool).
    pub fn single(options: PgConnectOptions) -> Self {
        Self { hosts: vec![(endpoint_of(&options), options)], attrs: None }
    }
}

/// The host and port a set of options connects to (a socket directory stands for the host).
pub fn endpoint_of(options: &PgConnectOptions) -> Endpoint {
    let host = match options.get_socket() {
        Some(socket) => socket.display().to_string(),
        None => options.get_host().to_owned(),
    };
    Endpoint { host, port: options.get_port() }
}

/// Parses a libpq connection string: a `postgres://` or `postgresql://` URL, or keyword/value pairs. An error
/// never carries the string's password, nor any part of it (the start-up error is printed and logged).
pub fn parse(text: &str) -> Result<Target, String> {
    parse_unscrubbed(text).map_err(|message| scrub(text, &message))
}

fn parse_unscrubbed(text: &str) -> Result<Target, String> {
    let text = text.trim();
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        parse_url(text)
    } else if text.contains('=') {
        parse_url(&keywords_to_url(text)?)
    } else {
        Err("expected a postgres:// URL or keyword=value pairs (host=... port=... dbname=...)".into())
    }
}

/// Where a connection string may hold a password: a URL's user information (after `://`, up to the last `@`, past
/// its first `:`), and the value of a `password` keyword or query parameter. Guessed generously, since the string
/// is malformed when this is needed.
fn passwords(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some((_, rest)) = text.split_once("://")
        && let Some(at) = rest.rfind('@')
        && let Some((_, password)) = rest[..at].split_once(':')
    {
        found.push(password.to_owned());
    }
    for (at, _) in text.match_indices("password") {
        let value = text[at + "password".len()..].trim_start().trim_start_matches('=').trim_start();
        let end = value.find(|c: char| c.is_whitespace() || c == '&').unwrap_or(value.len());
        found.push(value[..end].trim_matches('\'').to_owned());
    }
    found.retain(|p| !p.is_empty());
    found
}

/// `message` without the passwords of `text`: with one present, every quoted piece of the input is replaced
/// (a malformed string is cut in places the parser did not mean, so a quoted "port" may be half a password), and
/// so is every run of four or more of a password's characters, decoded or not.
fn scrub(text: &str, message: &str) -> String {
    let secrets = passwords(text);
    if secrets.is_empty() {
        return message.to_owned();
    }
    let mut out = String::with_capacity(message.len());
    for (n, piece) in message.split('`').enumerate() {
        match n % 2 {
            0 => out.push_str(piece),
            _ => out.push_str("`[redacted]`"),
        }
    }
    for secret in &secrets {
        let decoded = percent_decode(secret).unwrap_or_else(|_| secret.clone());
        for form in [secret, &decoded] {
            let chars: Vec<char> = form.chars().collect();
            for width in (4..=chars.len()).rev() {
                for window in chars.windows(width) {
                    let piece: String = window.iter().collect();
                    if out.contains(&piece) {
                        out = out.replace(&piece, "[redacted]");
                    }
                }
            }
            if chars.len() < 4 && !form.is_empty() && out.contains(form.as_str()) {
                out = out.replace(form.as_str(), "[redacted]");
            }
        }
    }
    out
}

/// A URL's parts that libpq reads and sqlx does not.
#[derive(Debug, Default)]
struct UrlParts {
    scheme_and_user: String,
    path: String,
    kept_query: Vec<String>,
    hosts: Vec<(String, Option<String>)>,
    query_hosts: Option<Vec<String>>,
    query_ports: Option<Vec<String>>,
    attrs: Option<SessionAttrs>,
}

fn parse_url(url: &str) -> Result<Target, String> {
    let parts = split_url(url)?;
    let hosts = endpoints(&parts)?;
    if hosts.len() <= 1 && parts.attrs.is_none() {
        // One host and nothing to ask: sqlx reads the URL as it always did.
        let options = PgConnectOptions::from_str(url).map_err(|e| e.to_string())?;
        return Ok(Target::single(options));
    }
    let query = if parts.kept_query.is_empty() { String::new() } else { format!("?{}", parts.kept_query.join("&")) };
    let base_url = format!("{}localhost{}{query}", parts.scheme_and_user, parts.path);
    let base = PgConnectOptions::from_str(&base_url).map_err(|e| e.to_string())?;
    let default_port = base.get_port();
    let mut targets = Vec::with_capacity(hosts.len());
    for (host, port) in hosts {
        let port = match port {
            Some(port) => port,
            None => default_port,
        };
        let options = if host.starts_with('/') {
            base.clone().socket(&host).port(port)
        } else {
            base.clone().host(&host).port(port)
        };
        targets.push((Endpoint { host, port }, options));
    }
    Ok(Target { hosts: targets, attrs: parts.attrs })
}

/// Splits a URL into what sqlx may read and the hosts, ports and session attributes it may not.
fn split_url(url: &str) -> Result<UrlParts, String> {
    let (scheme, rest) = url.split_once("://").ok_or("expected postgres://")?;
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (user, host_list) = match authority.rfind('@') {
        Some(at) => (format!("{}@", &authority[..at]), &authority[at + 1..]),
        None => (String::new(), authority),
    };
    let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
    let mut parts =
        UrlParts { scheme_and_user: format!("{scheme}://{user}"), path: path.to_owned(), ..UrlParts::default() };
    if !host_list.is_empty() {
        for entry in host_list.split(',') {
            parts.hosts.push(split_host_port(entry)?);
        }
    }
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(value)?;
        match key {
            "host" | "hostaddr" => parts.query_hosts = Some(value.split(',').map(str::to_owned).collect()),
            "port" => parts.query_ports = Some(value.split(',').map(str::to_owned).collect()),
            "target_session_attrs" => parts.attrs = Some(SessionAttrs::parse(&value)?),
            _ => parts.kept_query.push(pair.to_owned()),
        }
    }
    Ok(parts)
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`, percent-decoded.
fn split_host_port(entry: &str) -> Result<(String, Option<String>), String> {
    if let Some(inner) = entry.strip_prefix('[') {
        let (host, after) = inner.split_once(']').ok_or_else(|| format!("`{entry}`: an IPv6 address lacks its `]`"))?;
        let port = after.strip_prefix(':').map(str::to_owned);
        if port.is_none() && !after.is_empty() {
            return Err(format!("`{entry}`: expected `:port` after the address"));
        }
        return Ok((host.to_owned(), port));
    }
    match entry.rsplit_once(':') {
        Some((host, port)) => Ok((percent_decode(host)?, Some(port.to_owned()))),
        None => Ok((percent_decode(entry)?, None)),
    }
}

/// The hosts with their ports, from the URL's authority or its `host=`/`port=` query lists (which win, as in
/// libpq, where a later setting overrides an earlier one).
fn endpoints(parts: &UrlParts) -> Result<Vec<(String, Option<u16>)>, String> {
    let mut hosts: Vec<(String, Option<String>)> = match &parts.query_hosts {
        Some(list) => list.iter().map(|h| (h.clone(), None)).collect(),
        None => parts.hosts.clone(),
    };
    if let Some(ports) = &parts.query_ports {
        if hosts.is_empty() {
            hosts = ports.iter().map(|_| ("localhost".to_owned(), None)).collect();
        }
        match ports.len() {
            1 => hosts.iter_mut().for_each(|(_, port)| *port = Some(ports[0].clone())),
            n if n == hosts.len() => {
                hosts.iter_mut().zip(ports).for_each(|((_, port), given)| *port = Some(given.clone()));
            }
            n => return Err(format!("{n} ports for {} hosts: name one port, or one for each host", hosts.len())),
        }
    }
    hosts
        .into_iter()
        .map(|(host, port)| {
            let port = match port.as_deref() {
                None | Some("") => None,
                Some(text) => Some(text.parse::<u16>().map_err(|_| format!("port `{text}` is not a port number"))?),
            };
            Ok((host, port))
        })
        .collect()
}

/// Keyword/value pairs as the URL they mean (values percent-encoded into its query).
fn keywords_to_url(text: &str) -> Result<String, String> {
    const KNOWN: &[&str] = &[
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "password",
        "sslmode",
        "sslrootcert",
        "sslcert",
        "sslkey",
        "application_name",
        "options",
        "target_session_attrs",
    ];
    // libpq settings sqlx has no use for: accepted and left out.
    const IGNORED: &[&str] = &["connect_timeout", "fallback_application_name", "keepalives", "client_encoding"];
    let mut query = Vec::new();
    for (key, value) in keyword_pairs(text)? {
        if IGNORED.contains(&key.as_str()) {
            continue;
        }
        if !KNOWN.contains(&key.as_str()) {
            return Err(format!("unknown connection setting `{key}`"));
        }
        let key = if key == "hostaddr" { "host".to_owned() } else { key };
        query.push(format!("{key}={}", percent_encode(&value)));
    }
    Ok(format!("postgres://?{}", query.join("&")))
}

/// `key = value` pairs; a value may be single-quoted, and `\` escapes the next character.
fn keyword_pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(format!("`{key}` has no `=value`"));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let quoted = chars.next_if_eq(&'\'').is_some();
        let mut value = String::new();
        loop {
            match chars.next() {
                Some('\\') => value.push(chars.next().ok_or("a `\\` ends the string")?),
                Some('\'') if quoted => break,
                Some(c) if !quoted && c.is_whitespace() => break,
                Some(c) => value.push(c),
                None if quoted => return Err(format!("the value of `{key}` lacks its closing quote")),
                None => break,
            }
        }
        pairs.push((key, value));
    }
}

fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3).ok_or_else(|| format!("`{text}`: a `%` is not followed by two digits"))?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| format!("`{text}`: `%{hex}` is not an escape"))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{text}` is not UTF-8 once decoded"))
}

fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~,/".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
#[path = "conninfo_tests.rs"]
mod tests;
