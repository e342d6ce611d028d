//! How an endpoint answers, in the app, in a real browser (#51): two response rules written in the endpoint's form
//! (one moved above the other), the handshake picked with a secret never shown again and CORS set; the "test this
//! request" box saying which rule answers and what (agreeing with the capture URL); and "Create mock" on a
//! collection's page opening the mock's endpoint.

use hookflow_shared::Role;
use hookflow_tests::TestApp;
use hookflow_tests::browser::Browser;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

/// Waits until the endpoint reads back as `done` says.
async fn stored(app: &TestApp, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut seen = Value::Null;
    for _ in 0..100 {
        seen = app.get::<Value>(&format!("/webhooks/{id}"), 200).await;
        if done(&seen) {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the endpoint never read back as expected: {seen}");
}

#[tokio::test]
async fn rules_are_edited_tested_and_a_collection_is_mocked_in_the_app() {
    let app = TestApp::spawn().await;
    let person = app.person(app.admin.org, Role::Owner).await;
    let id = app.webhook_named("Orders").await;
    let browser = Browser::start(1280).await;
    browser.sign_in(&app.base, &person.email, &person.password).await;

    // Two rules in the endpoint's form; the second, more specific one, moved to the top.
    browser.goto(&format!("{}/#/webhooks", app.base)).await;
    browser.click(".row-actions button.small").await;
    browser.click("#add-rule").await;
    browser.type_into("#rules li:nth-child(1) input[name=rule-path]", "/orders/*").await;
    browser.type_into("#rules li:nth-child(1) input[name=rule-status]", "202").await;
    browser.type_into("#rules li:nth-child(1) textarea[name=rule-body]", "any order").await;
    browser.click("#add-rule").await;
    browser.choose("#rules li:nth-child(2) select[name=rule-method]", "POST").await;
    browser.type_into("#rules li:nth-child(2) input[name=rule-name]", "one order").await;
    browser.type_into("#rules li:nth-child(2) input[name=rule-path]", "/orders/{id}").await;
    browser.type_into("#rules li:nth-child(2) input[name=rule-status]", "201").await;
    browser.type_into("#rules li:nth-child(2) textarea[name=rule-headers]", "Content-Type: application/json").await;
    browser.type_into("#rules li:nth-child(2) textarea[name=rule-body]", r#"{"order": "{{request.params.id}}"}"#).await;
    browser.click("#rules li:nth-child(2) button[title='Move up']").await;
    browser.choose("#handshake-preset", "zoom").await;
    browser.type_into("dialog input[name=handshake-secret]", "zoom-secret-never-shown").await;
    browser.type_into("dialog textarea[name=cors-origins]", "https://app.example.com").await;
    browser.click("dialog form.stack > button[type=submit]").await;
    let endpoint = stored(&app, &id, |w| w["rules"].as_array().is_some_and(|r| r.len() == 2)).await;
    assert_eq!(
        endpoint["rules"],
        json!([
            {"name": "one order", "method": "POST", "path": "/orders/{id}", "status": 201,
             "headers": {"Content-Type": "application/json"}, "body": "{\"order\": \"{{request.params.id}}\"}"},
            {"path": "/orders/*", "status": 202, "body": "any order"}
        ])
    );
    assert_eq!(endpoint["handshake"], json!({"preset": "zoom", "secret_set": true}));
    assert_eq!(endpoint["cors"], json!({"allow_origins": ["https://app.example.com"]}));

    // Opening the form again keeps everything as it is (the secret is not shown, nothing is sent for it).
    browser.click(".row-actions button.small").await;
    let page = browser.run("return document.body.innerHTML", vec![]).await;
    assert!(!page.as_str().unwrap_or_default().contains("zoom-secret-never-shown"), "the secret is never shown");
    browser.click("dialog form.stack > button[type=submit]").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again: Value = app.get(&format!("/webhooks/{id}"), 200).await;
    assert_eq!(
        (again["rules"].clone(), again["handshake"].clone()),
        (endpoint["rules"].clone(), endpoint["handshake"].clone())
    );

    // "Test this request" on the endpoint's page says which rule answers and what, as the capture URL does.
    browser.goto(&format!("{}/#/webhooks/{id}", app.base)).await;
    browser.choose("#test-method", "POST").await;
    browser.type_into("#test-path", "/orders/A-17").await;
    browser.click("#test-request").await;
    browser.wait_text("#test-rule", "Rule 1 (one order) answers").await;
    assert_eq!(browser.text("#test-status").await, "201");
    assert_eq!(browser.text("#test-answer-body").await, r#"{"order": "A-17"}"#);
    let live = app.capture(Method::POST, &format!("{id}/orders/A-17"), "").await;
    assert_eq!((live.status.as_u16(), live.text.as_str()), (201, r#"{"order": "A-17"}"#));
    browser.choose("#test-method", "GET").await;
    browser.click("#test-request").await;
    browser.wait_text("#test-rule", "Rule 2 answers").await;
    assert_eq!(browser.text("#test-answer-body").await, "any order");
    browser.type_into("#test-path", "/elsewhere").await;
    browser.click("#test-request").await;
    browser.wait_text("#test-rule", "No rule answers").await;
    assert_eq!(browser.text("#test-status").await, "200");
    browser.screenshot("answers-1280").await;

    // "Create mock" on a collection's page opens the mock's endpoint, whose rules answer the operations.
    let petstore = crate::collections::data("petstore-3.0.yaml");
    let imported: Value =
        app.post("/collections/import/openapi", &json!({"source": {"document": petstore}}), 201).await;
    let collection = imported["collection"]["id"].as_str().expect("id").to_owned();
    browser.goto(&format!("{}/#/collections/{collection}", app.base)).await;
    browser.click("#create-mock").await;
    browser.wait_text("#rules-test", "3 rule(s)").await;
    let url = browser.text("#capture-url").await;
    let mock_id = url.rsplit('/').next().expect("an id").to_owned();
    let mock: Value = app.get(&format!("/webhooks/{mock_id}"), 200).await;
    assert_eq!(mock["mock_of"], collection.as_str());
    browser.type_into("#test-path", "/pets").await;
    browser.click("#test-request").await;
    browser.wait_text("#test-rule", "(Create a pet) answers").await;
    assert_eq!(browser.text("#test-status").await, "201");
    browser.type_into("#test-path", "/nothing").await;
    browser.click("#test-request").await;
    browser.wait_text("#test-status", "404").await;
    browser.close().await;
}
