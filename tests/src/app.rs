//! `TestApp`: the control plane's real router on 127.0.0.1:0 over a fresh database, with an organization and an
//! all-scopes key ready, and helpers to call it as any key of any organization.

use hookflow_client::{Client, Credentials};
use hookflow_control_plane::api::admin::{keys, organization};
use hookflow_control_plane::auth::Actor;
use hookflow_control_plane::state::{AppState, Settings};
use hookflow_control_plane::{api, db, http, tasks};
use hookflow_shared::api::webhooks::CreateWebhook;
use hookflow_shared::{OrgId, ScopeSet};
use reqwest::{Method, StatusCode, header::HeaderMap};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// An API key and the organization it is sent with.
#[derive(Debug, Clone)]
pub struct Creds {
    pub key: String,
    pub org: OrgId,
}

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Creds {
    /// As the typed client sends them.
    pub fn credentials(&self) -> Credentials {
        Credentials::api_key(self.key.clone(), self.org)
    }
}

impl Reply {
    /// Checks an error answer: its status, its `error.code`, and that its message mentions `mentioning`.
    pub fn assert_refused(&self, status: u16, code: &str, mentioning: &str) {
        assert_eq!((self.status.as_u16(), self.code()), (status, code), "{}", self.text);
        let message = self.body["error"]["message"].as_str().expect("message");
        assert!(message.contains(mentioning), "`{message}` does not mention `{mentioning}`");
    }

    /// The `error.code` of an error body.
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("<no error code>")
    }
}

#[derive(Debug)]
pub struct TestApp {
    pub base: String,
    pub pool: PgPool,
    pub client: reqwest::Client,
    /// An all-scopes key of the first organization.
    pub admin: Creds,
    /// The server's id among replicas (`AppState::replica`).
    pub replica: Uuid,
    shutdown: CancellationToken,
    /// The server's master key (what seals secrets and signing keys).
    master: hookflow_control_plane::crypto::MasterKey,
}

/// Connections to this test's database that have run `LISTEN` (the servers' listeners).
async fn listening(pool: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'",
    )
    .fetch_one(pool)
    .await
    .unwrap_or(0)
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::spawn_with(|_| {}).await
    }

    /// A server over a fresh database whose settings `configure` adjusts.
    pub async fn spawn_with(configure: impl FnOnce(&mut Settings)) -> Self {
        let options = crate::cluster::fresh_database().await;
        let mut app = Self::serve(db::pool(options, 10), configure).await;
        app.admin = app.new_org("Acme").await;
        // As the first start's organization is: its flows run by the embedded runner may reach this machine.
        let mut conn = app.pool.acquire().await.expect("connection");
        organization::set_private_network(&mut conn, app.admin.org, true).await.expect("allow private network");
        app
    }

    /// Serves over `pool`, which may point at a database that is down; no organization is created.
    pub async fn spawn_on(pool: PgPool) -> Self {
        Self::serve(pool, |_| {}).await
    }

    /// A second server on this one's database, as another replica would be (its own caches, listener, hub).
    pub async fn replica(&self) -> Self {
        self.replica_with(|_| {}).await
    }

    /// A replica configured with another master keyring (a rotation rolled out to it).
    pub async fn replica_with_keys(&self, master: hookflow_control_plane::crypto::MasterKey) -> Self {
        self.replica_with(move |s| s.master_key = master).await
    }

    /// A replica whose settings `configure` adjusts after the shared ones: replicas share the public URL (the
    /// issuer of access tokens) and the master key, as a deployment does.
    pub async fn replica_with(&self, configure: impl FnOnce(&mut Settings)) -> Self {
        let (public_url, master) = (self.base.clone(), self.master.clone());
        let shared = move |s: &mut Settings| {
            s.public_url = public_url;
            s.master_key = master;
            configure(s);
        };
        let mut replica = Self::serve(db::pool(self.pool.connect_options().as_ref().clone(), 10), shared).await;
        replica.admin = self.admin.clone();
        replica
    }

    async fn serve(pool: PgPool, configure: impl FnOnce(&mut Settings)) -> Self {
        // Server logs go to the failing test's output; HOOKFLOW_TEST_LOG sets the filter (default: errors).
        let filter = std::env::var("HOOKFLOW_TEST_LOG").unwrap_or_else(|_| "error".into());
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
        let listener = http::listener::bind(([127, 0, 0, 1], 0).into()).expect("bind 127.0.0.1:0");
        let base = format!("http://{}", listener.local_addr().expect("local addr"));
        let mut settings = Settings::new(base.clone());
        configure(&mut settings);
        let shutdown = CancellationToken::new();
        let master = settings.master_key.clone();
        let state = AppState::new(pool.clone(), settings, shutdown.clone());
        let replica = state.replica;
        let listening_before = listening(&pool).await;
        tasks::start(&state);
        tokio::spawn(api::serve(listener, state));
        // The server's LISTEN connection clears every cache when it comes up (what it missed is unknown): a test
        // starts once it is up, so nothing the test caches is cleared behind it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        while listening(&pool).await <= listening_before && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        Self {
            base,
            pool,
            client: reqwest::Client::new(),
            admin: Creds { key: String::new(), org: OrgId::nil() },
            replica,
            shutdown,
            master,
        }
    }

    /// A new organization with an all-scopes key.
    pub async fn new_org(&self, name: &str) -> Creds {
        let mut tx = self.pool.begin().await.expect("begin");
        let org = organization::create(&mut tx, name, Actor::Operator).await.expect("create organization");
        tx.commit().await.expect("commit");
        Creds { key: self.key(org.id, ScopeSet::all(), None).await, org: org.id }
    }

    /// A key of `org` with exactly `scopes`.
    pub async fn key(&self, org: OrgId, scopes: ScopeSet, expires_at: Option<chrono::DateTime<chrono::Utc>>) -> String {
        let mut tx = self.pool.begin().await.expect("begin");
        let created = keys::create(
            &mut tx,
            keys::NewKey { org_id: org, name: "test key".into(), scopes, expires_at, actor: Actor::Operator },
        )
        .await
        .expect("create key");
        tx.commit().await.expect("commit");
        created.key
    }

    /// Credentials for the admin organization holding exactly `scopes`.
    pub async fn creds_with(&self, scopes: &[&str]) -> Creds {
        let scopes = ScopeSet::parse(scopes.iter().copied()).expect("valid scopes");
        Creds { key: self.key(self.admin.org, scopes, None).await, org: self.admin.org }
    }

    /// The server's master key.
    pub fn master_key(&self) -> hookflow_control_plane::crypto::MasterKey {
        self.master.clone()
    }

    /// The token that stops this app's server (and what was started with it).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The typed client, as the admin key.
    pub fn api(&self) -> Client {
        self.api_as(&self.admin)
    }

    /// The typed client, as `creds`.
    pub fn api_as(&self, creds: &Creds) -> Client {
        self.api_with(creds.credentials())
    }

    /// The typed client, as anyone (`Credentials::None` for anonymous calls).
    pub fn api_with(&self, credentials: Credentials) -> Client {
        Client::with_http(self.client.clone(), &self.base, credentials)
    }

    /// The untyped call, for tests where the wire spelling is the point (malformed bodies, exact shapes): sends
    /// a request with `creds` (or none) and an optional JSON body through the client's escape hatch, whatever the
    /// answer.
    pub async fn call(&self, method: Method, path: &str, creds: Option<&Creds>, body: Option<Value>) -> Reply {
        let credentials = creds.map_or(Credentials::None, Creds::credentials);
        let mut request = self.api_with(credentials).request(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        read(request.send().await.expect("send request")).await
    }

    /// Sends a request as the admin key.
    pub async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> Reply {
        self.call(method, path, Some(&self.admin.clone()), body).await
    }

    /// The page after `previous` of the list at `path` (which has a query already), as the admin key.
    pub async fn next_page(&self, path: &str, previous: &Reply) -> Reply {
        let cursor = previous.body["next_cursor"].as_str().expect("a next page");
        self.admin(Method::GET, &format!("{path}&cursor={cursor}"), None).await
    }
}

/// The typed client: each call names the status it expects (a test fails at once, showing the body, when another
/// comes back) and decodes the answer as `T` (`ErrorBody` for error answers, `Value` where a test pokes at JSON).
impl TestApp {
    /// Sends `body` (if any) as `creds`, checks the status, decodes the answer.
    pub async fn send_as<T: DeserializeOwned>(
        &self,
        creds: Option<&Creds>,
        method: Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
        expected: u16,
    ) -> T {
        let body = body.map(|b| serde_json::to_value(b).expect("encode the request body"));
        let reply = self.call(method.clone(), path, creds, body).await;
        assert_eq!(reply.status.as_u16(), expected, "{method} {path} answered {}: {}", reply.status, reply.text);
        let text = if reply.text.is_empty() { "null" } else { reply.text.as_str() };
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{method} {path}: cannot decode the answer ({e}): {text}"))
    }

    /// `GET` as the admin.
    pub async fn get<T: DeserializeOwned>(&self, path: &str, expected: u16) -> T {
        self.send_as(Some(&self.admin), Method::GET, path, None::<&Value>, expected).await
    }

    /// `POST` as the admin.
    pub async fn post<T: DeserializeOwned>(&self, path: &str, body: &(impl Serialize + ?Sized), expected: u16) -> T {
        self.send_as(Some(&self.admin), Method::POST, path, Some(body), expected).await
    }

    /// `PUT` as the admin.
    pub async fn put<T: DeserializeOwned>(&self, path: &str, body: &(impl Serialize + ?Sized), expected: u16) -> T {
        self.send_as(Some(&self.admin), Method::PUT, path, Some(body), expected).await
    }

    /// `PATCH` as the admin.
    pub async fn patch<T: DeserializeOwned>(&self, path: &str, body: &(impl Serialize + ?Sized), expected: u16) -> T {
        self.send_as(Some(&self.admin), Method::PATCH, path, Some(body), expected).await
    }

    /// `DELETE` as the admin; the answer is checked for its status only.
    pub async fn delete(&self, path: &str, expected: u16) {
        self.send_as::<Value>(Some(&self.admin), Method::DELETE, path, None::<&Value>, expected).await;
    }
}

impl TestApp {
    /// Creates an endpoint from `body` as the admin and returns it.
    pub async fn create_webhook(&self, body: Value) -> Value {
        let create: CreateWebhook = serde_json::from_value(body).expect("a webhook body");
        let created = self.api().webhooks().create(&create).await.expect("create the webhook");
        serde_json::to_value(created).expect("json")
    }

    /// How many rows `from` holds: a table, or a table and a `WHERE` clause of the test's own text (a test's
    /// database is its own).
    pub async fn rows(&self, from: &str) -> i64 {
        let sql = format!("SELECT count(*) FROM {from}");
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).fetch_one(&self.pool).await.expect("count rows")
    }

    /// Creates an endpoint named `name` with the defaults; answers its id.
    pub async fn webhook_named(&self, name: &str) -> String {
        let create = CreateWebhook::new(name.parse().expect("a name"));
        self.api().webhooks().create(&create).await.expect("create the webhook").id.to_string()
    }

    /// Sends an unauthenticated request to a capture URL (`rest` is what follows `/webhook/`).
    pub async fn capture(&self, method: Method, rest: &str, body: impl Into<reqwest::Body>) -> Reply {
        self.capture_with(method, rest, &[], body).await
    }

    /// [`TestApp::capture`] with headers, in their order.
    pub async fn capture_with(
        &self,
        method: Method,
        rest: &str,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> Reply {
        let mut request = self.client.request(method, self.url(&format!("/webhook/{rest}"))).body(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        read(request.send().await.expect("send capture")).await
    }

    /// Writes raw bytes on a fresh connection and returns the raw answer (for exact header case and order).
    pub async fn raw_http(&self, request: &[u8]) -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let address = self.base.trim_start_matches("http://");
        let mut stream = tokio::net::TcpStream::connect(address).await.expect("connect");
        stream.write_all(request).await.expect("write");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.expect("read");
        String::from_utf8_lossy(&answer).into_owned()
    }
}

pub async fn read(response: reqwest::Response) -> Reply {
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.expect("read body");
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply { status, headers, body, text }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
