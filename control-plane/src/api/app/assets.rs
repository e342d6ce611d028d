//! The app's files, embedded in the binary at build time from `control-plane/src/app/assets/`.

use sha2::Digest as _;
use std::sync::OnceLock;

/// One embedded file.
#[derive(Debug)]
pub struct Asset {
    /// The path below `/app/`.
    pub name: &'static str,
    pub content_type: &'static str,
    pub bytes: &'static [u8],
    etag: OnceLock<String>,
}

impl Asset {
    const fn new(name: &'static str, content_type: &'static str, bytes: &'static [u8]) -> Self {
        Self { name, content_type, bytes, etag: OnceLock::new() }
    }

    /// A strong validator: the first 16 bytes of the file's SHA-256, computed once.
    pub fn etag(&self) -> String {
        self.etag.get_or_init(|| format!("\"{}\"", hex::encode(&sha2::Sha256::digest(self.bytes)[..16]))).clone()
    }
}

const JS: &str = "text/javascript; charset=utf-8";

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset::new($name, $type, include_bytes!(concat!("assets/", $name)))
    };
}

/// The page shell served at `/`.
pub static INDEX: &Asset = &ASSETS[0];

/// Every file of the app.
pub static ASSETS: [Asset; 24] = [
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("js/main.js", JS),
    asset!("js/api.js", JS),
    asset!("js/dom.js", JS),
    asset!("js/sse.js", JS),
    asset!("js/oidc.js", JS),
    asset!("js/charts.js", JS),
    asset!("js/pages/signin.js", JS),
    asset!("js/pages/webhooks.js", JS),
    asset!("js/pages/inspector.js", JS),
    asset!("js/pages/capture_detail.js", JS),
    asset!("js/pages/signature.js", JS),
    asset!("js/pages/webhook_node.js", JS),
    asset!("js/pages/triggers.js", JS),
    asset!("js/pages/flows.js", JS),
    asset!("js/pages/flow.js", JS),
    asset!("js/pages/execution.js", JS),
    asset!("js/pages/collections.js", JS),
    asset!("js/pages/keys.js", JS),
    asset!("js/pages/people.js", JS),
    asset!("js/pages/invite.js", JS),
    asset!("js/pages/admin.js", JS),
];

/// The file at `name` below `/app/`.
pub fn find(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|asset| asset.name == name)
}
