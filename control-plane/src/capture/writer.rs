//! The capture writer: captures share statements through the one group-commit loop (`db::group_commit`: whatever
//! arrived while a batch was being stored goes into the next, one batch at a time, on a connection the loop keeps
//! while writes come). In the same statement a batch bumps this server's slot of the endpoints' counts and of the
//! per-minute analytics counters, and NOTIFYs the streams; a row the database refuses is isolated (`batch`). A
//! capture is acknowledged only after its batch commits. Ids (UUIDv7) are assigned in batch order as each batch is
//! written, and batches commit in that order, so "captures after id X" is gap-free for live streams and
//! resumption. Room for a body is reserved in the loop's byte budget before the body is read (a sender past it is
//! answered 503), and a batch closes at 16 MiB: 150 bodies of 10 MiB never become one statement of 1.5 GB that
//! PostgreSQL refuses with its small neighbours.
//!
//! While many captures wait for their batch at once, and for 50 ms after (`Pressure`), this replica's delivery
//! sender yields: its attempts start at a slow pace until then (`delivery::room`), so a flood's senders are answered
//! first and the deliveries it owes follow.
//!
//! Why one batch at a time: two batches in flight need an explicit transaction each (BEGIN, the statement, a wait
//! for the earlier commit, COMMIT: three round trips instead of one) to keep commits in order, and split the
//! waiting captures into smaller batches. Measured side by side (`hookflow-bench capture`, 64 connections):
//! 22-24k captures/s with two in flight, 31-33k with one.
//!
//! Why a batch waits for its own flush: committing without waiting (`synchronous_commit` off for the batch) and
//! making it durable with a flushing commit on a second connection before answering lets the writer start the next
//! batch sooner, but senders that wait for their answers (every webhook sender does) wait for the flush all the
//! same, and the next batch holds only what arrived meanwhile. Measured in three alternating pairs
//! (`hookflow-bench capture`, 64 connections): 24,000, 20,200 and 20,000 captures/s flushed apart against 23,300,
//! 23,300 and 20,100 as here. Without any flush (the cluster's `synchronous_commit` off: not durable; one
//! experiment) three runs reached 25,100, 23,200 and 22,800/s, where durable runs that hour reached 19,800-20,500.

use crate::capture::batch;
use crate::capture::refused::{self, RefusedCapture};
use crate::db::byte_budget::Reservation;
use crate::db::group_commit::{BatchWrite, GroupCommit};
use crate::error::{ApiError, ApiResult};
use hookflow_shared::{CaptureId, OrgId};
use sqlx::PgConnection;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

/// Rows per statement at most.
const MAX_BATCH: usize = 512;
/// Counter slots writers spread over (slot 0 is where deletions and retention subtract): each server takes one at
/// random, so the writers of several replicas rarely wait on each other's counter rows.
const WRITER_SLOTS: u32 = 8;
/// This server's counter slot.
static SLOT: LazyLock<i16> = LazyLock::new(|| 1 + (rand::random::<u32>() % WRITER_SLOTS) as i16);
/// Captures waiting for the writer before senders wait too (back-pressure).
const QUEUE: usize = 8192;
/// Bytes of large bodies (over 64 KiB each) read and waiting for the writer at once.
const WAITING_BYTES: usize = 160 * 1024 * 1024;

pub use crate::capture::batch::{CaptureRecord, Outcome};
pub use crate::capture::handoff::Handed;

#[derive(Debug, Clone)]
pub struct CaptureWriter {
    commit: GroupCommit<CaptureRecord>,
    /// Counts what `reject` refused (nothing stored).
    refused: GroupCommit<RefusedCapture>,
    /// Captures waiting for their batch to commit.
    storing: Pressure,
}

/// Captures waiting at once for their batch to commit at or past which the capture path is pressed: a batch's
/// worth (at 1,000 captures/s a handful wait; a flood of 64 senders keeps 64 waiting).
pub const PRESSED_AT: usize = 32;

/// How long the capture path stays pressed after captures last waited at [`PRESSED_AT`]: a flood's senders all
/// answered at once by a commit and not yet back (a few milliseconds) do not end it.
const PRESSED_FOR: Duration = Duration::from_millis(50);

/// How many captures wait for their batch to commit on this replica, and when they last reached [`PRESSED_AT`]:
/// the sender yields while the capture path is pressed.
#[derive(Debug, Clone, Default)]
pub struct Pressure(Arc<Waiters>);

#[derive(Debug, Default)]
struct Waiters {
    now: AtomicUsize,
    /// Milliseconds from [`CLOCK`] when they last reached [`PRESSED_AT`], plus one (0: never).
    pressed_at: AtomicU64,
}

/// The pressure's clock.
static CLOCK: LazyLock<Instant> = LazyLock::new(Instant::now);

fn clock_ms() -> u64 {
    CLOCK.elapsed().as_millis() as u64 + 1
}

impl Pressure {
    /// Whether [`PRESSED_AT`] or more captures wait, or did less than [`PRESSED_FOR`] ago.
    pub fn pressed(&self) -> bool {
        if self.0.now.load(Ordering::Relaxed) >= PRESSED_AT {
            return true;
        }
        let at = self.0.pressed_at.load(Ordering::Relaxed);
        at != 0 && clock_ms().saturating_sub(at) < PRESSED_FOR.as_millis() as u64
    }

    /// Sets how many captures wait, as if they had always been that many (the sender's tests).
    #[cfg(test)]
    pub fn set(&self, waiting: usize) {
        self.0.now.store(waiting, Ordering::Relaxed);
        self.0.pressed_at.store(if waiting >= PRESSED_AT { clock_ms() } else { 0 }, Ordering::Relaxed);
    }

    /// Counts one capture in until the guard is dropped (answered, failed or cancelled).
    fn waiting(&self) -> Waiting {
        if self.0.now.fetch_add(1, Ordering::Relaxed) + 1 >= PRESSED_AT {
            self.0.pressed_at.store(clock_ms(), Ordering::Relaxed);
        }
        Waiting(self.0.clone())
    }
}

struct Waiting(Arc<Waiters>);

impl Drop for Waiting {
    /// Counts the capture out; the hold counts from the last moment a batch's worth waited, their answers included.
    fn drop(&mut self) {
        if self.0.now.fetch_sub(1, Ordering::Relaxed) >= PRESSED_AT {
            self.0.pressed_at.store(clock_ms(), Ordering::Relaxed);
        }
    }
}

impl BatchWrite for CaptureRecord {
    type Out = (Outcome, Option<Handed>);

    /// About how many bytes the row takes in a statement.
    fn bytes(&self) -> usize {
        256 + self.body.len()
            + self.headers_json.len()
            + self.query_json.len()
            + self.query_string.len()
            + self.path.len()
    }

    /// Stores a batch (refused rows isolated, each answered on its own), ids taken in batch order.
    async fn write_many(conn: &mut PgConnection, records: &[Self]) -> ApiResult<Vec<Self::Out>> {
        let ids: Vec<CaptureId> = records.iter().map(|_| CaptureId::now_v7()).collect();
        let rows: Vec<&CaptureRecord> = records.iter().collect();
        let lease = uuid::Uuid::new_v4();
        match batch::write(conn, batch::Batch { records: &rows, ids: &ids, slot: *SLOT, lease }).await {
            Ok(outcomes) => {
                let stored = outcomes.iter().filter(|(o, _)| matches!(o, Outcome::Stored(_))).count();
                crate::metrics::capture_batch(stored, outcomes.len() - stored);
                Ok(outcomes)
            }
            Err(e) => {
                tracing::error!(error = %e, rows = rows.len(), "storing captures failed; answering 503");
                crate::metrics::capture_batch(0, rows.len());
                Err(e.into())
            }
        }
    }
}

impl CaptureWriter {
    /// Starts the writer's loop; it ends when every `CaptureWriter` clone is dropped and the queue is drained.
    pub fn start(pool: sqlx::PgPool) -> Self {
        Self {
            commit: GroupCommit::start_sized(pool.clone(), MAX_BATCH, QUEUE, WAITING_BYTES, "captures"),
            refused: GroupCommit::start(pool, refused::MAX_BATCH, "refused captures"),
            storing: Pressure::default(),
        }
    }

    /// How many captures wait for their batch (shared: it follows the writer).
    pub fn pressure(&self) -> Pressure {
        self.storing.clone()
    }

    /// Reserves room for a body of up to `bytes` before it is read (held until the capture is answered), or 503
    /// with `Retry-After` when large bodies already fill the budget.
    pub fn reserve(&self, bytes: usize) -> Result<Reservation, ApiError> {
        self.commit.reserve(bytes)
    }

    /// `reserve` counted against the organization's share (a quarter of the budget): one tenant's stalled or slow
    /// senders never hold room other tenants' bodies need.
    pub fn reserve_for(&self, org_id: OrgId, bytes: usize) -> Result<Reservation, ApiError> {
        self.commit.reserve_for(org_id, bytes)
    }

    /// Stores a capture with its room in the budget (given back once it is stored); returns once it is committed
    /// (or failed), with the deliveries handed to this replica's sender.
    pub async fn store(&self, record: CaptureRecord, room: Reservation) -> (Outcome, Option<Handed>) {
        let _waiting = self.storing.waiting();
        self.commit.submit_reserved(record, room).await.unwrap_or((Outcome::Failed, None))
    }

    /// Counts a capture `reject` refused in its endpoint's analytics; waits for the count's batch (a flood of
    /// refusals waits its turn). A count that cannot be written is logged, never the sender's problem.
    pub async fn count_refused(&self, refused: RefusedCapture) {
        if let Err(e) = self.refused.submit(refused).await {
            tracing::warn!(error = %e.message, "counting a refused capture failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_presses_until_its_captures_stop_waiting_for_a_while() {
        let pressure = Pressure::default();
        let mut waiting: Vec<Waiting> = (1..PRESSED_AT).map(|_| pressure.waiting()).collect();
        assert!(!pressure.pressed(), "fewer than a batch's worth");
        waiting.push(pressure.waiting());
        assert!(pressure.pressed());
        // A commit answers them all: still pressed while the flood's senders come back (looked at only if this
        // thread was not kept off the cores for most of the while).
        let cleared = Instant::now();
        waiting.clear();
        let pressed = pressure.pressed();
        if cleared.elapsed() < PRESSED_FOR / 2 {
            assert!(pressed, "pressed for a while after");
        }
        std::thread::sleep(PRESSED_FOR + Duration::from_millis(20));
        assert!(!pressure.pressed(), "no longer once they stayed away");
    }
}
