//! wrk, when it is on PATH, as the HTTP load generator of the capture runs: a faster client than ours, so the
//! figures are the server's rather than the load generator's. Runs POSTs of one body over N connections for a
//! time and reads requests/s, p50, p99 and non-2xx answers from its report.

use crate::load::BoxError;
use std::process::Command;
use std::time::Duration;

/// What wrk measured.
#[derive(Debug, Clone, Copy)]
pub struct WrkResult {
    pub rate: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub requests: u64,
    pub failed: u64,
}

/// Whether wrk can be run here.
pub fn available() -> bool {
    Command::new("wrk").arg("--version").output().is_ok()
}

/// POSTs `body` (as JSON, with `headers` besides) to `url` over `connections` connections (2 threads) for
/// `duration`.
pub fn post(
    url: &str,
    body: &[u8],
    headers: &[(String, String)],
    connections: usize,
    duration: Duration,
) -> Result<WrkResult, BoxError> {
    let dir = std::env::temp_dir().join(format!("hookflow-wrk-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let body_file = dir.join("body.json");
    std::fs::write(&body_file, body)?;
    let script = dir.join("post.lua");
    let extra: String = headers.iter().map(|(n, v)| format!("wrk.headers[\"{n}\"] = \"{v}\"\n")).collect();
    std::fs::write(
        &script,
        format!(
            "local f = io.open(\"{}\", \"rb\")\nwrk.method = \"POST\"\nwrk.body = f:read(\"*a\")\nf:close()\n\
             wrk.headers[\"Content-Type\"] = \"application/json\"\n{extra}",
            body_file.display()
        ),
    )?;
    let out = Command::new("wrk")
        .args(["-t2", &format!("-c{connections}"), &format!("-d{}s", duration.as_secs().max(1)), "--latency"])
        .arg("-s")
        .arg(&script)
        .arg(url)
        .output()?;
    let _ = std::fs::remove_dir_all(&dir);
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!("wrk failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    parse(&report).ok_or_else(|| format!("cannot read wrk's report:\n{report}").into())
}

fn millis(text: &str) -> Option<f64> {
    let (number, unit) = text.find(|c: char| c.is_ascii_alphabetic()).map(|at| text.split_at(at))?;
    let value: f64 = number.parse().ok()?;
    Some(match unit {
        "us" => value / 1000.0,
        "ms" => value,
        "s" => value * 1000.0,
        _ => return None,
    })
}

fn parse(report: &str) -> Option<WrkResult> {
    let mut result = WrkResult { rate: 0.0, p50_ms: f64::NAN, p99_ms: f64::NAN, requests: 0, failed: 0 };
    for line in report.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", rate] => result.rate = rate.parse().ok()?,
            ["50%", value] => result.p50_ms = millis(value)?,
            ["99%", value] => result.p99_ms = millis(value)?,
            ["Non-2xx", "or", "3xx", "responses:", n] => result.failed += n.parse::<u64>().ok()?,
            [n, "requests", "in", ..] => result.requests = n.parse().ok()?,
            _ => {}
        }
    }
    (result.rate > 0.0).then_some(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrk_report_is_read() {
        let report = "Running 5s test @ http://127.0.0.1:1/webhook/x\n  2 threads and 64 connections\n  \
            Latency Distribution\n     50%    3.21ms\n     75%    4.00ms\n     90%    6.10ms\n     99%   13.70ms\n  \
            78920 requests in 5.00s, 20.01MB read\n  Non-2xx or 3xx responses: 3\nRequests/sec:  15784.00\n";
        let result = parse(report).expect("parsed");
        assert_eq!((result.rate, result.requests, result.failed), (15784.0, 78920, 3));
        assert_eq!((result.p50_ms, result.p99_ms), (3.21, 13.7));
        assert_eq!(millis("850.00us"), Some(0.85));
    }
}
