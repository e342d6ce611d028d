//! `Patch<T>`: a PATCH body's field that may be absent (keep the stored value), `null` (clear it back to its
//! default) or a value (set it). Fields carry `#[serde(default, skip_serializing_if = "Patch::is_keep")]`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Patch<T> {
    /// Absent: the stored value stays.
    #[default]
    Keep,
    /// `null`: the stored value is cleared (the default applies again).
    Clear,
    /// A new value.
    Set(T),
}

impl<T> Patch<T> {
    pub fn is_keep(&self) -> bool {
        matches!(self, Patch::Keep)
    }

    /// `Set` for a value, `Clear` for none.
    pub fn from_option(value: Option<T>) -> Self {
        value.map_or(Patch::Clear, Patch::Set)
    }

    /// The new value, when one is set.
    pub fn value(&self) -> Option<&T> {
        match self {
            Patch::Set(value) => Some(value),
            Patch::Keep | Patch::Clear => None,
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Patch<U> {
        match self {
            Patch::Keep => Patch::Keep,
            Patch::Clear => Patch::Clear,
            Patch::Set(value) => Patch::Set(f(value)),
        }
    }

    pub fn as_ref(&self) -> Patch<&T> {
        match self {
            Patch::Keep => Patch::Keep,
            Patch::Clear => Patch::Clear,
            Patch::Set(value) => Patch::Set(value),
        }
    }

    /// What the stored value becomes: `None` to keep it, `Some(None)` to clear it.
    pub fn into_change(self) -> Option<Option<T>> {
        match self {
            Patch::Keep => None,
            Patch::Clear => Some(None),
            Patch::Set(value) => Some(Some(value)),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            Some(value) => Patch::Set(value),
            None => Patch::Clear,
        })
    }
}

impl<T: Serialize> Serialize for Patch<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Patch::Set(value) => value.serialize(s),
            Patch::Keep | Patch::Clear => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize)]
    struct Body {
        #[serde(default, skip_serializing_if = "Patch::is_keep")]
        note: Patch<String>,
    }

    #[test]
    fn absent_null_and_a_value_are_three_things() {
        let read = |text: &str| serde_json::from_str::<Body>(text).expect("parse").note;
        assert_eq!(read("{}"), Patch::Keep);
        assert_eq!(read(r#"{"note": null}"#), Patch::Clear);
        assert_eq!(read(r#"{"note": "x"}"#), Patch::Set("x".to_owned()));
        let written = |note| serde_json::to_string(&Body { note }).expect("write");
        assert_eq!(written(Patch::Keep), "{}");
        assert_eq!(written(Patch::Clear), r#"{"note":null}"#);
        assert_eq!(written(Patch::Set("y".into())), r#"{"note":"y"}"#);
    }
}
