//! Label and field selectors with the Kubernetes grammar
//! (`k8s.io/apimachinery/pkg/labels` and `pkg/fields`).

use std::collections::BTreeMap;

/// Why a label or field selector does not parse; the message is
/// kube-apiserver's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(String);

/// One label requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

/// A parsed field selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

#[derive(Debug, PartialEq, Eq, Clone)]
enum Tok {
    Ident(String),
    Comma,
    Open,
    Close,
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    In,
    NotIn,
    End,
}

fn is_ident_char(c: u8) -> bool {
    !matches!(
        c,
        b' ' | b'\t' | b'\n' | b',' | b'(' | b')' | b'!' | b'=' | b'<' | b'>'
    )
}

impl<'a> Lexer<'a> {
    fn next(&mut self) -> Tok {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
        let Some(&c) = self.s.get(self.pos) else {
            return Tok::End;
        };
        let two = self.s.get(self.pos + 1).copied();
        self.pos += 1;
        match c {
            b',' => Tok::Comma,
            b'(' => Tok::Open,
            b')' => Tok::Close,
            b'!' if two == Some(b'=') => {
                self.pos += 1;
                Tok::NotEq
            }
            b'!' => Tok::Not,
            b'=' if two == Some(b'=') => {
                self.pos += 1;
                Tok::DoubleEq
            }
            b'=' => Tok::Eq,
            b'>' => Tok::Gt,
            b'<' => Tok::Lt,
            _ => {
                let start = self.pos - 1;
                while self.pos < self.s.len() && is_ident_char(self.s[self.pos]) {
                    self.pos += 1;
                }
                let word = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
                match word.as_str() {
                    "in" => Tok::In,
                    "notin" => Tok::NotIn,
                    _ => Tok::Ident(word),
                }
            }
        }
    }

    fn peek(&mut self) -> Tok {
        let save = self.pos;
        let t = self.next();
        self.pos = save;
        t
    }
}

fn validate_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && !apiforge_core::validation::is_dns1123_subdomain(p).is_empty()
    {
        return Err(format!(
            "invalid label key {key:?}: prefix part must be a DNS-1123 subdomain"
        ));
    }
    if !is_qualified_name_part(name) {
        return Err(format!(
            "invalid label key {key:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ));
    }
    Ok(())
}

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

fn validate_value(v: &str) -> Result<(), String> {
    if v.is_empty() || is_qualified_name_part(v) {
        Ok(())
    } else {
        Err(format!(
            "invalid label value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

impl Tok {
    /// The token's text, as the parser's error messages quote it (`''` at
    /// the end of the input).
    fn lit(&self) -> &str {
        match self {
            Tok::Ident(s) => s,
            Tok::Comma => ",",
            Tok::Open => "(",
            Tok::Close => ")",
            Tok::Not => "!",
            Tok::Eq => "=",
            Tok::DoubleEq => "==",
            Tok::NotEq => "!=",
            Tok::Gt => ">",
            Tok::Lt => "<",
            Tok::In => "in",
            Tok::NotIn => "notin",
            Tok::End => "",
        }
    }
}

impl LabelSelector {
    /// Parses a selector such as `app=web,tier in (a,b),!canary`, with
    /// the error texts of `k8s.io/apimachinery/pkg/labels`.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        Self::parse_str(input).map_err(SelectorError)
    }

    fn parse_str(input: &str) -> Result<Self, String> {
        let mut lx = Lexer {
            s: input.as_bytes(),
            pos: 0,
        };
        let mut reqs = Vec::new();
        loop {
            match lx.peek() {
                Tok::End => break,
                Tok::Ident(_) | Tok::Not => {}
                t => {
                    return Err(format!(
                        "found '{}', expected: !, identifier, or 'end of string'",
                        t.lit()
                    ));
                }
            }
            let req =
                requirement(&mut lx).map_err(|e| format!("unable to parse requirement: {e}"))?;
            reqs.push(req);
            match lx.next() {
                Tok::End => break,
                Tok::Comma => match lx.peek() {
                    Tok::Ident(_) | Tok::Not => continue,
                    t => {
                        return Err(format!(
                            "found '{}', expected: identifier after ','",
                            t.lit()
                        ));
                    }
                },
                t => {
                    return Err(format!(
                        "found '{}', expected: ',' or 'end of string'",
                        t.lit()
                    ));
                }
            }
        }
        Ok(LabelSelector(reqs))
    }

    /// True when it selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a label set matches.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|x| vs.contains(x)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|x| !vs.contains(x)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
            Requirement::GreaterThan(k, n) => labels
                .get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            Requirement::LessThan(k, n) => labels
                .get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        })
    }
}

/// One requirement (upstream `parseRequirement`); errors without the
/// `unable to parse requirement: ` prefix.
fn requirement(lx: &mut Lexer<'_>) -> Result<Requirement, String> {
    let negated = lx.peek() == Tok::Not;
    if negated {
        lx.next();
    }
    let key = match lx.next() {
        Tok::Ident(k) => k,
        t => return Err(format!("found '{}', expected: identifier", t.lit())),
    };
    validate_key(&key)?;
    if negated {
        return Ok(Requirement::DoesNotExist(key));
    }
    if matches!(lx.peek(), Tok::Comma | Tok::End) {
        return Ok(Requirement::Exists(key));
    }
    Ok(match lx.next() {
        Tok::Eq | Tok::DoubleEq => Requirement::Equals(key, value(lx)?),
        Tok::NotEq => Requirement::NotEquals(key, value(lx)?),
        t @ (Tok::Gt | Tok::Lt) => {
            let v = value(lx)?;
            let n: i64 = v.parse().map_err(|_| {
                "for 'Gt', 'Lt' operators, the value must be an integer".to_string()
            })?;
            if t == Tok::Gt {
                Requirement::GreaterThan(key, n)
            } else {
                Requirement::LessThan(key, n)
            }
        }
        t @ (Tok::In | Tok::NotIn) => {
            let values = set(lx)?;
            if t == Tok::In {
                Requirement::In(key, values)
            } else {
                Requirement::NotIn(key, values)
            }
        }
        t => {
            return Err(format!(
                "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                t.lit()
            ));
        }
    })
}

/// The value after `=`, `==`, `!=` (upstream `parseExactValue`).
fn value(lx: &mut Lexer<'_>) -> Result<String, String> {
    match lx.peek() {
        Tok::Comma | Tok::End => Ok(String::new()),
        _ => match lx.next() {
            Tok::Ident(v) => {
                validate_value(&v)?;
                Ok(v)
            }
            Tok::In => Ok("in".into()),
            Tok::NotIn => Ok("notin".into()),
            t => Err(format!("found '{}', expected: identifier", t.lit())),
        },
    }
}

/// The `(a,b)` of `in`/`notin` (upstream `parseValues` and
/// `parseIdentifiersList`); empty entries stand for the empty value.
fn set(lx: &mut Lexer<'_>) -> Result<Vec<String>, String> {
    let open = lx.next();
    if open != Tok::Open {
        return Err(format!("found '{}' expected: '('", open.lit()));
    }
    let mut out: Vec<String> = Vec::new();
    let push = |out: &mut Vec<String>, v: String| {
        if !out.contains(&v) {
            out.push(v);
        }
    };
    match lx.peek() {
        Tok::Close => {
            lx.next();
            return Ok(vec![String::new()]);
        }
        Tok::Ident(_) | Tok::Comma | Tok::In | Tok::NotIn => {}
        t => {
            return Err(format!(
                "found '{}', expected: ',', ')' or identifier",
                t.lit()
            ));
        }
    }
    loop {
        match lx.next() {
            t @ (Tok::Ident(_) | Tok::In | Tok::NotIn) => {
                let v = t.lit().to_string();
                validate_value(&v)?;
                push(&mut out, v);
                match lx.peek() {
                    Tok::Comma => continue,
                    Tok::Close => {
                        lx.next();
                        return Ok(out);
                    }
                    t => return Err(format!("found '{}', expected: ',' or ')'", t.lit())),
                }
            }
            Tok::Comma => {
                if out.is_empty() {
                    push(&mut out, String::new());
                }
                match lx.peek() {
                    Tok::Close => {
                        lx.next();
                        push(&mut out, String::new());
                        return Ok(out);
                    }
                    Tok::Comma => push(&mut out, String::new()),
                    _ => {}
                }
            }
            t => return Err(format!("found '{}', expected: ',', or identifier", t.lit())),
        }
    }
}

impl FieldSelector {
    /// Parses `f=v,g!=w` (with `\` escapes), allowing only `allowed` fields.
    pub fn parse(input: &str, allowed: &[&str]) -> Result<Self, SelectorError> {
        Self::parse_str(input, allowed).map_err(SelectorError)
    }

    fn parse_str(input: &str, allowed: &[&str]) -> Result<Self, String> {
        let mut out = Vec::new();
        if input.trim().is_empty() {
            return Ok(FieldSelector(out));
        }
        for term in split_unescaped(input, ',') {
            let Some((field, negate, value)) = split_term(&term) else {
                return Err(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                ));
            };
            let value = unescape(value)?;
            let field = field.trim().to_string();
            if !allowed.contains(&field.as_str()) {
                // Upstream's DefaultMetaV1FieldSelectorConversion, the
                // fallback of every kind (selectable fields included):
                // it names only the metadata fields.
                return Err(format!(
                    "{field:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                ));
            }
            out.push((field, negate, value));
        }
        Ok(FieldSelector(out))
    }

    /// True when it selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value an exact `field=value` term requires, if any.
    pub fn exact(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, neg, _)| f == field && !neg)
            .map(|(_, _, v)| v.as_str())
    }

    /// Whether an object matches, given a field reader.
    pub fn matches(&self, get: &dyn Fn(&str) -> Option<String>) -> bool {
        self.0.iter().all(|(f, negate, v)| {
            let actual = get(f).unwrap_or_default();
            (actual == *v) != *negate
        })
    }
}

fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            cur.push('\\');
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

/// Upstream's `splitTerm`: the field, whether the operator is `!=`, and
/// the (still escaped) value, split at the first place where `!=`, `==`
/// or `=` starts (in that order of preference at one place).
fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        if let Some(value) = rest.strip_prefix("!=") {
            return Some((&term[..i], true, value));
        }
        if let Some(value) = rest.strip_prefix("==") {
            return Some((&term[..i], false, value));
        }
        if let Some(value) = rest.strip_prefix('=') {
            return Some((&term[..i], false, value));
        }
    }
    None
}

/// A term's value with its `\` escapes resolved; an unescaped `=` (or
/// `,`) is upstream's `UnescapedRune` error, which Go prints as the
/// character's code point.
fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            out.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ',' {
            return Err(format!(
                "invalid field selector: unescaped character in value: {}",
                u32::from(c)
            ));
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selector_grammar() {
        let s = LabelSelector::parse("app=web, tier in (a,b),!canary,env!=prod,x").unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "a"), ("x", "")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "c"), ("x", "")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "a"),
            ("x", ""),
            ("canary", "1")
        ])));
        // As upstream, `()` is the set of the empty value.
        assert!(
            LabelSelector::parse("a in ()")
                .unwrap()
                .matches(&labels(&[("a", "")]))
        );
        assert!(LabelSelector::parse("a=b=c").is_err());
        assert!(LabelSelector::parse("=b").is_err());
        assert!(
            LabelSelector::parse("a notin (x)")
                .unwrap()
                .matches(&labels(&[]))
        );
        assert!(
            LabelSelector::parse("n>3")
                .unwrap()
                .matches(&labels(&[("n", "4")]))
        );
        assert!(LabelSelector::parse("").unwrap().is_empty());
    }

    #[test]
    fn label_selector_errors_quote_upstream() {
        let err = |s: &str| LabelSelector::parse(s).unwrap_err().to_string();
        assert_eq!(
            err("a in ("),
            "unable to parse requirement: found '', expected: ',', ')' or identifier"
        );
        assert_eq!(
            err("!=x"),
            "found '!=', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(err("a,"), "found '', expected: identifier after ','");
        assert_eq!(err("a=b=c"), "found '=', expected: ',' or 'end of string'");
        assert_eq!(
            err("a in x"),
            "unable to parse requirement: found 'x' expected: '('"
        );
        assert_eq!(
            err("a in (b c)"),
            "unable to parse requirement: found 'c', expected: ',' or ')'"
        );
        assert_eq!(
            err("!"),
            "unable to parse requirement: found '', expected: identifier"
        );
    }

    #[test]
    fn field_selector_with_multibyte_text_does_not_panic() {
        let allowed = ["metadata.name", "metadata.namespace"];
        let s = FieldSelector::parse("metadata.name=é\\ü,metadata.namespace!=ö", &allowed).unwrap();
        assert_eq!(s.exact("metadata.name"), Some("éü"));
        assert!(FieldSelector::parse("é", &allowed).is_err());
    }

    #[test]
    fn field_selector_grammar() {
        let allowed = ["metadata.name", "metadata.namespace"];
        let s =
            FieldSelector::parse("metadata.name=a\\,b,metadata.namespace!=x", &allowed).unwrap();
        assert_eq!(s.exact("metadata.name"), Some("a,b"));
        assert!(s.matches(&|f| Some(if f == "metadata.name" {
            "a,b".into()
        } else {
            "y".into()
        })));
        let err = FieldSelector::parse("spec.x=1", &allowed)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "\"spec.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        assert!(FieldSelector::parse("nonsense", &allowed).is_err());
    }

    // apimachinery fields/selector.go: splitTerm splits at the first
    // operator; UnescapeValue refuses an unescaped `=` in the value
    // (UnescapedRune, its rune printed with %v: the code point).
    #[test]
    fn field_selector_value_with_an_unescaped_equals_sign() {
        let allowed = ["metadata.name", "metadata.namespace"];
        for input in [
            "metadata.name==a==b",
            "metadata.name=a=b",
            "metadata.name!==x",
        ] {
            assert_eq!(
                FieldSelector::parse(input, &allowed)
                    .unwrap_err()
                    .to_string(),
                "invalid field selector: unescaped character in value: 61",
                "{input}"
            );
        }
        let s = FieldSelector::parse("metadata.name==a\\=b", &allowed).unwrap();
        assert_eq!(s.exact("metadata.name"), Some("a=b"));
        let s = FieldSelector::parse("metadata.name!=a", &allowed).unwrap();
        assert_eq!(s.exact("metadata.name"), None);
    }
}
