//! A cap on a runner's waiting delivery polls (issue #49's review): one runner key sends many concurrent
//! `POST /runner/deliveries/next` for one runner; at most `DELIVERY_POLLS_PER_RUNNER` wait, the rest are refused
//! at once with 429 `rate_limited` and `Retry-After`, while another runner of the organization and another
//! organization's runner poll as before, and the runner polls again once its polls answered.

use hookflow_control_plane::state::DELIVERY_POLLS_PER_RUNNER;
use hookflow_tests::TestApp;
use hookflow_tests::app::Reply;
use reqwest::Method;
use serde_json::json;
use std::time::{Duration, Instant};

const ATTACK: usize = 24;

#[tokio::test]
async fn a_runner_s_excess_delivery_polls_are_refused_and_others_are_not() {
    let app = TestApp::spawn().await;
    let creds = app.runner_creds(app.admin.org).await;
    let runner = app.register_runner(&creds, &["vpc"]).await;
    let neighbour = app.register_runner(&creds, &["vpc"]).await;
    let other_org = app.new_org("other").await;
    let other_creds = app.runner_creds(other_org.org).await;
    let stranger = app.register_runner(&other_creds, &["vpc"]).await;
    let poll = |creds, runner: &str, wait_s: u64| {
        let body = json!({"runner_id": runner, "wait_s": wait_s});
        app.call(Method::POST, "/runner/deliveries/next", Some(creds), Some(body))
    };

    // The attack: many polls of one runner at once, each asking to wait 6 s.
    let started = Instant::now();
    let attack = futures_util::future::join_all((0..ATTACK).map(|_| poll(&creds, &runner, 6)));
    // Others poll while the attacker's polls wait (they start a second in, and answer within their own 1 s wait).
    let others = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let neighbour_poll = poll(&creds, &neighbour, 1).await;
        let stranger_poll = poll(&other_creds, &stranger, 1).await;
        (neighbour_poll, stranger_poll, started.elapsed())
    };
    let (answers, (neighbour_poll, stranger_poll, others_done)): (Vec<Reply>, _) = tokio::join!(attack, others);
    assert!(others_done < Duration::from_secs(5), "the others answered while the attack waited: {others_done:?}");
    assert_eq!(neighbour_poll.status, 204, "another runner of the organization polls: {}", neighbour_poll.text);
    assert_eq!(stranger_poll.status, 204, "another organization's runner polls: {}", stranger_poll.text);

    let waited = answers.iter().filter(|a| a.status == 204).count();
    let refused: Vec<&Reply> = answers.iter().filter(|a| a.status == 429).collect();
    assert_eq!(waited, DELIVERY_POLLS_PER_RUNNER, "only the cap's polls waited");
    assert_eq!(refused.len(), ATTACK - DELIVERY_POLLS_PER_RUNNER, "every other poll was refused");
    for reply in refused {
        reply.assert_refused(429, "rate_limited", "delivery polls open already");
        let retry = reply.headers.get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
        assert!(retry.is_some_and(|s: u64| s >= 1), "Retry-After: {:?}", reply.headers);
    }

    // The slots came back with the answers: the runner polls again, and a delivery still reaches it.
    let webhook = app.webhook_named("polled").await;
    let made = app
        .admin(
            Method::POST,
            &format!("/webhooks/{webhook}/destinations"),
            Some(json!({"name": "in-vpc", "url": "http://10.0.0.9/in", "runner_labels": ["vpc"]})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(app.capture(Method::POST, &webhook, "{}").await.status, 200);
    let again = poll(&creds, &runner, 10).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.body["deliveries"].as_array().map(Vec::len), Some(1), "{}", again.text);
}
