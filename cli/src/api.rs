//! The REST client: every call carries the key and organization headers, and every refusal becomes a
//! `CliError::Api` with the server's error code and message (never the key).

use crate::config::Credentials;
use crate::error::CliError;
use hookflow_shared::api::page::Page;
use hookflow_shared::wire::{Refusal, header};
use reqwest::{Method, RequestBuilder, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;

#[derive(Debug, Clone)]
pub struct Api {
    http: reqwest::Client,
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
    let refusal = Refusal::parse(status, &body);
    CliError::Api { status, code: refusal.code_name().to_owned(), message: refusal.message }
}

impl Api {
    pub fn new(credentials: Credentials) -> Result<Self, CliError> {
        let http = hookflow_runner::client::api_http_client(concat!("hookflow-cli/", env!("CARGO_PKG_VERSION")));
        Ok(Self { http, credentials })
    }

    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    /// A request to `path` (relative to the base URL) with the key and organization headers.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.credentials.base_url))
            .header(header::API_KEY, self.credentials.api_key.expose())
            .header(header::ORGANIZATION, self.credentials.organization_id.to_string())
    }

    /// Sends and answers the response if it is a success.
    pub async fn send_raw(&self, request: RequestBuilder) -> Result<Response, CliError> {
        let response = request.send().await.map_err(|e| network_error(&self.credentials.base_url, &e))?;
        if response.status().is_success() { Ok(response) } else { Err(refusal(response).await) }
    }

    /// Sends and decodes the JSON answer.
    pub async fn send<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, CliError> {
        let response = self.send_raw(request).await?;
        response.json().await.map_err(|e| CliError::Network(format!("the server's answer could not be read: {e}")))
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, CliError> {
        self.send(self.request(Method::GET, path)).await
    }

    pub async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(&self, path: &str, body: &B) -> Result<T, CliError> {
        self.send(self.request(Method::POST, path).json(body)).await
    }

    pub async fn delete(&self, path: &str) -> Result<(), CliError> {
        self.send_raw(self.request(Method::DELETE, path)).await.map(|_| ())
    }

    /// Every item of a list, following `next_cursor`.
    pub async fn list_all<T: DeserializeOwned>(&self, path: &str, query: &[(&str, &str)]) -> Result<Vec<T>, CliError> {
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
