//! `/webhooks`: endpoints, their captured requests, search, replay, signature re-checks and analytics.

use crate::{ApiFailure, Client, Query, with_query};
use hookflow_shared::api::Page;
use hookflow_shared::api::analytics::{MethodBreakdown, Volume};
use hookflow_shared::api::signatures::{VerifyCapture, VerifyResult};
use hookflow_shared::api::webhooks::{
    Capture, CreateWebhook, ReplayRequest, ReplayResult, SearchRequests, UpdateWebhook, Webhook,
};
use reqwest::Method;
use std::fmt::Display;

/// `/webhooks`: endpoints, their captured requests, replays and analytics.
#[derive(Debug, Clone, Copy)]
pub struct Webhooks<'a>(&'a Client);

impl<'a> Webhooks<'a> {
    pub(crate) fn of(client: &'a Client) -> Self {
        Self(client)
    }

    pub async fn create(&self, webhook: &CreateWebhook) -> Result<Webhook, ApiFailure> {
        self.0.post("/webhooks", webhook).await
    }

    pub async fn list(&self, query: Query<'_>) -> Result<Page<Webhook>, ApiFailure> {
        self.0.get(&with_query("/webhooks", query)).await
    }

    pub async fn get(&self, id: impl Display) -> Result<Webhook, ApiFailure> {
        self.0.get(&format!("/webhooks/{id}")).await
    }

    pub async fn update(&self, id: impl Display, update: &UpdateWebhook) -> Result<Webhook, ApiFailure> {
        self.0.patch(&format!("/webhooks/{id}"), update).await
    }

    pub async fn delete(&self, id: impl Display) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/webhooks/{id}")).await
    }

    pub async fn requests(&self, id: impl Display, query: Query<'_>) -> Result<Page<Capture>, ApiFailure> {
        self.0.get(&with_query(&format!("/webhooks/{id}/requests"), query)).await
    }

    pub async fn request(&self, id: impl Display, request: impl Display) -> Result<Capture, ApiFailure> {
        self.0.get(&format!("/webhooks/{id}/requests/{request}")).await
    }

    pub async fn delete_request(&self, id: impl Display, request: impl Display) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/webhooks/{id}/requests/{request}")).await
    }

    /// Deletes every captured request of the endpoint.
    pub async fn clear_requests(&self, id: impl Display) -> Result<(), ApiFailure> {
        self.0.delete(&format!("/webhooks/{id}/requests")).await
    }

    /// A captured request's body, byte for byte.
    pub async fn body(&self, id: impl Display, request: impl Display) -> Result<bytes::Bytes, ApiFailure> {
        let response =
            self.0.send_raw(self.0.request(Method::GET, &format!("/webhooks/{id}/requests/{request}/body"))).await?;
        response.bytes().await.map_err(ApiFailure::Transport)
    }

    /// `GET /webhooks/{id}/requests/export` (`format=ndjson|har`, `q=...`): the response, to stream or read.
    pub async fn export(&self, id: impl Display, query: Query<'_>) -> Result<reqwest::Response, ApiFailure> {
        let path = with_query(&format!("/webhooks/{id}/requests/export"), query);
        self.0.send_raw(self.0.request(Method::GET, &path)).await
    }

    pub async fn search(&self, id: impl Display, search: &SearchRequests) -> Result<Page<Capture>, ApiFailure> {
        self.0.post(&format!("/webhooks/{id}/requests/search"), search).await
    }

    pub async fn replay(
        &self,
        id: impl Display,
        request: impl Display,
        replay: &ReplayRequest,
    ) -> Result<ReplayResult, ApiFailure> {
        self.0.post(&format!("/webhooks/{id}/requests/{request}/replay"), replay).await
    }

    pub async fn volume(&self, id: impl Display, query: Query<'_>) -> Result<Volume, ApiFailure> {
        self.0.get(&with_query(&format!("/webhooks/{id}/analytics/volume"), query)).await
    }

    pub async fn methods(&self, id: impl Display, query: Query<'_>) -> Result<MethodBreakdown, ApiFailure> {
        self.0.get(&with_query(&format!("/webhooks/{id}/analytics/methods"), query)).await
    }

    /// Checks a capture's signature again, with the stored secrets or a candidate `secret`.
    pub async fn verify(
        &self,
        id: impl Display,
        request: impl Display,
        verify: &VerifyCapture,
    ) -> Result<VerifyResult, ApiFailure> {
        self.0.post(&format!("/webhooks/{id}/requests/{request}/verify"), verify).await
    }
}
