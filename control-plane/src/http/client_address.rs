//! The client's address: the connection's peer, or, when the peer is a trusted proxy (`--trusted-proxies`), the
//! address that proxy and those behind it say they received the request from, in the one header the operator's
//! proxy writes (`--forwarded-header`: `X-Forwarded-For` by default, or `Forwarded`'s `for=`), read from the right:
//! the first address that is not a trusted proxy. The other header is never read: proxies pass a header they do
//! not write through untouched, so a client could name its own address in it. Headers from any other peer are
//! ignored. Budgets key IPv6 clients by their /64, which one client holds whole.

use crate::error::ApiError;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// The header a trusted proxy writes the client into.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, ...` (nginx, HAProxy, cloud load balancers, Caddy, Traefik).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for=proxy1`.
    Forwarded,
}

/// Networks whose forwarding header is believed, and which header that is.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Arc<[(IpAddr, u8)]>, ForwardedHeader);

impl TrustedProxies {
    /// Parses a comma-separated list of addresses and CIDR blocks (`10.0.0.0/8, ::1, 192.168.1.5`).
    pub fn parse(list: &str) -> Result<Self, String> {
        let parse_one = |item: &str| -> Result<(IpAddr, u8), String> {
            let (address, prefix) = item.split_once('/').map_or((item, None), |(a, p)| (a, Some(p)));
            let address: IpAddr =
                address.trim().parse().map_err(|_| format!("`{item}` is not an IP address or CIDR block"))?;
            let longest = if address.is_ipv4() { 32 } else { 128 };
            let prefix = match prefix {
                Some(p) => p.trim().parse::<u8>().ok().filter(|p| *p <= longest),
                None => Some(longest),
            };
            let prefix = prefix.ok_or_else(|| format!("`{item}`: the prefix length must be 0 to {longest}"))?;
            // An IPv4-mapped network is its IPv4 network (peers are compared as IPv4).
            match address {
                IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => {
                    match (v6.to_ipv4_mapped(), prefix.checked_sub(96)) {
                        (Some(v4), Some(prefix)) => Ok((IpAddr::V4(v4), prefix)),
                        _ => Err(format!("`{item}`: an IPv4-mapped network needs a prefix of 96 to 128")),
                    }
                }
                _ => Ok((address, prefix)),
            }
        };
        let items = list.split(',').map(str::trim).filter(|s| !s.is_empty());
        Ok(Self(items.map(parse_one).collect::<Result<Vec<_>, _>>()?.into(), ForwardedHeader::default()))
    }

    /// These proxies, writing the client into `header`.
    pub fn reading(self, header: ForwardedHeader) -> Self {
        Self(self.0, header)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, address: IpAddr) -> bool {
        let address = canonical(address);
        self.0.iter().any(|(network, prefix)| in_network(address, canonical(*network), *prefix))
    }

    /// The client behind `peer`: `peer` itself unless it is trusted, else the rightmost forwarded address that
    /// is not a trusted proxy (the leftmost when all are).
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.contains(peer) {
            return peer;
        }
        let forwarded = forwarded_for(headers, self.1);
        let mut chain = forwarded.iter().rev();
        let mut last = None;
        for address in chain.by_ref() {
            if !self.contains(*address) {
                return *address;
            }
            last = Some(*address);
        }
        last.unwrap_or(peer)
    }
}

/// IPv4-mapped IPv6 addresses as IPv4.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

fn in_network(address: IpAddr, network: IpAddr, prefix: u8) -> bool {
    let mask = |bits: u32, prefix: u8| if prefix == 0 { 0 } else { u128::MAX << (bits - u32::from(prefix)) };
    match (address, network) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let m = mask(32, prefix) as u32;
            u32::from(a) & m == u32::from(n) & m
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let m = mask(128, prefix);
            u128::from(a) & m == u128::from(n) & m
        }
        _ => false,
    }
}

/// The addresses a request passed through, first hop first, from the one header the proxies write (`Forwarded`'s
/// `for=`, or `X-Forwarded-For`). Anything unparsable (obfuscated identifiers, `unknown`) is skipped.
fn forwarded_for(headers: &HeaderMap, header: ForwardedHeader) -> Vec<IpAddr> {
    let values = |name: &str| headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>();
    if header == ForwardedHeader::Forwarded {
        let forwarded = values("forwarded");
        let elements = forwarded.into_iter().flat_map(|v| v.split(','));
        let fors = elements.filter_map(|element| {
            element.split(';').find_map(|pair| {
                let (name, value) = pair.trim().split_once('=')?;
                name.trim().eq_ignore_ascii_case("for").then(|| value.trim().trim_matches('"').to_owned())
            })
        });
        return fors.filter_map(|node| parse_node(&node)).collect();
    }
    let listed = values("x-forwarded-for").into_iter().flat_map(|v| v.split(','));
    listed.filter_map(|item| parse_node(item.trim())).collect()
}

/// `192.0.2.1`, `192.0.2.1:4711`, `[2001:db8::1]`, `[2001:db8::1]:4711` or a bare IPv6 address.
fn parse_node(node: &str) -> Option<IpAddr> {
    if let Some(rest) = node.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    node.parse::<IpAddr>().ok().or_else(|| node.parse::<SocketAddr>().ok().map(|s| s.ip()))
}

/// The key budgets count a client under: an IPv4 address, or an IPv6 address's /64.
pub fn budget_key(address: IpAddr) -> IpAddr {
    match canonical(address) {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & (u128::MAX << 64))),
        v4 => v4,
    }
}

/// The request's client address (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddress(pub IpAddr);

/// A router state that knows which peers may name the client.
pub trait WithTrustedProxies {
    fn trusted_proxies(&self) -> &TrustedProxies;
}

impl<S: WithTrustedProxies + Send + Sync> FromRequestParts<S> for ClientAddress {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
        let peer = peer.ok_or_else(|| ApiError::internal_because("the listener gave no peer address"))?;
        Ok(Self(state.trusted_proxies().client(peer, &parts.headers)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(axum::http::HeaderName::from_bytes(name.as_bytes()).expect("name"), value.parse().expect("v"));
        }
        map
    }

    #[test]
    fn only_trusted_peers_forward_and_the_rightmost_untrusted_address_is_the_client() {
        let trusted = TrustedProxies::parse("10.0.0.0/8, 127.0.0.1, fd00::/8").expect("parse");
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let spoofed = headers(&[("x-forwarded-for", "6.6.6.6, 203.0.113.9, 10.1.2.3")]);
        assert_eq!(trusted.client(ip("198.51.100.7"), &spoofed), ip("198.51.100.7"), "an untrusted peer is the client");
        assert_eq!(trusted.client(ip("127.0.0.1"), &spoofed), ip("203.0.113.9"), "the spoofed left end is ignored");
        let forwarded = headers(&[("forwarded", "for=192.0.2.60;proto=http, for=\"[2001:db8::7]:4711\"")]);
        // A header the proxy does not write is the client's own claim: never read.
        assert_eq!(trusted.client(ip("10.9.9.9"), &forwarded), ip("10.9.9.9"), "Forwarded is not read by default");
        let rfc = trusted.clone().reading(ForwardedHeader::Forwarded);
        let both = headers(&[("forwarded", "for=192.0.2.61"), ("x-forwarded-for", "6.6.6.6")]);
        assert_eq!(rfc.client(ip("10.9.9.9"), &both), ip("192.0.2.61"), "only the named header");
        assert_eq!(rfc.client(ip("10.9.9.9"), &forwarded), ip("2001:db8::7"));
        assert_eq!(
            trusted.client(ip("::ffff:127.0.0.1"), &headers(&[])),
            ip("::ffff:127.0.0.1"),
            "no header: the peer"
        );
        assert_eq!(trusted.client(ip("127.0.0.1"), &headers(&[("x-forwarded-for", "10.0.0.1")])), ip("10.0.0.1"));
        assert!(TrustedProxies::parse("10.0.0.0/33").is_err() && TrustedProxies::parse("proxy").is_err());
        // An IPv4-mapped network is its IPv4 network: /104 is 10.0.0.0/8, never a prefix past 32 bits.
        let mapped = TrustedProxies::parse("::ffff:10.0.0.0/104").expect("mapped");
        assert!(mapped.contains(ip("10.1.2.3")) && !mapped.contains(ip("11.0.0.1")));
        assert!(TrustedProxies::parse("::ffff:10.0.0.0/64").is_err());
        assert!(TrustedProxies::default().is_empty() && !TrustedProxies::default().contains(ip("127.0.0.1")));
    }

    #[test]
    fn ipv6_clients_are_budgeted_by_their_64() {
        let a = budget_key("2001:db8:1:2:aaaa::1".parse().expect("ip"));
        let b = budget_key("2001:db8:1:2:bbbb::2".parse().expect("ip"));
        let c = budget_key("2001:db8:1:3::1".parse().expect("ip"));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(budget_key("192.0.2.1".parse().expect("ip")), "192.0.2.1".parse::<IpAddr>().expect("ip"));
    }
}
