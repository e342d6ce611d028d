//! The pure logic of flows that the server (validation, sandboxes) and the runner (execution) share.

pub mod assert;
mod assertion_schema;
pub mod budget;
pub mod definition;
pub mod extract;
pub mod json_schema;
pub mod names;
mod node_parts;
mod node_reader;
mod node_schema;
pub mod request_body;
pub(crate) mod request_parts;
pub mod schedule;
pub mod template;
pub mod webhook_node;
