//! The app's schedules section in a real browser: a flow's schedules with their next fire times shown in each
//! schedule's own zone, the form that adds one (previewing its fire times in the chosen zone, naming a channel to
//! alert), and whom an existing schedule alerts changed after its creation.

use hookflow_shared::Role;
use hookflow_tests::TestApp;
use hookflow_tests::browser::Browser;
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn the_app_lists_a_flows_schedules_and_adds_one_with_fire_times_in_its_zone() {
    let app = TestApp::spawn().await;
    let flow = app.delay_flow("watched").await;
    let body = json!({"cron": "30 9 * * *", "timezone": "Asia/Tokyo", "paused": false});
    assert_eq!(app.admin(Method::POST, &format!("/flows/{flow}/schedules"), Some(body)).await.status, 201);
    let made = app
        .admin(
            Method::POST,
            "/notification-channels",
            Some(json!({"name": "ops slack", "kind": "slack", "url": "https://hooks.example/ops"})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.text);
    let channel = made.body["id"].as_str().expect("id").to_owned();
    let person = app.person(app.admin.org, Role::Member).await;
    let browser = Browser::start(1280).await;
    browser.sign_in(&app.base, &person.email, &person.password).await;
    browser.goto(&format!("{}/#/flows/{flow}", app.base)).await;
    let section = "section[aria-label='Schedules']";
    let shown = browser.wait_text(section, "(Asia/Tokyo)").await;
    assert!(shown.contains("30 9 * * *"), "{shown}");
    // 09:30 in Tokyo, whatever the browser's own zone (00:30 UTC would read 12:30).
    assert!(shown.contains("9:30"), "the next time in the schedule's zone: {shown}");

    browser.type_into("#schedule-cron", "0 7 * * *").await;
    browser.type_into("#schedule-zone", "America/New_York").await;
    let preview = browser.wait_text("#schedule-preview", "(America/New_York)").await;
    assert!(preview.contains("7:00"), "the preview in the chosen zone: {preview}");
    browser.type_into("#schedule-labels", "eu, linux").await;
    browser.click(&format!("#schedule-form input.schedule-channel[value='{channel}']")).await;
    browser.click("#schedule-form button[type='submit']").await;
    browser.wait_text(section, "0 7 * * *").await;
    let listed: Value = app.get(&format!("/flows/{flow}/schedules"), 200).await;
    let added = &listed["items"][1];
    assert_eq!((&added["cron"], &added["timezone"]), (&json!("0 7 * * *"), &json!("America/New_York")));
    assert_eq!(added["runner_labels"], json!(["eu", "linux"]));
    assert_eq!(added["notify"], json!({"channels": [channel], "after_failures": 1, "on_recovery": true}));
    browser
        .wait_text(
            &format!("{section} tbody tr:nth-child(2)"),
            "1 channel, after the first failed run, and on recovery",
        )
        .await;
    let first = listed["items"][0]["id"].as_str().expect("id").to_owned();
    assert_eq!(listed["items"][0]["notify"]["channels"], json!([]));

    // Whom the first schedule alerts, changed after its creation: the channel, after 3 failed runs, no recovery.
    let row = format!("{section} tbody tr:nth-child(1)");
    browser.wait_text(&row, "none").await;
    browser.click(&format!("{row} button.schedule-edit-notify")).await;
    browser.click(&format!("#schedule-notify-form input.schedule-notify-channel[value='{channel}']")).await;
    browser.type_into("#schedule-notify-after-failures", "3").await;
    browser.click("#schedule-notify-on-recovery").await;
    browser.click("#schedule-notify-form button[type='submit']").await;
    browser.wait_text(&row, "1 channel, after 3 failed runs").await;
    let changed: Value = app.get(&format!("/flows/{flow}/schedules/{first}"), 200).await;
    assert_eq!(changed["notify"], json!({"channels": [channel], "after_failures": 3, "on_recovery": false}));
    assert_eq!((&changed["cron"], &changed["timezone"]), (&json!("30 9 * * *"), &json!("Asia/Tokyo")), "the rest kept");
    // The editor opens with what is stored; unticking the channel leaves the schedule alerting no one.
    browser.click(&format!("{row} button.schedule-edit-notify")).await;
    browser.find(&format!("#schedule-notify-form input.schedule-notify-channel[value='{channel}']")).await;
    let ticked = browser
        .run(
            "return document.querySelector(arguments[0]).checked",
            vec![json!(format!("#schedule-notify-form input.schedule-notify-channel[value='{channel}']"))],
        )
        .await;
    assert_eq!(ticked, json!(true), "the stored channel is ticked");
    browser.click(&format!("#schedule-notify-form input.schedule-notify-channel[value='{channel}']")).await;
    browser.click("#schedule-notify-form button[type='submit']").await;
    browser.wait_text(&row, "none").await;
    let cleared: Value = app.get(&format!("/flows/{flow}/schedules/{first}"), 200).await;
    assert_eq!(cleared["notify"], json!({"channels": [], "after_failures": 3, "on_recovery": false}));

    // Pause from the list: the schedule has no coming times.
    browser.click(&format!("{section} tbody tr:nth-child(2) button")).await;
    browser.wait_text(&format!("{section} tbody tr:nth-child(2)"), "paused").await;
    let paused: Value = app.get(&format!("/flows/{flow}/schedules/{}", added["id"].as_str().expect("id")), 200).await;
    assert_eq!((&paused["paused"], &paused["next_occurrences"]), (&json!(true), &json!([])));
    browser.close().await;
}
