//! `matchesSchema`: a JSON Schema (2020-12) validator of the assertion keywords, with OpenAPI 3.0's `nullable`
//! read as a type union and `exclusiveMinimum`/`exclusiveMaximum` in both their boolean (3.0) and number forms.
//! `$ref` resolves JSON pointers into the schema document itself (`#/components/schemas/Pet`, `#/$defs/x`);
//! `format` is an annotation (not asserted, as 2020-12 says by default). The first violation is reported with the
//! instance's JSON pointer (`(root)` for the document) and the keyword. Budgets bound the work: reference depth
//! and steps (so `anyOf` over `anyOf` cannot run away).

use serde_json::{Map, Value};

/// Nesting of schemas (through `$ref`, combinators, properties) followed at most.
const MAX_DEPTH: usize = 128;
/// Schema-instance checks one validation makes at most.
const MAX_STEPS: usize = 1_000_000;

/// The first place an instance breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer into the instance; empty for the document itself.
    pub path: String,
    pub keyword: String,
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = if self.path.is_empty() { "(root)" } else { &self.path };
        write!(f, "{at}: {} ({})", self.message, self.keyword)
    }
}

/// Validates `instance` against `schema` (a schema object or boolean); the first violation when it fails.
pub fn validate(schema: &Value, instance: &Value) -> Result<(), Violation> {
    let mut validator =
        Validator { root: schema, steps: 0, patterns: std::collections::HashMap::new(), exhausted: None };
    let verdict = validator.check(schema, instance, &mut String::new(), 0);
    // A budget spent is a failure wherever it happened: under `not` (or any keyword that reads a failure as a
    // success) it must not turn into a pass.
    match validator.exhausted {
        Some(exhausted) => Err(exhausted),
        None => verdict,
    }
}

struct Validator<'s> {
    root: &'s Value,
    steps: usize,
    /// Each distinct pattern compiled once per validation (`None`: invalid or past its size budget).
    patterns: std::collections::HashMap<String, Option<regex::Regex>>,
    /// The first place a budget ran out: the validation fails with it, whatever the keywords above made of it.
    exhausted: Option<Violation>,
}

/// The compiled size a schema's pattern may take (a pattern is a tenant's; the regex crate matches in linear time).
const PATTERN_SIZE: usize = 256 * 1024;

fn violation(path: &str, keyword: &str, message: impl Into<String>) -> Violation {
    Violation { path: path.to_owned(), keyword: keyword.to_owned(), message: message.into() }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_type(value: &Value, name: &str) -> bool {
    let actual = type_name(value);
    actual == name || (name == "number" && actual == "integer")
}

/// Equality as JSON Schema means it: numbers by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

impl<'s> Validator<'s> {
    fn resolve(&self, reference: &str, path: &str) -> Result<&'s Value, Violation> {
        let pointer = reference.strip_prefix('#').ok_or_else(|| {
            violation(path, "$ref", format!("`{reference}`: only references inside the schema (`#/...`) resolve"))
        })?;
        let decoded = pointer.replace("%25", "%");
        self.root.pointer(&decoded).ok_or_else(|| violation(path, "$ref", format!("`{reference}` points nowhere")))
    }

    /// `pattern` compiled (once per validation, within [`PATTERN_SIZE`]); a violation of `keyword` when it cannot be.
    fn pattern(&mut self, pattern: &str, keyword: &str, path: &str) -> Result<regex::Regex, Violation> {
        let compiled = self
            .patterns
            .entry(pattern.to_owned())
            .or_insert_with(|| regex::RegexBuilder::new(pattern).size_limit(PATTERN_SIZE).build().ok());
        compiled.clone().ok_or_else(|| {
            violation(path, keyword, format!("`{pattern}` is not a valid pattern (or compiles past the size budget)"))
        })
    }

    /// Counts `n` steps of work against [`MAX_STEPS`].
    fn spend(&mut self, n: usize, path: &str) -> Result<(), Violation> {
        self.steps = self.steps.saturating_add(n);
        if self.steps > MAX_STEPS {
            return Err(self.exhaust(path));
        }
        Ok(())
    }

    /// The budget's violation at `path`, remembered as the first when it is.
    fn exhaust(&mut self, path: &str) -> Violation {
        let spent = violation(path, "$ref", "the schema nests or branches past the validator's budget");
        self.exhausted.get_or_insert_with(|| spent.clone());
        spent
    }

    fn check(&mut self, schema: &'s Value, instance: &Value, path: &mut String, depth: usize) -> Result<(), Violation> {
        self.steps += 1;
        if depth > MAX_DEPTH || self.steps > MAX_STEPS {
            return Err(self.exhaust(path));
        }
        let schema = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => return Err(violation(path, "false", "no value is allowed here")),
            Value::Object(schema) => schema,
            _ => return Err(violation(path, "type", "the schema is not an object or a boolean")),
        };
        if let Some(Value::String(reference)) = schema.get("$ref") {
            let target = self.resolve(reference, path)?;
            self.check(target, instance, path, depth + 1)?;
        }
        self.check_type(schema, instance, path)?;
        if let Some(Value::Array(options)) = schema.get("enum")
            && !options.iter().any(|o| same(o, instance))
        {
            return Err(violation(path, "enum", "not one of the allowed values"));
        }
        if let Some(expected) = schema.get("const")
            && !same(expected, instance)
        {
            return Err(violation(path, "const", "not the constant value"));
        }
        self.check_combinators(schema, instance, path, depth)?;
        match instance {
            Value::Number(n) => check_number(schema, n.as_f64().unwrap_or(f64::NAN), path)?,
            Value::String(s) => {
                check_string(schema, s, path)?;
                if let Some(Value::String(pattern)) = schema.get("pattern") {
                    let regex = self.pattern(pattern, "pattern", path)?;
                    if !regex.is_match(s) {
                        return Err(violation(path, "pattern", format!("does not match `{pattern}`")));
                    }
                }
            }
            Value::Array(items) => self.check_array(schema, items, path, depth)?,
            Value::Object(object) => self.check_object(schema, object, path, depth)?,
            _ => {}
        }
        Ok(())
    }

    fn check_type(&self, schema: &Map<String, Value>, instance: &Value, path: &str) -> Result<(), Violation> {
        let nullable = schema.get("nullable") == Some(&Value::Bool(true));
        let allowed: Vec<&str> = match schema.get("type") {
            Some(Value::String(name)) => vec![name.as_str()],
            Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
            _ => return Ok(()),
        };
        if allowed.iter().any(|name| is_type(instance, name)) || (nullable && instance.is_null()) {
            return Ok(());
        }
        let mut expected = allowed.join(" or ");
        if nullable {
            expected.push_str(" or null");
        }
        Err(violation(path, "type", format!("expected {expected}, found {}", type_name(instance))))
    }

    fn check_combinators(
        &mut self,
        schema: &'s Map<String, Value>,
        instance: &Value,
        path: &mut String,
        depth: usize,
    ) -> Result<(), Violation> {
        if let Some(Value::Array(all)) = schema.get("allOf") {
            for member in all {
                self.check(member, instance, path, depth + 1)?;
            }
        }
        if let Some(Value::Array(any)) = schema.get("anyOf") {
            let mut first = None;
            for member in any {
                match self.check(member, instance, path, depth + 1) {
                    Ok(()) => {
                        first = None;
                        break;
                    }
                    Err(v) => first = first.or(Some(v)),
                }
            }
            if let Some(inner) = first {
                return Err(violation(path, "anyOf", format!("matches none of the alternatives (first: {inner})")));
            }
        }
        if let Some(Value::Array(one)) = schema.get("oneOf") {
            let mut matched = 0;
            for member in one {
                if self.check(member, instance, path, depth + 1).is_ok() {
                    matched += 1;
                }
            }
            if matched != 1 {
                return Err(violation(
                    path,
                    "oneOf",
                    format!("matches {matched} of the alternatives, not exactly one"),
                ));
            }
        }
        if let Some(not) = schema.get("not")
            && self.check(not, instance, path, depth + 1).is_ok()
        {
            return Err(violation(path, "not", "matches the schema it must not"));
        }
        if let Some(condition) = schema.get("if") {
            let branch = if self.check(condition, instance, path, depth + 1).is_ok() { "then" } else { "else" };
            if let Some(then) = schema.get(branch) {
                self.check(then, instance, path, depth + 1)?;
            }
        }
        Ok(())
    }

    fn check_array(
        &mut self,
        schema: &'s Map<String, Value>,
        items: &[Value],
        path: &mut String,
        depth: usize,
    ) -> Result<(), Violation> {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && (items.len() as u64) < min
        {
            return Err(violation(path, "minItems", format!("fewer than {min} items")));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && (items.len() as u64) > max
        {
            return Err(violation(path, "maxItems", format!("more than {max} items")));
        }
        if schema.get("uniqueItems") == Some(&Value::Bool(true)) {
            for (i, item) in items.iter().enumerate() {
                // Each item is compared with every earlier one: the comparisons count against the budget.
                self.spend(i, path)?;
                if items[..i].iter().any(|earlier| same(earlier, item)) {
                    return Err(violation(path, "uniqueItems", format!("item {i} repeats an earlier one")));
                }
            }
        }
        let prefix = schema.get("prefixItems").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for (i, item) in items.iter().enumerate() {
            let member = match prefix.get(i) {
                Some(member) => member,
                None => match schema.get("items") {
                    Some(member) => member,
                    None => continue,
                },
            };
            let len = path.len();
            path.push_str(&format!("/{i}"));
            self.check(member, item, path, depth + 1)?;
            path.truncate(len);
        }
        if let Some(contains) = schema.get("contains") {
            let found = items.iter().filter(|item| self.check(contains, item, &mut path.clone(), depth + 1).is_ok());
            let count = found.count() as u64;
            let min = schema.get("minContains").and_then(Value::as_u64).unwrap_or(1);
            if count < min {
                return Err(violation(path, "contains", format!("fewer than {min} items match `contains`")));
            }
        }
        Ok(())
    }

    fn check_object(
        &mut self,
        schema: &'s Map<String, Value>,
        object: &Map<String, Value>,
        path: &mut String,
        depth: usize,
    ) -> Result<(), Violation> {
        if let Some(Value::Array(required)) = schema.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    return Err(violation(path, "required", format!("`{name}` is missing")));
                }
            }
        }
        if let Some(min) = schema.get("minProperties").and_then(Value::as_u64)
            && (object.len() as u64) < min
        {
            return Err(violation(path, "minProperties", format!("fewer than {min} properties")));
        }
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
            && (object.len() as u64) > max
        {
            return Err(violation(path, "maxProperties", format!("more than {max} properties")));
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        let patterns = schema.get("patternProperties").and_then(Value::as_object);
        for (name, value) in object {
            let len = path.len();
            path.push('/');
            path.push_str(&escape(name));
            let mut described = false;
            if let Some(member) = properties.and_then(|p| p.get(name)) {
                described = true;
                self.check(member, value, path, depth + 1)?;
            }
            for (pattern, member) in patterns.into_iter().flatten() {
                let regex = self.pattern(pattern, "patternProperties", path)?;
                if regex.is_match(name) {
                    described = true;
                    self.check(member, value, path, depth + 1)?;
                }
            }
            if !described && let Some(additional) = schema.get("additionalProperties") {
                if additional == &Value::Bool(false) {
                    path.truncate(len);
                    return Err(violation(path, "additionalProperties", format!("`{name}` is not allowed")));
                }
                self.check(additional, value, path, depth + 1)?;
            }
            path.truncate(len);
        }
        Ok(())
    }
}

fn check_number(schema: &Map<String, Value>, n: f64, path: &str) -> Result<(), Violation> {
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    let flag = |key: &str| schema.get(key) == Some(&Value::Bool(true));
    if let Some(min) = bound("minimum") {
        let exclusive = flag("exclusiveMinimum");
        if n < min || (exclusive && n == min) {
            return Err(violation(path, "minimum", format!("below the minimum {min}")));
        }
    }
    if let Some(max) = bound("maximum") {
        let exclusive = flag("exclusiveMaximum");
        if n > max || (exclusive && n == max) {
            return Err(violation(path, "maximum", format!("above the maximum {max}")));
        }
    }
    if let Some(min) = bound("exclusiveMinimum")
        && n <= min
    {
        return Err(violation(path, "exclusiveMinimum", format!("not above {min}")));
    }
    if let Some(max) = bound("exclusiveMaximum")
        && n >= max
    {
        return Err(violation(path, "exclusiveMaximum", format!("not below {max}")));
    }
    if let Some(step) = bound("multipleOf").filter(|s| *s > 0.0) {
        let ratio = n / step;
        if (ratio - ratio.round()).abs() > 1e-9 {
            return Err(violation(path, "multipleOf", format!("not a multiple of {step}")));
        }
    }
    Ok(())
}

fn check_string(schema: &Map<String, Value>, s: &str, path: &str) -> Result<(), Violation> {
    let length = s.chars().count() as u64;
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && length < min
    {
        return Err(violation(path, "minLength", format!("shorter than {min} characters")));
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && length > max
    {
        return Err(violation(path, "maxLength", format!("longer than {max} characters")));
    }
    Ok(())
}

/// The `collection:` reference a schema still is, when the server has not inlined it.
pub fn unresolved_collection_ref(schema: &Value) -> Option<&str> {
    schema.get("$ref")?.as_str().filter(|r| r.starts_with("collection:"))
}

/// Whether `expected` can be a `matchesSchema` schema: an object or a boolean; a `collection:` reference names a
/// collection by its id and a JSON pointer (`collection:<id>#/components/schemas/Pet`).
pub fn check_expected(expected: &Value) -> Result<(), String> {
    if !expected.is_object() && !expected.is_boolean() {
        return Err("a JSON Schema object, or {\"$ref\": \"collection:<id>#<JSON pointer>\"}".into());
    }
    if let Some(reference) = unresolved_collection_ref(expected) {
        let rest = reference.trim_start_matches("collection:");
        let (id, pointer) = rest.split_once('#').unwrap_or((rest, ""));
        if uuid::Uuid::parse_str(id).is_err() || !(pointer.is_empty() || pointer.starts_with('/')) {
            return Err(format!("`{reference}`: a reference is `collection:<id>#<JSON pointer>`"));
        }
    }
    Ok(())
}

/// Whether a definition's nodes hold a `matchesSchema` assertion or condition whose schema is still a
/// `collection:` reference (a launch then reads and inlines it).
pub fn names_collection_schemas(definition: &Value) -> bool {
    let names =
        |check: &Value| check["operator"] == "matchesSchema" && unresolved_collection_ref(&check["expected"]).is_some();
    let nodes = definition["nodes"].as_array().map(Vec::as_slice).unwrap_or_default();
    nodes.iter().any(|node| {
        names(&node["condition"]) || node["assertions"].as_array().is_some_and(|checks| checks.iter().any(names))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pet() -> Value {
        json!({
            "$ref": "#/components/schemas/Pet",
            "components": {"schemas": {
                "Pet": {"type": "object", "required": ["name", "photoUrls"], "properties": {
                    "id": {"type": "integer", "format": "int64"},
                    "name": {"type": "string"},
                    "tag": {"type": "string", "nullable": true},
                    "photoUrls": {"type": "array", "items": {"type": "string"}},
                    "status": {"type": "string", "enum": ["available", "pending", "sold"]}
                }}
            }}
        })
    }

    #[test]
    fn petstore_pets_pass_and_fail_where_they_break() {
        assert_eq!(validate(&pet(), &json!({"name": "a", "photoUrls": [], "tag": null})), Ok(()));
        let missing = validate(&pet(), &json!({"photoUrls": []})).expect_err("no name");
        assert_eq!((missing.path.as_str(), missing.keyword.as_str()), ("", "required"));
        assert!(missing.to_string().starts_with("(root): "), "{missing}");
        let item = validate(&pet(), &json!({"name": "a", "photoUrls": ["x", 3]})).expect_err("number");
        assert_eq!((item.path.as_str(), item.keyword.as_str()), ("/photoUrls/1", "type"));
        let status = validate(&pet(), &json!({"name": "a", "photoUrls": [], "status": "lost"})).expect_err("enum");
        assert_eq!(status.keyword, "enum");
        let id = validate(&pet(), &json!({"name": "a", "photoUrls": [], "id": 1.5})).expect_err("integer");
        assert_eq!((id.path.as_str(), id.keyword.as_str()), ("/id", "type"));
    }

    #[test]
    fn budgets_stop_a_reference_loop() {
        let schema = json!({"$ref": "#"});
        assert!(validate(&schema, &json!(1)).is_err());
        // A loop or a blow-up under `not` is still the budget's failure, never a pass.
        let looped = json!({"not": {"$ref": "#/$defs/loop"}, "$defs": {"loop": {"$ref": "#/$defs/loop"}}});
        assert_eq!(validate(&looped, &json!(1)).expect_err("a loop").keyword, "$ref");
        let mut defs = serde_json::Map::new();
        for level in 0..40 {
            let next = json!({"$ref": format!("#/$defs/l{}", level + 1)});
            defs.insert(format!("l{level}"), json!({"anyOf": [next, next]}));
        }
        defs.insert("l40".into(), json!({"type": "string"}));
        let blowup = json!({"not": {"$ref": "#/$defs/l0"}, "$defs": defs});
        let spent = validate(&blowup, &json!(1)).expect_err("past the budget");
        assert!(spent.message.contains("budget"), "{spent}");
        let exclusive = json!({"type": "number", "minimum": 1, "exclusiveMinimum": true});
        assert_eq!(validate(&exclusive, &json!(1)).expect_err("3.0 exclusive").keyword, "minimum");
        assert_eq!(validate(&json!({"exclusiveMaximum": 3}), &json!(3)).expect_err("2020").keyword, "exclusiveMaximum");
    }

    #[test]
    fn unique_items_and_patterns_stay_within_the_budget() {
        // 5,000 distinct items would take 12.5 million comparisons: the budget stops them with a violation.
        let many: Vec<u32> = (0..5_000).collect();
        let stopped = validate(&json!({"uniqueItems": true}), &json!(many)).expect_err("past the budget");
        assert!(stopped.message.contains("budget"), "{stopped}");
        let few: Vec<u32> = (0..500).collect();
        assert!(validate(&json!({"uniqueItems": true}), &json!(few)).is_ok());
        // One pattern over many strings is compiled once; a pattern compiling past its size budget is a violation.
        let strings: Vec<String> = (0..20_000).map(|i| format!("id-{i}")).collect();
        let schema = json!({"type": "array", "items": {"type": "string", "pattern": "^id-[0-9]+$"}});
        assert!(validate(&schema, &json!(strings)).is_ok());
        let huge = json!({"type": "string", "pattern": "\\w{1000}\\w{1000}\\w{1000}"});
        assert_eq!(validate(&huge, &json!("x")).expect_err("too big").keyword, "pattern");
    }
}
