//! The live stream: SSE format, live delivery, Last-Event-ID resume without gaps or duplicates, keep-alives,
//! delivery across server replicas, and large bodies left out.

use hookflow_tests::TestApp;
use hookflow_tests::notices::Notices;
use hookflow_tests::sse::Sse;
use reqwest::Method;
use serde_json::Value;
use std::time::Duration;

async fn capture(app: &TestApp, id: &str, body: &str) -> String {
    let reply = app.capture(Method::POST, id, body.to_owned()).await;
    reply.body["request_id"].as_str().expect("request_id").to_owned()
}

#[tokio::test]
async fn captures_arrive_live_in_the_contract_format() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("live").await;
    let before = capture(&app, &id, "old").await;
    let mut sse = Sse::open(&app, &format!("/webhooks/{id}/stream"), None).await;
    let mut sent = Vec::new();
    for i in 0..3 {
        sent.push(capture(&app, &id, &format!("{{\"i\":{i}}}")).await);
    }
    for (i, capture_id) in sent.iter().enumerate() {
        let event = sse.event().await;
        assert_eq!(event.id.as_deref(), Some(capture_id.as_str()));
        assert_eq!(event.data["type"], "request.captured");
        assert_eq!(event.data["id"], capture_id.as_str());
        assert_eq!(event.data["body"], format!("{{\"i\":{i}}}"));
        assert_eq!(event.data["webhook_id"], id);
        assert!(event.data["headers"].is_array());
    }
    assert!(!sent.contains(&before));
    sse.quiet().await;
}

#[tokio::test]
async fn last_event_id_resumes_without_gaps_or_duplicates() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("resume").await;
    let mut sse = Sse::open(&app, &format!("/webhooks/{id}/stream"), None).await;
    let first = capture(&app, &id, "1").await;
    let second = capture(&app, &id, "2").await;
    assert_eq!(sse.event().await.id.as_deref(), Some(first.as_str()));
    assert_eq!(sse.event().await.id.as_deref(), Some(second.as_str()));
    drop(sse);
    let mut missed = Vec::new();
    for i in 3..8 {
        missed.push(capture(&app, &id, &i.to_string()).await);
    }
    let mut sse = Sse::open(&app, &format!("/webhooks/{id}/stream"), Some(&second)).await;
    for expected in &missed {
        assert_eq!(sse.event().await.id.as_ref(), Some(expected));
    }
    let live = capture(&app, &id, "live").await;
    assert_eq!(sse.event().await.id, Some(live));
    sse.quiet().await;
}

#[tokio::test]
async fn keep_alive_comments_flow_on_an_idle_stream() {
    let app = TestApp::spawn_with(|s| s.stream_keep_alive = Duration::from_millis(200)).await;
    let id = app.webhook_named("idle").await;
    let mut sse = Sse::open(&app, &format!("/webhooks/{id}/stream"), None).await;
    assert_eq!(sse.line().await, ": keep-alive");
}

#[tokio::test]
async fn a_capture_on_one_replica_reaches_a_subscriber_on_another() {
    let app = TestApp::spawn().await;
    let replica = app.replica().await;
    let id = app.webhook_named("fan-out").await;
    let mut on_replica = Sse::open(&replica, &format!("/webhooks/{id}/stream"), None).await;
    let mut on_origin = Sse::open(&app, &format!("/webhooks/{id}/stream"), None).await;
    let sent = capture(&app, &id, "across").await;
    assert_eq!(on_replica.event().await.id.as_ref(), Some(&sent));
    assert_eq!(on_origin.event().await.id.as_ref(), Some(&sent));
    let back = capture(&replica, &id, "and back").await;
    assert_eq!(on_origin.event().await.id, Some(back));
}

#[tokio::test]
async fn large_bodies_are_left_out_of_events() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("large").await;
    let mut sse = Sse::open(&app, &format!("/webhooks/{id}/stream"), None).await;
    capture(&app, &id, &"y".repeat(65 * 1024)).await;
    let event = sse.event().await;
    assert_eq!(event.data["body_truncated"], true);
    assert!(event.data.get("body").is_none_or(Value::is_null));
    assert_eq!(event.data["body_size"], 65 * 1024);
}

#[tokio::test]
async fn streams_authenticate_like_any_request() {
    let app = TestApp::spawn().await;
    let id = app.webhook_named("auth").await;
    assert_eq!(app.call(Method::GET, &format!("/webhooks/{id}/stream"), None, None).await.status, 401);
    let writer = app.creds_with(&["webhooks:write"]).await;
    let denied = app.call(Method::GET, &format!("/webhooks/{id}/stream"), Some(&writer), None).await;
    assert_eq!(denied.code(), "insufficient_scope");
    let missing = app.admin(Method::GET, &format!("/webhooks/{}/stream", uuid::Uuid::new_v4()), None).await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn a_slow_subscriber_is_told_it_lagged_and_can_resume() {
    let app = TestApp::spawn_with(|s| s.stream_buffer = 8).await;
    let id = app.webhook_named("flood").await;
    let mut sse = Sse::open(&app, &format!("/webhooks/{id}/stream"), None).await;
    // Nobody reads while 400 captures of 60 KB arrive: socket buffers fill, then the subscriber's buffer.
    let body = "z".repeat(60_000);
    let mut sent = Vec::new();
    for _ in 0..400 {
        sent.push(capture(&app, &id, &body).await);
    }
    let mut delivered = Vec::new();
    let missed = loop {
        let event = sse.event().await;
        if event.data["type"] == "stream.lagged" {
            assert!(event.id.is_none(), "a lag notice carries no event id");
            break event.data["missed"].as_u64().expect("missed");
        }
        delivered.push(event.id.expect("capture events have ids"));
    };
    assert!(missed >= 1);
    assert_eq!(delivered[..], sent[..delivered.len()], "what was delivered came in order");
    // Reconnecting after the last delivered event fills the gap.
    let last = delivered.last().expect("some events arrived before the lag");
    let mut resumed = Sse::open(&app, &format!("/webhooks/{id}/stream"), Some(last)).await;
    for expected in &sent[delivered.len()..] {
        assert_eq!(resumed.event().await.id.as_ref(), Some(expected));
    }
}

/// Capture batches NOTIFY only endpoints a replica streams (a NOTIFY serializes commits cluster-wide): a capture to
/// an endpoint nobody streams sends none, one to a streamed endpoint wakes its subscriber, and the last subscriber
/// leaving takes the watch away.
#[tokio::test]
async fn captures_notify_only_endpoints_someone_streams() {
    // Keep-alives every 200 ms, so the server notices a closed stream at once.
    let app = TestApp::spawn_with(|s| s.stream_keep_alive = Duration::from_millis(200)).await;
    let quiet = app.webhook_named("quiet").await;
    let streamed = app.webhook_named("streamed").await;
    let mut notices = Notices::listen(&app.pool, hookflow_control_plane::signals::CAPTURES_CHANNEL).await;
    let watches = async |id: &str| -> i64 {
        let sql = "SELECT count(*) FROM capture_watchers WHERE webhook_id = $1::uuid";
        sqlx::query_scalar(sql).bind(id).fetch_one(&app.pool).await.expect("watches")
    };
    let mut sse = Sse::open(&app, &format!("/webhooks/{streamed}/stream"), None).await;
    assert_eq!((watches(&streamed).await, watches(&quiet).await), (1, 0));

    // Answered after commit, one after the other: a NOTIFY for the quiet endpoint would arrive first.
    capture(&app, &quiet, "unheard").await;
    let sent = capture(&app, &streamed, "heard").await;
    assert_eq!(notices.next().await, streamed, "the unstreamed endpoint's batch sent no NOTIFY");
    assert_eq!(sse.event().await.id, Some(sent));

    drop(sse);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while watches(&streamed).await != 0 {
        assert!(tokio::time::Instant::now() < deadline, "the watch outlived the last subscriber");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
