//! The one layer around every route (and the fallback), doing in one future what a stack of layers did in eight
//! boxed ones: the request id (the sender's `X-Request-Id`, else a new UUID, echoed on the answer), credentials
//! marked sensitive, methods HTTP does not define answered 405 before anything reads the request, the request's
//! span (method and request id: closed sets and the id only), the contract's error body on every error answer,
//! and the log lines (`received` at debug, `answered`) and metrics by route template. Routing has run when it is
//! called, so the matched template is read from the request (a 405 carries its path's template). A sender's request
//! id is kept only when it is short and plain; a body of unknown length is read inside the request's span.
//! While the handler runs (a runner's long poll waits for minutes) the envelope holds nothing that shares the bytes
//! the connection read the request into: hyper parses the target and header values as slices of its read buffer,
//! and a held slice keeps that buffer alive, so the connection's next read would take a second one.

use crate::error::{ApiError, Verbatim, with_error_body};
use crate::http::observe;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use hookflow_shared::ErrorCode;
use hookflow_shared::wire::header as wire_header;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;
use tracing::{Instrument as _, Span};

/// Headers whose values never appear in a debug print of a request.
const SENSITIVE: [HeaderName; 3] =
    [header::AUTHORIZATION, header::COOKIE, HeaderName::from_static(wire_header::API_KEY)];

/// The layer: `Router::layer(EnvelopeLayer)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EnvelopeLayer;

impl<S> tower::Layer<S> for EnvelopeLayer {
    type Service = Envelope<S>;

    fn layer(&self, inner: S) -> Envelope<S> {
        Envelope { inner }
    }
}

/// See the module.
#[derive(Debug, Clone)]
pub struct Envelope<S> {
    inner: S,
}

/// The longest request id a sender may choose.
pub const MAX_REQUEST_ID: usize = 128;

/// Whether a sender's request id is kept: 1 to [`MAX_REQUEST_ID`] letters, digits and `._:/+=-` (UUIDs, trace ids,
/// base64). Any other would be repeated at length in every log line of its request and in its answer.
fn plain_id(id: &HeaderValue) -> bool {
    let bytes = id.as_bytes();
    (1..=MAX_REQUEST_ID).contains(&bytes.len())
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || b"._:/+=-".contains(b))
}

/// A request's id as its answer carries it, in the request's extensions for handlers that build their own error
/// body. The request's headers stay as the sender sent them (a capture stores them).
#[derive(Debug, Clone)]
pub struct RequestId(pub HeaderValue);

impl RequestId {
    pub fn as_str(&self) -> &str {
        self.0.to_str().unwrap_or("")
    }
}

/// The sender's request id when it is plain (copied: see the module), else a new one.
fn request_id(headers: &HeaderMap) -> HeaderValue {
    if let Some(id) = headers.get(wire_header::REQUEST_ID).filter(|id| plain_id(id))
        && let Ok(copy) = HeaderValue::from_bytes(id.as_bytes())
    {
        return copy;
    }
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let text = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut text);
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn mark_sensitive(headers: &mut HeaderMap) {
    for name in &SENSITIVE {
        if let header::Entry::Occupied(mut values) = headers.entry(name) {
            values.iter_mut().for_each(|value| value.set_sensitive(true));
        }
    }
}

impl<S> tower::Service<Request> for Envelope<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        let started = Instant::now();
        let id = request_id(request.headers());
        request.extensions_mut().insert(RequestId(id.clone()));
        mark_sensitive(request.headers_mut());
        let method = request.method().clone();
        let label = observe::method_label(&method);
        let template = request.extensions().get::<MatchedPath>().cloned();
        // Copied, not the request's `Uri` (see the module); error bodies name it.
        let path: Box<str> = request.uri().path().into();
        let span = tracing::info_span!("request", method = label, request_id = id.to_str().unwrap_or(""));
        let answer = span.in_scope(|| {
            tracing::debug!("received");
            (label != observe::OTHER_METHOD).then(|| self.inner.call(request))
        });
        let finish = async move {
            let response = match answer {
                Some(answer) => answer.await.unwrap_or_else(|never| match never {}),
                None => ApiError::new(ErrorCode::MethodNotAllowed, "unknown HTTP method").into_response(),
            };
            let mut response = with_error_body(response, id.to_str().unwrap_or(""), &method, &path);
            let template = template.as_ref().map_or("unmatched", MatchedPath::as_str);
            let answer = observe::Answer {
                status: response.status().as_u16(),
                verbatim: response.extensions().get::<Verbatim>().is_some(),
            };
            observe::record(label, template, answer, started.elapsed());
            if !response.headers().contains_key(wire_header::REQUEST_ID) {
                response.headers_mut().insert(wire_header::REQUEST_ID, id);
            }
            // A body of unknown length (a stream, an export) is read in the request's span, so what it logs names
            // the request; a body whose length is known is sent as it is.
            if response.body().size_hint().exact().is_none() {
                response = response.map(|body| Body::new(InSpan { body, span: Span::current() }));
            }
            Ok(response)
        };
        Box::pin(finish.instrument(span))
    }
}

/// A response body read inside its request's span.
struct InSpan {
    body: Body,
    span: Span,
}

impl HttpBody for InSpan {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        Pin::new(&mut this.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::Layer as _;

    #[test]
    fn plain_request_ids_are_kept_and_others_replaced() {
        let uuid = "0b9c7a52-6f0e-4c1e-9d7b-2f1f3c1e5a10";
        for kept in [uuid, "trace-me-42", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "aGk+/w=="] {
            let mut headers = HeaderMap::new();
            headers.insert(wire_header::REQUEST_ID, HeaderValue::from_static(kept));
            assert_eq!(request_id(&headers), kept);
        }
        let long = "a".repeat(MAX_REQUEST_ID + 1);
        for replaced in [long.as_str(), "", "two words", "quote\"d", "caf\u{e9}"] {
            let mut headers = HeaderMap::new();
            let value = HeaderValue::from_bytes(replaced.as_bytes()).expect("a header value");
            headers.insert(wire_header::REQUEST_ID, value);
            let id = request_id(&headers);
            assert_ne!(id.as_bytes(), replaced.as_bytes(), "{replaced:?} is not kept");
            assert!(uuid::Uuid::parse_str(id.to_str().expect("ascii")).is_ok(), "a new id replaces {replaced:?}");
        }
        assert!(uuid::Uuid::parse_str(request_id(&HeaderMap::new()).to_str().expect("ascii")).is_ok());
    }

    /// What a test subscriber wrote.
    #[derive(Clone, Default)]
    struct Written(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Written {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("written").extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn what_a_streamed_body_logs_names_its_request() {
        use http_body_util::BodyExt as _;
        use tower::Service as _;
        let written = Written::default();
        let sink = written.clone();
        let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || sink.clone()).finish();
        let _default = tracing::subscriber::set_default(subscriber);
        let streaming = tower::service_fn(|request: Request| async move {
            let id = request.extensions().get::<RequestId>().map(|id| id.as_str().to_owned());
            assert_eq!(id.as_deref(), Some("stream-7"), "handlers find the request's id");
            let chunk = futures_util::stream::once(async {
                tracing::info!("a line from inside the body");
                Ok::<_, std::io::Error>(Bytes::from_static(b"chunk"))
            });
            Ok::<_, Infallible>(Response::new(Body::from_stream(chunk)))
        });
        let request = Request::builder().uri("/stream").header(wire_header::REQUEST_ID, "stream-7").body(Body::empty());
        let response = EnvelopeLayer.layer(streaming).call(request.expect("a request")).await.expect("an answer");
        assert_eq!(response.headers()[wire_header::REQUEST_ID], "stream-7");
        let body = response.into_body().collect().await.expect("the body").to_bytes();
        assert_eq!(&body[..], b"chunk");
        let text = String::from_utf8(written.0.lock().expect("written").clone()).expect("utf-8");
        let line = text.lines().find(|l| l.contains("a line from inside the body")).expect("the body's line");
        assert!(line.contains(r#"request_id="stream-7""#), "the body's line names its request: {line}");
    }

    /// The bytes a connection read a request into; says when the last slice of them is gone.
    struct ReadBuffer {
        text: &'static [u8],
        freed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    }

    impl AsRef<[u8]> for ReadBuffer {
        fn as_ref(&self) -> &[u8] {
            self.text
        }
    }

    impl Drop for ReadBuffer {
        fn drop(&mut self) {
            self.freed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// A runner's long poll waits for minutes: meanwhile the envelope must not keep the connection's read buffer
    /// (which the target and header values are slices of), or each waiting connection holds two.
    #[tokio::test]
    async fn a_waiting_handler_leaves_the_read_buffer_free() {
        use tower::Service as _;
        let freed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let read = Bytes::from_owner(ReadBuffer { text: b"/runner/jobs/next req-42", freed: freed.clone() });
        let target = axum::http::Uri::from_maybe_shared(read.slice(0..17)).expect("a target");
        let id = HeaderValue::from_maybe_shared(read.slice(18..24)).expect("an id");
        drop(read);
        let (waiting_tx, waiting) = tokio::sync::oneshot::channel::<()>();
        let (go, go_rx) = tokio::sync::oneshot::channel::<()>();
        let parked = std::sync::Arc::new(std::sync::Mutex::new(Some((waiting_tx, go_rx))));
        let long_poll = tower::service_fn(move |request: Request| {
            let parked = parked.clone();
            async move {
                drop(request);
                let (waiting_tx, go_rx) = parked.lock().expect("parked").take().expect("called once");
                let _ = waiting_tx.send(());
                let _ = go_rx.await;
                Ok::<_, Infallible>(axum::http::StatusCode::NO_CONTENT.into_response())
            }
        });
        let request = Request::builder().method("POST").uri(target).header(wire_header::REQUEST_ID, id);
        let call = EnvelopeLayer.layer(long_poll).call(request.body(Body::empty()).expect("a request"));
        let answer = tokio::spawn(call);
        waiting.await.expect("the handler waits");
        assert!(
            freed.load(std::sync::atomic::Ordering::SeqCst),
            "while the handler waits, nothing holds a slice of the request's bytes (target or request id)"
        );
        go.send(()).expect("the handler listens");
        let response = answer.await.expect("the call").expect("an answer");
        assert_eq!(response.status(), axum::http::StatusCode::NO_CONTENT);
        assert_eq!(response.headers()[wire_header::REQUEST_ID], "req-42", "the sender's id is still echoed");
    }

    #[test]
    fn credentials_are_marked_sensitive() {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        headers.insert(header::COOKIE, HeaderValue::from_static("s=1"));
        headers.insert(wire_header::API_KEY, HeaderValue::from_static("hf_x"));
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        mark_sensitive(&mut headers);
        for name in &SENSITIVE {
            assert!(headers[name].is_sensitive(), "{name}");
        }
        assert!(!headers[header::ACCEPT].is_sensitive());
        assert!(!format!("{headers:?}").contains("hf_x"), "a debug print hides the key");
    }
}
