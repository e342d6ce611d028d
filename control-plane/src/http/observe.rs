//! What the server says about each request: the route template a request matched (set by a route layer, read
//! by the outer layers), one log line per response (at debug for the runner protocol's long polls and
//! heartbeats, which a quiet fleet sends all day; at info for the rest), and the HTTP metrics by route.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use hookflow_shared::wire::runner_route;
use std::time::{Duration, Instant};

/// The route template a request matched (`/webhooks/{id}`), carried on its response.
#[derive(Debug, Clone)]
pub struct RouteTemplate(pub String);

/// Route layer: copies the matched route's template onto the response.
pub async fn tag_route(request: Request, next: Next) -> Response {
    let template = request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_owned());
    let mut response = next.run(request).await;
    if let Some(template) = template {
        response.extensions_mut().insert(RouteTemplate(template));
    }
    response
}

/// Routes a quiet fleet calls all day: their answers are logged at debug.
fn is_routine(template: &str) -> bool {
    template == runner_route::NEXT_JOB || template == runner_route::HEARTBEAT
}

/// Outer layer: one log line and the HTTP metrics per answered request.
pub async fn record(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let started = Instant::now();
    let response = next.run(request).await;
    let template = response.extensions().get::<RouteTemplate>().map_or("unmatched", |t| t.0.as_str());
    let (status, elapsed) = (response.status().as_u16(), started.elapsed());
    if is_routine(template) {
        tracing::debug!(status, latency_ms = millis(elapsed), "answered");
    } else {
        tracing::info!(status, latency_ms = millis(elapsed), "answered");
    }
    crate::metrics::http_request(method.as_str(), template, status, elapsed);
    response
}

fn millis(elapsed: Duration) -> f64 {
    (elapsed.as_secs_f64() * 1000.0 * 100.0).round() / 100.0
}
