//! The engine's HTTP clients: one connection pool per network policy, shared by every run, built with the
//! engine's proxy choice (none for the server's embedded runner; the environment's or `--proxy` for installed
//! runners and `hookflow run`); and, for a node presenting a client certificate, a client of its own for that
//! exchange (same policy, same proxy, the certificate in its TLS configuration).

use crate::outbound::{ClientOptions, Guard, Proxy};
use hookflow_shared::api::runners::NetworkPolicy;

#[derive(Debug, Clone)]
pub struct Clients {
    public: reqwest::Client,
    private: reqwest::Client,
    any: reqwest::Client,
    options: ClientOptions,
}

impl Clients {
    pub fn new(proxy: Proxy) -> Self {
        let options = ClientOptions {
            user_agent: concat!("hookflow-runner/", env!("CARGO_PKG_VERSION")).to_owned(),
            proxy,
            ..ClientOptions::default()
        };
        let client = |policy| Guard::new(policy).client(&options);
        Self {
            public: client(NetworkPolicy::Public),
            private: client(NetworkPolicy::Private),
            any: client(NetworkPolicy::Any),
            options,
        }
    }

    /// The client whose resolver enforces `policy`.
    pub fn get(&self, policy: NetworkPolicy) -> &reqwest::Client {
        match policy {
            NetworkPolicy::Public => &self.public,
            NetworkPolicy::Private => &self.private,
            NetworkPolicy::Any => &self.any,
        }
    }

    /// A client for `policy` presenting the certificate chain and PKCS#8 key in `pem`.
    pub fn with_certificate(&self, policy: NetworkPolicy, pem: &str) -> Result<reqwest::Client, String> {
        let tls = crate::tls::with_client_certificate(pem)?;
        let options = ClientOptions { tls: Some(tls), ..self.options.clone() };
        Ok(Guard::new(policy).client(&options))
    }
}
