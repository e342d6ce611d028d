//! curl command lines (one or more, as a shell reads them: quotes, `$'...'`, backslash escapes and line
//! continuations): `-X`, `-H`, `-d`/`--data`/`--data-raw`/`--data-binary`/`--data-ascii`, `--data-urlencode`, `-F`,
//! `-u`, `-A`, `-e`, `-b`, `--json`, `-G`, `-I` and the URL. Options that change nothing the request sends (`-s`, `-L`,
//! `-k`, `--compressed`...) are accepted; unknown ones and data read from files are warned about.

use crate::api::collections::imports::model::{
    Body, Converted, Request, add_header, basic, file_part, has_header, request_name, text_part,
};
use crate::error::{ApiError, ApiResult};
use serde_json::Value;

/// A shell word, or the end of a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    End,
}

/// Splits text into words as a POSIX shell does (no expansion); unquoted newlines and `;` end a command.
fn tokenize(text: &str) -> ApiResult<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    let unclosed = || ApiError::invalid("the curl command line has an unclosed quote");
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some('\r') if chars.peek() == Some(&'\n') => {
                    chars.next();
                }
                Some(other) => {
                    word.push(other);
                    in_word = true;
                }
                None => {}
            },
            '\'' => {
                in_word = true;
                loop {
                    match chars.next().ok_or_else(unclosed)? {
                        '\'' => break,
                        c => word.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next().ok_or_else(unclosed)? {
                        '"' => break,
                        '\\' => match chars.next().ok_or_else(unclosed)? {
                            c @ ('"' | '\\' | '$' | '`') => word.push(c),
                            '\n' => {}
                            c => {
                                word.push('\\');
                                word.push(c);
                            }
                        },
                        c => word.push(c),
                    }
                }
            }
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                in_word = true;
                ansi_c(&mut chars, &mut word).ok_or_else(unclosed)?;
            }
            '\n' | ';' => {
                if in_word {
                    tokens.push(Token::Word(std::mem::take(&mut word)));
                    in_word = false;
                }
                tokens.push(Token::End);
            }
            '#' if !in_word => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    tokens.push(Token::Word(std::mem::take(&mut word)));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        tokens.push(Token::Word(word));
    }
    tokens.push(Token::End);
    Ok(tokens)
}

/// The inside of `$'...'` (after the opening quote): C escapes.
fn ansi_c(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, word: &mut String) -> Option<()> {
    loop {
        match chars.next()? {
            '\'' => return Some(()),
            '\\' => match chars.next()? {
                'n' => word.push('\n'),
                't' => word.push('\t'),
                'r' => word.push('\r'),
                '0' => word.push('\0'),
                'x' => {
                    let hex: String = [chars.next()?, chars.next()?].iter().collect();
                    word.push(char::from(u8::from_str_radix(&hex, 16).ok()?));
                }
                'u' => {
                    let hex: String = (0..4).filter_map(|_| chars.next()).collect();
                    word.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                c => word.push(c),
            },
            c => word.push(c),
        }
    }
}

/// Options taking a value that are read and ignored.
const IGNORED_WITH_VALUE: [&str; 14] = [
    "-o",
    "--output",
    "-m",
    "--max-time",
    "--connect-timeout",
    "-w",
    "--write-out",
    "--retry",
    "-c",
    "--cookie-jar",
    "--cacert",
    "--cert",
    "--key",
    "--proxy",
];

/// Converts curl command lines.
pub fn lines(text: &str) -> ApiResult<Converted> {
    let mut converted = Converted { title: "curl import".to_owned(), ..Converted::default() };
    let mut command: Vec<String> = Vec::new();
    for token in tokenize(text)? {
        match token {
            Token::Word(word) => command.push(word),
            Token::End => {
                if !command.is_empty() {
                    let words = std::mem::take(&mut command);
                    if words[0] != "curl" {
                        return Err(ApiError::invalid("every command must begin with `curl`"));
                    }
                    let request = one(&mut converted, &words[1..])?;
                    converted.push(request)?;
                }
            }
        }
    }
    if converted.requests.is_empty() {
        return Err(ApiError::invalid("no curl command found"));
    }
    Ok(converted)
}

/// One command's request.
fn one(converted: &mut Converted, words: &[String]) -> ApiResult<Request> {
    let mut method: Option<String> = None;
    let mut url: Option<String> = None;
    let mut headers = std::collections::BTreeMap::new();
    let mut data: Vec<String> = Vec::new();
    let mut parts: Vec<Value> = Vec::new();
    let mut get = false;
    let mut json = false;
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        i += 1;
        // `-XPOST`, `-d'a=1'`, `--data=x`: a value attached to its option.
        let (option, attached) = if let Some((name, value)) = word.split_once('=').filter(|_| word.starts_with("--")) {
            (name.to_owned(), Some(value.to_owned()))
        } else if word.len() > 2 && word.starts_with('-') && !word.starts_with("--") {
            let (flag, rest) = word.split_at(2);
            if "XHdFuAebo".contains(&flag[1..]) {
                (flag.to_owned(), Some(rest.to_owned()))
            } else {
                // Bundled flags (`-sSL`) change nothing the request sends, but `-I` and `-G`.
                get |= rest.contains('G') || flag == "-G";
                if rest.contains('I') || flag == "-I" {
                    method = Some("HEAD".into());
                }
                continue;
            }
        } else {
            (word.clone(), None)
        };
        let mut value = || -> ApiResult<String> {
            if let Some(value) = attached.clone() {
                return Ok(value);
            }
            let value = words.get(i).cloned().ok_or_else(|| ApiError::invalid(format!("`{option}` needs a value")))?;
            i += 1;
            Ok(value)
        };
        match option.as_str() {
            "-X" | "--request" => method = Some(value()?.to_ascii_uppercase()),
            "-H" | "--header" => {
                let header = value()?;
                match header.split_once(':') {
                    Some((name, v)) => add_header(&mut headers, name, v.trim()),
                    None => converted.warn(format!("header `{header}` has no `:`, skipped")),
                }
            }
            "-d" | "--data" | "--data-ascii" | "--data-binary" | "--data-raw" => {
                let datum = value()?;
                if datum.starts_with('@') && option != "--data-raw" {
                    converted.warn(format!("`{option} {datum}` reads a file: not imported"));
                } else if option == "--data-binary" || option == "--data-raw" {
                    data.push(datum);
                } else {
                    data.push(datum.replace(['\r', '\n'], ""));
                }
            }
            "--json" => {
                data.push(value()?);
                json = true;
            }
            "--data-urlencode" => {
                let datum = value()?;
                data.push(urlencoded(converted, &datum));
            }
            "-F" | "--form" | "--form-string" => {
                let form = value()?;
                let Some((name, content)) = form.split_once('=') else {
                    converted.warn(format!("form part `{form}` has no `=`, skipped"));
                    continue;
                };
                let mut pieces = content.split(';');
                let first = pieces.next().unwrap_or("");
                let mut content_type = None;
                let mut filename = None;
                for piece in pieces {
                    if let Some(t) = piece.trim().strip_prefix("type=") {
                        content_type = Some(t.to_owned());
                    } else if let Some(f) = piece.trim().strip_prefix("filename=") {
                        filename = Some(f.to_owned());
                    }
                }
                if option != "--form-string" && (first.starts_with('@') || first.starts_with('<')) {
                    let path = &first[1..];
                    let file = filename.unwrap_or_else(|| path.rsplit(['/', '\\']).next().unwrap_or("").to_owned());
                    converted.warn(format!("form part `{name}` reads the file `{path}`: imported empty"));
                    parts.push(file_part(name, &file, content_type.as_deref()));
                } else {
                    let mut part = text_part(name, first, content_type.as_deref());
                    if let Some(file) = filename {
                        part["filename"] = Value::String(file);
                    }
                    parts.push(part);
                }
            }
            "-u" | "--user" => {
                let user = value()?;
                let (name, password) = user.split_once(':').unwrap_or((user.as_str(), ""));
                match basic(name, password) {
                    Some(value) => add_header(&mut headers, "Authorization", &value),
                    None => converted.warn("`-u` made of variables cannot be encoded at import: skipped"),
                }
            }
            "-A" | "--user-agent" => add_header(&mut headers, "User-Agent", &value()?),
            "-e" | "--referer" => add_header(&mut headers, "Referer", &value()?),
            "-b" | "--cookie" => {
                let cookie = value()?;
                if cookie.contains('=') {
                    add_header(&mut headers, "Cookie", &cookie);
                } else {
                    converted.warn(format!("`-b {cookie}` reads a cookie file: not imported"));
                }
            }
            "--url" => url = Some(value()?),
            "-G" | "--get" => get = true,
            "-I" | "--head" => method = Some("HEAD".into()),
            o if IGNORED_WITH_VALUE.contains(&o) => {
                value()?;
            }
            o if o.starts_with('-') && o.len() > 1 => {
                if ![
                    "-s",
                    "-S",
                    "-L",
                    "-k",
                    "-v",
                    "-i",
                    "--compressed",
                    "--silent",
                    "--location",
                    "--insecure",
                    "--verbose",
                    "--include",
                    "--http1.1",
                    "--http2",
                    "--fail",
                    "-f",
                    "--show-error",
                    "--globoff",
                    "-g",
                ]
                .contains(&o)
                {
                    converted.warn(format!("curl option `{o}` is not converted"));
                }
            }
            _ => {
                if url.is_none() {
                    url = Some(word.clone());
                } else {
                    converted.warn(format!("a second URL `{word}` in one command is not imported"));
                }
            }
        }
    }
    let Some(mut url) = url else { return Err(ApiError::invalid("a curl command has no URL")) };
    let mut body = Body::None;
    if get && !data.is_empty() {
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(&data.join("&"));
    } else if !parts.is_empty() {
        body = Body::Multipart(parts);
    } else if !data.is_empty() {
        let content_type = if json { "application/json" } else { "application/x-www-form-urlencoded" };
        if !has_header(&headers, "content-type") {
            add_header(&mut headers, "Content-Type", content_type);
        }
        if json && !has_header(&headers, "accept") {
            add_header(&mut headers, "Accept", "application/json");
        }
        body = Body::Text(data.join("&"));
    }
    let method = method.unwrap_or_else(|| if get || body == Body::None { "GET".into() } else { "POST".into() });
    let path = reqwest::Url::parse(&url).map(|u| format!("{}{}", u.host_str().unwrap_or(""), u.path()));
    let name = request_name("", &method, path.as_deref().unwrap_or(&url));
    Ok(Request { name, method, url, headers, body, ..Request::default() })
}

/// `--data-urlencode` content as curl sends it: `name=value` with the value encoded, `=value` and `value` encoded.
fn urlencoded(converted: &mut Converted, datum: &str) -> String {
    // As curl escapes: a space is `%20` (the form serializer's `+` only ever stands for a space).
    let encode = |v: &str| form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>().replace('+', "%20");
    if let Some((name, value)) = datum.split_once('=') {
        if name.is_empty() { encode(value) } else { format!("{name}={}", encode(value)) }
    } else if datum.contains('@') {
        converted.warn(format!("`--data-urlencode {datum}` reads a file: not imported"));
        String::new()
    } else {
        encode(datum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_as_a_shell_splits_them() {
        let text = "curl -H 'a: b c' \"x\\\"y\" $'l1\\nl2' a\\ b \\\n  next # note\ncurl two";
        let words: Vec<Token> = tokenize(text).expect("words");
        let w = |s: &str| Token::Word(s.into());
        assert_eq!(
            words,
            [
                w("curl"),
                w("-H"),
                w("a: b c"),
                w("x\"y"),
                w("l1\nl2"),
                w("a b"),
                w("next"),
                Token::End,
                w("curl"),
                w("two"),
                Token::End
            ]
        );
        assert!(tokenize("curl 'open").is_err());
    }

    #[test]
    fn options_become_the_request() {
        let converted = lines(
            "curl -sS -X put https://api.example.com/v1/items?x=1 -H 'Accept: application/json' -u ada:secret \
             -d a=1 --data-urlencode 'q=hello world' -A hookflow",
        )
        .expect("converted");
        let request = &converted.requests[0];
        assert_eq!((request.method.as_str(), request.url.as_str()), ("PUT", "https://api.example.com/v1/items?x=1"));
        assert_eq!(request.body, Body::Text("a=1&q=hello%20world".into()));
        assert_eq!(request.headers["Authorization"], "Basic YWRhOnNlY3JldA==");
        assert_eq!(request.headers["Content-Type"], "application/x-www-form-urlencoded");
        assert_eq!(request.headers["User-Agent"], "hookflow");
        let form = lines("curl https://x.example/up -F 'file=@/tmp/a.png;type=image/png' -F note=hi").expect("form");
        let Body::Multipart(parts) = &form.requests[0].body else { panic!("multipart") };
        assert_eq!(parts[0]["filename"], "a.png");
        assert_eq!(parts[1]["value"], "hi");
        assert_eq!(form.requests[0].method, "POST");
        assert_eq!(form.report.warnings.len(), 1);
    }
}
