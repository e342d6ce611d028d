//! Request and response bodies of the REST API, shared by the server, the CLI and the tests.

pub mod admin;
pub mod alerts;
pub mod analytics;
pub mod answers;
pub mod batches;
pub mod catalog;
pub mod collections;
pub mod destinations;
pub mod documents;
pub mod executions;
pub mod fields;
pub mod flows;
pub mod flows_as_code;
pub mod imports;
pub mod node_results;
pub mod page;
pub mod patch;
pub mod people;
pub mod pools;
pub mod resources;
pub mod rules;
pub mod runners;
pub mod schedules;
pub mod search;
pub mod signatures;
pub mod sources;
pub mod triggers;
pub mod webhooks;

pub use page::Page;
pub use patch::Patch;
