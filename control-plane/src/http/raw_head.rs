//! Records the raw head of each HTTP/1 request whose target is a capture URL, so captures keep headers exactly
//! as sent: in order, original case, repeated names interleaved. (hyper's `HeaderMap` lowercases names and
//! groups repeats.) The recorder follows request framing (Content-Length, chunked) to find each next head; when
//! anything is unusual (upgrade, oversize head) it stops recording and captures fall back to the `HeaderMap`.
//! Every head is numbered in the order it arrived, and so is every request the connection hands to the router
//! (HTTP/1 serves a connection's requests one after another), so a request takes exactly its own head, whatever
//! became of the requests before it (a refused request's head is never taken by the next one).

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Only requests under this prefix are recorded.
const CAPTURE_PREFIX: &[u8] = b"/webhook/";
/// Heads larger than this stop the recorder (hyper refuses them anyway).
const MAX_HEAD: usize = 64 * 1024;
/// Heads kept per connection that no handler took (pipelined or unmatched).
const MAX_QUEUED: usize = 16;

/// A request head as it was on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawHead {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
}

/// The capture heads recorded on one connection with their arrival numbers, oldest first (other requests are
/// numbered but not kept, so a runner's connection holds none); handlers take their own by their request's number.
#[derive(Debug, Clone, Default)]
pub struct HeadQueue(Arc<Mutex<VecDeque<NumberedHead>>>);

/// A head with its request's arrival number.
type NumberedHead = (u64, RawHead);

/// A request's arrival number on its connection: the n-th request served takes the n-th head recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestNumber(pub u64);

impl HeadQueue {
    fn push(&self, number: u64, head: RawHead) {
        let mut queue = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if queue.len() == MAX_QUEUED {
            queue.pop_front();
        }
        queue.push_back((number, head));
    }

    /// Takes the head of request `number`, which must be `method target`; heads of earlier requests are dropped.
    pub fn take(&self, number: RequestNumber, method: &str, target: &str) -> Option<RawHead> {
        let mut queue = self.0.lock().unwrap_or_else(|e| e.into_inner());
        while let Some((n, head)) = queue.pop_front() {
            if n < number.0 {
                continue;
            }
            if n > number.0 {
                queue.push_front((n, head));
                return None;
            }
            return Some(head).filter(|h| h.method == method && h.target == target);
        }
        None
    }
}

#[derive(Debug)]
enum Framing {
    /// Reading a head; the last four bytes seen end it at `\r\n\r\n`.
    Head,
    /// Skipping this many body bytes.
    Body(u64),
    /// Reading a chunk-size line.
    ChunkSize { size: u64, in_extension: bool },
    /// Skipping chunk data, then its CRLF.
    ChunkData(u64),
    /// Reading trailer lines after the last chunk; `line` counts bytes of the current line.
    Trailers { line: usize },
    /// Recording gave up for this connection.
    Off,
}

/// An I/O wrapper that records request heads as bytes pass through. Writes pass through untouched.
#[derive(Debug)]
pub struct Recording<IO> {
    inner: IO,
    queue: HeadQueue,
    framing: Framing,
    head: Vec<u8>,
    /// The number the next head gets.
    next: u64,
}

impl<IO> Recording<IO> {
    pub fn new(inner: IO, queue: HeadQueue) -> Self {
        Self { inner, queue, framing: Framing::Head, head: Vec::new(), next: 0 }
    }

    /// Advances the framing over `data`. One function on purpose: the states hand bytes to each other within a
    /// read, and the whole machine reads best in one place.
    fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            // The whole head is in this read (the usual case): found once, parsed where it lies, never copied.
            let whole = match self.framing {
                Framing::Head if self.head.is_empty() => find_end(&data[..data.len().min(MAX_HEAD + 1)]),
                _ => None,
            };
            match &mut self.framing {
                Framing::Off => return,
                Framing::Head if whole.is_some() => {
                    let end = whole.map_or(data.len(), |pos| pos + 4);
                    self.framing = self.finish_head(&data[..end]);
                    data = &data[end..];
                }
                Framing::Head => {
                    // A head split across reads is gathered here; the buffer is freed once it is parsed, so an
                    // idle or long-polling connection holds none.
                    let start = self.head.len().saturating_sub(3);
                    let take = data.len().min(MAX_HEAD + 1 - self.head.len().min(MAX_HEAD));
                    self.head.extend_from_slice(&data[..take]);
                    match find_end(&self.head[start..]) {
                        Some(pos) => {
                            let end = start + pos + 4;
                            let consumed = end - (self.head.len() - take);
                            let mut head = std::mem::take(&mut self.head);
                            head.truncate(end);
                            self.framing = self.finish_head(&head);
                            data = &data[consumed..];
                        }
                        None if self.head.len() > MAX_HEAD => {
                            self.head = Vec::new();
                            self.framing = Framing::Off;
                        }
                        None => data = &data[take..],
                    }
                }
                Framing::Body(left) => {
                    let skip = (*left).min(data.len() as u64);
                    *left -= skip;
                    data = &data[skip as usize..];
                    if *left == 0 {
                        self.framing = Framing::Head;
                    }
                }
                Framing::ChunkSize { size, in_extension } => {
                    let byte = data[0];
                    data = &data[1..];
                    match byte {
                        b'\n' => {
                            self.framing =
                                if *size == 0 { Framing::Trailers { line: 0 } } else { Framing::ChunkData(*size + 2) }
                        }
                        b'\r' => {}
                        b';' => *in_extension = true,
                        _ if *in_extension => {}
                        _ => match (byte as char).to_digit(16) {
                            Some(d) if *size < (1 << 56) => *size = *size * 16 + u64::from(d),
                            _ => self.framing = Framing::Off,
                        },
                    }
                }
                Framing::ChunkData(left) => {
                    let skip = (*left).min(data.len() as u64);
                    *left -= skip;
                    data = &data[skip as usize..];
                    if *left == 0 {
                        self.framing = Framing::ChunkSize { size: 0, in_extension: false };
                    }
                }
                Framing::Trailers { line } => {
                    let byte = data[0];
                    data = &data[1..];
                    match byte {
                        b'\n' if *line == 0 => self.framing = Framing::Head,
                        b'\n' => *line = 0,
                        b'\r' => {}
                        _ => *line += 1,
                    }
                }
            }
        }
    }

    /// Parses the completed head, queues it when it is a capture, and returns the framing of its body.
    fn finish_head(&mut self, head: &[u8]) -> Framing {
        let mut slots = [httparse::EMPTY_HEADER; 128];
        let mut request = httparse::Request::new(&mut slots);
        let Ok(httparse::Status::Complete(_)) = request.parse(head) else {
            return Framing::Off;
        };
        let (Some(method), Some(target)) = (request.method, request.path) else {
            return Framing::Off;
        };
        let mut content_length = 0u64;
        let mut chunked = false;
        for header in request.headers.iter() {
            if header.name.eq_ignore_ascii_case("content-length") {
                match std::str::from_utf8(header.value).ok().and_then(|v| v.trim().parse().ok()) {
                    Some(n) => content_length = n,
                    None => return Framing::Off,
                }
            } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = header.value.to_ascii_lowercase().ends_with(b"chunked");
            } else if header.name.eq_ignore_ascii_case("upgrade") || method == "CONNECT" {
                return Framing::Off;
            }
        }
        let number = self.next;
        self.next += 1;
        let head = target.as_bytes().starts_with(CAPTURE_PREFIX).then(|| RawHead {
            method: method.to_owned(),
            target: target.to_owned(),
            headers: request
                .headers
                .iter()
                .map(|h| (h.name.to_owned(), String::from_utf8_lossy(h.value).into_owned()))
                .collect(),
        });
        if let Some(head) = head {
            self.queue.push(number, head);
        }
        if chunked {
            Framing::ChunkSize { size: 0, in_extension: false }
        } else if content_length > 0 {
            Framing::Body(content_length)
        } else {
            Framing::Head
        }
    }
}

fn find_end(bytes: &[u8]) -> Option<usize> {
    bytes.windows(4).position(|w| w == b"\r\n\r\n")
}

impl<IO: AsyncRead + Unpin> AsyncRead for Recording<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled
            && buf.filled().len() > before
        {
            this.feed(&buf.filled()[before..]);
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Recording<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorder() -> Recording<()> {
        Recording::new((), HeadQueue::default())
    }

    fn feed_in_pieces(r: &mut Recording<()>, wire: &[u8], piece: usize) {
        for chunk in wire.chunks(piece) {
            r.feed(chunk);
        }
    }

    #[test]
    fn keeps_order_case_and_repeats_across_keep_alive_requests() {
        let wire =
            b"POST /webhook/abc/x?y=1 HTTP/1.1\r\nHost: h\r\nX-Sig: a\r\nContent-Length: 5\r\nx-sig: b\r\n\r\nhello\
GET /api-keys HTTP/1.1\r\nHost: h\r\n\r\n\
PUT /webhook/abc HTTP/1.1\r\nTransfer-Encoding: chunked\r\nX-Test: 1\r\n\r\n4;ext=1\r\nwiki\r\n0\r\nTrailer: t\r\n\r\n\
DELETE /webhook/abc HTTP/1.1\r\nHOST: h\r\n\r\n";
        for piece in [1, 3, 7, 64, wire.len()] {
            let mut r = recorder();
            feed_in_pieces(&mut r, wire, piece);
            let first = r.queue.take(RequestNumber(0), "POST", "/webhook/abc/x?y=1").expect("first");
            let names: Vec<_> = first.headers.iter().map(|(n, v)| format!("{n}={v}")).collect();
            assert_eq!(names, ["Host=h", "X-Sig=a", "Content-Length=5", "x-sig=b"], "piece {piece}");
            assert!(r.queue.take(RequestNumber(1), "GET", "/api-keys").is_none(), "only captures are recorded");
            let third = r.queue.take(RequestNumber(2), "PUT", "/webhook/abc").expect("chunked body skipped");
            assert_eq!(third.headers[1], ("X-Test".into(), "1".into()));
            let fourth = r.queue.take(RequestNumber(3), "DELETE", "/webhook/abc").expect("after trailers");
            assert_eq!(fourth.headers, [("HOST".to_owned(), "h".to_owned())]);
        }
    }

    #[test]
    fn a_body_that_looks_like_a_head_is_not_one() {
        let body = b"GET /webhook/fake HTTP/1.1\r\n\r\n";
        let mut wire = format!("POST /webhook/real HTTP/1.1\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        wire.extend_from_slice(body);
        let mut r = recorder();
        r.feed(&wire);
        assert!(r.queue.take(RequestNumber(0), "POST", "/webhook/real").is_some());
        assert!(r.queue.take(RequestNumber(1), "GET", "/webhook/fake").is_none());
    }

    #[test]
    fn a_request_takes_its_own_head_never_an_earlier_ones() {
        let wire = b"POST /webhook/a HTTP/1.1\r\nX-Forged-Sig: evil\r\nContent-Length: 0\r\n\r\n\
POST /webhook/a HTTP/1.1\r\nX-Sig: good\r\n\r\n";
        let mut r = recorder();
        r.feed(wire);
        // The first request was refused before taking its head; the second takes only its own.
        let second = r.queue.take(RequestNumber(1), "POST", "/webhook/a").expect("second");
        assert_eq!(second.headers, [("X-Sig".to_owned(), "good".to_owned())]);
        assert!(r.queue.take(RequestNumber(0), "POST", "/webhook/a").is_none(), "gone with its request");
    }

    #[test]
    fn upgrades_and_garbage_turn_recording_off() {
        let mut r = recorder();
        r.feed(b"GET /webhook/a HTTP/1.1\r\nUpgrade: websocket\r\n\r\nGET /webhook/b HTTP/1.1\r\n\r\n");
        assert!(r.queue.take(RequestNumber(1), "GET", "/webhook/b").is_none());
        let mut r = recorder();
        r.feed(b"POST /webhook/a HTTP/1.1\r\nContent-Length: nope\r\n\r\n");
        assert!(matches!(r.framing, Framing::Off));
    }

    /// A head of `size` bytes in all.
    fn head_of(size: usize) -> Vec<u8> {
        let start = b"POST /webhook/a HTTP/1.1\r\nX-Pad: ";
        let mut head = start.to_vec();
        head.resize(size - 4, b'p');
        head.extend_from_slice(b"\r\n\r\n");
        head
    }

    #[test]
    fn a_head_up_to_the_limit_is_recorded_whole_or_in_pieces_and_a_longer_one_is_not() {
        for piece in [1000, MAX_HEAD + 1, MAX_HEAD + 2] {
            let mut r = recorder();
            feed_in_pieces(&mut r, &head_of(MAX_HEAD + 1), piece);
            let head = r.queue.take(RequestNumber(0), "POST", "/webhook/a").expect("recorded");
            assert_eq!(head.headers[0].1.len(), MAX_HEAD + 1 - 37, "pieces of {piece}");
            assert!(r.head.capacity() == 0, "no buffer is kept between heads");
            let mut r = recorder();
            feed_in_pieces(&mut r, &head_of(MAX_HEAD + 2), piece);
            assert!(matches!(r.framing, Framing::Off), "pieces of {piece}");
        }
    }
}
