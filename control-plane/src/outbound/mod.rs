//! Requests the server itself makes (webhook replay; later OpenAPI import and JWKS): only http(s), and never to
//! loopback, private, link-local or other non-public addresses unless the operator allows private targets. The
//! checked address is the one connected to, so DNS cannot swap it afterwards.

use crate::http::error::{ApiError, ApiResult};
use reqwest::Url;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Whether an address is reachable on the public internet.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
                || (a == 198 && (b == 18 || b == 19)) // benchmarking
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local
                || (first & 0xffc0) == 0xfe80 // link-local
                || first == 0x2001 && v6.segments()[1] == 0x0db8) // documentation
        }
    }
}

/// A client for one request to `url`, pinned to an address that passed the check.
pub async fn client_for(url: &Url, allow_private: bool, timeout: Duration) -> ApiResult<reqwest::Client> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ApiError::invalid("only http and https targets are allowed"));
    }
    let host = url.host_str().ok_or_else(|| ApiError::invalid("the target URL has no host"))?.to_owned();
    let port = url.port_or_known_default().unwrap_or(80);
    let lookup = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((lookup.as_str(), port))
        .await
        .map_err(|_| ApiError::invalid(format!("cannot resolve `{host}`")))?
        .collect();
    let chosen = addresses.iter().copied().find(|a| allow_private || is_public(a.ip())).ok_or_else(|| {
        ApiError::invalid(format!(
            "`{host}` resolves to a loopback, private or link-local address; the server does not send requests \
                 there (an operator can allow it with --allow-private-targets)"
        ))
    })?;
    reqwest::Client::builder()
        .resolve(&lookup, chosen)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .build()
        .map_err(|e| {
            tracing::error!(error = %e, "building an outbound client failed");
            ApiError::internal()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "224.0.0.1",
        ] {
            assert!(!is_public(ip.parse().expect("ip")), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(is_public(ip.parse().expect("ip")), "{ip}");
        }
    }
}
