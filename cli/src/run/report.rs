//! The end of a run: the summary table on standard output, and the `--report` files: JUnit XML (one test suite per
//! flow, one test case per node) and JSON (every flow with its node results, secrets already masked).

use crate::error::CliError;
use crate::output::{duration, table};
use crate::run::outcome::{FlowRun, RunStatus, node_failure};
use hookflow_shared::api::executions::NodeStatus;
use std::fmt::Write as _;
use std::path::PathBuf;

/// `--report junit=PATH` or `--report json=PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportFile {
    Junit(PathBuf),
    Json(PathBuf),
}

/// Parses `junit=PATH` / `json=PATH`.
pub fn parse_report(text: &str) -> Result<ReportFile, String> {
    match text.split_once('=') {
        Some(("junit", path)) if !path.is_empty() => Ok(ReportFile::Junit(path.into())),
        Some(("json", path)) if !path.is_empty() => Ok(ReportFile::Json(path.into())),
        _ => Err(format!("expected junit=PATH or json=PATH, got {text:?}")),
    }
}

/// The table printed at the end of a run.
pub fn summary(runs: &[FlowRun]) -> String {
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            vec![
                run.name.clone(),
                run.status.as_str().to_owned(),
                run.summary.passed.to_string(),
                run.summary.failed.to_string(),
                run.summary.skipped.to_string(),
                duration(run.duration_ms),
                run.execution_id.map_or_else(|| "-".to_owned(), |id| id.to_string()),
            ]
        })
        .collect();
    let passed = runs.iter().filter(|r| r.passed()).count();
    let mut out = table(&["FLOW", "STATUS", "PASSED", "FAILED", "SKIPPED", "DURATION", "EXECUTION"], &rows);
    let _ = write!(out, "\n\n{passed} of {} flows passed", runs.len());
    out
}

/// Escapes text for XML attributes and content, dropping characters XML 1.0 cannot carry.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn seconds(ms: u64) -> String {
    format!("{:.3}", ms as f64 / 1000.0)
}

/// A test case's verdict: passed, or the JUnit element that says otherwise.
enum Verdict {
    Passed,
    Skipped(String),
    Failure { kind: String, message: String },
    Error { kind: String, message: String },
}

struct Case {
    name: String,
    ms: u64,
    verdict: Verdict,
}

/// The cases of one flow: one per node, plus a `(flow)` case when the flow failed outside its nodes (timeout, lost
/// runner, never launched).
fn cases(run: &FlowRun) -> Vec<Case> {
    if !run.rows.is_empty() {
        return row_cases(run);
    }
    let mut cases: Vec<Case> = run
        .nodes
        .iter()
        .map(|node| {
            let why = node_failure(node).unwrap_or_default();
            let verdict = match node.status {
                NodeStatus::Passed => Verdict::Passed,
                NodeStatus::Skipped => Verdict::Skipped(why),
                NodeStatus::Failed => Verdict::Failure { kind: "assertion".to_owned(), message: why },
                NodeStatus::Error => Verdict::Error { kind: "error".to_owned(), message: why },
            };
            Case { name: node.node_id.clone(), ms: node.duration_ms, verdict }
        })
        .collect();
    let explained = cases.iter().any(|c| matches!(c.verdict, Verdict::Failure { .. } | Verdict::Error { .. }));
    if !run.passed() && !explained {
        let message = run.error.clone().unwrap_or_else(|| run.status.as_str().to_owned());
        let kind = run.status.as_str().to_owned();
        let verdict = match run.status {
            RunStatus::NotRun => Verdict::Skipped(message),
            RunStatus::Failed => Verdict::Failure { kind, message },
            _ => Verdict::Error { kind, message },
        };
        cases.push(Case { name: "(flow)".to_owned(), ms: run.duration_ms, verdict });
    }
    cases
}

/// The cases of a data-driven run: one per row, named by the name column (or `row <index>`), failing when the
/// row's execution did not succeed (one of its nodes failed).
fn row_cases(run: &FlowRun) -> Vec<Case> {
    run.rows
        .iter()
        .map(|row| {
            let message = row.error.clone().unwrap_or_else(|| row.status.as_str().to_owned());
            let kind = row.status.as_str().to_owned();
            let verdict = match row.status {
                RunStatus::Succeeded => Verdict::Passed,
                RunStatus::NotRun => Verdict::Skipped(message),
                RunStatus::Failed => Verdict::Failure { kind, message },
                _ => Verdict::Error { kind, message },
            };
            Case { name: row.name.clone(), ms: row.duration_ms, verdict }
        })
        .collect()
}

#[derive(Default, Clone, Copy)]
struct Counts {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
    ms: u64,
}

impl Counts {
    fn attributes(&self) -> String {
        format!(
            "tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\"",
            self.tests,
            self.failures,
            self.errors,
            self.skipped,
            seconds(self.ms)
        )
    }
}

/// One `<testsuite>` per flow (with its flow id, execution id and status as properties), one `<testcase>` per node.
pub fn junit(runs: &[FlowRun]) -> String {
    let mut total = Counts::default();
    let mut suites = String::new();
    for run in runs {
        let cases = cases(run);
        let mut counts = Counts { tests: cases.len(), ms: run.duration_ms, ..Counts::default() };
        let mut body = String::new();
        for case in &cases {
            let open = format!(
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
                xml(&case.name),
                xml(&run.name),
                seconds(case.ms)
            );
            let _ = match &case.verdict {
                Verdict::Passed => writeln!(body, "{open}/>"),
                Verdict::Skipped(message) => {
                    counts.skipped += 1;
                    writeln!(body, "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>", xml(message))
                }
                Verdict::Failure { kind, message } | Verdict::Error { kind, message } => {
                    let tag = if matches!(case.verdict, Verdict::Failure { .. }) {
                        counts.failures += 1;
                        "failure"
                    } else {
                        counts.errors += 1;
                        "error"
                    };
                    let message = xml(message);
                    writeln!(
                        body,
                        "{open}>\n      <{tag} message=\"{message}\" type=\"{}\">{message}</{tag}>\n    </testcase>",
                        xml(kind)
                    )
                }
            };
        }
        let timestamp = run.started_at.as_ref().map_or_else(String::new, |t| format!(" timestamp=\"{}\"", xml(t)));
        let _ = writeln!(suites, "  <testsuite name=\"{}\" {}{timestamp}>", xml(&run.name), counts.attributes());
        let _ = writeln!(suites, "    <properties>");
        if let Some(flow_id) = run.flow_id {
            let _ = writeln!(suites, "      <property name=\"flow_id\" value=\"{flow_id}\"/>");
        }
        if let Some(path) = &run.path {
            let _ = writeln!(suites, "      <property name=\"path\" value=\"{}\"/>", xml(path));
        }
        if let Some(id) = run.execution_id {
            let _ = writeln!(suites, "      <property name=\"execution_id\" value=\"{id}\"/>");
        }
        if let Some(id) = run.batch_id {
            let _ = writeln!(suites, "      <property name=\"batch_id\" value=\"{id}\"/>");
        }
        let _ = writeln!(suites, "      <property name=\"status\" value=\"{}\"/>", run.status.as_str());
        let _ = writeln!(suites, "    </properties>");
        suites.push_str(&body);
        suites.push_str("  </testsuite>\n");
        total.tests += counts.tests;
        total.failures += counts.failures;
        total.errors += counts.errors;
        total.skipped += counts.skipped;
        total.ms += counts.ms;
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"hookflow\" {}>\n{suites}</testsuites>\n",
        total.attributes()
    )
}

/// The JSON report.
pub fn json(runs: &[FlowRun]) -> Result<String, CliError> {
    let report = serde_json::json!({
        "passed": runs.iter().all(FlowRun::passed),
        "flows": runs,
    });
    serde_json::to_string_pretty(&report).map_err(|e| CliError::runtime(format!("cannot encode the JSON report: {e}")))
}

/// Writes every requested report.
pub fn write_all(files: &[ReportFile], runs: &[FlowRun]) -> Result<(), CliError> {
    for file in files {
        let (path, text) = match file {
            ReportFile::Junit(path) => (path, junit(runs)),
            ReportFile::Json(path) => (path, json(runs)?),
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| CliError::runtime(format!("cannot create {}: {e}", parent.display())))?;
        }
        std::fs::write(path, text).map_err(|e| CliError::runtime(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_markup_and_control_characters() {
        assert_eq!(xml("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;\u{FFFD}");
    }

    #[test]
    fn report_flags_parse() {
        assert_eq!(parse_report("junit=out/r.xml"), Ok(ReportFile::Junit("out/r.xml".into())));
        assert_eq!(parse_report("json=r.json"), Ok(ReportFile::Json("r.json".into())));
        assert!(parse_report("html=r.html").is_err());
        assert!(parse_report("junit=").is_err());
    }
}
