//! The web console: static page shells and scripts embedded in the binary, served at `/` and `/app/...` under a
//! strict Content-Security-Policy. Every piece of data the pages show comes through the API with the signed-in
//! person's session, so the app can do nothing the API would refuse. The pages are plain ES modules written by
//! hand in the top-level `console/` folder (no bundler): `cargo build` alone reproduces the binary from the
//! repository; Node.js only checks them (types, format, unit tests), never builds them.

mod assets;
mod config;

use crate::state::AppState;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

pub use assets::{ASSETS, Asset};

/// The path prefix of the app's files; the page itself is served at `/`.
pub const PREFIX: &str = "/app";

/// The app's routes: the page at `/` and its files under [`PREFIX`]. Outside the API contract.
pub fn routes() -> Router<AppState> {
    Router::new().route("/", get(page)).route("/app/config.json", get(config::serve)).route("/app/{*file}", get(file))
}

async fn page(State(app): State<AppState>, headers: HeaderMap) -> Response {
    serve(&app, assets::INDEX, &headers)
}

async fn file(State(app): State<AppState>, Path(file): Path<String>, headers: HeaderMap) -> Response {
    match assets::find(&file) {
        Some(asset) => serve(&app, asset, &headers),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// One file with the app's security headers, or 304 when the browser holds this version.
fn serve(app: &AppState, asset: &Asset, request: &HeaderMap) -> Response {
    let bytes = asset.bytes();
    let etag = asset.etag(&bytes);
    let fresh = request.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).is_some_and(|v| v == etag);
    let mut response =
        if fresh { StatusCode::NOT_MODIFIED.into_response() } else { bytes.into_owned().into_response() };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    let host = request.get(header::HOST).and_then(|v| v.to_str().ok());
    security_headers(app, host, headers);
    response
}

/// The Content-Security-Policy of every app response: scripts and styles only from the app's own files on this
/// server (`<host>/app/js/` and `<host>/app/`, not the whole origin: capture URLs on the same origin serve what
/// tenants choose), no inline code, no `eval`, no framing; requests only to this server and the external sign-in
/// providers' origins. `host` is the page's own `Host` (a source without a scheme takes the page's); without a
/// usable one, the origin (`'self'`).
pub fn content_security_policy(app: &AppState, host: Option<&str>) -> String {
    let host = host.filter(|h| {
        !h.is_empty() && h.len() <= 255 && h.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
    });
    let (scripts, styles) = match host {
        Some(host) => (format!("{host}{PREFIX}/js/"), format!("{host}{PREFIX}/")),
        None => ("'self'".to_owned(), "'self'".to_owned()),
    };
    let mut connect = String::from("'self'");
    for origin in config::provider_origins(app) {
        connect.push(' ');
        connect.push_str(&origin);
    }
    format!(
        "default-src 'none'; script-src {scripts}; style-src {styles}; img-src 'self' data:; font-src 'self'; \
         connect-src {connect}; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    )
}

fn security_headers(app: &AppState, host: Option<&str>, headers: &mut HeaderMap) {
    if let Ok(csp) = HeaderValue::from_str(&content_security_policy(app, host)) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
}
