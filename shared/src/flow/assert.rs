//! The 15 assertion operators and their typing rules (API.md section 3): numbers compare by value (1 == 1.0); a
//! string that parses wholly as a number compares as one against a number; other type mismatches fail with
//! reason `type_mismatch`; a missing value fails every operator but `notExists`; JSON `null` is a value.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::cmp::Ordering;

macro_rules! operators {
    ($($variant:ident => $name:literal, $takes:literal, $description:literal;)*) => {
        /// An assertion operator.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
        #[serde(rename_all = "camelCase")]
        pub enum Operator { $(#[serde(rename = $name)] $variant),* }

        impl Operator {
            pub const ALL: [Operator; 15] = [$(Operator::$variant),*];
            pub fn name(self) -> &'static str { match self { $(Operator::$variant => $name),* } }
            /// Whether the operator compares against an `expected` value.
            pub fn takes_expected(self) -> bool { match self { $(Operator::$variant => $takes),* } }
            pub fn description(self) -> &'static str { match self { $(Operator::$variant => $description),* } }
        }
    };
}

operators! {
    Equals => "equals", true, "Equal by value: numbers numerically, strings, booleans, null, arrays and objects deeply.";
    NotEquals => "notEquals", true, "Not equal by value (same typing rules as equals).";
    GreaterThan => "greaterThan", true, "Greater than: numbers numerically, strings lexicographically.";
    GreaterThanOrEqual => "greaterThanOrEqual", true, "Greater than or equal: numbers numerically, strings lexicographically.";
    LessThan => "lessThan", true, "Less than: numbers numerically, strings lexicographically.";
    LessThanOrEqual => "lessThanOrEqual", true, "Less than or equal: numbers numerically, strings lexicographically.";
    Contains => "contains", true, "A string contains the text, an array contains the value, or an object has the key.";
    NotContains => "notContains", true, "The opposite of contains (same typing rules).";
    StartsWith => "startsWith", true, "A string starts with the text.";
    EndsWith => "endsWith", true, "A string ends with the text.";
    Matches => "matches", true, "A string matches the regular expression (anywhere unless anchored).";
    Exists => "exists", false, "The value is present (null counts as present).";
    NotExists => "notExists", false, "The value is absent.";
    IsType => "isType", true, "The value is of the type named: string, number, integer, boolean, array, object or null.";
    MatchesSchema => "matchesSchema", true, "The value matches a JSON Schema (2020-12; OpenAPI 3.0's nullable read as a type union), given inline or as {\"$ref\": \"collection:<id>#<JSON pointer>\"}; a failure names the first violation's instance path and keyword.";
}

/// Why an assertion failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Failure {
    TypeMismatch,
    Missing,
    Other(String),
}

impl Failure {
    /// The `reason` field of a failed assertion result.
    pub fn reason(&self) -> String {
        match self {
            Failure::TypeMismatch => "type_mismatch".into(),
            Failure::Missing => "missing".into(),
            Failure::Other(text) => text.clone(),
        }
    }
}

/// Evaluates `operator` on `actual` (`None` when the source has no value) against `expected`.
pub fn evaluate(operator: Operator, actual: Option<&Value>, expected: Option<&Value>) -> Result<(), Failure> {
    let Some(actual) = actual else {
        return if operator == Operator::NotExists { Ok(()) } else { Err(Failure::Missing) };
    };
    let expected_value =
        || expected.ok_or_else(|| Failure::Other(format!("{} needs an expected value", operator.name())));
    let check = |ok: bool| if ok { Ok(()) } else { Err(Failure::Other(format!("{} did not hold", operator.name()))) };
    match operator {
        Operator::Exists => Ok(()),
        Operator::NotExists => Err(Failure::Other("the value exists".into())),
        Operator::Equals => check(equal(actual, expected_value()?)?),
        Operator::NotEquals => check(!equal(actual, expected_value()?)?),
        Operator::GreaterThan => check(order(actual, expected_value()?)? == Ordering::Greater),
        Operator::GreaterThanOrEqual => check(order(actual, expected_value()?)? != Ordering::Less),
        Operator::LessThan => check(order(actual, expected_value()?)? == Ordering::Less),
        Operator::LessThanOrEqual => check(order(actual, expected_value()?)? != Ordering::Greater),
        Operator::Contains => check(contains(actual, expected_value()?)?),
        Operator::NotContains => check(!contains(actual, expected_value()?)?),
        Operator::StartsWith => {
            let (a, e) = strings(actual, expected_value()?)?;
            check(a.starts_with(e))
        }
        Operator::EndsWith => {
            let (a, e) = strings(actual, expected_value()?)?;
            check(a.ends_with(e))
        }
        Operator::Matches => {
            let (a, pattern) = strings(actual, expected_value()?)?;
            let regex = regex::Regex::new(pattern)
                .map_err(|_| Failure::Other(format!("`{pattern}` is not a valid regular expression")))?;
            check(regex.is_match(a))
        }
        Operator::IsType => {
            let Value::String(name) = expected_value()? else { return Err(Failure::TypeMismatch) };
            let matches = match name.as_str() {
                "string" => actual.is_string(),
                "number" => actual.is_number(),
                "integer" => actual.as_f64().is_some_and(|n| n.fract() == 0.0),
                "boolean" => actual.is_boolean(),
                "array" => actual.is_array(),
                "object" => actual.is_object(),
                "null" => actual.is_null(),
                other => return Err(Failure::Other(format!("unknown type `{other}`"))),
            };
            check(matches)
        }
        Operator::MatchesSchema => {
            let schema = expected_value()?;
            if let Some(reference) = crate::flow::json_schema::unresolved_collection_ref(schema) {
                return Err(Failure::Other(format!(
                    "`{reference}` was not resolved: collection references resolve when the flow is launched"
                )));
            }
            crate::flow::json_schema::validate(schema, actual).map_err(|v| Failure::Other(v.to_string()))
        }
    }
}

/// A number, or a string that is wholly a number.
fn numeric(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|n| n.is_finite() && !s.trim().is_empty()),
        _ => None,
    }
}

/// Equality under the typing rules; a type mismatch is a failure, not `false`.
fn equal(actual: &Value, expected: &Value) -> Result<bool, Failure> {
    match (actual, expected) {
        (Value::Number(_), _) | (_, Value::Number(_)) => match (numeric(actual), numeric(expected)) {
            (Some(a), Some(e)) => Ok(a == e),
            _ => Err(Failure::TypeMismatch),
        },
        (Value::String(a), Value::String(e)) => Ok(a == e),
        (Value::Bool(a), Value::Bool(e)) => Ok(a == e),
        (Value::Null, Value::Null) => Ok(true),
        (Value::Array(a), Value::Array(e)) => {
            Ok(a.len() == e.len() && a.iter().zip(e).all(|(x, y)| equal(x, y).unwrap_or(false)))
        }
        (Value::Object(a), Value::Object(e)) => {
            Ok(a.len() == e.len() && a.iter().all(|(k, v)| e.get(k).is_some_and(|w| equal(v, w).unwrap_or(false))))
        }
        _ => Err(Failure::TypeMismatch),
    }
}

fn order(actual: &Value, expected: &Value) -> Result<Ordering, Failure> {
    match (actual, expected) {
        (Value::String(a), Value::String(e)) if numeric(actual).is_none() || numeric(expected).is_none() => {
            Ok(a.cmp(e))
        }
        _ => match (numeric(actual), numeric(expected)) {
            (Some(a), Some(e)) => a.partial_cmp(&e).ok_or(Failure::TypeMismatch),
            _ => Err(Failure::TypeMismatch),
        },
    }
}

fn contains(actual: &Value, expected: &Value) -> Result<bool, Failure> {
    match (actual, expected) {
        (Value::String(a), Value::String(e)) => Ok(a.contains(e.as_str())),
        (Value::Array(items), e) => Ok(items.iter().any(|item| equal(item, e).unwrap_or(false))),
        (Value::Object(map), Value::String(key)) => Ok(map.contains_key(key)),
        _ => Err(Failure::TypeMismatch),
    }
}

fn strings<'a>(actual: &'a Value, expected: &'a Value) -> Result<(&'a str, &'a str), Failure> {
    match (actual, expected) {
        (Value::String(a), Value::String(e)) => Ok((a, e)),
        _ => Err(Failure::TypeMismatch),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(op: Operator, actual: Value, expected: Value) -> Result<(), Failure> {
        evaluate(op, Some(&actual), Some(&expected))
    }

    #[test]
    fn exactly_fourteen_operators_with_their_contract_names() {
        let names: Vec<_> = Operator::ALL.iter().map(|o| o.name()).collect();
        assert_eq!(
            names,
            [
                "equals",
                "notEquals",
                "greaterThan",
                "greaterThanOrEqual",
                "lessThan",
                "lessThanOrEqual",
                "contains",
                "notContains",
                "startsWith",
                "endsWith",
                "matches",
                "exists",
                "notExists",
                "isType",
                "matchesSchema"
            ]
        );
        for op in Operator::ALL {
            assert_eq!(serde_json::to_value(op).expect("ser"), json!(op.name()));
        }
        assert!(!Operator::Exists.takes_expected() && !Operator::NotExists.takes_expected());
    }

    #[test]
    fn numbers_compare_by_value_and_numeric_strings_coerce() {
        assert_eq!(run(Operator::Equals, json!(1), json!(1.0)), Ok(()));
        assert_eq!(run(Operator::Equals, json!("200"), json!(200)), Ok(()));
        assert_eq!(run(Operator::Equals, json!(200), json!(" 200 ")), Ok(()));
        assert!(run(Operator::Equals, json!(2), json!(3)).is_err());
        assert_eq!(run(Operator::GreaterThan, json!("10"), json!(9)), Ok(()), "numeric, not lexicographic");
        assert_eq!(run(Operator::LessThanOrEqual, json!(5), json!(5.0)), Ok(()));
        assert_eq!(
            run(Operator::GreaterThanOrEqual, json!(4.5), json!(5)).map_err(|f| f.reason()),
            Err("greaterThanOrEqual did not hold".into())
        );
        assert_eq!(run(Operator::LessThan, json!("apple"), json!("banana")), Ok(()), "strings order lexicographically");
    }

    #[test]
    fn type_mismatches_fail_with_their_reason() {
        for (op, actual, expected) in [
            (Operator::Equals, json!("abc"), json!(5)),
            (Operator::Equals, json!(true), json!("true")),
            (Operator::NotEquals, json!(null), json!(0)),
            (Operator::GreaterThan, json!(true), json!(1)),
            (Operator::StartsWith, json!(123), json!("1")),
            (Operator::Contains, json!(5), json!("5")),
            (Operator::Matches, json!(["a"]), json!("a")),
        ] {
            assert_eq!(
                run(op, actual.clone(), expected.clone()),
                Err(Failure::TypeMismatch),
                "{op:?} {actual} {expected}"
            );
        }
        assert_eq!(Failure::TypeMismatch.reason(), "type_mismatch");
    }

    #[test]
    fn missing_fails_all_but_not_exists_and_null_is_a_value() {
        for op in Operator::ALL {
            let result = evaluate(op, None, Some(&json!(1)));
            if op == Operator::NotExists {
                assert_eq!(result, Ok(()));
            } else {
                assert_eq!(result, Err(Failure::Missing), "{op:?}");
            }
        }
        assert_eq!(evaluate(Operator::Exists, Some(&json!(null)), None), Ok(()));
        assert!(evaluate(Operator::NotExists, Some(&json!(null)), None).is_err());
        assert_eq!(run(Operator::Equals, json!(null), json!(null)), Ok(()));
        assert_eq!(run(Operator::IsType, json!(null), json!("null")), Ok(()));
    }

    #[test]
    fn text_collections_and_types() {
        assert_eq!(run(Operator::Contains, json!("hello world"), json!("lo w")), Ok(()));
        assert_eq!(run(Operator::Contains, json!([1, "two", 3.0]), json!(3)), Ok(()));
        assert_eq!(run(Operator::Contains, json!({"id": 1}), json!("id")), Ok(()));
        assert!(run(Operator::NotContains, json!([1, 2]), json!(2)).is_err());
        assert_eq!(run(Operator::NotContains, json!("abc"), json!("z")), Ok(()));
        assert_eq!(run(Operator::StartsWith, json!("Bearer x"), json!("Bearer ")), Ok(()));
        assert_eq!(run(Operator::EndsWith, json!("file.json"), json!(".json")), Ok(()));
        assert_eq!(run(Operator::Matches, json!("order-1234"), json!(r"^order-\d+$")), Ok(()));
        assert!(
            run(Operator::Matches, json!("x"), json!("("))
                .is_err_and(|f| f.reason().contains("not a valid regular expression"))
        );
        assert_eq!(run(Operator::Equals, json!({"a": [1, {"b": 2}]}), json!({"a": [1.0, {"b": "2"}]})), Ok(()));
        assert_eq!(run(Operator::IsType, json!(3), json!("integer")), Ok(()));
        assert!(run(Operator::IsType, json!(3.5), json!("integer")).is_err());
        assert!(run(Operator::IsType, json!("3"), json!("number")).is_err(), "isType does not coerce");
        assert!(run(Operator::IsType, json!(1), json!("float")).is_err_and(|f| f.reason().contains("unknown type")));
    }
}
