//! The execution state machine, the only code that writes executions, jobs, node results and the event log.
//! `create` queues a resolved launch; `claim` hands it to a runner (running, a job with its token); `report`
//! stores node results under the token and extends the lease, as do heartbeats (`lease`); `finish` ends it, and
//! `cancel` ends or flags it; `release` puts a lost one back in the queue or ends it; `issued` remembers the job
//! tokens this server handed out, for completions; `drafts` the flow drafts it validated, for launches.
//! Every transition logs its events (`events`) in the same statement or transaction, and wakes runners when it
//! makes work claimable (across replicas only where `watch` says polls wait).

pub mod claim;
pub mod create;
pub mod drafts;
pub mod events;
pub mod finish;
pub mod issued;
pub mod lease;
pub mod release;
pub mod report;
pub mod row;
pub mod watch;
