//! The texts kube-apiserver's Go libraries put in error messages that
//! users see: `strconv` parse errors, `encoding/json` decode errors and the
//! request-body summary of `transformDecodeError`. Requests that fail the
//! same way get the same words.

use serde_json::Value;

/// Go's `strconv.ParseInt(v, 10, 64)`.
pub fn parse_int64(v: &str) -> Result<i64, String> {
    v.parse::<i64>()
        .map_err(|_| format!("strconv.ParseInt: parsing {v:?}: {}", num_error(v)))
}

/// Go's `strconv.ParseUint(v, 10, 64)`.
pub fn parse_uint64(v: &str) -> Result<u64, String> {
    // Rust accepts a leading '+'; Go's ParseUint does not.
    if v.starts_with('+') {
        return Err(format!("strconv.ParseUint: parsing {v:?}: invalid syntax"));
    }
    v.parse::<u64>().map_err(|_| {
        let why = if v.starts_with('-') {
            "invalid syntax"
        } else {
            num_error(v)
        };
        format!("strconv.ParseUint: parsing {v:?}: {why}")
    })
}

/// `value out of range` for well-formed digits, else `invalid syntax`.
fn num_error(v: &str) -> &'static str {
    let digits = v.strip_prefix(['-', '+']).unwrap_or(v);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        "value out of range"
    } else {
        "invalid syntax"
    }
}

/// A resource version as kube-apiserver's storage parses it (`""` and
/// `"0"` mean any); the error is the text of its `storage.InvalidError`.
pub fn parse_resource_version(v: &str) -> Result<u64, String> {
    if v.is_empty() || v == "0" {
        return Ok(0);
    }
    parse_uint64(v).map_err(|e| format!("resourceVersion: Invalid value: {v:?}: {e}"))
}

/// `summarizeData(body, 30)` of the apiserver's decode errors: `<empty>`,
/// the text of a body starting with `{`, otherwise hex; ` ...` when cut.
pub fn summarize_body(body: &[u8]) -> String {
    const MAX: usize = 30;
    let (head, cut) = if body.len() > MAX {
        (&body[..MAX], " ...")
    } else {
        (body, "")
    };
    if body.is_empty() {
        "<empty>".into()
    } else if body[0] == b'{' {
        format!("{}{cut}", String::from_utf8_lossy(head))
    } else {
        let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}{cut}")
    }
}

/// The Go type kube-apiserver first decodes a body into (to find its
/// `apiVersion` and `kind`), as `encoding/json` names it.
const KIND_PROBE_TYPE: &str = r#"struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#;

/// The `encoding/json` error for a well-formed body that is not an object
/// (`null` decodes to an empty object in Go, so it is not an error).
pub fn not_an_object(value: &Value) -> Option<String> {
    let what = match value {
        Value::Object(_) | Value::Null => return None,
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
    };
    Some(format!(
        "json: cannot unmarshal {what} into Go value of type {KIND_PROBE_TYPE}"
    ))
}

/// Go's `encoding/json` wording of a serde_json parse error of `bytes`:
/// `unexpected end of JSON input`, `invalid character 'x' ...`, and
/// `invalid character '{' exceeded max depth` for nesting beyond the
/// decoder's limit.
pub fn json_error(e: &serde_json::Error, bytes: &[u8]) -> String {
    if e.is_eof() {
        return "unexpected end of JSON input".into();
    }
    let text = e.to_string();
    let offset = byte_offset(bytes, e.line(), e.column());
    if text.starts_with("recursion limit exceeded") {
        let bracket = bytes[..offset.min(bytes.len())]
            .iter()
            .rev()
            .find(|b| matches!(b, b'{' | b'['))
            .copied()
            .unwrap_or(b'{');
        return format!(
            "invalid character {} exceeded max depth",
            quote_char(bracket)
        );
    }
    if !e.is_syntax() {
        return text;
    }
    let context = if text.starts_with("expected `:`") {
        "after object key"
    } else if text.starts_with("expected `,` or `}`") {
        "after object key:value pair"
    } else if text.starts_with("expected `,` or `]`") {
        "after array element"
    } else if text.starts_with("key must be a string") {
        "looking for beginning of object key string"
    } else if text.starts_with("trailing characters") {
        "after top-level value"
    } else {
        "looking for beginning of value"
    };
    // serde_json points at the offending character (1-based column).
    let at = offset.saturating_sub(1).min(bytes.len().saturating_sub(1));
    match bytes.get(at) {
        Some(&c) => format!("invalid character {} {context}", quote_char(c)),
        None => "unexpected end of JSON input".into(),
    }
}

/// The byte offset of a serde_json (line, column) position.
fn byte_offset(bytes: &[u8], line: usize, column: usize) -> usize {
    let mut start = 0;
    for _ in 1..line {
        match bytes[start..].iter().position(|b| *b == b'\n') {
            Some(i) => start += i + 1,
            None => break,
        }
    }
    start + column
}

/// Go's `quoteChar`: `'x'`, with escapes for quotes and non-printables.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => "'\"'".into(),
        0x20..=0x7e => format!("'{}'", c as char),
        _ => format!("'\\x{c:02x}'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strconv_texts() {
        assert_eq!(
            parse_int64("abc").unwrap_err(),
            r#"strconv.ParseInt: parsing "abc": invalid syntax"#
        );
        assert_eq!(
            parse_int64("99999999999999999999").unwrap_err(),
            r#"strconv.ParseInt: parsing "99999999999999999999": value out of range"#
        );
        assert_eq!(parse_int64("-1"), Ok(-1));
        assert_eq!(
            parse_resource_version("abc").unwrap_err(),
            r#"resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax"#
        );
        assert_eq!(
            parse_resource_version("-1").unwrap_err(),
            r#"resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing "-1": invalid syntax"#
        );
        assert_eq!(parse_resource_version(""), Ok(0));
    }

    #[test]
    fn summaries() {
        assert_eq!(summarize_body(b""), "<empty>");
        assert_eq!(summarize_body(b"[1]"), "5b315d");
        assert_eq!(summarize_body(b"{\"a\":1}"), "{\"a\":1}");
        assert_eq!(
            summarize_body(b"{\"metadata\":{\"name\":\"a-very-long-name\"}}"),
            "{\"metadata\":{\"name\":\"a-very-lo ..."
        );
    }

    #[test]
    fn json_texts() {
        let parse = |s: &str| {
            let e = serde_json::from_str::<Value>(s).unwrap_err();
            json_error(&e, s.as_bytes())
        };
        assert_eq!(parse("{\"a\":"), "unexpected end of JSON input");
        assert_eq!(parse("{\"a\" 1}"), "invalid character '1' after object key");
        assert_eq!(
            parse("{\"a\":1 x}"),
            "invalid character 'x' after object key:value pair"
        );
        assert_eq!(
            parse("{x}"),
            "invalid character 'x' looking for beginning of object key string"
        );
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(parse(&deep), "invalid character '[' exceeded max depth");
        assert_eq!(
            not_an_object(&serde_json::json!([1])).unwrap(),
            format!("json: cannot unmarshal array into Go value of type {KIND_PROBE_TYPE}")
        );
        assert!(not_an_object(&Value::Null).is_none());
    }
}
