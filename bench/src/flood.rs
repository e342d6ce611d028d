//! Connection flood: latency of `/healthz` and of captures from 127.0.0.1, each on a fresh connection, without
//! and then with thousands of idle connections held from 127.0.0.2 and up (what an attacker holding sockets
//! open costs everyone else). Printed side by side as ratios.

use crate::load::{Connection, percentile_ms};
use crate::setup::{BoxError, Rig};
use bytes::Bytes;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Idle connections to hold (this process holds them and the server's ends: 2 files each).
    #[arg(long, default_value_t = 8000)]
    connections: usize,
    /// Client addresses they come from (127.0.0.2 and up).
    #[arg(long, default_value_t = 10)]
    addresses: u32,
    /// Requests measured per phase and kind.
    #[arg(long, default_value_t = 500)]
    requests: usize,
}

fn raise_file_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// Milliseconds of each request, each on a fresh connection (a new client must be admitted).
async fn latencies(base: &str, method: &str, path: &str, requests: usize) -> Result<Vec<u32>, BoxError> {
    let mut samples = Vec::with_capacity(requests);
    for _ in 0..requests {
        let started = Instant::now();
        let mut connection = Connection::open(base).await?;
        let (status, _) = connection.send(method, path, &[], Bytes::from_static(b"{}")).await?;
        if status != 200 {
            return Err(format!("{method} {path} answered {status} during the flood").into());
        }
        samples.push(u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX));
    }
    Ok(samples)
}

async fn hold(target: SocketAddr, connections: usize, addresses: u32) -> Vec<tokio::net::TcpStream> {
    let mut held = Vec::with_capacity(connections);
    let per_address = connections.div_ceil(addresses as usize);
    for offset in 0..addresses {
        let from = Ipv4Addr::from(u32::from(Ipv4Addr::new(127, 0, 0, 2)) + offset);
        for _ in 0..per_address.min(connections - held.len()) {
            let socket =
                tokio::net::TcpSocket::new_v4().and_then(|s| s.bind(SocketAddr::new(from.into(), 0)).map(|()| s));
            if let Ok(socket) = socket
                && let Ok(stream) = socket.connect(target).await
            {
                held.push(stream);
            }
        }
    }
    held
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    raise_file_limit();
    let rig = Rig::start().await?;
    let webhook = rig.webhook("flood").await?;
    let capture = format!("/webhook/{webhook}");
    let quiet_health = latencies(&rig.base, "GET", "/healthz", args.requests).await?;
    let quiet_capture = latencies(&rig.base, "POST", &capture, args.requests).await?;
    let target: SocketAddr = rig.base.trim_start_matches("http://").parse()?;
    let held = hold(target, args.connections, args.addresses).await;
    let flood_health = latencies(&rig.base, "GET", "/healthz", args.requests).await?;
    let flood_capture = latencies(&rig.base, "POST", &capture, args.requests).await?;
    println!("flood: {} idle connections held from {} addresses", held.len(), args.addresses);
    for (name, quiet, flood) in [("healthz", &quiet_health, &flood_health), ("capture", &quiet_capture, &flood_capture)]
    {
        for p in [50.0, 99.0] {
            let (q, f) = (percentile_ms(quiet, p), percentile_ms(flood, p));
            println!("  {name:8} p{p:<2}: quiet {q:7.2} ms, flooded {f:7.2} ms, ratio {:.2}", f / q.max(1e-6));
        }
    }
    drop(held);
    rig.stop().await;
    Ok(())
}
