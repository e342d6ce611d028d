//! People in the tests: users made straight in the database (with a known password), sign-in over the API,
//! requests sent with a person's bearer token, and invitations sent and accepted over the API.

use crate::app::{Reply, TestApp, read};
use hookflow_control_plane::api::people::{passwords, signup, store};
use hookflow_shared::api::people::AddMember;
use hookflow_shared::{OrgId, Role, UserId};
use reqwest::Method;
use serde_json::{Value, json};
use uuid::Uuid;

/// A person with a password, and (once signed in) their tokens.
#[derive(Debug, Clone)]
pub struct Person {
    pub user_id: UserId,
    pub email: String,
    pub password: String,
}

/// A signed-in person's access token, sent with an organization (or none).
#[derive(Debug, Clone)]
pub struct Bearer {
    pub token: String,
    pub org: Option<OrgId>,
}

impl Bearer {
    /// As the typed client sends it.
    pub fn credentials(&self) -> hookflow_client::Credentials {
        hookflow_client::Credentials::bearer(self.token.clone(), self.org)
    }
}

impl TestApp {
    /// The typed client, as a signed-in person.
    pub fn api_bearer(&self, bearer: &Bearer) -> hookflow_client::Client {
        self.api_with(bearer.credentials())
    }

    /// A new user with a password (no change required), `role` in `org`.
    pub async fn person(&self, org: OrgId, role: Role) -> Person {
        self.member(org, role, false).await
    }

    /// A new user, `role` in `org`; `one_time` marks the password as one to change.
    pub async fn member(&self, org: OrgId, role: Role, one_time: bool) -> Person {
        let person = self.user(one_time).await;
        let mut conn = self.pool.acquire().await.expect("connection");
        signup::add_membership(&mut conn, org, person.user_id, role).await.expect("membership");
        person
    }

    /// A new user in no organization; `one_time` marks the password as one to change.
    pub async fn user(&self, one_time: bool) -> Person {
        let email = format!("p-{}@example.com", Uuid::new_v4().simple());
        let password = format!("pw-{}", Uuid::new_v4().simple());
        let hash = passwords::hash(password.clone()).await.expect("hash");
        let mut conn = self.pool.acquire().await.expect("connection");
        let user_id = store::create_user(&mut conn, &email, &hash, one_time).await.expect("user");
        Person { user_id, email, password }
    }

    /// `POST /auth/sessions`.
    pub async fn sign_in(&self, email: &str, password: &str) -> Reply {
        self.call(Method::POST, "/auth/sessions", None, Some(json!({"email": email, "password": password}))).await
    }

    /// Signs `person` in and answers their access token (with `org`) and refresh token.
    pub async fn bearer(&self, person: &Person, org: Option<OrgId>) -> (Bearer, String) {
        let reply = self.sign_in(&person.email, &person.password).await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        let token = reply.body["access_token"].as_str().expect("access token").to_owned();
        let refresh = reply.body["refresh_token"].as_str().expect("refresh token").to_owned();
        (Bearer { token, org }, refresh)
    }

    /// Sends a request with a bearer token (and its organization, if any).
    pub async fn call_bearer(&self, method: Method, path: &str, bearer: &Bearer, body: Option<Value>) -> Reply {
        let mut request = self.api_bearer(bearer).request(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        read(request.send().await.expect("send request")).await
    }
}

impl TestApp {
    /// `POST /organization/members` as the admin key: answers the invitation's token (from its link).
    pub async fn invite(&self, email: &str, role: Role) -> String {
        let invitation = AddMember { email: email.parse().expect("an email"), role };
        let created = self.api().people().invite(&invitation).await.expect("invite");
        invitation_token(&serde_json::to_value(created).expect("json"))
    }

    /// `POST /auth/invitations/accept` with `bearer`'s token.
    pub async fn accept(&self, bearer: &Bearer, token: &str) -> Reply {
        let bearer = Bearer { token: bearer.token.clone(), org: None };
        self.call_bearer(Method::POST, "/auth/invitations/accept", &bearer, Some(json!({"token": token}))).await
    }
}

/// The token of an invitation answer, read from its link (`.../#/invite/<token>`), which must agree with `token`.
pub fn invitation_token(answer: &Value) -> String {
    let url = answer["invite_url"].as_str().expect("invite_url");
    let token = url.split_once("#/invite/").expect("an app link").1.to_owned();
    assert_eq!(answer["token"], token.as_str(), "the link carries the token");
    token
}
