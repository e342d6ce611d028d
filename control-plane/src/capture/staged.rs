//! Bodies over [`STAGED_OVER`] written to storage in parts before their capture is queued (#51): the request's body
//! is held once, in the buffer it was read into, and each part is copied from it only into its own statement (a
//! part's size at a time), where binding the whole body into the batch's statement copied it again (and the
//! connection's write buffer once more). The capture writer's batch assembles the parts into the capture's body and
//! deletes them in the statement that stores it, so a capture is answered only once it is stored whole and durable
//! (`batch`). Parts of a capture that was never stored are deleted by its request, or swept after an hour.

use crate::capture::batch::Outcome;
use crate::db::deadline::Deadline;
use sqlx::PgPool;
use uuid::Uuid;

/// Bodies larger than this are staged in parts.
pub const STAGED_OVER: usize = 1024 * 1024;
/// Bytes per part.
const PART: usize = 1024 * 1024;

/// Writes `body` in parts under a new upload id (committed, so the writer's connection sees them); answers the id.
pub async fn stage(pool: &PgPool, body: &[u8]) -> Result<Uuid, sqlx::Error> {
    let upload = Uuid::now_v7();
    let mut tx = crate::db::begin::begin(pool).await?;
    for (seq, part) in body.chunks(PART).enumerate() {
        sqlx::query("INSERT INTO capture_body_parts (upload_id, seq, data) VALUES ($1, $2, $3)")
            .bind(upload)
            .bind(i32::try_from(seq).unwrap_or(i32::MAX))
            .bind(part)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(upload)
}

/// For a body over [`STAGED_OVER`], its parts written within the request's deadline: `Ok(Some(upload))`, or
/// `Err(())` when they could not be (the capture is answered 503); `Ok(None)` for a smaller body.
pub async fn stage_if_big(pool: &PgPool, deadline: &Deadline, body: &[u8]) -> Result<Option<Uuid>, ()> {
    if body.len() <= STAGED_OVER {
        return Ok(None);
    }
    match deadline.run(stage(pool, body)).await {
        Ok(Ok(upload)) => Ok(Some(upload)),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "writing a big capture body failed; answering 503");
            Err(())
        }
        Err(_) => Err(()),
    }
}

/// Deletes the parts of a capture the writer settled without storing it (the endpoint was gone, the row refused).
/// After a deadline or a failure the writer may still store it: those parts are left to the sweep.
pub async fn settled(pool: &PgPool, upload: Option<Uuid>, outcome: Outcome) {
    if let (Some(upload), Outcome::EndpointGone | Outcome::Rejected) = (upload, outcome) {
        discard(pool, upload).await;
    }
}

/// Deletes the parts of a capture that was not stored.
async fn discard(pool: &PgPool, upload: Uuid) {
    let deleted = sqlx::query("DELETE FROM capture_body_parts WHERE upload_id = $1").bind(upload).execute(pool).await;
    if let Err(e) = deleted {
        tracing::warn!(error = %e, "deleting the parts of a capture that was not stored failed; they are swept later");
    }
}

/// Deletes parts older than an hour: their capture was never stored (its request ended while they were written).
pub async fn sweep(pool: &PgPool) -> Result<u64, sqlx::Error> {
    let deleted = sqlx::query("DELETE FROM capture_body_parts WHERE created_at < now() - interval '1 hour'")
        .execute(pool)
        .await?;
    Ok(deleted.rows_affected())
}
