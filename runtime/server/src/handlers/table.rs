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

fn columns(info: &KindInfo) -> &'static [PrinterColumn] {
    if info.printer_columns.is_empty() {
        &DEFAULT_COLUMNS
    } else {
        info.printer_columns
    }
}

fn lookup<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    for part in path
        .trim_start_matches('.')
        .split('.')
        .filter(|p| !p.is_empty())
    {
        cur = cur.get(part)?;
    }
    Some(cur)
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
    let cols = printer.map_or_else(|| columns(info), |p| p.columns);
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let cells: Vec<Value> = match printer {
                Some(p) => (p.cells)(obj),
                None => cols
                    .iter()
                    .map(|c| lookup(obj, c.json_path).cloned().unwrap_or(Value::Null))
                    .collect(),
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
