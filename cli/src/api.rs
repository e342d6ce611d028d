//! The REST client: `hookflow_client::Client` under the CLI's credentials (key and organization headers on every
//! call), with every refusal turned into a `CliError::Api` carrying the server's error code and message (never the
//! key) and every transport failure into a `CliError::Network` naming the server.

use crate::config::Credentials;
use crate::error::CliError;
use hookflow_client::ApiFailure;
use hookflow_shared::wire::Refusal;
use reqwest::{Method, RequestBuilder, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;

#[derive(Debug, Clone)]
pub struct Api {
    client: hookflow_client::Client,
    credentials: Credentials,
}

/// Turns a transport failure into a network error naming the server and the root cause, never the key.
pub fn network_error(base_url: &str, e: &reqwest::Error) -> CliError {
    let mut root: &dyn std::error::Error = e;
    while let Some(inner) = root.source() {
        root = inner;
    }
    let reason = if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        format!("cannot connect ({root})")
    } else {
        root.to_string()
    };
    CliError::Network(format!("cannot reach {base_url}: {reason}"))
}

/// Reads an error answer into `CliError::Api`.
pub async fn refusal(response: Response) -> CliError {
    let status = response.status().as_u16();
    let body = response.bytes().await.unwrap_or_default();
    from_refusal(Refusal::parse(status, &body))
}

fn from_refusal(refusal: Refusal) -> CliError {
    CliError::Api { status: refusal.status, code: refusal.code_name().to_owned(), message: refusal.message }
}

impl Api {
    pub fn new(credentials: Credentials) -> Result<Self, CliError> {
        let http = hookflow_runner::client::api_http_client(concat!("hookflow-cli/", env!("CARGO_PKG_VERSION")));
        let as_key =
            hookflow_client::Credentials::api_key(credentials.api_key.expose().clone(), credentials.organization_id);
        let client = hookflow_client::Client::with_http(http, &credentials.base_url, as_key);
        Ok(Self { client, credentials })
    }

    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// The typed client under these credentials.
    pub fn client(&self) -> &hookflow_client::Client {
        &self.client
    }

    /// A client failure as the CLI reports it.
    pub fn error(&self, failure: ApiFailure) -> CliError {
        match failure {
            ApiFailure::Transport(e) => network_error(&self.credentials.base_url, &e),
            ApiFailure::Decode { error, .. } => {
                CliError::Network(format!("the server's answer could not be read: {error}"))
            }
            refused @ ApiFailure::Refused(_) => {
                from_refusal(refused.refusal().unwrap_or_else(|| Refusal::parse(0, b"")))
            }
        }
    }

    /// A request to `path` (relative to the base URL) with the key and organization headers.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.client.request(method, path)
    }

    /// Sends and answers the response if it is a success.
    pub async fn send_raw(&self, request: RequestBuilder) -> Result<Response, CliError> {
        self.client.send_raw(request).await.map_err(|e| self.error(e))
    }

    /// Sends and decodes the JSON answer.
    pub async fn send<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, CliError> {
        self.client.send(request).await.map_err(|e| self.error(e))
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, CliError> {
        self.client.get(path).await.map_err(|e| self.error(e))
    }

    pub async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<T, CliError> {
        self.client.post(path, body).await.map_err(|e| self.error(e))
    }

    pub async fn delete(&self, path: &str) -> Result<(), CliError> {
        self.client.delete(path).await.map_err(|e| self.error(e))
    }

    /// Every item of a list, following `next_cursor`.
    pub async fn list_all<T: DeserializeOwned>(&self, path: &str, query: &[(&str, &str)]) -> Result<Vec<T>, CliError> {
        self.client.list_all(path, query).await.map_err(|e| self.error(e))
    }
}
