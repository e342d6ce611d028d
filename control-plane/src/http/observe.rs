//! What the server says about each answered request: one log line (at debug for the runner protocol's long polls
//! and heartbeats, which a quiet fleet sends all day; at error or warn for a server error; at info for the rest) and the
//! HTTP metrics by route. Labels and log fields are closed sets (method names, route templates): nothing a stranger
//! sends becomes a label.

use axum::http::Method;
use hookflow_shared::wire::runner_route;
use std::time::Duration;

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

/// The label of a method HTTP does not define.
pub const OTHER_METHOD: &str = "other";

/// A method as a metrics label or log field: its name when HTTP defines it, else `other`.
pub fn method_label(method: &Method) -> &'static str {
    KNOWN_METHODS.iter().find(|m| *m == method).map_or(OTHER_METHOD, Method::as_str)
}

/// Routes a quiet fleet calls all day: their answers are logged at debug.
fn is_routine(template: &str) -> bool {
    template == runner_route::NEXT_JOB || template == runner_route::HEARTBEAT
}

/// What the log line needs to know of an answer.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    pub status: u16,
    /// An endpoint's custom capture answer: its status is the tenant's choice, not the server's state.
    pub verbatim: bool,
}

/// The log line and the metrics of one answer; `template` is the matched route's (`unmatched` when none did).
/// Server errors are logged at error; 503 (busy, the database away, a replica not ready) at warn; a tenant's custom
/// capture answer at the level of any answer.
pub fn record(method: &'static str, template: &str, answer: Answer, elapsed: Duration) {
    let (status, latency_ms) = (answer.status, millis(elapsed));
    if status >= 500 && !answer.verbatim && status != 503 {
        tracing::error!(route = template, status, latency_ms, "answered");
    } else if status == 503 && !answer.verbatim {
        tracing::warn!(route = template, status, latency_ms, "answered");
    } else if is_routine(template) {
        tracing::debug!(route = template, status, latency_ms, "answered");
    } else {
        tracing::info!(route = template, status, latency_ms, "answered");
    }
    crate::metrics::http_request(method, template, status, elapsed);
}

fn millis(elapsed: Duration) -> f64 {
    (elapsed.as_secs_f64() * 1000.0 * 100.0).round() / 100.0
}
