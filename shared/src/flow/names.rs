//! Variable names: the names a flow may define and templates may use, and the names under `execution.` that are
//! built in (`{{execution.capture_url}}`), which flows, environments and launches may not define.

/// Names under this prefix are built in.
pub const RESERVED_PREFIX: &str = "execution.";
/// The built-in name of the execution's own capture URL.
pub const CAPTURE_URL: &str = "execution.capture_url";

/// A name usable in templates: a letter or `_`, then letters, digits, `_`, `-` or `.`.
pub fn is_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.len() <= 128
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Whether `name` is built in (under `execution.`).
pub fn is_reserved(name: &str) -> bool {
    name.starts_with(RESERVED_PREFIX)
}

/// Why a name may not be defined by a flow, an environment or a launch: `None` when it may.
pub fn reserved_problem(name: &str) -> Option<String> {
    is_reserved(name).then(|| {
        format!("`{name}` is reserved: names under `{RESERVED_PREFIX}` are built in (`{{{{{CAPTURE_URL}}}}}`)")
    })
}

/// Why a flow cannot define the variable `name` (flow variables, set_variables, extractors): `None` when it can.
pub fn definable_problem(name: &str) -> Option<String> {
    if is_name(name) { reserved_problem(name) } else { Some("not a valid variable name".into()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_under_execution_are_reserved() {
        assert_eq!(definable_problem("base_url"), None);
        assert_eq!(definable_problem("executions.count"), None, "only the `execution.` prefix is reserved");
        assert_eq!(definable_problem("9lives").as_deref(), Some("not a valid variable name"));
        let reserved = definable_problem("execution.capture_url").expect("reserved");
        assert!(reserved.contains("reserved") && reserved.contains("{{execution.capture_url}}"), "{reserved}");
    }
}
