//! Reads request bodies the way the OpenAPI document describes them: a struct is a JSON object, never an array
//! of its fields in order (serde's derive would take both), and an integer may be written `398.0` (JSON Schema
//! counts it as one; serde's integer types would refuse it).

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::{Map, Number, Value};

/// A deserializer over a parsed JSON value with those two rules.
#[derive(Debug)]
pub struct StrictJson<'a>(pub &'a Value);

type Error = serde_json::Error;

/// 2^53: the largest magnitude below which every integer is a float.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_992.0;

/// A number as a visitor expects it: integral floats within range as integers.
fn visit_number<'de, V: Visitor<'de>>(number: &Number, visitor: V) -> Result<V::Value, Error> {
    if let Some(n) = number.as_u64() {
        return visitor.visit_u64(n);
    }
    if let Some(n) = number.as_i64() {
        return visitor.visit_i64(n);
    }
    let float = number.as_f64().unwrap_or(f64::NAN);
    // Only where a float holds every integer exactly (|x| <= 2^53): a larger literal such as
    // -9223372036854775809 was rounded when parsed and must not read as a different, in-range integer.
    if float.fract() == 0.0 && float.abs() <= MAX_SAFE_INTEGER {
        #[allow(clippy::cast_possible_truncation)]
        let integer = float as i64;
        return match u64::try_from(integer) {
            Ok(unsigned) => visitor.visit_u64(unsigned),
            Err(_) => visitor.visit_i64(integer),
        };
    }
    visitor.visit_f64(float)
}

impl<'de> de::Deserializer<'de> for StrictJson<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => visit_number(n, visitor),
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => visitor.visit_seq(Items(items.iter())),
            Value::Object(map) => visitor.visit_map(Entries::new(map)),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::Object(map) => visitor.visit_map(Entries::new(map)),
            other => Err(de::Error::invalid_type(unexpected(other), &"a JSON object")),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _name: &'static str, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(variant) => visitor.visit_enum(variant.as_str().into_deserializer()),
            Value::Object(map) if map.len() == 1 => {
                let (variant, content) = map.iter().next().expect("one entry");
                visitor.visit_enum(Variant { variant, content })
            }
            other => Err(de::Error::invalid_type(unexpected(other), &"a string or an object of one entry")),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit unit_struct seq
        tuple tuple_struct map identifier
    }
}

fn unexpected(value: &Value) -> de::Unexpected<'_> {
    match value {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(n) => n.as_f64().map_or(de::Unexpected::Other("number"), de::Unexpected::Float),
        Value::String(s) => de::Unexpected::Str(s),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    }
}

struct Items<'a>(std::slice::Iter<'a, Value>);

impl<'de> de::SeqAccess<'de> for Items<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        self.0.next().map(|value| seed.deserialize(StrictJson(value))).transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

struct Entries<'a> {
    entries: serde_json::map::Iter<'a>,
    value: Option<&'a Value>,
}

impl<'a> Entries<'a> {
    fn new(map: &'a Map<String, Value>) -> Self {
        Entries { entries: map.iter(), value: None }
    }
}

impl<'de> de::MapAccess<'de> for Entries<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else { return Ok(None) };
        self.value = Some(value);
        seed.deserialize(de::value::BorrowedStrDeserializer::new(key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let value = self.value.take().ok_or_else(|| de::Error::custom("a value without its key"))?;
        seed.deserialize(StrictJson(value))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

struct Variant<'a> {
    variant: &'a str,
    content: &'a Value,
}

impl<'de> de::EnumAccess<'de> for Variant<'de> {
    type Error = Error;
    type Variant = StrictJson<'de>;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self::Variant), Error> {
        let name = seed.deserialize(de::value::BorrowedStrDeserializer::<Error>::new(self.variant))?;
        Ok((name, StrictJson(self.content)))
    }
}

impl<'de> de::VariantAccess<'de> for StrictJson<'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.0 {
            Value::Null => Ok(()),
            other => Err(de::Error::invalid_type(unexpected(other), &"null")),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_seq(self, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(self, _fields: &'static [&'static str], visitor: V) -> Result<V::Value, Error> {
        de::Deserializer::deserialize_struct(self, "", &[], visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        a: Option<u16>,
        b: Option<i64>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        One,
        Two,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        inner: Option<Inner>,
        kind: Option<Kind>,
        ratio: Option<f64>,
        list: Option<Vec<u8>>,
        any: Option<Value>,
    }

    fn read<T: for<'de> Deserialize<'de>>(json: &str) -> Result<T, Error> {
        let value: Value = serde_json::from_str(json).expect("read");
        T::deserialize(StrictJson(&value))
    }

    #[test]
    fn structs_are_objects_only() {
        assert!(read::<Outer>(r#"[null, null]"#).is_err());
        assert!(read::<Outer>(r#"{"inner": [1, 2]}"#).is_err());
        let outer: Outer =
            read(r#"{"inner": {"a": 2}, "kind": "two", "list": [1, 2], "any": [1, {"x": 2.5}]}"#).expect("read");
        assert_eq!(outer.inner, Some(Inner { a: Some(2), b: None }));
        assert_eq!(outer.kind, Some(Kind::Two));
        assert_eq!(outer.any, Some(serde_json::json!([1, {"x": 2.5}])));
        assert!(read::<Outer>(r#"{"extra": 1}"#).is_err());
        assert!(read::<Outer>(r#"{"kind": "three"}"#).is_err());
        assert_eq!(read::<Outer>(r#"{"kind": "one"}"#).expect("read").kind, Some(Kind::One));
    }

    #[test]
    fn integral_floats_are_integers() {
        let inner: Inner = read(r#"{"a": 205.0, "b": -3e2}"#).expect("read");
        assert_eq!(inner, Inner { a: Some(205), b: Some(-300) });
        assert!(read::<Inner>(r#"{"a": 205.5}"#).is_err());
        assert!(read::<Inner>(r#"{"a": 70000.0}"#).is_err());
        assert!(read::<Inner>(r#"{"b": 1e19}"#).is_err());
        assert!(read::<Inner>(r#"{"b": -9223372036854775809}"#).is_err(), "rounded to i64::MIN when parsed");
        assert_eq!(read::<Inner>(r#"{"b": -9223372036854775808}"#).expect("read").b, Some(i64::MIN));
        assert_eq!(read::<Outer>(r#"{"ratio": 3}"#).expect("read").ratio, Some(3.0));
    }
}
