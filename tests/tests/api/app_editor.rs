//! The flow editor in a real browser against the real server and its embedded runner: a person builds a
//! two-node flow from forms (no JSON typed), saves and launches it and sees it pass; nodes added, reordered and
//! saved by keyboard alone, with the JSON view keeping the author's key order both ways; a validation problem at
//! the field it names as the person types; a collection request as a node with overrides; trying a node and
//! picking response values into an extractor and an assertion. Screenshots of the editor at 1280 and 390 pixels.

use fantoccini::key::Key;
use hookflow_shared::Role;
use hookflow_shared::api::collections::{WriteCollection, WriteRequest};
use hookflow_tests::TestApp;
use hookflow_tests::browser::Browser;
use hookflow_tests::target::Target;
use serde_json::{Value, json};
use std::time::Duration;

/// A server with its embedded runner, a target to call, and a member signed in at 1280 pixels.
async fn setup() -> (TestApp, Target, Browser) {
    let app = TestApp::spawn_with_embedded_runner_of(2, 1.0, Duration::from_secs(120), |_| {}).await;
    let target = Target::spawn().await;
    let person = app.person(app.admin.org, Role::Member).await;
    let browser = Browser::start(1280).await;
    browser.sign_in(&app.base, &person.email, &person.password).await;
    (app, target, browser)
}

/// The card of node `id`.
fn card(id: &str) -> String {
    format!("li[data-node='{id}']")
}

/// The stored definition of `flow`.
async fn stored(app: &TestApp, flow: &str) -> Value {
    app.get::<Value>(&format!("/flows/{flow}"), 200).await["definition"].clone()
}

/// The ids of the cards, top to bottom.
async fn card_ids(browser: &Browser) -> Vec<String> {
    let ids = browser
        .run("return [...document.querySelectorAll('#editor-cards > li')].map(li => li.dataset.node)", vec![])
        .await;
    serde_json::from_value(ids).expect("ids")
}

/// What the JSON view holds.
async fn json_view(browser: &Browser) -> String {
    let text = browser.run("return document.getElementById('definition').value", vec![]).await;
    text.as_str().expect("text").to_owned()
}

/// Waits until the JSON view holds `wanted`.
async fn wait_json_view(browser: &Browser, wanted: &str) {
    for _ in 0..100 {
        if json_view(browser).await == wanted {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(json_view(browser).await, wanted, "the JSON view");
}

/// The flow id of the page the browser shows.
async fn shown_flow(browser: &Browser) -> String {
    let url = browser.client.current_url().await.expect("url");
    url.fragment().and_then(|f| f.strip_prefix("/flows/")).expect("a flow page").to_owned()
}

/// Types `text` into the control labelled `label` inside `scope` (the last one, a row just added).
async fn fill_in(browser: &Browser, scope: &str, label: &str, text: &str) {
    let css = browser.labelled(scope, label).await;
    browser.type_into(&css, text).await;
}

/// Saves with the toolbar's Save (by mouse) and waits until the editor says all is saved.
async fn save(browser: &Browser) {
    browser.click_named(".editor-toolbar", "Save").await;
    wait_saved(browser).await;
}

/// Waits until the editor's status says every edit is saved.
async fn wait_saved(browser: &Browser) {
    for _ in 0..150 {
        let status = browser.run("return document.getElementById('editor-status').textContent", vec![]).await;
        if status.as_str().is_some_and(|s| s.ends_with(" · saved")) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the editor never said saved; {}", browser.text(".editor").await);
}

/// Launches the flow from its page and waits for the execution to end as `status`.
async fn launch_and_wait(browser: &Browser, status: &str) {
    browser.click("#launch").await;
    browser.find("#execution-nodes").await;
    browser.wait_text("#execution-status", status).await;
}

#[tokio::test]
async fn a_person_builds_a_two_node_flow_from_forms_saves_it_launches_it_and_it_passes() {
    let (app, target, browser) = setup().await;

    // "New flow" asks for a name and the first request, and opens the editor on it.
    browser.goto(&format!("{}/#/flows", app.base)).await;
    browser.click("#new-flow").await;
    fill_in(&browser, "dialog", "Name", "checkout").await;
    browser.choose(&browser.labelled("dialog", "Method").await, "POST").await;
    fill_in(&browser, "dialog", "URL", &format!("{}/login", target.base)).await;
    browser.click("dialog form.stack button[type=submit]").await;
    let login = card("login");
    browser.find(&login).await;
    let flow = shown_flow(&browser).await;

    // The first request: a JSON body with its header, and an extractor of the token.
    browser.click_named(&login, "Add header").await;
    fill_in(&browser, &login, "Header name", "content-type").await;
    fill_in(&browser, &login, "Header value", "application/json").await;
    fill_in(&browser, &login, "Body", "{\"user\": \"ada\"}").await;
    browser.click_named(&login, "Add extractor").await;
    fill_in(&browser, &login, "Name", "token").await;
    fill_in(&browser, &login, "Expression", "$.token").await;

    // A second request from the "Add node" menu uses the token, extracts a field and asserts on it.
    browser.click("#add-node").await;
    browser.click_named("#add-node-menu", "Request").await;
    fill_in(&browser, &card("request"), "Id", "orders").await;
    let orders = card("orders");
    fill_in(&browser, &orders, "URL", &format!("{}/orders", target.base)).await;
    browser.click_named(&orders, "Add header").await;
    fill_in(&browser, &orders, "Header name", "authorization").await;
    fill_in(&browser, &orders, "Header value", "Bearer {{token}}").await;
    browser.click_named(&orders, "Add extractor").await;
    fill_in(&browser, &orders, "Name", "authorized").await;
    fill_in(&browser, &orders, "Expression", "$.authorized").await;
    browser.click_named(&orders, "Add assertion").await;
    browser.choose(&browser.labelled(&orders, "Operator").await, "equals").await;
    fill_in(&browser, &orders, "Expected", "true").await;
    browser.wait_text(&orders, "authorized equals true").await;

    save(&browser).await;
    let expected = json!({"nodes": [
        {"id": "login", "kind": "request",
         "request": {"method": "POST", "url": format!("{}/login", target.base),
                     "headers": {"content-type": "application/json"}, "body": "{\"user\": \"ada\"}"},
         "extractors": [{"name": "token", "kind": "jsonPath", "expression": "$.token"}]},
        {"id": "orders", "kind": "request",
         "request": {"method": "GET", "url": format!("{}/orders", target.base),
                     "headers": {"authorization": "Bearer {{token}}"}},
         "extractors": [{"name": "authorized", "kind": "jsonPath", "expression": "$.authorized"}],
         "assertions": [{"source": "authorized", "operator": "equals", "expected": true}]}
    ]});
    assert_eq!(stored(&app, &flow).await, expected);
    assert!(browser.text("#problems").await.is_empty(), "no problems listed");

    // The editor, wide and narrow.
    browser.run("document.querySelector('.editor').scrollIntoView()", vec![]).await;
    browser.screenshot("editor-1280.png").await;
    browser.client.set_window_size(390, 844).await.expect("narrow window");
    let overflow = browser.run("return document.documentElement.scrollWidth <= window.innerWidth + 1", vec![]).await;
    assert_eq!(overflow, true, "nothing sticks out sideways at 390 pixels");
    browser.run("document.querySelector(arguments[0]).scrollIntoView()", vec![json!(orders)]).await;
    browser.screenshot("editor-390.png").await;
    browser.client.set_window_size(1280, 900).await.expect("wide window");

    launch_and_wait(&browser, "succeeded").await;
    let shown = browser.text("#execution-nodes li[data-node=orders]").await;
    assert!(shown.contains("authorized") && shown.contains("✓"), "{shown}");
    browser.close().await;
}

/// A definition as a person might write it: keys in no usual order, integer-like keys in the layout.
fn unusual(base: &str) -> String {
    r#"{
  "nodes": [
    {
      "request": {
        "url": "BASE/login",
        "headers": {
          "x-b": "2",
          "content-type": "application/json"
        },
        "body": "{\"user\": \"ada\"}",
        "method": "POST"
      },
      "kind": "request",
      "id": "login"
    }
  ],
  "layout": {
    "login": {
      "y": 1,
      "x": 2
    },
    "2": "second",
    "1": "first"
  }
}"#
    .replace("BASE", base)
}

#[tokio::test]
async fn nodes_are_reordered_added_and_saved_by_keyboard_alone_and_the_json_view_keeps_the_key_order() {
    let (app, target, browser) = setup().await;
    let definition = json!({"nodes": [
        {"id": "first", "kind": "delay", "delay_ms": 1},
        {"id": "second", "kind": "delay", "delay_ms": 2}
    ]});
    let flow = app.create_flow("by keyboard", definition).await;
    browser.goto(&format!("{}/#/flows/{flow}", app.base)).await;
    browser.find(&card("second")).await;

    // Move the second node up: Tab to its "Move up", Enter. The focus stays on the moved card.
    browser.tab_to(&card("second"), "Move up", false).await;
    browser.press(Key::Enter).await;
    assert_eq!(card_ids(&browser).await, ["second", "first"]);
    assert_eq!(browser.focused(&card("second")).await, ("Move down".to_owned(), true));
    let view: Value = serde_json::from_str(&json_view(&browser).await).expect("JSON");
    assert_eq!(view["nodes"][0]["id"], "second", "the JSON view follows the cards");

    // Add a request from the menu: it opens on Enter with its first item focused; the new card's URL gets the focus.
    browser.tab_to(".editor-toolbar", "Add node", true).await;
    browser.press(Key::Enter).await;
    assert_eq!(browser.focused("#add-node-menu").await, ("Request".to_owned(), true));
    browser.press(Key::Enter).await;
    assert_eq!(browser.focused(&card("request")).await, ("URL".to_owned(), true));
    browser.type_here(&format!("{}/orders", target.base)).await;
    browser.tab_to(".editor-toolbar", "Save", true).await;
    browser.press(Key::Enter).await;
    wait_saved(&browser).await;
    let saved = stored(&app, &flow).await;
    let ids: Vec<&str> =
        saved["nodes"].as_array().expect("nodes").iter().map(|n| n["id"].as_str().expect("id")).collect();
    assert_eq!(ids, ["second", "first", "request"]);
    assert_eq!(saved["nodes"][2]["request"]["url"], format!("{}/orders", target.base));

    // A definition typed into the JSON view becomes the cards; a card's edit changes only its value in the text,
    // every key where its author put it.
    browser.tab_to("section[aria-label=Definition]", "Definition (JSON)", false).await;
    let text = unusual(&target.base);
    browser.type_here(&text).await;
    browser.find(&card("login")).await;
    assert_eq!(card_ids(&browser).await, ["login"]);
    browser.tab_to(&card("login"), "URL", true).await;
    browser.type_here(&format!("{}/login?v=2", target.base)).await;
    let edited = text.replace("/login\"", "/login?v=2\"");
    wait_json_view(&browser, &edited).await;
    browser.tab_to(".editor-toolbar", "Save", true).await;
    browser.press(Key::Enter).await;
    wait_saved(&browser).await;
    assert_eq!(stored(&app, &flow).await, serde_json::from_str::<Value>(&edited).expect("JSON"));

    browser.close().await;
}

#[tokio::test]
async fn the_json_view_shows_a_stored_definition_in_its_authors_key_order() {
    let (app, target, browser) = setup().await;
    let flow = app.create_flow("as written", json!({"nodes": [{"id": "pause", "kind": "delay", "delay_ms": 1}]})).await;
    let text = unusual(&target.base);
    let body = format!("{{\"definition\": {text}}}");
    let reply = app
        .api()
        .request(reqwest::Method::PATCH, &format!("/flows/{flow}"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("patch");
    assert_eq!(reply.status(), 200, "the definition as its text");
    browser.goto(&format!("{}/#/flows/{flow}", app.base)).await;
    browser.find(&card("login")).await;
    wait_json_view(&browser, &text).await;
    browser.close().await;
}

#[tokio::test]
async fn a_validation_problem_shows_at_the_field_it_names_as_the_person_types() {
    let (app, target, browser) = setup().await;
    let definition = json!({"nodes": [{"id": "login", "kind": "request",
        "request": {"method": "POST", "url": format!("{}/login", target.base)}}]});
    let flow = app.create_flow("checked", definition.clone()).await;
    browser.goto(&format!("{}/#/flows/{flow}", app.base)).await;
    let login = card("login");
    browser.click_named(&login, "Add extractor").await;
    let expression = browser.labelled(&login, "Expression").await;
    browser.type_into(&expression, "$.[").await;
    let marked = browser.wait_text(&format!(".field:has({expression}) .field-error"), "extractors[0]").await;
    assert!(marked.to_lowercase().contains("json"), "{marked}");
    let invalid = browser
        .run("return document.querySelector(arguments[0]).getAttribute('aria-invalid')", vec![json!(expression)])
        .await;
    assert_eq!(invalid, "true");
    browser.wait_text("#problems", "node login").await;

    // An empty URL is marked at the URL; the fixed expression is not marked any more.
    let url = browser.labelled(&login, "URL").await;
    browser.type_into(&url, " ").await;
    browser.type_into(&expression, "$.token").await;
    browser.wait_text(&format!(".field:has({url}) .field-error"), "must not be empty").await;
    browser.gone(&format!(".field:has({expression}) .field-error")).await;

    // Save refuses while a problem stands.
    browser.click_named(".editor-toolbar", "Save").await;
    browser.wait_text(".editor p.notice", "Not saved").await;
    assert_eq!(stored(&app, &flow).await, definition);
    browser.close().await;
}

#[tokio::test]
async fn a_collection_request_becomes_a_node_with_its_overrides_and_runs() {
    let (app, target, browser) = setup().await;
    let api = app.api();
    let shop = WriteCollection {
        variables: [("base_url".to_owned(), target.base.clone())]
            .into_iter()
            .collect::<std::collections::BTreeMap<_, _>>()
            .try_into()
            .expect("variables"),
        ..WriteCollection::new("Shop".parse().expect("a name"))
    };
    let collection = api.collections().create(&shop).await.expect("create").collection.id.to_string();
    let list = WriteRequest {
        name: "List orders".into(),
        method: "GET".into(),
        url: "{{base_url}}/orders".into(),
        ..Default::default()
    };
    let request = api.collections().add_request(&collection, &list).await.expect("add").id.to_string();
    let flow =
        app.create_flow("from a collection", json!({"nodes": [{"id": "pause", "kind": "delay", "delay_ms": 1}]})).await;

    browser.goto(&format!("{}/#/flows/{flow}", app.base)).await;
    browser.find(&card("pause")).await;
    browser.click("#add-node").await;
    browser.click_named("#add-node-menu", "From a collection").await;
    browser.choose(&browser.labelled("#from-collection", "Collection").await, "Shop").await;
    browser.choose(&browser.labelled("#from-collection", "Request").await, "GET List orders").await;
    browser.click("#from-collection form.stack button[type=submit]").await;
    let orders = card("orders");
    let summary = browser.wait_text(&format!("{orders} .card-summary"), "List orders").await;
    assert!(summary.contains("{{base_url}}/orders") && summary.contains("Shop"), "{summary}");

    // Its overrides are a form: a header added over the collection's request.
    browser.click_named(&orders, "Add header").await;
    fill_in(&browser, &orders, "Header name", "authorization").await;
    fill_in(&browser, &orders, "Header value", "Bearer t").await;
    browser.click_named(&orders, "Add extractor").await;
    fill_in(&browser, &orders, "Name", "authorized").await;
    fill_in(&browser, &orders, "Expression", "$.authorized").await;
    browser.click_named(&orders, "Add assertion").await;
    fill_in(&browser, &orders, "Expected", "true").await;
    save(&browser).await;
    assert_eq!(
        stored(&app, &flow).await["nodes"][1],
        json!({"id": "orders", "kind": "request", "name": "List orders",
               "request_ref": {"collection_id": collection, "request_id": request,
                               "overrides": {"headers": {"authorization": "Bearer t"}}},
               "extractors": [{"name": "authorized", "kind": "jsonPath", "expression": "$.authorized"}],
               "assertions": [{"source": "authorized", "operator": "equals", "expected": true}]})
    );
    launch_and_wait(&browser, "succeeded").await;
    browser.close().await;
}

#[tokio::test]
async fn a_tried_node_answers_and_its_response_fields_become_an_extractor_and_an_assertion() {
    let (app, target, browser) = setup().await;
    let definition = json!({"nodes": [
        {"id": "login", "kind": "request",
         "request": {"method": "POST", "url": format!("{}/login", target.base),
                     "headers": {"content-type": "application/json"}, "body": "{\"user\": \"ada\"}"}},
        {"id": "orders", "kind": "request",
         "request": {"method": "GET", "url": format!("{}/orders", target.base),
                     "headers": {"authorization": "Bearer {{token}}"}}}
    ]});
    let flow = app.create_flow("tried", definition).await;
    browser.goto(&format!("{}/#/flows/{flow}", app.base)).await;
    let (login, orders) = (card("login"), card("orders"));

    // Try the first node; pick its token into an extractor and its user into an assertion.
    browser.click_named(&login, "Try").await;
    browser.wait_text(&format!("{login} .try-area"), "HTTP 200").await;
    browser.click(&format!("{login} button.json-value[data-path='$.token']")).await;
    let name = browser.labelled(&login, "Variable name").await;
    assert_eq!(browser.run("return document.querySelector(arguments[0]).value", vec![json!(name)]).await, "token");
    browser.click_named(&login, "Add as extractor").await;
    browser.wait_text("#editor-announce", "Added extractor token").await;
    browser.click(&format!("{login} button.json-value[data-path='$.user']")).await;
    browser.click_named(&login, "Add as assertion").await;
    browser.wait_text(&format!("{login} .card-summary"), "user equals \"ada\"").await;
    let view: Value = serde_json::from_str(&json_view(&browser).await).expect("JSON");
    assert_eq!(
        view["nodes"][0]["extractors"],
        json!([{"name": "token", "kind": "jsonPath", "expression": "$.token"},
               {"name": "user", "kind": "jsonPath", "expression": "$.user"}])
    );
    assert_eq!(view["nodes"][0]["assertions"], json!([{"source": "user", "operator": "equals", "expected": "ada"}]));

    // Tried again, the first node's token goes to the second node's try.
    browser.click_named(&login, "Try").await;
    browser.wait_text(&format!("{login} .try-area"), "tok-ada").await;
    browser.click_named(&orders, "Try").await;
    let tried = browser.wait_text(&format!("{orders} .try-area"), "HTTP 200").await;
    assert!(tried.contains("With values from earlier tries: token"), "{tried}");
    browser.click(&format!("{orders} button.json-value[data-path='$.authorized']")).await;
    browser.find(&format!("{orders} .pick:not([hidden])")).await;
    browser
        .run("document.querySelector(arguments[0]).scrollIntoView()", vec![json!(format!("{orders} .try-area"))])
        .await;
    browser.screenshot("editor-try-1280.png").await;
    browser.click_named(&orders, "Add as assertion").await;
    browser.wait_text(&format!("{orders} .card-summary"), "authorized equals true").await;
    save(&browser).await;
    launch_and_wait(&browser, "succeeded").await;
    browser.close().await;
}

#[tokio::test]
async fn every_node_kind_is_added_from_the_menu_and_edited_in_its_form() {
    let (app, _target, browser) = setup().await;
    let webhook = app.webhook_named("Payments").await;
    let module =
        app.create_flow("orders module", json!({"nodes": [{"id": "w", "kind": "delay", "delay_ms": 1}]})).await;
    app.post::<Value>(&format!("/flows/{module}/publish"), &json!({"note": "first"}), 201).await;
    let flow = app.create_flow("kinds", json!({"nodes": [{"id": "pause", "kind": "delay", "delay_ms": 1}]})).await;
    browser.goto(&format!("{}/#/flows/{flow}", app.base)).await;
    browser.find(&card("pause")).await;
    for kind in ["Webhook", "Delay", "Module", "Set variables"] {
        browser.click("#add-node").await;
        browser.click_named("#add-node-menu", kind).await;
    }
    assert_eq!(card_ids(&browser).await, ["pause", "webhook", "delay", "module", "set"]);
    // A removed node comes back where it was with Undo.
    browser.click_named(&card("delay"), "Remove").await;
    assert_eq!(card_ids(&browser).await, ["pause", "webhook", "module", "set"]);
    browser.click_named("#editor-announce", "Undo").await;
    assert_eq!(card_ids(&browser).await, ["pause", "webhook", "delay", "module", "set"]);

    let wait = card("webhook");
    browser.choose(&browser.labelled(&wait, "Endpoint").await, "Payments").await;
    fill_in(&browser, &wait, "Search", "body.$.id:{{order}}").await;
    browser.choose(&browser.labelled(&wait, "Signature").await, "must be valid").await;
    fill_in(&browser, &wait, "Timeout (ms)", "5000").await;
    browser.wait_text(&wait, "must be valid").await;
    fill_in(&browser, &card("delay"), "Delay (ms)", "250").await;
    let runs = card("module");
    browser.choose(&browser.labelled(&runs, "Flow").await, "orders module").await;
    fill_in(&browser, &runs, "Version", "1").await;
    browser.click_named(&runs, "Add input").await;
    fill_in(&browser, &runs, "Input name", "token").await;
    fill_in(&browser, &runs, "Input value", "t").await;
    let set = card("set");
    browser.click_named(&set, "Add variable").await;
    fill_in(&browser, &set, "Variable name", "order").await;
    fill_in(&browser, &set, "Variable value", "o-1").await;
    browser.wait_text(&runs, "Runs orders module (1) with token").await;
    save(&browser).await;
    let nodes = stored(&app, &flow).await["nodes"].clone();
    assert_eq!(
        nodes.as_array().expect("nodes")[1..],
        [
            json!({"id": "webhook", "kind": "webhook",
                   "webhook": {"timeout_ms": 5000, "webhook_id": webhook, "q": "body.$.id:{{order}}", "signature": "valid"}}),
            json!({"id": "delay", "kind": "delay", "delay_ms": 250}),
            json!({"id": "module", "kind": "module", "flow_id": module, "version": 1, "inputs": {"token": "t"}}),
            json!({"id": "set", "kind": "set_variables", "variables": {"order": "o-1"}}),
        ]
    );
    browser.close().await;
}
