//! Issue #50, email: password resets, sign-up confirmations and invitations through a real SMTP server
//! (aiosmtpd, `hookflow_tests::smtp`), end to end through the links the mails carry; the same answers for known and
//! unknown emails; single-use, expiring tokens; no token in a log, an audit entry or a read; and everything off
//! (404, or as before) without SMTP.

use hookflow_shared::Role;
use hookflow_tests::TestApp;
use hookflow_tests::people::Bearer;
use hookflow_tests::server::ServerProcess;
use hookflow_tests::smtp::SmtpServer;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

async fn app_with_mail(smtp: &SmtpServer, signup: bool) -> TestApp {
    let settings = smtp.settings();
    TestApp::spawn_with(move |s| {
        s.smtp = Some(settings);
        s.signup = signup;
    })
    .await
}

async fn post(app: &TestApp, path: &str, body: Value) -> hookflow_tests::Reply {
    app.call(Method::POST, path, None, Some(body)).await
}

/// The token at the end of a mailed link `<public URL>/#/<route>/<token>`.
fn token_of(link: &str, route: &str) -> String {
    link.split_once(&format!("/#/{route}/")).expect("an app link").1.to_owned()
}

/// Every audit entry as text, to look for what must not be there.
async fn audit_text(app: &TestApp) -> String {
    let rows: Vec<String> = sqlx::query_scalar("SELECT details::text || actor || target || action FROM audit_log")
        .fetch_all(&app.pool)
        .await
        .expect("audit rows");
    rows.join("\n")
}

#[tokio::test]
async fn mail_password_reset_through_the_link_works_once_and_ends_every_session() {
    let smtp = SmtpServer::start().await;
    let app = app_with_mail(&smtp, false).await;
    let person = app.person(app.admin.org, Role::Admin).await;
    let (bearer, refresh) = app.bearer(&person, Some(app.admin.org)).await;
    let (second, _) = app.bearer(&person, Some(app.admin.org)).await;
    assert_eq!(app.call_bearer(Method::GET, "/auth/session", &bearer, None).await.status, 200);

    // Known and unknown emails are answered alike.
    let known = post(&app, "/auth/password-reset", json!({"email": person.email})).await;
    let unknown = post(&app, "/auth/password-reset", json!({"email": "nobody-here@example.com"})).await;
    assert_eq!((known.status.as_u16(), &known.text), (202, &unknown.text), "the same answer");
    assert_eq!(unknown.status, 202);
    assert_eq!(unknown.body, json!({"status": "requested"}));

    let mails = smtp.wait_for(&person.email, 1).await;
    let mail = &mails[0];
    assert!(mail.subject.starts_with("[hookflow]"), "{}", mail.subject);
    assert_eq!(mail.from, "hookflow@example.com");
    let link = mail.link(&format!("{}/#/reset-password/", app.base)).expect("a reset link in the mail");
    let token = token_of(&link, "reset-password");
    assert!(token.starts_with("hfp_"), "{token}");
    // The mail carries no other secret: no password, no session token.
    for secret in [&person.password, &refresh, &bearer.token] {
        assert!(!mail.raw.contains(secret.as_str()));
    }
    // Only the token's hash is stored.
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM password_resets WHERE token_hash = sha256(convert_to($1, 'UTF8'))")
            .bind(&token)
            .fetch_one(&app.pool)
            .await
            .expect("count");
    assert_eq!(stored, 1);

    // A new password too short is refused naming the field, and the token stays good.
    let short = post(&app, "/auth/password-reset/confirm", json!({"token": token, "password": "short"})).await;
    short.assert_refused(400, "invalid_request", "password");
    let new_password = "a brand new password";
    let done = post(&app, "/auth/password-reset/confirm", json!({"token": token, "password": new_password})).await;
    assert_eq!(done.status, 204, "{}", done.text);
    let again =
        post(&app, "/auth/password-reset/confirm", json!({"token": token, "password": "another new password"})).await;
    again.assert_refused(400, "invalid_token", "link");

    // The old password fails, the new one signs in, and every session ended.
    assert_eq!(app.sign_in(&person.email, &person.password).await.status, 401);
    assert_eq!(app.sign_in(&person.email, new_password).await.status, 201);
    for old in [&bearer, &second] {
        assert_eq!(app.call_bearer(Method::GET, "/auth/session", old, None).await.status, 401);
    }
    let refreshed = post(&app, "/auth/sessions/refresh", json!({"refresh_token": refresh})).await;
    assert_eq!(refreshed.status, 401);

    // The unknown email got nothing; the reset is audited without the token.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(smtp.to("nobody-here@example.com").is_empty());
    let audit = audit_text(&app).await;
    assert!(audit.contains("user.password_reset"), "{audit}");
    assert!(!audit.contains(&token), "the token is in the audit log");
    let (bearer, _) = app
        .bearer(&hookflow_tests::people::Person { password: new_password.into(), ..person }, Some(app.admin.org))
        .await;
    let read = app.call_bearer(Method::GET, "/audit-log", &bearer, None).await;
    assert!(read.text.contains("user.password_reset") && !read.text.contains(&token), "{}", read.text);
}

#[tokio::test]
async fn mail_reset_tokens_expire_are_checked_and_asking_is_budgeted() {
    let smtp = SmtpServer::start().await;
    let app = app_with_mail(&smtp, false).await;
    let person = app.user(false).await;
    assert_eq!(post(&app, "/auth/password-reset", json!({"email": person.email})).await.status, 202);
    let link = smtp.wait_for(&person.email, 1).await[0].link(&format!("{}/#/", app.base)).expect("link");
    let token = token_of(&link, "reset-password");
    // 31 minutes later (the row moved back in time), the link is dead.
    sqlx::query("UPDATE password_resets SET expires_at = now() - interval '1 minute'")
        .execute(&app.pool)
        .await
        .expect("expire");
    let expired =
        post(&app, "/auth/password-reset/confirm", json!({"token": token, "password": "a brand new password"})).await;
    expired.assert_refused(400, "invalid_token", "expired");
    assert_eq!(app.sign_in(&person.email, &person.password).await.status, 201, "the password did not change");
    // Forged and malformed tokens; bad bodies name their field.
    let forged = format!("hfp_{}", &token[4..].chars().rev().collect::<String>());
    for bad in [forged.as_str(), "hfp_short", "hfi_nottherightkind", ""] {
        let reply =
            post(&app, "/auth/password-reset/confirm", json!({"token": bad, "password": "a brand new password"})).await;
        reply.assert_refused(400, "invalid_token", "link");
    }
    post(&app, "/auth/password-reset", json!({"email": "not an email"})).await.assert_refused(
        400,
        "invalid_request",
        "email",
    );
    post(&app, "/auth/password-reset", json!({"email": person.email, "extra": 1})).await.assert_refused(
        400,
        "invalid_request",
        "extra",
    );
    post(&app, "/auth/password-reset/confirm", json!({"password": "a brand new password"})).await.assert_refused(
        400,
        "invalid_request",
        "token",
    );
    // At most three links per account per 30 minutes, whatever is asked.
    for _ in 0..4 {
        assert_eq!(post(&app, "/auth/password-reset", json!({"email": person.email})).await.status, 202);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(smtp.to(&person.email).len(), 3, "three links in 30 minutes, then none");
    // An address asking for more resets than its budget is answered 429, whoever they are for.
    let mut statuses = Vec::new();
    for i in 0..8 {
        statuses.push(
            post(&app, "/auth/password-reset", json!({"email": format!("x{i}@example.com")})).await.status.as_u16(),
        );
    }
    assert!(statuses.contains(&429), "{statuses:?}");
}

#[tokio::test]
async fn mail_sign_up_is_confirmed_through_the_link_and_a_registered_email_is_answered_alike() {
    let smtp = SmtpServer::start().await;
    let app = app_with_mail(&smtp, true).await;
    let registered = app.user(false).await;
    let new_email = format!("new-{}@example.com", uuid::Uuid::new_v4().simple());
    let password = "my sign-up password";
    let fresh =
        post(&app, "/auth/signup", json!({"email": new_email, "password": password, "organization_name": "Newco"}))
            .await;
    let taken = post(
        &app,
        "/auth/signup",
        json!({"email": registered.email, "password": password, "organization_name": "Other"}),
    )
    .await;
    assert_eq!(fresh.status, 202, "{}", fresh.text);
    assert_eq!(fresh.body, json!({"status": "confirmation_sent"}));
    assert_eq!((taken.status, &taken.text), (fresh.status, &fresh.text), "registered and new emails answered alike");

    // The registered email's owner is told, with no link; nothing changed for them.
    let told = &smtp.wait_for(&registered.email, 1).await[0];
    assert!(told.subject.starts_with("[hookflow]") && told.subject.contains("sign up"), "{}", told.subject);
    assert!(!told.body.contains("/#/"), "no link: {}", told.body);
    assert!(!told.raw.contains("hfs_"));
    assert_eq!(app.sign_in(&registered.email, &registered.password).await.status, 201);
    assert_eq!(app.sign_in(&registered.email, password).await.status, 401);

    // No account before the link is used.
    assert_eq!(app.sign_in(&new_email, password).await.status, 401);
    let mail = &smtp.wait_for(&new_email, 1).await[0];
    assert!(mail.subject.starts_with("[hookflow]"), "{}", mail.subject);
    assert!(!mail.raw.contains(password), "the password is not mailed");
    let link = mail.link(&format!("{}/#/signup/confirm/", app.base)).expect("a confirmation link");
    let token = token_of(&link, "signup/confirm");
    assert!(token.starts_with("hfs_"), "{token}");

    let confirmed = post(&app, "/auth/signup/confirm", json!({"token": token})).await;
    assert_eq!(confirmed.status, 201, "{}", confirmed.text);
    assert_eq!(confirmed.body["user"]["email"], new_email.as_str());
    assert_eq!(
        (&confirmed.body["organization"]["name"], &confirmed.body["organization"]["role"]),
        (&json!("Newco"), &json!("owner"))
    );
    let bearer = Bearer { token: confirmed.body["access_token"].as_str().expect("token").into(), org: None };
    assert_eq!(app.call_bearer(Method::GET, "/auth/session", &bearer, None).await.status, 200);
    post(&app, "/auth/signup/confirm", json!({"token": token})).await.assert_refused(400, "invalid_token", "link");
    // The password given at sign-up signs in from then on.
    assert_eq!(app.sign_in(&new_email, password).await.status, 201);
    // A second sign-up of the now registered email is answered alike, and changes nothing.
    let later = post(
        &app,
        "/auth/signup",
        json!({"email": new_email, "password": "another password!", "organization_name": "X"}),
    )
    .await;
    assert_eq!((later.status.as_u16(), later.body.clone()), (202, json!({"status": "confirmation_sent"})));
    post(&app, "/auth/signup/confirm", json!({"token": "hfs_x"})).await.assert_refused(400, "invalid_token", "link");
    post(&app, "/auth/signup/confirm", json!({})).await.assert_refused(400, "invalid_request", "token");
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM signup_confirmations WHERE token_hash = sha256(convert_to($1, 'UTF8')) AND used_at IS NOT NULL",
    )
    .bind(&token)
    .fetch_one(&app.pool)
    .await
    .expect("count");
    assert_eq!(stored, 1, "only the hash is stored, and it is used");
}

#[tokio::test]
async fn mail_an_invitation_mail_holds_a_working_invite_url() {
    let smtp = SmtpServer::start().await;
    let app = app_with_mail(&smtp, false).await;
    let invitee = app.user(false).await;
    let invited =
        app.admin(Method::POST, "/organization/members", Some(json!({"email": invitee.email, "role": "member"}))).await;
    assert_eq!(invited.status, 201, "{}", invited.text);
    let invite_url = invited.body["invite_url"].as_str().expect("invite_url").to_owned();
    let mail = &smtp.wait_for(&invitee.email, 1).await[0];
    assert!(mail.subject.starts_with("[hookflow]") && mail.subject.contains("Acme"), "{}", mail.subject);
    let link = mail.link(&format!("{}/#/invite/", app.base)).expect("the invite link");
    assert_eq!(link, invite_url);
    let (bearer, _) = app.bearer(&invitee, None).await;
    let accepted = app.accept(&bearer, &token_of(&link, "invite")).await;
    assert_eq!(accepted.status, 201, "{}", accepted.text);
    assert_eq!(accepted.body["role"], "member");
    // Another organization cannot see this organization's people nor withdraw its invitations.
    let other = app.new_org("Other").await;
    let members = app.call(Method::GET, "/organization/members", Some(&other), None).await;
    assert!(!members.text.contains(&invitee.email), "{}", members.text);
    let second = format!("second-{}@example.com", uuid::Uuid::new_v4().simple());
    let invited =
        app.admin(Method::POST, "/organization/members", Some(json!({"email": second, "role": "viewer"}))).await;
    assert_eq!(invited.status, 201, "{}", invited.text);
    let id = invited.body["invitation_id"].as_str().expect("invitation_id").to_owned();
    let path = format!("/organization/invitations/{id}");
    assert_eq!(app.call(Method::DELETE, &path, Some(&other), None).await.status, 404, "another organization's id");
    assert_eq!(smtp.wait_for(&second, 1).await.len(), 1);
    // Who may not invite mails nobody: a member's session lacks organization:write, a key without it too.
    let member = app.person(app.admin.org, Role::Member).await;
    let (bearer, _) = app.bearer(&member, Some(app.admin.org)).await;
    let third = format!("third-{}@example.com", uuid::Uuid::new_v4().simple());
    let body = json!({"email": third, "role": "viewer"});
    let refused = app.call_bearer(Method::POST, "/organization/members", &bearer, Some(body.clone())).await;
    assert_eq!((refused.status.as_u16(), refused.code()), (403, "insufficient_scope"), "{}", refused.text);
    let reader = app.creds_with(&["organization:read"]).await;
    let refused = app.call(Method::POST, "/organization/members", Some(&reader), Some(body)).await;
    assert_eq!(refused.status, 403);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(smtp.to(&third).is_empty(), "a refused invitation mails nothing");
}

#[tokio::test]
async fn mail_without_smtp_resets_are_404_and_sign_up_is_as_before() {
    let app = TestApp::spawn_with(|s| s.signup = true).await;
    let person = app.user(false).await;
    post(&app, "/auth/password-reset", json!({"email": person.email})).await.assert_refused(404, "not_found", "SMTP");
    let confirm =
        post(&app, "/auth/password-reset/confirm", json!({"token": "hfp_x", "password": "a brand new password"})).await;
    confirm.assert_refused(404, "not_found", "SMTP");
    post(&app, "/auth/signup/confirm", json!({"token": "hfs_x"})).await.assert_refused(404, "not_found", "SMTP");
    let email = format!("n-{}@example.com", uuid::Uuid::new_v4().simple());
    let signed = post(
        &app,
        "/auth/signup",
        json!({"email": email, "password": "a sign-up password", "organization_name": "Co"}),
    )
    .await;
    assert_eq!(signed.status, 201, "{}", signed.text);
    let taken = post(
        &app,
        "/auth/signup",
        json!({"email": email, "password": "a sign-up password", "organization_name": "Co"}),
    )
    .await;
    assert_eq!(taken.status, 409);
    // With SMTP but without --signup, confirming is off like signing up.
    let smtp = SmtpServer::start().await;
    let app = app_with_mail(&smtp, false).await;
    post(&app, "/auth/signup/confirm", json!({"token": "hfs_x"})).await.assert_refused(404, "not_found", "sign");
    post(&app, "/auth/signup", json!({"email": email, "password": "a sign-up password", "organization_name": "Co"}))
        .await
        .assert_refused(404, "not_found", "sign");
}

/// The server process with `--smtp-url`/`--smtp-from`: sign up through the mail, reset the password through the
/// mail, then look for both tokens in everything the server wrote, its audit log and its reads.
#[tokio::test]
async fn mail_tokens_appear_in_no_log_audit_entry_or_read_of_the_server_process() {
    let smtp = SmtpServer::start().await;
    let url = smtp.url();
    let server = ServerProcess::spawn(
        crate::SERVER,
        &["--signup", "--smtp-url", &url, "--smtp-from", "hookflow <hookflow@example.com>", "--log", "debug"],
    )
    .await;
    let http = reqwest::Client::new();
    let send = |path: &str, body: Value| http.post(format!("{}{path}", server.base)).json(&body).send();
    let email = format!("s-{}@example.com", uuid::Uuid::new_v4().simple());
    let signup =
        send("/auth/signup", json!({"email": email, "password": "first password!", "organization_name": "Proc"}))
            .await
            .expect("send");
    assert_eq!(signup.status(), 202);
    let mail = smtp.wait_for(&email, 1).await;
    let signup_token = token_of(&mail[0].link(&format!("{}/#/", server.base)).expect("link"), "signup/confirm");
    let confirmed = send("/auth/signup/confirm", json!({"token": signup_token})).await.expect("send");
    assert_eq!(confirmed.status(), 201);
    let confirmed: Value = confirmed.json().await.expect("json");
    let org = confirmed["organization"]["id"].as_str().expect("org").to_owned();
    assert_eq!(send("/auth/password-reset", json!({"email": email})).await.expect("send").status(), 202);
    let mail = smtp.wait_for(&email, 2).await;
    let reset_token = token_of(&mail[1].link(&format!("{}/#/", server.base)).expect("link"), "reset-password");
    let reset = send("/auth/password-reset/confirm", json!({"token": reset_token, "password": "second password!"}))
        .await
        .expect("send");
    assert_eq!(reset.status(), 204);
    let signed_in =
        send("/auth/sessions", json!({"email": email, "password": "second password!"})).await.expect("send");
    assert_eq!(signed_in.status(), 201);
    let access: Value = signed_in.json().await.expect("json");
    let access = access["access_token"].as_str().expect("token").to_owned();
    let mut reads = String::new();
    for path in ["/audit-log", "/auth/session", "/organization/members", "/organization"] {
        let reply = http
            .get(format!("{}{path}", server.base))
            .bearer_auth(&access)
            .header("x-organization-id", &org)
            .send()
            .await
            .expect("read");
        assert!(reply.status().is_success(), "{path}");
        reads.push_str(&reply.text().await.expect("text"));
    }
    assert!(reads.contains("user.password_reset"), "{reads}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = server.output();
    assert!(log.contains("mail sent"), "the sender logs what it sent: {log}");
    for token in [&signup_token, &reset_token] {
        assert!(!log.contains(token.as_str()), "a token is in the server's log");
        assert!(!reads.contains(token.as_str()), "a token is in a read");
    }
    server.stop().await;
}

/// The app: "Forgot password?" on the sign-in page mails a link; the page it opens takes the token out of the
/// address bar and sets the new password; a sign-up's link opens the confirmation page, which signs the new person
/// in. Without SMTP the sign-in page offers no "Forgot password?".
#[tokio::test]
async fn mail_the_app_resets_a_password_and_confirms_a_sign_up_through_the_mailed_links() {
    use hookflow_tests::browser::Browser;
    let smtp = SmtpServer::start().await;
    let app = app_with_mail(&smtp, true).await;
    let person = app.person(app.admin.org, Role::Owner).await;
    let browser = Browser::start(1280).await;
    browser.goto(&format!("{}/#/signin", app.base)).await;
    browser.click("#forgot-password").await;
    browser.type_into("form[aria-label='Reset your password'] input[name=email]", &person.email).await;
    browser.click("#send-reset").await;
    browser.find("#reset-sent").await;
    let link = smtp.wait_for(&person.email, 1).await[0].link(&format!("{}/#/", app.base)).expect("link");
    let token = token_of(&link, "reset-password");
    browser.goto(&link).await;
    browser.find("form[aria-label='Choose a new password']").await;
    let address = browser.run("return location.href", vec![]).await;
    assert!(!address.as_str().expect("href").contains(&token), "the token left the address bar: {address}");
    let new_password = "a new password from the app";
    browser.type_into("form[aria-label='Choose a new password'] input[name=new-password]", new_password).await;
    browser.click("#save-password").await;
    browser.find("#password-reset").await;
    assert_eq!(app.sign_in(&person.email, &person.password).await.status, 401);
    browser.sign_in(&app.base, &person.email, new_password).await;
    browser.click("#sign-out").await;
    browser.find("form[aria-label='Sign in']").await;

    let email = format!("app-{}@example.com", uuid::Uuid::new_v4().simple());
    let signup = post(
        &app,
        "/auth/signup",
        json!({"email": email, "password": "app sign-up password", "organization_name": "Appco"}),
    )
    .await;
    assert_eq!(signup.status, 202);
    let link = smtp.wait_for(&email, 1).await[0].link(&format!("{}/#/", app.base)).expect("link");
    browser.goto(&link).await;
    browser.click("#confirm-signup").await;
    browser.find("#sign-out").await;
    browser.wait_text("header", &email).await;
    // The link works once: opened again, the page says so.
    browser.click("#sign-out").await;
    browser.find("form[aria-label='Sign in']").await;
    browser.goto(&link).await;
    browser.click("#confirm-signup").await;
    browser.wait_text("main", "used, expired or unknown").await;

    let plain = TestApp::spawn().await;
    browser.goto(&format!("{}/#/signin", plain.base)).await;
    browser.find("form[aria-label='Sign in']").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!browser.has("#forgot-password").await, "no reset without SMTP");
    browser.close().await;
}

/// The sender as notification channels will use it (`Mailer::deliver`: the outcome, retries included), and no
/// request waiting on SMTP: with a server that accepts connections and never speaks, asking for a reset and
/// inviting still answer at once.
#[tokio::test]
async fn mail_the_sender_reports_outcomes_and_a_silent_smtp_server_holds_no_request() {
    use hookflow_control_plane::mail::{MailError, Mailer, SmtpSettings};
    use tokio_util::sync::CancellationToken;
    let smtp = SmtpServer::start().await;
    let mailer = Mailer::start(&smtp.settings(), CancellationToken::new()).expect("mailer");
    mailer.deliver("ops@example.com", "A channel test", "Flow x is failing.\n".into()).await.expect("delivered");
    let mail = &smtp.wait_for("ops@example.com", 1).await[0];
    assert_eq!((mail.subject.as_str(), mail.body.trim_end()), ("[hookflow] A channel test", "Flow x is failing."));
    assert_eq!(mailer.deliver("not an address", "x", "y".into()).await, Err(MailError::Recipient));

    // Nothing listens: tried three times, then the reason.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = closed.local_addr().expect("address").port();
    drop(closed);
    let settings = SmtpSettings::parse(&format!("smtp://127.0.0.1:{port}"), Some("h@example.com"), None).expect("ok");
    let refused = Mailer::start(&settings, CancellationToken::new()).expect("mailer");
    let started = std::time::Instant::now();
    let outcome = refused.deliver("ops@example.com", "x", "y".into()).await;
    assert!(matches!(outcome, Err(MailError::Smtp(_))), "{outcome:?}");
    assert!(started.elapsed() >= Duration::from_secs(12), "retried after 2 s and 10 s: {:?}", started.elapsed());

    // A server that accepts and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = silent.local_addr().expect("address").port();
    let held = tokio::spawn(async move {
        let mut connections = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            connections.push(socket);
        }
    });
    let settings = SmtpSettings::parse(&format!("smtp://127.0.0.1:{port}"), Some("h@example.com"), None).expect("ok");
    let app = TestApp::spawn_with(move |s| s.smtp = Some(settings)).await;
    let person = app.user(false).await;
    let started = std::time::Instant::now();
    assert_eq!(post(&app, "/auth/password-reset", json!({"email": person.email})).await.status, 202);
    let invited = app
        .admin(Method::POST, "/organization/members", Some(json!({"email": "z@example.com", "role": "viewer"})))
        .await;
    assert_eq!(invited.status, 201);
    assert!(started.elapsed() < Duration::from_secs(2), "the answers waited on SMTP: {:?}", started.elapsed());
    held.abort();
}

/// Finding 7 of the attacker review: mail abuse. A server behind a proxy at 127.0.0.1 (`--trusted-proxies`), so each
/// request names its client in `X-Forwarded-For`.
async fn app_with_mail_behind_a_proxy(smtp: &SmtpServer, signup: bool) -> TestApp {
    let settings = smtp.settings();
    TestApp::spawn_with(move |s| {
        s.smtp = Some(settings);
        s.signup = signup;
        s.trusted_proxies =
            hookflow_control_plane::http::client_address::TrustedProxies::parse("127.0.0.1").expect("trusted proxies");
    })
    .await
}

/// A POST from `client` (as the trusted proxy forwards it).
async fn post_from(app: &TestApp, client: &str, path: &str, body: Value) -> u16 {
    let request = app.client.post(app.url(path)).header("x-forwarded-for", client).json(&body);
    request.send().await.expect("send").status().as_u16()
}

/// Waits until no more mail arrives to `to` for a while; answers how many came.
async fn settled_count(smtp: &SmtpServer, to: &str) -> usize {
    let mut count = smtp.to(to).len();
    loop {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let now = smtp.to(to).len();
        if now == count {
            return count;
        }
        count = now;
    }
}

#[tokio::test]
async fn mail_a_stranger_asking_for_resets_never_uses_up_the_owners_allowance() {
    let smtp = SmtpServer::start().await;
    let app = app_with_mail_behind_a_proxy(&smtp, false).await;
    let victim = app.user(false).await;
    let ask = json!({"email": victim.email});
    // The stranger asks again and again from one address (and its /64 for IPv6): three links, then none.
    for _ in 0..5 {
        assert_eq!(post_from(&app, "203.0.113.7", "/auth/password-reset", ask.clone()).await, 202);
    }
    for _ in 0..3 {
        assert_eq!(post_from(&app, "2001:db8:1:2::1", "/auth/password-reset", ask.clone()).await, 202);
        assert_eq!(post_from(&app, "2001:db8:1:2::ffff", "/auth/password-reset", ask.clone()).await, 202);
    }
    smtp.wait_for(&victim.email, 6).await;
    assert_eq!(settled_count(&smtp, &victim.email).await, 6, "three per requester (an IPv6 /64 is one requester)");
    // The owner, from their own address, still gets a link, and it works.
    assert_eq!(post_from(&app, "198.51.100.20", "/auth/password-reset", ask.clone()).await, 202);
    let mails = smtp.wait_for(&victim.email, 7).await;
    let link = mails[6].link(&format!("{}/#/", app.base)).expect("link");
    let confirm = json!({"token": token_of(&link, "reset-password"), "password": "the owner's new password"});
    assert_eq!(post(&app, "/auth/password-reset/confirm", confirm).await.status, 204);
    assert_eq!(app.sign_in(&victim.email, "the owner's new password").await.status, 201);
    // Strangers spread over many addresses flood the victim with at most 20 links per 30 minutes.
    for i in 1..=20 {
        assert_eq!(post_from(&app, &format!("192.0.2.{i}"), "/auth/password-reset", ask.clone()).await, 202);
    }
    smtp.wait_for(&victim.email, 20).await;
    assert_eq!(settled_count(&smtp, &victim.email).await, 20, "the per-account ceiling bounds the flood");
}

#[tokio::test]
async fn mail_a_stranger_signing_up_with_someones_email_never_uses_up_the_owners_confirmations() {
    let smtp = SmtpServer::start().await;
    let app = app_with_mail_behind_a_proxy(&smtp, true).await;
    let email = format!("owner-{}@example.com", uuid::Uuid::new_v4().simple());
    let sign_up = |password: &str| json!({"email": email, "password": password, "organization_name": "Mine"});
    for _ in 0..5 {
        assert_eq!(post_from(&app, "203.0.113.7", "/auth/signup", sign_up("the stranger's password")).await, 202);
    }
    smtp.wait_for(&email, 3).await;
    assert_eq!(settled_count(&smtp, &email).await, 3, "three per requester");
    assert_eq!(post_from(&app, "198.51.100.20", "/auth/signup", sign_up("the owner's own password")).await, 202);
    let mails = smtp.wait_for(&email, 4).await;
    let link = mails[3].link(&format!("{}/#/signup/confirm/", app.base)).expect("a confirmation link");
    let confirmed = post(&app, "/auth/signup/confirm", json!({"token": token_of(&link, "signup/confirm")})).await;
    assert_eq!(confirmed.status, 201, "{}", confirmed.text);
    assert_eq!(app.sign_in(&email, "the owner's own password").await.status, 201);
    assert_eq!(app.sign_in(&email, "the stranger's password").await.status, 401);
}

#[tokio::test]
async fn mail_invitations_past_the_organizations_budget_are_made_and_answered_but_not_mailed() {
    let smtp = SmtpServer::start().await;
    let app = app_with_mail(&smtp, false).await;
    let run = uuid::Uuid::new_v4().simple().to_string();
    let invite = |i: usize| json!({"email": format!("invitee{i}-{run}@example.com"), "role": "viewer"});
    for i in 0..50 {
        let invited = app.admin(Method::POST, "/organization/members", Some(invite(i))).await;
        assert_eq!((invited.status.as_u16(), &invited.body["mailed"]), (201, &json!(true)), "{}", invited.text);
    }
    // Withdrawing invitations does not give the budget back.
    let past = app.admin(Method::POST, "/organization/members", Some(invite(50))).await;
    assert_eq!(past.status, 201, "{}", past.text);
    assert_eq!(past.body["mailed"], false, "past the budget: not mailed");
    assert!(past.body["invite_url"].as_str().is_some_and(|u| u.contains("/#/invite/hfi_")), "{}", past.text);
    let id = past.body["invitation_id"].as_str().expect("invitation_id").to_owned();
    let path = format!("/organization/invitations/{id}");
    assert_eq!(app.admin(Method::DELETE, &path, None).await.status, 204);
    let again = app.admin(Method::POST, "/organization/members", Some(invite(51))).await;
    assert_eq!((again.status.as_u16(), &again.body["mailed"]), (201, &json!(false)), "{}", again.text);
    // The invitation past the budget is listed, and its link works like any other (invitations bind by token).
    let members = app.admin(Method::GET, "/organization/members?limit=100", None).await;
    assert!(members.text.contains(&format!("invitee51-{run}")), "{}", members.text);
    let person = app.user(false).await;
    let (bearer, _) = app.bearer(&person, None).await;
    let accepted = app.accept(&bearer, again.body["token"].as_str().expect("token")).await;
    assert_eq!(accepted.status, 201, "{}", accepted.text);
    // Another organization's budget is its own.
    let other = app.new_org("Other").await;
    let elsewhere = format!("elsewhere-{run}@example.com");
    let body = json!({"email": elsewhere, "role": "viewer"});
    let invited = app.call(Method::POST, "/organization/members", Some(&other), Some(body)).await;
    assert_eq!((invited.status.as_u16(), &invited.body["mailed"]), (201, &json!(true)), "{}", invited.text);
    smtp.wait_for(&elsewhere, 1).await;
    // Exactly the 50 within the budget reached the SMTP server.
    for i in 0..50 {
        smtp.wait_for(&format!("invitee{i}-{run}@example.com"), 1).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in [50, 51] {
        assert!(smtp.to(&format!("invitee{i}-{run}@example.com")).is_empty(), "invitation {i} was mailed");
    }
    let audit: Vec<String> = sqlx::query_scalar(
        "SELECT details->>'mailed' FROM audit_log WHERE action = 'member.invited' AND organization_id = $1",
    )
    .bind(app.admin.org)
    .fetch_all(&app.pool)
    .await
    .expect("audit");
    assert_eq!(audit.iter().filter(|m| *m == "true").count(), 50, "{audit:?}");
}
