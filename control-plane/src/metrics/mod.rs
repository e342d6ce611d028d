//! The server's metrics in the Prometheus text format, served on their own listener (`--metrics-listen`,
//! loopback by default). Counters and histograms are recorded where things happen (requests by route template,
//! captures, claims, lease expiries, finished executions, stream subscribers); gauges that the database knows
//! (queue depth and age, runners online, the pool) are read at scrape time. No label carries an organization:
//! cardinality stays bounded whatever the tenants do. The recorder is process-wide: one per process. This module
//! records; `endpoint` serves.

pub mod endpoint;

use metrics::{Counter, Histogram, counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::collections::HashMap;
use std::sync::{LazyLock, OnceLock, RwLock};
use std::time::Duration;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
static DROPPED_LOG_LINES: OnceLock<tracing_appender::non_blocking::ErrorCounter> = OnceLock::new();

const SECONDS_BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0];
const ROWS_BUCKETS: [f64; 9] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// Hands the log writer's count of the lines it dropped (its reader fell behind) to the metrics.
pub fn count_dropped_log_lines(dropped: tracing_appender::non_blocking::ErrorCounter) {
    let _ = DROPPED_LOG_LINES.set(dropped);
}

/// `hookflow_log_lines_dropped_total`, read from the log writer when scraped.
pub(crate) fn read_dropped_log_lines() {
    if let Some(dropped) = DROPPED_LOG_LINES.get() {
        counter!("hookflow_log_lines_dropped_total").absolute(dropped.dropped_lines() as u64);
    }
}

/// Installs the process's recorder once (later calls answer the same handle).
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)
                .and_then(|b| b.set_buckets_for_metric(Matcher::Suffix("_rows".into()), &ROWS_BUCKETS));
            let recorder = match builder {
                Ok(builder) => builder.build_recorder(),
                Err(e) => panic!("the metric buckets are constants and valid: {e}"),
            };
            let handle = recorder.handle();
            // A recorder installed earlier by the embedding program wins; ours then renders nothing of its own.
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics shows only what this one records");
            }
            handle
        })
        .clone()
}

/// One answered HTTP request, by route template (`unmatched` for paths no route knows). Nothing is recorded before
/// the recorder is installed (`install`; with `--metrics-listen off`, never): no label is made for nobody.
pub fn http_request(method: &'static str, route: &str, status: u16, elapsed: Duration) {
    if HANDLE.get().is_none() {
        return;
    }
    let (counter, histogram) = http_handles(method, route, status);
    counter.increment(1);
    histogram.record(elapsed.as_secs_f64());
}

/// The handles of one route's HTTP metrics: its latency histogram by method, its counters by method and status.
type RouteHandles = HashMap<&'static str, (Histogram, HashMap<u16, Counter>)>;

/// Handles by route template. Labels are closed sets (methods HTTP defines, route templates, statuses), so each
/// set is registered once and later requests only bump its atomics: no label strings made per request.
static HTTP_HANDLES: LazyLock<RwLock<HashMap<String, RouteHandles>>> = LazyLock::new(RwLock::default);

fn http_handles(method: &'static str, route: &str, status: u16) -> (Counter, Histogram) {
    let known = HTTP_HANDLES.read().unwrap_or_else(|e| e.into_inner()).get(route).and_then(|methods| {
        let (histogram, counters) = methods.get(method)?;
        Some((counters.get(&status)?.clone(), histogram.clone()))
    });
    if let Some(handles) = known {
        return handles;
    }
    let mut all = HTTP_HANDLES.write().unwrap_or_else(|e| e.into_inner());
    let methods = all.entry(route.to_owned()).or_default();
    let (histogram, counters) = methods.entry(method).or_insert_with(|| {
        let histogram = histogram!("hookflow_http_request_duration_seconds", "method" => method,
            "route" => route.to_owned());
        (histogram, HashMap::new())
    });
    let counter = counters.entry(status).or_insert_with(|| {
        counter!("hookflow_http_requests_total", "method" => method, "route" => route.to_owned(),
            "status" => status.to_string())
    });
    (counter.clone(), histogram.clone())
}

/// A batch the capture writer committed (or failed): rows stored, rows the database refused or could not store.
pub fn capture_batch(stored: usize, failed: usize) {
    histogram!("hookflow_capture_batch_rows").record((stored + failed) as f64);
    counter!("hookflow_captures_stored_total").increment(stored as u64);
    counter!("hookflow_captures_failed_total").increment(failed as u64);
}

/// A capture refused before storing (unknown endpoint, too large, rate limited, ...), by status.
pub fn capture_refused(status: u16) {
    counter!("hookflow_captures_refused_total", "status" => status.to_string()).increment(1);
}

/// Executions a runner claimed.
pub fn claimed(jobs: usize) {
    counter!("hookflow_claims_total").increment(jobs as u64);
}

/// Executions whose lease expired, by what became of them (`requeued`, `failed`, `cancelled`).
pub fn lease_expired(outcome: &'static str) {
    counter!("hookflow_lease_expiries_total", "outcome" => outcome).increment(1);
}

/// An execution reached a final status.
pub fn execution_finished(status: &'static str) {
    counter!("hookflow_executions_finished_total", "status" => status).increment(1);
}

/// What the trigger dispatcher did with launches captures owed: launched, skipped (the capture did not match or
/// is gone), refused (depth, the organization's limit, a launch the queue refused).
pub fn trigger_launches(launched: u64, skipped: u64, refused: u64) {
    for (outcome, n) in [("launched", launched), ("skipped", skipped), ("refused", refused)] {
        counter!("hookflow_trigger_launches_total", "outcome" => outcome).increment(n);
    }
}

/// Delivery attempts' outcomes: `delivered`, `failed_attempt` (every failed attempt) and `dead` (every delivery that
/// became dead).
pub fn delivery_outcome(outcome: &'static str) {
    counter!("hookflow_deliveries_total", "outcome" => outcome).increment(1);
}

/// A live stream (capture or execution) opened (`+1`) or ended (`-1`).
pub fn stream_subscribers(delta: f64) {
    gauge!("hookflow_stream_subscribers").increment(delta);
}
