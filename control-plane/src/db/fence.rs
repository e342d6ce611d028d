//! Cutting every connection of this process to a database host that stopped answering: a primary that froze
//! (SIGSTOP, a hung disk) while its kernel still acknowledges keeps every statement sent to it waiting, with no
//! error ever coming (its kernel answers TCP keepalives, and acknowledges what is sent, so neither keepalive nor
//! TCP_USER_TIMEOUT would end them either). sqlx 0.9 opens its sockets itself and gives no access to them (nor to
//! their options, and this workspace allows no unsafe code to reach them by number), so the follower's watch, which
//! asks the host every second on a connection of its own, decides when a host has been silent too long
//! (`--db-tcp-user-timeout-ms`) and this module shuts down (`shutdown(2)`) every TCP socket of the process whose
//! peer is that host: each statement waiting there fails at once (the request answers 503 with `Retry-After`), and
//! the pool's slots come back (sqlx's ping of a returned connection no longer waits forever). Linux (`/proc`)
//! only; elsewhere nothing is cut and the deadlines of the pool and the writers are what bound a wait.

use std::net::SocketAddr;

/// Shuts down every TCP socket of this process connected to one of `peers`; how many. A socket whose number was
/// reused between the look and the cut is checked again just before (its peer read again), so another connection
/// is not cut unless it was opened to the same host in that instant.
pub fn cut(peers: &[SocketAddr]) -> usize {
    if peers.is_empty() {
        return 0;
    }
    let mut cut = 0;
    for fd in sockets() {
        if peer_of(fd).is_some_and(|peer| peers.contains(&peer))
            && nix::sys::socket::shutdown(fd, nix::sys::socket::Shutdown::Both).is_ok()
        {
            cut += 1;
        }
    }
    cut
}

/// The addresses `host:port` stands for (an IP address is itself; a name is resolved).
pub async fn addresses(host: &str, port: u16) -> Vec<SocketAddr> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        return vec![SocketAddr::new(ip, port)];
    }
    if host.starts_with('/') {
        return Vec::new();
    }
    match tokio::net::lookup_host((bare, port)).await {
        Ok(found) => found.map(canonical).collect(),
        Err(_) => Vec::new(),
    }
}

/// An IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`) as the IPv4 address it is.
fn canonical(address: SocketAddr) -> SocketAddr {
    match address {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), v6.port()),
            None => address,
        },
        v4 => v4,
    }
}

/// The numbers of this process's open sockets.
#[cfg(target_os = "linux")]
fn sockets() -> Vec<std::os::fd::RawFd> {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            // A string's prefix: as a path, `socket:[123]` is one component, never "starting with" `socket:`.
            std::fs::read_link(entry.path()).is_ok_and(|target| target.to_string_lossy().starts_with("socket:"))
        })
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect()
}

#[cfg(not(target_os = "linux"))]
fn sockets() -> Vec<std::os::fd::RawFd> {
    Vec::new()
}

/// The TCP peer of socket `fd` (`None` for any other socket).
fn peer_of(fd: std::os::fd::RawFd) -> Option<SocketAddr> {
    let peer: nix::sys::socket::SockaddrStorage = nix::sys::socket::getpeername(fd).ok()?;
    if let Some(v4) = peer.as_sockaddr_in() {
        return Some(SocketAddr::new(v4.ip().into(), v4.port()));
    }
    let v6 = peer.as_sockaddr_in6()?;
    Some(canonical(SocketAddr::new(v6.ip().into(), v6.port())))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    #[tokio::test]
    async fn every_connection_to_the_host_is_cut_and_no_other() {
        let frozen = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let frozen_at = frozen.local_addr().expect("address");
        let mut to_frozen = Vec::new();
        for _ in 0..3 {
            to_frozen.push(tokio::net::TcpStream::connect(frozen_at).await.expect("connect"));
        }
        let mut to_other = tokio::net::TcpStream::connect(other.local_addr().expect("address")).await.expect("connect");
        // The accepted ends stay open and silent: a read on our side would wait forever.
        let _accepted = (frozen.accept().await.expect("accept"), other.accept().await.expect("accept"));
        let peers = addresses("127.0.0.1", frozen_at.port()).await;
        assert_eq!(peers, vec![frozen_at]);
        assert_eq!(cut(&peers), 3, "the three connections to the frozen host");
        for stream in &mut to_frozen {
            let mut byte = [0u8; 1];
            let read = tokio::time::timeout(std::time::Duration::from_secs(2), stream.read(&mut byte)).await;
            assert!(matches!(read, Ok(Ok(0) | Err(_))), "a cut connection ends at once: {read:?}");
        }
        let mut byte = [0u8; 1];
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(200), to_other.read(&mut byte)).await;
        assert!(waiting.is_err(), "the other host's connection still waits");
    }

    #[test]
    fn mapped_addresses_are_ipv4() {
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:5432".parse().expect("address");
        assert_eq!(canonical(mapped), "127.0.0.1:5432".parse().expect("address"));
    }
}
