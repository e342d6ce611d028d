//! `hookflow destinations list|create|delete|replay` (issue #49), the real binary against the real server: a
//! signed destination created (its secret printed once), listed, its dead deliveries replayed to a fixed receiver,
//! deleted; a bad flag refused naming it.

use hookflow_tests::TestApp;
use hookflow_tests::cli::Cli;
use hookflow_tests::receiver::Receiver;
use reqwest::Method;
use std::time::Duration;

const HOOKFLOW: &str = env!("CARGO_BIN_EXE_hookflow-under-test");

#[tokio::test]
async fn the_cli_creates_lists_replays_and_deletes_destinations() {
    let app = TestApp::spawn().await;
    let cli = Cli { binary: HOOKFLOW, base: app.base.clone() };
    let webhook = app.webhook_named("orders").await;
    let receiver = Receiver::spawn(500).await;
    let made = cli
        .run(
            Some(&app.admin),
            &[
                "destinations",
                "create",
                &webhook,
                "--name",
                "billing",
                "--to",
                &receiver.base,
                "--retry-schedule",
                "1",
                "--sign",
                "--json",
            ],
        )
        .await;
    assert_eq!(made.code, 0, "{}", made.all());
    let made: serde_json::Value = serde_json::from_str(&made.stdout).expect("json");
    let id = made["id"].as_str().expect("id").to_owned();
    assert!(made["signing_secret"].as_str().is_some_and(|s| s.starts_with("whsec_")));
    assert_eq!(made["retry_schedule_s"], serde_json::json!([1]));

    let listed = cli.run(Some(&app.admin), &["destinations", "list", &webhook]).await;
    assert_eq!(listed.code, 0, "{}", listed.all());
    assert!(listed.stdout.contains("billing") && listed.stdout.contains(&id), "{}", listed.stdout);
    assert!(!listed.all().contains("whsec_"), "the secret is shown once only");

    // Two attempts fail: dead; the CLI replays it once the receiver answers.
    let sent = app.capture(Method::POST, &webhook, "{}").await;
    assert_eq!(sent.status, 200);
    receiver.wait_until(Duration::from_secs(15), |a| a.len() >= 2).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while app.rows("deliveries WHERE status = 'dead'").await < 1 {
        assert!(std::time::Instant::now() < deadline, "never dead");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    receiver.answer(200);
    let replayed = cli.run(Some(&app.admin), &["destinations", "replay", &webhook, &id]).await;
    assert_eq!(replayed.code, 0, "{}", replayed.all());
    assert!(replayed.stdout.contains("replayed 1"), "{}", replayed.stdout);
    receiver.wait_until(Duration::from_secs(15), |a| a.iter().any(|x| x.answered == 200)).await;

    let bad = cli
        .run(Some(&app.admin), &["destinations", "create", &webhook, "--name", "", "--to", "https://x.example/"])
        .await;
    assert_ne!(bad.code, 0);
    assert!(bad.stderr.contains("--name"), "{}", bad.all());

    let deleted = cli.run(Some(&app.admin), &["destinations", "delete", &webhook, &id]).await;
    assert_eq!(deleted.code, 0, "{}", deleted.all());
    assert_eq!(app.rows("destinations").await, 0);
}
