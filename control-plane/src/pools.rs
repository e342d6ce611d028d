//! Runner pools (issue #53): the pools the operator declares (`--runner-pool NAME=LABEL,...`, `default` with no
//! labels always), and their numbers as the database holds them, for the scaler endpoint (one organization) and
//! the metrics (every organization). A queued execution counts in a pool when every label it requires is one of
//! the pool's; a runner belongs to a pool when it carries all of the pool's labels. Two statements whatever the
//! number of pools: queued work by its distinct label sets (counted from the tally triggers keep, see migration
//! `20261129000095_queued_tally`, and aged by one probe of `executions_queued_labels` per set), and the registered
//! runners with their running executions; the sets are matched to the pools here.

use hookflow_shared::OrgId;
use hookflow_shared::api::fields::Labels;
use hookflow_shared::api::pools::PoolStatus;
use sqlx::PgConnection;
use std::collections::BTreeSet;
use std::time::Duration;

/// Pools an operator may declare, besides `default`.
pub const MAX_POOLS: usize = 50;
/// The pool that always exists, with no labels: every runner belongs to it, and it counts only unlabelled work.
pub const DEFAULT_POOL: &str = "default";

/// A declared pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerPool {
    pub name: String,
    pub labels: Vec<String>,
}

impl RunnerPool {
    /// `default`, with no labels.
    pub fn default_pool() -> Self {
        Self { name: DEFAULT_POOL.to_owned(), labels: Vec::new() }
    }
}

/// Whether `name` matches `^[a-z0-9][a-z0-9_-]{0,31}$`.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    first_ok && name.len() <= 32 && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// One `NAME=LABEL[,LABEL...]`.
pub fn parse_pool(spec: &str) -> Result<RunnerPool, String> {
    let spec = spec.trim();
    let Some((name, labels)) = spec.split_once('=') else {
        return Err(format!("--runner-pool `{spec}`: expected NAME=LABEL[,LABEL...]"));
    };
    let name = name.trim();
    if !valid_name(name) {
        return Err(format!(
            "--runner-pool `{spec}`: the name `{name}` must match ^[a-z0-9][a-z0-9_-]{{0,31}}$ (lower-case letters, \
             digits, `_` and `-`, at most 32 characters)"
        ));
    }
    if name == DEFAULT_POOL {
        return Err(format!(
            "--runner-pool `{spec}`: the pool `default` always exists, with no labels; give this pool another name"
        ));
    }
    let labels: BTreeSet<String> = labels.split(',').map(|l| l.trim().to_owned()).collect();
    let labels: Vec<String> = labels.into_iter().collect();
    if labels.iter().any(String::is_empty) {
        return Err(format!("--runner-pool `{spec}`: labels must not be empty (NAME=LABEL[,LABEL...])"));
    }
    if Labels::try_from(labels.clone()).is_err() {
        return Err(format!("--runner-pool `{spec}`: at most 20 labels of 1 to 64 characters"));
    }
    Ok(RunnerPool { name: name.to_owned(), labels })
}

/// The pools of the flags (and `HOOKFLOW_RUNNER_POOLS`, `;`-separated), `default` first; names must differ.
pub fn declared(specs: &[String]) -> Result<Vec<RunnerPool>, String> {
    let specs: Vec<&str> = specs.iter().flat_map(|s| s.split(';')).filter(|s| !s.trim().is_empty()).collect();
    if specs.len() > MAX_POOLS {
        return Err(format!("--runner-pool: at most {MAX_POOLS} pools (besides `default`), {} given", specs.len()));
    }
    let mut pools = vec![RunnerPool::default_pool()];
    for spec in specs {
        let pool = parse_pool(spec)?;
        if pools.iter().any(|p| p.name == pool.name) {
            return Err(format!("--runner-pool: the pool `{}` is declared twice", pool.name));
        }
        pools.push(pool);
    }
    Ok(pools)
}

/// Queued work of one label set.
#[derive(Debug, sqlx::FromRow)]
struct QueuedSet {
    runner_labels: Vec<String>,
    queued: i64,
    rows: i64,
    oldest_s: f64,
}

/// A registered runner (never the embedded one) and what it runs.
#[derive(Debug, sqlx::FromRow)]
struct RunnerSlots {
    labels: Vec<String>,
    max_concurrency: i32,
    online: bool,
    running: i64,
}

/// Queued work by label set, of one organization or of all: counted from `executions_queued_tally` (summed over
/// its rows of +n/-n), aged from `executions_queued_labels` (the oldest queued row of each set, one index probe).
/// `rows` is how many tally rows were summed, so a reader knows when to fold them ([`compact`]).
const QUEUED_OF_ORG: &str = "SELECT t.runner_labels, t.queued, t.rows,
        coalesce(extract(epoch FROM now() - o.created_at), 0)::float8 AS oldest_s
    FROM (SELECT runner_labels, sum(delta)::int8 AS queued, count(*) AS rows FROM executions_queued_tally
          WHERE organization_id = $1 GROUP BY runner_labels) t
    LEFT JOIN LATERAL (SELECT e.created_at FROM executions e
          WHERE e.organization_id = $1 AND e.status = 'queued' AND e.runner_labels = t.runner_labels
          ORDER BY e.created_at LIMIT 1) o ON true
";
const QUEUED_OF_ALL: &str = "SELECT t.runner_labels, t.queued, t.rows,
        coalesce(extract(epoch FROM now() - o.created_at), 0)::float8 AS oldest_s
    FROM (SELECT organization_id, runner_labels, sum(delta)::int8 AS queued, count(*) AS rows
          FROM executions_queued_tally GROUP BY organization_id, runner_labels) t
    LEFT JOIN LATERAL (SELECT e.created_at FROM executions e
          WHERE e.organization_id = t.organization_id AND e.status = 'queued' AND e.runner_labels = t.runner_labels
          ORDER BY e.created_at LIMIT 1) o ON true
";

/// How often every server folds the whole tally, so it stays small while nobody reads it.
pub const FOLD_INTERVAL: Duration = Duration::from_secs(10);
/// Tally rows a read may sum before it folds them.
const FOLD_AFTER_ROWS: i64 = 1_000;

/// Folds the tally (of one organization, or all) into one row per label set still queued. One statement, so a
/// reader sees the rows before or after it, never a part; rows written meanwhile are left for the next fold, and
/// two folds at once each fold only the rows they delete.
pub async fn compact(conn: &mut PgConnection, org_id: Option<OrgId>) -> Result<u64, sqlx::Error> {
    let folded = sqlx::query(
        "WITH gone AS (DELETE FROM executions_queued_tally WHERE $1::uuid IS NULL OR organization_id = $1
                       RETURNING organization_id, runner_labels, delta)
         INSERT INTO executions_queued_tally (organization_id, runner_labels, delta)
             SELECT organization_id, runner_labels, sum(delta) FROM gone GROUP BY organization_id, runner_labels
             HAVING sum(delta) <> 0",
    )
    .bind(org_id)
    .execute(conn)
    .await?;
    Ok(folded.rows_affected())
}

/// Registered runners (online while seen within `$2` seconds) with their running executions (each counted from
/// `executions_running_org` by key).
const RUNNERS_OF_ORG: &str = "SELECT r.labels, r.max_concurrency,
        r.last_seen_at > now() - make_interval(secs => $2) AS online,
        (SELECT count(*) FROM executions e
         WHERE e.organization_id = r.organization_id AND e.status = 'running' AND e.runner_id = r.id) AS running
    FROM runners r WHERE r.organization_id = $1";
const RUNNERS_OF_ALL: &str = "SELECT r.labels, r.max_concurrency,
        r.last_seen_at > now() - make_interval(secs => $1) AS online,
        (SELECT count(*) FROM executions e
         WHERE e.organization_id = r.organization_id AND e.status = 'running' AND e.runner_id = r.id) AS running
    FROM runners r WHERE r.organization_id IS NOT NULL";

/// Every pool's numbers, in the pools' order: for one organization, or (`None`) summed over all of them (the
/// metrics). `online_within` is how long a runner stays online without being seen.
pub async fn counts(
    conn: &mut PgConnection,
    org_id: Option<OrgId>,
    pools: &[RunnerPool],
    online_within: Duration,
) -> Result<Vec<PoolStatus>, sqlx::Error> {
    let online_s = online_within.as_secs_f64();
    let (queued, runners): (Vec<QueuedSet>, Vec<RunnerSlots>) = match org_id {
        Some(org_id) => (
            sqlx::query_as(QUEUED_OF_ORG).bind(org_id).fetch_all(&mut *conn).await?,
            sqlx::query_as(RUNNERS_OF_ORG).bind(org_id).bind(online_s).fetch_all(&mut *conn).await?,
        ),
        None => (
            sqlx::query_as(QUEUED_OF_ALL).fetch_all(&mut *conn).await?,
            sqlx::query_as(RUNNERS_OF_ALL).bind(online_s).fetch_all(&mut *conn).await?,
        ),
    };
    // Many launches and claims since the last fold: fold now, so the next read sums a row per label set again.
    // Best effort: the read succeeded, and a fold that fails (a deadlock with the periodic fold) is done later.
    if queued.iter().map(|set| set.rows - 1).sum::<i64>() > FOLD_AFTER_ROWS
        && let Err(e) = compact(conn, org_id).await
    {
        tracing::warn!(error = %e, "folding the queued tally failed; the periodic fold does it");
    }
    Ok(pools.iter().map(|pool| tally(pool, &queued, &runners)).collect())
}

fn subset(part: &[String], of: &[String]) -> bool {
    part.iter().all(|label| of.contains(label))
}

/// One pool's numbers from the label sets and runners.
fn tally(pool: &RunnerPool, queued: &[QueuedSet], runners: &[RunnerSlots]) -> PoolStatus {
    let mut status = PoolStatus {
        pool: pool.name.clone(),
        labels: pool.labels.clone(),
        queued: 0,
        running: 0,
        oldest_queued_s: 0.0,
        runners_online: 0,
        busy_slots: 0,
        idle_slots: 0,
    };
    for set in queued.iter().filter(|set| subset(&set.runner_labels, &pool.labels)) {
        // Never below zero, whatever a tally that drifted says.
        status.queued += set.queued.max(0);
        status.oldest_queued_s = status.oldest_queued_s.max(set.oldest_s);
    }
    for runner in runners.iter().filter(|r| subset(&pool.labels, &r.labels)) {
        status.running += runner.running;
        if runner.online {
            status.runners_online += 1;
            status.busy_slots += runner.running;
            status.idle_slots += (i64::from(runner.max_concurrency) - runner.running).max(0);
        }
    }
    status.oldest_queued_s = (status.oldest_queued_s * 1000.0).round() / 1000.0;
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_labels_and_limits() {
        assert!(valid_name("eu") && valid_name("0-gpu_x") && !valid_name("Eu") && !valid_name("-x"));
        assert!(!valid_name(&"a".repeat(33)) && valid_name(&"a".repeat(32)));
        let pool = parse_pool("eu=linux, eu").expect("valid");
        assert_eq!(pool.labels, vec!["eu".to_owned(), "linux".to_owned()]);
        assert!(parse_pool("eu").is_err());
        assert!(parse_pool("eu=").is_err());
        assert!(parse_pool("default=x").unwrap_err().contains("always exists"));
        let many: Vec<String> = (0..51).map(|i| format!("p{i}=l")).collect();
        assert!(declared(&many).unwrap_err().contains("at most 50"));
        let pools = declared(&["a=x;b=y,z".to_owned()]).expect("valid");
        assert_eq!(pools.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["default", "a", "b"]);
        assert!(declared(&["a=x".to_owned(), "a=y".to_owned()]).unwrap_err().contains("twice"));
    }
}
