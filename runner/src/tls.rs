//! One TLS client configuration per process. Every reqwest client built with the default settings reads and parses
//! the platform's root certificates again (about 150 files here): the CLI builds several clients at start, and the
//! server one per outbound call. Here the roots are loaded once, at the first certificate to verify, and every
//! client shares them; a process that only speaks plain HTTP (a CLI run against a local server) never reads them.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::sync::{Arc, LazyLock, OnceLock};

/// The platform's verifier, made at its first use: making it reads every root certificate.
#[derive(Debug)]
struct PlatformRootsOnFirstUse {
    provider: Arc<CryptoProvider>,
    verifier: OnceLock<Result<rustls_platform_verifier::Verifier, String>>,
}

impl PlatformRootsOnFirstUse {
    fn verifier(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        let made = self.verifier.get_or_init(|| {
            rustls_platform_verifier::Verifier::new(self.provider.clone()).map_err(|e| {
                tracing::warn!(error = %e, "the platform's root certificates could not be loaded");
                format!("the platform's root certificates could not be loaded: {e}")
            })
        });
        made.as_ref().map_err(|e| rustls::Error::General(e.clone()))
    }
}

/// The TLS 1.2 and 1.3 signature checks, alike: the platform verifier's own.
macro_rules! signature_checks {
    ($($check:ident),*) => {$(
        fn $check(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.verifier()?.$check(message, cert, dss)
        }
    )*};
}

impl ServerCertVerifier for PlatformRootsOnFirstUse {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verifier()?.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    signature_checks!(verify_tls12_signature, verify_tls13_signature);

    /// What the provider can verify (as the platform's verifier answers), without loading the roots: a client
    /// offers these in every hello.
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// The provider, and the platform's verifier every configuration shares (so the roots load once per process).
static VERIFIER: LazyLock<(Arc<CryptoProvider>, Arc<PlatformRootsOnFirstUse>)> = LazyLock::new(|| {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let verifier = PlatformRootsOnFirstUse { provider: provider.clone(), verifier: OnceLock::new() };
    (provider, Arc::new(verifier))
});

/// The platform's roots behind rustls' default protocol versions, with reqwest's ALPN (HTTP/2, then HTTP/1.1).
/// `None` when rustls refuses the provider's protocol versions; clients then fall back to reqwest's own set-up.
static SHARED: LazyLock<Option<rustls::ClientConfig>> = LazyLock::new(|| {
    let (provider, verifier) = &*VERIFIER;
    let builder =
        rustls::ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().ok()?;
    let mut config = builder.dangerous().with_custom_certificate_verifier(verifier.clone()).with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Some(config)
});

/// The shared configuration presenting a client certificate: `pem` holds the certificate chain (leaf first) and
/// its PKCS#8 private key. The error says what is wrong without quoting the text (a secret's value).
pub fn with_client_certificate(pem: &str) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::PrivatePkcs8KeyDer;
    use rustls::pki_types::pem::PemObject;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|_| "the client certificate's PEM could not be read".to_owned())?;
    if chain.is_empty() {
        return Err("the client certificate secret holds no `CERTIFICATE` block".into());
    }
    let key = PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes())
        .map_err(|_| "the client certificate secret holds no PKCS#8 `PRIVATE KEY` block".to_owned())?;
    let (provider, verifier) = &*VERIFIER;
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS could not be set up: {e}"))?;
    let mut config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_client_auth_cert(chain, key.into())
        .map_err(|e| format!("the client certificate and key do not go together: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

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
    use super::*;

    #[test]
    fn the_shared_configuration_builds_clients() {
        let config = SHARED.as_ref().expect("rustls accepts the provider");
        assert_eq!(config.alpn_protocols, [b"h2".to_vec(), b"http/1.1".to_vec()]);
        assert!(shared(reqwest::Client::builder()).build().is_ok());
    }

    /// The roots are read at the first certificate, not before; then they are the platform's and refuse what they
    /// do not vouch for.
    #[test]
    fn the_roots_load_at_the_first_certificate_and_verify_it() {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let lazy = PlatformRootsOnFirstUse { provider, verifier: OnceLock::new() };
        assert!(!lazy.supported_verify_schemes().is_empty());
        assert!(lazy.verifier.get().is_none(), "offering schemes in a hello loads nothing");
        let name = ServerName::try_from("example.test").expect("a name");
        let forged = CertificateDer::from(b"not a certificate".to_vec());
        let refused = lazy.verify_server_cert(&forged, &[], &name, &[], UnixTime::now());
        assert!(refused.is_err(), "a forged certificate is refused");
        assert!(matches!(lazy.verifier.get(), Some(Ok(_))), "the platform's roots loaded on this machine");
    }
}
