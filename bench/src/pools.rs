//! `hookflow-bench pools` (issue #53): the scaler endpoint's cost with 50 declared pools and 100,000 queued
//! executions over 30 label sets (p50/p99 of `GET /runner/pools/{pool}` and of the whole list, with the plans of
//! the grouped statement it ran before the queued tally and of the tally's statement it runs now), and the
//! claim's pick with priority (`ORDER BY priority, id` over the new `executions_queued`) beside today's (`ORDER BY
//! id` over an index of `(organization_id, id)` made for the comparison), the same statements on the same
//! database in the same run, taken in turns.

use crate::load::{BoxError, percentile_ms};
use crate::setup::Rig;
use hookflow_control_plane::pools::RunnerPool;
use hookflow_shared::wire::header;
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Queued executions.
    #[arg(long, default_value_t = 100_000)]
    queued: usize,
    /// Declared pools (besides `default`), at most 50.
    #[arg(long, default_value_t = 50)]
    pools: usize,
    /// Requests (and claim picks) measured per kind.
    #[arg(long, default_value_t = 300)]
    samples: usize,
}

const REGIONS: [&str; 5] = ["eu", "us", "ap", "sa", "af"];
const KINDS: [&str; 10] = ["linux", "gpu", "arm", "big", "win", "mac", "db", "net", "ci", "edge"];

fn pool_labels(i: usize) -> Vec<String> {
    vec![REGIONS[i % REGIONS.len()].to_owned(), KINDS[(i / REGIONS.len()) % KINDS.len()].to_owned()]
}

pub async fn run(args: Args) -> Result<(), BoxError> {
    let pools: Vec<RunnerPool> = std::iter::once(RunnerPool::default_pool())
        .chain((0..args.pools.min(50)).map(|i| RunnerPool { name: format!("p{i}"), labels: pool_labels(i) }))
        .collect();
    let declared = pools.clone();
    let rig = Rig::start_with(move |settings| settings.runner_pools = declared.into()).await?;
    let outcome = measure(&rig, &args, &pools).await;
    rig.stop().await;
    outcome
}

async fn measure(rig: &Rig, args: &Args, pools: &[RunnerPool]) -> Result<(), BoxError> {
    let flow = rig.flow("pooled", serde_json::json!({"nodes": [{"id": "w", "kind": "delay", "delay_ms": 1}]})).await?;
    let first = rig.launch(&flow).await?;
    // Copies of the launched row: 30 label sets (none, one label, two labels), priorities 1 to 5, ages spread.
    let columns: Vec<String> = sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns WHERE table_name = 'executions'
         ORDER BY ordinal_position",
    )
    .fetch_all(&rig.pool)
    .await?;
    let replaced = |c: &str| match c {
        "id" => "gen_random_uuid()".to_owned(),
        "runner_labels" => "CASE WHEN i % 30 = 0 THEN '{}'::text[] WHEN i % 30 < 6 THEN ARRAY[($2::text[])[1 + i % 5]]
             ELSE ARRAY[($2::text[])[1 + i % 5], ($3::text[])[1 + (i / 5) % 10]] END"
            .to_owned(),
        "priority" => "(1 + i % 5)::smallint".to_owned(),
        "created_at" => "now() - make_interval(secs => i / 1000.0)".to_owned(),
        other => other.to_owned(),
    };
    let select: Vec<String> = columns.iter().map(|c| replaced(c)).collect();
    let started = Instant::now();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO executions ({}) SELECT {} FROM executions, generate_series(1, $4) AS i WHERE id = $1::uuid",
        columns.join(", "),
        select.join(", ")
    )))
    .bind(&first)
    .bind(REGIONS.to_vec())
    .bind(KINDS.to_vec())
    .bind(i32::try_from(args.queued).unwrap_or(i32::MAX))
    .execute(&rig.pool)
    .await?;
    // 200 runners, four per pool's label set.
    sqlx::query(
        "INSERT INTO runners (id, organization_id, name, labels, version, max_concurrency, host)
         SELECT gen_random_uuid(), $1, 'bench', ARRAY[($2::text[])[1 + i % 5], ($3::text[])[1 + (i / 5) % 10]],
             'bench', 4, '{}' FROM generate_series(0, 199) AS i",
    )
    .bind(rig.org)
    .bind(REGIONS.to_vec())
    .bind(KINDS.to_vec())
    .execute(&rig.pool)
    .await?;
    sqlx::query("VACUUM ANALYZE executions").execute(&rig.pool).await?;
    sqlx::query("VACUUM ANALYZE runners").execute(&rig.pool).await?;
    println!(
        "setup: {} queued executions, {} pools, in {:.1} s",
        args.queued + 1,
        pools.len(),
        started.elapsed().as_secs_f64()
    );

    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN (ANALYZE, BUFFERS) SELECT runner_labels, count(*), min(created_at) FROM executions
         WHERE organization_id = $1 AND status = 'queued' GROUP BY runner_labels",
    )
    .bind(rig.org)
    .fetch_all(&rig.pool)
    .await?;
    println!("plan of the grouped statement:\n  {}", plan.join("\n  "));
    // What the scaler endpoint runs since the queued tally (migration 20261129000095): the tally's rows of the
    // organization summed by label set, each set aged by one probe of `executions_queued_labels`.
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN (ANALYZE, BUFFERS) SELECT t.runner_labels, t.queued, t.rows,
             coalesce(extract(epoch FROM now() - o.created_at), 0)::float8 AS oldest_s
         FROM (SELECT runner_labels, sum(delta)::int8 AS queued, count(*) AS rows FROM executions_queued_tally
               WHERE organization_id = $1 GROUP BY runner_labels) t
         LEFT JOIN LATERAL (SELECT e.created_at FROM executions e
               WHERE e.organization_id = $1 AND e.status = 'queued' AND e.runner_labels = t.runner_labels
               ORDER BY e.created_at LIMIT 1) o ON true",
    )
    .bind(rig.org)
    .fetch_all(&rig.pool)
    .await?;
    println!("plan of the tally's statement:\n  {}", plan.join("\n  "));

    let http = reqwest::Client::new();
    let get = |path: String| {
        http.get(format!("{}{path}", rig.base))
            .header(header::API_KEY, &rig.key)
            .header(header::ORGANIZATION, rig.org.to_string())
    };
    let (mut one, mut list) = (Vec::new(), Vec::new());
    for i in 0..args.samples {
        let pool = &pools[i % pools.len()].name;
        let at = Instant::now();
        let reply = get(format!("/runner/pools/{pool}")).send().await?;
        if !reply.status().is_success() {
            return Err(format!("GET /runner/pools/{pool} answered {}", reply.status()).into());
        }
        reply.bytes().await?;
        one.push(u32::try_from(at.elapsed().as_micros()).unwrap_or(u32::MAX));
        let at = Instant::now();
        get("/runner/pools".to_owned()).send().await?.bytes().await?;
        list.push(u32::try_from(at.elapsed().as_micros()).unwrap_or(u32::MAX));
    }
    let eu = get("/runner/pools/p0".to_owned()).send().await?.text().await?;
    println!("GET /runner/pools/p0: {eu}");
    println!(
        "scaler endpoint, {} pools, {} queued: one pool p50 {:.2} ms p99 {:.2} ms; the list p50 {:.2} ms p99 {:.2} ms",
        pools.len(),
        args.queued + 1,
        percentile_ms(&one, 50.0),
        percentile_ms(&one, 99.0),
        percentile_ms(&list, 50.0),
        percentile_ms(&list, 99.0)
    );

    // The claim's pick, with priority and as today, in turns (each in a transaction rolled back).
    sqlx::query("CREATE INDEX executions_queued_by_id ON executions (organization_id, id) WHERE status = 'queued'")
        .execute(&rig.pool)
        .await?;
    let labels = pool_labels(0);
    let pick = |order: &str| {
        format!(
            "SELECT id FROM executions WHERE organization_id = $1 AND status = 'queued' AND runner_labels <@ $2
             ORDER BY {order} LIMIT 16 FOR UPDATE SKIP LOCKED"
        )
    };
    let (with_priority, today) = (pick("priority, id"), pick("id"));
    let (mut new, mut old) = (Vec::new(), Vec::new());
    for _ in 0..args.samples {
        for (sql, samples) in [(&with_priority, &mut new), (&today, &mut old)] {
            let mut tx = rig.pool.begin().await?;
            let at = Instant::now();
            let rows =
                sqlx::query(sqlx::AssertSqlSafe(sql.as_str())).bind(rig.org).bind(&labels).fetch_all(&mut *tx).await?;
            samples.push(u32::try_from(at.elapsed().as_micros()).unwrap_or(u32::MAX));
            if rows.len() != 16 {
                return Err(format!("the pick found {} rows", rows.len()).into());
            }
            tx.rollback().await?;
        }
    }
    println!(
        "claim pick of 16 among {} queued: with priority p50 {:.3} ms p99 {:.3} ms; today's (by id) p50 {:.3} ms p99 {:.3} ms",
        args.queued + 1,
        percentile_ms(&new, 50.0),
        percentile_ms(&new, 99.0),
        percentile_ms(&old, 50.0),
        percentile_ms(&old, 99.0)
    );
    Ok(())
}
