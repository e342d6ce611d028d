//! The one guarded outbound HTTP client: every request the server makes (the embedded runner's flows, webhook
//! replay, OpenAPI import, JWKS) goes through it. Names are resolved by a resolver that keeps only the addresses
//! the policy allows, and the connection goes to one of those (so DNS cannot swap the address after the check);
//! IP-literal URLs are checked before sending; redirects are not followed by the client (callers that follow
//! them check every hop with [`Guard::check_url`]); no proxy is used unless the options ask for one (installed
//! runners and `hookflow run`, never the server); bodies are read within a size limit.

use hookflow_shared::api::runners::NetworkPolicy;
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// What an address is, for the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// Reachable on the public internet.
    Public,
    /// Loopback, private ranges, unique-local, shared (CGNAT), site-local: the operator's own networks.
    Private,
    /// Link-local, where cloud metadata services live (169.254.169.254, fe80::/10, fd00:ec2::254), and the
    /// metadata addresses outside it (Alibaba Cloud's 100.100.100.200).
    LinkLocal,
    /// Nothing should be sent there: unspecified, broadcast, multicast, documentation, reserved.
    Unusable,
}

/// Classifies an address, looking through the IPv6 forms that carry an IPv4 address (mapped, compatible, 6to4
/// `2002::/16`). NAT64 `64:ff9b::/32` (the well-known `/96` and the local-use `64:ff9b:1::/48`, whose translator
/// may embed the IPv4 address elsewhere) is public only when its last 32 bits are a public IPv4 address, and
/// unusable otherwise; Teredo `2001::/32` is unusable (its server and client addresses are the sender's choice).
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            if s[..2] == [0x64, 0xff9b] {
                let tail = Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
                return match classify_v4(tail) {
                    AddressClass::Public => AddressClass::Public,
                    _ => AddressClass::Unusable,
                };
            }
            if s[..2] == [0x2001, 0] {
                return AddressClass::Unusable;
            }
            match embedded_v4(v6) {
                Some(v4) => classify_v4(v4),
                None => classify_v6(v6),
            }
        }
    }
}

/// Alibaba Cloud's metadata service, inside the shared (CGNAT) range the private policy allows.
const ALIBABA_METADATA: Ipv4Addr = Ipv4Addr::new(100, 100, 100, 200);

fn classify_v4(v4: Ipv4Addr) -> AddressClass {
    let [a, b, c, _] = v4.octets();
    if v4.is_link_local() || v4 == ALIBABA_METADATA {
        AddressClass::LinkLocal
    } else if v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || a == 0
        || a >= 240
        || (a == 198 && (b == 18 || b == 19))
        || (a == 192 && b == 0 && c == 0)
    {
        // 192.0.0.0/24 holds protocol assignments (DS-Lite, NAT64 discovery), 198.18.0.0/15 benchmarking.
        AddressClass::Unusable
    } else if v4.is_loopback() || v4.is_private() || (a == 100 && (64..128).contains(&b)) {
        AddressClass::Private
    } else {
        AddressClass::Public
    }
}

fn classify_v6(v6: Ipv6Addr) -> AddressClass {
    let first = v6.segments()[0];
    if (first & 0xffc0) == 0xfe80 {
        AddressClass::LinkLocal
    } else if v6.is_unspecified() || v6.is_multicast() || (first == 0x2001 && v6.segments()[1] == 0x0db8) {
        AddressClass::Unusable
    } else if v6.segments() == [0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254] {
        // The IPv6 form of the EC2 metadata service.
        AddressClass::LinkLocal
    } else if v6.is_loopback() || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfec0 {
        // Loopback, unique-local fc00::/7, deprecated site-local fec0::/10.
        AddressClass::Private
    } else {
        AddressClass::Public
    }
}

/// The IPv4 address an IPv6 address stands for: mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, or 6to4
/// `2002:aabb:ccdd::` (NAT64 is [`classify`]'s).
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let tail = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[..6] == [0, 0, 0, 0, 0, 0] && !(s[6] == 0 && s[7] <= 1) {
        return Some(tail(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(tail(s[1], s[2]));
    }
    None
}

/// Whether `policy` lets a request go to `ip`.
pub fn allows(policy: NetworkPolicy, ip: IpAddr) -> bool {
    match (policy, classify(ip)) {
        (_, AddressClass::Unusable) => false,
        (NetworkPolicy::Any, _) => true,
        (NetworkPolicy::Private, class) => class != AddressClass::LinkLocal,
        (NetworkPolicy::Public, class) => class == AddressClass::Public,
    }
}

/// Why a request was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error("only http and https URLs can be requested")]
    Scheme,
    #[error("the URL has no host")]
    NoHost,
    #[error("`{host}` is {what}; requests there are not allowed for this organization")]
    Refused { host: String, what: &'static str },
    #[error("the response body is larger than {0} bytes")]
    TooLarge(usize),
}

fn describe(class: AddressClass) -> &'static str {
    match class {
        AddressClass::Public => "a public address",
        AddressClass::Private => "a loopback or private address",
        AddressClass::LinkLocal => "a link-local or cloud metadata address",
        AddressClass::Unusable => "a reserved address",
    }
}

/// The policy, for a client or for checks by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guard {
    pub policy: NetworkPolicy,
}

impl Guard {
    pub fn new(policy: NetworkPolicy) -> Self {
        Self { policy }
    }

    /// Checks a URL's scheme and, when its host is an address, the address. Names are checked when they are
    /// resolved for the connection.
    pub fn check_url(&self, url: &Url) -> Result<(), GuardError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(GuardError::Scheme);
        }
        let ip = match url.host().ok_or(GuardError::NoHost)? {
            url::Host::Ipv4(ip) => IpAddr::V4(ip),
            url::Host::Ipv6(ip) => IpAddr::V6(ip),
            url::Host::Domain(_) => return Ok(()),
        };
        if allows(self.policy, ip) {
            Ok(())
        } else {
            Err(GuardError::Refused { host: ip.to_string(), what: describe(classify(ip)) })
        }
    }

    /// A client for this policy: guarded resolution, no redirects followed, no proxy unless `options.proxy`.
    pub fn client(&self, options: &ClientOptions) -> reqwest::Client {
        let builder = match &options.tls {
            Some(config) => reqwest::Client::builder().tls_backend_preconfigured(config.clone()),
            None => crate::tls::shared(reqwest::Client::builder()),
        };
        let builder = builder
            .user_agent(options.user_agent.clone())
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(options.connect_timeout);
        let mut builder = match &options.proxy {
            Proxy::None => builder.no_proxy(),
            // reqwest reads HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY (either case) as curl does.
            Proxy::FromEnvironment => builder,
            Proxy::Url(url) => match reqwest::Proxy::all(url.as_str()) {
                Ok(proxy) => builder.no_proxy().proxy(proxy.no_proxy(reqwest::NoProxy::from_env())),
                Err(e) => {
                    tracing::error!(error = %e, "the proxy URL is not usable; requests go direct");
                    builder.no_proxy()
                }
            },
        };
        if self.policy != NetworkPolicy::Any {
            builder = builder.dns_resolver(Arc::new(GuardedResolver { policy: self.policy }));
        }
        if let Some(timeout) = options.timeout {
            builder = builder.timeout(timeout);
        }
        // Building fails only when the TLS backend cannot start; the default client has the same backend.
        builder.build().unwrap_or_else(|e| {
            tracing::error!(error = %e, "the guarded client could not be built; nothing will be sent");
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .dns_resolver(Arc::new(GuardedResolver { policy: NetworkPolicy::Public }))
                .build()
                .unwrap_or_default()
        })
    }
}

/// Which proxy a client uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Proxy {
    /// None, whatever the environment says (the server and its embedded runner).
    #[default]
    None,
    /// `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY` as curl reads them.
    FromEnvironment,
    /// This proxy for every request (`--proxy`), but for the hosts `NO_PROXY` names.
    Url(String),
}

/// How a guarded client behaves beyond its policy.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub user_agent: String,
    pub connect_timeout: Duration,
    /// A whole-request limit, for one-shot callers (the engine times each node itself).
    pub timeout: Option<Duration>,
    pub proxy: Proxy,
    /// A TLS configuration of its own (a client certificate) instead of the process's shared one.
    pub tls: Option<rustls::ClientConfig>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            user_agent: concat!("hookflow/", env!("CARGO_PKG_VERSION")).to_owned(),
            connect_timeout: Duration::from_secs(10),
            timeout: None,
            proxy: Proxy::None,
            tls: None,
        }
    }
}

/// Resolves with the system resolver and keeps only the addresses the policy allows.
#[derive(Debug)]
struct GuardedResolver {
    policy: NetworkPolicy,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found.iter().copied().filter(|a| allows(policy, a.ip())).collect();
            if allowed.is_empty() {
                let what = found.first().map_or("unresolvable", |a| describe(classify(a.ip())));
                return Err(Box::new(GuardError::Refused { host, what }) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// Reads a response body, stopping at `max` bytes.
pub async fn read_limited(mut response: reqwest::Response, max: usize) -> Result<bytes::Bytes, ReadError> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(ReadError::Guard(GuardError::TooLarge(max)));
    }
    let mut body = bytes::BytesMut::new();
    while let Some(chunk) = response.chunk().await.map_err(ReadError::Transport)? {
        if body.len() + chunk.len() > max {
            return Err(ReadError::Guard(GuardError::TooLarge(max)));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0}")]
    Guard(GuardError),
    #[error("the response body could not be read: {0}")]
    Transport(reqwest::Error),
}

/// The guard's refusal inside a transport error, if that is what stopped a request.
pub fn refusal(error: &reqwest::Error) -> Option<GuardError> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<GuardError>() {
            return Some(refused.clone());
        }
        source = cause.source();
    }
    None
}

/// Headers as (name, value) pairs in order, repeats kept, values read lossily as UTF-8.
pub fn header_pairs(headers: &reqwest::header::HeaderMap) -> Vec<(String, String)> {
    headers.iter().map(|(n, v)| (n.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(ip: &str) -> AddressClass {
        classify(ip.parse().expect("an address"))
    }

    #[test]
    fn addresses_are_classified_through_their_translated_forms() {
        for ip in ["127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "::1", "fd00::1", "fec0::1"] {
            assert_eq!(class(ip), AddressClass::Private, "{ip}");
        }
        for ip in ["::ffff:127.0.0.1", "::127.0.0.1", "2002:7f00:1::", "100.100.100.199", "100.127.255.255"] {
            assert_eq!(class(ip), AddressClass::Private, "{ip}");
        }
        for ip in ["169.254.169.254", "fe80::1", "fd00:ec2::254", "::ffff:169.254.169.254", "100.100.100.200"] {
            assert_eq!(class(ip), AddressClass::LinkLocal, "{ip}");
        }
        for ip in ["::ffff:100.100.100.200", "2002:6464:64c8::"] {
            assert_eq!(class(ip), AddressClass::LinkLocal, "{ip}");
        }
        for ip in ["0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "192.0.0.170", "198.18.0.1", "2001:db8::1"] {
            assert_eq!(class(ip), AddressClass::Unusable, "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "2002:808:808::"] {
            assert_eq!(class(ip), AddressClass::Public, "{ip}");
        }
    }

    #[test]
    fn nat64_is_public_only_for_a_public_ipv4_tail_and_teredo_never() {
        // The well-known /96 and the local-use /48 (a translator may embed the IPv4 address elsewhere): only a
        // public tail passes, whatever the policy.
        for ip in ["64:ff9b::808:808", "64:ff9b:1::808:808", "64:ff9b:1:2:3:4:808:808", "64:ff9b:ffff::5db8:d822"] {
            assert_eq!(class(ip), AddressClass::Public, "{ip}");
        }
        for ip in [
            "64:ff9b::7f00:1",
            "64:ff9b::a00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::a00:1",
            "64:ff9b:1::7f00:1",
            "64:ff9b:1:a00:1::",
            "64:ff9b:1::6464:64c8",
            "64:ff9b::",
            "2001::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:0:ffff::",
        ] {
            assert_eq!(class(ip), AddressClass::Unusable, "{ip}");
            let ip: IpAddr = ip.parse().expect("an address");
            for policy in [NetworkPolicy::Public, NetworkPolicy::Private, NetworkPolicy::Any] {
                assert!(!allows(policy, ip), "{ip} under {policy:?}");
            }
        }
        // Neighbours of the refused ranges stay what they were.
        assert_eq!(class("2001:4860:4860::8888"), AddressClass::Public);
        assert_eq!(class("64:ff9a::a00:1"), AddressClass::Public);
    }

    #[test]
    fn alibaba_metadata_is_refused_under_the_public_and_private_policies() {
        let ip: IpAddr = "100.100.100.200".parse().expect("an address");
        assert!(!allows(NetworkPolicy::Public, ip));
        assert!(!allows(NetworkPolicy::Private, ip));
        assert!(allows(NetworkPolicy::Any, ip), "installed runners reach what their network reaches");
        assert!(allows(NetworkPolicy::Private, "100.100.100.201".parse().expect("an address")));
    }

    #[test]
    fn policies_allow_what_they_name() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("an address");
        assert!(allows(NetworkPolicy::Public, ip("8.8.8.8")));
        assert!(!allows(NetworkPolicy::Public, ip("127.0.0.1")));
        assert!(allows(NetworkPolicy::Private, ip("127.0.0.1")));
        assert!(!allows(NetworkPolicy::Private, ip("169.254.169.254")));
        assert!(allows(NetworkPolicy::Any, ip("169.254.169.254")));
        assert!(!allows(NetworkPolicy::Any, ip("0.0.0.0")));
    }

    #[test]
    fn urls_with_address_hosts_are_checked_before_sending() {
        let guard = Guard::new(NetworkPolicy::Public);
        for url in ["http://127.0.0.1/", "http://2130706433/", "http://[::ffff:127.0.0.1]/", "http://0x7f.1/"] {
            let url = Url::parse(url).expect("url");
            assert!(matches!(guard.check_url(&url), Err(GuardError::Refused { .. })), "{url}");
        }
        assert_eq!(guard.check_url(&Url::parse("file:///etc/passwd").expect("url")), Err(GuardError::Scheme));
        assert!(guard.check_url(&Url::parse("https://example.com/").expect("url")).is_ok());
    }
}
