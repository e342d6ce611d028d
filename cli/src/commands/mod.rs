//! The resource commands: flows, collections, API keys, webhooks and their destinations.

pub mod collections;
pub mod destinations;
pub mod flows;
pub mod forward;
pub mod import;
pub mod keys;
pub mod webhooks;
