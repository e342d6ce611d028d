//! Group commit: callers hand their write to one task, which runs whatever arrived while the previous batch was
//! being written as the next batch (one statement, one commit) and answers each caller with its own outcome. Under
//! load, N concurrent writes cost one round trip, one executor start-up and one commit instead of N; alone, a
//! write waits for nothing. A caller is answered only after its batch committed (or failed). Large writes wait
//! within a byte budget (past it the caller is answered 503 at once), and a batch closes at `BATCH_BYTES`.

use crate::db::byte_budget::{self, ByteBudget, Reservation};
use crate::error::{ApiError, ApiResult};
use hookflow_shared::OrgId;
use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};
use std::future::Future;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Writes waiting for the task before callers wait too (back-pressure).
const QUEUE: usize = 4096;
/// Bytes one statement carries at most; a write larger than this goes alone.
pub const BATCH_BYTES: usize = 16 * 1024 * 1024;
/// Bytes of large writes that may wait for one task at once.
pub const WAITING_BYTES: usize = 128 * 1024 * 1024;
/// How long the task keeps its connection with nothing to write.
const LINGER: Duration = Duration::from_millis(500);
/// How often a batch in flight looks whether its pool moved to another host.
const MOVE_CHECK: Duration = Duration::from_secs(1);

/// A write that many can share one statement: the statement takes a batch and answers one outcome per write, in
/// order.
pub trait BatchWrite: Sized + Send + Sync + 'static {
    type Out: Send + 'static;

    fn write_many(conn: &mut PgConnection, batch: &[Self]) -> impl Future<Output = ApiResult<Vec<Self::Out>>> + Send;

    /// About how many bytes this write puts into a statement (its budget share and its part of a batch).
    fn bytes(&self) -> usize;

    /// This write alone, as a batch of one (callers in a transaction, and a refused batch's writes one by one).
    fn write_one(&self, conn: &mut PgConnection) -> impl Future<Output = ApiResult<Self::Out>> + Send {
        async move {
            let mut answers = Self::write_many(conn, std::slice::from_ref(self)).await?;
            match (answers.pop(), answers.is_empty()) {
                (Some(answer), true) => Ok(answer),
                _ => Err(ApiError::internal_because("a batch of one answered another count")),
            }
        }
    }
}

/// A write waiting for its batch, with where its outcome goes.
/// The write's room in the byte budget travels with it: it is given back once the write is stored, even when its
/// sender went away while it waited (else a cancelled sender's body would wait outside the budget).
type Pending<W> = (W, oneshot::Sender<ApiResult<<W as BatchWrite>::Out>>, Reservation);

/// The handle callers submit to; the task ends when every clone is dropped and the queue is drained.
#[derive(Debug)]
pub struct GroupCommit<W: BatchWrite> {
    queue: mpsc::Sender<Pending<W>>,
    budget: ByteBudget,
}

impl<W: BatchWrite> Clone for GroupCommit<W> {
    fn clone(&self) -> Self {
        Self { queue: self.queue.clone(), budget: self.budget.clone() }
    }
}

impl<W: BatchWrite> GroupCommit<W> {
    /// Starts the task, which writes batches of at most `max_batch` writes and `BATCH_BYTES`, one at a time;
    /// `what` names the writes in the 503 of a full budget.
    pub fn start(pool: PgPool, max_batch: usize, what: &'static str) -> Self {
        Self::start_sized(pool, max_batch, QUEUE, WAITING_BYTES, what)
    }

    /// `start` with the queue's length and the waiting budget's size given.
    pub fn start_sized(pool: PgPool, max_batch: usize, queue: usize, waiting_bytes: usize, what: &'static str) -> Self {
        let (queue, pending) = mpsc::channel::<Pending<W>>(queue);
        tokio::spawn(run(pool, pending, max_batch));
        Self { queue, budget: ByteBudget::new(waiting_bytes, waiting_bytes / 4, what) }
    }

    /// Room in the byte budget for a write of `bytes` (held until dropped), or 503 with `Retry-After` when large
    /// writes fill it: for callers that reserve before they have the write (a body not read yet).
    pub fn reserve(&self, bytes: usize) -> ApiResult<Reservation> {
        self.budget.reserve(bytes)
    }

    /// `reserve` counted against `owner`'s share of the budget (a quarter of it).
    pub fn reserve_for(&self, owner: OrgId, bytes: usize) -> ApiResult<Reservation> {
        self.budget.reserve_for(Some(owner), bytes)
    }

    /// Submits a write and waits until its batch committed (or failed); 503 when the task is gone (the server is
    /// stopping), and at once when large writes already fill the byte budget.
    pub async fn submit(&self, write: W) -> ApiResult<W::Out> {
        let room = self.budget.reserve(write.bytes())?;
        self.submit_reserved(write, room).await
    }

    /// `submit` counted against `owner`'s share of the byte budget: one organization's large writes wait within
    /// its share, and past it only its own are answered 503.
    pub async fn submit_for(&self, owner: OrgId, write: W) -> ApiResult<W::Out> {
        let room = self.budget.reserve_for(Some(owner), write.bytes())?;
        self.submit_reserved(write, room).await
    }

    /// `submit` for a write whose room the caller reserved (`reserve`, `reserve_for`): the room goes with the write and
    /// is given back once it is stored.
    pub async fn submit_reserved(&self, write: W, room: Reservation) -> ApiResult<W::Out> {
        let (reply, outcome) = oneshot::channel();
        self.queue.send((write, reply, room)).await.map_err(|_| ApiError::unavailable())?;
        outcome.await.unwrap_or_else(|_| Err(ApiError::unavailable()))
    }
}

/// The task. While writes keep coming it keeps its connection (no acquire per batch; its statements stay prepared
/// and planned); after `LINGER` without any the connection goes back to the pool. Ends when every handle is gone.
async fn run<W: BatchWrite>(pool: PgPool, mut pending: mpsc::Receiver<Pending<W>>, max_batch: usize) {
    let mut batch = Vec::with_capacity(max_batch);
    let mut held: Option<PoolConnection<Postgres>> = None;
    loop {
        let received = if held.is_some() {
            match tokio::time::timeout(LINGER, pending.recv_many(&mut batch, max_batch)).await {
                Ok(received) => received,
                Err(_) => {
                    held = None;
                    continue;
                }
            }
        } else {
            pending.recv_many(&mut batch, max_batch).await
        };
        if received == 0 {
            return;
        }
        let runs = byte_budget::cut(batch.iter().map(|(write, _, _)| write.bytes()), BATCH_BYTES);
        for run in runs {
            let (mut writes, mut replies, mut rooms) = (Vec::with_capacity(run), Vec::with_capacity(run), Vec::new());
            for (write, reply, room) in batch.drain(..run) {
                writes.push(write);
                replies.push(reply);
                rooms.push(room);
            }
            let outcomes = write_batch(&pool, &mut held, &writes).await;
            // The writes' room is given back once they are stored, whether or not their senders still wait.
            drop((writes, rooms));
            for (reply, outcome) in replies.into_iter().zip(outcomes) {
                let _ = reply.send(outcome);
            }
        }
    }
}

/// Writes one batch on the held connection (or a fresh one), keeping the connection unless the database was
/// unavailable. A batch whose pool moved to another host meanwhile (a failover: `db::follow`), or that is not
/// written within the statement timeout plus a margin (`db::statement_deadline`: a frozen host never runs its own
/// timeout), is given up and answered 503, its connection dropped, so a primary that froze with the batch in
/// flight never holds the writer: the next batch goes to the new primary.
async fn write_batch<W: BatchWrite>(
    pool: &PgPool,
    held: &mut Option<PoolConnection<Postgres>>,
    writes: &[W],
) -> Vec<ApiResult<W::Out>> {
    let connection = match held.take() {
        Some(conn) => Ok(conn),
        None => pool.acquire().await,
    };
    match connection {
        Ok(mut conn) => {
            let written = tokio::select! {
                outcomes = tokio::time::timeout(crate::db::statement_deadline(), whole_or_each(&mut conn, writes)) => {
                    outcomes.ok()
                }
                () = moved(pool) => None,
            };
            let Some(outcomes) = written else {
                tracing::warn!(
                    writes = writes.len(),
                    "the database moved, or did not answer within the statement timeout, with a batch in flight; \
                     answering 503"
                );
                drop(conn.detach());
                return writes.iter().map(|_| Err(ApiError::unavailable())).collect();
            };
            if !outcomes.iter().any(|o| o.as_ref().is_err_and(ApiError::is_unavailable)) {
                *held = Some(conn);
            }
            outcomes
        }
        Err(e) => {
            let e = ApiError::from(e);
            writes.iter().map(|_| Err(e.clone())).collect()
        }
    }
}

/// Resolves once the pool's new connections go elsewhere than when it was called (looked at every second).
async fn moved(pool: &PgPool) {
    let options = pool.connect_options();
    loop {
        tokio::time::sleep(MOVE_CHECK).await;
        if !std::sync::Arc::ptr_eq(&options, &pool.connect_options()) {
            return;
        }
    }
}

/// Writes a batch in one statement, or, when the database refuses it as a whole (not when it is unavailable: that
/// would only wait again), write by write, so one bad write fails alone: an answer per write, in order.
async fn whole_or_each<W: BatchWrite>(conn: &mut PgConnection, writes: &[W]) -> Vec<ApiResult<W::Out>> {
    match W::write_many(conn, writes).await {
        Ok(answers) if answers.len() == writes.len() => answers.into_iter().map(Ok).collect(),
        Ok(_) => writes.iter().map(|_| Err(ApiError::internal_because("a batch answered the wrong count"))).collect(),
        Err(e) if writes.len() > 1 && !e.is_unavailable() => {
            let mut answers = Vec::with_capacity(writes.len());
            for write in writes {
                answers.push(write.write_one(conn).await);
            }
            answers
        }
        Err(e) => writes.iter().map(|_| Err(e.clone())).collect(),
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn a_batch_in_flight_sees_its_pool_move() {
        let options = crate::db::parse_url("postgres://hookflow@127.0.0.1:1/hookflow").expect("url");
        let pool = crate::db::pool(options.clone(), 1);
        let waiting = tokio::spawn({
            let pool = pool.clone();
            async move { super::moved(&pool).await }
        });
        tokio::time::sleep(super::MOVE_CHECK * 2).await;
        assert!(!waiting.is_finished(), "nothing moved yet");
        pool.set_connect_options(options.port(2));
        tokio::time::timeout(super::MOVE_CHECK * 3, waiting)
            .await
            .expect("seen within the check period")
            .expect("task");
    }
}
