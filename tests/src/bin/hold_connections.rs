//! `hold-connections TARGET FIRST_ADDRESS ADDRESSES PER_ADDRESS`: opens PER_ADDRESS TCP connections to TARGET
//! from each of ADDRESSES loopback addresses starting at FIRST_ADDRESS (127.0.0.2, 127.0.0.3, ...), sends
//! nothing on them, prints `held N` once all are open (N counts the connections that opened), then holds them
//! until its standard input closes. The connection-flood test runs it as a child process, so the sockets count
//! against its own open-file limit rather than the test's.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::net::{TcpSocket, TcpStream};

fn raise_file_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

async fn open(target: SocketAddr, from: Ipv4Addr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from.into(), 0))?;
    socket.connect(target).await
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [target, first, addresses, per_address] = args.as_slice() else {
        eprintln!("usage: hold-connections TARGET FIRST_ADDRESS ADDRESSES PER_ADDRESS");
        std::process::exit(2);
    };
    let target: SocketAddr = target.parse().expect("TARGET is host:port");
    let first: Ipv4Addr = first.parse().expect("FIRST_ADDRESS is an IPv4 address");
    let addresses: u32 = addresses.parse().expect("ADDRESSES is a number");
    let per_address: usize = per_address.parse().expect("PER_ADDRESS is a number");
    raise_file_limit();
    let failed = Arc::new(AtomicUsize::new(0));
    let mut held = Vec::with_capacity(addresses as usize * per_address);
    for offset in 0..addresses {
        let from = Ipv4Addr::from(u32::from(first) + offset);
        // In waves of 250, so the server's accept queue is never the bottleneck being measured.
        for wave in (0..per_address).collect::<Vec<_>>().chunks(250) {
            let opened = futures_util::future::join_all(wave.iter().map(|_| open(target, from))).await;
            for stream in opened {
                match stream {
                    Ok(stream) => held.push(stream),
                    Err(_) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }
    println!("held {} failed {}", held.len(), failed.load(Ordering::Relaxed));
    // Nothing else runs meanwhile: a blocking read until the test closes standard input.
    let mut buffer = [0u8; 64];
    while std::io::Read::read(&mut std::io::stdin(), &mut buffer).is_ok_and(|n| n > 0) {}
    drop(held);
}
