//! Hardening III, findings 2, 11 and 12 over the real server: invitations bind by their one-time token, never by
//! the email a stranger can sign up with; inviting answers alike whether or not the email has an account and adds
//! nobody without consent; tokens work once and expire; members leave by themselves (the last owner cannot); and a
//! removed member's keys end, with the keys those keys made, for good.

use hookflow_shared::Role;
use hookflow_shared::api::admin::CreateApiKey;
use hookflow_shared::api::people::Signup;
use hookflow_tests::Credentials;
use hookflow_tests::TestApp;
use hookflow_tests::people::{Bearer, invitation_token};
use reqwest::Method;
use serde_json::{Value, json};

/// Finding 2: with `--signup`, a stranger signed up as an invited `cfo@...` and was at once admin of the inviting
/// organization. Now the stranger gets their own organization only; the link makes its holder a member, once.
#[tokio::test]
async fn people_invitation_binds_by_token_not_by_the_email_a_stranger_signs_up_with() {
    let app = TestApp::spawn_with(|s| s.signup = true).await;
    let invited = app
        .admin(Method::POST, "/organization/members", Some(json!({"email": "cfo@example.com", "role": "admin"})))
        .await;
    assert_eq!(invited.status, 201, "{}", invited.text);
    let token = invitation_token(&invited.body);
    assert!(token.starts_with("hfi_"), "{token}");
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM invitations WHERE token_hash = sha256(convert_to($1, 'UTF8'))")
            .bind(&token)
            .fetch_one(&app.pool)
            .await
            .expect("count");
    assert_eq!(stored, 1, "only the token's hash is stored");
    assert!(!invited.text.contains("password"));

    // The attack: sign up with the invited address.
    let signup = Signup {
        email: "cfo@example.com".parse().expect("an email"),
        password: "a stranger's password".into(),
        organization_name: "Mine".parse().expect("a name"),
    };
    let stranger = app.api_with(Credentials::None).people().signup(&signup).await.expect("sign up");
    let bearer = Bearer { token: stranger.access_token, org: Some(app.admin.org) };
    let session = app.call_bearer(Method::GET, "/auth/session", &bearer, None).await;
    let orgs = session.body["organizations"].as_array().expect("organizations");
    assert_eq!(orgs.len(), 1, "only the stranger's own organization: {}", session.text);
    assert_eq!(orgs[0]["name"], "Mine");
    let refused = app.call_bearer(Method::GET, "/organization/members", &bearer, None).await;
    assert_eq!((refused.status.as_u16(), refused.code()), (403, "organization_mismatch"), "{}", refused.text);
    // Signing in again binds nothing either.
    let again = app.sign_in("cfo@example.com", "a stranger's password").await;
    let bearer = Bearer { token: again.body["access_token"].as_str().expect("token").into(), org: Some(app.admin.org) };
    assert_eq!(app.call_bearer(Method::GET, "/flows", &bearer, None).await.status, 403);

    // The person the link was shared with accepts it; it works once.
    let cfo = app.user(false).await;
    let (cfo_bearer, _) = app.bearer(&cfo, Some(app.admin.org)).await;
    let accepted = app.accept(&cfo_bearer, &token).await;
    assert_eq!(accepted.status, 201, "{}", accepted.text);
    assert_eq!((&accepted.body["id"], &accepted.body["role"]), (&json!(app.admin.org), &json!("admin")));
    assert_eq!(app.call_bearer(Method::GET, "/organization/members", &cfo_bearer, None).await.status, 200);
    let reused = app.accept(&bearer, &token).await;
    reused.assert_refused(404, "not_found", "invitation");
    // Garbage, a well-formed unknown token, and an expired one answer the same 404; no token, 401.
    app.accept(&bearer, "hfi_nonsense").await.assert_refused(404, "not_found", "invitation");
    let unknown = hookflow_shared::token::TokenKind::Invitation.assemble(&[9u8; 32]);
    app.accept(&bearer, &unknown).await.assert_refused(404, "not_found", "invitation");
    let expiring = app.invite("late@example.com", Role::Viewer).await;
    sqlx::query("UPDATE invitations SET expires_at = now() - interval '1 second' WHERE email = 'late@example.com'")
        .execute(&app.pool)
        .await
        .expect("expire");
    app.accept(&bearer, &expiring).await.assert_refused(404, "not_found", "invitation");
    let listed: Value = app.get("/organization/members", 200).await;
    let late = listed["items"].as_array().expect("items").iter().find(|m| m["email"] == "late@example.com").cloned();
    assert_eq!(late.expect("listed")["status"], "expired");
    let fresh = app.invite("late@example.com", Role::Viewer).await;
    assert_eq!(app.accept(&bearer, &fresh).await.status, 201, "an expired invitation makes way for a new one");
    let anonymous = app.api_with(Credentials::None).people().accept_invitation(&token).await;
    assert_eq!(anonymous.expect_err("no person").status(), 401);
    // Neither the token nor its link is in the audit log.
    let audit = app.admin(Method::GET, "/audit-log", None).await;
    assert!(!audit.text.contains(&token) && !audit.text.contains("hfi_"), "{}", audit.text);
    assert!(audit.text.contains("invitation.accepted"));
}

/// Finding 12: adding a member told whether the email had an account and added an existing user without consent;
/// a member could not leave.
#[tokio::test]
async fn people_inviting_answers_alike_adds_nobody_and_members_leave() {
    let app = TestApp::spawn().await;
    let existing = app.user(false).await;
    let shape = |reply: &hookflow_tests::Reply| {
        let mut keys: Vec<String> = reply.body.as_object().expect("object").keys().cloned().collect();
        keys.sort();
        (reply.status.as_u16(), keys, reply.body["status"].clone(), reply.body["role"].clone())
    };
    let with_account = app
        .admin(Method::POST, "/organization/members", Some(json!({"email": existing.email, "role": "member"})))
        .await;
    let without = app
        .admin(Method::POST, "/organization/members", Some(json!({"email": "nobody@example.com", "role": "member"})))
        .await;
    assert_eq!(shape(&with_account), shape(&without), "{} / {}", with_account.text, without.text);
    assert!(with_account.body.get("user_id").is_none());
    // Not a member until they accept.
    let (bearer, _) = app.bearer(&existing, Some(app.admin.org)).await;
    let before = app.call_bearer(Method::GET, "/flows", &bearer, None).await;
    assert_eq!((before.status.as_u16(), before.code()), (403, "organization_mismatch"));
    assert_eq!(app.accept(&bearer, &invitation_token(&with_account.body)).await.status, 201);
    assert_eq!(app.call_bearer(Method::GET, "/flows", &bearer, None).await.status, 200);

    // A member leaves by themselves; the last owner cannot; a key is no member.
    let left = app.call_bearer(Method::DELETE, "/organization/membership", &bearer, None).await;
    assert_eq!(left.status, 204, "{}", left.text);
    assert_eq!(app.call_bearer(Method::GET, "/flows", &bearer, None).await.code(), "organization_mismatch");
    let owner = app.person(app.admin.org, Role::Owner).await;
    let (owner_bearer, _) = app.bearer(&owner, Some(app.admin.org)).await;
    let refused = app.call_bearer(Method::DELETE, "/organization/membership", &owner_bearer, None).await;
    refused.assert_refused(409, "conflict", "last owner");
    let by_key = app.api().people().leave().await.expect_err("a key is no member");
    by_key.assert_refused(403, "insufficient_scope", "API key");
    let audit = app.api().organization().audit_log(&[]).await.expect("audit log");
    assert!(audit.items.iter().any(|e| e.action == "member.left"), "{audit:?}");
}

/// Finding 11: keys made by a removed member were only suspended, and re-adding the person revived them. Removing
/// a member now deletes their keys and the keys those keys made, in the removal's transaction.
#[tokio::test]
async fn people_removing_a_member_ends_their_keys_and_the_keys_those_made() {
    let app = TestApp::spawn().await;
    let org = app.admin.org;
    let admin = app.person(org, Role::Admin).await;
    let (bearer, _) = app.bearer(&admin, Some(org)).await;
    let made = app
        .call_bearer(
            Method::POST,
            "/api-keys",
            &bearer,
            Some(json!({"name": "mine", "scopes": ["keys:write", "flows:read"]})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.text);
    let first = hookflow_tests::Creds { key: made.body["key"].as_str().expect("key").into(), org };
    let by_mine = CreateApiKey {
        scopes: Some(vec!["flows:read".into()]),
        ..CreateApiKey::new("made by mine".parse().expect("a name"))
    };
    let grand = app.api_as(&first).keys().create(&by_mine).await.expect("create");
    let second = hookflow_tests::Creds { key: grand.key.clone(), org };
    let operator_key = app.creds_with(&["flows:read"]).await;
    for creds in [&first, &second, &operator_key] {
        app.api_as(creds).flows().list(&[]).await.expect("a working key");
    }

    // Before being removed, the admin invites another account of their own and keeps the link.
    let alternate = app.user(false).await;
    let kept = json!({"email": alternate.email, "role": "admin"});
    let kept = app.call_bearer(Method::POST, "/organization/members", &bearer, Some(kept)).await;
    assert_eq!(kept.status, 201, "{}", kept.text);
    let kept_token = kept.body["token"].as_str().expect("token").to_owned();

    app.delete(&format!("/organization/members/{}", admin.user_id), 204).await;
    let (alternate_bearer, _) = app.bearer(&alternate, None).await;
    let comeback = app.accept(&alternate_bearer, &kept_token).await;
    assert_eq!(comeback.status, 404, "a kept link brings the removed admin back: {}", comeback.text);
    let grand_id = grand.record.id.to_string();
    let ids = [made.body["id"].as_str().expect("id"), grand_id.as_str()];
    for id in ids {
        assert_eq!(app.rows(&format!("api_keys WHERE id = '{id}'")).await, 0, "key {id} ended with the removal");
    }
    // Back in the organization, the person finds none of those keys working again.
    let token = app.invite(&admin.email, Role::Admin).await;
    assert_eq!(app.accept(&bearer, &token).await.status, 201);
    for creds in [&first, &second] {
        assert_eq!(app.api_as(creds).flows().list(&[]).await.expect_err("an ended key").status(), 401);
    }
    app.api_as(&operator_key).flows().list(&[]).await.expect("others' keys stay");
    let audit = app.api().organization().audit_log(&[]).await.expect("audit log");
    let removed = audit.items.iter().find(|e| e.action == "member.removed").expect("recorded");
    assert_eq!(removed.details["keys_ended"], 2);
    assert_eq!(removed.details["invitations_withdrawn"], 1);
}
