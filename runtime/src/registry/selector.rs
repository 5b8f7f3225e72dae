//! Label and field selectors with the Kubernetes grammar
//! (`k8s.io/apimachinery/pkg/labels` and `pkg/fields`).

use std::collections::BTreeMap;

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
        && !crate::validation::is_dns1123_subdomain(p).is_empty()
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

impl LabelSelector {
    /// Parses a selector such as `app=web,tier in (a,b),!canary`.
    pub fn parse(input: &str) -> Result<Self, String> {
        let mut lx = Lexer {
            s: input.as_bytes(),
            pos: 0,
        };
        let mut reqs = Vec::new();
        if lx.peek() == Tok::End {
            return Ok(LabelSelector(reqs));
        }
        loop {
            let req = match lx.next() {
                Tok::Not => match lx.next() {
                    Tok::Ident(k) => {
                        validate_key(&k)?;
                        Requirement::DoesNotExist(k)
                    }
                    t => {
                        return Err(format!(
                            "unable to parse requirement: found '{t:?}', expected: identifier"
                        ));
                    }
                },
                Tok::Ident(key) => {
                    validate_key(&key)?;
                    match lx.peek() {
                        Tok::Comma | Tok::End => Requirement::Exists(key),
                        _ => match lx.next() {
                            Tok::Eq | Tok::DoubleEq => {
                                let v = value(&mut lx)?;
                                Requirement::Equals(key, v)
                            }
                            Tok::NotEq => {
                                let v = value(&mut lx)?;
                                Requirement::NotEquals(key, v)
                            }
                            Tok::Gt | Tok::Lt => {
                                let gt = input.as_bytes()[lx.pos - 1] == b'>';
                                let v = value(&mut lx)?;
                                let n: i64 = v.parse().map_err(|_| {
                                    "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer".to_string()
                                })?;
                                if gt {
                                    Requirement::GreaterThan(key, n)
                                } else {
                                    Requirement::LessThan(key, n)
                                }
                            }
                            t @ (Tok::In | Tok::NotIn) => {
                                let values = set(&mut lx)?;
                                if t == Tok::In {
                                    Requirement::In(key, values)
                                } else {
                                    Requirement::NotIn(key, values)
                                }
                            }
                            t => {
                                return Err(format!(
                                    "unable to parse requirement: found '{t:?}', expected: in, notin, =, ==, !=, gt, lt"
                                ));
                            }
                        },
                    }
                }
                t => {
                    return Err(format!(
                        "unable to parse requirement: found '{t:?}', expected: !, identifier"
                    ));
                }
            };
            reqs.push(req);
            match lx.next() {
                Tok::End => break,
                Tok::Comma => continue,
                t => return Err(format!("found '{t:?}', expected: ',' or 'end of string'")),
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
            t => Err(format!(
                "unable to parse requirement: found '{t:?}', expected: identifier"
            )),
        },
    }
}

fn set(lx: &mut Lexer<'_>) -> Result<Vec<String>, String> {
    if lx.next() != Tok::Open {
        return Err("unable to parse requirement: found '', expected: '('".into());
    }
    let mut out = Vec::new();
    loop {
        match lx.next() {
            Tok::Ident(v) => {
                validate_value(&v)?;
                out.push(v);
            }
            Tok::Close if out.is_empty() => {
                return Err("unable to parse requirement: for 'in', 'notin' operators, values set can't be empty".into());
            }
            t => {
                return Err(format!(
                    "unable to parse requirement: found '{t:?}', expected: identifier"
                ));
            }
        }
        match lx.next() {
            Tok::Comma => continue,
            Tok::Close => return Ok(out),
            t => {
                return Err(format!(
                    "unable to parse requirement: found '{t:?}', expected: ',', ')'"
                ));
            }
        }
    }
}

impl FieldSelector {
    /// Parses `f=v,g!=w` (with `\` escapes), allowing only `allowed` fields.
    pub fn parse(input: &str, allowed: &[&str]) -> Result<Self, String> {
        let mut out = Vec::new();
        if input.trim().is_empty() {
            return Ok(FieldSelector(out));
        }
        for term in split_unescaped(input, ',') {
            let (field, negate, value) = if let Some(i) = find_unescaped(&term, "!=") {
                (&term[..i], true, &term[i + 2..])
            } else if let Some(i) = find_unescaped(&term, "==") {
                (&term[..i], false, &term[i + 2..])
            } else if let Some(i) = find_unescaped(&term, "=") {
                (&term[..i], false, &term[i + 1..])
            } else {
                return Err(format!(
                    "invalid selector: '{input}'; can't understand '{term}'"
                ));
            };
            let field = field.trim().to_string();
            if !allowed.contains(&field.as_str()) {
                let quoted: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
                return Err(format!(
                    "{field:?} is not a known field selector: only {}",
                    quoted.join(", ")
                ));
            }
            out.push((field, negate, unescape(value)));
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

fn find_unescaped(s: &str, pat: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            i += 2;
            continue;
        }
        if s[i..].starts_with(pat) {
            return Some(i);
        }
        i += 1;
    }
    None
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            out.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else {
            out.push(c);
        }
    }
    out
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
        assert!(LabelSelector::parse("a in ()").is_err());
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
        let err = FieldSelector::parse("spec.x=1", &allowed).unwrap_err();
        assert_eq!(
            err,
            "\"spec.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        assert!(FieldSelector::parse("nonsense", &allowed).is_err());
    }
}
