//! Starting a transaction that a dropped caller cannot leave half-begun.
//!
//! sqlx 0.9.0's `begin` sends `BEGIN` and counts the transaction only once PostgreSQL has answered; its guard
//! rolls back only what it counted. A caller dropped in between (an HTTP handler whose client disconnects while it
//! begins: a runner leaving with a long poll open, or any hostile client timing its disconnects) returns the
//! connection to the pool inside a transaction nobody ends. Every statement later run on that connection (other
//! requests', other tenants') then joins it: invisible to everyone else, acknowledged to its caller, and rolled
//! back or committed by whichever `begin` comes next. Found by the one-shot runners' test (issue #53): a runner
//! registered, was answered 201, and its row was gone 10 ms later.
//!
//! [`begin`] runs sqlx's `begin` in a task of its own, which no caller can cancel: the transaction always comes
//! into being, and if the caller is gone the task's result is dropped and rolled back like any other transaction.
//! Every transaction of the server starts here (`pool.begin()` anywhere else fails the layer check).

use sqlx::{PgPool, Postgres, Transaction};

/// Begins a transaction on a connection of `pool` (see the module's comment for why not `pool.begin()`).
pub async fn begin(pool: &PgPool) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
    let pool = pool.clone();
    match tokio::spawn(async move { pool.begin().await }).await {
        Ok(begun) => begun,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // The runtime is shutting down: no new transaction.
        Err(_) => Err(sqlx::Error::PoolClosed),
    }
}
