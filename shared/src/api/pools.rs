//! Runner pools (issue #53): what `GET /runner/pools` and `GET /runner/pools/{pool}` answer, the numbers an
//! autoscaler (KEDA's `metrics-api` trigger, or anything that polls JSON) scales a pool of runners on.

use serde::{Deserialize, Serialize};

/// One pool's numbers within the caller's organization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PoolStatus {
    /// The pool's name, as the operator declared it (`--runner-pool NAME=LABEL,...`).
    pub pool: String,
    /// The pool's labels (none for `default`).
    pub labels: Vec<String>,
    /// Queued executions a runner carrying the pool's labels could claim (every label they require is one of the
    /// pool's).
    pub queued: i64,
    /// Executions running on the organization's runners that carry all of the pool's labels.
    pub running: i64,
    /// Age in seconds of the oldest of `queued` (0 when none).
    pub oldest_queued_s: f64,
    /// The organization's online runners that carry all of the pool's labels (never the embedded runner).
    pub runners_online: i64,
    /// Jobs those runners are running.
    pub busy_slots: i64,
    /// Their concurrency minus their running jobs.
    pub idle_slots: i64,
}

/// `GET /runner/pools`: every declared pool, `default` first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PoolList {
    pub items: Vec<PoolStatus>,
}
