//! Where an execution's definition came from (`source` on every execution): a stored flow, or an inline definition
//! sent to `POST /executions` (issue #52) with its file's path, the definition's SHA-256 and the Git commit.

use serde::{Deserialize, Serialize};

/// Whether an execution ran a stored flow or an inline definition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    #[default]
    Stored,
    Inline,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Stored => "stored",
            SourceKind::Inline => "inline",
        }
    }
}

/// Where an execution's definition came from: `stored` (a flow's draft or version; the other fields null) or
/// `inline` (`POST /executions`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExecutionSource {
    pub kind: SourceKind,
    /// The path the caller named (inline runs without one: null).
    pub path: Option<String>,
    /// SHA-256 (lower-case hex) of the definition's JSON text as received.
    pub definition_sha256: Option<String>,
    pub git_commit: Option<String>,
    pub git_ref: Option<String>,
}
