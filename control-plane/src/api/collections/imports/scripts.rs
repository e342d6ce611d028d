//! Postman scripts: the six common test-line patterns become extractors and assertions; every other line of a test
//! or pre-request script (but blank lines, comments and the scaffolding of the converted lines: a `pm.test(...)`
//! wrapper's opening and closing lines and the line reading the JSON answer into a variable) is reported with its
//! place and line number, never dropped silently.

use hookflow_shared::api::imports::{ImportReport, NotConverted};
use regex::Regex;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::LazyLock;

/// Characters of a line kept in the report.
const MAX_LINE_CHARS: usize = 500;

fn regex(pattern: &str) -> Regex {
    #[allow(clippy::unwrap_used)] // Constant patterns, covered by the tests below.
    Regex::new(pattern).unwrap()
}

const STRING: &str = r#"(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"#;
const PATH: &str = r#"(?:\.[A-Za-z_$][\w$]*|\[\d+\]|\["[^"]*"\]|\['[^']*'\])*"#;

static OPENER: LazyLock<Regex> =
    LazyLock::new(|| regex(&format!(r"^pm\.test\(\s*{STRING}\s*,\s*(?:function\s*\(\s*\)|\(\s*\)\s*=>)\s*\{{\s*")));
static CLOSER: LazyLock<Regex> = LazyLock::new(|| regex(r"\s*\}\s*\)\s*;?$"));
static JSON_VAR: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^(?:var|let|const)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:pm\.response\.json\(\)|JSON\.parse\(\s*responseBody\s*\))\s*;?$",
    )
});
static STATUS: LazyLock<Regex> = LazyLock::new(|| regex(r"^pm\.response\.to\.have\.status\(\s*(\d{3})\s*\)\s*;?$"));
static EQL: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(
        r"^pm\.expect\(\s*(pm\.response\.json\(\)|[A-Za-z_$][\w$]*)({PATH})\s*\)\.to\.(?:eql|equal)\((.*)\)\s*;?$"
    ))
});
static HEADER: LazyLock<Regex> =
    LazyLock::new(|| regex(&format!(r"^pm\.response\.to\.have\.header\(\s*({STRING})\s*\)\s*;?$")));
static DURATION: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"^pm\.expect\(\s*pm\.response\.responseTime\s*\)\.to\.be\.below\(\s*(\d+(?:\.\d+)?)\s*\)\s*;?$")
});
static SET: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(
        r"^pm\.(?:environment|collectionVariables)\.set\(\s*({STRING})\s*,\s*(pm\.response\.json\(\)|[A-Za-z_$][\w$]*)({PATH})\s*\)\s*;?$"
    ))
});
static INCLUDE: LazyLock<Regex> = LazyLock::new(|| {
    regex(&format!(r"^pm\.expect\(\s*pm\.response\.text\(\)\s*\)\.to\.include\(\s*({STRING})\s*\)\s*;?$"))
});

/// The lines of a Postman script (`exec`: a list of lines, each of which may hold several, or one text).
pub fn lines(exec: &Value) -> Vec<String> {
    let text = match exec {
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("\n"),
        Value::String(text) => text.clone(),
        _ => String::new(),
    };
    text.lines().map(str::to_owned).collect()
}

/// The converted tests of one request: its node's extractors and assertions.
#[derive(Debug, Default)]
pub struct Tests {
    pub extractors: Vec<Value>,
    pub assertions: Vec<Value>,
    names: HashSet<String>,
}

impl Tests {
    /// A name not taken yet: `base`, else `base_2`, `base_3`...
    fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_owned();
        let mut n = 1;
        while self.names.contains(&name) {
            n += 1;
            name = format!("{base}_{n}");
        }
        self.names.insert(name.clone());
        name
    }

    fn check(&mut self, base: &str, extractor: Value, operator: &str, expected: Option<Value>) {
        let name = self.fresh(base);
        let mut extractor = extractor;
        extractor["name"] = json!(name);
        self.extractors.push(extractor);
        let mut assertion = json!({"source": name, "operator": operator});
        if let Some(expected) = expected {
            assertion["expected"] = expected;
        }
        self.assertions.push(assertion);
    }
}

/// Reads a test script: converted lines go into `tests`, the others into the report under `place`.
pub fn convert_tests(lines: &[String], place: &str, tests: &mut Tests, report: &mut ImportReport) {
    let mut json_vars: HashSet<String> = HashSet::new();
    walk(lines, place, report, |statement| convert(statement, &mut json_vars, tests));
}

/// Reads a pre-request script: none of it converts, every line is reported.
pub fn list_prerequest(lines: &[String], place: &str, report: &mut ImportReport) {
    walk(lines, place, report, |_| Outcome::Kept);
}

enum Outcome {
    Converted,
    Scaffolding,
    Kept,
}

/// Goes through the lines, skipping blanks and comments, peeling `pm.test` wrappers off single-line tests.
fn walk(lines: &[String], place: &str, report: &mut ImportReport, mut each: impl FnMut(&str) -> Outcome) {
    let mut in_block_comment = false;
    for (index, line) in lines.iter().enumerate() {
        let trimmed = line.trim();
        if in_block_comment {
            if trimmed.contains("*/") {
                in_block_comment = false;
            }
            continue;
        }
        if trimmed.is_empty() || trimmed.starts_with("//") {
            continue;
        }
        if trimmed.starts_with("/*") {
            in_block_comment = !trimmed.contains("*/");
            continue;
        }
        let mut statement = trimmed;
        let mut wrapped = false;
        if let Some(opener) = OPENER.find(statement) {
            statement = &statement[opener.end()..];
            wrapped = true;
        }
        if (wrapped || statement.starts_with('}'))
            && let Some(closer) = CLOSER.find(statement)
        {
            statement = &statement[..closer.start()];
            wrapped = true;
        }
        let statement = statement.trim();
        let outcome = if statement.is_empty() && wrapped { Outcome::Scaffolding } else { each(statement) };
        match outcome {
            Outcome::Converted => report.converted += 1,
            Outcome::Scaffolding => {}
            Outcome::Kept => report.not_converted.push(NotConverted {
                place: place.to_owned(),
                line: index + 1,
                text: trimmed.chars().take(MAX_LINE_CHARS).collect(),
            }),
        }
    }
}

fn convert(statement: &str, json_vars: &mut HashSet<String>, tests: &mut Tests) -> Outcome {
    if let Some(c) = JSON_VAR.captures(statement) {
        json_vars.insert(c[1].to_owned());
        return Outcome::Scaffolding;
    }
    let is_json =
        |source: &str, json_vars: &HashSet<String>| source == "pm.response.json()" || json_vars.contains(source);
    if let Some(c) = STATUS.captures(statement) {
        let status: u16 = c[1].parse().unwrap_or(0);
        tests.check("status", json!({"kind": "statusCode"}), "equals", Some(json!(status)));
        return Outcome::Converted;
    }
    if let Some(c) = EQL.captures(statement)
        && is_json(&c[1], json_vars)
        && let (Some(path), Some(expected)) = (json_path(&c[2]), literal(c[3].trim()))
    {
        let base = format!("json{}", slug(&c[2]));
        tests.check(&base, json!({"kind": "jsonPath", "expression": path}), "equals", Some(expected));
        return Outcome::Converted;
    }
    if let Some(c) = HEADER.captures(statement)
        && let Some(Value::String(header)) = literal(&c[1])
    {
        let base = format!("header{}", slug(&format!(".{header}")));
        tests.check(&base, json!({"kind": "header", "header": header}), "exists", None);
        return Outcome::Converted;
    }
    if let Some(c) = DURATION.captures(statement)
        && let Some(limit) = literal(&c[1])
    {
        tests.check("duration", json!({"kind": "duration"}), "lessThan", Some(limit));
        return Outcome::Converted;
    }
    if let Some(c) = SET.captures(statement)
        && is_json(&c[2], json_vars)
        && let (Some(Value::String(name)), Some(path)) = (literal(&c[1]), json_path(&c[3]))
        && hookflow_shared::flow::names::definable_problem(&name).is_none()
        && !tests.names.contains(&name)
    {
        tests.names.insert(name.clone());
        tests.extractors.push(json!({"name": name, "kind": "jsonPath", "expression": path}));
        return Outcome::Converted;
    }
    if let Some(c) = INCLUDE.captures(statement)
        && let Some(text @ Value::String(_)) = literal(&c[1])
    {
        tests.check("body", json!({"kind": "body"}), "contains", Some(text));
        return Outcome::Converted;
    }
    Outcome::Kept
}

/// A JavaScript path (`.data.items[0]["id"]`) as JSONPath (`$.data.items[0]['id']`).
fn json_path(path: &str) -> Option<String> {
    let mut out = String::from("$");
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(tail) = rest.strip_prefix('.') {
            let end = tail.find(['.', '[']).unwrap_or(tail.len());
            out.push('.');
            out.push_str(&tail[..end]);
            rest = &tail[end..];
        } else if let Some(tail) = rest.strip_prefix('[') {
            let end = tail.find(']')?;
            let inner = &tail[..end];
            if inner.chars().all(|c| c.is_ascii_digit()) {
                out.push_str(&format!("[{inner}]"));
            } else {
                let key = inner.trim_matches(['"', '\'']);
                out.push_str(&format!("['{}']", key.replace('\\', "\\\\").replace('\'', "\\'")));
            }
            rest = &tail[end + 1..];
        } else {
            return None;
        }
    }
    Some(out)
}

/// `_data_items_0_id` from `.data.items[0]["id"]` (names of the generated extractors).
fn slug(path: &str) -> String {
    let mut out = String::new();
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_end_matches('_');
    out.chars().take(60).collect()
}

/// A JavaScript literal as JSON: numbers, `true`, `false`, `null`, double- or single-quoted strings, and JSON
/// arrays or objects.
fn literal(text: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return Some(value);
    }
    let inner = text.strip_prefix('\'')?.strip_suffix('\'')?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                other => out.push(other),
            },
            '\'' => return None,
            c => out.push(c),
        }
    }
    Some(Value::String(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(script: &str) -> (Tests, ImportReport) {
        let lines: Vec<String> = script.lines().map(str::to_owned).collect();
        let mut tests = Tests::default();
        let mut report = ImportReport::default();
        convert_tests(&lines, "Users/Log in", &mut tests, &mut report);
        (tests, report)
    }

    #[test]
    fn the_six_patterns_convert_and_the_rest_is_listed_with_its_line() {
        let script = r#"// checks
pm.test("Status code is 200", function () {
    pm.response.to.have.status(200);
});
var jsonData = pm.response.json();
pm.test('user', () => { pm.expect(jsonData.user.name).to.eql('Ada'); });
pm.expect(pm.response.json().items[0]["id"]).to.equal(7);
pm.response.to.have.header("Content-Type");
pm.expect(pm.response.responseTime).to.be.below(500);
pm.environment.set("token", jsonData.token);
pm.collectionVariables.set('user_id', pm.response.json().user.id);
pm.expect(pm.response.text()).to.include("Ada");

console.log(jsonData);
/* a block
   comment */
pm.expect(jsonData.count).to.be.above(2);
"#;
        let (tests, report) = run(script);
        assert_eq!(report.converted, 8);
        let listed: Vec<(usize, &str)> = report.not_converted.iter().map(|n| (n.line, n.text.as_str())).collect();
        assert_eq!(listed, [(14, "console.log(jsonData);"), (17, "pm.expect(jsonData.count).to.be.above(2);")]);
        assert!(report.not_converted.iter().all(|n| n.place == "Users/Log in"));
        let expressions: Vec<&str> = tests.extractors.iter().filter_map(|e| e["expression"].as_str()).collect();
        assert_eq!(expressions, ["$.user.name", "$.items[0]['id']", "$.token", "$.user.id"]);
        let kinds: Vec<&str> = tests.extractors.iter().filter_map(|e| e["kind"].as_str()).collect();
        assert_eq!(kinds, ["statusCode", "jsonPath", "jsonPath", "header", "duration", "jsonPath", "jsonPath", "body"]);
        assert_eq!(tests.assertions.len(), 6);
        assert_eq!(tests.assertions[1], json!({"source": "json_user_name", "operator": "equals", "expected": "Ada"}));
        assert_eq!(tests.assertions[4], json!({"source": "duration", "operator": "lessThan", "expected": 500}));
        assert_eq!(tests.extractors[5]["name"], "token");
    }

    #[test]
    fn pre_request_lines_are_all_listed() {
        let lines: Vec<String> =
            ["", "pm.variables.set('x', 1);", "// note", "  postman.setNextRequest(null);"].map(str::to_owned).to_vec();
        let mut report = ImportReport::default();
        list_prerequest(&lines, "Ping", &mut report);
        let listed: Vec<usize> = report.not_converted.iter().map(|n| n.line).collect();
        assert_eq!(listed, [2, 4]);
        assert_eq!(report.converted, 0);
    }
}
