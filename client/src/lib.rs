//! The typed hookflow REST client: one [`Client`] (a base URL, credentials and a shared `reqwest::Client`) with a
//! method per operation, grouped by resource (`client.flows().create(&WriteFlow { .. })`), each sending and
//! answering the wire types of `hookflow_shared::api`. A refusal comes back as an [`ApiFailure`] carrying the
//! status and the contract's error body; [`Client::request`] and [`Client::send`] are the escape hatch for calls
//! no method covers (raw bodies, streams, extra headers).
//!
//! The client builds no TLS configuration of its own: callers that need one (the CLI and the runner share
//! `hookflow_runner::tls`) hand their `reqwest::Client` to [`Client::with_http`].

mod destinations;
mod failure;
mod resources;
mod schedules;
mod webhooks;

pub use destinations::Destinations;
pub use failure::{ApiFailure, Refused};
pub use resources::*;
pub use schedules::Schedules;
pub use webhooks::Webhooks;

use hookflow_shared::OrgId;
use hookflow_shared::api::Page;
use hookflow_shared::wire::header;
use reqwest::{Method, RequestBuilder, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt;
use std::sync::Arc;

/// Declares the calls that send a JSON body, which differ only in their method.
macro_rules! json_calls {
    ($($(#[$doc:meta])* $name:ident $method:ident;)*) => {
        $(
            $(#[$doc])*
            pub async fn $name<B: Serialize + ?Sized, T: DeserializeOwned>(
                &self,
                path: &str,
                body: &B,
            ) -> Result<T, ApiFailure> {
                self.send(self.request(Method::$method, path).json(body)).await
            }
        )*
    };
}

/// Whom a request is sent as.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// No credentials (public routes, refusals of anonymous calls).
    None,
    /// An API key (`hf_...`), with the organization it acts in (`None` only for keys that name their own, such as
    /// the embedded runner's).
    ApiKey { key: String, org: Option<OrgId> },
    /// A person's access token, with the organization it acts in (none for routes of the person).
    Bearer { token: String, org: Option<OrgId> },
    /// A job token: the runner protocol's report and completion calls.
    JobToken(String),
}

impl Credentials {
    /// An API key acting in `org`.
    pub fn api_key(key: impl Into<String>, org: OrgId) -> Self {
        Credentials::ApiKey { key: key.into(), org: Some(org) }
    }

    /// A person's access token acting in `org`.
    pub fn bearer(token: impl Into<String>, org: Option<OrgId>) -> Self {
        Credentials::Bearer { token: token.into(), org }
    }

    /// Adds the credentials' headers to `request`.
    pub fn apply(&self, request: RequestBuilder) -> RequestBuilder {
        let with_org = |request: RequestBuilder, org: &Option<OrgId>| match org {
            Some(org) => request.header(header::ORGANIZATION, org.to_string()),
            None => request,
        };
        match self {
            Credentials::None => request,
            Credentials::ApiKey { key, org } => with_org(request.header(header::API_KEY, key), org),
            Credentials::Bearer { token, org } => with_org(request.bearer_auth(token), org),
            Credentials::JobToken(token) => request.bearer_auth(token),
        }
    }
}

/// Never shows a key or token.
impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::None => f.write_str("None"),
            Credentials::ApiKey { org, .. } => f.debug_struct("ApiKey").field("key", &"***").field("org", org).finish(),
            Credentials::Bearer { org, .. } => {
                f.debug_struct("Bearer").field("token", &"***").field("org", org).finish()
            }
            Credentials::JobToken(_) => f.write_str("JobToken(***)"),
        }
    }
}

/// The REST client. Cloning is cheap (the connection pool and base URL are shared).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Arc<str>,
    credentials: Credentials,
}

impl Client {
    /// A client with its own connection pool that never follows redirects (a key must not go to another host).
    pub fn new(base_url: &str, credentials: Credentials) -> Self {
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap_or_default();
        Self::with_http(http, base_url, credentials)
    }

    /// A client over `http` (its TLS, timeouts, user agent and redirect policy are the caller's).
    pub fn with_http(http: reqwest::Client, base_url: &str, credentials: Credentials) -> Self {
        Self { http, base: base_url.trim_end_matches('/').into(), credentials }
    }

    /// The same server and connection pool, as someone else.
    pub fn as_(&self, credentials: Credentials) -> Self {
        Self { http: self.http.clone(), base: self.base.clone(), credentials }
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// The underlying HTTP client.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// `path` (relative to the base URL, with its query if any) as an absolute URL.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Escape hatch: a request to `path` carrying the credentials; add headers or a body and pass it to
    /// [`Client::send`] or [`Client::send_raw`].
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.credentials.apply(self.http.request(method, self.url(path)))
    }

    /// Escape hatch for the runner protocol's job calls: a request to `path` under a job token instead of the
    /// client's credentials (no clone of the client or the token).
    pub fn request_as_job(&self, method: Method, path: &str, job_token: &str) -> RequestBuilder {
        self.http.request(method, self.url(path)).bearer_auth(job_token)
    }

    /// Sends `request`; answers the response when its status is a success, else the refusal.
    pub async fn send_raw(&self, request: RequestBuilder) -> Result<Response, ApiFailure> {
        let response = request.send().await.map_err(ApiFailure::Transport)?;
        if response.status().is_success() { Ok(response) } else { Err(ApiFailure::refused(response).await) }
    }

    /// Sends `request` and decodes a success's JSON body as `T` (an empty body reads as `null`, so `()` and
    /// `Option<_>` suit `204`).
    pub async fn send<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, ApiFailure> {
        let response = self.send_raw(request).await?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(ApiFailure::Transport)?;
        let bytes: &[u8] = if bytes.is_empty() { b"null" } else { &bytes };
        serde_json::from_slice(bytes).map_err(|e| ApiFailure::Decode {
            status,
            error: e.to_string(),
            text: String::from_utf8_lossy(bytes).into_owned(),
        })
    }

    /// `GET path`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiFailure> {
        self.send(self.request(Method::GET, path)).await
    }

    json_calls! {
        /// `POST path` with a JSON body.
        post POST;
        /// `PUT path` with a JSON body.
        put PUT;
        /// `PATCH path` with a JSON body.
        patch PATCH;
    }

    /// `POST path` without a body.
    pub async fn post_empty<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiFailure> {
        self.send(self.request(Method::POST, path)).await
    }

    /// `DELETE path`; the answer's body is not read.
    pub async fn delete(&self, path: &str) -> Result<(), ApiFailure> {
        self.send_raw(self.request(Method::DELETE, path)).await.map(drop)
    }

    /// Every item of the list at `path`, following `next_cursor` 100 at a time.
    pub async fn list_all<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, &str)],
    ) -> Result<Vec<T>, ApiFailure> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut params = form_urlencoded::Serializer::new(String::new());
            params.append_pair("limit", "100").extend_pairs(query);
            if let Some(cursor) = &cursor {
                params.append_pair("cursor", cursor);
            }
            let page: Page<T> = self.get(&format!("{path}?{}", params.finish())).await?;
            items.extend(page.items);
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(items),
            }
        }
    }
}

/// `path` with `query` appended (`?a=b&c=d`), nothing when `query` is empty.
pub fn with_query(path: &str, query: &[(&str, &str)]) -> String {
    if query.is_empty() {
        return path.to_owned();
    }
    let mut params = form_urlencoded::Serializer::new(String::new());
    params.extend_pairs(query);
    format!("{path}?{}", params.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_print_a_key_or_token() {
        let org = OrgId::nil();
        for credentials in [
            Credentials::api_key("hf_secret", org),
            Credentials::bearer("eyJsecret", Some(org)),
            Credentials::JobToken("hfj_secret".into()),
        ] {
            let shown = format!("{credentials:?} {:?}", Client::new("http://127.0.0.1:1/", credentials.clone()));
            assert!(!shown.contains("secret"), "{shown}");
        }
    }

    #[test]
    fn queries_are_encoded_and_base_urls_lose_their_slash() {
        assert_eq!(with_query("/flows", &[]), "/flows");
        assert_eq!(with_query("/flows", &[("q", "a b&c"), ("limit", "1")]), "/flows?q=a+b%26c&limit=1");
        let client = Client::new("http://127.0.0.1:1/", Credentials::None);
        assert_eq!(client.url("/flows"), "http://127.0.0.1:1/flows");
    }

    #[test]
    fn the_request_carries_the_credentials_headers() {
        let org = OrgId::now_v7();
        let client = Client::new("http://127.0.0.1:1", Credentials::api_key("hf_key", org));
        let request = client.request(Method::GET, "/flows").build().expect("a request");
        assert_eq!(request.headers()[header::API_KEY], "hf_key");
        assert_eq!(request.headers()[header::ORGANIZATION], org.to_string().as_str());
        let job = client.request_as_job(Method::POST, "/runner/jobs/x/nodes", "hfj_t").build().expect("a request");
        assert_eq!(job.headers()[reqwest::header::AUTHORIZATION], "Bearer hfj_t");
        assert!(!job.headers().contains_key(header::API_KEY), "a job call carries the job token only");
    }
}
