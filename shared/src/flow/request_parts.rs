//! The parts every request as written carries alike (headers, query, body), declared once for the bodies that
//! hold them: an inline request of a flow, a reference's overrides, a collection's request.

/// Declares a request as written (inline in a flow, a reference's overrides, a collection's request): its own
/// fields, then the headers and query (`name: value`, absent is empty) and the body every one carries alike, then
/// its fields after those. These bodies refuse unknown fields, which rules out a flattened common part.
macro_rules! with_request_parts {
    (
        $(#[$doc:meta])*
        pub struct $name:ident {
            $($(#[$meta:meta])* pub $field:ident: $ty:ty,)*
            ..parts,
            $($(#[$after_meta:meta])* pub $after:ident: $after_ty:ty,)*
        }
    ) => {
        $(#[$doc])*
        pub struct $name {
            $($(#[$meta])* pub $field: $ty,)*
            #[serde(default)]
            pub headers: std::collections::BTreeMap<String, String>,
            #[serde(default)]
            pub query: std::collections::BTreeMap<String, String>,
            pub body: Option<String>,
            $($(#[$after_meta])* pub $after: $after_ty,)*
        }
    };
}
pub(crate) use with_request_parts;
