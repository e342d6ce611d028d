//! A claimed delivery's attempt, whoever makes it (the server's sender, or an installed runner through the runner
//! protocol): matching the capture against the destination's `q`/`filter` when not yet done (a capture that does
//! not match loses the row) and the request to send (`prepare`: gone capture, `cancelled`); `recording` records
//! the attempt.

use crate::api::webhooks::destinations::claim::Claimed;
use crate::api::webhooks::destinations::model::{conditions, secret_name};
use crate::api::webhooks::search::push_cond;
use crate::crypto::Sealed;
use crate::outbound::signed::outgoing_headers;
use crate::signature::standard_webhooks_secret;
use crate::state::AppState;
use hookflow_shared::api::runners::NetworkPolicy;
use sqlx::{Postgres, QueryBuilder};
use std::time::Duration;

/// How long a destination's match may run: past it the capture is taken as not matching.
const MATCH_TIMEOUT: Duration = Duration::from_secs(2);

/// One request ready to send: its URL (or why none), method, headers (signed), body and timeout.
#[derive(Debug)]
pub struct Prepared {
    pub url: Option<reqwest::Url>,
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: bytes::Bytes,
    pub timeout: Duration,
    /// Where the server may send it (its organization's policy).
    pub policy: NetworkPolicy,
}

/// The request a claimed delivery sends; `None` when there is none to send: its capture does not match (the row
/// is deleted) or is gone (`cancelled`).
/// The capture's parts are moved out of `row` (a body is never copied).
pub async fn prepare(app: &AppState, row: &mut Claimed) -> Result<Option<Prepared>, sqlx::Error> {
    if row.matched.is_none() && !matches(app, row).await? {
        sqlx::query("DELETE FROM deliveries WHERE id = $1").bind(row.id).execute(&app.pool).await?;
        return Ok(None);
    }
    let (Some(method), Some(path), Some(query_string), Some(headers), Some(body)) =
        (row.method.take(), row.path.take(), row.query_string.take(), row.headers.take(), row.body.take())
    else {
        sqlx::query("UPDATE deliveries SET status = 'cancelled' WHERE id = $1 AND status = 'pending'")
            .bind(row.id)
            .execute(&app.pool)
            .await?;
        return Ok(None);
    };
    let policy = if row.private_network || app.settings.allow_private_targets {
        NetworkPolicy::Private
    } else {
        NetworkPolicy::Public
    };
    // A capture whose signature did not verify is never vouched for: sent unsigned, saying its verdict.
    let unverified = unvouched_verdict(row);
    let secret = if unverified.is_some() { None } else { signing_secret(app, row) };
    let mut headers = outgoing_headers(&headers.0, &row.id.to_string(), secret.as_deref(), &body);
    if let Some(verdict) = unverified {
        headers.push((VERIFICATION_HEADER.to_owned(), verdict.to_owned()));
    }
    Ok(Some(Prepared {
        url: target_url(&row.url, &path, &query_string),
        method,
        headers,
        body: bytes::Bytes::from(body),
        timeout: Duration::from_millis(u64::try_from(row.timeout_ms).unwrap_or(10_000)),
        policy,
    }))
}

/// The header an unsigned delivery of a capture that failed its endpoint's verification carries (its verdict).
pub const VERIFICATION_HEADER: &str = "hookflow-verification";

/// The verdict of a capture its endpoint's verification did not find `valid` (`invalid`, `missing`, `duplicate`,
/// or `unverified` when verification was configured after it came); `None` when it verified or nothing verifies.
fn unvouched_verdict(row: &Claimed) -> Option<&str> {
    let verdict = row.signature_verdict.as_deref()?;
    let failed = matches!(verdict, "invalid" | "missing" | "duplicate");
    (failed || (row.verifying && verdict != "valid")).then_some(verdict)
}

/// Whether the capture meets the destination's conditions, by the search's own SQL under [`MATCH_TIMEOUT`].
pub async fn matches(app: &AppState, row: &Claimed) -> Result<bool, sqlx::Error> {
    let Ok(conds) = conditions(row.q.as_deref(), row.filter.as_ref().map(|f| &f.0)) else { return Ok(false) };
    let matched = if conds.is_empty() {
        true
    } else {
        let mut tx = crate::db::begin::begin(&app.pool).await?;
        sqlx::query("SELECT set_config('statement_timeout', $1, true)")
            .bind(format!("{}ms", MATCH_TIMEOUT.as_millis()))
            .execute(&mut *tx)
            .await?;
        let mut b = QueryBuilder::<Postgres>::new("SELECT EXISTS (SELECT 1 FROM captures WHERE organization_id = ");
        b.push_bind(row.organization_id).push(" AND id = ").push_bind(row.capture_id);
        for cond in &conds {
            push_cond(&mut b, cond);
        }
        b.push(")");
        match b.build_query_scalar::<bool>().fetch_one(&mut *tx).await {
            Ok(matched) => matched,
            Err(e) if crate::error::is_statement_timeout(&e) => false,
            Err(e) => return Err(e),
        }
    };
    if matched {
        sqlx::query("UPDATE deliveries SET matched = true WHERE id = $1").bind(row.id).execute(&app.pool).await?;
    }
    Ok(matched)
}

/// The destination's signing secret's bytes, opened; `None` when it signs nothing (or cannot be opened: sent
/// unsigned would be wrong, so the receiver's check fails it, as it should).
pub fn signing_secret(app: &AppState, row: &Claimed) -> Option<Vec<u8>> {
    let sealed = Sealed::from_columns(row.signing_secret.clone(), row.signing_nonce.clone(), row.signing_key_version)?;
    let opened = app.settings.master_key.open(row.organization_id, &secret_name(row.destination_id), &sealed);
    match opened {
        Ok(secret) => standard_webhooks_secret(std::str::from_utf8(&secret).ok()?),
        Err(_) => {
            tracing::warn!(destination_id = %row.destination_id, "a destination's signing secret cannot be opened");
            Some(Vec::new())
        }
    }
}

/// The URL an attempt goes to: the destination's path (a trailing `/` dropped) followed by the capture's
/// sub-path; the destination's query, then the capture's, joined with `&`. `None` when the sub-path has a `.` or
/// `..` segment (also percent-encoded: `%2e%2e`), which would climb out of the destination's path: the attempt
/// fails instead of going elsewhere on the host. A `\` (a separator to URL parsers) is sent encoded.
pub fn target_url(destination: &str, sub_path: &str, query: &str) -> Option<reqwest::Url> {
    let mut url = reqwest::Url::parse(destination).ok()?;
    let base = url.path().trim_end_matches('/').to_owned();
    let mut path = base.clone();
    for (i, segment) in sub_path.split('/').enumerate() {
        if i == 0 && segment.is_empty() {
            continue;
        }
        if is_dot_segment(segment) {
            return None;
        }
        path.push('/');
        for c in segment.chars() {
            match c {
                '\\' => path.push_str("%5C"),
                '\t' => path.push_str("%09"),
                '\n' => path.push_str("%0A"),
                '\r' => path.push_str("%0D"),
                c => path.push(c),
            }
        }
    }
    url.set_path(if path.is_empty() { "/" } else { &path });
    // Belt and braces: whatever the parser made of it stays under the destination's path.
    if !url.path().starts_with(&base) || (url.path().len() > base.len() && !url.path()[base.len()..].starts_with('/')) {
        return None;
    }
    let joined = match (url.query().filter(|q| !q.is_empty()), query.is_empty()) {
        (Some(own), false) => Some(format!("{own}&{query}")),
        (Some(own), true) => Some(own.to_owned()),
        (None, false) => Some(query.to_owned()),
        (None, true) => None,
    };
    url.set_query(joined.as_deref());
    Some(url)
}

/// Whether a raw path segment means `.` or `..` to a URL parser (which decodes `%2e` and skips tabs and newlines).
fn is_dot_segment(segment: &str) -> bool {
    let normalized = segment.replace(['\t', '\n', '\r'], "").to_ascii_lowercase().replace("%2e", ".");
    normalized == "." || normalized == ".."
}

#[cfg(test)]
mod tests {
    use super::target_url;

    #[test]
    fn the_target_joins_paths_and_queries() {
        let url = |d: &str, p: &str, q: &str| target_url(d, p, q).map(|u| u.to_string());
        assert_eq!(url("http://h/in/", "/orders", "a=1").as_deref(), Some("http://h/in/orders?a=1"));
        assert_eq!(url("http://h/in?k=v", "/orders", "a=1").as_deref(), Some("http://h/in/orders?k=v&a=1"));
        assert_eq!(url("http://h", "", "").as_deref(), Some("http://h/"));
        assert_eq!(url("http://h/x?k=v", "", "").as_deref(), Some("http://h/x?k=v"));
        assert_eq!(url("http://h/in", "/a%2Fb/c", "").as_deref(), Some("http://h/in/a%2Fb/c"));
    }

    #[test]
    fn a_sub_path_never_climbs_out_of_the_destination_path() {
        let url = |p: &str| target_url("https://h/hooks/", p, "").map(|u| u.to_string());
        for escape in
            ["/..", "/../admin/x", "/%2e%2e/%2e%2e/admin/x", "/%2E%2e/x", "/.%2e/x", "/%2e/x", "/./x", "/a/../../x"]
        {
            assert_eq!(url(escape), None, "{escape}");
        }
        assert_eq!(url("/a\\..\\..\\admin").as_deref(), Some("https://h/hooks/a%5C..%5C..%5Cadmin"));
        assert_eq!(url("/...").as_deref(), Some("https://h/hooks/..."));
        assert_eq!(url("/%2e%2e%2fadmin").as_deref(), Some("https://h/hooks/%2e%2e%2fadmin"));
        for p in ["/x", "/a/b?c", "/a#b", "/%2e%2e%2fadmin"] {
            assert!(url(p).expect(p).starts_with("https://h/hooks/"), "{p}");
        }
    }
}
