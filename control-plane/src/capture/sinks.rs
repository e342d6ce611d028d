//! Executions' own capture URLs (`{{execution.capture_url}}`): `/webhook/<token>`, the token being the execution's
//! id and a 128-bit tag of it under the master key (base64url, 43 characters), so every replica recognises the URLs
//! the cluster hands out without storing them, and knowing an execution's id is not enough to make its URL. A
//! capture there belongs to the execution while it runs and for [`GRACE_MINUTES`] after it ends (the capture
//! writer checks that as it stores); the capture path treats the URL as an endpoint with the organization's default
//! body limit and capture rate, no verification and no custom response.

use crate::cache::BoundedCache;
use crate::capture::cache::{CaptureTarget, Endpoint};
use crate::crypto::MasterKey;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hookflow_shared::{ExecutionId, OrgId};
use sqlx::PgPool;
use std::sync::Arc;
use std::time::Duration;

/// How long after its execution ends a capture URL still takes captures (a provider's retries of a late
/// webhook); the capture writer's statement holds the same interval.
pub const GRACE_MINUTES: i64 = 15;
/// Separates these tags from the master key's other uses.
const TAG_LABEL: &str = "execution-capture-url";
/// The token's length: 32 bytes in unpadded base64url.
const TOKEN_LEN: usize = 43;
/// How long a looked-up execution is trusted without asking again.
const KNOWN_TTL: Duration = Duration::from_secs(10);
/// Executions kept in memory at most (each is small; the oldest leave first).
const MAX_KNOWN: usize = 100_000;

/// The token of `execution`'s capture URL.
pub fn token(master: &MasterKey, execution: ExecutionId) -> String {
    let id = *uuid::Uuid::from(execution).as_bytes();
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(&id);
    bytes[16..].copy_from_slice(&master.tag(TAG_LABEL, &id));
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The capture URL of `execution` under `capture_base` (the endpoints' capture origin).
pub fn capture_url(capture_base: &str, master: &MasterKey, execution: ExecutionId) -> String {
    format!("{capture_base}/webhook/{}", token(master, execution))
}

/// The execution a token names, when it is one this cluster made.
pub fn parse(master: &MasterKey, text: &str) -> Option<ExecutionId> {
    if text.len() != TOKEN_LEN {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
    let (id, tag) = bytes.split_at_checked(16)?;
    master.check_tag(TAG_LABEL, id, tag).then(|| uuid::Uuid::from_slice(id).ok().map(ExecutionId::from))?
}

/// Executions' capture URLs as the capture path sees them: looked up once per [`KNOWN_TTL`].
#[derive(Debug)]
pub struct ExecutionSinks {
    known: BoundedCache<ExecutionId, Option<Arc<Endpoint>>>,
}

impl Default for ExecutionSinks {
    fn default() -> Self {
        Self { known: BoundedCache::new(MAX_KNOWN).with_ttl(KNOWN_TTL) }
    }
}

impl ExecutionSinks {
    /// The endpoint an execution's URL captures as; `None` when the execution is gone or ended more than
    /// [`GRACE_MINUTES`] ago. Capture rates above `max_rate` are held to it.
    pub async fn endpoint(
        &self,
        pool: &PgPool,
        execution: ExecutionId,
        max_rate: i32,
    ) -> Result<Option<Arc<Endpoint>>, sqlx::Error> {
        if let Some(known) = self.known.get(&execution) {
            return Ok(known);
        }
        let row: Option<(OrgId, i64, i32)> = sqlx::query_as(
            "SELECT e.organization_id, o.default_max_body_bytes, o.capture_rate_limit_per_s
             FROM executions e JOIN organizations o ON o.id = e.organization_id
             WHERE e.id = $1 AND (e.finished_at IS NULL OR e.finished_at > now() - make_interval(mins => $2))",
        )
        .bind(execution)
        .bind(GRACE_MINUTES as i32)
        .fetch_optional(pool)
        .await?;
        let endpoint = row.map(|(org_id, max_body_bytes, rate)| {
            Arc::new(Endpoint::new(CaptureTarget::Execution(execution), org_id, max_body_bytes, rate.min(max_rate)))
        });
        self.known.insert(execution, endpoint.clone());
        Ok(endpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_name_their_execution_and_nothing_else() {
        let master = MasterKey::random();
        let execution = ExecutionId::from(uuid::Uuid::now_v7());
        let token = token(&master, execution);
        assert_eq!(token.len(), TOKEN_LEN);
        assert_eq!(parse(&master, &token), Some(execution));
        assert_eq!(parse(&MasterKey::random(), &token), None, "another cluster's key");
        let mut forged = token.into_bytes();
        forged[30] = if forged[30] == b'A' { b'B' } else { b'A' };
        assert_eq!(parse(&master, std::str::from_utf8(&forged).expect("ascii")), None, "a changed tag");
        assert_eq!(parse(&master, &uuid::Uuid::from(execution).to_string()), None, "the bare id");
    }
}
