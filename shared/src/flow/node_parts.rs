//! What every node kind shares: the `node_kind!` declaration (the common fields, unknown fields refused) and the
//! checks of a node's extractors and assertions; and the flow's time ceiling. Below `definition` and each node
//! kind's own module, which both use it.

use crate::api::catalog::Assertion;
use crate::flow::extract::{Extractor, MAX_EXTRACTORS};
use std::collections::HashSet;

/// The longest a flow may run (`timeout_s`).
pub const MAX_FLOW_TIMEOUT_S: u64 = 86_400;

pub(crate) fn yes() -> bool {
    true
}

/// Declares a node kind: the fields every node has (`id`, `name`, `enabled`, `condition`, `continue_on_failure`)
/// and then its own, refusing unknown fields (which rules out a flattened common part).
macro_rules! node_kind {
    (pub struct $name:ident { $($(#[$meta:meta])* pub $field:ident: $ty:ty,)* }) => {
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// Unique within the definition; results and extractors name the node by it.
            #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$", min_length = 1, max_length = 64)]
            pub id: String,
            pub name: Option<String>,
            #[serde(default = "crate::flow::node_parts::yes")]
            pub enabled: bool,
            pub condition: Option<Assertion>,
            #[serde(default)]
            pub continue_on_failure: bool,
            $($(#[$meta])* pub $field: $ty,)*
        }
    };
}
pub(crate) use node_kind;

/// The problems of a node's extractors (names, expressions) and assertions (expected values).
pub fn check_evaluations(extractors: &[Extractor], assertions: &[Assertion], problem: &mut impl FnMut(&str, String)) {
    if extractors.len() > MAX_EXTRACTORS {
        // Each extractor is work over every response: past the ceiling, none of them is compiled.
        problem(
            "extractors",
            format!("a node has at most {MAX_EXTRACTORS} extractors; this one has {}", extractors.len()),
        );
        return;
    }
    let mut names = HashSet::new();
    for (i, extractor) in extractors.iter().enumerate() {
        if let Some(message) = crate::flow::names::definable_problem(&extractor.name) {
            problem(&format!("extractors[{i}].name"), message);
        }
        if !names.insert(extractor.name.as_str()) {
            problem(&format!("extractors[{i}].name"), format!("`{}` is extracted twice", extractor.name));
        }
        if let Err(e) = extractor.check() {
            problem(&format!("extractors[{i}]"), e.to_string());
        }
    }
    for (i, assertion) in assertions.iter().enumerate() {
        if assertion.operator.takes_expected() && assertion.expected.is_none() {
            problem(
                &format!("assertions[{i}].expected"),
                format!("{} needs an expected value", assertion.operator.name()),
            );
        }
        if assertion.operator == crate::flow::assert::Operator::MatchesSchema
            && let Some(expected) = &assertion.expected
            && let Err(message) = crate::flow::json_schema::check_expected(expected)
        {
            problem(&format!("assertions[{i}].expected"), message);
        }
    }
}
