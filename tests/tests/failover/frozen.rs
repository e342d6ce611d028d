//! A primary that freezes rather than dies (Operating II): its keeper and every PostgreSQL process SIGSTOPped, its
//! kernel still accepting connections and acknowledging what is sent, and the monitor declaring it unhealthy only
//! after 20 s, so the freeze outlasts the server's own 15 s bound. No request waits more than 15 s; captures and
//! launches are answered 503 with `Retry-After` in the gap and 2xx again on the promoted standby; no acknowledged
//! capture is lost, every launch answered 201 is on the new primary.

use super::{Fixture, Kind, Report, Sent, load, no_acknowledged_capture_lost, wait_until_writable};
use hookflow_tests::autofailover::FailoverSet;
use sqlx::ConnectOptions as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The longest any request may wait on a frozen database (the contract).
const LONGEST_WAIT: Duration = Duration::from_secs(15);

/// The monitor declares a node unhealthy only after 20 s without an answer.
const SLOW_MONITOR: &[(&str, &str)] = &[("pgautofailover.node_considered_unhealthy_timeout", "20000")];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "brings up a pg_auto_failover set (about a minute) and freezes its primary for 20 s; .ci/run runs it"]
async fn a_frozen_primary_costs_no_request_more_than_15_s_and_no_acknowledged_capture() {
    let set = FailoverSet::start().await;
    set.configure_monitor(SLOW_MONITOR).await;
    let fixture = Fixture::new(&set).await;

    let stop = Arc::new(AtomicBool::new(false));
    let began = Instant::now();
    let mut workers = Vec::new();
    for i in 0..6 {
        let (kind, target) =
            if i < 4 { (Kind::Capture, fixture.webhook.clone()) } else { (Kind::Launch, fixture.flow.clone()) };
        workers.push(tokio::spawn(load(fixture.api.clone(), fixture.bases.clone(), kind, target, stop.clone(), began)));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let frozen_at = began.elapsed();
    let stopped = set.freeze(0);
    assert!(stopped >= 2, "the keeper and PostgreSQL's processes were stopped ({stopped})");
    let back_after =
        wait_until_writable(&fixture.api, &fixture.bases, &fixture.webhook, &fixture.flow, began).await - frozen_at;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::SeqCst);
    let mut sent: Vec<Sent> = Vec::new();
    for worker in workers {
        sent.extend(worker.await.expect("a load worker"));
    }

    let report = Report::of(&sent, frozen_at);
    let slowest = sent.iter().map(|s| s.answer.took).max().unwrap_or_default();
    let in_gap = sent.iter().filter(|s| s.at > frozen_at && s.at < frozen_at + back_after);
    let gap_503 = in_gap.filter(|s| s.answer.status == 503).count();
    eprintln!("frozen primary: {report:#?}");
    eprintln!(
        "frozen primary: 2xx again {:.1} s after the freeze; slowest answer {:.1} s; {gap_503} answers 503 in the gap",
        back_after.as_secs_f64(),
        slowest.as_secs_f64()
    );
    report.check_within(LONGEST_WAIT.as_secs_f64());
    assert!(slowest <= LONGEST_WAIT, "a request waited {slowest:?} on the frozen primary");
    assert!(gap_503 > 0, "the gap was answered 503 (with Retry-After, checked above)");
    assert!(back_after > Duration::from_secs(15), "the freeze outlasted 15 s ({back_after:?}): the monitor was slow");
    assert_eq!(set.primary().await, Some(1), "node2 was promoted");
    let mut conn = set.node(1).connect().await.expect("the new primary");
    no_acknowledged_capture_lost(&mut conn, &fixture.webhook, &sent).await;
    every_launch_is_stored(&mut conn, &sent).await;
    assert!(set.thaw(0) >= 2, "the frozen processes are continued");
    for server in fixture.servers {
        server.stop().await;
    }
}

/// Every launch answered 201 is on the new primary.
async fn every_launch_is_stored(conn: &mut sqlx::PgConnection, sent: &[Sent]) {
    let ids: Vec<uuid::Uuid> = sent
        .iter()
        .filter(|s| s.kind == Kind::Launch && s.answer.status == 201)
        .map(|s| s.answer.body["id"].as_str().and_then(|id| id.parse().ok()).expect("an id"))
        .collect();
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM executions WHERE id = ANY($1)")
        .bind(&ids)
        .fetch_one(conn)
        .await
        .expect("executions");
    eprintln!("frozen primary: launches answered 201 {}, stored {stored}", ids.len());
    assert_eq!(usize::try_from(stored).unwrap_or(0), ids.len(), "every launch answered 201 is stored");
}
