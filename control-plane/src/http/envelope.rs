//! The one layer around every route (and the fallback), doing in one future what a stack of layers did in eight
//! boxed ones: the request id (the sender's `X-Request-Id`, else a new UUID, echoed on the answer), credentials
//! marked sensitive, methods HTTP does not define answered 405 before anything reads the request, the request's
//! span (method and request id: closed sets and the id only), the contract's error body on every error answer,
//! and the log lines (`received` at debug, `answered`) and metrics by route template. Routing has run when it is
//! called, so the matched template is read from the request.

use crate::error::{ApiError, with_error_body};
use crate::http::observe;
use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use hookflow_shared::ErrorCode;
use hookflow_shared::wire::header as wire_header;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;
use tracing::Instrument as _;

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

/// The sender's request id, else a new one set on the request.
fn request_id(headers: &mut HeaderMap) -> HeaderValue {
    if let Some(id) = headers.get(wire_header::REQUEST_ID) {
        return id.clone();
    }
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let text = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut text);
    let id = HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static(""));
    headers.insert(wire_header::REQUEST_ID, id.clone());
    id
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
        let id = request_id(request.headers_mut());
        mark_sensitive(request.headers_mut());
        let method = request.method().clone();
        let label = observe::method_label(&method);
        let template = request.extensions().get::<MatchedPath>().cloned();
        let uri = request.uri().clone();
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
            let mut response = with_error_body(response, id.to_str().unwrap_or(""), &method, uri.path());
            let template = template.as_ref().map_or("unmatched", MatchedPath::as_str);
            observe::record(label, template, response.status().as_u16(), started.elapsed());
            if !response.headers().contains_key(wire_header::REQUEST_ID) {
                response.headers_mut().insert(wire_header::REQUEST_ID, id);
            }
            Ok(response)
        };
        Box::pin(finish.instrument(span))
    }
}
