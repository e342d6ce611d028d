//! `hold-connections TARGET FIRST_ADDRESS ADDRESSES PER_ADDRESS [KEY ORGANIZATION]`: opens PER_ADDRESS TCP
//! connections to TARGET from each of ADDRESSES loopback addresses starting at FIRST_ADDRESS (127.0.0.2,
//! 127.0.0.3, ...), sends nothing on them (or, with KEY and ORGANIZATION, one `GET /permissions` carrying them, whose
//! answer it reads), prints `held N failed M` once all are open (N counts the connections that opened; with a key,
//! then the statuses answered, `status 200 x N ...`), then holds them until its standard input closes. The
//! connection-flood tests run it as a child process, so the sockets count against its own open-file limit rather
//! than the test's.

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

/// Sends one keyed request on `stream` and reads its answer's status (the answer is small: one read of its head,
/// then what its `content-length` says).
async fn keyed_request(stream: &mut TcpStream, request: &[u8]) -> std::io::Result<u16> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    stream.write_all(request).await?;
    let mut answer = Vec::with_capacity(1024);
    let mut buffer = [0u8; 4096];
    let deadline = std::time::Duration::from_secs(30);
    loop {
        let n = tokio::time::timeout(deadline, stream.read(&mut buffer)).await.map_err(std::io::Error::other)??;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        answer.extend_from_slice(&buffer[..n]);
        let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if answer.len() >= end + 4 + length {
            let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
            return Ok(status);
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (target, first, addresses, per_address, keyed) = match args.as_slice() {
        [target, first, addresses, per_address] => (target, first, addresses, per_address, None),
        [target, first, addresses, per_address, key, org] => {
            (target, first, addresses, per_address, Some((key.clone(), org.clone())))
        }
        _ => {
            eprintln!("usage: hold-connections TARGET FIRST_ADDRESS ADDRESSES PER_ADDRESS [KEY ORGANIZATION]");
            std::process::exit(2);
        }
    };
    let request = keyed.map(|(key, org)| {
        format!("GET /permissions HTTP/1.1\r\nhost: {target}\r\nx-api-key: {key}\r\nx-organization-id: {org}\r\n\r\n")
    });
    let statuses = Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::<u16, usize>::new()));
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
            let opened = futures_util::future::join_all(wave.iter().map(|_| async {
                let mut stream = open(target, from).await?;
                if let Some(request) = &request {
                    let status = keyed_request(&mut stream, request.as_bytes()).await.unwrap_or(0);
                    *statuses.lock().expect("statuses").entry(status).or_default() += 1;
                }
                Ok::<_, std::io::Error>(stream)
            }))
            .await;
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
    let answered: Vec<String> =
        statuses.lock().expect("statuses").iter().map(|(status, n)| format!("status {status} x {n}")).collect();
    println!("held {} failed {} {}", held.len(), failed.load(Ordering::Relaxed), answered.join(" "));
    // Nothing else runs meanwhile: a blocking read until the test closes standard input.
    let mut buffer = [0u8; 64];
    while std::io::Read::read(&mut std::io::stdin(), &mut buffer).is_ok_and(|n| n > 0) {}
    drop(held);
}
