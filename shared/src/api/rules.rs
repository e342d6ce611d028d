//! The limits request fields are held to, in one place: the numbers the handlers enforce and the JSON Schema the
//! OpenAPI document states for them (`#[schema(schema_with = ...)]`), so the two cannot drift apart.

use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, SchemaType, Type,
};
use utoipa::openapi::{KnownFormat, RefOr};

/// Longest display name (flows, endpoints, collections, requests, keys, runners, organizations), in characters.
pub const NAME_MAX: usize = 200;
/// Longest description of a flow or an endpoint.
pub const SHORT_TEXT_MAX: usize = 2_000;
/// Longest description of a collection or a collection request, and longest collection variable value.
pub const LONG_TEXT_MAX: usize = 10_000;
/// Tags of a flow, and labels of a runner or a launch: how many, and how long each.
pub const TAGS_MAX: usize = 20;
pub const TAG_MAX: usize = 64;
/// Longest secret or variable value, in characters.
pub const VALUE_MAX: usize = 65_536;
/// Longest runner version and host field.
pub const RUNNER_TEXT_MAX: usize = 100;
/// Variables of a collection.
pub const COLLECTION_VARIABLES_MAX: usize = 200;

/// Characters that are not white space (exactly Rust's `char::is_whitespace`): a name must hold one.
pub const NOT_BLANK: &str = "[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
/// A label: no white space at either end.
pub const TRIMMED: &str = "^[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]\
    ([\\s\\S]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000])?$";
/// Triggers one endpoint holds at most.
pub const TRIGGERS_MAX: usize = 10;
/// Names one trigger extracts from a capture's body at most.
pub const EXTRACTS_MAX: usize = 20;
/// Names templates use (`{{NAME}}`, `{{secret.NAME}}`): organization secrets and variables.
pub const RESOURCE_NAME: &str = "^[A-Za-z_][A-Za-z0-9_]{0,127}$";
/// Keys of a flow's environments.
pub const ENVIRONMENT_KEY: &str = "^[A-Za-z0-9_-]{1,64}$";
/// Names of a collection's variables.
pub const COLLECTION_VARIABLE: &str = "^[A-Za-z0-9_-]{1,100}$";

/// Whether a name is blank: only white space (or nothing).
pub fn is_blank(text: &str) -> bool {
    text.chars().all(char::is_whitespace)
}

/// Whether `name` matches [`RESOURCE_NAME`].
pub fn is_resource_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.len() <= 128
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether `key` matches [`ENVIRONMENT_KEY`] (`max` 64) or [`COLLECTION_VARIABLE`] (`max` 100).
pub fn is_key(key: &str, max: usize) -> bool {
    !key.is_empty() && key.len() <= max && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

fn string(min: usize, max: usize, pattern: Option<&str>) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length((min > 0).then_some(min))
        .max_length(Some(max))
        .pattern(pattern)
}

fn nullable(builder: ObjectBuilder, kind: Type) -> ObjectBuilder {
    builder.schema_type(SchemaType::from_iter([kind, Type::Null]))
}

/// A display name: 1 to 200 characters, not only white space (it is stored trimmed).
pub fn name() -> ObjectBuilder {
    string(1, NAME_MAX, Some(NOT_BLANK)).description(Some("1 to 200 characters, not only white space."))
}

/// An optional display name.
pub fn optional_name() -> ObjectBuilder {
    nullable(name(), Type::String)
}

/// A flow's or an endpoint's description.
pub fn short_text() -> ObjectBuilder {
    nullable(string(0, SHORT_TEXT_MAX, None), Type::String)
}

/// A collection's or a collection request's description.
pub fn long_text() -> ObjectBuilder {
    nullable(string(0, LONG_TEXT_MAX, None), Type::String)
}

fn tag_list(item: ObjectBuilder) -> ArrayBuilder {
    ArrayBuilder::new().items(item).max_items(Some(TAGS_MAX))
}

/// Tags of a flow: at most 20, each 1 to 64 characters and not only white space (stored trimmed).
pub fn tags() -> ArrayBuilder {
    tag_list(string(1, TAG_MAX, Some(NOT_BLANK))).description(Some("At most 20 tags of 1 to 64 characters."))
}

/// Tags, or null.
pub fn optional_tags() -> ArrayBuilder {
    tags().schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
}

/// Labels of a runner or a launch: at most 20, each 1 to 64 characters with no white space at either end.
pub fn labels() -> ArrayBuilder {
    tag_list(string(1, TAG_MAX, Some(TRIMMED)))
        .description(Some("At most 20 labels of 1 to 64 characters, without surrounding white space."))
}

/// Labels, or absent: the same rule as `labels` (a PATCH keeps them when absent).
pub fn optional_labels() -> ArrayBuilder {
    labels().schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
}

/// An `http` or `https` URL the server sends to: at most 2,048 characters (its host must also be one the
/// server's network policy allows, which a schema cannot say).
pub fn http_url() -> ObjectBuilder {
    string(1, 2048, Some("^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\\s]+([/?][^#\\s]*)?$"))
        .format(Some(utoipa::openapi::SchemaFormat::Custom("uri".into())))
        .description(Some("An http or https URL of at most 2,048 characters, without credentials or a fragment."))
}

/// An optional `http_url`.
pub fn optional_http_url() -> ObjectBuilder {
    nullable(http_url(), Type::String)
}

/// Retry delays in seconds after each failed attempt: 0 to 20 entries, each 1 to 86,400.
pub fn retry_schedule() -> ArrayBuilder {
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).maximum(Some(86_400)))
        .max_items(Some(20))
}

/// A secret's or a variable's name (in the path).
pub fn resource_name() -> ObjectBuilder {
    string(1, 128, Some(RESOURCE_NAME))
}

/// A secret's or a variable's value.
pub fn value() -> ObjectBuilder {
    string(0, VALUE_MAX, None)
}

/// An environment's key (in the path).
pub fn environment_key() -> ObjectBuilder {
    string(1, 64, Some(ENVIRONMENT_KEY))
}

/// An optional environment key where `null` reads as absent.
pub fn environment_key_or_null() -> ObjectBuilder {
    nullable(environment_key(), Type::String).description(Some("Key of an environment; absent or null: none."))
}

/// A collection's variables: at most 200, names of letters, digits, `_` and `-`, values of at most 10,000
/// characters.
pub fn collection_variables() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property_names(Some(string(1, 100, Some(COLLECTION_VARIABLE))))
        .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(Schema::Object(
            string(0, LONG_TEXT_MAX, None).build(),
        )))))
        .max_properties(Some(COLLECTION_VARIABLES_MAX))
}

/// What a trigger extracts from a capture's body: at most 20 names (as collection variables are named), each
/// to an RFC 9535 JSONPath of at most 4 KiB.
pub fn trigger_extracts() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property_names(Some(string(1, 100, Some(COLLECTION_VARIABLE))))
        .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(Schema::Object(
            string(1, 4096, None).build(),
        )))))
        .max_properties(Some(EXTRACTS_MAX))
}

/// A collection's variables, or null.
pub fn optional_collection_variables() -> OneOfBuilder {
    OneOfBuilder::new()
        .item(utoipa::openapi::Ref::from_schema_name("CollectionVariableMap"))
        .item(ObjectBuilder::new().schema_type(Type::Null))
}

/// Runner versions and host fields.
pub fn runner_text() -> ObjectBuilder {
    string(0, RUNNER_TEXT_MAX, None)
}

/// Largest default `max_body_bytes` of an organization.
pub const BODY_LIMIT_MAX: i64 = 10 * 1024 * 1024;
/// Largest `max_body_bytes` of an endpoint (issue #51).
pub const ENDPOINT_BODY_LIMIT_MAX: i64 = 32 * 1024 * 1024;

/// An organization's default `max_body_bytes`, or null.
pub fn optional_body_limit() -> ObjectBuilder {
    body_limit(BODY_LIMIT_MAX)
}

/// An endpoint's `max_body_bytes`, or null.
pub fn optional_endpoint_body_limit() -> ObjectBuilder {
    body_limit(ENDPOINT_BODY_LIMIT_MAX)
}

fn body_limit(max: i64) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Integer, Type::Null]))
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
        .minimum(Some(1))
        .maximum(Some(max))
}

/// The methods a collection request may use, in any case.
pub fn method() -> ObjectBuilder {
    let alternatives: Vec<String> = crate::flow::request_parts::METHODS
        .iter()
        .map(|m| m.chars().map(|c| format!("[{c}{}]", c.to_ascii_lowercase())).collect())
        .collect();
    string(1, 7, Some(&format!("^({})$", alternatives.join("|"))))
        .description(Some("GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS, in any case."))
}

/// The status of a custom capture answer: 200 to 599, not a redirect.
pub fn answer_status() -> OneOfBuilder {
    let range =
        |low: i64, high: i64| ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(low)).maximum(Some(high));
    OneOfBuilder::new().item(range(200, 299)).item(range(400, 599)).description(Some("200 to 599, not a redirect."))
}

/// Which version a launch runs: a published version number or `"latest"`; absent runs the draft.
pub fn version_selector() -> OneOfBuilder {
    OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).maximum(Some(i64::from(i32::MAX))))
        .item(utoipa::openapi::Ref::from_schema_name("LatestVersion"))
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(Some("A published version number or `\"latest\"`; absent or null runs the draft."))
}

/// Tags a launch selects flows by: at least one.
pub fn launch_tags() -> ArrayBuilder {
    tags().min_items(Some(1)).description(Some("1 to 20 tags of 1 to 64 characters; flows carrying all of them run."))
}

/// Hosts a secret may be sent to: at most 20 host names, or `*.` and a domain.
pub fn host_patterns() -> ArrayBuilder {
    ArrayBuilder::new().items(string(1, 253, Some("^(\\*\\.)?[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*$"))).max_items(Some(20))
}

/// A collection request's URL: not blank (it may use templates: `{{base_url}}/pets`).
pub fn request_url() -> ObjectBuilder {
    string(1, usize::MAX, Some(NOT_BLANK)).max_length(None::<usize>)
}

/// Scopes a new key holds: at least one.
pub fn scopes() -> ArrayBuilder {
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(RefOr::Ref(utoipa::openapi::Ref::from_schema_name("Scope")))
        .min_items(Some(1))
}

/// The presets a key can be made from.
pub fn preset() -> OneOfBuilder {
    OneOfBuilder::new()
        .item(utoipa::openapi::Ref::from_schema_name("KeyPreset"))
        .item(ObjectBuilder::new().schema_type(Type::Null))
}

/// Schemas the rules above refer to by name (a union member named, not numbered, in generated clients), for the
/// document's components.
pub fn named_schemas() -> [(&'static str, RefOr<Schema>); 2] {
    let presets = crate::scope::Preset::ALL.iter().map(|p| p.name());
    let preset = ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(presets))
        .description(Some("A named bundle of scopes (`GET /permissions` lists them)."));
    let variables = collection_variables().description(Some("A collection's variables by name."));
    [("KeyPreset", preset.into()), ("CollectionVariableMap", variables.into())]
}

/// A timestamp in a query: RFC 3339.
pub fn timestamp() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String).format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
}

/// Headers an endpoint's custom capture answer may set besides `X-` names of its own: the answer is served on the
/// API's (and the app's) origin, often through a keep-alive proxy.
pub const CUSTOM_RESPONSE_HEADERS: [&str; 3] = ["content-type", "content-language", "retry-after"];

/// `X-` headers a custom answer may still not set: browser policy, the server's own request id, and the
/// internal-redirect, file-serving, cache-purge and health instructions of proxies placed in front (nginx, Apache,
/// lighttpd, LiteSpeed, Envoy).
const REFUSED_X_HEADERS: [&str; 14] = [
    "x-content-type-options",
    "x-frame-options",
    "x-xss-protection",
    "x-dns-prefetch-control",
    "x-permitted-cross-domain-policies",
    "x-request-id",
    "x-forwarded-",
    "x-real-ip",
    "x-accel-",
    "x-sendfile",
    "x-lighttpd-",
    "x-envoy-",
    "x-litespeed-",
    "x-sendfile2",
];

/// Whether a custom capture answer may set this header (any letter case): an allow-list, so message framing
/// (`Content-Length`, `Transfer-Encoding`), hop-by-hop (`Connection`, `Upgrade`), cookies, redirects, caching and
/// browser-state headers (`Clear-Site-Data`, `Service-Worker-Allowed`, CSP, CORS) are never set by a tenant.
pub fn custom_response_header_allowed(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    if CUSTOM_RESPONSE_HEADERS.contains(&name.as_str()) {
        return true;
    }
    let own = name.len() > 2 && name.starts_with("x-");
    own && !REFUSED_X_HEADERS.iter().any(|refused| {
        if refused.ends_with('-') {
            name.starts_with(refused)
        } else {
            name == *refused || name.starts_with(&format!("{refused}-"))
        }
    })
}

/// An email address as the server takes it (`is_email`): printable ASCII without spaces (so lower-casing is the
/// same in Rust and in PostgreSQL); a local part without `@`, an `@`, and a domain holding a dot but not starting or
/// ending with one; 3 to 254 characters.
pub fn email_pattern() -> &'static str {
    "^[\\x21-\\x3f\\x41-\\x7e]+@[\\x21-\\x2d\\x2f-\\x7e][\\x21-\\x7e]*\\.[\\x21-\\x7e]*[\\x21-\\x2d\\x2f-\\x7e]$"
}

/// Whether `email` is an address by the rule `email_pattern` states.
pub fn is_email(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else { return false };
    !local.is_empty()
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && (3..=254).contains(&email.len())
        && email.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// An email address (see `email_pattern`).
pub fn email() -> ObjectBuilder {
    string(3, 254, Some(email_pattern())).description(Some("An email address (stored lower-cased)."))
}

/// An optional email address.
pub fn optional_email() -> ObjectBuilder {
    nullable(email(), Type::String)
}

/// A pattern matching `word` in any letter case (`[Cc][Oo]...`), for rules JSON Schema must state without flags.
fn any_case(word: &str) -> String {
    word.chars()
        .map(|c| {
            if c.is_ascii_alphabetic() {
                format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The header names `custom_response_header_allowed` admits, as a pattern: the listed names, or `X-` and a token
/// that is none of the refused ones.
pub fn custom_response_header_pattern() -> String {
    let listed: Vec<String> = CUSTOM_RESPONSE_HEADERS.iter().map(|h| any_case(h)).collect();
    let refused: Vec<String> = REFUSED_X_HEADERS
        .iter()
        .map(|h| {
            let rest = any_case(&h[2..]);
            if h.ends_with('-') { rest } else { format!("{rest}(?:-|$)") }
        })
        .collect();
    format!("^(?:{}|[Xx]-(?!{})[!#$%&'*+.^_`|~0-9A-Za-z-]+)$", listed.join("|"), refused.join("|"))
}

/// A custom answer's headers: allowed names (`custom_response_header_pattern`), values a header can carry (no
/// control character but tab).
pub fn custom_response_headers() -> ObjectBuilder {
    let value =
        ObjectBuilder::new().schema_type(Type::String).pattern(Some("^[^\\u0000-\\u0008\\u000a-\\u001f\\u007f]*$"));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property_names(Some(
            ObjectBuilder::new().schema_type(Type::String).pattern(Some(custom_response_header_pattern())),
        ))
        .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(Schema::Object(value.build())))))
}

/// `[name, value]` header pairs in received order: each a two-string tuple stated with `prefixItems` and length
/// bounds, its items typed as strings (client generators reject the `items: false` a tuple derive writes).
pub fn header_pairs() -> ArrayBuilder {
    let string = || ObjectBuilder::new().schema_type(Type::String);
    let pair = ArrayBuilder::new()
        .items(string())
        .prefix_items([string().build(), string().build()])
        .min_items(Some(2))
        .max_items(Some(2));
    ArrayBuilder::new()
        .items(pair)
        .description(Some("`[name, value]` pairs in received order, case kept, duplicates kept."))
}

#[cfg(test)]
mod email_tests {
    use super::*;

    #[test]
    fn the_email_rule_and_its_pattern_agree() {
        let pattern = regex::Regex::new(email_pattern()).expect("pattern");
        let cases = [
            ("ada@example.com", true),
            ("a@b.c", true),
            ("a@b@c.d", true),
            ("A+tag@Example.COM", true),
            (" ada@example.com", false),
            ("ada@example.com\n", false),
            ("ada@example", false),
            ("ada@.example.com", false),
            ("ada@example.com.", false),
            ("@example.com", false),
            ("adä@example.com", false),
            ("a b@example.com", false),
            ("a@b", false),
        ];
        for (email, valid) in cases {
            assert_eq!(is_email(email), valid, "{email:?}");
            assert_eq!(pattern.is_match(email), valid, "pattern: {email:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_blank_is_rust_white_space() {
        let not_blank = regex::Regex::new(NOT_BLANK).expect("pattern");
        let trimmed = regex::Regex::new(TRIMMED).expect("pattern");
        for c in (0..0x3100).filter_map(char::from_u32) {
            let text = c.to_string();
            assert_eq!(is_blank(&text), !not_blank.is_match(&text), "{c:?}");
            assert_eq!(text.trim() == text, trimmed.is_match(&text), "{c:?}");
        }
        assert!(trimmed.is_match("a b") && !trimmed.is_match("a ") && !trimmed.is_match(""));
    }

    #[test]
    fn names_and_keys() {
        assert!(is_resource_name("_A1") && !is_resource_name("1a") && !is_resource_name(""));
        assert!(!is_resource_name(&"a".repeat(129)));
        assert!(is_key("prod-1_x", 64) && !is_key("a b", 64) && !is_key(&"a".repeat(65), 64));
    }
}
