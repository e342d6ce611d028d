//! The execution state machine, the only code that writes executions, jobs, node results and the event log.
//! `create` queues a resolved launch; `claim` hands it to a runner (running, a job with its token); `report`
//! stores node results under the token and extends the lease, as do heartbeats (`lease`; `heartbeat` writes when
//! each runner was last heard from, many per statement); `finish` ends it, and
//! its `cancel` ends or flags it; `release` puts a lost one back in the queue or ends it; `issued` remembers the
//! job tokens this server handed out, for completions; `seen` the runners it saw within a second, for their polls;
//! `drafts` the flow drafts it validated, for launches; `row` reads an execution back as the API shows it;
//! `secrets` opens the secrets a run references; `batch` queues a launch once per row of data (and a batch's
//! failed rows again).
//! `inline` queues an inline definition (no stored flow).
//! Every transition logs its events (`events`) in the same statement or transaction; a NOTIFY at its commit wakes
//! the execution's stream subscribers when a stream watches it. Two transitions make work claimable and wake
//! waiting long polls at commit: `create` NOTIFYs the organization's queue channel only when a replica other than
//! the launching one has polls waiting there (`watch`; the launching handler wakes its own replica's polls in
//! memory, and the scheduler, launching as no replica, notifies every replica that waits), and `release` NOTIFYs
//! at every requeue. Finishing and cancelling wake no poll: a runner asks again once its own slot is free, and a
//! poll already waiting looks again every `queue_recheck` in any case.

pub mod batch;
pub mod claim;
pub mod create;
pub mod drafts;
pub mod events;
pub mod finish;
pub mod heartbeat;
pub mod inline;
pub mod issued;
pub mod lease;
pub mod release;
pub mod report;
pub mod row;
pub mod secrets;
pub mod seen;
pub mod watch;
