//! `Redacted<T>`: a value (an API key, a password) that `Debug` never prints, so a struct holding one can derive
//! `Debug` and still be logged.

use std::ops::Deref;
use std::str::FromStr;

/// A value whose `Debug` is `<redacted>`; read it with `*` or `.expose()`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redacted<T>(T);

impl<T> Redacted<T> {
    pub fn new(value: T) -> Self {
        Redacted(value)
    }

    /// The value itself, for the one place that sends or checks it.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> std::fmt::Debug for Redacted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl<T> Deref for Redacted<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> From<T> for Redacted<T> {
    fn from(value: T) -> Self {
        Redacted(value)
    }
}

/// Parsed like the value (command-line flags).
impl<T: FromStr> FromStr for Redacted<T> {
    type Err = T::Err;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        T::from_str(s).map(Redacted)
    }
}

#[cfg(test)]
mod tests {
    use super::Redacted;

    #[test]
    fn debug_never_shows_the_value() {
        #[derive(Debug)]
        #[allow(dead_code)]
        struct Login {
            user: &'static str,
            key: Redacted<String>,
        }
        let login = Login { user: "ada", key: Redacted::new("hf_topsecret".to_owned()) };
        let printed = format!("{login:?} {login:#?}");
        assert!(printed.contains("ada") && printed.contains("<redacted>"), "{printed}");
        assert!(!printed.contains("topsecret"), "{printed}");
        assert_eq!(login.key.expose(), "hf_topsecret");
    }
}
