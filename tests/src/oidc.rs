//! A real OpenID provider for the tests: `oidc-provider` under Node.js (tests/oidc), started on a port of its own
//! choosing and killed when dropped. It has a confidential client the API tests script over HTTP and the app's
//! public client (`hookflow-browser`, PKCE) that a real browser signs in with.

use base64::Engine as _;
use serde_json::Value;
use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};

/// The audience the provider puts in access tokens.
pub const AUDIENCE: &str = "hookflow-api";
/// The app's public client at the provider.
pub const BROWSER_CLIENT: &str = "hookflow-browser";

/// The provider process, killed when dropped.
#[derive(Debug)]
pub struct Provider {
    child: Child,
    pub issuer: String,
    pub resource: String,
    /// The RSA key the provider signs with (PKCS#1 DER), to forge tokens it would sign.
    pub private_key: Vec<u8>,
    pub kid: String,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn log_file() -> std::io::Result<std::fs::File> {
    std::fs::File::create(std::env::temp_dir().join(format!("hookflow-oidc-provider-{}.log", std::process::id())))
}

/// Starts the provider and reads its first line (issuer, resource, signing key).
pub fn start_provider() -> Provider {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/oidc/provider.mjs");
    let mut child = Command::new("node")
        .arg(script)
        .arg(AUDIENCE)
        .stdout(Stdio::piped())
        // The provider's notices, kept for a failure's investigation.
        .stderr(log_file().map(Stdio::from).unwrap_or_else(|_| Stdio::null()))
        .spawn()
        .expect("node runs tests/oidc/provider.mjs (run `npm ci --prefix tests/oidc` first)");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("provider's first line");
    let info: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("provider said {line:?}: {e}"));
    let text = |name: &str| info[name].as_str().expect(name).to_owned();
    let private_key = base64::engine::general_purpose::STANDARD.decode(text("private_key_pkcs1")).expect("base64");
    Provider { issuer: text("issuer"), resource: text("resource"), private_key, kid: text("kid"), child }
}
