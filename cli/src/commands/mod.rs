//! The resource commands: flows, API keys and webhooks.

pub mod flows;
pub mod forward;
pub mod keys;
pub mod webhooks;
