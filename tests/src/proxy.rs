//! A TCP proxy on 127.0.0.1:0 in front of the server, for testing clients against broken networks: it can cut every
//! open connection, refuse new ones for a while, and swallow answers (the request reaches the server, the
//! connection closes before the client sees a byte of the response).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Debug)]
pub struct Proxy {
    pub addr: SocketAddr,
    /// Bumped to cut every open connection.
    generation: watch::Sender<u64>,
    refusing: Arc<AtomicBool>,
    swallow: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        Self::start_on("127.0.0.1:0", upstream).await
    }

    /// A proxy listening on `address` (an address of this machine, such as a test network namespace's veth end).
    pub async fn start_on(address: &str, upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind(address).await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (generation, _) = watch::channel(0u64);
        let refusing = Arc::new(AtomicBool::new(false));
        let swallow = Arc::new(AtomicUsize::new(0));
        let (cuts, refuse, swallows) = (generation.clone(), Arc::clone(&refusing), Arc::clone(&swallow));
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if refuse.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let swallow_this =
                    swallows.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
                tokio::spawn(relay(client, upstream, cuts.subscribe(), swallow_this));
            }
        });
        Self { addr, generation, refusing, swallow, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Closes every open connection.
    pub fn cut(&self) {
        self.generation.send_modify(|g| *g += 1);
    }

    /// While true, new connections are closed as soon as they are accepted.
    pub fn refuse(&self, refuse: bool) {
        self.refusing.store(refuse, Ordering::SeqCst);
    }

    /// The next `n` connections deliver their request, then close as the answer starts.
    pub fn swallow_answers(&self, n: usize) {
        self.swallow.store(n, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(mut client: TcpStream, upstream: SocketAddr, mut cut: watch::Receiver<u64>, swallow: bool) {
    let Ok(mut server) = TcpStream::connect(upstream).await else { return };
    cut.mark_unchanged();
    if swallow {
        let (mut client_read, _client_write) = client.split();
        let (mut server_read, mut server_write) = server.split();
        let forward = tokio::io::copy(&mut client_read, &mut server_write);
        let mut first = [0u8; 1];
        tokio::select! {
            _ = forward => {}
            _ = server_read.read(&mut first) => {}
        }
        return;
    }
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = cut.changed() => {
            let _ = client.shutdown().await;
        }
    }
}
