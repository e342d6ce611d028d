//! People signing in to the built-in identity provider over the real server: sessions, refresh (single use, reuse
//! revokes), sign-out on every replica, one-time passwords, sign-up off by default, throttling that cannot lock a
//! person out, signing-key rotation, and no token or password in any answer or audit entry.

use hookflow_control_plane::auth::signing;
use hookflow_control_plane::signals::Invalidation;
use hookflow_shared::Role;
use hookflow_shared::api::people::Signup;
use hookflow_tests::people::Bearer;
use hookflow_tests::{Credentials, TestApp};
use reqwest::Method;
use serde_json::json;

/// One scenario: a session from sign-in to sign-out, with refresh and reuse detection on the way.
#[tokio::test]
async fn sign_in_refresh_reuse_and_sign_out_on_every_replica() {
    let app = TestApp::spawn().await;
    let replica = app.replica().await;
    let person = app.person(app.admin.org, Role::Member).await;
    let reply = app.sign_in(&person.email.to_uppercase(), &person.password).await;
    assert_eq!(reply.status, 201, "emails match whatever their case: {}", reply.text);
    assert_eq!(reply.body["user"]["email"], person.email.as_str());
    assert_eq!(reply.body["password_change_required"], false);
    let token = reply.body["access_token"].as_str().expect("token").to_owned();
    let refresh = reply.body["refresh_token"].as_str().expect("refresh").to_owned();
    assert!(refresh.starts_with("hfr_"));
    let bearer = Bearer { token: token.clone(), org: Some(app.admin.org) };

    let session = app.call_bearer(Method::GET, "/auth/session", &Bearer { org: None, ..bearer.clone() }, None).await;
    assert_eq!(session.status, 200, "{}", session.text);
    assert_eq!(session.body["organizations"][0]["role"], "member");
    assert_eq!(session.body["organizations"][0]["id"], app.admin.org.to_string());
    assert_eq!(app.call_bearer(Method::GET, "/webhooks", &bearer, None).await.status, 200);
    let no_org = app.call_bearer(Method::GET, "/webhooks", &Bearer { org: None, ..bearer.clone() }, None).await;
    assert_eq!((no_org.status.as_u16(), no_org.code()), (400, "organization_required"));
    let other = app.new_org("Other").await;
    let elsewhere =
        app.call_bearer(Method::GET, "/webhooks", &Bearer { org: Some(other.org), ..bearer.clone() }, None).await;
    assert_eq!((elsewhere.status.as_u16(), elsewhere.code()), (403, "organization_mismatch"));

    // Refresh: new tokens, and the refresh token presented dies.
    let people = app.api_with(Credentials::None);
    let people = people.people();
    let refreshed = people.refresh(&refresh).await.expect("refresh");
    let next_refresh = refreshed.refresh_token.expect("a refresh token");
    assert_ne!(next_refresh, refresh);
    let next = Bearer { token: refreshed.access_token, org: Some(app.admin.org) };
    assert_eq!(replica.call_bearer(Method::GET, "/webhooks", &next, None).await.status, 200);
    // Presenting the used token again: someone copied it. The whole session ends, on every replica.
    let reused = people.refresh(&refresh).await.expect_err("a used refresh token");
    assert_eq!((reused.status(), reused.code()), (401, "unauthorized"));
    for server in [&app, &replica] {
        assert_eq!(server.call_bearer(Method::GET, "/webhooks", &next, None).await.status, 401);
    }
    let after = people.refresh(&next_refresh).await.expect_err("a dead session");
    assert_eq!(after.status(), 401, "the rotated token died with its session");

    // Sign-out ends the session at once, on the other replica too (it had it cached).
    let (fresh, fresh_refresh) = app.bearer(&person, Some(app.admin.org)).await;
    assert_eq!(replica.call_bearer(Method::GET, "/webhooks", &fresh, None).await.status, 200);
    assert_eq!(app.call_bearer(Method::DELETE, "/auth/session", &fresh, None).await.status, 204);
    assert_eq!(refused_soon(&replica, &fresh).await, 401, "the replica heard of the sign-out");
    let signed_out = people.refresh(&fresh_refresh).await.expect_err("signed out");
    assert_eq!(signed_out.status(), 401, "{signed_out:?}");
}

#[tokio::test]
async fn every_bad_credential_is_the_same_401_and_nothing_secret_is_echoed() {
    let app = TestApp::spawn().await;
    let person = app.person(app.admin.org, Role::Admin).await;
    let wrong = app.sign_in(&person.email, "not the password at all").await;
    let unknown = app.sign_in("nobody@example.com", &person.password).await;
    for reply in [&wrong, &unknown] {
        assert_eq!((reply.status.as_u16(), reply.code()), (401, "unauthorized"));
        assert_eq!(reply.body["error"]["message"], wrong.body["error"]["message"], "one body for every cause");
    }
    for token in ["garbage", "a.b.c", "eyJhbGciOiJub25lIn0.eyJpc3MiOiJ4In0."] {
        let reply = app
            .call_bearer(Method::GET, "/webhooks", &Bearer { token: token.into(), org: Some(app.admin.org) }, None)
            .await;
        assert_eq!((reply.status.as_u16(), reply.code()), (401, "unauthorized"), "{token}");
    }
    let (bearer, refresh) = app.bearer(&person, Some(app.admin.org)).await;
    // Neither the password nor a token shows in any answer or audit entry.
    let answers = [
        app.call_bearer(Method::GET, "/auth/session", &bearer, None).await.text,
        app.call_bearer(Method::GET, "/organization/members", &bearer, None).await.text,
        app.call_bearer(Method::GET, "/audit-log", &bearer, None).await.text,
    ];
    let stored: Vec<String> = sqlx::query_scalar("SELECT details::text || actor || target FROM audit_log")
        .fetch_all(&app.pool)
        .await
        .expect("audit rows");
    for text in answers.iter().chain(&stored) {
        for secret in [&person.password, &refresh, &bearer.token] {
            assert!(!text.contains(secret.as_str()), "a secret leaked: {text}");
        }
    }
    let hash: String = sqlx::query_scalar("SELECT password_hash FROM users WHERE id = $1")
        .bind(person.user_id)
        .fetch_one(&app.pool)
        .await
        .expect("hash");
    assert!(hash.starts_with("$argon2id$") && !hash.contains(&person.password));
    // Sign-ins of known users are audited, failures included; unknown emails are not.
    let actions: Vec<String> = sqlx::query_scalar("SELECT action FROM audit_log WHERE target = $1 ORDER BY id")
        .bind(person.user_id.to_string())
        .fetch_all(&app.pool)
        .await
        .expect("actions");
    assert_eq!(actions, ["user.sign_in_failed", "user.signed_in"]);
    assert_eq!(app.rows("audit_log WHERE details::text LIKE '%nobody@%'").await, 0);
}

/// One scenario: a one-time password allows nothing but changing it.
#[tokio::test]
async fn a_one_time_password_must_be_changed_first() {
    let app = TestApp::spawn().await;
    let person = app.member(app.admin.org, Role::Owner, true).await;
    let reply = app.sign_in(&person.email, &person.password).await;
    assert_eq!((reply.status.as_u16(), &reply.body["password_change_required"]), (201, &json!(true)));
    let bearer = Bearer { token: reply.body["access_token"].as_str().expect("token").into(), org: Some(app.admin.org) };
    let refused = app.call_bearer(Method::GET, "/webhooks", &bearer, None).await;
    assert_eq!((refused.status.as_u16(), refused.code()), (403, "password_change_required"));
    let refused = app.call_bearer(Method::POST, "/organizations", &bearer, Some(json!({"name": "Mine"}))).await;
    assert_eq!(refused.code(), "password_change_required");
    assert_eq!(
        app.call_bearer(Method::GET, "/auth/session", &bearer, None).await.body["password_change_required"],
        true
    );

    let change = |current: &str, new: &str| json!({"current_password": current, "new_password": new});
    let wrong = app
        .call_bearer(Method::PUT, "/auth/password", &bearer, Some(change("wrong password!", "a new long password")))
        .await;
    assert_eq!(wrong.status, 400, "{}", wrong.text);
    let short = app.call_bearer(Method::PUT, "/auth/password", &bearer, Some(change(&person.password, "short"))).await;
    assert_eq!(short.status, 400);
    let done = app
        .call_bearer(Method::PUT, "/auth/password", &bearer, Some(change(&person.password, "a new long password")))
        .await;
    assert_eq!(done.status, 204, "{}", done.text);
    assert_eq!(app.call_bearer(Method::GET, "/webhooks", &bearer, None).await.status, 200, "the same session goes on");
    assert_eq!(app.sign_in(&person.email, &person.password).await.status, 401, "the one-time password is spent");
    let again = app.sign_in(&person.email, "a new long password").await;
    assert_eq!((again.status.as_u16(), &again.body["password_change_required"]), (201, &json!(false)));
}

#[tokio::test]
async fn signup_is_off_unless_enabled() {
    let app = TestApp::spawn().await;
    let signup = |email: &str, password: &str, organization: &str| Signup {
        email: email.parse().expect("an email"),
        password: password.into(),
        organization_name: organization.parse().expect("a name"),
    };
    let body = signup("new@example.com", "a long enough password", "New");
    let reply = app.api_with(Credentials::None).people().signup(&body).await.expect_err("sign-up is off");
    assert_eq!(reply.status(), 404, "{reply}");

    let open = TestApp::spawn_with(|s| s.signup = true).await;
    let anonymous = open.api_with(Credentials::None);
    let signed_up = anonymous.people().signup(&body).await.expect("sign up");
    assert_eq!(signed_up.organization.role, Role::Owner);
    let bearer = Bearer { token: signed_up.access_token, org: Some(signed_up.organization.id) };
    assert_eq!(open.api_bearer(&bearer).organization().get().await.expect("organization").name, "New");
    assert_eq!(anonymous.people().signup(&body).await.expect_err("taken").status(), 409);
    let weak = signup("weak@example.com", "short", "W");
    assert_eq!(anonymous.people().signup(&weak).await.expect_err("a weak password").status(), 400);
}

/// One scenario: an attacker guessing from elsewhere is throttled; the person, from their own address, is not.
#[tokio::test]
async fn failed_sign_ins_are_throttled_without_locking_the_person_out() {
    let app = TestApp::spawn().await;
    let person = app.person(app.admin.org, Role::Viewer).await;
    let attacker =
        reqwest::Client::builder().local_address("127.0.0.3".parse::<std::net::IpAddr>().ok()).build().expect("client");
    let guess = |password: &str| {
        let request =
            attacker.post(app.url("/auth/sessions")).json(&json!({"email": person.email, "password": password}));
        async move { request.send().await.expect("send").status().as_u16() }
    };
    for _ in 0..5 {
        assert_eq!(guess("guess guess guess").await, 401);
    }
    assert_eq!(guess("guess guess guess").await, 429, "the sixth guess from that address waits");
    let right =
        attacker.post(app.url("/auth/sessions")).json(&json!({"email": person.email, "password": person.password}));
    let right = right.send().await.expect("send");
    assert_eq!(right.status(), 429);
    assert!(right.headers().contains_key("retry-after"));
    // From the person's own address, the right password still works.
    assert_eq!(app.sign_in(&person.email, &person.password).await.status, 201);
    // Spraying many emails from one address is throttled per address.
    let sprayer =
        reqwest::Client::builder().local_address("127.0.0.4".parse::<std::net::IpAddr>().ok()).build().expect("client");
    let mut statuses = Vec::new();
    for i in 0..55 {
        let body = json!({"email": format!("victim{i}@example.com"), "password": "guess guess guess"});
        statuses
            .push(sprayer.post(app.url("/auth/sessions")).json(&body).send().await.expect("send").status().as_u16());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 401).count(), 50);
    assert_eq!(statuses.last(), Some(&429));
}

/// Finding 6 of Hardening III: the throttle was check-then-act, so 150 concurrent guesses for one email were all
/// checked (limit 5), each an argon2 hash. Attempts are reserved before hashing: at most five are hashed.
#[tokio::test]
async fn a_burst_of_guesses_is_reserved_before_any_hash() {
    let app = TestApp::spawn().await;
    let person = app.person(app.admin.org, Role::Viewer).await;
    let anonymous = app.api_with(Credentials::None);
    let people = anonymous.people();
    let email = &person.email.parse().expect("an email");
    let burst = (0..150).map(|_| async move { people.sign_in(email, "guess guess guess").await });
    let statuses: Vec<u16> = futures_util::future::join_all(burst)
        .await
        .iter()
        .map(|r| r.as_ref().map_or_else(|e| e.status(), |_| 201))
        .collect();
    let hashed = statuses.iter().filter(|s| **s == 401).count();
    assert!(hashed <= 5, "{hashed} guesses were hashed: {statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 150 - hashed, "{statuses:?}");
    // Finding 13: the account's failures are one audit row per throttle window, not one per guess.
    let rows =
        app.rows(&format!("audit_log WHERE action = 'user.sign_in_failed' AND target = '{}'", person.user_id)).await;
    assert_eq!(rows, 1, "one row for {hashed} failures");
}

/// Finding 7 of Hardening III: behind the recommended proxy every person had the proxy's address, so 50 failed
/// sign-ins by anyone locked out password sign-in for everyone. With `--trusted-proxies` the forwarded client
/// counts; forwarding headers of any other peer are not believed.
#[tokio::test]
async fn behind_a_trusted_proxy_each_client_has_its_own_budget() {
    let proxied = TestApp::spawn_with(|s| {
        s.trusted_proxies =
            hookflow_control_plane::http::client_address::TrustedProxies::parse("127.0.0.1").expect("trusted proxies");
    })
    .await;
    let person = proxied.person(proxied.admin.org, Role::Viewer).await;
    let from = |client: &str, password: &str| {
        let body =
            json!({"email": format!("victim-{}@example.com", uuid::Uuid::new_v4().simple()), "password": password});
        proxied
            .client
            .post(proxied.url("/auth/sessions"))
            .header("x-forwarded-for", format!("6.6.6.6, {client}"))
            .json(&body)
    };
    let mut statuses = Vec::new();
    for i in 0..55 {
        // A `Forwarded` header the proxy does not write is the sprayer's own claim, changed at every guess: never read.
        let spoofed = from("203.0.113.7", "guess guess guess").header("forwarded", format!("for=192.0.2.{i}"));
        statuses.push(spoofed.send().await.expect("send").status().as_u16());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 401).count(), 50, "{statuses:?}");
    assert_eq!(statuses.last(), Some(&429), "the sprayer behind the proxy is throttled");
    let person_signs_in = proxied
        .client
        .post(proxied.url("/auth/sessions"))
        .header("x-forwarded-for", "198.51.100.20")
        .json(&json!({"email": person.email, "password": person.password}));
    assert_eq!(person_signs_in.send().await.expect("send").status(), 201, "another client behind the proxy");

    // Without trusted proxies, a forwarding header is the sender's own claim: changing it escapes nothing.
    let direct = TestApp::spawn().await;
    let mut statuses = Vec::new();
    for i in 0..7 {
        let spoof = format!("192.0.2.{i}");
        let body = json!({"email": "someone@example.com", "password": "guess guess guess"});
        let request = direct.client.post(direct.url("/auth/sessions")).header("x-forwarded-for", spoof).json(&body);
        statuses.push(request.send().await.expect("send").status().as_u16());
    }
    assert_eq!(statuses, vec![401, 401, 401, 401, 401, 429, 429]);
}

/// Finding 17 of Hardening III: sign-up was unthrottled. A burst of 20 from one address meets 429.
#[tokio::test]
async fn sign_ups_are_throttled_per_address() {
    let open = TestApp::spawn_with(|s| s.signup = true).await;
    let mut statuses = Vec::new();
    let anonymous = open.api_with(Credentials::None);
    for i in 0..20 {
        let body = Signup {
            email: format!("burst{i}@example.com").parse().expect("an email"),
            password: "a long enough password".into(),
            organization_name: "Burst".parse().expect("a name"),
        };
        statuses.push(anonymous.people().signup(&body).await.map_or_else(|e| e.status(), |_| 201));
    }
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 10, "{statuses:?}");
    assert!(statuses[10..].iter().all(|s| *s == 429), "{statuses:?}");
}

fn kid(token: &str) -> String {
    jsonwebtoken::decode_header(token).expect("header").kid.expect("kid")
}

/// One scenario: two rotations; tokens of the previous key keep working, older ones stop.
#[tokio::test]
async fn signing_keys_rotate_and_the_jwks_publishes_the_newest_two() {
    let app = TestApp::spawn().await;
    let person = app.person(app.admin.org, Role::Member).await;
    let (first, _) = app.bearer(&person, Some(app.admin.org)).await;
    // The published document as the wire spells it (no private part may appear under any name).
    let jwks: serde_json::Value = app.api_with(Credentials::None).get("/.well-known/jwks.json").await.expect("jwks");
    assert_eq!(jwks["keys"][0]["kid"], kid(&first.token));
    assert_eq!((jwks["keys"][0]["alg"].as_str(), jwks["keys"][0]["crv"].as_str()), (Some("EdDSA"), Some("Ed25519")));
    assert!(jwks["keys"][0].get("d").is_none(), "no private part is published");

    // What `hookflow-server keys rotate-signing` does: a new key, announced to every replica.
    let rotate = || async {
        let mut conn = app.pool.acquire().await.expect("connection");
        Invalidation::SigningKeys.announce(&mut conn).await.expect("announce");
    };
    let server_master = app.master_key();
    let second_kid = signing::create(&app.pool, &server_master).await.expect("rotate");
    rotate().await;
    let mut second = None;
    for _ in 0..50 {
        let (bearer, _) = app.bearer(&person, Some(app.admin.org)).await;
        if kid(&bearer.token) == second_kid {
            second = Some(bearer);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let second = second.expect("new sessions are signed with the new key");
    let jwks = app.api_with(Credentials::None).people().jwks().await.expect("jwks");
    let kids: Vec<String> = jwks.keys.iter().map(|k| k.kid.clone()).collect();
    assert_eq!(kids, [second_kid.clone(), kid(&first.token)]);
    assert_eq!(app.call_bearer(Method::GET, "/webhooks", &first, None).await.status, 200, "the previous key verifies");

    signing::create(&app.pool, &server_master).await.expect("rotate again");
    rotate().await;
    assert_eq!(refused_soon(&app, &first).await, 401, "two rotations later the first key no longer verifies");
    assert_eq!(app.call_bearer(Method::GET, "/webhooks", &second, None).await.status, 200);
}

/// One scenario: the app's cookie mode: the refresh token never reaches script, and the cookie alone is refused.
#[tokio::test]
async fn the_apps_refresh_cookie_is_httponly_strict_and_needs_the_csrf_header() {
    let app = TestApp::spawn().await;
    let person = app.person(app.admin.org, Role::Member).await;
    let signed = app
        .client
        .post(app.url("/auth/sessions"))
        .header("x-hookflow-csrf", "1")
        .json(&json!({"email": person.email, "password": person.password}))
        .send()
        .await
        .expect("send");
    assert_eq!(signed.status(), 201);
    let cookie = signed.headers()["set-cookie"].to_str().expect("cookie").to_owned();
    for part in ["hookflow_refresh=hfr_", "HttpOnly", "SameSite=Strict", "Path=/auth", "Max-Age="] {
        assert!(cookie.contains(part), "{part} in {cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain http here; Secure when the public URL is https");
    let body: serde_json::Value = signed.json().await.expect("json");
    assert!(body["refresh_token"].is_null(), "the token is in the cookie only: {body}");
    let pair = cookie.split(';').next().expect("pair").to_owned();

    let refresh = |csrf: bool| {
        let mut request = app.client.post(app.url("/auth/sessions/refresh")).header("cookie", pair.clone());
        if csrf {
            request = request.header("x-hookflow-csrf", "1");
        }
        async move { request.send().await.expect("send") }
    };
    let forged = refresh(false).await;
    assert_eq!(forged.status(), 403, "a cross-site form cannot send the header");
    let body: serde_json::Value = forged.json().await.expect("json");
    assert_eq!(body["error"]["code"], "csrf_required");
    let refreshed = refresh(true).await;
    assert_eq!(refreshed.status(), 201);
    assert!(refreshed.headers()["set-cookie"].to_str().expect("cookie").starts_with("hookflow_refresh=hfr_"));
    let signed_out = app
        .client
        .delete(app.url("/auth/session"))
        .bearer_auth(
            refreshed.json::<serde_json::Value>().await.expect("json")["access_token"].as_str().expect("token"),
        )
        .send()
        .await
        .expect("send");
    assert_eq!(signed_out.status(), 204);
    assert!(signed_out.headers()["set-cookie"].to_str().expect("cookie").contains("Max-Age=0"));
}

/// The status of `GET /webhooks` under `bearer` once it is 401, or after a second of asking every 20 ms.
async fn refused_soon(app: &TestApp, bearer: &Bearer) -> u16 {
    let mut seen = 0;
    for _ in 0..50 {
        seen = app.call_bearer(Method::GET, "/webhooks", bearer, None).await.status.as_u16();
        if seen == 401 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    seen
}
