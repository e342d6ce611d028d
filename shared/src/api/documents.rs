//! Schemas of the answers that are not one JSON value: raw bytes, server-sent event streams and NDJSON. Bytes and
//! lines are a string to a generated client (read whole or line by line); an event stream's schema is that of one
//! event as OpenAPI 3.1 models `text/event-stream` (`data`, `event`, `id`, `retry`); the descriptions say what the
//! lines and each event's `data` hold.

use std::borrow::Cow;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type};
use utoipa::{PartialSchema, ToSchema};

/// Declares a string schema named after the type, with its description.
macro_rules! text_document {
    ($(#[$meta:meta])* $name:ident, $format:expr, $description:expr) => {
        $(#[$meta])*
        #[derive(Debug)]
        pub struct $name;

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                let schema = ObjectBuilder::new().schema_type(Type::String).description(Some($description));
                let format: Option<SchemaFormat> = $format;
                schema.format(format).into()
            }
        }

        impl ToSchema for $name {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
        }
    };
}

text_document!(
    /// A captured body exactly as received.
    RawBody,
    Some(SchemaFormat::KnownFormat(KnownFormat::Binary)),
    "The bytes exactly as received."
);

/// Declares the schema of one server-sent event, named after the type, with what its `data` holds.
macro_rules! event_stream {
    ($(#[$meta:meta])* $name:ident, None, $description:expr) => {
        $(#[$meta])*
        #[derive(Debug)]
        pub struct $name;

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                let text = || ObjectBuilder::new().schema_type(Type::String);
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .property("data", text().content_media_type("application/json"))
                    .required("data")
                    .property("event", text())
                    .property("id", text())
                    .property("retry", ObjectBuilder::new().schema_type(Type::Integer))
                    .description(Some($description))
                    .into()
            }
        }

        impl ToSchema for $name {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
        }
    };
}

event_stream!(
    /// `GET /webhooks/{id}/stream`.
    CaptureEventStream,
    None,
    "Server-sent events, each `data` a JSON object with `type`: `request.captured` (`id` is the capture's id, \
     `data` the captured request, a `CapturedRequest` with `type` added, its body left out past 64 KiB with \
     `body_truncated`), or `stream.lagged` (`{\"type\": \"stream.lagged\", \"missed\": N}`) when the reader fell \
     behind; reconnect with `Last-Event-ID`. Comment lines keep the connection alive."
);

event_stream!(
    /// `GET /flows/{flow_id}/executions/{execution_id}/stream`.
    ExecutionEventStream,
    None,
    "Server-sent events, each `data` a JSON object with `type` first: `execution.status` (`status`), \
     `node.started` (`node_id`, `attempt`), `node.completed` (a `NodeResult` with `type`), and a final \
     `execution.completed` (`status`, `error`) after which the stream ends. Reconnect with `Last-Event-ID` to \
     resume after the last event seen."
);

text_document!(
    /// `GET /webhooks/{id}/requests/export?format=ndjson`.
    CaptureLines,
    None,
    "Newline-delimited JSON: one `CapturedRequest` per line, bodies whole, oldest first."
);

/// `GET /webhooks/{id}/requests/export?format=har`: a HAR 1.2 document (its `log` holds `entries`).
#[derive(Debug)]
pub struct HarDocument;

impl PartialSchema for HarDocument {
    fn schema() -> RefOr<Schema> {
        use utoipa::openapi::schema::AdditionalProperties;
        let log = ObjectBuilder::new()
            .schema_type(Type::Object)
            .additional_properties(Some(AdditionalProperties::FreeForm(true)))
            .description(Some("HAR 1.2 `log`: `version`, `creator` and one entry per capture (its `_signature` is the capture's `signature`)."));
        ObjectBuilder::new().schema_type(Type::Object).property("log", log).required("log").into()
    }
}

impl ToSchema for HarDocument {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("HarDocument")
    }
}
