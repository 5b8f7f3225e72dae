//! OpenAPI value validation (kube-openapi's `SchemaValidator`, as
//! apiextensions-apiserver converts its results into field errors) and the
//! `x-kubernetes-list-type` invariants (`schema/listtype`).

use serde_json::Value;

use super::formats;
use super::rules::correlate;
use super::schema::{Additional, Node};
use crate::cel::type_name;
use crate::validation::{ErrorList, ErrorType, FieldError, FieldPath};

/// The field of an error named `name` by kube-openapi (`.spec` → `spec`).
fn field_of(name: &str) -> String {
    name.strip_prefix('.').unwrap_or(name).to_string()
}

/// The field of errors that are not kube-openapi `Validation`s (a nil path).
const NIL_FIELD: &str = "<nil>";

/// Go's `%v` of a float64 (`10`, `0.5`, `1e+06`).
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if f == 0.0 {
        return "0".into();
    }
    let exp = f.abs().log10().floor() as i32;
    if (-4..21).contains(&exp) {
        format!("{f}")
    } else {
        // Rust `{:e}` gives `1e6` / `1.5e-5`; Go writes `1e+06` / `1.5e-05`.
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((mant, e)) => {
                let (sign, digits) = match e.strip_prefix('-') {
                    Some(d) => ('-', d),
                    None => ('+', e),
                };
                format!("{mant}e{sign}{digits:0>2}")
            }
            None => s,
        }
    }
}

/// Go's `%#v` of a decoded JSON value (`map[string]interface {}{"a":1}`).
pub(crate) fn go_syntax(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) => go_float(f),
            _ => n.to_string(),
        },
        Value::String(s) => format!("{s:?}"),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(go_syntax).collect();
            format!("[]interface {{}}{{{}}}", inner.join(", "))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k:?}:{}", go_syntax(&m[k])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", inner.join(", "))
        }
    }
}

fn push(errs: &mut ErrorList, type_: ErrorType, name: &str, value: Value, msg: String) {
    errs.push(FieldError {
        type_,
        field: field_of(name),
        bad_value: Some(value),
        detail: msg,
    });
}

fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// The declared types, as kube-openapi joins them.
fn declared_types(node: &Node) -> Option<String> {
    if node.int_or_string {
        Some("integer,string".into())
    } else if node.type_.is_empty() {
        None
    } else {
        Some(node.type_.clone())
    }
}

fn type_ok(node: &Node, v: &Value) -> bool {
    let t = type_name(v);
    let own = [node.type_.as_str()];
    let allowed: &[&str] = if node.int_or_string {
        &["integer", "string"]
    } else {
        &own
    };
    allowed.contains(&t)
        || (t == "number" && allowed.contains(&"integer") && is_integer(v))
        || (t == "integer" && allowed.contains(&"number"))
}

/// Validates `v` (named `name` by kube-openapi: `spec.replicas`,
/// `spec.items[0]`, `.spec` for required fields of the root) against
/// `node`. Unchanged values (`old` equal to `v`) are not validated
/// (ratcheting).
pub(crate) fn openapi(
    node: &Node,
    v: &Value,
    old: Option<&Value>,
    name: &str,
    errs: &mut ErrorList,
) {
    if old == Some(v) {
        return;
    }
    let in_body = |what: String| format!("{name} in body {what}");
    if v.is_null() {
        if let Some(types) = declared_types(node)
            && !node.nullable
        {
            push(
                errs,
                ErrorType::TypeInvalid,
                name,
                "null".into(),
                in_body(format!("must be of type {types}: \"null\"")),
            );
        }
        check_enum(node, v, name, errs);
        return;
    }
    if let Some(types) = declared_types(node)
        && !type_ok(node, v)
    {
        let t = type_name(v);
        push(
            errs,
            ErrorType::TypeInvalid,
            name,
            t.into(),
            in_body(format!("must be of type {types}: {t:?}")),
        );
    }
    composition(node, v, old, name, errs);
    let c = &node.checks;
    match v {
        Value::String(s) => {
            let chars = s.chars().count() as i64;
            if let Some(max) = c.max_length
                && chars > max
            {
                errs.push(FieldError::too_long(field_of(name), max.max(0) as usize));
            } else if let Some(min) = c.min_length
                && chars < min
            {
                push(
                    errs,
                    ErrorType::Invalid,
                    name,
                    v.clone(),
                    in_body(format!("should be at least {min} chars long")),
                );
            } else if let Some((src, re)) = &c.pattern
                && !re.is_match(s)
            {
                push(
                    errs,
                    ErrorType::Invalid,
                    name,
                    v.clone(),
                    in_body(format!("should match '{src}'")),
                );
            }
            if let Some(f) = &node.format
                && !formats::check(f, s)
            {
                push(
                    errs,
                    ErrorType::TypeInvalid,
                    name,
                    v.clone(),
                    in_body(format!("must be of type {f}: {s:?}")),
                );
            }
        }
        Value::Number(n) => numbers(node, v, n, name, errs),
        Value::Array(items) => {
            if let Some(item_node) = node.items.as_deref() {
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    let old_item = old_items.and_then(|o| correlate(node, item, o));
                    openapi(item_node, item, old_item, &format!("{name}[{i}]"), errs);
                }
            }
            let size = items.len() as i64;
            if let Some(min) = c.min_items
                && size < min
            {
                push(
                    errs,
                    ErrorType::Invalid,
                    name,
                    size.into(),
                    in_body(format!("should have at least {min} items")),
                );
            }
            if let Some(max) = c.max_items
                && size > max
            {
                errs.push(FieldError::too_many(
                    field_of(name),
                    items.len(),
                    max.max(0) as usize,
                ));
            }
            if c.unique_items
                && items
                    .iter()
                    .enumerate()
                    .any(|(i, a)| items[..i].contains(a))
            {
                push(
                    errs,
                    ErrorType::Invalid,
                    name,
                    "".into(),
                    in_body("shouldn't contain duplicates".into()),
                );
            }
        }
        _ => {}
    }
    check_enum(node, v, name, errs);
    if let Value::Object(map) = v {
        let keys = map.len() as i64;
        if let Some(min) = c.min_properties
            && keys < min
        {
            push(
                errs,
                ErrorType::Invalid,
                name,
                keys.into(),
                in_body(format!("should have at least {min} properties")),
            );
            return;
        }
        if let Some(max) = c.max_properties
            && keys > max
        {
            errs.push(FieldError::too_many(
                field_of(name),
                map.len(),
                max.max(0) as usize,
            ));
            return;
        }
        let old_map = old.and_then(Value::as_object);
        if let Additional::Schema(add) = &node.additional {
            for (k, item) in map {
                if !node.properties.contains_key(k) {
                    openapi(
                        add,
                        item,
                        old_map.and_then(|o| o.get(k)),
                        &format!("{name}.{k}"),
                        errs,
                    );
                }
            }
        }
        for (k, prop) in &node.properties {
            if let Some(item) = map.get(k) {
                let child = if name.is_empty() {
                    k.clone()
                } else {
                    format!("{name}.{k}")
                };
                openapi(prop, item, old_map.and_then(|o| o.get(k)), &child, errs);
            }
        }
        for k in &c.required {
            if !map.contains_key(k) {
                errs.push(FieldError::required(field_of(&format!("{name}.{k}")), ""));
            }
        }
    }
}

fn check_enum(node: &Node, v: &Value, name: &str, errs: &mut ErrorList) {
    let Some(values) = &node.checks.enum_ else {
        return;
    };
    if values
        .iter()
        .any(|e| e == v || (e.is_number() && v.is_number() && e.as_f64() == v.as_f64()))
    {
        return;
    }
    let supported: Vec<String> = values
        .iter()
        .map(|e| match e {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    let refs: Vec<&str> = supported.iter().map(String::as_str).collect();
    errs.push(FieldError::not_supported(field_of(name), v.clone(), &refs));
}

fn numbers(node: &Node, v: &Value, n: &serde_json::Number, name: &str, errs: &mut ErrorList) {
    let c = &node.checks;
    let in_body = |what: String| format!("{name} in body {what}");
    let int = n.as_i64();
    let data = n.as_f64().unwrap_or(0.0);
    // Integer data is compared with integer bounds, shown as integers.
    let bound = |b: f64| match int {
        Some(_) => format!("{}", b as i64),
        None => go_float(b),
    };
    if let Some(m) = c.multiple_of
        && m > 0.0
    {
        let q = data / m;
        if q.fract() != 0.0 {
            push(
                errs,
                ErrorType::Invalid,
                name,
                v.clone(),
                in_body(format!("should be a multiple of {}", go_float(m))),
            );
        }
    }
    if let Some(max) = c.maximum {
        let bad = match int {
            Some(i) => {
                let b = max as i64;
                if c.exclusive_maximum { i >= b } else { i > b }
            }
            None => {
                if c.exclusive_maximum {
                    data >= max
                } else {
                    data > max
                }
            }
        };
        if bad {
            let op = if c.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            push(
                errs,
                ErrorType::Invalid,
                name,
                v.clone(),
                in_body(format!("should be {op} {}", bound(max))),
            );
        }
    }
    if let Some(min) = c.minimum {
        let bad = match int {
            Some(i) => {
                let b = min as i64;
                if c.exclusive_minimum { i <= b } else { i < b }
            }
            None => {
                if c.exclusive_minimum {
                    data <= min
                } else {
                    data < min
                }
            }
        };
        if bad {
            let op = if c.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            push(
                errs,
                ErrorType::Invalid,
                name,
                v.clone(),
                in_body(format!("should be {op} {}", bound(min))),
            );
        }
    }
}

fn nil_error(errs: &mut ErrorList, msg: String) {
    errs.push(FieldError::invalid(NIL_FIELD, "", msg));
}

/// `allOf`, `anyOf`, `oneOf` and `not`, in kube-openapi's order.
fn composition(node: &Node, v: &Value, old: Option<&Value>, name: &str, errs: &mut ErrorList) {
    let c = &node.checks;
    let run = |s: &Node| {
        let mut e = ErrorList::default();
        openapi(s, v, old, name, &mut e);
        e
    };
    if !c.any_of.is_empty() {
        let results: Vec<ErrorList> = c.any_of.iter().map(run).collect();
        if !results.iter().any(ErrorList::is_empty) {
            nil_error(
                errs,
                format!("{name} must validate at least one schema (anyOf)"),
            );
            if let Some(best) = results.into_iter().min_by_key(ErrorList::len) {
                errs.extend(best);
            }
        }
    }
    if !c.one_of.is_empty() {
        let results: Vec<ErrorList> = c.one_of.iter().map(run).collect();
        let valid = results.iter().filter(|r| r.is_empty()).count();
        if valid == 0 {
            nil_error(
                errs,
                format!("{name} must validate one and only one schema (oneOf). Found none valid"),
            );
            if let Some(best) = results.into_iter().min_by_key(ErrorList::len) {
                errs.extend(best);
            }
        } else if valid > 1 {
            nil_error(
                errs,
                format!(
                    "{name} must validate one and only one schema (oneOf). Found {valid} valid alternatives"
                ),
            );
        }
    }
    if !c.all_of.is_empty() {
        let results: Vec<ErrorList> = c.all_of.iter().map(run).collect();
        let valid = results.iter().filter(|r| r.is_empty()).count();
        if valid != results.len() {
            let extra = if valid == 0 {
                ". Neither validated"
            } else {
                ""
            };
            nil_error(
                errs,
                format!("{name} must validate all the schemas (allOf){extra}"),
            );
        }
        for r in results {
            errs.extend(r);
        }
    }
    if let Some(not) = &c.not
        && run(not).is_empty()
    {
        nil_error(errs, format!("{name} must not validate the schema (not)"));
    }
}

/// The `x-kubernetes-list-type` `set` and `map` invariants, below `node`.
pub(crate) fn list_types(
    node: &Node,
    v: &Value,
    old: Option<&Value>,
    path: &FieldPath,
    errs: &mut ErrorList,
) {
    if old == Some(v) {
        return;
    }
    match v {
        Value::Array(items) => {
            match node.list_type.as_deref() {
                Some("set") => {
                    for i in first_repeats(items) {
                        errs.push(duplicate(path.index(i), &items[i]));
                    }
                }
                Some("map") => list_map(node, items, path, errs),
                _ => {}
            }
            if let Some(item_node) = node.items.as_deref() {
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    let old_item = old_items.and_then(|o| correlate(node, item, o));
                    list_types(item_node, item, old_item, &path.index(i), errs);
                }
            }
        }
        Value::Object(map) => {
            let old_map = old.and_then(Value::as_object);
            for (k, item) in map {
                let old_item = old_map.and_then(|o| o.get(k));
                if let Some(prop) = node.properties.get(k) {
                    list_types(prop, item, old_item, &path.child(k), errs);
                } else if let Some(add) = node.additional.schema() {
                    list_types(add, item, old_item, &path.key(k), errs);
                }
            }
        }
        _ => {}
    }
}

fn list_map(node: &Node, items: &[Value], path: &FieldPath, errs: &mut ErrorList) {
    // Only objects and nulls; the first other item is the only error.
    if let Some((i, item)) = items
        .iter()
        .enumerate()
        .find(|(_, x)| !x.is_null() && !x.is_object())
    {
        errs.push(FieldError::invalid(
            path.index(i),
            item.clone(),
            "must be an object for an array of list-type map",
        ));
        return;
    }
    // The key of an item: the key fields it has (a null item, or one
    // without the key, has an empty key, equal to other such items).
    let keys: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut key = serde_json::Map::new();
            if let Some(obj) = item.as_object() {
                for k in &node.list_map_keys {
                    if let Some(v) = obj.get(k) {
                        key.insert(k.clone(), v.clone());
                    }
                }
            }
            Value::Object(key)
        })
        .collect();
    for i in first_repeats(&keys) {
        errs.push(duplicate(path.index(i), &keys[i]));
    }
}

/// The index of the second appearance of each repeated value.
fn first_repeats(values: &[Value]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let earlier = values[..i].iter().filter(|e| *e == v).count();
        if earlier == 1 {
            out.push(i);
        }
    }
    out
}

/// `field.Duplicate`, whose value Go renders with `%#v` for maps and
/// slices (`map[string]interface {}{"name":"a"}`).
fn duplicate(path: FieldPath, v: &Value) -> FieldError {
    if v.is_object() || v.is_array() {
        FieldError {
            type_: ErrorType::Duplicate,
            field: path.into(),
            bad_value: None,
            detail: go_syntax(v),
        }
    } else {
        FieldError::duplicate(path, v.clone())
    }
}
