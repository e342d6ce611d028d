//! Keyset pagination: `limit` (default 50, clamped to 100, below 1 refused) and an opaque `cursor` that encodes
//! the sort key of the last item served, so pages stay stable while rows are inserted.

use crate::error::{ApiError, ApiResult};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hookflow_shared::api::Page;
use hookflow_shared::api::page::{DEFAULT_LIMIT, MAX_LIMIT};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The `limit` and `cursor` query parameters of every list.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Items per page: default 50, values above 100 are clamped to 100.
    #[param(minimum = 1, maximum = 9_223_372_036_854_775_807_i64)]
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// What a list handler answers: one page.
pub type Listed<T> = ApiResult<axum::Json<Page<T>>>;

/// The list parameters are read like any query (`ApiQuery`'s errors), so handlers take `params: ListParams`.
impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ListParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        crate::extract::ApiQuery::<ListParams>::from_request_parts(parts, state).await.map(|q| q.0)
    }
}

/// A validated page request: how many rows, and the key to continue after.
#[derive(Debug)]
pub struct PageRequest<K> {
    pub limit: i64,
    pub after: Option<K>,
}

impl<K> PageRequest<K> {
    /// Rows to fetch: one more than the page, to learn whether another page follows.
    pub fn fetch_limit(&self) -> i64 {
        self.limit + 1
    }
}

/// The page size for a requested `limit`: default 50, clamped to 100, below 1 refused.
pub fn page_size(limit: Option<i64>) -> ApiResult<i64> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if n < 1 => Err(ApiError::invalid("`limit` must be at least 1")),
        Some(n) => Ok(n.min(MAX_LIMIT)),
    }
}

impl ListParams {
    pub fn page<K: DeserializeOwned>(&self) -> ApiResult<PageRequest<K>> {
        let limit = page_size(self.limit)?;
        let after = self.cursor.as_deref().filter(|c| !c.is_empty()).map(decode_cursor).transpose()?;
        Ok(PageRequest { limit, after })
    }
}

pub fn encode_cursor<K: Serialize>(key: &K) -> ApiResult<String> {
    Ok(URL_SAFE_NO_PAD.encode(crate::error::to_json_bytes(key)?))
}

fn decode_cursor<K: DeserializeOwned>(cursor: &str) -> ApiResult<K> {
    URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| ApiError::invalid("`cursor` is not a cursor this list gave out"))
}

/// Turns `limit + 1` fetched rows into a page, with a cursor when more rows follow.
pub fn finish<T, K: Serialize>(
    mut rows: Vec<T>,
    request: &PageRequest<K>,
    key_of: impl Fn(&T) -> K,
) -> ApiResult<Page<T>> {
    let limit = usize::try_from(request.limit).unwrap_or(usize::MAX);
    let next_cursor = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(|last| encode_cursor(&key_of(last))).transpose()?
    } else {
        None
    };
    Ok(Page { items: rows, next_cursor })
}

/// One page of an organization's rows. `sql` selects the rows of organization `$1` that come after the cursor's
/// key `$2` (all of them when it is null), in the list's order, at most `$3`; a list within a parent resource
/// names the parent `$4`. `into` turns a row into an item and `key_of` gives an item's sort key for the cursor.
pub async fn keyset_page<'c, R, K, T>(
    conn: impl sqlx::PgExecutor<'c>,
    sql: String,
    (org, parent): (hookflow_shared::OrgId, Option<uuid::Uuid>),
    params: &ListParams,
    into: impl FnMut(R) -> T,
    key_of: impl Fn(&T) -> K,
) -> ApiResult<Page<T>>
where
    R: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
    K: Serialize
        + DeserializeOwned
        + Clone
        + Send
        + for<'q> sqlx::Encode<'q, sqlx::Postgres>
        + sqlx::Type<sqlx::Postgres>,
{
    let page = params.page::<K>()?;
    let mut query =
        sqlx::query_as::<_, R>(sqlx::AssertSqlSafe(sql)).bind(org).bind(page.after.clone()).bind(page.fetch_limit());
    if let Some(parent) = parent {
        query = query.bind(parent);
    }
    let rows = query.fetch_all(conn).await?;
    finish(rows.into_iter().map(into).collect(), &page, key_of)
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn limits_default_clamp_and_refuse() {
        let p = ListParams::default().page::<Uuid>().expect("default");
        assert_eq!((p.limit, p.fetch_limit()), (50, 51));
        let p = ListParams { limit: Some(1000), cursor: None }.page::<Uuid>().expect("clamped");
        assert_eq!(p.limit, 100);
        assert!(ListParams { limit: Some(0), cursor: None }.page::<Uuid>().is_err());
        assert!(ListParams { limit: None, cursor: Some("garbage!".into()) }.page::<Uuid>().is_err());
    }

    #[test]
    fn cursor_round_trip_and_finish() {
        let ids: Vec<u32> = (0..5).collect();
        let request = PageRequest::<u32> { limit: 3, after: None };
        let page = finish(ids.clone(), &request, |n| *n).expect("page");
        assert_eq!(page.items, vec![0, 1, 2]);
        let cursor = page.next_cursor.expect("more follow");
        let next = ListParams { limit: Some(3), cursor: Some(cursor) }.page::<u32>().expect("cursor");
        assert_eq!(next.after, Some(2));
        let last = finish(vec![3, 4], &next, |n| *n).expect("page");
        assert_eq!(last.next_cursor, None);
    }
}
