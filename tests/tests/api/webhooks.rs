//! Webhook endpoints: CRUD, validation, scopes, isolation, pagination.

use hookflow_shared::api::Patch;
use hookflow_shared::api::admin::Retention;
use hookflow_shared::api::webhooks::{CreateWebhook, CustomResponse, UpdateWebhook};
use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::json;

fn named(name: &str) -> CreateWebhook {
    CreateWebhook::new(name.parse().expect("a name"))
}

#[tokio::test]
async fn an_endpoint_is_created_read_changed_and_deleted() {
    let app = TestApp::spawn().await;
    let hook = app.create_webhook(json!({"name": "GitHub"})).await;
    let id = hook["id"].as_str().expect("id").to_owned();
    assert_eq!(uuid::Uuid::parse_str(&id).expect("uuid").get_version_num(), 4, "capture URLs are random");
    assert_eq!(hook["capture_url"], format!("{}/webhook/{id}", app.base));
    assert_eq!(hook["max_body_bytes"], 1_048_576);
    assert_eq!(hook["request_count"], 0);
    assert_eq!(hook["retention"], json!({"max_age_days": null, "max_requests": null}));
    assert!(hook["created_at"].as_str().expect("created_at").ends_with('Z'));
    assert_eq!(app.capture(Method::POST, &id, "{}").await.status, 200, "live at once");

    let hooks = app.api();
    let hooks = hooks.webhooks();
    let got = hooks.get(&id).await.expect("get");
    assert_eq!(got.request_count, 1);
    assert!(got.last_request_at.is_some());

    let update = UpdateWebhook {
        name: Some("GitHub prod".parse().expect("a name")),
        description: Patch::Set("pushes".parse().expect("a text")),
        max_body_bytes: Patch::Set(2048),
        retention: Patch::Set(Retention { max_age_days: Some(3), max_requests: None }),
        response: Patch::Set(CustomResponse { status: 202, headers: Default::default(), body: "thanks".into() }),
        ..Default::default()
    };
    let patched = hooks.update(&id, &update).await.expect("patch");
    assert_eq!(patched.name, "GitHub prod");
    assert_eq!(patched.max_body_bytes, 2048);
    assert_eq!(patched.retention.max_age_days, Some(3));
    assert_eq!(patched.response.map(|r| r.status), Some(202));
    let reset = UpdateWebhook {
        description: Patch::Clear,
        max_body_bytes: Patch::Clear,
        response: Patch::Clear,
        ..Default::default()
    };
    let reset = hooks.update(&id, &reset).await.expect("patch");
    assert_eq!(reset.description, None);
    assert_eq!(reset.max_body_bytes, 1_048_576, "back to the organization default");
    assert_eq!(reset.name, "GitHub prod", "absent fields stay");
    assert_eq!(reset.retention.max_age_days, Some(3));

    hooks.delete(&id).await.expect("delete");
    assert_eq!(hooks.get(&id).await.expect_err("gone").status(), 404);
    let gone = app.capture(Method::POST, &id, "{}").await;
    assert_eq!((gone.status.as_u16(), gone.code()), (404, "not_found"));
    assert_eq!(app.rows("captures").await, 0, "captures go with their endpoint");
}

#[tokio::test]
async fn invalid_endpoint_bodies_are_400_naming_the_field() {
    let app = TestApp::spawn().await;
    let cases = [
        (json!({}), "name"),
        (json!({"name": ""}), "name"),
        (json!({"name": "x", "colour": "red"}), "colour"),
        (json!({"name": "x", "max_body_bytes": 0}), "max_body_bytes"),
        (json!({"name": "x", "max_body_bytes": 33_554_433}), "max_body_bytes"),
        (json!({"name": "x", "retention": {"max_age_days": 0, "max_requests": null}}), "max_age_days"),
        (json!({"name": "x", "retention": {"max_age_days": null, "max_requests": -5}}), "max_requests"),
        (json!({"name": "x", "response": {"status": 99}}), "status"),
        (json!({"name": "x", "response": {"status": 200, "headers": {"bad header": "v"}}}), "headers"),
        (json!({"name": "x", "response": {"status": 200, "extra": 1}}), "extra"),
    ];
    for (body, named) in cases {
        let reply = app.admin(Method::POST, "/webhooks", Some(body.clone())).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (400, "invalid_request"), "{body}");
        assert!(reply.body["error"]["message"].as_str().unwrap_or_default().contains(named), "{body}: {}", reply.text);
    }
    let hook = app.create_webhook(json!({"name": "ok"})).await;
    let zero = UpdateWebhook { max_body_bytes: Patch::Set(0), ..Default::default() };
    let reply = app.api().webhooks().update(hook["id"].as_str().expect("id"), &zero).await.expect_err("0 bytes");
    assert_eq!(reply.code(), "invalid_request");
    let listed = app.api().webhooks().list(&[]).await.expect("list");
    assert_eq!(listed.items.len(), 1, "nothing stored by refused requests");
}

#[tokio::test]
async fn scopes_and_other_organizations() {
    let app = TestApp::spawn().await;
    let hook = app.create_webhook(json!({"name": "mine"})).await;
    let id = hook["id"].as_str().expect("id");
    let reader = app.api_as(&app.creds_with(&["webhooks:read"]).await);
    reader.webhooks().list(&[]).await.expect("webhooks:read lists");
    assert_eq!(reader.webhooks().create(&named("x")).await.expect_err("read only").code(), "insufficient_scope");
    assert_eq!(reader.webhooks().clear_requests(id).await.expect_err("read only").code(), "insufficient_scope");
    let nobody = app.api_as(&app.creds_with(&["flows:read"]).await);
    assert_eq!(nobody.webhooks().list(&[]).await.expect_err("no webhooks scope").code(), "insufficient_scope");

    let other = app.new_org("Globex").await;
    let capture = app.capture(Method::POST, id, "{}").await;
    let capture_id = capture.body["request_id"].as_str().expect("request_id");
    for (method, path, body) in [
        (Method::GET, format!("/webhooks/{id}"), None),
        (Method::PATCH, format!("/webhooks/{id}"), Some(json!({"name": "stolen"}))),
        (Method::DELETE, format!("/webhooks/{id}"), None),
        (Method::GET, format!("/webhooks/{id}/requests"), None),
        (Method::DELETE, format!("/webhooks/{id}/requests"), None),
        (Method::POST, format!("/webhooks/{id}/requests/search"), Some(json!({}))),
        (Method::GET, format!("/webhooks/{id}/requests/export"), None),
        (Method::GET, format!("/webhooks/{id}/requests/{capture_id}"), None),
        (Method::GET, format!("/webhooks/{id}/requests/{capture_id}/body"), None),
        (Method::DELETE, format!("/webhooks/{id}/requests/{capture_id}"), None),
        (
            Method::POST,
            format!("/webhooks/{id}/requests/{capture_id}/replay"),
            Some(json!({"target_url": "http://example.com"})),
        ),
        (Method::GET, format!("/webhooks/{id}/stream"), None),
        (Method::GET, format!("/webhooks/{id}/analytics/volume"), None),
        (Method::GET, format!("/webhooks/{id}/analytics/methods"), None),
    ] {
        let reply = app.call(method.clone(), &path, Some(&other), body).await;
        assert_eq!((reply.status.as_u16(), reply.code()), (404, "not_found"), "{method} {path}: {}", reply.text);
    }
    assert!(app.api_as(&other).webhooks().list(&[]).await.expect("list").items.is_empty());
    let still = app.api().webhooks().get(id).await.expect("get");
    assert_eq!((still.name.as_str(), still.request_count), ("mine", 1));
}

#[tokio::test]
async fn endpoints_list_newest_first_in_pages() {
    let app = TestApp::spawn().await;
    let mut made = Vec::new();
    for i in 0..5 {
        made.push(
            app.create_webhook(json!({"name": format!("hook {i}")})).await["id"].as_str().expect("id").to_owned(),
        );
    }
    made.reverse();
    let api = app.api();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 1..=3 {
        let mut query = vec![("limit", "2")];
        query.extend(cursor.as_deref().map(|c| ("cursor", c)));
        let listed = api.webhooks().list(&query).await.expect("a page");
        seen.extend(listed.items.iter().map(|w| w.id.to_string()));
        cursor = listed.next_cursor;
        assert_eq!(cursor.is_none(), page == 3, "three pages of two, the last one ending it");
    }
    assert_eq!(seen, made);
}
