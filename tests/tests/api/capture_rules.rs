//! Response rules at capture URLs (#51, part A), over the real server: overlapping rules resolved in order, path
//! parameters and JSONPath values echoed (escaped) into JSON answers, a delay that holds nothing shared, templates
//! that cannot smuggle a header or a second response (checked on the raw HTTP bytes), `rules/test` agreeing with
//! the capture URL, and every refusal: bad fields, scopes, another organization's endpoint.

use hookflow_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Three overlapping rules: a POST to one order from a gold sender, anything under `/orders`, any GET.
fn overlapping_rules() -> Value {
    json!([
        {"name": "gold order", "method": "POST", "path": "/orders/{id}", "q": "header.x-tier:gold", "status": 201,
         "headers": {"Content-Type": "text/plain"}, "body": "gold {{request.params.id}}"},
        {"name": "orders", "path": "/orders/*", "status": 202,
         "body": "orders {{request.method}} {{request.path}} x={{request.query.x}} tier={{request.headers.x-tier}}"},
        {"name": "reads", "method": "GET", "status": 203, "body": "read {{request.path}}"}
    ])
}

/// (method, path and query, `X-Tier`, the rule that must answer, its status, its body).
type Case = (&'static str, &'static str, Option<&'static str>, Option<usize>, u16, &'static str);

const TABLE: [Case; 20] = [
    ("POST", "/orders/1", Some("gold"), Some(0), 201, "gold 1"),
    ("POST", "/orders/1", Some("silver"), Some(1), 202, "orders POST /orders/1 x= tier=silver"),
    ("POST", "/orders/1", None, Some(1), 202, "orders POST /orders/1 x= tier="),
    ("GET", "/orders/1", Some("gold"), Some(1), 202, "orders GET /orders/1 x= tier=gold"),
    ("GET", "/orders", None, Some(1), 202, "orders GET /orders x= tier="),
    ("GET", "/orders/1/items", None, Some(1), 202, "orders GET /orders/1/items x= tier="),
    ("POST", "/orders/1/items", Some("gold"), Some(1), 202, "orders POST /orders/1/items x= tier=gold"),
    ("GET", "", None, Some(2), 203, "read "),
    ("GET", "/other", None, Some(2), 203, "read /other"),
    ("HEAD", "/other", None, Some(2), 203, ""),
    ("POST", "", None, None, 200, ""),
    ("PUT", "/orders/9?x=7", Some("gold"), Some(1), 202, "orders PUT /orders/9 x=7 tier=gold"),
    ("DELETE", "/x", None, None, 200, ""),
    ("POST", "/orders/", Some("gold"), Some(1), 202, "orders POST /orders/ x= tier=gold"),
    ("POST", "/ordersX/1", Some("gold"), None, 200, ""),
    ("GET", "/ordersX", None, Some(2), 203, "read /ordersX"),
    ("POST", "/orders/a%20b?x=1&x=2", Some("gold"), Some(0), 201, "gold a b"),
    ("PATCH", "/orders/5", Some("gold"), Some(1), 202, "orders PATCH /orders/5 x= tier=gold"),
    ("OPTIONS", "/a", None, None, 200, ""),
    ("POST", "/orders/2", Some("GOLD"), Some(1), 202, "orders POST /orders/2 x= tier=GOLD"),
];

async fn send(app: &TestApp, id: &str, method: &str, path: &str, tier: Option<&str>) -> hookflow_tests::Reply {
    let headers: Vec<(&str, &str)> = tier.map(|t| vec![("X-Tier", t)]).unwrap_or_default();
    app.capture_with(Method::from_bytes(method.as_bytes()).expect("method"), &format!("{id}{path}"), &headers, "").await
}

#[tokio::test]
async fn three_overlapping_rules_resolve_in_order_for_a_table_of_twenty_requests() {
    let app = TestApp::spawn().await;
    let hook = app.create_webhook(json!({"name": "rules", "rules": overlapping_rules()})).await;
    let id = hook["id"].as_str().expect("id").to_owned();
    assert_eq!(hook["rules"], overlapping_rules(), "read back as written");
    for (i, (method, path, tier, rule, status, body)) in TABLE.iter().enumerate() {
        let reply = send(&app, &id, method, path, *tier).await;
        assert_eq!(reply.status.as_u16(), *status, "request {i}: {method} {path} {tier:?}: {}", reply.text);
        match rule {
            Some(_) => assert_eq!(reply.text, *body, "request {i}: {method} {path}"),
            None if *method == "HEAD" => assert_eq!(reply.text, ""),
            None => assert_eq!(reply.body["message"], "Request captured", "request {i}: the receipt"),
        }
        if rule.is_some() {
            // A rule's answer is sandboxed like `response`.
            assert_eq!(reply.headers["content-security-policy"], "sandbox; default-src 'none'");
            assert_eq!(reply.headers["x-content-type-options"], "nosniff");
        }
    }
    // Every request was captured, whichever rule answered.
    let stored = app.rows(&format!("captures WHERE webhook_id = '{id}'")).await;
    assert_eq!(stored, 20);
    let methods = app.rows(&format!("captures WHERE webhook_id = '{id}' AND method IN ('HEAD', 'OPTIONS')")).await;
    assert_eq!(methods, 2, "HEAD and OPTIONS stored as sent");
}

#[tokio::test]
async fn rules_test_agrees_with_the_capture_url_for_twenty_requests() {
    let app = TestApp::spawn().await;
    let id = app.create_webhook(json!({"name": "agree", "rules": overlapping_rules()})).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    for (i, (method, path_query, tier, rule, _, _)) in TABLE.iter().enumerate() {
        let live = send(&app, &id, method, path_query, *tier).await;
        let (path, query) = path_query.split_once('?').unwrap_or((path_query, ""));
        let path = if path.is_empty() { "/" } else { path };
        let mut test = json!({"method": method, "path": path, "query": query});
        if let Some(tier) = tier {
            test["headers"] = json!({"X-Tier": tier});
        }
        let said: Value = app.post(&format!("/webhooks/{id}/rules/test"), &test, 200).await;
        assert_eq!(said["rule_index"], json!(rule), "request {i}: {method} {path_query}");
        assert_eq!(said["status"], live.status.as_u16(), "request {i}");
        assert_eq!(said["headers"]["content-type"].as_str(), live.headers["content-type"].to_str().ok(), "request {i}");
        if rule.is_some() {
            assert_eq!(said["body"], live.text, "request {i}: the same rendered body");
        } else {
            let receipt: Value = serde_json::from_str(said["body"].as_str().expect("body")).unwrap_or(Value::Null);
            if *method != "HEAD" {
                assert_eq!(receipt["message"], "Request captured", "request {i}: the receipt");
            }
        }
    }
    // Nothing the test asked was stored: only the 20 live requests.
    assert_eq!(app.rows(&format!("captures WHERE webhook_id = '{id}'")).await, 20);
}

#[tokio::test]
async fn a_path_parameter_and_json_path_values_are_echoed_as_json_strings() {
    let app = TestApp::spawn().await;
    let body = r#"{"order": "{{request.params.id}}", "customer": "{{request.body.$.customer.name}}", "total": "{{request.body.$.total}}", "items": "{{request.body.$.items}}", "q": "{{request.query.q}}", "h": "{{request.headers.x-note}}", "id": "{{request.id}}", "missing": "{{request.body.$.nope}}"}"#;
    let rules = json!([{"method": "POST", "path": "/orders/{id}", "status": 200,
        "headers": {"Content-Type": "application/json; charset=utf-8"}, "body": body}]);
    let id = app.create_webhook(json!({"name": "echo", "rules": rules})).await["id"].as_str().expect("id").to_owned();
    let hostile = "a\"b\\c\nd\r\n{{request.method}}}}\u{2028}</script>";
    let sent = json!({"customer": {"name": hostile}, "total": 42.5, "items": [1, {"k": "v"}]});
    let reply = app
        .capture_with(
            Method::POST,
            &format!("{id}/orders/A-17?q=%22%5C%0A%7B%7B"),
            &[("X-Note", "say \"hi\" {{request.path}}")],
            sent.to_string(),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.headers["content-type"], "application/json; charset=utf-8");
    let answer: Value = serde_json::from_str(&reply.text).expect("the answer stays one JSON document");
    assert_eq!(answer["order"], "A-17");
    assert_eq!(answer["customer"], hostile, "one JSON string, templates in values not expanded");
    assert_eq!(answer["total"], "42.5");
    assert_eq!(answer["items"], r#"[1,{"k":"v"}]"#);
    assert_eq!(answer["q"], "\"\\\n{{");
    assert_eq!(answer["h"], "say \"hi\" {{request.path}}");
    assert_eq!(answer["missing"], "");
    let stored: Value = app.get(&format!("/webhooks/{id}/requests"), 200).await;
    assert_eq!(answer["id"], stored["items"][0]["id"], "request.id is the stored capture's id");
}

#[tokio::test]
async fn a_delay_answers_late_while_other_endpoints_keep_answering_at_once() {
    let app = TestApp::spawn().await;
    let rules = json!([{"status": 200, "body": "late", "delay_ms": 2000}]);
    let slow = app.create_webhook(json!({"name": "slow", "rules": rules})).await["id"].as_str().expect("id").to_owned();
    let other = app.new_org("Neighbour").await;
    let client = app.api_as(&other);
    let create = hookflow_shared::api::webhooks::CreateWebhook::new("fast".parse().expect("name"));
    let fast = client.webhooks().create(&create).await.expect("the neighbour's endpoint").id.to_string();
    // Many delayed captures at once: none holds a connection or a slot while it waits.
    let mut delayed = Vec::new();
    for _ in 0..30 {
        let app_base = app.url(&format!("/webhook/{slow}"));
        let client = app.client.clone();
        delayed.push(tokio::spawn(async move {
            let started = Instant::now();
            let reply = client.post(app_base).body("x").send().await.expect("send");
            let status = reply.status();
            let text = reply.text().await.expect("text");
            (started.elapsed(), status, text)
        }));
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    // Stored before they are answered.
    assert_eq!(app.rows(&format!("captures WHERE webhook_id = '{slow}'")).await, 30, "stored before answering");
    for i in 0..20 {
        let started = Instant::now();
        let reply = app.capture(Method::POST, &fast, "quick").await;
        assert_eq!(reply.status, 200);
        assert!(started.elapsed() < Duration::from_secs(1), "capture {i} took {:?}", started.elapsed());
    }
    for task in delayed {
        let (took, status, text) = task.await.expect("task");
        assert_eq!((status.as_u16(), text.as_str()), (200, "late"));
        assert!(took >= Duration::from_millis(2000) && took <= Duration::from_millis(2500), "answered after {took:?}");
    }
}

/// The raw answer split into its status line, header lines and body, checked for one well-framed response.
fn one_response(raw: &str, try_number: usize) -> (String, Vec<(String, String)>, String) {
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or_else(|| panic!("try {try_number}: no header end: {raw:?}"));
    let mut lines = head.split("\r\n");
    let status = lines.next().expect("status line").to_owned();
    let headers: Vec<(String, String)> = lines
        .map(|line| {
            let (name, value) = line.split_once(':').unwrap_or_else(|| panic!("try {try_number}: bad line {line:?}"));
            (name.to_ascii_lowercase(), value.trim().to_owned())
        })
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .unwrap_or_else(|| panic!("try {try_number}: no content-length: {head}"))
        .1
        .parse()
        .expect("length");
    assert_eq!(length, body.len(), "try {try_number}: the body is exactly Content-Length bytes, nothing after");
    (status, headers, body.to_owned())
}

#[tokio::test]
async fn fifty_tries_to_smuggle_a_header_or_a_second_response_through_templates_fail() {
    let app = TestApp::spawn().await;
    let echo = "{{request.body}}|{{request.body.$.v}}|{{request.query.v}}|{{request.headers.x-v}}|{{request.params.p}}|{{request.path}}";
    let mut endpoints = Vec::new();
    for content_type in ["text/plain", "application/json"] {
        let rules = json!([{"path": "/p/{p}", "status": 200, "headers": {"Content-Type": content_type, "X-Rule": "1"},
            "body": echo}]);
        let hook = app.create_webhook(json!({"name": content_type, "rules": rules})).await;
        endpoints.push(hook["id"].as_str().expect("id").to_owned());
    }
    let payloads = [
        "\r\nSet-Cookie: stolen=1",
        "\r\n\r\nHTTP/1.1 200 OK\r\nX-Smuggled: 1\r\nContent-Length: 0\r\n\r\n",
        "\nX-Smuggled: 1",
        "\rX-Smuggled: 1",
        "%0d%0aX-Smuggled:%201",
        "\u{0}X-Smuggled: 1",
        "\u{85}X-Smuggled: 1\u{2028}",
        "0\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        "{{request.headers.x-v}}\r\nX-Smuggled: {{request.method}}",
        "\"}\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK",
    ];
    // The header names of a benign answer: every try must answer exactly these.
    let benign = format!(
        "POST /webhook/{}/p/a HTTP/1.1\r\nHost: test\r\nX-V: plain\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        endpoints[0]
    );
    let (_, headers, answer) = one_response(&app.raw_http(benign.as_bytes()).await, 0);
    assert_eq!(answer, "ok|||plain|a|/p/a");
    let mut baseline: Vec<String> = headers.into_iter().map(|(n, _)| n).collect();
    baseline.sort_unstable();
    assert!(baseline.contains(&"x-rule".to_owned()) && baseline.contains(&"content-security-policy".to_owned()));
    let mut tries = 0;
    for (p, payload) in payloads.iter().enumerate() {
        for place in 0..5 {
            let id = &endpoints[(p + place) % 2];
            let encoded: String = url_encode(payload);
            let (path, query, header, body) = match place {
                0 => ("/p/a".to_owned(), String::new(), "plain".to_owned(), payload.to_string()),
                1 => ("/p/a".to_owned(), String::new(), "plain".to_owned(), json!({"v": payload}).to_string()),
                2 => ("/p/a".to_owned(), format!("?v={encoded}"), "plain".to_owned(), String::new()),
                // Header values cannot carry CR or LF on the wire: the rest of the payload goes.
                3 => ("/p/a".to_owned(), String::new(), payload.replace(['\r', '\n', '\0'], " "), String::new()),
                _ => (format!("/p/{encoded}"), String::new(), "plain".to_owned(), String::new()),
            };
            let header_value: String = header.chars().filter(|c| c.is_ascii() && !c.is_ascii_control()).collect();
            let request = format!(
                "POST /webhook/{id}{path}{query} HTTP/1.1\r\nHost: test\r\nX-V: {header_value}\r\nConnection: close\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let raw = app.raw_http(request.as_bytes()).await;
            tries += 1;
            let (status, headers, answer) = one_response(&raw, tries);
            assert_eq!(status, "HTTP/1.1 200 OK", "try {tries}: {raw:?}");
            let names: Vec<&str> = headers.iter().map(|(n, _)| n.as_str()).collect();
            assert!(!names.contains(&"set-cookie") && !names.contains(&"x-smuggled"), "try {tries}: {names:?}");
            let mut got: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            got.sort_unstable();
            assert_eq!(got, baseline, "try {tries}: exactly the headers of a benign answer");
            assert!(answer.starts_with(if place == 0 { payload } else { "" }) || (p + place) % 2 == 1, "try {tries}");
            if (p + place) % 2 == 1 {
                let parsed: Result<Value, _> = serde_json::from_str(&format!("\"{answer}\""));
                assert!(parsed.is_ok(), "try {tries}: a JSON answer's values stay JSON string content: {answer:?}");
            }
        }
    }
    assert_eq!(tries, 50);
}

fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

#[tokio::test]
async fn bad_rules_and_cors_are_refused_naming_the_field_and_null_clears() {
    let app = TestApp::spawn().await;
    let ok = json!({"status": 200});
    let cases: Vec<(Value, &str)> = vec![
        (json!({"rules": vec![ok.clone(); 51]}), "rules"),
        (json!({"rules": [{"status": 302}]}), "rules[0].status"),
        (json!({"rules": [ok, {"status": 100}]}), "rules[1].status"),
        (json!({"rules": [{"status": 200, "headers": {"Set-Cookie": "a=1"}}]}), "rules[0].headers"),
        (json!({"rules": [{"status": 200, "headers": {"X-A": "a\u{1}b"}}]}), "rules[0].headers"),
        (json!({"rules": [{"status": 200, "body": "x".repeat(65_537)}]}), "rules[0].body"),
        (json!({"rules": [{"status": 200, "body": "{{request.nope}}"}]}), "rules[0].body"),
        (json!({"rules": [{"status": 200, "body": "{{request.body.$[}}"}]}), "rules[0].body"),
        (json!({"rules": [{"status": 200, "body": "{{request.method"}]}), "rules[0].body"),
        (json!({"rules": [{"status": 200, "delay_ms": 30_001}]}), "rules[0].delay_ms"),
        (json!({"rules": [{"status": 200, "path": "orders"}]}), "rules[0].path"),
        (json!({"rules": [{"status": 200, "path": "/a/*/b"}]}), "rules[0].path"),
        (json!({"rules": [{"status": 200, "path": "/a{id}"}]}), "rules[0].path"),
        (json!({"rules": [{"status": 200, "q": "\"unclosed"}]}), "rules[0].q"),
        (
            json!({"rules": [{"status": 200, "filter": {"body_json": [{"path": "$[", "op": "exists"}]}}]}),
            "rules[0].filter",
        ),
        (json!({"rules": [{"status": 200, "method": "TRACE"}]}), "method"),
        (json!({"rules": [{"status": 200, "extra": 1}]}), "extra"),
        (json!({"cors": {"allow_origins": []}}), "cors.allow_origins"),
        (json!({"cors": {"allow_origins": ["ftp://a.example"]}}), "cors.allow_origins[0]"),
        (json!({"cors": {"allow_origins": ["https://a.example/path"]}}), "cors.allow_origins[0]"),
        (json!({"cors": {"allow_origins": ["*", "https://a.example"]}}), "cors.allow_origins"),
        (json!({"cors": {"allow_origins": ["*"], "max_age_s": 86_401}}), "cors.max_age_s"),
        (json!({"cors": {"allow_origins": ["*"], "allow_headers": ["bad header"]}}), "cors.allow_headers[0]"),
    ];
    let id = app.webhook_named("target").await;
    for (fields, named) in &cases {
        let mut create = fields.clone();
        create["name"] = json!("bad");
        let reply = app.admin(Method::POST, "/webhooks", Some(create)).await;
        reply.assert_refused(400, "invalid_request", named);
        let reply = app.admin(Method::PATCH, &format!("/webhooks/{id}"), Some(fields.clone())).await;
        reply.assert_refused(400, "invalid_request", named);
    }
    assert_eq!(app.rows("webhooks").await, 1, "nothing refused was created");
    // Set, read back, cleared with null.
    let cors = json!({"allow_origins": ["https://app.example.com"], "allow_headers": ["Content-Type", "X-Token"],
        "max_age_s": 60});
    let set: Value =
        app.patch(&format!("/webhooks/{id}"), &json!({"rules": [{"status": 201}], "cors": cors}), 200).await;
    assert_eq!((set["rules"].clone(), set["cors"].clone()), (json!([{"status": 201}]), cors));
    assert_eq!(app.capture(Method::POST, &id, "").await.status, 201);
    let kept: Value = app.patch(&format!("/webhooks/{id}"), &json!({"name": "renamed"}), 200).await;
    assert_eq!(kept["rules"], json!([{"status": 201}]), "absent fields stay");
    let cleared: Value = app.patch(&format!("/webhooks/{id}"), &json!({"rules": null, "cors": null}), 200).await;
    assert_eq!((cleared["rules"].clone(), cleared["cors"].clone()), (Value::Null, Value::Null));
    assert_eq!(app.capture(Method::POST, &id, "").await.status, 200, "the receipt again");
    // rules/test's own fields.
    for (body, named) in [
        (json!({"method": "GET", "path": "no-slash"}), "path"),
        (json!({"method": "GET", "path": "/a?b"}), "path"),
        (json!({"method": "GET", "path": "/", "headers": {"bad name": "x"}}), "headers"),
        // Longer than the document allows (schemathesis found the query accepted at any length).
        (json!({"method": "GET", "path": "/", "query": "0".repeat(8193)}), "query"),
        (json!({"method": "GET", "path": format!("/{}", "é".repeat(2048))}), "path"),
        (json!({"method": "BREW", "path": "/"}), "method"),
        (json!({"path": "/"}), "method"),
    ] {
        let reply = app.admin(Method::POST, &format!("/webhooks/{id}/rules/test"), Some(body)).await;
        reply.assert_refused(400, "invalid_request", named);
    }
}

#[tokio::test]
async fn rules_need_their_scopes_and_another_organizations_endpoint_is_not_found() {
    let app = TestApp::spawn().await;
    let rules = json!([{"status": 201, "body": "mine"}]);
    let id = app.create_webhook(json!({"name": "mine", "rules": rules})).await["id"].as_str().expect("id").to_owned();
    let test = json!({"method": "POST", "path": "/"});
    let reader = app.creds_with(&["webhooks:read"]).await;
    let said = app.call(Method::POST, &format!("/webhooks/{id}/rules/test"), Some(&reader), Some(test.clone())).await;
    assert_eq!((said.status.as_u16(), said.body["rule_index"].clone()), (200, json!(0)), "{}", said.text);
    assert_eq!(said.body["body"], "mine");
    let outsider = app.creds_with(&["flows:read"]).await;
    let refused =
        app.call(Method::POST, &format!("/webhooks/{id}/rules/test"), Some(&outsider), Some(test.clone())).await;
    assert_eq!(refused.status, 403, "{}", refused.text);
    let change = json!({"rules": [{"status": 202}]});
    let refused = app.call(Method::PATCH, &format!("/webhooks/{id}"), Some(&reader), Some(change.clone())).await;
    assert_eq!(refused.status, 403, "setting rules needs webhooks:write");
    let anonymous = app.call(Method::POST, &format!("/webhooks/{id}/rules/test"), None, Some(test.clone())).await;
    assert_eq!(anonymous.status, 401);
    // Another organization: its ids answer 404, and nothing of this endpoint changes.
    let other = app.new_org("Other").await;
    let theirs = app.call(Method::POST, &format!("/webhooks/{id}/rules/test"), Some(&other), Some(test.clone())).await;
    theirs.assert_refused(404, "not_found", "webhook");
    let theirs = app.call(Method::PATCH, &format!("/webhooks/{id}"), Some(&other), Some(change)).await;
    assert_eq!(theirs.status, 404);
    let unknown = uuid::Uuid::new_v4();
    let missing = app.admin(Method::POST, &format!("/webhooks/{unknown}/rules/test"), Some(test)).await;
    assert_eq!(missing.status, 404);
    assert_eq!(app.capture(Method::POST, &id, "").await.text, "mine", "unchanged");
}

/// Captures a second through `id` (`rest` after it), `count` sent 8 at a time.
async fn rate(app: &TestApp, id: &str, rest: &str, count: usize) -> f64 {
    let url = app.url(&format!("/webhook/{id}{rest}"));
    let started = Instant::now();
    let mut sent = 0;
    while sent < count {
        let batch: Vec<_> = (0..8)
            .map(|_| {
                let (client, url) = (app.client.clone(), url.clone());
                tokio::spawn(async move { client.post(url).body("{\"n\": 1}").send().await.expect("send").status() })
            })
            .collect();
        for task in batch {
            assert!(task.await.expect("task").is_success());
        }
        sent += 8;
    }
    sent as f64 / started.elapsed().as_secs_f64()
}

#[tokio::test]
async fn fifty_rules_matched_at_the_last_cost_little_against_none() {
    let app = TestApp::spawn().await;
    let mut rules: Vec<Value> =
        (0..49).map(|i| json!({"method": "POST", "path": format!("/r{i}/{{id}}"), "status": 200})).collect();
    rules.push(json!({"method": "POST", "path": "/target/{id}", "status": 200,
        "headers": {"Content-Type": "application/json"}, "body": "{\"id\": \"{{request.params.id}}\"}"}));
    let ruled =
        app.create_webhook(json!({"name": "ruled", "rules": rules})).await["id"].as_str().expect("id").to_owned();
    let plain = app.webhook_named("plain").await;
    assert_eq!(app.capture(Method::POST, &format!("{ruled}/target/7"), "").await.text, "{\"id\": \"7\"}");
    // Interleaved rounds, the best of each kept: the machine's noise falls on both alike.
    let (mut with_rules, mut without) = (0f64, 0f64);
    for _ in 0..3 {
        without = without.max(rate(&app, &plain, "/target/7", 200).await);
        with_rules = with_rules.max(rate(&app, &ruled, "/target/7", 200).await);
    }
    let ratio = with_rules / without;
    println!("captures/s: 50 rules (last matches) {with_rules:.0}, no rules {without:.0}, ratio {ratio:.2}");
    assert!(ratio >= 0.8, "50 rules cost too much: {with_rules:.0}/s against {without:.0}/s");
}
