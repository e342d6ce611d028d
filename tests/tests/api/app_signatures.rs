//! Signatures in the app, in a real browser: an endpoint's verification set through its form (secrets never shown
//! again), the verdict badges of a genuine and a forged capture in the live inspector, the reason and the re-check
//! on the detail, and the signature filter.

use crate::signatures::{Key, cases, send};
use hookflow_shared::Role;
use hookflow_shared::api::signatures::SignatureScheme;
use hookflow_tests::TestApp;
use hookflow_tests::browser::Browser;
use std::time::Duration;

async fn badge(browser: &Browser, capture: &str) -> String {
    let script = "const b = document.querySelector(`#captures li[data-id='${arguments[0]}'] .sig`); return b ? b.dataset.verdict : null";
    for _ in 0..150 {
        if let Some(verdict) = browser.run(script, vec![capture.into()]).await.as_str() {
            return verdict.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("capture {capture} never showed a signature badge");
}

#[tokio::test]
async fn the_inspector_shows_which_senders_proved_who_they_are() {
    let app = TestApp::spawn().await;
    let person = app.person(app.admin.org, Role::Owner).await;
    let id = app.webhook_named("GitHub pushes").await;
    let browser = Browser::start(1280).await;
    browser.sign_in(&app.base, &person.email, &person.password).await;
    let github = cases().into_iter().find(|c| c.scheme == SignatureScheme::Github).expect("github");

    // Verification is set in the endpoint's form: a scheme and a secret, written once.
    browser.goto(&format!("{}/#/webhooks", app.base)).await;
    browser.click(".row-actions button.small").await;
    browser.run("const s = document.getElementById('verification-scheme'); s.value = 'github'; s.dispatchEvent(new Event('change'))", vec![]).await;
    browser.type_into("dialog input[name=secret-1]", &github.secrets[0]).await;
    browser.click("dialog form.stack button[type=submit]").await;
    let mut stored = serde_json::Value::Null;
    for _ in 0..100 {
        stored = app.get::<serde_json::Value>(&format!("/webhooks/{id}"), 200).await["verification"].clone();
        if !stored.is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(stored["scheme"], "github", "{stored}");
    assert_eq!(stored["secrets_count"], 1);

    browser.goto(&format!("{}/#/webhooks/{id}", app.base)).await;
    browser.wait_text("#stream-state", "live").await;
    let url = app.url(&format!("/webhook/{id}"));
    let now = chrono::Utc::now().timestamp();
    let (_, receipt) = send(&app, &url, &(github.sign)(Key::Stored(0), now, b"{\"ref\":\"main\"}", &url)).await;
    let genuine = receipt["request_id"].as_str().expect("id").to_owned();
    let (_, receipt) = send(&app, &url, &(github.sign)(Key::Wrong, now, b"{\"ref\":\"evil\"}", &url)).await;
    let forged = receipt["request_id"].as_str().expect("id").to_owned();
    assert_eq!(badge(&browser, &genuine).await, "valid");
    assert_eq!(badge(&browser, &forged).await, "invalid");
    browser.screenshot("signatures-1280").await;

    browser.click(&format!("#captures li[data-id='{forged}'] button")).await;
    assert!(!browser.wait_text("#signature-reason", "").await.is_empty());
    browser.click("#signature form button").await;
    let result = browser.wait_text("#recheck-result", "invalid").await;
    assert!(result.contains("expected a signature starting"), "{result}");
    let page = browser.run("return document.body.innerHTML", vec![]).await;
    assert!(!page.as_str().unwrap_or_default().contains(&github.secrets[0]), "the secret is never shown");

    // The signature filter keeps only the forged capture.
    browser.run("document.getElementById('signature-filter').value = 'invalid'", vec![]).await;
    browser.click("form.search button[type=submit]").await;
    for _ in 0..100 {
        let ids =
            browser.run("return [...document.querySelectorAll('#captures li')].map(li => li.dataset.id)", vec![]).await;
        if ids == serde_json::json!([forged]) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the signature filter did not narrow the list to the forged capture");
}
