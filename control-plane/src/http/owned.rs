//! Deleting one row of the caller's organization: a row that is not there, or is another organization's, answers
//! 404 naming what was asked for.

use crate::http::error::{ApiError, ApiResult};
use sqlx::{Encode, PgExecutor, Postgres, Type};
use uuid::Uuid;

/// Runs `sql` (`DELETE ... WHERE organization_id = $1 AND <key> = $2 [AND <parent> = $3]`) and answers 404
/// (`what` not found) when it deleted nothing.
pub async fn delete<'c, K>(
    conn: impl PgExecutor<'c>,
    sql: &'static str,
    org: Uuid,
    key: K,
    parent: Option<Uuid>,
    what: &str,
) -> ApiResult<()>
where
    K: for<'q> Encode<'q, Postgres> + Type<Postgres> + Send,
{
    let mut query = sqlx::query(sql).bind(org).bind(key);
    if let Some(parent) = parent {
        query = query.bind(parent);
    }
    if query.execute(conn).await?.rows_affected() == 0 {
        return Err(ApiError::not_found(what));
    }
    Ok(())
}
