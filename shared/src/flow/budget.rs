//! Budgets for what users feed the parsers: an expression is at most 4 KiB and nests at most 32 levels (so
//! recursive-descent parsers of XPath and JSONPath cannot exhaust the stack), and an XML document is at most
//! 8 MiB, nests at most 256 elements and declares no entities (checked by a linear scan before parsing, so deep
//! or quadratic documents never reach the parser). A JSONPath's result may grow with the document only linearly
//! (at most one descendant segment, unions multiplying by at most 8): evaluation lists every match, so two `..` over
//! a deep document would list billions. A rendered template is at most 16 MiB, and what one run's `set_variables`
//! nodes hold at most 64 MiB (doubling a value node after node would otherwise take the process's memory).
//! Exceeding one is an error that names the limit. Also the size of a JSON value as text, estimated for the
//! writers' byte budgets.

/// About how many bytes a JSON value takes as text (strings and keys by their length, the rest a few bytes each),
/// counted without encoding it: what a writer's byte budget charges for a definition.
pub fn json_size(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|v| json_size(v) + 1).sum::<usize>(),
        Value::Object(map) => 2 + map.iter().map(|(k, v)| k.len() + 4 + json_size(v)).sum::<usize>(),
    }
}

/// [`json_size`] when it is at most `limit`, without walking further than that; `None` when it is larger.
pub fn json_size_within(value: &serde_json::Value, limit: usize) -> Option<usize> {
    use serde_json::Value;
    let size = match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => {
            let mut total = 2usize;
            for item in items {
                total += json_size_within(item, limit.checked_sub(total)?)? + 1;
            }
            total
        }
        Value::Object(map) => {
            let mut total = 2usize;
            for (key, item) in map {
                total += key.len() + 4;
                total += json_size_within(item, limit.checked_sub(total)?)?;
            }
            total
        }
    };
    (size <= limit).then_some(size)
}

/// Longest expression.
pub const MAX_EXPRESSION: usize = 4 * 1024;
/// Descendant segments (`..`) one JSONPath may have, nested queries of its filters included.
pub const MAX_JSON_PATH_DESCENDANTS: usize = 1;
/// What a JSONPath's unions may multiply its matches by, all brackets together.
pub const MAX_JSON_PATH_UNION: usize = 8;
/// Largest text a template renders to.
pub const MAX_RENDERED: usize = 16 * 1024 * 1024;
/// Most bytes one run's variables set by `set_variables` nodes hold together.
pub const MAX_SET_VARIABLES: usize = 64 * 1024 * 1024;
/// Deepest bracket nesting of an expression.
pub const MAX_EXPRESSION_DEPTH: usize = 32;
/// Largest XML document parsed.
pub const MAX_XML_BYTES: usize = 8 * 1024 * 1024;
/// Deepest XML element nesting.
pub const MAX_XML_DEPTH: usize = 256;

/// Checks an expression's length and bracket nesting (outside quoted strings).
pub fn check_expression(expression: &str) -> Result<(), String> {
    checked_outside_quotes(expression).map(drop)
}

/// [`check_expression`], answering the expression's text outside quoted strings (the length checked first, so the
/// scan is bounded).
fn checked_outside_quotes(expression: &str) -> Result<String, String> {
    if expression.len() > MAX_EXPRESSION {
        return Err(format!("longer than {MAX_EXPRESSION} bytes"));
    }
    let outside = outside_quotes(expression);
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in outside.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > MAX_EXPRESSION_DEPTH {
        return Err(format!("nests deeper than {MAX_EXPRESSION_DEPTH} levels"));
    }
    Ok(outside)
}

/// Checks a JSONPath before it is parsed: [`check_expression`], at most [`MAX_JSON_PATH_DESCENDANTS`] descendant
/// segments, unions multiplying matches by at most [`MAX_JSON_PATH_UNION`] (each bracket's selectors, separated by
/// commas outside quotes and parentheses, counted wherever the bracket is: an over-count, never an under-count), and
/// no query of the root (`$`) inside a filter (a filter runs once per node it tests, and the root's query would walk
/// the whole document each time).
pub fn check_json_path(expression: &str) -> Result<(), String> {
    checked_json_path(expression).map(drop)
}

/// [`check_json_path`] for a path the server evaluates over bodies strangers send (capture rule templates, trigger
/// extracts): no `match()` or `search()` either, which compile their pattern again for every node they test.
pub fn check_capture_json_path(expression: &str) -> Result<(), String> {
    let outside = checked_json_path(expression)?;
    if outside.contains("match(") || outside.contains("search(") {
        return Err("`match()` and `search()` are not evaluated over captured bodies".to_owned());
    }
    Ok(())
}

/// [`check_json_path`], answering the path's text outside quoted strings.
fn checked_json_path(expression: &str) -> Result<String, String> {
    let outside = checked_outside_quotes(expression)?;
    let (mut union, mut open) = (1usize, Vec::<(char, usize)>::new());
    for c in outside.chars() {
        match c {
            '[' => open.push(('[', 1)),
            '(' => open.push(('(', 0)),
            ',' => {
                if let Some((kind, selectors)) = open.last_mut()
                    && *kind == '['
                {
                    *selectors += 1;
                }
            }
            ']' | ')' => {
                if let Some(('[', selectors)) = open.pop() {
                    union = union.saturating_mul(selectors);
                }
            }
            _ => {}
        }
    }
    let descendants = outside.matches("..").count();
    if descendants > MAX_JSON_PATH_DESCENDANTS {
        return Err(format!(
            "it has {descendants} descendant segments (`..`): at most {MAX_JSON_PATH_DESCENDANTS}, so its matches \
             grow with the document, not past it"
        ));
    }
    if union > MAX_JSON_PATH_UNION {
        return Err(format!("its unions multiply matches by {union}: at most {MAX_JSON_PATH_UNION}"));
    }
    if outside.matches('$').count() > 1 {
        return Err("a filter queries the root (`$`): it would walk the whole document for every node".to_owned());
    }
    Ok(outside)
}

/// The expression's text outside quoted strings (each string stands as one space, so the segments on either side
/// stay apart).
fn outside_quotes(expression: &str) -> String {
    let (mut outside, mut quote) = (String::with_capacity(expression.len()), None::<char>);
    let mut chars = expression.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => {
                quote = Some(c);
                outside.push(' ');
            }
            (None, c) => outside.push(c),
        }
    }
    outside
}

/// Checks an XML document before it is parsed: size, element nesting, no entity declarations.
pub fn check_xml(text: &str) -> Result<(), String> {
    if text.len() > MAX_XML_BYTES {
        return Err(format!("the XML body is larger than {MAX_XML_BYTES} bytes"));
    }
    let bytes = text.as_bytes();
    let (mut depth, mut at) = (0usize, 0usize);
    while let Some(offset) = bytes[at..].iter().position(|b| *b == b'<') {
        at += offset;
        let rest = &bytes[at..];
        let skip_to = |end: &[u8]| rest.windows(end.len()).position(|w| w == end).map(|p| p + end.len());
        let length = if rest.starts_with(b"<!--") {
            skip_to(b"-->")
        } else if rest.starts_with(b"<![CDATA[") {
            skip_to(b"]]>")
        } else if rest.starts_with(b"<!") {
            // A document type with an internal subset (`[...]`) is where entities are declared.
            let end = rest.iter().position(|b| matches!(b, b'>' | b'['));
            if end.is_some_and(|e| rest[e] == b'[') {
                return Err("the XML body declares entities (a document type with an internal subset)".to_owned());
            }
            end.map(|e| e + 1)
        } else if rest.starts_with(b"<?") {
            skip_to(b"?>")
        } else {
            let end = skip_to(b">");
            let tag = &rest[..end.unwrap_or(rest.len())];
            if tag.starts_with(b"</") {
                depth = depth.saturating_sub(1);
            } else if !tag.ends_with(b"/>") {
                depth += 1;
                if depth > MAX_XML_DEPTH {
                    return Err(format!("the XML body nests deeper than {MAX_XML_DEPTH} elements"));
                }
            }
            end
        };
        match length {
            Some(length) => at += length,
            None => break,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_paths_may_grow_with_the_document_only_linearly() {
        for fine in [
            "$.store.book[?@.price < 10].title",
            "$..book[0,1]",
            "$['a','b'][0,1]",
            "$[?match(@.name, 'a.*')]",
            "$['a..b', \"c..d\"]",
            "$..*",
        ] {
            assert!(check_json_path(fine).is_ok(), "{fine}: {:?}", check_json_path(fine));
        }
        let two = check_json_path("$..*..*").expect_err("two descendant segments");
        assert!(two.contains("2 descendant segments"), "{two}");
        assert!(check_json_path("$..a[?@..b]").is_err(), "a descendant inside a filter counts");
        let wide = check_json_path("$[*,*,*][*,*,*]").expect_err("9 x");
        assert!(wide.contains("by 9"), "{wide}");
        assert!(check_json_path(&format!("$.a{}", "[0]".repeat(40))).is_ok());
        assert!(check_json_path(&"[".repeat(40)).is_err(), "nesting is still checked");
        let rooted = check_json_path("$[?count($[*]) > 0]").expect_err("the root inside a filter");
        assert!(rooted.contains("queries the root"), "{rooted}");
        assert!(check_json_path("$[?@.price > 10]['$a']").is_ok(), "a `$` in a string is a name");
        assert!(check_json_path("$[?match(@.name, 'a.*')]").is_ok());
        let regex = check_capture_json_path("$..*[?search(@, 'a+')]").expect_err("regex over captures");
        assert!(regex.contains("search()"), "{regex}");
        assert!(check_capture_json_path("$.order['search(']").is_ok(), "a name is not a call");
        assert!(check_capture_json_path("$..*..*").is_err());
    }

    #[test]
    fn expressions_are_checked_for_length_and_nesting() {
        assert!(check_expression("$.store.book[?@.price < 10].title").is_ok());
        assert!(check_expression("//a[contains(., '((((((((((((((((((((((((((((((((((((')]").is_ok(), "quoted");
        let deep = format!("{}1{}", "(".repeat(3000), ")".repeat(3000));
        assert!(check_expression(&deep).is_err());
        let filters = format!("$.a{}", "[?@.b".repeat(40));
        assert!(check_expression(&filters).expect_err("refused").contains("32"));
        assert!(check_expression(&"a".repeat(5000)).expect_err("refused").contains("4096"));
    }

    #[test]
    fn sizes_within_a_limit_stop_early() {
        let value = serde_json::json!({"a": [1, "xyz", null, {"b": true}], "c": "d"});
        let size = json_size(&value);
        assert_eq!(json_size_within(&value, size), Some(size));
        assert_eq!(json_size_within(&value, size - 1), None);
        assert_eq!(json_size_within(&value, 0), None);
    }

    #[test]
    fn xml_is_checked_before_parsing() {
        assert!(check_xml("<?xml version=\"1.0\"?><a><b x='1'/><!-- <c> --><![CDATA[<d>]]><e>t</e></a>").is_ok());
        let deep = format!("{}{}", "<a>".repeat(40_000), "</a>".repeat(40_000));
        assert!(check_xml(&deep).expect_err("refused").contains("256"));
        let bomb = "<!DOCTYPE l [<!ENTITY a \"aaaa\"><!ENTITY b \"&a;&a;\">]><l>&b;</l>";
        assert!(check_xml(bomb).expect_err("refused").contains("entities"));
    }
}
