//! Webhook endpoints: CRUD, validation, scopes, isolation, pagination.

use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::json;

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

    let got = app.admin(Method::GET, &format!("/webhooks/{id}"), None).await;
    assert_eq!(got.body["request_count"], 1);
    assert!(got.body["last_request_at"].is_string());

    let patched = app
        .admin(
            Method::PATCH,
            &format!("/webhooks/{id}"),
            Some(json!({"name": "GitHub prod", "description": "pushes",
            "max_body_bytes": 2048, "retention": {"max_age_days": 3, "max_requests": null},
            "response": {"status": 202, "body": "thanks"}})),
        )
        .await;
    assert_eq!(patched.status, 200, "{}", patched.text);
    assert_eq!(patched.body["name"], "GitHub prod");
    assert_eq!(patched.body["max_body_bytes"], 2048);
    assert_eq!(patched.body["retention"]["max_age_days"], 3);
    assert_eq!(patched.body["response"]["status"], 202);
    let reset = app
        .admin(
            Method::PATCH,
            &format!("/webhooks/{id}"),
            Some(json!({"description": null, "max_body_bytes": null, "response": null})),
        )
        .await;
    assert_eq!(reset.body["description"], json!(null));
    assert_eq!(reset.body["max_body_bytes"], 1_048_576, "back to the organization default");
    assert_eq!(reset.body["name"], "GitHub prod", "absent fields stay");
    assert_eq!(reset.body["retention"]["max_age_days"], 3);

    assert_eq!(app.admin(Method::DELETE, &format!("/webhooks/{id}"), None).await.status, 204);
    assert_eq!(app.admin(Method::GET, &format!("/webhooks/{id}"), None).await.status, 404);
    let gone = app.capture(Method::POST, &id, "{}").await;
    assert_eq!((gone.status.as_u16(), gone.code()), (404, "not_found"));
    let count = app.rows("captures").await;
    assert_eq!(count, 0, "captures go with their endpoint");
}

#[tokio::test]
async fn invalid_endpoint_bodies_are_400_naming_the_field() {
    let app = TestApp::spawn().await;
    let cases = [
        (json!({}), "name"),
        (json!({"name": ""}), "name"),
        (json!({"name": "x", "colour": "red"}), "colour"),
        (json!({"name": "x", "max_body_bytes": 0}), "max_body_bytes"),
        (json!({"name": "x", "max_body_bytes": 10_485_761}), "max_body_bytes"),
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
    let path = format!("/webhooks/{}", hook["id"].as_str().expect("id"));
    let reply = app.admin(Method::PATCH, &path, Some(json!({"max_body_bytes": 0}))).await;
    assert_eq!(reply.code(), "invalid_request");
    let listed = app.admin(Method::GET, "/webhooks", None).await;
    assert_eq!(listed.body["items"].as_array().map(Vec::len), Some(1), "nothing stored by refused requests");
}

#[tokio::test]
async fn scopes_and_other_organizations() {
    let app = TestApp::spawn().await;
    let hook = app.create_webhook(json!({"name": "mine"})).await;
    let id = hook["id"].as_str().expect("id");
    let reader = app.creds_with(&["webhooks:read"]).await;
    assert_eq!(app.call(Method::GET, "/webhooks", Some(&reader), None).await.status, 200);
    let denied = app.call(Method::POST, "/webhooks", Some(&reader), Some(json!({"name": "x"}))).await;
    assert_eq!(denied.code(), "insufficient_scope");
    let denied = app.call(Method::DELETE, &format!("/webhooks/{id}/requests"), Some(&reader), None).await;
    assert_eq!(denied.code(), "insufficient_scope");
    let nobody = app.creds_with(&["flows:read"]).await;
    assert_eq!(app.call(Method::GET, "/webhooks", Some(&nobody), None).await.code(), "insufficient_scope");

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
    let theirs = app.call(Method::GET, "/webhooks", Some(&other), None).await;
    assert_eq!(theirs.body["items"], json!([]));
    let still = app.admin(Method::GET, &format!("/webhooks/{id}"), None).await;
    assert_eq!((still.body["name"].as_str(), still.body["request_count"].as_i64()), (Some("mine"), Some(1)));
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
    let first = app.admin(Method::GET, "/webhooks?limit=2", None).await;
    let second = app.next_page("/webhooks?limit=2", &first).await;
    let third = app.next_page("/webhooks?limit=2", &second).await;
    assert_eq!(third.body["next_cursor"], json!(null));
    let seen: Vec<String> = [first, second, third]
        .iter()
        .flat_map(|p| {
            p.body["items"]
                .as_array()
                .expect("items")
                .iter()
                .map(|w| w["id"].as_str().expect("id").to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(seen, made);
}
