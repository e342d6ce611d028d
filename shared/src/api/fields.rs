//! Request fields held to the limits of `rules`, as types: a body is parsed into them once (`TryFrom`, which serde
//! calls while reading it), so a handler holds a name, a text or a list of labels that keeps its rule already. A
//! refusal says why with the field's place left open ([`Refusal`]); whoever knows where the value sat fills it in.
//! Each serializes as the plain value it was given; the OpenAPI schema stays on the field (`schema_with`).

use crate::api::rules::{
    COLLECTION_VARIABLES_MAX, LONG_TEXT_MAX, NAME_MAX, RUNNER_TEXT_MAX, SHORT_TEXT_MAX, TAG_MAX, TAGS_MAX, VALUE_MAX,
    is_blank, is_email, is_key,
};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// Why a value broke its rule: the 400's message with [`Refusal::FIELD`] where the field's name goes
/// (`` `{field}` must be 1 to 200 characters, not only white space ``).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(String);

impl Refusal {
    /// Where the field's name goes in a refusal's message.
    pub const FIELD: &'static str = "{field}";
    /// What a refusal's text begins with when serde carries it (serde keeps nothing of an error but its text): the
    /// server's JSON reader looks for it and fills in the field's path.
    pub const MARK: &'static str = "refused: ";

    pub(crate) fn new(template: impl Into<String>) -> Self {
        Refusal(template.into())
    }

    /// The message, for a field named `field`. The field's place comes before any text of the value's own.
    pub fn for_field(&self, field: &str) -> String {
        self.0.replacen(Self::FIELD, field, 1)
    }

    /// The refusal a message of serde's carries (its [`fmt::Display`] text), or `None` for any other message.
    pub fn from_message(message: &str) -> Option<Refusal> {
        message.strip_prefix(Self::MARK).map(Refusal::new)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", Self::MARK, self.0)
    }
}

impl std::error::Error for Refusal {}

/// What every text field shares: read as `&str` (through the type's `as_str`), sent as the text it was given,
/// parsed from `&str` (and `str::parse`) as from `String`.
macro_rules! text_field {
    ($name:ident) => {
        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                self.as_str()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = Refusal;

            fn try_from(text: &str) -> Result<Self, Refusal> {
                Self::try_from(text.to_owned())
            }
        }

        impl std::str::FromStr for $name {
            type Err = Refusal;

            fn from_str(text: &str) -> Result<Self, Refusal> {
                Self::try_from(text)
            }
        }
    };
}

/// A display name (flows, endpoints, collections, keys, runners, organizations): 1 to 200 characters, not only
/// white space. It keeps the text as sent (what it serializes to: an idempotency hash or an audit entry sees the
/// request that came); [`Name::as_str`] is the name as stored, trimmed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Name(String);

impl Name {
    /// The name as stored: trimmed.
    pub fn as_str(&self) -> &str {
        self.0.trim()
    }
}

impl TryFrom<String> for Name {
    type Error = Refusal;

    fn try_from(text: String) -> Result<Self, Refusal> {
        if is_blank(&text) || text.chars().count() > NAME_MAX {
            return Err(Refusal::new(format!("`{{field}}` must be 1 to {NAME_MAX} characters, not only white space")));
        }
        Ok(Name(text))
    }
}

text_field!(Name);

/// Declares a free text of at most `$max` characters, stored as given.
macro_rules! bounded_text {
    ($(#[$doc:meta])* $name:ident, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
        #[serde(try_from = "String")]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_inner(self) -> String {
                self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = Refusal;

            fn try_from(text: String) -> Result<Self, Refusal> {
                if text.chars().count() > $max {
                    return Err(Refusal::new(format!("`{{field}}` must be at most {} characters", $max)));
                }
                Ok($name(text))
            }
        }

        text_field!($name);
    };
}

bounded_text!(
    /// A flow's or an endpoint's description, a version's note: at most 2,000 characters.
    ShortText,
    SHORT_TEXT_MAX
);
bounded_text!(
    /// A collection's or a collection request's description: at most 10,000 characters.
    LongText,
    LONG_TEXT_MAX
);
bounded_text!(
    /// A runner's version and host fields: at most 100 characters.
    RunnerText,
    RUNNER_TEXT_MAX
);
bounded_text!(
    /// A secret's or a variable's value, a capture answer's body: at most 65,536 characters.
    ValueText,
    VALUE_MAX
);

/// An email address by the rule of `rules::email_pattern`, lower-cased (how it is stored and looked up).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Email(String);

impl Email {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Email {
    type Error = Refusal;

    fn try_from(text: String) -> Result<Self, Refusal> {
        if !is_email(&text) {
            return Err(Refusal::new("invalid field `{field}`"));
        }
        Ok(Email(text.to_ascii_lowercase()))
    }
}

impl fmt::Debug for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

text_field!(Email);

/// Declares a list or map field with what every one shares: its derives (it serializes as sent; its `TryFrom`,
/// named by the `serde(try_from)` it is given, parses it), read through `Deref` (as a slice, a map), taken back by
/// `into_inner`.
macro_rules! collection_field {
    ($(#[$meta:meta])* pub struct $name:ident($inner:ty) => $target:ty;) => {
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        $(#[$meta])*
        pub struct $name($inner);

        impl $name {
            pub fn into_inner(self) -> $inner {
                self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = $target;

            fn deref(&self) -> &$target {
                &self.0
            }
        }
    };
}

collection_field! {
    /// Tags of a flow, or those a launch selects flows by: at most 20, each 1 to 64 characters and not only white
    /// space. It keeps the list as sent (what it serializes to); [`Tags::distinct`] is what is stored.
    #[serde(try_from = "Vec<String>")]
    pub struct Tags(Vec<String>) => [String];
}

impl Tags {
    /// The tags as stored: trimmed, each once, in their first order.
    pub fn distinct(&self) -> Vec<String> {
        let mut distinct: Vec<String> = Vec::with_capacity(self.0.len());
        for tag in self.0.iter().map(|t| t.trim()) {
            if !distinct.iter().any(|t| t == tag) {
                distinct.push(tag.to_owned());
            }
        }
        distinct
    }
}

impl TryFrom<Vec<String>> for Tags {
    type Error = Refusal;

    /// The messages name `tags` whatever the field's path (an imported document's `flow.tags` too).
    fn try_from(tags: Vec<String>) -> Result<Self, Refusal> {
        if tags.len() > TAGS_MAX {
            return Err(Refusal::new(format!("`tags`: at most {TAGS_MAX} tags")));
        }
        if tags.iter().any(|tag| is_blank(tag) || tag.chars().count() > TAG_MAX) {
            return Err(Refusal::new(format!(
                "`tags`: each tag must be 1 to {TAG_MAX} characters, not only white space"
            )));
        }
        Ok(Tags(tags))
    }
}

collection_field! {
    /// Labels of a runner, or those a launch requires of its runner: at most 20, each 1 to 64 characters without
    /// white space at either end.
    #[serde(try_from = "Vec<String>")]
    pub struct Labels(Vec<String>) => [String];
}

impl Labels {
    /// For `skip_serializing_if`, which names a function of the field's own type.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl TryFrom<Vec<String>> for Labels {
    type Error = Refusal;

    fn try_from(labels: Vec<String>) -> Result<Self, Refusal> {
        let bad = |l: &String| l.is_empty() || l.chars().count() > TAG_MAX || l.trim() != l;
        if labels.len() > TAGS_MAX || labels.iter().any(bad) {
            return Err(Refusal::new(format!(
                "invalid field `{{field}}`: at most {TAGS_MAX} labels of 1 to {TAG_MAX} characters"
            )));
        }
        Ok(Labels(labels))
    }
}

collection_field! {
    /// A collection's variables: at most 200, named with letters, digits, `_` and `-` (1 to 100), values of at
    /// most 10,000 characters.
    #[serde(try_from = "BTreeMap<String, String>")]
    pub struct CollectionVariables(BTreeMap<String, String>) => BTreeMap<String, String>;
}

impl CollectionVariables {
    /// For `skip_serializing_if`, which names a function of the field's own type.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl TryFrom<BTreeMap<String, String>> for CollectionVariables {
    type Error = Refusal;

    fn try_from(variables: BTreeMap<String, String>) -> Result<Self, Refusal> {
        if variables.len() > COLLECTION_VARIABLES_MAX {
            return Err(Refusal::new(format!(
                "invalid field `{{field}}`: at most {COLLECTION_VARIABLES_MAX} variables"
            )));
        }
        for (name, value) in &variables {
            if !is_key(name, 100) {
                return Err(Refusal::new(format!("invalid field `{{field}}`: `{name}` is not a variable name")));
            }
            if value.chars().count() > LONG_TEXT_MAX {
                return Err(Refusal::new(format!("`{{field}}.{name}` must be at most {LONG_TEXT_MAX} characters")));
            }
        }
        Ok(CollectionVariables(variables))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal<T: std::fmt::Debug>(parsed: Result<T, Refusal>, field: &str) -> String {
        parsed.expect_err("refused").for_field(field)
    }

    #[test]
    fn names_keep_what_was_sent_and_read_trimmed() {
        let name = Name::try_from(" Orders ").expect("a name");
        assert_eq!((name.as_str(), serde_json::to_string(&name).expect("json")), ("Orders", "\" Orders \"".into()));
        assert_eq!(Name::try_from("x".repeat(200)).expect("200").len(), 200);
        let message = "`name` must be 1 to 200 characters, not only white space";
        for bad in [String::new(), " \u{3000}\n".into(), "x".repeat(201)] {
            assert_eq!(refusal(Name::try_from(bad), "name"), message);
        }
    }

    #[test]
    fn texts_count_characters() {
        assert!(ShortText::try_from("é".repeat(2000)).is_ok());
        assert_eq!(refusal(ShortText::try_from("x".repeat(2001)), "note"), "`note` must be at most 2000 characters");
        assert_eq!(refusal(LongText::try_from("x".repeat(10_001)), "d"), "`d` must be at most 10000 characters");
        assert_eq!(refusal(RunnerText::try_from("x".repeat(101)), "os"), "`os` must be at most 100 characters");
        assert!(ValueText::try_from("x".repeat(65_536)).is_ok());
    }

    #[test]
    fn lists_and_emails() {
        let tags = Tags::try_from(vec![" a ".to_owned(), "a".into(), "b".into()]).expect("tags");
        assert_eq!((tags.len(), tags.distinct()), (3, vec!["a".to_owned(), "b".into()]));
        let blank = Tags::try_from(vec![" ".to_owned()]);
        assert_eq!(refusal(blank, "flow.tags"), "`tags`: each tag must be 1 to 64 characters, not only white space");
        let labels = "invalid field `labels`: at most 20 labels of 1 to 64 characters";
        assert_eq!(refusal(Labels::try_from(vec!["a ".to_owned()]), "labels"), labels);
        assert_eq!(refusal(Labels::try_from(vec!["a".to_owned(); 21]), "labels"), labels);
        assert_eq!(Email::try_from("Ada@Example.COM").expect("email").as_str(), "ada@example.com");
        assert_eq!(refusal(Email::try_from("ada"), "email"), "invalid field `email`");
        let odd = BTreeMap::from([("{field}".to_owned(), String::new())]);
        let message = "invalid field `variables`: `{field}` is not a variable name";
        assert_eq!(refusal(CollectionVariables::try_from(odd), "variables"), message);
    }

    #[test]
    fn a_refusal_travels_as_serde_text() {
        #[derive(Debug, Deserialize)]
        struct Body {
            #[allow(dead_code)]
            name: Name,
        }
        let error = serde_json::from_str::<Body>(r#"{"name": ""}"#).expect_err("refused").to_string();
        let refusal = Refusal::from_message(error.split(" at line").next().unwrap_or_default()).expect("a refusal");
        assert_eq!(refusal.for_field("name"), "`name` must be 1 to 200 characters, not only white space");
        assert_eq!(Refusal::from_message("invalid type: integer `5`, expected a string"), None);
    }
}

/// A launch's priority (issue #53): 1 (highest) to 5 (lowest); 3 when a launch sets none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(try_from = "i64", into = "i64")]
#[schema(value_type = i64, minimum = 1, maximum = 5, default = 3)]
pub struct Priority(u8);

impl Priority {
    pub const DEFAULT: Priority = Priority(3);

    pub fn get(self) -> u8 {
        self.0
    }
}

impl Default for Priority {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl TryFrom<i64> for Priority {
    type Error = Refusal;

    fn try_from(value: i64) -> Result<Self, Refusal> {
        match u8::try_from(value) {
            Ok(n @ 1..=5) => Ok(Priority(n)),
            _ => Err(Refusal::new("invalid field `{field}`: 1 (highest) to 5 (lowest)")),
        }
    }
}

impl From<Priority> for i64 {
    fn from(priority: Priority) -> i64 {
        i64::from(priority.0)
    }
}
