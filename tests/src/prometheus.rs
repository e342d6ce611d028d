//! Reading a `/metrics` answer as Prometheus does (a text-format parser): the samples of one scrape, and the sum
//! of a metric's samples. The control plane's process tests compile this file too (`#[path]`): they cannot depend
//! on this crate, which depends on the control plane.

use prometheus_parse::{Scrape, Value};

/// Every sample of a Prometheus text-format answer; panics on text that is not the format.
pub fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("the Prometheus text format")
}

/// The sum of a metric's samples whose labels include every pair of `labels` (a histogram counts its
/// observations).
pub fn sum(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => v,
            Value::Histogram(ref buckets) => buckets.last().map_or(0.0, |b| b.count),
            Value::Summary(_) => 0.0,
        })
        .sum()
}
