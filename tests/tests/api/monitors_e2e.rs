//! Monitors end to end (issue #50, the first "Done when"): a `*/1 * * * *` schedule in Europe/Paris with an
//! environment, variables and runner labels launches on the installed `hookflow-runner` carrying the labels (not on
//! the other one), the values reaching the request (checked in the node results); the target breaks: exactly one
//! `flow.failing` to each of three channels (a mail through the real aiosmtpd server, a Slack-format receiver, a
//! webhook receiver whose signatures the `standardwebhooks` library verifies) within 90 s of the end of the first
//! failed run, none for the next failure; the target is fixed: exactly one `flow.recovered` each. Two server
//! replicas share the database throughout. Minute cron, so about four minutes of wall time.

use crate::RUNNER;
use crate::alerts::verify_signatures;
use hookflow_shared::api::flows::PutEnvironment;
use hookflow_tests::TestApp;
use hookflow_tests::receiver::{Arrival, Receiver};
use hookflow_tests::runner::RunnerProcess;
use hookflow_tests::smtp::SmtpServer;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const MAIL_TO: &str = "oncall@example.com";
/// A minute's occurrence, a run and a margin.
const NEXT_RUN: Duration = Duration::from_secs(80);

type Run = (String, String, Option<chrono::DateTime<chrono::Utc>>);

/// The schedule's executions, oldest first: `(id, status, finished_at)`.
async fn runs(app: &TestApp, schedule: &str) -> Vec<Run> {
    sqlx::query_as(
        "SELECT id::text, status, finished_at FROM executions WHERE schedule_id = $1::uuid ORDER BY created_at, id",
    )
    .bind(schedule)
    .fetch_all(&app.pool)
    .await
    .expect("executions")
}

/// Polls the schedule's executions until `done` holds (at most `within`).
async fn wait_runs(app: &TestApp, schedule: &str, within: Duration, done: impl Fn(&[Run]) -> bool) -> Vec<Run> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let seen = runs(app, schedule).await;
        if done(&seen) {
            return seen;
        }
        assert!(tokio::time::Instant::now() < deadline, "the schedule's runs never got there: {seen:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn ended(runs: &[Run], status: &str) -> usize {
    runs.iter().filter(|(_, s, _)| s == status).count()
}

fn body_of(arrival: &Arrival) -> Value {
    serde_json::from_slice(&arrival.body).expect("a JSON body")
}

fn slack_text(arrival: &Arrival) -> String {
    body_of(arrival)["text"].as_str().expect("a Slack text").to_owned()
}

/// When an arrival came, on the wall clock.
fn wall_time(arrival: &Arrival) -> chrono::DateTime<chrono::Utc> {
    chrono::Utc::now() - chrono::TimeDelta::from_std(arrival.at.elapsed()).expect("a duration")
}

/// Waits (at most `within`) for the first mail whose subject contains `word`; answers when it was seen.
async fn mail_seen(smtp: &SmtpServer, word: &str, within: Duration) -> chrono::DateTime<chrono::Utc> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if smtp.to(MAIL_TO).iter().any(|m| m.subject.contains(word)) {
            return chrono::Utc::now();
        }
        assert!(tokio::time::Instant::now() < deadline, "no `{word}` mail: {:?}", smtp.to(MAIL_TO));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_minute_schedule_in_paris_on_a_labelled_runner_alerts_once_each_way_on_three_channels_across_two_replicas() {
    let smtp = SmtpServer::start().await;
    let settings = smtp.settings();
    let app = TestApp::spawn_with(move |s| s.smtp = Some(settings)).await;
    let settings = smtp.settings();
    let replica = app.replica_with(move |s| s.smtp = Some(settings)).await;
    let target = Receiver::spawn(200).await;
    let hook = Receiver::spawn(200).await;
    let slack_in = Receiver::spawn(200).await;

    let channel = |body: Value| {
        let app = &app;
        async move {
            let made = app.admin(Method::POST, "/notification-channels", Some(body)).await;
            assert_eq!(made.status, 201, "{}", made.text);
            made.body
        }
    };
    let webhook = channel(json!({"name": "hook", "kind": "webhook", "url": format!("{}/alerts", hook.base)})).await;
    let secret = webhook["signing_secret"].as_str().expect("a secret").to_owned();
    let slack = channel(json!({"name": "slack", "kind": "slack", "url": format!("{}/slack", slack_in.base)})).await;
    let email = channel(json!({"name": "mail", "kind": "email", "address": MAIL_TO})).await;

    let flow = app
        .create_flow(
            "paris checkout",
            json!({"nodes": [{"id": "probe", "kind": "request",
                "request": {"method": "GET", "url": "{{base}}/health?token={{token}}&region={{region}}"},
                "extractors": [{"name": "code", "kind": "statusCode"}],
                "assertions": [{"source": "code", "operator": "equals", "expected": 200}]}]}),
        )
        .await;
    let env = PutEnvironment { variables: [("base".to_owned(), target.base.clone())].into() };
    app.api().flows().put_environment(&flow, "staging", &env).await.expect("environment");
    let creds = app.runner_creds(app.admin.org).await;
    let _eu = RunnerProcess::spawn(RUNNER, &app.base, &creds, &["eu", "linux"], &[]).await;
    let _us = RunnerProcess::spawn(RUNNER, &replica.base, &creds, &["us"], &[]).await;
    let eu = app.wait_runner(|r| r["labels"] == json!(["eu", "linux"]) && r["status"] == "online").await;
    app.wait_runner(|r| r["labels"] == json!(["us"]) && r["status"] == "online").await;

    let created = replica
        .admin(
            Method::POST,
            &format!("/flows/{flow}/schedules"),
            Some(json!({"cron": "*/1 * * * *", "timezone": "Europe/Paris", "environment": "staging",
                "variables": {"token": "tok-7", "region": "eu-west"}, "runner_labels": ["eu"],
                "notify": {"channels": [webhook["id"], slack["id"], email["id"]], "after_failures": 1,
                           "on_recovery": true}})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text);
    let schedule = created.body["id"].as_str().expect("id").to_owned();
    let item = format!("/flows/{flow}/schedules/{schedule}");

    // The first occurrence: on the `eu` runner, with the environment's and the schedule's values.
    let seen = wait_runs(&app, &schedule, NEXT_RUN, |r| ended(r, "succeeded") + ended(r, "failed") >= 1).await;
    let first = &seen[0].0;
    let execution = app.wait_finished(&flow, first).await;
    assert_eq!(execution["status"], "succeeded", "{execution}");
    assert_eq!(
        (&execution["trigger"], &execution["schedule_id"], &execution["environment"], &execution["runner_id"]),
        (&json!("schedule"), &json!(schedule), &json!("staging"), &eu["id"])
    );
    let nodes = app.api().executions().nodes(&flow, first).await.expect("node results");
    let probe = serde_json::to_value(&nodes.items[0]).expect("json");
    assert_eq!(probe["request"]["url"], format!("{}/health?token=tok-7&region=eu-west", target.base), "{probe}");
    assert_eq!((&probe["status"], &probe["extracted"]["code"]), (&json!("passed"), &json!(200)), "{probe}");
    assert_eq!(target.arrivals()[0].uri, "/health?token=tok-7&region=eu-west");
    assert_eq!(app.admin(Method::GET, &item, None).await.body["state"], "passing");
    assert_eq!(hook.count() + slack_in.count() + smtp.to(MAIL_TO).len(), 0, "a passing run alerts nobody");

    // The target breaks: the next run fails and alerts once on each channel within 90 s of its end.
    target.answer(503);
    let seen = wait_runs(&app, &schedule, NEXT_RUN, |r| ended(r, "failed") >= 1).await;
    let (failed_id, _, failed_at) = seen.iter().find(|(_, s, _)| s == "failed").expect("a failed run").clone();
    let failed_at = failed_at.expect("finished_at");
    let within = failed_at + chrono::TimeDelta::seconds(90);
    let arrivals = hook.wait_until(Duration::from_secs(90), |a| !a.is_empty()).await;
    assert!(wall_time(&arrivals[0]) <= within, "the webhook alert came more than 90 s after the failed run");
    let failing = body_of(&arrivals[0]);
    assert_eq!(
        (&failing["type"], &failing["execution_id"], &failing["schedule_id"], &failing["failed_runs"]),
        (&json!("flow.failing"), &json!(failed_id), &json!(schedule), &json!(1)),
        "{failing}"
    );
    assert_eq!((&failing["flow_name"], &failing["node_id"]), (&json!("paris checkout"), &json!("probe")));
    let error = failing["error"].as_str().expect("an error").to_owned();
    assert!(error.contains("code equals 200"), "the failed assertion: {error}");
    let link = format!("{}/#/flows/{flow}/executions/{failed_id}", app.base.trim_end_matches('/'));
    assert_eq!(failing["execution_url"], link.as_str());
    let slack_arrivals = slack_in.wait_until(Duration::from_secs(90), |a| !a.is_empty()).await;
    assert!(wall_time(&slack_arrivals[0]) <= within, "the Slack alert came more than 90 s after the failed run");
    let text = slack_text(&slack_arrivals[0]);
    for part in ["paris checkout", "*/1 * * * *", "Europe/Paris", "probe", error.as_str(), link.as_str()] {
        assert!(text.contains(part), "`{part}` not in the Slack text: {text}");
    }
    let mailed = mail_seen(&smtp, "failing", Duration::from_secs(90)).await;
    assert!(mailed <= within, "the mail came more than 90 s after the failed run");
    let mail = smtp.to(MAIL_TO).remove(0);
    assert!(mail.subject.starts_with("[hookflow]"), "{}", mail.subject);
    for part in ["paris checkout", "Europe/Paris", "probe", link.as_str()] {
        assert!(mail.body.contains(part), "`{part}` not in the mail: {}", mail.body);
    }

    // The next run fails too: no alert for it.
    let seen = wait_runs(&app, &schedule, NEXT_RUN, |r| ended(r, "failed") >= 2).await;
    assert_eq!(ended(&seen, "succeeded"), 1, "{seen:?}");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!((hook.count(), slack_in.count(), smtp.to(MAIL_TO).len()), (1, 1, 1), "no alert for the second failure");
    assert_eq!(app.admin(Method::GET, &item, None).await.body["state"], "failing");

    // The target is fixed: the next run passes and each channel hears of the recovery once.
    target.answer(200);
    let seen = wait_runs(&app, &schedule, NEXT_RUN, |r| ended(r, "succeeded") >= 2).await;
    let (recovered_id, _, _) = seen.iter().rev().find(|(_, s, _)| s == "succeeded").expect("a pass").clone();
    let arrivals = hook.wait_until(Duration::from_secs(90), |a| a.len() >= 2).await;
    let recovered = body_of(&arrivals[1]);
    assert_eq!(
        (&recovered["type"], &recovered["execution_id"], &recovered["failed_runs"], &recovered["error"]),
        (&json!("flow.recovered"), &json!(recovered_id), &json!(2), &Value::Null),
        "{recovered}"
    );
    let slack_arrivals = slack_in.wait_until(Duration::from_secs(90), |a| a.len() >= 2).await;
    assert!(slack_text(&slack_arrivals[1]).contains("recovered"), "{}", slack_text(&slack_arrivals[1]));
    mail_seen(&smtp, "recovered", Duration::from_secs(90)).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!((hook.count(), slack_in.count(), smtp.to(MAIL_TO).len()), (2, 2, 2), "one alert each way per channel");
    verify_signatures(&secret, &hook.arrivals());
    let ids: Vec<String> = hook.arrivals().iter().map(|a| a.header("webhook-id").expect("id").to_owned()).collect();
    assert_ne!(ids[0], ids[1], "two messages");

    // Every run went to the `eu` runner; the history lists both alerts, sent to the three channels.
    let runners: Vec<Option<String>> =
        sqlx::query_scalar("SELECT runner_id::text FROM executions WHERE schedule_id = $1::uuid")
            .bind(&schedule)
            .fetch_all(&app.pool)
            .await
            .expect("runners");
    assert!(runners.iter().all(|r| r.as_deref() == eu["id"].as_str()), "{runners:?}");
    let listed = replica.admin(Method::GET, "/alerts", None).await;
    let items = listed.body["items"].as_array().expect("items");
    let types: Vec<&str> = items.iter().map(|a| a["type"].as_str().expect("type")).collect();
    assert_eq!(types, ["flow.recovered", "flow.failing"], "{}", listed.text);
    assert!(items.iter().all(|a| a["outcome"] == "sent" && a["channel_ids"].as_array().map(Vec::len) == Some(3)));
    app.delete(&item, 204).await;
    drop(replica);
}
