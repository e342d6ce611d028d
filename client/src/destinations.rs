//! `/webhooks/{id}/destinations`: where an endpoint's captures are delivered, their deliveries, attempts and replay.

use crate::{ApiFailure, Client, Query, with_query};
use hookflow_shared::api::Page;
use hookflow_shared::api::destinations::{
    CreateDestination, Delivery, DeliveryAttempts, Destination, ReplayDeliveries, Replayed, UpdateDestination,
};
use std::fmt::Display;

/// One endpoint's destinations.
#[derive(Debug, Clone)]
pub struct Destinations<'a> {
    client: &'a Client,
    base: String,
}

impl Client {
    /// The destinations of endpoint `webhook`.
    pub fn destinations(&self, webhook: impl Display) -> Destinations<'_> {
        Destinations { client: self, base: format!("/webhooks/{webhook}/destinations") }
    }
}

impl Destinations<'_> {
    pub async fn create(&self, destination: &CreateDestination) -> Result<Destination, ApiFailure> {
        self.client.post(&self.base, destination).await
    }

    pub async fn list(&self) -> Result<Page<Destination>, ApiFailure> {
        self.client.get(&self.base).await
    }

    pub async fn get(&self, id: impl Display) -> Result<Destination, ApiFailure> {
        self.client.get(&format!("{}/{id}", self.base)).await
    }

    pub async fn update(&self, id: impl Display, update: &UpdateDestination) -> Result<Destination, ApiFailure> {
        self.client.patch(&format!("{}/{id}", self.base), update).await
    }

    pub async fn delete(&self, id: impl Display) -> Result<(), ApiFailure> {
        self.client.delete(&format!("{}/{id}", self.base)).await
    }

    /// Deliveries newest first (`status`, `limit`, `cursor`).
    pub async fn deliveries(&self, id: impl Display, query: Query<'_>) -> Result<Page<Delivery>, ApiFailure> {
        self.client.get(&with_query(&format!("{}/{id}/deliveries", self.base), query)).await
    }

    pub async fn delivery(&self, id: impl Display, delivery: impl Display) -> Result<Delivery, ApiFailure> {
        self.client.get(&format!("{}/{id}/deliveries/{delivery}", self.base)).await
    }

    pub async fn attempts(&self, id: impl Display, delivery: impl Display) -> Result<DeliveryAttempts, ApiFailure> {
        self.client.get(&format!("{}/{id}/deliveries/{delivery}/attempts", self.base)).await
    }

    pub async fn replay(&self, id: impl Display, replay: &ReplayDeliveries) -> Result<Replayed, ApiFailure> {
        self.client.post(&format!("{}/{id}/deliveries/replay", self.base), replay).await
    }
}
