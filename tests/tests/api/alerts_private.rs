//! Notification channels are outbound targets like any other (issue #50): a `slack` or `webhook` channel whose URL
//! is a literal loopback, private, link-local, metadata or reserved address is refused at write (400 naming `url`)
//! for an organization that may not reach private targets, and link-local and metadata addresses for every
//! organization; a URL whose name resolves to a private address is accepted (names are checked when resolved) but
//! its sends are blocked by the guarded client: `last_delivery` says `blocked: ...` and the receiver on this
//! machine gets nothing, while an organization allowed to reach private targets delivers to the same name.

use hookflow_tests::TestApp;
use hookflow_tests::receiver::Receiver;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

/// Waits (at most 20 s) until the channel records a delivery; answers its `last_delivery`.
async fn last_delivery(app: &TestApp, creds: &hookflow_tests::app::Creds, id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let read = app.call(Method::GET, &format!("/notification-channels/{id}"), Some(creds), None).await;
        assert_eq!(read.status, 200, "{}", read.text);
        if !read.body["last_delivery"].is_null() {
            return read.body["last_delivery"].clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "no last_delivery: {}", read.text);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn alerts_channels_to_private_addresses_are_refused_at_write_and_blocked_at_send() {
    let app = TestApp::spawn().await;
    let tenant = app.new_org("Public only").await;
    let post = |creds: &hookflow_tests::app::Creds, kind: &str, url: &str| {
        let (app, creds) = (&app, creds.clone());
        let body = json!({"name": "c", "kind": kind, "url": url});
        async move { app.call(Method::POST, "/notification-channels", Some(&creds), Some(body)).await }
    };
    // Literal addresses, in every spelling the URL parser turns into one.
    for url in [
        "http://127.0.0.1:9/in",
        "http://2130706433/in",
        "http://0x7f.1/in",
        "http://[::ffff:127.0.0.1]/in",
        "http://[::1]/in",
        "http://10.1.2.3/in",
        "http://172.16.0.1/in",
        "http://192.168.0.10/in",
        "http://[fd00::1]/in",
        "http://169.254.169.254/latest/meta-data",
        "http://[fe80::1]/in",
        "http://0.0.0.0/in",
    ] {
        for kind in ["slack", "webhook"] {
            post(&tenant, kind, url).await.assert_refused(400, "invalid_request", "url");
        }
    }
    // Link-local and metadata addresses are refused even where private networks may be reached.
    for url in [
        "http://169.254.169.254/latest/meta-data",
        "http://[fe80::1]/in",
        "http://169.254.170.2/v2",
        "http://100.100.100.200/latest",
        "http://[fd00:ec2::254]/latest",
    ] {
        for kind in ["slack", "webhook"] {
            post(&app.admin, kind, url).await.assert_refused(400, "invalid_request", "url");
        }
    }
    let listed = app.call(Method::GET, "/notification-channels", Some(&tenant), None).await;
    assert_eq!(listed.body["items"], json!([]), "nothing was stored");

    // A name resolving to this machine: accepted at write, blocked at send.
    let receiver = Receiver::spawn(200).await;
    let port = receiver.base.rsplit(':').next().expect("port").to_owned();
    let by_name = format!("http://localhost:{port}/in");
    let mut ids = Vec::new();
    for kind in ["slack", "webhook"] {
        let made = post(&tenant, kind, &by_name).await;
        assert_eq!(made.status, 201, "{}", made.text);
        ids.push(made.body["id"].as_str().expect("id").to_owned());
    }
    for id in &ids {
        let test = app.call(Method::POST, &format!("/notification-channels/{id}/test"), Some(&tenant), None).await;
        assert_eq!(test.status, 202, "{}", test.text);
    }
    for id in &ids {
        let delivery = last_delivery(&app, &tenant, id).await;
        assert_eq!(delivery["ok"], false, "{delivery}");
        let error = delivery["error"].as_str().expect("an error");
        assert!(error.starts_with("blocked"), "{error}");
        assert!(error.contains("localhost"), "the error names the host: {error}");
    }
    // A URL changed to the name is blocked the same way.
    let public = post(&tenant, "webhook", "https://hooks.example/x").await;
    assert_eq!(public.status, 201, "{}", public.text);
    let id = public.body["id"].as_str().expect("id").to_owned();
    let changed = app
        .call(Method::PATCH, &format!("/notification-channels/{id}"), Some(&tenant), Some(json!({"url": by_name})))
        .await;
    assert_eq!(changed.status, 200, "{}", changed.text);
    app.call(Method::POST, &format!("/notification-channels/{id}/test"), Some(&tenant), None).await;
    let delivery = last_delivery(&app, &tenant, &id).await;
    assert!(delivery["error"].as_str().is_some_and(|e| e.starts_with("blocked")), "{delivery}");
    assert_eq!(receiver.count(), 0, "nothing reached the receiver on this machine");

    // The organization allowed to reach private targets delivers to the same name.
    let mine = post(&app.admin, "webhook", &by_name).await;
    assert_eq!(mine.status, 201, "{}", mine.text);
    let id = mine.body["id"].as_str().expect("id").to_owned();
    app.call(Method::POST, &format!("/notification-channels/{id}/test"), Some(&app.admin), None).await;
    let delivery = last_delivery(&app, &app.admin, &id).await;
    assert_eq!((&delivery["ok"], &delivery["error"]), (&json!(true), &Value::Null), "{delivery}");
    assert_eq!(receiver.count(), 1);
}
