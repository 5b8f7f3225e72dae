//! `meta.k8s.io` Table and PartialObjectMetadata renderings.

use serde_json::{Map, Value, json};

use apiforge_core::resource::{KindInfo, PrinterColumn, TablePrinter};

/// What `includeObject` asks for in table rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// PartialObjectMetadata (the default).
    Metadata,
    /// The full object.
    Object,
}

impl IncludeObject {
    /// Parses the query value (`None` when absent).
    pub fn parse(v: Option<&str>) -> Result<Self, String> {
        match v {
            None | Some("") | Some("Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(format!("unrecognized includeObject value: {other:?}")),
        }
    }
}

const DEFAULT_COLUMNS: [PrinterColumn; 2] = [
    PrinterColumn::NAME,
    PrinterColumn {
        name: "Created At",
        type_: "date",
        json_path: ".metadata.creationTimestamp",
        priority: 0,
        description: "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
        format: "",
    },
];

/// A kind's columns: its declared ones after the object's name (upstream's
/// custom resource table convertor prepends `Name` to the additional
/// printer columns), or the default table's.
fn columns(info: &KindInfo) -> std::borrow::Cow<'static, [PrinterColumn]> {
    if info.printer_columns.is_empty() {
        std::borrow::Cow::Borrowed(&DEFAULT_COLUMNS)
    } else if info
        .printer_columns
        .iter()
        .any(|c| c.json_path == ".metadata.name")
    {
        std::borrow::Cow::Borrowed(info.printer_columns)
    } else {
        let mut cols = Vec::with_capacity(info.printer_columns.len() + 1);
        cols.push(PrinterColumn::NAME);
        cols.extend_from_slice(info.printer_columns);
        std::borrow::Cow::Owned(cols)
    }
}

/// One step of a printer column's JSONPath (the subset kubectl's
/// JSONPath and CRD columns use).
#[derive(Debug, PartialEq)]
enum Step {
    /// `.name` or `['name']`.
    Field(String),
    /// `[3]`.
    Index(usize),
    /// `[*]` or `.*`.
    All,
    /// `[?(@.a.b == "x")]` (or `!=`): the elements whose field matches.
    Filter(Vec<String>, bool, Value),
}

/// Parses a column's JSONPath (`.status.conditions[?(@.type=="Ready")].status`,
/// with or without `{}`); `None` for what the subset does not cover.
fn parse_path(path: &str) -> Option<Vec<Step>> {
    let path = path.trim();
    let path = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path);
    let path = path.strip_prefix('$').unwrap_or(path);
    let chars: Vec<char> = path.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '.' => {
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && chars[end] != '.' && chars[end] != '[' {
                    end += 1;
                }
                let name: String = chars[start..end].iter().collect();
                match name.as_str() {
                    "" => {}
                    "*" => steps.push(Step::All),
                    _ => steps.push(Step::Field(name)),
                }
                i = end;
            }
            '[' => {
                // The `]` that closes the bracket (not one inside quotes).
                let mut quote: Option<char> = None;
                let mut close = None;
                for (j, c) in chars.iter().enumerate().skip(i + 1) {
                    match (quote, *c) {
                        (None, '"' | '\'') => quote = Some(*c),
                        (Some(q), c) if c == q => quote = None,
                        (None, ']') => {
                            close = Some(j);
                            break;
                        }
                        _ => {}
                    }
                }
                let close = close?;
                let inner: String = chars[i + 1..close].iter().collect();
                steps.push(parse_bracket(inner.trim())?);
                i = close + 1;
            }
            _ => return None,
        }
    }
    Some(steps)
}

fn parse_bracket(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(n) = inner.parse::<usize>() {
        return Some(Step::Index(n));
    }
    if let Some(quoted) = inner
        .strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
    {
        return Some(Step::Field(quoted.to_string()));
    }
    let filter = inner.strip_prefix("?(")?.strip_suffix(')')?.trim();
    let (lhs, equal, rhs) = if let Some((l, r)) = filter.split_once("==") {
        (l, true, r)
    } else {
        let (l, r) = filter.split_once("!=")?;
        (l, false, r)
    };
    let fields = lhs
        .trim()
        .strip_prefix("@.")?
        .split('.')
        .map(str::to_string)
        .collect();
    let rhs = rhs.trim();
    let literal = if let Some(s) = rhs
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| rhs.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
    {
        Value::String(s.to_string())
    } else {
        serde_json::from_str(rhs).ok()?
    };
    Some(Step::Filter(fields, equal, literal))
}

/// The values a column's JSONPath finds in `obj`, in order.
fn find<'a>(obj: &'a Value, path: &str) -> Vec<&'a Value> {
    let Some(steps) = parse_path(path) else {
        return Vec::new();
    };
    let mut current = vec![obj];
    for step in &steps {
        let mut next = Vec::new();
        for v in current {
            match step {
                Step::Field(name) => next.extend(v.get(name.as_str())),
                Step::Index(n) => next.extend(v.get(*n)),
                Step::All => match v {
                    Value::Array(items) => next.extend(items.iter()),
                    Value::Object(map) => next.extend(map.values()),
                    _ => {}
                },
                Step::Filter(fields, equal, literal) => {
                    if let Value::Array(items) = v {
                        next.extend(items.iter().filter(|item| {
                            let found = fields.iter().try_fold(*item, |cur, f| cur.get(f.as_str()));
                            found.is_some_and(|f| f == literal) == *equal
                        }));
                    }
                }
            }
        }
        current = next;
    }
    current
}

/// A column's cell: the first value its JSONPath finds (upstream's
/// custom resource table convertor), `null` when none; `string` columns
/// show other values as JSON text; `date` columns show the time since, as
/// `kubectl get` prints an age (`<invalid>` for what is not a time).
fn cell(obj: &Value, column: &PrinterColumn) -> Value {
    let Some(value) = find(obj, column.json_path).into_iter().next() else {
        return Value::Null;
    };
    match (column.type_, value) {
        ("string", Value::Object(_) | Value::Array(_) | Value::Number(_) | Value::Bool(_)) => {
            Value::String(value.to_string())
        }
        ("date", Value::String(time)) => match time.parse::<jiff::Timestamp>() {
            Ok(t) => Value::String(apiforge_core::builtin::printers::human_duration(
                jiff::Timestamp::now().as_second() - t.as_second(),
            )),
            Err(_) => Value::String("<invalid>".into()),
        },
        _ => value.clone(),
    }
}

/// The first value a JSONPath finds, as it is.
fn lookup_first(obj: &Value, path: &str) -> Value {
    find(obj, path)
        .into_iter()
        .next()
        .cloned()
        .unwrap_or(Value::Null)
}

/// PartialObjectMetadata of an encoded object.
pub fn partial_metadata(obj: &Value, meta_version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{meta_version}"),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A Table of encoded objects. `list_meta` is the list's metadata (for a
/// single object: `None`); `with_columns` is false for watch events after
/// the first.
pub fn table(
    info: &KindInfo,
    printer: Option<&'static TablePrinter>,
    objects: &[Value],
    meta_version: &str,
    include: IncludeObject,
    list_meta: Option<Value>,
    with_columns: bool,
) -> Value {
    let cols = printer.map_or_else(|| columns(info), |p| std::borrow::Cow::Borrowed(p.columns));
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let cells: Vec<Value> = match printer {
                Some(p) => (p.cells)(obj),
                // The default table's `Created At` is the timestamp itself
                // (upstream's default table convertor).
                None if info.printer_columns.is_empty() => cols
                    .iter()
                    .map(|c| lookup_first(obj, c.json_path))
                    .collect(),
                None => cols.iter().map(|c| cell(obj, c)).collect(),
            };
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(cells));
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row.insert("object".into(), partial_metadata(obj, meta_version));
                }
                IncludeObject::Object => {
                    row.insert("object".into(), obj.clone());
                }
            }
            Value::Object(row)
        })
        .collect();
    let mut out = Map::new();
    out.insert("kind".into(), json!("Table"));
    out.insert(
        "apiVersion".into(),
        json!(format!("meta.k8s.io/{meta_version}")),
    );
    out.insert("metadata".into(), list_meta.unwrap_or_else(|| json!({})));
    out.insert(
        "columnDefinitions".into(),
        if with_columns {
            Value::Array(defs)
        } else {
            Value::Null
        },
    );
    out.insert("rows".into(), Value::Array(rows));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_paths_with_filters_and_brackets() {
        let obj = json!({"metadata": {"name": "g", "labels": {"a.b/c": "x"}},
            "spec": {"listeners": [{"name": "http", "port": 80}, {"name": "tls", "port": 443}]},
            "status": {"conditions": [
                {"type": "Accepted", "status": "True"},
                {"type": "Programmed", "status": "False"}]}});
        let programmed = r#".status.conditions[?(@.type=="Programmed")].status"#;
        assert_eq!(find(&obj, programmed), [&json!("False")]);
        assert_eq!(find(&obj, "{.spec.listeners[1].port}"), [&json!(443)]);
        assert_eq!(
            find(&obj, ".spec.listeners[*].name"),
            [&json!("http"), &json!("tls")]
        );
        assert_eq!(find(&obj, ".metadata.labels['a.b/c']"), [&json!("x")]);
        assert!(find(&obj, ".spec.missing").is_empty());
        let column = PrinterColumn {
            name: "Ports",
            type_: "string",
            json_path: ".spec.listeners[0]",
            ..PrinterColumn::NAME
        };
        assert_eq!(cell(&obj, &column), json!(r#"{"name":"http","port":80}"#));
    }
}
