//! The `q` search syntax: AND-ed `field:value` terms, `-` to negate, double quotes for values with spaces.
//! Fields: method, path, header.<name>, query.<name>, body, body.<JSONPath> (`body.$.data.id:42`, compared as
//! text), content_type, ip, signature, handshake; a bare word searches the body.

use crate::error::{ApiError, ApiResult};

/// One parsed term of `q`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub negate: bool,
    pub field: Field,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    Method,
    Path,
    Header(String),
    Query(String),
    Body,
    /// A value in a JSON body by JSONPath (`body.$.data.id:value`), compared as text.
    BodyJson(String),
    ContentType,
    Ip,
    /// A signature verdict (`signature:invalid`).
    Signature,
    /// The handshake preset that recognised the capture (`handshake:slack`).
    Handshake,
}

pub fn parse(q: &str) -> ApiResult<Vec<Term>> {
    let mut terms = Vec::new();
    let mut chars = q.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(terms);
        }
        let negate = chars.next_if_eq(&'-').is_some();
        let mut word = String::new();
        let mut field = None;
        let mut quoted = false;
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() && !quoted {
                break;
            }
            chars.next();
            match c {
                '"' => quoted = !quoted,
                ':' if field.is_none() && !quoted => field = Some(std::mem::take(&mut word)),
                _ => word.push(c),
            }
        }
        if quoted {
            return Err(ApiError::invalid("`q` has an unclosed quote"));
        }
        let field = match field.as_deref() {
            None => Field::Body,
            Some(name) => field_of(name)?,
        };
        if word.is_empty() {
            return Err(ApiError::invalid("`q` has a term with no value (write field:value)"));
        }
        terms.push(Term { negate, field, value: word });
    }
}

fn field_of(name: &str) -> ApiResult<Field> {
    if let Some(path) = name.strip_prefix("body.").filter(|p| p.starts_with('$')) {
        return Ok(Field::BodyJson(path.to_owned()));
    }
    let lower = name.to_ascii_lowercase();
    Ok(match lower.as_str() {
        "method" => Field::Method,
        "path" => Field::Path,
        "body" => Field::Body,
        "content_type" => Field::ContentType,
        "ip" => Field::Ip,
        "signature" => Field::Signature,
        "handshake" => Field::Handshake,
        _ => {
            if let Some(header) = lower.strip_prefix("header.").filter(|h| !h.is_empty()) {
                Field::Header(header.to_owned())
            } else if let Some(query) = name.strip_prefix("query.").filter(|q| !q.is_empty()) {
                Field::Query(query.to_owned())
            } else {
                return Err(ApiError::invalid(format!(
                    "unknown search field `{name}` in `q`; use method, path, header.<name>, query.<name>, body, \
                     body.$.<path>, content_type, ip, signature or handshake"
                )));
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(negate: bool, field: Field, value: &str) -> Term {
        Term { negate, field, value: value.into() }
    }

    #[test]
    fn parses_fields_negation_and_quotes() {
        let terms =
            parse(r#"method:POST header.X-GitHub-Event:push -body:"dry run" query.page:2 opened"#).expect("parse");
        assert_eq!(
            terms,
            [
                term(false, Field::Method, "POST"),
                term(false, Field::Header("x-github-event".into()), "push"),
                term(true, Field::Body, "dry run"),
                term(false, Field::Query("page".into()), "2"),
                term(false, Field::Body, "opened"),
            ]
        );
        assert_eq!(parse("  ").expect("empty"), []);
        assert_eq!(parse("path:/a:b").expect("colon in value")[0], term(false, Field::Path, "/a:b"));
        assert_eq!(parse("ip:10.0.0.1 content_type:application/json").expect("parse").len(), 2);
        assert_eq!(parse("-signature:invalid").expect("parse")[0], term(true, Field::Signature, "invalid"));
        assert_eq!(parse("handshake:zoom").expect("parse")[0], term(false, Field::Handshake, "zoom"));
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        for bad in ["colour:red", "method:", "body:\"open", "header.:x"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
