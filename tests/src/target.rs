//! A small HTTP service on 127.0.0.1:0 for flows to call: JSON, echo, slow and status routes, and a hit counter
//! so tests can see retries.

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::{any, get, post};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
pub struct Target {
    pub base: String,
    pub hits: Arc<AtomicUsize>,
    shutdown: CancellationToken,
}

async fn login(Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    let user = body["user"].as_str().unwrap_or("nobody");
    (StatusCode::OK, Json(json!({"token": format!("tok-{user}"), "user": user})))
}

async fn orders(headers: HeaderMap) -> (StatusCode, HeaderMap, Json<Value>) {
    let mut out = HeaderMap::new();
    out.insert("x-total", "2".parse().expect("header"));
    let authorized = headers.get("authorization").is_some();
    (StatusCode::OK, out, Json(json!({"count": 2, "authorized": authorized, "orders": [{"id": 1}, {"id": 2}]})))
}

/// Answers with everything it received, as JSON.
async fn echo(method: Method, uri: Uri, headers: HeaderMap, body: String) -> Json<Value> {
    let headers: BTreeMap<String, String> =
        headers.iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned())).collect();
    Json(json!({"method": method.as_str(), "uri": uri.to_string(), "headers": headers, "body": body}))
}

async fn slow(Query(q): Query<BTreeMap<String, u64>>) -> Json<Value> {
    tokio::time::sleep(std::time::Duration::from_millis(q.get("ms").copied().unwrap_or(1000))).await;
    Json(json!({"ok": true}))
}

async fn status(Path(code): Path<u16>) -> (StatusCode, Json<Value>) {
    (StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST), Json(json!({"code": code})))
}

/// Redirects (307, so method, headers and body may follow) to `to`.
async fn redirect(Query(q): Query<BTreeMap<String, String>>) -> impl IntoResponse {
    let to = q.get("to").cloned().unwrap_or_default();
    (StatusCode::TEMPORARY_REDIRECT, [(axum::http::header::LOCATION, to)])
}

/// A body of `bytes` bytes of `x`, then `tail`.
async fn large(Query(q): Query<BTreeMap<String, String>>) -> String {
    let bytes: usize = q.get("bytes").and_then(|k| k.parse().ok()).unwrap_or(65536);
    let mut body = "x".repeat(bytes);
    body.push_str(q.get("tail").map_or("", String::as_str));
    body
}

/// A document nested `depth` deep: XML (`kind=xml`, `<a>` in `<a>`) or JSON (arrays in arrays).
async fn nested(Query(q): Query<BTreeMap<String, String>>) -> String {
    let depth: usize = q.get("depth").and_then(|d| d.parse().ok()).unwrap_or(1000);
    match q.get("kind").map(String::as_str) {
        Some("xml") => format!("{}{}", "<a>".repeat(depth), "</a>".repeat(depth)),
        _ => format!("{}{}", "[".repeat(depth), "]".repeat(depth)),
    }
}

/// `v` in the renderings an API might answer with: lower-case percent-encoding, hex, a JSON string with every
/// character `\u`-escaped, one with `\/` escapes, base64 of `user:v` (Basic credentials), and a header named
/// after it.
async fn encodings(Query(q): Query<BTreeMap<String, String>>) -> impl IntoResponse {
    use base64::Engine as _;
    let v = q.get("v").cloned().unwrap_or_default();
    let percent: String = v.bytes().map(|b| format!("%{b:02x}")).collect();
    let escaped: String = v.chars().map(|c| format!("\\u{:04x}", u32::from(c))).collect();
    let slashed = v.replace('/', "\\/");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("user:{v}"));
    let body = format!(
        "{{\"percent\": \"{percent}\", \"hex\": \"{}\", \"escaped\": \"{escaped}\", \"slashed\": \"{slashed}\", \
         \"basic\": \"Basic {basic}\", \"number\": {}}}",
        hex::encode(&v),
        v.parse::<u64>().map_or_else(|_| "0".to_owned(), |n| n.to_string())
    );
    let name = format!("x-echo-{}", v.to_ascii_lowercase());
    let mut headers = axum::http::HeaderMap::new();
    if let Ok(name) = axum::http::HeaderName::try_from(name) {
        headers.insert(name, axum::http::HeaderValue::from_static("1"));
    }
    (headers, body)
}

/// Counts every request the target answers.
async fn count_hit(
    State(hits): State<Arc<AtomicUsize>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    hits.fetch_add(1, Ordering::SeqCst);
    next.run(request).await
}

impl Target {
    pub async fn spawn() -> Self {
        Self::spawn_on("127.0.0.1:0").await
    }

    /// A target listening on `address` (an address of this machine, such as one a test's network namespace made).
    pub async fn spawn_on(address: &str) -> Self {
        let hits = Arc::new(AtomicUsize::new(0));
        let router = Router::new()
            .route("/login", post(login))
            .route("/orders", get(orders))
            .route("/echo", any(echo))
            .route("/slow", get(slow))
            .route("/status/{code}", get(status))
            .route("/redirect", any(redirect))
            .route("/large", get(large))
            .route("/encodings", get(encodings))
            .route("/nested", get(nested))
            .layer(axum::middleware::from_fn_with_state(hits.clone(), count_hit));
        let listener = tokio::net::TcpListener::bind(address).await.expect("bind target");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned()).await;
        });
        Self { base, hits, shutdown }
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}
