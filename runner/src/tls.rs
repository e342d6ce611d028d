//! One TLS client configuration per process. Every reqwest client built with the default settings reads and parses
//! the platform's root certificates again (about 150 files here): the CLI builds several clients at start, and the
//! server one per outbound call. Here the roots are loaded once, on first use, and every client shares them.

use std::sync::{Arc, LazyLock};

/// The platform's roots behind rustls' default protocol versions, with reqwest's ALPN (HTTP/2, then HTTP/1.1).
/// `None` when the platform verifier cannot start; clients then fall back to reqwest's own set-up, which reports
/// the same failure where it matters.
static SHARED: LazyLock<Option<rustls::ClientConfig>> = LazyLock::new(|| {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let verifier = match rustls_platform_verifier::Verifier::new(provider.clone()) {
        Ok(verifier) => verifier,
        Err(e) => {
            tracing::warn!(error = %e, "the platform's root certificates could not be loaded");
            return None;
        }
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions().ok()?;
    let mut config = builder.dangerous().with_custom_certificate_verifier(Arc::new(verifier)).with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Some(config)
});

/// `builder` set to use the process's shared TLS configuration. It offers HTTP/2 and HTTP/1.1 by ALPN, so it is
/// not for a client limited to HTTP/1.1 (`http1_only`), which would then meet an HTTP/2 answer.
pub fn shared(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    match SHARED.as_ref() {
        Some(config) => builder.tls_backend_preconfigured(config.clone()),
        None => builder,
    }
}

#[cfg(test)]
mod tests {
    /// A client on the shared configuration still verifies: the platform's roots are there and in use.
    #[test]
    fn the_shared_configuration_carries_the_platform_roots() {
        let config = super::SHARED.as_ref().expect("the platform's roots load on this machine");
        assert_eq!(config.alpn_protocols, [b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert!(super::shared(reqwest::Client::builder()).build().is_ok());
    }
}
