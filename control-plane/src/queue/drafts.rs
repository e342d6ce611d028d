//! Flow drafts as this server last read and validated them, so a launch of an unchanged draft neither reads nor
//! parses nor validates its definition again (for a 1,000-node flow, about 5 ms of the launch). Every write of a
//! draft increments its revision and sets its update time (`flows::crud`, `flows::versions`); an entry is used only
//! while both still match the row the launch reads, so another replica's edit is seen at once. The cache holds
//! drafts of at most [`BUDGET`] bytes in memory, estimated from their JSON text; the oldest entries leave first,
//! one at a time (a [`BoundedCache`] weighted by the estimate).

use crate::cache::BoundedCache;
use chrono::{DateTime, Utc};
use hookflow_shared::FlowId;
use hookflow_shared::flow::definition::{FlowDefinition, Node};
use serde_json::value::RawValue;
use std::sync::Arc;

/// Memory the drafts kept may take, at most.
const BUDGET: usize = 24 * 1024 * 1024;
/// A draft larger than this is not kept (it would push out many others).
const LARGEST: usize = BUDGET / 3;
/// Bytes of memory per byte of JSON text, parsed as a value and as a definition (measured: 5.9 MB for the 295 KB
/// of a 1,000-node flow), and kept as text.
const MEMORY_PER_TEXT_BYTE: usize = 21;

/// One draft: the definition as stored (collection references not yet inlined), as its text and as a value, and
/// as validated.
#[derive(Debug)]
pub struct Draft {
    pub revision: i32,
    pub updated_at: DateTime<Utc>,
    /// The text, which a self-contained draft's executions store and hand to runners as it is.
    pub text: Box<RawValue>,
    pub raw: serde_json::Value,
    pub parsed: FlowDefinition,
    /// Whether a launch of it needs nothing else read: no module nodes, no collection requests.
    pub self_contained: bool,
    /// Estimated memory it takes.
    size: usize,
}

impl Draft {
    /// A draft read as `text` at `revision`, last written at `updated_at`.
    pub fn read(
        revision: i32,
        updated_at: DateTime<Utc>,
        text: Box<RawValue>,
        raw: serde_json::Value,
        parsed: FlowDefinition,
    ) -> Self {
        let self_contained = !parsed.nodes.iter().any(|node| matches!(node, Node::Module(_))) && !uses_requests(&raw);
        let size = text.get().len().saturating_mul(MEMORY_PER_TEXT_BYTE);
        Self { revision, updated_at, text, raw, parsed, self_contained, size }
    }
}

#[derive(Debug)]
pub struct Drafts {
    /// By flow, weighed by their estimated memory.
    entries: BoundedCache<FlowId, Arc<Draft>>,
}

impl Default for Drafts {
    fn default() -> Self {
        Self { entries: BoundedCache::new(usize::MAX).with_budget(BUDGET, |draft| draft.size) }
    }
}

impl Drafts {
    /// The draft kept for `flow_id`, whatever its revision (the caller compares it with the row).
    pub fn get(&self, flow_id: FlowId) -> Option<Arc<Draft>> {
        self.entries.get(&flow_id)
    }

    /// Keeps `draft` for `flow_id` in place of an older one; the oldest entries leave while over the budget.
    pub fn keep(&self, flow_id: FlowId, draft: Arc<Draft>) {
        if draft.size > LARGEST {
            return;
        }
        self.entries.insert(flow_id, draft);
    }
}

/// Whether any node of `definition` uses a collection request (which a launch then reads and inlines).
pub fn uses_requests(definition: &serde_json::Value) -> bool {
    let nodes = definition["nodes"].as_array().map(Vec::as_slice).unwrap_or_default();
    nodes.iter().any(|node| node.get("request_ref").is_some())
        || hookflow_shared::flow::json_schema::names_collection_schemas(definition)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(revision: i32, size: usize) -> Arc<Draft> {
        let raw = serde_json::json!({"nodes": [{"id": "a", "kind": "delay", "delay_ms": 1}]});
        let parsed = hookflow_shared::flow::definition::validate(&raw).expect("valid");
        let text = hookflow_shared::api::runners::JobFlow::text_of(&raw);
        Arc::new(Draft { revision, updated_at: Utc::now(), text, raw, parsed, self_contained: true, size })
    }

    #[test]
    fn a_newer_revision_replaces_the_old_and_the_oldest_leave_over_the_budget() {
        let drafts = Drafts::default();
        let a = FlowId::now_v7();
        drafts.keep(a, draft(1, LARGEST));
        drafts.keep(a, draft(2, LARGEST));
        assert_eq!(drafts.get(a).map(|d| d.revision), Some(2));
        assert_eq!(drafts.entries.weight(), LARGEST, "the old revision no longer counts");
        let others: Vec<FlowId> = (0..2).map(|_| FlowId::now_v7()).collect();
        for id in &others {
            drafts.keep(*id, draft(1, LARGEST));
        }
        assert!(drafts.get(a).is_some(), "three drafts of the largest size fit");
        drafts.keep(FlowId::now_v7(), draft(1, LARGEST));
        assert!(drafts.get(a).is_none(), "the oldest left");
        assert!(others.iter().all(|id| drafts.get(*id).is_some()));
        drafts.keep(a, draft(3, LARGEST + 1));
        assert!(drafts.get(a).is_none(), "a draft over the largest size is not kept");
    }
}
