//! The resource commands: flows, collections, API keys and webhooks.

pub mod collections;
pub mod flows;
pub mod forward;
pub mod keys;
pub mod webhooks;
