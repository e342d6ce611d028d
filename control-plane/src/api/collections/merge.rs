//! The three-way merge that lets a sync update a request without losing the user's edits: for each value, if the
//! user left it as the last sync generated it, the newly generated value wins; otherwise the user's stays. Headers
//! and query parameters merge entry by entry, JSON object bodies field by field.

use hookflow_shared::api::collections::WriteRequest;
use serde_json::Value;
use std::collections::BTreeMap;

/// `new` where the user kept `base`, else the user's `current`.
fn pick<T: PartialEq + Clone>(base: &T, current: &T, new: &T) -> T {
    if current == base { new.clone() } else { current.clone() }
}

fn merge_map(
    base: &BTreeMap<String, String>,
    current: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut keys: Vec<&String> = base.keys().chain(current.keys()).chain(new.keys()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .filter_map(|key| {
            let merged = pick(&base.get(key), &current.get(key), &new.get(key));
            merged.map(|value| (key.clone(), value.clone()))
        })
        .collect()
}

fn merge_body(base: Option<&str>, current: Option<&str>, new: Option<&str>) -> Option<String> {
    if current == base {
        return new.map(str::to_owned);
    }
    let object = |text: Option<&str>| match text.map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(map))) => Some(map),
        _ => None,
    };
    match (object(base), object(current), object(new)) {
        (Some(base), Some(current), Some(new)) => {
            let mut merged = serde_json::Map::new();
            // The new description's fields first, then the ones only the user (or the old description) has.
            for key in new.keys().chain(current.keys()).chain(base.keys()) {
                if merged.contains_key(key) {
                    continue;
                }
                if let Some(value) = pick(&base.get(key), &current.get(key), &new.get(key)) {
                    merged.insert(key.clone(), value.clone());
                }
            }
            Some(format!("{:#}", Value::Object(merged)))
        }
        _ => pick(&base.map(str::to_owned), &current.map(str::to_owned), &new.map(str::to_owned)),
    }
}

/// The request after a sync: `base` is what the last sync generated, `current` the request now (maybe edited),
/// `new` what the description generates today.
pub fn merge(base: &WriteRequest, current: &WriteRequest, new: &WriteRequest) -> WriteRequest {
    WriteRequest {
        name: pick(&base.name, &current.name, &new.name),
        folder: pick(&base.folder, &current.folder, &new.folder),
        method: pick(&base.method, &current.method, &new.method),
        url: pick(&base.url, &current.url, &new.url),
        headers: merge_map(&base.headers, &current.headers, &new.headers),
        query: merge_map(&base.query, &current.query, &new.query),
        body: merge_body(base.body.as_deref(), current.body.as_deref(), new.body.as_deref()),
        description: pick(&base.description, &current.description, &new.description),
        operation_key: new.operation_key.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(name: &str, headers: &[(&str, &str)], body: Value) -> WriteRequest {
        WriteRequest {
            name: name.to_owned(),
            method: "POST".to_owned(),
            url: "{{base_url}}/pets".to_owned(),
            headers: headers.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            body: Some(body.to_string()),
            operation_key: Some("POST /pets".to_owned()),
            ..WriteRequest::default()
        }
    }

    #[test]
    fn user_edits_survive_and_the_rest_follows_the_description() {
        let base = request("Add pet", &[("x-trace", "1"), ("x-old", "a")], json!({"name": "Rex", "age": 1}));
        let current = request("My add pet", &[("x-trace", "1"), ("x-mine", "m")], json!({"name": "Fido", "age": 1}));
        let new = request(
            "Create a pet",
            &[("x-trace", "2"), ("x-old", "a")],
            json!({"name": "Rex", "age": 2, "kind": "dog"}),
        );
        let merged = merge(&base, &current, &new);
        assert_eq!(merged.name, "My add pet", "the user's name stays");
        assert_eq!(
            merged.headers.get("x-trace").map(String::as_str),
            Some("2"),
            "untouched values follow the description"
        );
        assert_eq!(merged.headers.get("x-mine").map(String::as_str), Some("m"), "the user's own header stays");
        assert!(!merged.headers.contains_key("x-old"), "a header the user removed stays removed");
        let body: Value = serde_json::from_str(merged.body.as_deref().unwrap_or_default()).expect("json");
        assert_eq!(body, json!({"name": "Fido", "age": 2, "kind": "dog"}));
    }

    #[test]
    fn without_edits_the_new_request_wins_whole() {
        let base = request("a", &[], json!({"x": 1}));
        let new = request("b", &[("h", "v")], json!({"y": 2}));
        assert_eq!(merge(&base, &base, &new), new);
    }
}
