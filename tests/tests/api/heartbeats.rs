//! Heartbeats of many runners at once share statements (`queue::heartbeat`): each is answered for its own runner
//! (200, or 404 for a runner that is not the caller's organization's or not at all), each runner keeps the
//! metrics of one of its heartbeats (and keeps them through one that carries none), and another organization's
//! heartbeat in the same batch changes nothing of the runner it names.

use futures_util::future::join_all;
use hookflow_control_plane::db::group_commit::BatchWrite;
use hookflow_control_plane::queue::heartbeat::Beat;
use hookflow_shared::RunnerId;
use hookflow_shared::api::runners::{Heartbeat, Metrics};
use hookflow_tests::TestApp;

#[tokio::test]
async fn concurrent_heartbeats_are_each_answered_and_stored_for_their_own_runner() {
    let app = TestApp::spawn_for_execution().await;
    let other = app.new_org("Other").await;
    let (ours, theirs) = (app.runner_creds(app.admin.org).await, app.runner_creds(other.org).await);
    let mut runners: Vec<RunnerId> = Vec::new();
    for _ in 0..3 {
        runners.push(app.register_runner(&ours, &[]).await.parse().expect("a runner id"));
    }
    let their_runner: RunnerId = app.register_runner(&theirs, &[]).await.parse().expect("a runner id");
    let (ours_api, theirs_api) = (app.api_as(&ours), app.api_as(&theirs));
    let beat = |bytes: u64| Heartbeat {
        running_jobs: vec![],
        metrics: Some(Metrics { cpu_percent: 1.0, memory_used_bytes: bytes, load_avg_1m: 0.5 }),
    };
    // Each of our runners 20 times (memory 1000 * runner + round), interleaved with another organization's
    // heartbeats naming our runners and with heartbeats of a runner that does not exist.
    let calls = (0..20_u64).flat_map(|round| {
        let (ours_api, theirs_api, runners, beat) = (&ours_api, &theirs_api, &runners, &beat);
        (0..runners.len()).map(move |i| async move {
            let runner = runners[i];
            let mine = ours_api.runners().heartbeat(runner, &beat(1000 * i as u64 + round)).await.map(|_| ());
            let stranger = theirs_api.runners().heartbeat(runner, &beat(666)).await.map(|_| ());
            let nobody = ours_api.runners().heartbeat(RunnerId::now_v7(), &beat(667)).await.map(|_| ());
            (mine, stranger, nobody)
        })
    });
    for (mine, stranger, nobody) in join_all(calls).await {
        assert!(mine.is_ok(), "{mine:?}");
        assert_eq!(stranger.expect_err("another organization's runner").status(), 404);
        assert_eq!(nobody.expect_err("no such runner").status(), 404);
    }
    let (admin, their_admin) = (app.api(), app.api_as(&other));
    for (i, runner) in runners.iter().enumerate() {
        let shown = admin.runners().get(*runner).await.expect("the runner");
        let bytes = shown.metrics.expect("metrics").memory_used_bytes;
        assert!((1000 * i as u64..1000 * i as u64 + 20).contains(&bytes), "runner {i} shows {bytes}");
        // A heartbeat without metrics keeps the last ones.
        ours_api.runners().heartbeat(*runner, &Heartbeat::default()).await.expect("a heartbeat");
        let kept = admin.runners().get(*runner).await.expect("the runner").metrics.expect("metrics");
        assert_eq!(kept.memory_used_bytes, bytes);
    }
    let ours_naming_theirs = ours_api.runners().heartbeat(their_runner, &beat(668)).await;
    assert_eq!(ours_naming_theirs.expect_err("another organization's runner").status(), 404);
    let untouched = their_admin.runners().get(their_runner).await.expect("their runner");
    assert!(untouched.metrics.is_none(), "{untouched:?}");
}

/// One batch naming one runner for its own organization and for another, in both orders: only its own
/// organization's heartbeat is answered as seen and stored, and of two of its own the last counts.
#[tokio::test]
async fn in_one_batch_a_runner_is_beaten_only_for_its_own_organization() {
    let app = TestApp::spawn_for_execution().await;
    let other = app.new_org("Other").await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner: RunnerId = app.register_runner(&creds, &[]).await.parse().expect("a runner id");
    let beat = |org, bytes: u64| Beat {
        runner_id: runner,
        org_id: Some(org),
        metrics: Some(serde_json::json!({"cpu_percent": 1.0, "memory_used_bytes": bytes, "load_avg_1m": 0.5})),
        running_jobs: 0,
    };
    let (ours, theirs) = (app.admin.org, other.org);
    let mut conn = app.pool.acquire().await.expect("a connection");
    let batches = [
        (vec![beat(ours, 1), beat(theirs, 2)], vec![true, false], 1),
        (vec![beat(theirs, 3), beat(ours, 4)], vec![false, true], 4),
        (vec![beat(ours, 5), beat(theirs, 6), beat(ours, 7)], vec![true, false, true], 7),
    ];
    for (batch, answers, stored) in batches {
        assert_eq!(Beat::write_many(&mut conn, &batch).await.expect("written"), answers);
        let shown = app.api().runners().get(runner).await.expect("the runner");
        assert_eq!(shown.metrics.expect("metrics").memory_used_bytes, stored);
    }
}
