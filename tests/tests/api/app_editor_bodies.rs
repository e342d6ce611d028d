//! The flow editor's structured bodies (issue #54) in a real browser against the real server: a person builds a
//! multipart body (a text part, a base64 file part with its file name and content type, a secret part), a form's
//! pairs (one added and removed again) and a GraphQL request's variables and operation name from the node form
//! alone, no JSON typed but the variables; variables that are not a JSON object are flagged and change nothing;
//! the saved definition is exactly what was built, and a reload shows it in the form again.

use hookflow_shared::Role;
use hookflow_tests::TestApp;
use hookflow_tests::browser::Browser;
use serde_json::{Value, json};
use std::time::Duration;

fn card(id: &str) -> String {
    format!("li[data-node='{id}']")
}

async fn fill_in(browser: &Browser, scope: &str, label: &str, text: &str) {
    let css = browser.labelled(scope, label).await;
    browser.type_into(&css, text).await;
}

async fn choose(browser: &Browser, scope: &str, label: &str, option: &str) {
    browser.choose(&browser.labelled(scope, label).await, option).await;
}

/// The values of every control labelled `label` inside `scope`, in order.
async fn values(browser: &Browser, scope: &str, label: &str) -> Vec<String> {
    let script = "return [...document.querySelectorAll(arguments[0] + ' label')]
                    .filter(l => l.textContent.trim() === arguments[1] && l.htmlFor)
                    .map(l => document.getElementById(l.htmlFor).value)";
    serde_json::from_value(browser.run(script, vec![json!(scope), json!(label)]).await).expect("values")
}

async fn save(browser: &Browser) {
    browser.click_named(".editor-toolbar", "Save").await;
    for _ in 0..150 {
        let status = browser.run("return document.getElementById('editor-status').textContent", vec![]).await;
        if status.as_str().is_some_and(|s| s.ends_with(" · saved")) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the editor never said saved; {}", browser.text(".editor").await);
}

#[tokio::test]
async fn multipart_form_and_graphql_bodies_are_built_in_the_node_form() {
    let app = TestApp::spawn().await;
    let person = app.person(app.admin.org, Role::Member).await;
    let browser = Browser::start(1280).await;
    browser.sign_in(&app.base, &person.email, &person.password).await;
    let request = |id: &str, path: &str| json!({"id": id, "kind": "request", "request": {"method": "POST", "url": format!("https://api.example.com/{path}")}});
    let definition =
        json!({"nodes": [request("upload", "files"), request("login", "login"), request("pet", "graphql")]});
    let flow = app.create_flow("bodies", definition).await;
    browser.goto(&format!("{}/#/flows/{flow}", app.base)).await;

    // Multipart: a text part, a file part given as base64, a secret part.
    let upload = card("upload");
    browser.find(&upload).await;
    choose(&browser, &upload, "Body kind", "Multipart").await;
    fill_in(&browser, &upload, "Part name", "note").await;
    fill_in(&browser, &upload, "Content", "for {{user}}").await;
    browser.click_named(&upload, "Add part").await;
    fill_in(&browser, &upload, "Part name", "photo").await;
    choose(&browser, &upload, "Content is", "Base64 bytes").await;
    fill_in(&browser, &upload, "Content", "iVBORw0KGgo=").await;
    fill_in(&browser, &upload, "File name", "logo.png").await;
    fill_in(&browser, &upload, "Content type", "image/png").await;
    browser.click_named(&upload, "Add part").await;
    fill_in(&browser, &upload, "Part name", "token").await;
    choose(&browser, &upload, "Content is", "Secret").await;
    fill_in(&browser, &upload, "Content", "{{secret.UPLOAD_TOKEN}}").await;

    // A form's pairs: one added, one added and removed again.
    let login = card("login");
    choose(&browser, &login, "Body kind", "Form (urlencoded)").await;
    fill_in(&browser, &login, "Field name", "user").await;
    fill_in(&browser, &login, "Field value", "ada").await;
    browser.click_named(&login, "Add field").await;
    fill_in(&browser, &login, "Field name", "password").await;
    fill_in(&browser, &login, "Field value", "{{secret.PW}}").await;
    browser.click_named(&login, "Add field").await;
    fill_in(&browser, &login, "Field name", "mistake").await;
    browser.click(&format!("{login} button[aria-label='Remove field 3']")).await;

    // GraphQL: the query, variables (refused until they are a JSON object) and the operation name.
    let pet = card("pet");
    choose(&browser, &pet, "Body kind", "GraphQL").await;
    fill_in(&browser, &pet, "GraphQL query", "query Pet($id: ID!) { pet(id: $id) { name } }").await;
    fill_in(&browser, &pet, "GraphQL variables", "[1]").await;
    browser.wait_text(&pet, "The variables must be a JSON object.").await;
    fill_in(&browser, &pet, "GraphQL variables", "{\"id\": \"{{pet_id}}\", \"limit\": 2}").await;
    fill_in(&browser, &pet, "Operation name", "Pet").await;
    let flagged = browser
        .run("return document.querySelectorAll(arguments[0] + ' [aria-invalid=true]').length", vec![json!(pet)])
        .await;
    assert_eq!(flagged, json!(0), "valid variables are not flagged");

    save(&browser).await;
    let stored: Value = app.get(&format!("/flows/{flow}"), 200).await;
    let nodes = &stored["definition"]["nodes"];
    assert_eq!(
        nodes[0]["request"]["multipart"],
        json!([
            {"name": "note", "value": "for {{user}}"},
            {"name": "photo", "base64": "iVBORw0KGgo=", "filename": "logo.png", "content_type": "image/png"},
            {"name": "token", "secret": "{{secret.UPLOAD_TOKEN}}"}
        ])
    );
    assert_eq!(nodes[1]["request"]["form"], json!([["user", "ada"], ["password", "{{secret.PW}}"]]));
    assert_eq!(
        nodes[2]["request"]["graphql"],
        json!({"query": "query Pet($id: ID!) { pet(id: $id) { name } }",
               "variables": {"id": "{{pet_id}}", "limit": 2}, "operation_name": "Pet"})
    );
    for node in nodes.as_array().expect("nodes") {
        assert!(node["request"].get("body").is_none(), "one body kind each: {node}");
    }
    assert!(browser.text("#problems").await.is_empty(), "no problems listed");

    // A reload shows the bodies in the form again.
    browser.goto(&format!("{}/#/flows", app.base)).await;
    browser.goto(&format!("{}/#/flows/{flow}", app.base)).await;
    browser.find(&upload).await;
    assert_eq!(values(&browser, &upload, "Part name").await, ["note", "photo", "token"]);
    assert_eq!(values(&browser, &upload, "Content is").await, ["value", "base64", "secret"]);
    assert_eq!(values(&browser, &upload, "File name").await, ["", "logo.png", ""]);
    assert_eq!(values(&browser, &login, "Field value").await, ["ada", "{{secret.PW}}"]);
    assert_eq!(values(&browser, &pet, "Operation name").await, ["Pet"]);
    let variables: Value = serde_json::from_str(&values(&browser, &pet, "GraphQL variables").await[0]).expect("JSON");
    assert_eq!(variables, json!({"id": "{{pet_id}}", "limit": 2}));
    browser.run("document.querySelector(arguments[0]).scrollIntoView()", vec![json!(upload)]).await;
    browser.screenshot("editor-multipart.png").await;
    browser.close().await;
}
