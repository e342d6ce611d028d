//! What the server says about each request: the route template a request matched (set by a route layer, read
//! by the outer layers), one log line per response (at debug for the runner protocol's long polls and
//! heartbeats, which a quiet fleet sends all day; at info for the rest), and the HTTP metrics by route. Labels and
//! log fields are closed sets (method names, route templates): nothing a stranger sends becomes a label, and
//! methods outside HTTP's own are answered 405 before anything else reads the request.

use crate::error::ApiError;
use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hookflow_shared::ErrorCode;
use hookflow_shared::wire::runner_route;
use std::time::{Duration, Instant};

/// The route template a request matched (`/webhooks/{id}`), carried on its response (shared with the router's
/// own copy: nothing is copied per request).
#[derive(Debug, Clone)]
pub struct RouteTemplate(pub MatchedPath);

/// Route layer: copies the matched route's template onto the response.
pub async fn tag_route(request: Request, next: Next) -> Response {
    let template = request.extensions().get::<MatchedPath>().cloned();
    let mut response = next.run(request).await;
    if let Some(template) = template {
        response.extensions_mut().insert(RouteTemplate(template));
    }
    response
}

/// The methods HTTP defines; any other (an extension method, possibly 100 KB long) is refused early.
const KNOWN_METHODS: [Method; 9] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
    Method::OPTIONS,
    Method::TRACE,
    Method::CONNECT,
];

/// A method as a metrics label or log field: its name when HTTP defines it, else `other`.
pub fn method_label(method: &Method) -> &'static str {
    KNOWN_METHODS.iter().find(|m| *m == method).map_or("other", Method::as_str)
}

/// Layer: a method HTTP does not define is answered 405 before routing, logging or capturing.
pub async fn known_methods_only(request: Request, next: Next) -> Response {
    if method_label(request.method()) == "other" {
        let error = ApiError::new(ErrorCode::MethodNotAllowed, "unknown HTTP method");
        return error.into_response();
    }
    next.run(request).await
}

/// Routes a quiet fleet calls all day: their answers are logged at debug.
fn is_routine(template: &str) -> bool {
    template == runner_route::NEXT_JOB || template == runner_route::HEARTBEAT
}

/// Outer layer: one log line and the HTTP metrics per answered request.
pub async fn record(request: Request, next: Next) -> Response {
    let method = method_label(request.method());
    let started = Instant::now();
    let response = next.run(request).await;
    let template = response.extensions().get::<RouteTemplate>().map_or("unmatched", |t| t.0.as_str());
    let (status, elapsed) = (response.status().as_u16(), started.elapsed());
    if is_routine(template) {
        tracing::debug!(route = template, status, latency_ms = millis(elapsed), "answered");
    } else {
        tracing::info!(route = template, status, latency_ms = millis(elapsed), "answered");
    }
    crate::metrics::http_request(method, template, status, elapsed);
    response
}

fn millis(elapsed: Duration) -> f64 {
    (elapsed.as_secs_f64() * 1000.0 * 100.0).round() / 100.0
}
