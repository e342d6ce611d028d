//! `Timestamp`: RFC 3339 UTC with exactly six fractional digits, the one time format of the API.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A point in time as the API writes it: `2026-11-22T10:20:47.123456Z`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub DateTime<Utc>);

impl Timestamp {
    pub fn now() -> Self {
        Self(Utc::now())
    }

    /// Parses any RFC 3339 timestamp (any offset) into UTC.
    pub fn parse(text: &str) -> Result<Self, chrono::ParseError> {
        DateTime::parse_from_rfc3339(text).map(|t| Self(t.with_timezone(&Utc)))
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(value: DateTime<Utc>) -> Self {
        Self(value)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.to_rfc3339_opts(SecondsFormat::Micros, true))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(|_| {
            serde::de::Error::custom(format!(
                "invalid timestamp `{text}`: expected RFC 3339, e.g. 2026-11-22T10:20:47.123456Z"
            ))
        })
    }
}

impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::DateTime)))
            .examples([serde_json::json!("2026-11-22T10:20:47.123456Z")])
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_six_fraction_digits_and_z() {
        let t = Timestamp::parse("2026-11-22T10:20:47Z").expect("parse");
        assert_eq!(t.to_string(), "2026-11-22T10:20:47.000000Z");
        let t = Timestamp::parse("2026-11-22T12:20:47.123456789+02:00").expect("parse");
        assert_eq!(t.to_string(), "2026-11-22T10:20:47.123456Z");
    }

    #[test]
    fn json_round_trip() {
        let t = Timestamp::parse("2026-11-22T10:20:47.123456Z").expect("parse");
        let json = serde_json::to_string(&t).expect("ser");
        assert_eq!(json, "\"2026-11-22T10:20:47.123456Z\"");
        let back: Timestamp = serde_json::from_str(&json).expect("de");
        assert_eq!(back, t);
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
    }
}
