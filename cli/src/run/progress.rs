//! Live progress of a run on standard error: on a terminal, a spinner per running flow under an overall bar; in CI
//! logs (no terminal), one plain line per event. Node failures and flow endings are always printed as lines.

use crate::output::{Style, Tone, duration};
use crate::run::outcome::{FlowRun, RunStatus, node_failure};
use hookflow_shared::api::executions::{NodeResult, NodeStatus};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug)]
pub struct Progress {
    style: Style,
    bars: Option<(MultiProgress, ProgressBar)>,
}

impl Progress {
    pub fn new(style: Style, flows: usize) -> Arc<Self> {
        let bars = style.terminal.then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            let overall = multi.add(ProgressBar::new(u64::try_from(flows).unwrap_or(u64::MAX)));
            overall.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} flows  {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            (multi, overall)
        });
        Arc::new(Self { style, bars })
    }

    /// A line (or several) that stays, printed above the bars when there are some.
    pub fn line(&self, text: &str) {
        if let Some((multi, _)) = &self.bars
            && multi.println(text).is_ok()
        {
            return;
        }
        // One write per call: standard error is unbuffered, and a CI log is often a pipe whose reader wakes for each.
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), format!("{text}\n").as_bytes());
    }

    /// Progress of one flow.
    pub fn flow(self: &Arc<Self>, label: &str) -> FlowProgress {
        let spinner = self.bars.as_ref().map(|(multi, _)| {
            let spinner = multi.add(ProgressBar::new_spinner());
            spinner.set_style(
                ProgressStyle::with_template("{spinner} {prefix}: {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            spinner.set_prefix(label.to_owned());
            spinner.set_message("launching");
            spinner.enable_steady_tick(Duration::from_millis(120));
            spinner
        });
        FlowProgress { progress: Arc::clone(self), label: label.to_owned(), spinner }
    }

    /// Removes the bars.
    pub fn finish(&self) {
        if let Some((_, overall)) = &self.bars {
            overall.finish_and_clear();
        }
    }
}

#[derive(Debug)]
pub struct FlowProgress {
    progress: Arc<Progress>,
    label: String,
    spinner: Option<ProgressBar>,
}

impl FlowProgress {
    pub fn set_label(&mut self, label: &str) {
        label.clone_into(&mut self.label);
        if let Some(spinner) = &self.spinner {
            spinner.set_prefix(label.to_owned());
        }
    }

    fn say(&self, text: &str) {
        self.progress.line(&format!("[{}] {text}", self.label));
    }

    /// Something that may interest a person watching: a retry, a reconnect.
    pub fn notice(&self, text: &str) {
        self.say(&self.progress.style.paint(text, Tone::Warn));
    }

    /// `notice` as an owned callback, for the event stream's reconnect messages.
    pub fn notifier(&self) -> crate::sse::Notice {
        let (progress, label) = (Arc::clone(&self.progress), self.label.clone());
        Box::new(move |text| progress.line(&format!("[{label}] {}", progress.style.paint(text, Tone::Warn))))
    }

    pub fn launched(&self, execution_id: &str, mode: &str) {
        match &self.spinner {
            Some(spinner) => spinner.set_message(format!("running ({mode})")),
            None => self.say(&format!("launched execution {execution_id} ({mode})")),
        }
    }

    pub fn node_started(&self, node_id: &str) {
        if let Some(spinner) = &self.spinner {
            spinner.set_message(format!("running {node_id}"));
        }
    }

    /// Nodes that ended, printed together: on a terminal only what went wrong stays on screen; CI logs keep
    /// every node.
    pub fn nodes(&self, nodes: &[NodeResult]) {
        let lines: Vec<String> = nodes
            .iter()
            .filter(|node| self.spinner.is_none() || matches!(node.status, NodeStatus::Failed | NodeStatus::Error))
            .map(|node| format!("[{}] {}", self.label, self.node_line(node)))
            .collect();
        if !lines.is_empty() {
            self.progress.line(&lines.join("\n"));
        }
    }

    fn node_line(&self, node: &NodeResult) -> String {
        let style = self.progress.style;
        let (word, tone) = match node.status {
            NodeStatus::Passed => ("PASS", Tone::Good),
            NodeStatus::Failed => ("FAIL", Tone::Bad),
            NodeStatus::Error => ("ERROR", Tone::Bad),
            NodeStatus::Skipped => ("SKIP", Tone::Muted),
        };
        let mut text = format!("{} {} {}", style.paint(word, tone), node.node_id, duration(node.duration_ms));
        if let Some(why) = node_failure(node).filter(|_| node.status != NodeStatus::Passed) {
            text.push_str(": ");
            text.push_str(&why);
        }
        text
    }

    pub fn finished(&self, run: &FlowRun) {
        let style = self.progress.style;
        let tone = if run.passed() { Tone::Good } else { Tone::Bad };
        let s = run.summary;
        let mut text = format!(
            "{} in {}: {} passed, {} failed, {} skipped",
            style.paint(run.status.as_str(), tone),
            duration(run.duration_ms),
            s.passed,
            s.failed,
            s.skipped
        );
        if let Some(error) = run.error.as_ref().filter(|_| run.status != RunStatus::Succeeded) {
            text.push_str(&format!(" ({error})"));
        }
        self.say(&text);
        if let Some(spinner) = &self.spinner {
            spinner.finish_and_clear();
        }
        if let Some((_, overall)) = &self.progress.bars {
            overall.inc(1);
        }
    }
}
