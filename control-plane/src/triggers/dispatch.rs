//! One dispatcher turn: takes the launches one organization's captures owe (`trigger_launches`, its oldest first,
//! `FOR UPDATE SKIP LOCKED`, so replicas share them and never take one twice), the organizations taken round-robin
//! so that one with a backlog never holds up another's; decides each (`decide`) and deletes the decided rows, all
//! in one transaction: a launch is made exactly when its row goes, whatever crashes in between. A turn ends after
//! a match that timed out or after [`TURN_BUDGET`], leaving the rest owed for the organization's next turn, so
//! another organization waits at most about the budget and one match.

use crate::error::ApiResult;
use crate::state::AppState;
use crate::triggers::decide::{Decision, Owed, decide};
use crate::triggers::guard::{self, Refusal, Refused};
use hookflow_shared::{CaptureId, OrgId, WebhookId};
use sqlx::PgConnection;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Owed launches one turn takes at most (all of one organization).
pub const BATCH: i64 = 64;
/// A turn decides no more rows once it has run this long (the rest wait for the organization's next turn).
const TURN_BUDGET: Duration = Duration::from_millis(500);
/// Organizations one pass tries before it gives up (their owed launches all held by other replicas).
const TRIES: usize = 16;

/// One turn, of the next organization after `cursor` with owed launches (round-robin, wrapping; `cursor` moves
/// to it); how many owed launches it decided (0: none is owed, or all are held by other replicas). Fails, leaving
/// every row owed, only when the database does.
pub async fn pass(app: &AppState, cursor: &mut Option<OrgId>) -> ApiResult<usize> {
    let mut first: Option<OrgId> = None;
    for _ in 0..TRIES {
        let Some(org_id) = next_organization(app, *cursor).await? else { return Ok(0) };
        if first == Some(org_id) {
            return Ok(0);
        }
        first.get_or_insert(org_id);
        *cursor = Some(org_id);
        let decided = turn(app, org_id).await?;
        if decided > 0 {
            return Ok(decided);
        }
    }
    Ok(0)
}

/// The first organization after `cursor` with owed launches, or the first of all when none is after it.
async fn next_organization(app: &AppState, cursor: Option<OrgId>) -> ApiResult<Option<OrgId>> {
    Ok(sqlx::query_scalar(
        "(SELECT organization_id FROM trigger_launches WHERE organization_id > $1
          ORDER BY organization_id LIMIT 1)
         UNION ALL
         (SELECT organization_id FROM trigger_launches ORDER BY organization_id LIMIT 1)
         LIMIT 1",
    )
    .bind(cursor)
    .fetch_optional(&app.pool)
    .await?)
}

/// One organization's turn: its oldest owed launches not held elsewhere, decided until a match times out or the
/// turn's budget is spent; how many were decided (and deleted).
async fn turn(app: &AppState, org_id: OrgId) -> ApiResult<usize> {
    let mut tx = crate::db::begin::begin(&app.pool).await?;
    // The trigger by reference: a copy only an older server wrote, else the endpoint's trigger at the index while
    // it hashes as it did when the capture arrived (changed or removed since: none, and nothing is launched).
    let owed: Vec<Owed> = sqlx::query_as(
        "SELECT l.capture_id, l.trigger_index, l.organization_id, l.webhook_id,
                COALESCE(l.trigger, CASE WHEN sha256(convert_to((w.triggers -> l.trigger_index::int)::text, 'UTF8'))
                                              = l.trigger_sha256
                                         THEN w.triggers -> l.trigger_index::int END) AS trigger
         FROM trigger_launches l
         LEFT JOIN webhooks w ON w.id = l.webhook_id AND w.organization_id = l.organization_id
         WHERE l.organization_id = $1
         ORDER BY l.capture_id, l.trigger_index LIMIT $2 FOR UPDATE OF l SKIP LOCKED",
    )
    .bind(org_id)
    .bind(BATCH)
    .fetch_all(&mut *tx)
    .await?;
    if owed.is_empty() {
        return Ok(0);
    }
    let so_far = guard::lock_minute(&mut tx, org_id).await?;
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut decided = 0;
    for row in &owed {
        if decided > 0 && started.elapsed() >= TURN_BUDGET {
            break;
        }
        let decision = decide(app, &mut tx, row, so_far + tally.launched).await?;
        let timed_out = matches!(decision, Decision::Refused(Refusal::Timeout { .. }));
        tally.add(row, decision);
        decided += 1;
        if timed_out {
            break;
        }
    }
    settle(&mut tx, org_id, &owed[..decided], &tally).await?;
    tx.commit().await?;
    if tally.launched > 0 {
        app.queue.wake(org_id);
    }
    let refused = tally.refused.values().map(|(n, _)| n).sum::<i64>();
    crate::metrics::trigger_launches(tally.launched as u64, tally.skipped, refused as u64);
    Ok(decided)
}

/// What a turn decided: launches, owed launches skipped, and refusals by endpoint and reason (how many, and the
/// first).
#[derive(Debug, Default)]
struct Tally {
    launched: i64,
    skipped: u64,
    refused: BTreeMap<(WebhookId, &'static str), (i64, Refused)>,
}

impl Tally {
    fn add(&mut self, row: &Owed, decision: Decision) {
        match decision {
            Decision::Launched(execution_id) => {
                tracing::debug!(%execution_id, request_id = %row.capture_id, "a capture launched a flow");
                self.launched += 1;
            }
            Decision::Skipped => self.skipped += 1,
            Decision::Refused(refusal) => {
                let refused = Refused {
                    org_id: row.organization_id,
                    webhook_id: row.webhook_id,
                    request_id: row.capture_id,
                    flow_id: row.flow_id(),
                    refusal,
                };
                let entry = self.refused.entry((row.webhook_id, refused.refusal.reason())).or_insert((0, refused));
                entry.0 += 1;
            }
        }
    }
}

/// Writes what a turn decided, while it holds its organization's minute row (whoever counts or refuses for an
/// organization holds its row first): the launches counted, the refusals counted and audited, and the decided
/// owed rows deleted, in one statement each.
async fn settle(conn: &mut PgConnection, org_id: OrgId, decided: &[Owed], tally: &Tally) -> ApiResult<()> {
    if tally.launched > 0 {
        guard::count_launches(conn, org_id, tally.launched).await?;
    }
    for (n, refused) in tally.refused.values() {
        guard::refuse(conn, refused, *n).await?;
    }
    let captures: Vec<CaptureId> = decided.iter().map(|o| o.capture_id).collect();
    let indexes: Vec<i16> = decided.iter().map(|o| o.trigger_index).collect();
    sqlx::query(
        "DELETE FROM trigger_launches WHERE (capture_id, trigger_index) IN
             (SELECT * FROM unnest($1::uuid[], $2::int2[]))",
    )
    .bind(&captures)
    .bind(&indexes)
    .execute(conn)
    .await?;
    Ok(())
}
