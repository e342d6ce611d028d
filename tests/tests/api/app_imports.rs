//! The console's import dialog (issue #54) in a real browser against the real server: a member uploads a Postman
//! export, reads the preview (every request with its folder, the test lines not converted with their place, the
//! warnings) while nothing is stored, sees a change make the preview stale, imports it and finds the requests on
//! the collection's page; then pastes curl lines and imports them with a flow.

use hookflow_shared::Role;
use hookflow_tests::TestApp;
use hookflow_tests::browser::Browser;
use serde_json::{Value, json};

const DIALOG: &str = "dialog[aria-label='Import from another tool']";

fn fixture(name: &str) -> String {
    format!("{}/fixtures/imports/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The text of every element matching `css`, in order.
async fn texts(browser: &Browser, css: &str) -> Vec<String> {
    let script = "return [...document.querySelectorAll(arguments[0])].map(el => el.textContent)";
    serde_json::from_value(browser.run(script, vec![json!(css)]).await).expect("texts")
}

/// Whether the dialog's Import button can be pressed.
async fn can_import(browser: &Browser) -> bool {
    let script = "return !document.querySelector(arguments[0] + ' button.primary').disabled";
    browser.run(script, vec![json!(DIALOG)]).await == json!(true)
}

#[tokio::test]
async fn a_postman_export_is_previewed_in_the_import_dialog_then_imported() {
    let app = TestApp::spawn().await;
    let person = app.person(app.admin.org, Role::Member).await;
    let browser = Browser::start(1280).await;
    browser.sign_in(&app.base, &person.email, &person.password).await;
    browser.goto(&format!("{}/#/collections", app.base)).await;
    browser.click("#import-tool").await;

    let file = browser.labelled(DIALOG, "File").await;
    let path = fixture("shop.postman_collection.json");
    browser.find(&file).await.send_keys(&path).await.expect("the file is chosen");
    let name = browser.labelled(DIALOG, "Collection name (optional)").await;
    browser.type_into(&name, "Shop from the browser").await;
    assert!(!can_import(&browser).await, "nothing to import before a preview");
    browser.click_named(DIALOG, "Preview").await;
    let summary = browser.wait_text("#import-summary", "requests").await;
    assert_eq!(summary, "5 requests in 3 folders; 11 test lines converted, 5 not converted.");
    assert_eq!(
        texts(&browser, "#import-requests li").await,
        [
            "POST Auth/Log in {{base_url}}/login",
            "GET Users/List users {{base_url}}/users?limit=10",
            "POST Users/Admin/Create user {{base_url}}/users",
            "POST Users/Admin/Upload avatar {{base_url}}/users/{{user_id}}/avatar",
            "GET Health {{base_url}}/health",
        ]
    );
    assert_eq!(
        texts(&browser, "#import-not-converted li").await,
        [
            "Auth/Log in:1 console.log(\"logging in as \" + pm.environment.get(\"user\"));",
            "Users/List users:10 pm.expect(jsonData.items.length).to.be.above(0);",
            "Users/List users:17 postman.setNextRequest(\"Create user\");",
            "Users/Admin/Upload avatar:2 pm.variables.set(\"ts\", Date.now());",
            "Health:2 tests[\"fast\"] = responseTime < 200;",
        ]
    );
    let warnings = texts(&browser, "#import-warnings li").await;
    assert!(warnings.iter().any(|w| w.contains("avatar.png")), "{warnings:?}");
    assert!(can_import(&browser).await);
    browser.screenshot("import-preview.png").await;
    assert_eq!(app.get::<Value>("/collections", 200).await["items"], json!([]), "a preview stores nothing");

    // A change makes the preview stale: it is looked at again before anything is stored.
    browser.type_into(&name, "Shop from the browser").await;
    assert!(!can_import(&browser).await, "a changed form needs a new preview");
    browser.click_named(DIALOG, "Preview").await;
    for _ in 0..150 {
        if can_import(&browser).await {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    browser.click_named(DIALOG, "Import").await;
    browser.wait_text("main h1", "Shop from the browser").await;
    let page = browser.wait_text("main", "{{base_url}}/health").await;
    for shown in ["Auth", "Users/Admin", "(no folder)", "Log in", "Upload avatar", "{{base_url}}/users?limit=10"] {
        assert!(page.contains(shown), "{shown:?} on the collection's page: {page}");
    }
    let url = browser.client.current_url().await.expect("url");
    let id = url.fragment().and_then(|f| f.strip_prefix("/collections/")).expect("the collection's page").to_owned();
    let stored: Value = app.get(&format!("/collections/{id}"), 200).await;
    assert_eq!(stored["name"], "Shop from the browser");
    assert_eq!(stored["requests"].as_array().map(Vec::len), Some(5));

    // curl lines pasted, with a flow of them.
    browser.goto(&format!("{}/#/collections", app.base)).await;
    browser.click("#import-tool").await;
    let format = browser.labelled(DIALOG, "Format").await;
    browser.choose(&format, "curl command lines").await;
    let text = browser.labelled(DIALOG, "Text").await;
    let curl = std::fs::read_to_string(fixture("shop.curl.txt")).expect("curl lines");
    browser.type_into(&text, &curl).await;
    browser.type_into(&browser.labelled(DIALOG, "Collection name (optional)").await, "Pasted curl").await;
    browser.type_into(&browser.labelled(DIALOG, "Flow (optional)").await, "curl flow").await;
    browser.click_named(DIALOG, "Preview").await;
    let summary = browser.wait_text("#import-summary", "requests").await;
    assert_eq!(summary, "5 requests in 0 folders; 0 test lines converted, 0 not converted.");
    let requests = texts(&browser, "#import-requests li").await;
    assert_eq!(requests.len(), 5, "{requests:?}");
    assert!(requests[4].starts_with("DELETE ") && requests[4].ends_with(" https://shop.example.com/api/users/7"));
    browser.click_named(DIALOG, "Import").await;
    browser.wait_text("main h1", "Pasted curl").await;
    let flows: Value = app.get("/flows", 200).await;
    let names: Vec<&str> =
        flows["items"].as_array().expect("items").iter().filter_map(|f| f["name"].as_str()).collect();
    assert_eq!(names, ["curl flow"]);
    browser.close().await;
}
