//! Webhook signature verification, pure (no I/O): an endpoint's `VerificationSettings` become a [`Verifier`]
//! (keys made once), which judges a captured [`Message`] (headers, body, URL, time of receipt) and answers a
//! [`Check`]: valid (which secret), invalid (why, and what was expected) or missing. One file per family of
//! schemes; docs/signatures.md describes each as implemented.
//!
//! - `common`: the message and the check, header lookup, offered signatures, timestamps, the HMAC judgement.
//! - `settings`: the checks on the settings and the keys made from the secrets.
//! - `verifier`: `Verifier`, which picks the scheme.
//! - `stripe` (Stripe, Paddle), `slack` (Slack, Zoom), `standard_webhooks` (and Svix), `body` (GitHub,
//!   Shopify, Linear, Square, GitLab), `twilio`, `discord`, `generic` (the `hmac` scheme).

mod body;
mod common;
mod discord;
mod generic;
mod settings;
mod slack;
mod standard_webhooks;
mod stripe;
mod twilio;
mod verifier;

pub use common::{Check, MAX_ENTRIES, Message};
pub use settings::SettingsError;
pub use standard_webhooks::{secret_bytes as standard_webhooks_secret, sign as standard_webhooks_sign};
pub use verifier::Verifier;

#[cfg(test)]
mod tests;
