//! The process's TCP connections to a database host: their keepalive and user timeout set, and every one cut when
//! the host stopped answering. sqlx 0.9 opens its sockets itself and gives no access to them nor to their options,
//! so both work from the outside: the sockets are found by number in `/proc/self/fd` and matched by peer.
//!
//! Options (`tune`): a socket is reached safely through a duplicate of it (`pidfd_getfd` on this process: no unsafe
//! code), which shares the socket, and is given TCP keepalive (idle 5 s, a probe every 2 s, 3 probes) and
//! TCP_USER_TIMEOUT (`--db-tcp-user-timeout-ms`): a host that vanished (powered off, cut off the network) is left
//! within seconds. The follower's watch tunes the connections to the host it watches every second, so a connection
//! goes without them for at most that long after it opened.
//!
//! Cutting (`cut`): a primary that froze (SIGSTOP, a hung disk) while its kernel still acknowledges keeps every
//! statement sent to it waiting, with no error ever coming (its kernel answers keepalive probes and acknowledges
//! what is sent, so neither keepalive nor TCP_USER_TIMEOUT ends them), so the follower's watch, which asks the host
//! every second on a connection of its own, decides when a host has been silent too long
//! (`--db-tcp-user-timeout-ms`) and this module shuts down (`shutdown(2)`) every TCP socket of the process whose
//! peer is that host: each statement waiting there fails at once (the request answers 503 with `Retry-After`), and
//! the pool's slots come back (sqlx's ping of a returned connection no longer waits forever). Linux (`/proc`,
//! `pidfd_getfd` since Linux 5.6) only; elsewhere nothing is tuned nor cut and the deadlines of the pool, the
//! writers and the requests are what bound a wait.

use std::net::SocketAddr;
use std::time::Duration;

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

/// TCP keepalive: the first probe after this long without traffic.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(5);
/// TCP keepalive: the pause between probes.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(2);
/// TCP keepalive: unanswered probes before the connection is given up.
const KEEPALIVE_PROBES: u32 = 3;

/// Gives every TCP socket of this process connected to one of `peers` keepalive and `user_timeout` (those that have
/// keepalive on already were done before); how many were given them now.
#[cfg(target_os = "linux")]
pub fn tune(peers: &[SocketAddr], user_timeout: Duration) -> usize {
    use rustix::net::sockopt;
    use rustix::process::{PidfdFlags, PidfdGetfdFlags, getpid, pidfd_getfd, pidfd_open};
    use std::os::fd::AsRawFd as _;
    if peers.is_empty() {
        return 0;
    }
    let Ok(this) = pidfd_open(getpid(), PidfdFlags::empty()) else { return 0 };
    let user_timeout = u32::try_from(user_timeout.as_millis()).unwrap_or(u32::MAX);
    let mut tuned = 0;
    for fd in sockets() {
        if !peer_of(fd).is_some_and(|peer| peers.contains(&peer)) {
            continue;
        }
        // The duplicate shares the socket; its peer is read again (the number may have been reused meanwhile).
        let Ok(socket) = pidfd_getfd(&this, fd, PidfdGetfdFlags::empty()) else { continue };
        if !peer_of(socket.as_raw_fd()).is_some_and(|peer| peers.contains(&peer))
            || sockopt::socket_keepalive(&socket).unwrap_or(true)
        {
            continue;
        }
        // Keepalive last: it marks the socket as done.
        let set = sockopt::set_tcp_user_timeout(&socket, user_timeout)
            .and_then(|()| sockopt::set_tcp_keepidle(&socket, KEEPALIVE_IDLE))
            .and_then(|()| sockopt::set_tcp_keepintvl(&socket, KEEPALIVE_INTERVAL))
            .and_then(|()| sockopt::set_tcp_keepcnt(&socket, KEEPALIVE_PROBES))
            .and_then(|()| sockopt::set_socket_keepalive(&socket, true));
        match set {
            Ok(()) => tuned += 1,
            Err(e) => tracing::debug!(error = %e, "a database connection's TCP options could not be set"),
        }
    }
    tuned
}

#[cfg(not(target_os = "linux"))]
pub fn tune(_peers: &[SocketAddr], _user_timeout: Duration) -> usize {
    0
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

    #[tokio::test]
    async fn connections_to_the_host_get_keepalive_and_a_user_timeout_once() {
        use rustix::net::sockopt;
        let host = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let to_host = tokio::net::TcpStream::connect(host.local_addr().expect("address")).await.expect("connect");
        let to_other = tokio::net::TcpStream::connect(other.local_addr().expect("address")).await.expect("connect");
        let peers = [host.local_addr().expect("address")];
        assert_eq!(tune(&peers, Duration::from_millis(7000)), 1, "the one connection to the host");
        assert!(sockopt::socket_keepalive(&to_host).expect("keepalive"));
        assert_eq!(sockopt::tcp_keepidle(&to_host).expect("idle"), KEEPALIVE_IDLE);
        assert_eq!(sockopt::tcp_keepintvl(&to_host).expect("interval"), KEEPALIVE_INTERVAL);
        assert_eq!(sockopt::tcp_keepcnt(&to_host).expect("probes"), KEEPALIVE_PROBES);
        assert_eq!(sockopt::tcp_user_timeout(&to_host).expect("user timeout"), 7000);
        assert!(!sockopt::socket_keepalive(&to_other).expect("keepalive"), "another host's connection is left alone");
        assert_eq!(tune(&peers, Duration::from_millis(7000)), 0, "done once");
    }

    #[test]
    fn mapped_addresses_are_ipv4() {
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:5432".parse().expect("address");
        assert_eq!(canonical(mapped), "127.0.0.1:5432".parse().expect("address"));
    }
}
