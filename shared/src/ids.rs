//! Typed ids: one newtype over a UUID per kind of thing the API names, so an organization's id cannot be passed
//! where a flow's is expected. Each is exactly a UUID everywhere else: in JSON (`#[serde(transparent)]`), in
//! PostgreSQL (feature `sqlx`: `uuid` columns and `uuid[]` arrays), in `Display`/`FromStr`/`Debug`, and in the
//! OpenAPI document (a string of format `uuid`).
//!
//! utoipa's derive refers to any field type it does not know by name as a `$ref` to a named component, whatever
//! its `PartialSchema` says; the server's document therefore inlines these components back into plain UUID schemas
//! after assembly (`SCHEMA_NAMES` lists them), so the document reads exactly as it did when the fields were
//! `Uuid`.

use uuid::Uuid;

macro_rules! ids {
    ($($(#[$doc:meta])* $name:ident;)*) => {
        $(
            $(#[$doc])*
            #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
            #[serde(transparent)]
            #[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
            pub struct $name(Uuid);

            impl $name {
                /// Wraps a UUID known to name this kind of thing.
                pub const fn new(uuid: Uuid) -> Self {
                    Self(uuid)
                }

                /// A new time-ordered (v7) id.
                pub fn now_v7() -> Self {
                    Self(Uuid::now_v7())
                }

                /// The all-zero id, which names nothing.
                pub const fn nil() -> Self {
                    Self(Uuid::nil())
                }

                /// Whether this is the all-zero id.
                pub const fn is_nil(self) -> bool {
                    self.0.is_nil()
                }

                /// The UUID underneath.
                pub const fn as_uuid(self) -> Uuid {
                    self.0
                }
            }

            impl From<Uuid> for $name {
                fn from(uuid: Uuid) -> Self {
                    Self(uuid)
                }
            }

            impl From<$name> for Uuid {
                fn from(id: $name) -> Self {
                    id.0
                }
            }

            impl std::fmt::Display for $name {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    std::fmt::Display::fmt(&self.0, f)
                }
            }

            /// Prints as the UUID does, so logs read as they did before ids had types.
            impl std::fmt::Debug for $name {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    std::fmt::Debug::fmt(&self.0, f)
                }
            }

            impl std::str::FromStr for $name {
                type Err = uuid::Error;

                fn from_str(text: &str) -> Result<Self, Self::Err> {
                    Uuid::from_str(text).map(Self)
                }
            }

            impl utoipa::PartialSchema for $name {
                fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                    uuid_schema(false).into()
                }
            }

            impl utoipa::ToSchema for $name {
                fn name() -> std::borrow::Cow<'static, str> {
                    std::borrow::Cow::Borrowed(stringify!($name))
                }
            }
        )*

        /// The component names utoipa gives the ids (each type's name), for the pass that inlines them.
        pub const SCHEMA_NAMES: &[&str] = &[$(stringify!($name)),*];
    };
}

ids! {
    /// An organization: the tenant every resource belongs to.
    OrgId;
    /// A person's account.
    UserId;
    /// A person's signed-in session.
    SessionId;
    /// An invitation to join an organization.
    InvitationId;
    /// An API key.
    ApiKeyId;
    /// An inbound webhook endpoint.
    WebhookId;
    /// A request captured by a webhook endpoint.
    CaptureId;
    /// A flow.
    FlowId;
    /// A published version of a flow.
    FlowVersionId;
    /// One execution (run) of a flow.
    ExecutionId;
    /// One attempt of an execution as a runner claimed it.
    JobId;
    /// A runner (installed, or the server's embedded one).
    RunnerId;
    /// A destination captures of an endpoint are delivered to.
    DestinationId;
    /// One capture's delivery to one destination.
    DeliveryId;
    /// A request collection.
    CollectionId;
    /// A request of a collection.
    CollectionRequestId;
    /// A schedule of a flow.
    ScheduleId;
    /// A batch: one execution per row of a data-driven launch.
    BatchId;
}

/// The schema of a UUID as utoipa writes one for a `Uuid` (or, when `nullable`, an `Option<Uuid>`) field.
pub fn uuid_schema(nullable: bool) -> utoipa::openapi::Object {
    use utoipa::openapi::schema::{KnownFormat, SchemaFormat, SchemaType, Type};
    let schema_type =
        if nullable { SchemaType::from_iter([Type::String, Type::Null]) } else { SchemaType::Type(Type::String) };
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(schema_type)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "0190e1f6-58a2-7cc3-9a1b-7f7b6d2a4c01";

    #[test]
    fn json_text_and_debug_are_the_uuid() {
        let uuid: Uuid = TEXT.parse().expect("uuid");
        let id: FlowId = TEXT.parse().expect("id");
        assert_eq!(id, FlowId::new(uuid));
        assert_eq!(serde_json::to_string(&id).expect("json"), serde_json::to_string(&uuid).expect("json"));
        assert_eq!(serde_json::from_str::<FlowId>(&format!("\"{TEXT}\"")).expect("de"), id);
        assert_eq!(id.to_string(), TEXT);
        assert_eq!(format!("{id:?}"), format!("{uuid:?}"));
        assert_eq!(Uuid::from(id), uuid);
    }

    #[test]
    fn malformed_ids_fail_as_uuids_do() {
        let ours = serde_json::from_str::<OrgId>("\"nope\"").expect_err("refused").to_string();
        let theirs = serde_json::from_str::<Uuid>("\"nope\"").expect_err("refused").to_string();
        assert_eq!(ours, theirs);
        assert!("nope".parse::<OrgId>().is_err());
    }

    #[test]
    fn schema_is_a_uuid_string_named_after_the_type() {
        use utoipa::{PartialSchema, ToSchema};
        let schema = serde_json::to_value(JobId::schema()).expect("json");
        assert_eq!(schema, serde_json::json!({"type": "string", "format": "uuid"}));
        assert_eq!(JobId::name(), "JobId");
        assert!(SCHEMA_NAMES.contains(&"JobId"));
        let nullable = serde_json::to_value(uuid_schema(true)).expect("json");
        assert_eq!(nullable, serde_json::json!({"type": ["string", "null"], "format": "uuid"}));
    }
}
