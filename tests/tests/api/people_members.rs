//! Organizations, members and roles over the real server: organizations people create, invitations accepted by
//! token, role changes and the last-owner rule, removal taking the member's keys with it, keys that never outrank
//! their maker's role, cross-organization 404s, and the role x operation matrix of API.md section 1.

use hookflow_shared::api::webhooks::CreateWebhook;
use hookflow_shared::{OrgId, Role, Scope};
use hookflow_tests::Credentials;
use hookflow_tests::TestApp;
use hookflow_tests::people::Bearer;
use reqwest::Method;
use serde_json::json;
use uuid::Uuid;

/// One scenario: an owner builds a team, changes roles, and removes a member with the keys they made.
#[tokio::test]
async fn members_invitations_roles_and_the_last_owner() {
    let app = TestApp::spawn().await;
    let founder = app.user(false).await;
    let (signed_in, _) = app.bearer(&founder, None).await;
    let created = app.call_bearer(Method::POST, "/organizations", &signed_in, Some(json!({"name": "Team"}))).await;
    assert_eq!((created.status.as_u16(), &created.body["role"]), (201, &json!("owner")), "{}", created.text);
    let org: OrgId = created.body["id"].as_str().expect("id").parse().expect("uuid");
    let owner = Bearer { org: Some(org), ..signed_in };

    // Everyone is invited, an existing person too, and joins by accepting the link.
    let colleague = app.user(false).await;
    let add = |email: &str, role: &str| json!({"email": email, "role": role});
    let added =
        app.call_bearer(Method::POST, "/organization/members", &owner, Some(add(&colleague.email, "admin"))).await;
    assert_eq!((added.status.as_u16(), &added.body["status"]), (201, &json!("invited")), "{}", added.text);
    let again =
        app.call_bearer(Method::POST, "/organization/members", &owner, Some(add(&colleague.email, "viewer"))).await;
    assert_eq!(again.status, 409);
    let (colleague_bearer, _) = app.bearer(&colleague, None).await;
    let accepted = app.accept(&colleague_bearer, &hookflow_tests::people::invitation_token(&added.body)).await;
    assert_eq!((accepted.status.as_u16(), &accepted.body["role"]), (201, &json!("admin")), "{}", accepted.text);
    let again =
        app.call_bearer(Method::POST, "/organization/members", &owner, Some(add(&colleague.email, "viewer"))).await;
    assert_eq!(again.status, 409, "a member already");
    let invited =
        app.call_bearer(Method::POST, "/organization/members", &owner, Some(add("Later@Example.com", "member"))).await;
    assert_eq!((invited.status.as_u16(), &invited.body["status"]), (201, &json!("invited")));
    assert_eq!(invited.body["email"], "later@example.com");
    let members = app.call_bearer(Method::GET, "/organization/members", &owner, None).await;
    let emails: Vec<&str> =
        members.body["items"].as_array().expect("items").iter().filter_map(|m| m["email"].as_str()).collect();
    assert_eq!(emails.len(), 3, "{emails:?}");
    // The invited person appears (here, made by the operator): nothing binds by email, the link does.
    let hash = hookflow_control_plane::api::people::passwords::hash("later's password".into()).await.expect("hash");
    let mut conn = app.pool.acquire().await.expect("connection");
    let later = hookflow_control_plane::api::people::store::create_user(&mut conn, "later@example.com", &hash, false)
        .await
        .expect("user");
    let later_person = hookflow_tests::people::Person {
        user_id: later,
        email: "later@example.com".into(),
        password: "later's password".into(),
    };
    let (later_bearer, _) = app.bearer(&later_person, Some(org)).await;
    assert_eq!(app.call_bearer(Method::GET, "/flows", &later_bearer, None).await.code(), "organization_mismatch");
    let joined = app.accept(&later_bearer, &hookflow_tests::people::invitation_token(&invited.body)).await;
    assert_eq!(joined.status, 201, "{}", joined.text);
    assert_eq!(app.call_bearer(Method::GET, "/flows", &later_bearer, None).await.status, 200);

    // Only an owner grants the owner role; an admin cannot, nor take it away.
    let (admin, _) = app.bearer(&colleague, Some(org)).await;
    let denied = app
        .call_bearer(Method::PATCH, &format!("/organization/members/{later}"), &admin, Some(json!({"role": "owner"})))
        .await;
    assert_eq!((denied.status.as_u16(), denied.code()), (403, "insufficient_scope"));
    let denied =
        app.call_bearer(Method::DELETE, &format!("/organization/members/{}", founder.user_id), &admin, None).await;
    assert_eq!(denied.status, 403);
    // The last owner can neither be demoted nor leave.
    let path = format!("/organization/members/{}", founder.user_id);
    let demote = app.call_bearer(Method::PATCH, &path, &owner, Some(json!({"role": "admin"}))).await;
    assert_eq!(demote.status, 409, "{}", demote.text);
    assert_eq!(app.call_bearer(Method::DELETE, &path, &owner, None).await.status, 409);
    let promoted = app
        .call_bearer(
            Method::PATCH,
            &format!("/organization/members/{}", colleague.user_id),
            &owner,
            Some(json!({"role": "owner"})),
        )
        .await;
    assert_eq!((promoted.status.as_u16(), &promoted.body["role"]), (200, &json!("owner")));
    assert_eq!(
        app.call_bearer(Method::PATCH, &path, &owner, Some(json!({"role": "admin"}))).await.status,
        200,
        "two owners now"
    );

    // A member's keys work while they are a member, within their role, and stop with the membership.
    let key =
        app.call_bearer(Method::POST, "/api-keys", &admin, Some(json!({"name": "mine", "preset": "read-only"}))).await;
    assert_eq!(key.status, 201, "{}", key.text);
    let creds = hookflow_tests::Creds { key: key.body["key"].as_str().expect("key").into(), org };
    app.api_as(&creds).flows().list(&[]).await.expect("the member's key works");
    // The colleague, an owner now, makes the founder an owner again; the founder then removes the colleague.
    let founder_path = format!("/organization/members/{}", founder.user_id);
    assert_eq!(app.call_bearer(Method::PATCH, &founder_path, &admin, Some(json!({"role": "owner"}))).await.status, 200);
    let founder_bearer = Bearer { org: Some(org), ..app.bearer(&founder, None).await.0 };
    let removed = app
        .call_bearer(Method::DELETE, &format!("/organization/members/{}", colleague.user_id), &founder_bearer, None)
        .await;
    assert_eq!(removed.status, 204, "{}", removed.text);
    let left = app.api_as(&creds).flows().list(&[]).await.expect_err("the key left with its maker");
    assert_eq!(left.status(), 401, "the key left with its maker");
    let gone = app.call_bearer(Method::GET, "/flows", &admin, None).await;
    assert_eq!((gone.status.as_u16(), gone.code()), (403, "organization_mismatch"));
    let audit = app.call_bearer(Method::GET, "/audit-log", &founder_bearer, None).await;
    let actions: Vec<&str> =
        audit.body["items"].as_array().expect("items").iter().filter_map(|e| e["action"].as_str()).collect();
    for action in
        ["invitation.accepted", "member.invited", "member.role_changed", "member.removed", "organization.created"]
    {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }

    // Another organization's members are not this one's: 404.
    let stranger = app.person(app.admin.org, Role::Member).await;
    let path = format!("/organization/members/{}", stranger.user_id);
    assert_eq!(
        app.call_bearer(Method::PATCH, &path, &founder_bearer, Some(json!({"role": "viewer"}))).await.status,
        404
    );
    assert_eq!(app.call_bearer(Method::DELETE, &path, &founder_bearer, None).await.status, 404);
    // A bound invitation is gone (it became a membership); a pending one can be withdrawn.
    let bound = invited.body["invitation_id"].as_str().expect("invitation id");
    let path = format!("/organization/invitations/{bound}");
    assert_eq!(app.call_bearer(Method::DELETE, &path, &founder_bearer, None).await.status, 404);
    let pending = app
        .call_bearer(Method::POST, "/organization/members", &founder_bearer, Some(add("soon@example.com", "viewer")))
        .await;
    let path = format!("/organization/invitations/{}", pending.body["invitation_id"].as_str().expect("id"));
    assert_eq!(app.call_bearer(Method::DELETE, &path, &founder_bearer, None).await.status, 204);
}

#[tokio::test]
async fn keys_never_outrank_their_makers_role() {
    let app = TestApp::spawn().await;
    let person = app.person(app.admin.org, Role::Admin).await;
    let (bearer, _) = app.bearer(&person, Some(app.admin.org)).await;
    let all: Vec<&str> = Scope::ALL.iter().map(|s| s.as_str()).collect();
    let key =
        app.call_bearer(Method::POST, "/api-keys", &bearer, Some(json!({"name": "everything", "scopes": all}))).await;
    assert_eq!(key.status, 201, "{}", key.text);
    let creds = hookflow_tests::Creds { key: key.body["key"].as_str().expect("key").into(), org: app.admin.org };
    let as_key = app.api_as(&creds);
    let write = CreateWebhook::new("hook".parse().expect("a name"));
    as_key.webhooks().create(&write).await.expect("create");
    // Demoted to viewer: the key now grants the viewer's scopes only.
    app.patch::<serde_json::Value>(
        &format!("/organization/members/{}", person.user_id),
        &json!({"role": "viewer"}),
        200,
    )
    .await;
    let refused = as_key.webhooks().create(&write).await.expect_err("a viewer's key");
    assert_eq!((refused.status(), refused.code()), (403, "insufficient_scope"));
    as_key.webhooks().list(&[]).await.expect("a viewer reads");
    // A member cannot make keys at all (no keys:write), and a key made by the member's key cannot outlive them.
    let member = app.person(app.admin.org, Role::Member).await;
    let (member_bearer, _) = app.bearer(&member, Some(app.admin.org)).await;
    let refused =
        app.call_bearer(Method::POST, "/api-keys", &member_bearer, Some(json!({"name": "x", "preset": "ci"}))).await;
    assert_eq!(refused.code(), "insufficient_scope");
}

/// The scope every operation of the API needs (API.md section 2), written from the contract's tables.
const OPERATIONS: &[(&str, &str, Option<Scope>)] = &[
    ("GET", "/permissions", None),
    ("POST", "/api-keys", Some(Scope::KeysWrite)),
    ("GET", "/api-keys", Some(Scope::KeysRead)),
    ("GET", "/api-keys/{id}", Some(Scope::KeysRead)),
    ("DELETE", "/api-keys/{id}", Some(Scope::KeysWrite)),
    ("GET", "/organization", Some(Scope::OrganizationRead)),
    ("GET", "/organization/usage", Some(Scope::OrganizationRead)),
    ("PATCH", "/organization", Some(Scope::OrganizationWrite)),
    ("GET", "/organization/members", Some(Scope::OrganizationRead)),
    ("POST", "/organization/members", Some(Scope::OrganizationWrite)),
    ("PATCH", "/organization/members/{user_id}", Some(Scope::OrganizationWrite)),
    ("DELETE", "/organization/members/{user_id}", Some(Scope::OrganizationWrite)),
    ("DELETE", "/organization/invitations/{id}", Some(Scope::OrganizationWrite)),
    ("GET", "/audit-log", Some(Scope::OrganizationRead)),
    ("POST", "/webhooks", Some(Scope::WebhooksWrite)),
    ("GET", "/webhooks", Some(Scope::WebhooksRead)),
    ("GET", "/webhooks/{id}", Some(Scope::WebhooksRead)),
    ("PATCH", "/webhooks/{id}", Some(Scope::WebhooksWrite)),
    ("DELETE", "/webhooks/{id}", Some(Scope::WebhooksWrite)),
    ("GET", "/webhooks/{id}/requests", Some(Scope::WebhooksRead)),
    ("POST", "/webhooks/{id}/requests/search", Some(Scope::WebhooksRead)),
    ("GET", "/webhooks/{id}/requests/{request_id}", Some(Scope::WebhooksRead)),
    ("GET", "/webhooks/{id}/requests/{request_id}/body", Some(Scope::WebhooksRead)),
    ("DELETE", "/webhooks/{id}/requests/{request_id}", Some(Scope::WebhooksWrite)),
    ("DELETE", "/webhooks/{id}/requests", Some(Scope::WebhooksWrite)),
    ("POST", "/webhooks/{id}/requests/{request_id}/replay", Some(Scope::WebhooksWrite)),
    ("POST", "/webhooks/{id}/requests/{request_id}/verify", Some(Scope::WebhooksRead)),
    ("POST", "/webhooks/{id}/rules/test", Some(Scope::WebhooksRead)),
    ("GET", "/webhooks/{id}/requests/export", Some(Scope::WebhooksRead)),
    ("GET", "/webhooks/{id}/analytics/volume", Some(Scope::WebhooksRead)),
    ("GET", "/webhooks/{id}/analytics/methods", Some(Scope::WebhooksRead)),
    ("GET", "/analytics/overview", Some(Scope::WebhooksRead)),
    ("GET", "/extractors", None),
    ("POST", "/extractors/evaluate", None),
    ("GET", "/assertions/operators", None),
    ("POST", "/assertions/evaluate", None),
    ("GET", "/special-nodes", None),
    ("GET", "/secrets", Some(Scope::ResourcesRead)),
    ("PUT", "/secrets/{name}", Some(Scope::ResourcesWrite)),
    ("DELETE", "/secrets/{name}", Some(Scope::ResourcesWrite)),
    ("GET", "/variables", Some(Scope::ResourcesRead)),
    ("PUT", "/variables/{name}", Some(Scope::ResourcesWrite)),
    ("DELETE", "/variables/{name}", Some(Scope::ResourcesWrite)),
    ("GET", "/flows", Some(Scope::FlowsRead)),
    ("POST", "/flows", Some(Scope::FlowsWrite)),
    ("POST", "/flows/search", Some(Scope::FlowsRead)),
    ("GET", "/flows/tags", Some(Scope::FlowsRead)),
    ("GET", "/flows/{id}", Some(Scope::FlowsRead)),
    ("PUT", "/flows/{id}", Some(Scope::FlowsWrite)),
    ("PATCH", "/flows/{id}", Some(Scope::FlowsWrite)),
    ("DELETE", "/flows/{id}", Some(Scope::FlowsWrite)),
    ("POST", "/flows/{id}/validate", Some(Scope::FlowsRead)),
    ("POST", "/flows/validate", Some(Scope::FlowsRead)),
    ("POST", "/flows/{id}/publish", Some(Scope::FlowsWrite)),
    ("GET", "/flows/{id}/versions", Some(Scope::FlowsRead)),
    ("GET", "/flows/{id}/versions/{version_id}", Some(Scope::FlowsRead)),
    ("POST", "/flows/{id}/versions/{version_id}/restore", Some(Scope::FlowsWrite)),
    ("GET", "/flows/{id}/environments", Some(Scope::FlowsRead)),
    ("PUT", "/flows/{id}/environments/{key}", Some(Scope::FlowsWrite)),
    ("DELETE", "/flows/{id}/environments/{key}", Some(Scope::FlowsWrite)),
    ("GET", "/flows/{id}/export", Some(Scope::FlowsRead)),
    ("POST", "/flows/import", Some(Scope::FlowsWrite)),
    ("POST", "/flows/{id}/launch", Some(Scope::FlowsExecute)),
    ("POST", "/flows/launch", Some(Scope::FlowsExecute)),
    ("GET", "/flows/{id}/executions", Some(Scope::FlowsRead)),
    ("GET", "/flows/{flow_id}/executions/{execution_id}", Some(Scope::FlowsRead)),
    ("GET", "/flows/{flow_id}/executions/{execution_id}/nodes", Some(Scope::FlowsRead)),
    ("GET", "/flows/{flow_id}/executions/{execution_id}/captures", Some(Scope::FlowsRead)),
    ("POST", "/flows/{flow_id}/executions/{execution_id}/cancel", Some(Scope::FlowsExecute)),
    ("POST", "/flows/{flow_id}/try", Some(Scope::FlowsExecute)),
    ("POST", "/executions", Some(Scope::FlowsExecute)),
    ("GET", "/executions", Some(Scope::FlowsRead)),
    ("GET", "/executions/{execution_id}", Some(Scope::FlowsRead)),
    ("GET", "/executions/{execution_id}/nodes", Some(Scope::FlowsRead)),
    ("GET", "/executions/{execution_id}/captures", Some(Scope::FlowsRead)),
    ("POST", "/executions/{execution_id}/cancel", Some(Scope::FlowsExecute)),
    ("GET", "/batches/{id}", Some(Scope::FlowsRead)),
    ("GET", "/batches/{id}/executions", Some(Scope::FlowsRead)),
    ("POST", "/batches/{id}/rerun", Some(Scope::FlowsExecute)),
    ("GET", "/runner/pools", Some(Scope::RunnersRead)),
    ("GET", "/runner/pools/{pool}", Some(Scope::RunnersRead)),
    ("GET", "/flows/{id}/analytics/executions", Some(Scope::FlowsRead)),
    ("POST", "/flows/{id}/schedules", Some(Scope::FlowsWrite)),
    ("GET", "/flows/{id}/schedules", Some(Scope::FlowsRead)),
    ("GET", "/flows/{id}/schedules/{schedule_id}", Some(Scope::FlowsRead)),
    ("PATCH", "/flows/{id}/schedules/{schedule_id}", Some(Scope::FlowsWrite)),
    ("DELETE", "/flows/{id}/schedules/{schedule_id}", Some(Scope::FlowsWrite)),
    ("POST", "/schedules/preview", Some(Scope::FlowsRead)),
    ("POST", "/webhooks/{id}/destinations", Some(Scope::WebhooksWrite)),
    ("GET", "/webhooks/{id}/destinations", Some(Scope::WebhooksRead)),
    ("GET", "/webhooks/{id}/destinations/{destination_id}", Some(Scope::WebhooksRead)),
    ("PATCH", "/webhooks/{id}/destinations/{destination_id}", Some(Scope::WebhooksWrite)),
    ("DELETE", "/webhooks/{id}/destinations/{destination_id}", Some(Scope::WebhooksWrite)),
    ("GET", "/webhooks/{id}/destinations/{destination_id}/deliveries", Some(Scope::WebhooksRead)),
    ("GET", "/webhooks/{id}/destinations/{destination_id}/deliveries/{delivery_id}", Some(Scope::WebhooksRead)),
    (
        "GET",
        "/webhooks/{id}/destinations/{destination_id}/deliveries/{delivery_id}/attempts",
        Some(Scope::WebhooksRead),
    ),
    ("POST", "/webhooks/{id}/destinations/{destination_id}/deliveries/replay", Some(Scope::WebhooksWrite)),
    ("POST", "/notification-channels", Some(Scope::OrganizationWrite)),
    ("GET", "/notification-channels", Some(Scope::OrganizationRead)),
    ("GET", "/notification-channels/{channel_id}", Some(Scope::OrganizationRead)),
    ("PATCH", "/notification-channels/{channel_id}", Some(Scope::OrganizationWrite)),
    ("DELETE", "/notification-channels/{channel_id}", Some(Scope::OrganizationWrite)),
    ("POST", "/notification-channels/{channel_id}/test", Some(Scope::OrganizationWrite)),
    ("POST", "/alert-rules", Some(Scope::OrganizationWrite)),
    ("GET", "/alert-rules", Some(Scope::OrganizationRead)),
    ("DELETE", "/alert-rules/{rule_id}", Some(Scope::OrganizationWrite)),
    ("GET", "/alerts", Some(Scope::OrganizationRead)),
    ("GET", "/runners", Some(Scope::RunnersRead)),
    ("GET", "/runners/{id}", Some(Scope::RunnersRead)),
    ("DELETE", "/runners/{id}", Some(Scope::RunnersWrite)),
    ("POST", "/runners", Some(Scope::RunnerComplete)),
    ("POST", "/runners/{id}/heartbeat", Some(Scope::RunnerComplete)),
    ("GET", "/collections", Some(Scope::CollectionsRead)),
    ("POST", "/collections", Some(Scope::CollectionsWrite)),
    ("GET", "/collections/{id}", Some(Scope::CollectionsRead)),
    ("PATCH", "/collections/{id}", Some(Scope::CollectionsWrite)),
    ("DELETE", "/collections/{id}", Some(Scope::CollectionsWrite)),
    ("GET", "/collections/{id}/requests", Some(Scope::CollectionsRead)),
    ("POST", "/collections/{id}/requests", Some(Scope::CollectionsWrite)),
    ("GET", "/collections/{id}/requests/{request_id}", Some(Scope::CollectionsRead)),
    ("PUT", "/collections/{id}/requests/{request_id}", Some(Scope::CollectionsWrite)),
    ("DELETE", "/collections/{id}/requests/{request_id}", Some(Scope::CollectionsWrite)),
    ("POST", "/collections/import/openapi", Some(Scope::CollectionsWrite)),
    ("POST", "/collections/import", Some(Scope::CollectionsWrite)),
    ("POST", "/collections/import/preview", Some(Scope::CollectionsWrite)),
    // Also needs `collections:read`, which every role holding `webhooks:write` has.
    ("POST", "/collections/{id}/mock", Some(Scope::WebhooksWrite)),
    ("GET", "/collections/{id}/openapi-sync", Some(Scope::CollectionsRead)),
    ("PUT", "/collections/{id}/openapi-sync", Some(Scope::CollectionsWrite)),
    ("POST", "/collections/{id}/openapi-sync/preview", Some(Scope::CollectionsRead)),
    ("POST", "/collections/{id}/openapi-sync", Some(Scope::CollectionsWrite)),
    // Last: every role but the only owner leaves here.
    ("DELETE", "/organization/membership", None),
];

/// Operations not in the matrix, with why: they are not an organization's scoped operations.
const OUTSIDE: &[&str] = &[
    "/auth/",
    "/.well-known/",
    "POST /organizations",
    "/webhook/{id}",
    "/runner/jobs/",
    "/runner/deliveries/",
    "/runner/deregister",
    "/webhooks/{id}/stream",
    "/executions/{execution_id}/stream",
];

/// One scenario: every operation of the served document, called with each role: allowed or 403.
#[tokio::test]
async fn every_operation_answers_each_role_as_section_1_says() {
    let app = TestApp::spawn().await;
    let document: serde_json::Value =
        app.api_with(Credentials::None).get("/openapi.json").await.expect("the served document");
    let mut documented = Vec::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("item").keys() {
            let op = format!("{} {path}", method.to_uppercase());
            if !OUTSIDE.iter().any(|o| op.contains(o)) {
                documented.push(op);
            }
        }
    }
    let listed: Vec<String> = OPERATIONS.iter().map(|(m, p, _)| format!("{m} {p}")).collect();
    documented.sort();
    let mut expected = listed.clone();
    expected.sort();
    assert_eq!(documented, expected, "the matrix covers exactly the document's scoped operations");

    for role in Role::ALL {
        let person = app.person(app.admin.org, role).await;
        let (bearer, _) = app.bearer(&person, Some(app.admin.org)).await;
        for (method, path, scope) in OPERATIONS {
            let path = path
                .replace("{id}", &Uuid::now_v7().to_string())
                .replace("{user_id}", &Uuid::now_v7().to_string())
                .replace("{request_id}", &Uuid::now_v7().to_string())
                .replace("{version_id}", &Uuid::now_v7().to_string())
                .replace("{flow_id}", &Uuid::now_v7().to_string())
                .replace("{execution_id}", &Uuid::now_v7().to_string())
                .replace("{schedule_id}", &Uuid::now_v7().to_string())
                .replace("{destination_id}", &Uuid::now_v7().to_string())
                .replace("{delivery_id}", &Uuid::now_v7().to_string())
                .replace("{channel_id}", &Uuid::now_v7().to_string())
                .replace("{rule_id}", &Uuid::now_v7().to_string())
                .replace("{name}", "NAME")
                .replace("{key}", "dev");
            let reply = app
                .call_bearer(Method::from_bytes(method.as_bytes()).expect("method"), &path, &bearer, Some(json!({})))
                .await;
            let allowed = scope.is_none_or(|s| role.scopes().grants(s));
            if allowed {
                assert_ne!(reply.code(), "insufficient_scope", "{role} may {method} {path}: {}", reply.text);
                assert!(reply.status != 401 && reply.status != 403, "{role} {method} {path}: {}", reply.text);
            } else {
                assert_eq!(
                    (reply.status.as_u16(), reply.code()),
                    (403, "insufficient_scope"),
                    "{role} {method} {path}"
                );
            }
        }
    }
}

/// Finding 3 of Hardening III: members held `runner:complete`, registered a "runner" with a label of their own and
/// took a claim carrying a `runners_only` secret. No person acts as a runner now; owners and admins still make
/// runner keys (the `runner` preset) for the machines they place, members and viewers cannot.
#[tokio::test]
async fn people_are_not_runners_and_only_owners_and_admins_make_runner_keys() {
    let app = TestApp::spawn().await;
    let org = app.admin.org;
    let runner = json!({"name": "laptop", "labels": ["mine"], "version": "x", "max_concurrency": 1,
        "host": {"hostname": "h", "os": "linux", "arch": "x86_64", "cpus": 1, "memory_bytes": 1}});
    let runner_key = json!({"name": "runner", "preset": "runner"});
    for role in [Role::Member, Role::Viewer] {
        let (bearer, _) = app.bearer(&app.person(org, role).await, Some(org)).await;
        let registered = app.call_bearer(Method::POST, "/runners", &bearer, Some(runner.clone())).await;
        assert_eq!((registered.status.as_u16(), registered.code()), (403, "insufficient_scope"), "{role}");
        let poll = json!({"runner_id": Uuid::now_v7(), "wait_s": 0});
        let claimed = app.call_bearer(Method::POST, "/runner/jobs/next", &bearer, Some(poll)).await;
        assert_eq!(claimed.status, 403, "{role}: {}", claimed.text);
        let key = app.call_bearer(Method::POST, "/api-keys", &bearer, Some(runner_key.clone())).await;
        assert_eq!(key.status, 403, "{role} made a runner key: {}", key.text);
    }
    // A member's key with keys:write cannot exist, and a member's own keys never gain runner:complete either.
    let member = app.person(org, Role::Member).await;
    let (bearer, _) = app.bearer(&member, Some(org)).await;
    let smuggled = json!({"name": "sneaky", "scopes": ["flows:read", "runner:complete"]});
    let refused = app.call_bearer(Method::POST, "/api-keys", &bearer, Some(smuggled)).await;
    assert_eq!((refused.status.as_u16(), refused.code()), (403, "insufficient_scope"), "{}", refused.text);

    for role in [Role::Owner, Role::Admin] {
        let (bearer, _) = app.bearer(&app.person(org, role).await, Some(org)).await;
        let registered = app.call_bearer(Method::POST, "/runners", &bearer, Some(runner.clone())).await;
        assert_eq!(registered.status, 403, "{role} acting as a runner: {}", registered.text);
        let key = app.call_bearer(Method::POST, "/api-keys", &bearer, Some(runner_key.clone())).await;
        assert_eq!(key.status, 201, "{role}: {}", key.text);
        let creds = hookflow_tests::Creds { key: key.body["key"].as_str().expect("key").to_owned(), org };
        app.register_runner(&creds, &["placed"]).await;
    }
}
