//! The preview across daylight-saving changes; schedules' CRUD, validation, scopes and isolation; the legacy
//! `schedule` text as the flow's first schedule.

use hookflow_shared::api::Patch;
use hookflow_shared::api::flows::{PatchFlow, PutEnvironment, WriteFlow};
use hookflow_tests::TestApp;
use hookflow_tests::exec::scoped;
use reqwest::Method;
use serde_json::{Value, json};

async fn preview(app: &TestApp, cron: &str, zone: &str, from: &str, count: u32) -> Vec<String> {
    let body = json!({"cron": cron, "timezone": zone, "from": from, "count": count});
    let reply = app.admin(Method::POST, "/schedules/preview", Some(body)).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let times: Vec<String> = serde_json::from_value(reply.body["occurrences"].clone()).expect("occurrences");
    assert_eq!(times.len(), count as usize, "exactly `count` fire times");
    times
}

fn on_day<'a>(times: &'a [String], day: &str) -> Vec<&'a str> {
    times.iter().map(String::as_str).filter(|t| t.starts_with(day)).collect()
}

#[tokio::test]
async fn preview_fires_as_cron_users_expect_across_daylight_saving_changes() {
    let app = TestApp::spawn().await;
    // Paris springs forward on 2026-03-29 (02:00 CET -> 03:00 CEST): 02:30 does not exist and does not fire.
    let spring = preview(&app, "30 2 * * *", "Europe/Paris", "2026-03-27T00:00:00+01:00", 5).await;
    assert_eq!(
        spring,
        [
            "2026-03-27T02:30:00+01:00",
            "2026-03-28T02:30:00+01:00",
            "2026-03-30T02:30:00+02:00",
            "2026-03-31T02:30:00+02:00",
            "2026-04-01T02:30:00+02:00"
        ]
    );
    assert!(on_day(&spring, "2026-03-29").len() <= 1, "at most once on the change day");
    // Paris falls back on 2026-10-25 (03:00 CEST -> 02:00 CET): 02:30 comes twice and fires once, at the first.
    let autumn = preview(&app, "30 2 * * *", "Europe/Paris", "2026-10-24T00:00:00+02:00", 3).await;
    assert_eq!(on_day(&autumn, "2026-10-25"), ["2026-10-25T02:30:00+02:00"]);
    assert_eq!(autumn[2], "2026-10-26T02:30:00+01:00", "the zone's offset at each instant");
    // New York springs forward on 2026-03-08 (02:00 EST -> 03:00 EDT).
    let york = preview(&app, "30 2 * * *", "America/New_York", "2026-03-07T00:00:00-05:00", 3).await;
    assert_eq!(york, ["2026-03-07T02:30:00-05:00", "2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"]);
    let hourly = preview(&app, "0 * * * *", "America/New_York", "2026-03-08T00:30:00-05:00", 3).await;
    assert_eq!(hourly, ["2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"]);
    // Strictly after `from`, whatever offset `from` is written in.
    let after = preview(&app, "0 9 * * *", "UTC", "2026-11-22T10:00:00+01:00", 1).await;
    assert_eq!(after, ["2026-11-23T09:00:00+00:00"]);
    assert_eq!(preview(&app, "*/1 * * * *", "UTC", "2026-11-22T09:00:00Z", 100).await.len(), 100);

    // Bad input: 400 naming the field.
    let bad = |body: Value| {
        let app = &app;
        async move { app.admin(Method::POST, "/schedules/preview", Some(body)).await }
    };
    let base = json!({"cron": "0 * * * *", "timezone": "UTC", "from": "2026-11-22T09:00:00Z", "count": 3});
    for (field, value) in [
        ("cron", json!("every hour")),
        ("cron", json!("* ".repeat(120))),
        ("timezone", json!("Mars/Olympus")),
        ("from", json!("yesterday")),
        ("count", json!(0)),
        ("count", json!(101)),
    ] {
        let mut body = base.clone();
        body[field] = value;
        bad(body).await.assert_refused(400, "invalid_request", field);
    }
    let mut extra = base.clone();
    extra["seconds"] = json!(true);
    assert_eq!(bad(extra).await.status, 400);
    // Scope: flows:read.
    let none = scoped(&app, app.admin.org, &["webhooks:read"]).await;
    let refused = app.call(Method::POST, "/schedules/preview", Some(&none), Some(base.clone())).await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    let reader = scoped(&app, app.admin.org, &["flows:read"]).await;
    assert_eq!(app.call(Method::POST, "/schedules/preview", Some(&reader), Some(base)).await.status, 200);
}

#[tokio::test]
async fn schedules_are_created_read_changed_and_deleted_with_validation_scopes_and_isolation() {
    let app = TestApp::spawn().await;
    let flow = app.delay_flow("monitored").await;
    let env = PutEnvironment { variables: [("base".to_owned(), "https://staging.example".to_owned())].into() };
    app.api().flows().put_environment(&flow, "staging", &env).await.expect("environment");
    let path = format!("/flows/{flow}/schedules");
    let channel = json!({"name": "ops", "kind": "slack", "url": "https://hooks.slack.example/T1/B2"});
    let channel = app.admin(Method::POST, "/notification-channels", Some(channel)).await;
    assert_eq!(channel.status, 201, "{}", channel.text);
    let channel = channel.body["id"].as_str().expect("a channel id").to_owned();
    let body = json!({"cron": "0 9 * * MON-FRI", "timezone": "Europe/Paris", "environment": "staging",
        "variables": {"token": "t-1"}, "runner_labels": ["eu"], "overlap": "allow", "catch_up_s": 600,
        "notify": {"channels": [channel], "after_failures": 3}});
    let created = app.admin(Method::POST, &path, Some(body)).await;
    assert_eq!(created.status, 201, "{}", created.text);
    let s = &created.body;
    assert_eq!(s["flow_id"], flow.as_str());
    assert_eq!((s["cron"].as_str(), s["timezone"].as_str()), (Some("0 9 * * MON-FRI"), Some("Europe/Paris")));
    assert_eq!((&s["environment"], &s["version"]), (&json!("staging"), &Value::Null));
    assert_eq!((&s["variables"], &s["runner_labels"]), (&json!({"token": "t-1"}), &json!(["eu"])));
    assert_eq!((&s["overlap"], &s["catch_up_s"], &s["paused"]), (&json!("allow"), &json!(600), &json!(false)));
    assert_eq!(s["notify"], json!({"channels": [channel], "after_failures": 3, "on_recovery": true}));
    assert_eq!(s["state"], "unknown");
    let next: Vec<String> = serde_json::from_value(s["next_occurrences"].clone()).expect("times");
    assert_eq!(next.len(), 5);
    for time in &next {
        assert!(time.contains("T09:00:00+0"), "09:00 Paris time with its offset: {time}");
        let day = chrono::DateTime::parse_from_rfc3339(time).expect("RFC 3339");
        assert!(day > chrono::Utc::now(), "in the future: {time}");
    }
    let id = s["id"].as_str().expect("id").to_owned();
    let item = format!("{path}/{id}");

    // Defaults.
    let plain = app.admin(Method::POST, &path, Some(json!({"cron": "*/5 * * * *"}))).await;
    assert_eq!(plain.status, 201, "{}", plain.text);
    assert_eq!((&plain.body["timezone"], &plain.body["overlap"]), (&json!("UTC"), &json!("skip")));
    assert_eq!((&plain.body["catch_up_s"], &plain.body["paused"]), (&json!(0), &json!(false)));
    assert_eq!(plain.body["notify"], json!({"channels": [], "after_failures": 1, "on_recovery": true}));
    assert!(plain.body["next_occurrences"][0].as_str().expect("a time").ends_with("+00:00"));

    // Read, list.
    let read = app.admin(Method::GET, &item, None).await;
    assert_eq!((read.status.as_u16(), &read.body["id"]), (200, &json!(id)));
    let listed = app.admin(Method::GET, &path, None).await;
    let ids: Vec<&str> =
        listed.body["items"].as_array().expect("items").iter().filter_map(|s| s["id"].as_str()).collect();
    assert_eq!(ids, [id.as_str(), plain.body["id"].as_str().expect("id")]);

    // Patch: pause empties the coming times; null clears the environment; the rest stays.
    let paused = app.admin(Method::PATCH, &item, Some(json!({"paused": true, "environment": null}))).await;
    assert_eq!(paused.status, 200, "{}", paused.text);
    assert_eq!((&paused.body["paused"], &paused.body["next_occurrences"]), (&json!(true), &json!([])));
    assert_eq!((&paused.body["environment"], &paused.body["catch_up_s"]), (&Value::Null, &json!(600)));
    let zone = app.admin(Method::PATCH, &item, Some(json!({"paused": false, "timezone": "America/New_York"}))).await;
    assert!(zone.body["next_occurrences"][0].as_str().expect("a time").contains("T09:00:00-0"), "{}", zone.text);

    // Validation: 400 naming the field.
    for (body, field) in [
        (json!({"cron": "every day"}), "cron"),
        (json!({"cron": "0 9 * * *", "timezone": "Europe/Pariss"}), "timezone"),
        (json!({"cron": "0 9 * * *", "catch_up_s": 86401}), "catch_up_s"),
        (json!({"cron": "0 9 * * *", "overlap": "queue"}), "overlap"),
        (json!({"cron": "0 9 * * *", "environment": "production"}), "environment"),
        (json!({"cron": "0 9 * * *", "version": 1}), "version"),
        (json!({"cron": "0 9 * * *", "version": "latest"}), "version"),
        (json!({"cron": "0 9 * * *", "notify": {"after_failures": 0}}), "after_failures"),
        (json!({"cron": "0 9 * * *", "notify": {"after_failures": 101}}), "after_failures"),
        (
            json!({"cron": "0 9 * * *", "notify": {"channels": (0..21).map(|_| uuid::Uuid::now_v7()).collect::<Vec<_>>()}}),
            "channels",
        ),
        (json!({"cron": "0 9 * * *", "notify": {"channels": ["not-an-id"]}}), "channels"),
        (json!({"cron": "0 9 * * *", "runner_labels": [" eu"]}), "runner_labels"),
        (json!({"cron": "0 9 * * *", "variables": {"execution.id": "x"}}), "variables"),
        (json!({"cron": "0 9 * * *", "every": "day"}), "every"),
        (json!({"timezone": "UTC"}), "cron"),
    ] {
        app.admin(Method::POST, &path, Some(body.clone())).await.assert_refused(400, "invalid_request", field);
    }
    app.admin(Method::PATCH, &item, Some(json!({"timezone": "Nowhere"}))).await.assert_refused(
        400,
        "invalid_request",
        "timezone",
    );
    // At most 10 per flow.
    for n in 2..10 {
        let more = app.admin(Method::POST, &path, Some(json!({"cron": format!("{n} * * * *")}))).await;
        assert_eq!(more.status, 201, "schedule {n}: {}", more.text);
    }
    app.admin(Method::POST, &path, Some(json!({"cron": "0 0 * * *"}))).await.assert_refused(
        400,
        "invalid_request",
        "at most 10",
    );

    // Scopes: reads need flows:read, writes flows:write.
    let reader = scoped(&app, app.admin.org, &["flows:read"]).await;
    assert_eq!(app.call(Method::GET, &item, Some(&reader), None).await.status, 200);
    assert_eq!(app.call(Method::GET, &path, Some(&reader), None).await.status, 200);
    let write = Some(json!({"cron": "0 0 * * *"}));
    assert_eq!(app.call(Method::POST, &path, Some(&reader), write.clone()).await.status, 403);
    assert_eq!(app.call(Method::PATCH, &item, Some(&reader), Some(json!({"paused": true}))).await.status, 403);
    assert_eq!(app.call(Method::DELETE, &item, Some(&reader), None).await.status, 403);
    let stranger = scoped(&app, app.admin.org, &["webhooks:read"]).await;
    assert_eq!(app.call(Method::GET, &path, Some(&stranger), None).await.status, 403);

    // Another organization's flow and schedule answer 404, whatever the scope.
    let other = app.new_org("Other").await;
    for (method, target, body) in [
        (Method::GET, path.clone(), None),
        (Method::POST, path.clone(), write.clone()),
        (Method::GET, item.clone(), None),
        (Method::PATCH, item.clone(), Some(json!({"paused": true}))),
        (Method::DELETE, item.clone(), None),
    ] {
        let reply = app.call(method.clone(), &target, Some(&other), body).await;
        assert_eq!(reply.status, 404, "{method} {target}: {}", reply.text);
    }
    let their_flow = app
        .api_as(&other)
        .flows()
        .create(&WriteFlow::new(
            "theirs".parse().expect("name"),
            json!({"nodes": [{"id": "w", "kind": "delay", "delay_ms": 1}]}),
        ))
        .await
        .expect("their flow");
    let crossed = format!("/flows/{}/schedules/{id}", their_flow.id);
    assert_eq!(app.call(Method::GET, &crossed, Some(&other), None).await.status, 404, "a schedule under another flow");
    assert_eq!(
        app.admin(Method::GET, &format!("/flows/{flow}/schedules/{}", uuid::Uuid::now_v7()), None).await.status,
        404
    );
    assert_eq!(app.admin(Method::GET, &item, None).await.body["paused"], false, "untouched by the other org");

    // Delete.
    app.delete(&item, 204).await;
    assert_eq!(app.admin(Method::GET, &item, None).await.status, 404);
    assert_eq!(app.admin(Method::DELETE, &item, None).await.status, 404);
}

#[tokio::test]
async fn a_flows_legacy_schedule_text_is_its_first_schedule_in_utc_with_the_draft() {
    let app = TestApp::spawn().await;
    let api = app.api();
    let definition = json!({"nodes": [{"id": "w", "kind": "delay", "delay_ms": 1}]});
    let flow = WriteFlow {
        schedule: Some("*/15 * * * *".into()),
        ..WriteFlow::new("legacy".parse().expect("name"), definition)
    };
    let flow = api.flows().create(&flow).await.expect("create").id;
    let path = format!("/flows/{flow}/schedules");
    app.admin(Method::POST, &path, Some(json!({"cron": "0 9 * * *", "timezone": "Europe/Paris"}))).await;
    let listed = app.admin(Method::GET, &path, None).await;
    let items = listed.body["items"].as_array().expect("items");
    assert_eq!(items.len(), 2);
    let legacy = &items[0];
    assert_eq!(
        (&legacy["cron"], &legacy["timezone"], &legacy["version"]),
        (&json!("*/15 * * * *"), &json!("UTC"), &Value::Null)
    );
    let legacy_path = format!("{path}/{}", legacy["id"].as_str().expect("id"));

    // Writing the flow's text changes that schedule; the schedule's cron changes the flow's text.
    let patch = PatchFlow { schedule: Patch::Set("0 * * * *".into()), ..Default::default() };
    api.flows().patch(flow, &patch).await.expect("patch");
    assert_eq!(app.admin(Method::GET, &legacy_path, None).await.body["cron"], "0 * * * *");
    app.admin(Method::PATCH, &legacy_path, Some(json!({"cron": "30 * * * *"}))).await;
    assert_eq!(api.flows().get(flow).await.expect("flow").schedule.as_deref(), Some("30 * * * *"));
    // A zone other than UTC makes it an ordinary schedule: the flow's text is cleared.
    app.admin(Method::PATCH, &legacy_path, Some(json!({"timezone": "Europe/Paris"}))).await;
    assert_eq!(api.flows().get(flow).await.expect("flow").schedule, None);
    assert_eq!(app.admin(Method::GET, &path, None).await.body["items"].as_array().map(Vec::len), Some(2));
    // A new text makes a new first schedule; clearing it deletes that one only.
    api.flows()
        .patch(flow, &PatchFlow { schedule: Patch::Set("5 * * * *".into()), ..Default::default() })
        .await
        .expect("patch");
    let listed = app.admin(Method::GET, &path, None).await;
    assert_eq!(listed.body["items"].as_array().map(Vec::len), Some(3));
    assert_eq!(listed.body["items"][0]["cron"], "5 * * * *");
    api.flows().patch(flow, &PatchFlow { schedule: Patch::Clear, ..Default::default() }).await.expect("patch");
    assert_eq!(app.admin(Method::GET, &path, None).await.body["items"].as_array().map(Vec::len), Some(2));
    // Deleting the first schedule clears the text.
    api.flows()
        .patch(flow, &PatchFlow { schedule: Patch::Set("7 * * * *".into()), ..Default::default() })
        .await
        .expect("patch");
    let first = app.admin(Method::GET, &path, None).await.body["items"][0]["id"].as_str().expect("id").to_owned();
    app.delete(&format!("{path}/{first}"), 204).await;
    assert_eq!(api.flows().get(flow).await.expect("flow").schedule, None);
}
