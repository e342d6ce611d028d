//! The console's files (the top-level `console/` folder), embedded in the binary at build time from the manifest
//! `build.rs` writes. Debug builds read each listed file from disk on every request instead, so an edit to a
//! script or the style sheet shows on reload without a build; only files in the manifest are ever served.

use sha2::Digest as _;
use std::borrow::Cow;
use std::sync::OnceLock;

/// One file of the console.
#[derive(Debug)]
pub struct Asset {
    /// The path below `/app/`.
    pub name: &'static str,
    pub content_type: &'static str,
    embedded: &'static [u8],
    /// Where the file was at build time (read instead of the embedded copy in debug builds).
    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    source: &'static str,
    etag: OnceLock<String>,
}

impl Asset {
    const fn new(
        name: &'static str,
        content_type: &'static str,
        embedded: &'static [u8],
        source: &'static str,
    ) -> Self {
        Self { name, content_type, embedded, source, etag: OnceLock::new() }
    }

    /// The file's bytes: the embedded copy, or in debug builds the file on disk when it can be read.
    pub fn bytes(&self) -> Cow<'static, [u8]> {
        #[cfg(debug_assertions)]
        if let Ok(bytes) = std::fs::read(self.source) {
            return Cow::Owned(bytes);
        }
        Cow::Borrowed(self.embedded)
    }

    /// A strong validator of `bytes`: the first 16 bytes of their SHA-256 (computed once for the embedded copy).
    pub fn etag(&self, bytes: &[u8]) -> String {
        let digest = || format!("\"{}\"", hex::encode(&sha2::Sha256::digest(bytes)[..16]));
        if std::ptr::eq(bytes, self.embedded) { self.etag.get_or_init(digest).clone() } else { digest() }
    }
}

include!(concat!(env!("OUT_DIR"), "/console_manifest.rs"));

/// The page shell served at `/`.
pub static INDEX: &Asset = &ASSETS[0];

/// The file at `name` below `/app/`.
pub fn find(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|asset| asset.name == name)
}
