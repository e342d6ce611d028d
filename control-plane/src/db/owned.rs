//! Reading or deleting one row of the caller's organization: a row that is not there, or is another
//! organization's, answers 404 naming what was asked for. The delete statements for every kind of owned row are
//! here, in one table; reads bring their own `SELECT`.

use crate::error::{ApiError, ApiResult};
use hookflow_shared::{CollectionId, FlowId, OrgId, WebhookId};
use sqlx::postgres::PgRow;
use sqlx::{Encode, FromRow, PgExecutor, Postgres, Type};

/// A kind of row an organization owns, deleted by its key; a row within a parent names the parent.
#[derive(Debug, Clone, Copy)]
pub enum Owned {
    Flow,
    Webhook,
    Runner,
    Secret,
    Variable,
    Member,
    Invitation,
    Collection,
    /// A collection's request, by id within its collection.
    CollectionRequest(CollectionId),
    /// A flow's environment, by key within its flow.
    Environment(FlowId),
    /// A captured request, by id within its endpoint.
    Capture(WebhookId),
}

impl Owned {
    /// The statement (`$1` organization, `$2` key, `$3` parent) and the noun a 404 names.
    fn statement(self) -> (&'static str, &'static str) {
        match self {
            Owned::Flow => ("DELETE FROM flows WHERE organization_id = $1 AND id = $2", "flow"),
            Owned::Webhook => ("DELETE FROM webhooks WHERE organization_id = $1 AND id = $2", "webhook"),
            Owned::Runner => ("DELETE FROM runners WHERE organization_id = $1 AND id = $2", "runner"),
            Owned::Secret => ("DELETE FROM secrets WHERE organization_id = $1 AND name = $2", "secret"),
            Owned::Variable => ("DELETE FROM variables WHERE organization_id = $1 AND name = $2", "variable"),
            Owned::Member => ("DELETE FROM memberships WHERE organization_id = $1 AND user_id = $2", "member"),
            Owned::Invitation => ("DELETE FROM invitations WHERE organization_id = $1 AND id = $2", "invitation"),
            Owned::Collection => ("DELETE FROM collections WHERE organization_id = $1 AND id = $2", "collection"),
            Owned::CollectionRequest(_) => (
                "DELETE FROM collection_requests WHERE organization_id = $1 AND id = $2 AND collection_id = $3",
                "request",
            ),
            Owned::Environment(_) => (
                "DELETE FROM flow_environments WHERE organization_id = $1 AND key = $2 AND flow_id = $3",
                "environment",
            ),
            Owned::Capture(_) => {
                ("DELETE FROM captures WHERE organization_id = $1 AND id = $2 AND webhook_id = $3", "captured request")
            }
        }
    }
}

/// Deletes the organization's row of `kind` with `key` (within the parent `kind` names); 404 when nothing was
/// deleted.
pub async fn delete<'c, K>(conn: impl PgExecutor<'c>, kind: Owned, org: OrgId, key: K) -> ApiResult<()>
where
    K: for<'q> Encode<'q, Postgres> + Type<Postgres> + Send,
{
    let query = sqlx::query(kind.statement().0).bind(org).bind(key);
    let query = match kind {
        Owned::CollectionRequest(collection) => query.bind(collection),
        Owned::Environment(flow) => query.bind(flow),
        Owned::Capture(webhook) => query.bind(webhook),
        _ => query,
    };
    run(conn, kind, query).await
}

async fn run<'c, 'q>(
    conn: impl PgExecutor<'c>,
    kind: Owned,
    query: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
) -> ApiResult<()> {
    if query.execute(conn).await?.rows_affected() == 0 {
        return Err(ApiError::not_found(kind.statement().1));
    }
    Ok(())
}

/// The organization's row with `key` as `select` answers it (`$1` the organization, `$2` the key; a `SELECT`, or
/// a `DELETE .. RETURNING`); 404 naming `noun` when there is none.
pub async fn fetch<'c, R, K>(conn: impl PgExecutor<'c>, select: String, org: OrgId, key: K, noun: &str) -> ApiResult<R>
where
    R: for<'r> FromRow<'r, PgRow> + Send + Unpin,
    K: for<'q> Encode<'q, Postgres> + Type<Postgres> + Send,
{
    let row: Option<R> = sqlx::query_as(sqlx::AssertSqlSafe(select)).bind(org).bind(key).fetch_optional(conn).await?;
    row.ok_or_else(|| ApiError::not_found(noun))
}
