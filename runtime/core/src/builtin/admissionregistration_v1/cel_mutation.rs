//! CEL expressions of MutatingAdmissionPolicy mutations: the
//! `applyConfiguration` expressions build an `Object{...}` value, the
//! `jsonPatch` ones a list of `JSONPatch{...}` values, and may call
//! `JSONPatch.escapeKey(...)`.
//!
//! The `cel` crate parses struct literals but constructs only the struct
//! types registered with its environment, by their full name, while these
//! names are open-ended (`Object.spec.template.spec`, one per field path).
//! Upstream types them with dynamic object types whose values are plain
//! JSON in the end; so here the parsed expression is rewritten before it
//! is evaluated: every `Object...{f: v}` / `JSONPatch{f: v}` literal
//! becomes the map literal `{"f": v}` (optional fields `?f: v` stay
//! optional entries) with one more entry, [`TYPE_KEY`], holding the type
//! name (so that [`type_name`] and [`check_type_names`] can tell an object
//! from a map, and [`to_json`] leaves it out), and `JSONPatch.escapeKey(k)` becomes
//! `k.replace("~", "~0").replace("/", "~1")` (RFC 6901 escaping). Any
//! other struct name is refused when compiling, as upstream's environment
//! declares no other type.
//!
//! Without upstream's type checker, the check that an `applyConfiguration`
//! expression returns an `Object` and a `jsonPatch` one a
//! `list(JSONPatch)` is made on the value when evaluated (as upstream's
//! `CheckTypeNamesMatchFieldPathNames` is). An expression that inspects an
//! object literal as a map (`size(Object{...})`) sees the type entry.

use cel::common::ast::{
    CallExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue, MapEntryExpr, MapExpr,
};
use cel::common::types::CelString;
use serde_json::Value;

/// A mutation expression, parsed and rewritten (see the module docs).
#[derive(Clone, Debug)]
pub struct MutationProgram {
    expr: IdedExpr,
}

/// The root type name of apply configurations.
pub const OBJECT: &str = "Object";
/// The type name of JSON patch operations.
pub const JSON_PATCH: &str = "JSONPatch";
/// The map entry holding the type name of a rewritten struct literal (a
/// key no Kubernetes field has).
pub const TYPE_KEY: &str = "\u{0}type";

impl MutationProgram {
    /// Parses `source` in the Kubernetes CEL environment
    /// ([`crate::apiextensions::cel_env`]) and rewrites its struct
    /// literals; the error reads as the crate's parse errors, or
    /// `undeclared reference to '<name>'` for a struct of another type.
    pub fn compile(source: &str) -> Result<Self, String> {
        let env = crate::apiextensions::cel_env();
        let mut expr = env.parser().parse(source).map_err(|e| e.to_string())?;
        let mut next_id = max_id(&expr) + 1;
        rewrite(&mut expr, &mut next_id)?;
        Ok(MutationProgram { expr })
    }

    /// Evaluates the expression in `ctx`.
    pub fn execute(&self, ctx: &cel::Context<'_, '_>) -> Result<cel::Value, String> {
        cel::Value::resolve(&self.expr, ctx).map_err(|e| e.to_string())
    }
}

fn max_id(e: &IdedExpr) -> u64 {
    let mut max = e.id;
    visit(e, &mut |x| max = max.max(x.id));
    max
}

/// Calls `f` on every node below `e` (not `e` itself).
fn visit(e: &IdedExpr, f: &mut dyn FnMut(&IdedExpr)) {
    let mut children: Vec<&IdedExpr> = Vec::new();
    match &e.expr {
        Expr::Call(c) => {
            children.extend(c.target.as_deref());
            children.extend(c.args.iter());
        }
        Expr::Comprehension(c) => children.extend([
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]),
        Expr::List(l) => children.extend(l.elements.iter()),
        Expr::Map(m) => {
            for entry in &m.entries {
                entry_children(entry, &mut children);
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                entry_children(entry, &mut children);
            }
        }
        Expr::Select(s) => children.push(&s.operand),
        _ => {}
    }
    for c in children {
        f(c);
        visit(c, f);
    }
}

fn entry_children<'a>(entry: &'a IdedEntryExpr, out: &mut Vec<&'a IdedExpr>) {
    match &entry.expr {
        EntryExpr::StructField(f) => out.push(&f.value),
        EntryExpr::MapEntry(m) => {
            out.push(&m.key);
            out.push(&m.value);
        }
    }
}

fn string_literal(id: u64, s: &str) -> IdedExpr {
    IdedExpr {
        id,
        expr: Expr::Literal(LiteralValue::String(CelString::from(s.to_string()))),
    }
}

fn fresh(next_id: &mut u64) -> u64 {
    let id = *next_id;
    *next_id += 1;
    id
}

/// Whether `name` is a type this environment constructs.
fn known_struct(name: &str) -> bool {
    let name = name.strip_prefix('.').unwrap_or(name);
    name == OBJECT || name == JSON_PATCH || name.starts_with("Object.")
}

fn is_escape_key(c: &CallExpr) -> bool {
    match &c.target {
        Some(t) => {
            c.func_name == "escapeKey" && matches!(&t.expr, Expr::Ident(n) if n == JSON_PATCH)
        }
        None => c.func_name == "JSONPatch.escapeKey",
    }
}

fn rewrite(e: &mut IdedExpr, next_id: &mut u64) -> Result<(), String> {
    match &mut e.expr {
        Expr::Call(c) => {
            if is_escape_key(c) && c.args.len() == 1 {
                let mut arg = c.args.remove(0);
                rewrite(&mut arg, next_id)?;
                let replace = |target: IdedExpr, from: &str, to: &str, next_id: &mut u64| {
                    let a = string_literal(fresh(next_id), from);
                    let b = string_literal(fresh(next_id), to);
                    IdedExpr {
                        id: fresh(next_id),
                        expr: Expr::Call(CallExpr {
                            func_name: "replace".into(),
                            target: Some(Box::new(target)),
                            args: vec![a, b],
                        }),
                    }
                };
                let tilde = replace(arg, "~", "~0", next_id);
                let slash = replace(tilde, "/", "~1", next_id);
                e.expr = slash.expr;
                return Ok(());
            }
            if let Some(t) = c.target.as_deref_mut() {
                rewrite(t, next_id)?;
            }
            for a in &mut c.args {
                rewrite(a, next_id)?;
            }
        }
        Expr::Comprehension(c) => {
            for x in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                rewrite(x, next_id)?;
            }
        }
        Expr::List(l) => {
            for x in &mut l.elements {
                rewrite(x, next_id)?;
            }
        }
        Expr::Map(m) => {
            for entry in &mut m.entries {
                if let EntryExpr::MapEntry(me) = &mut entry.expr {
                    rewrite(&mut me.key, next_id)?;
                    rewrite(&mut me.value, next_id)?;
                }
            }
        }
        Expr::Select(s) => rewrite(&mut s.operand, next_id)?,
        Expr::Struct(s) => {
            if !known_struct(&s.type_name) {
                return Err(format!("undeclared reference to '{}'", s.type_name));
            }
            let mut entries = Vec::with_capacity(s.entries.len());
            for entry in std::mem::take(&mut s.entries) {
                let (field, mut value, optional) = match entry.expr {
                    EntryExpr::StructField(f) => (f.field, f.value, f.optional),
                    EntryExpr::MapEntry(_) => {
                        return Err(format!("invalid field in '{}' literal", s.type_name));
                    }
                };
                rewrite(&mut value, next_id)?;
                entries.push(IdedEntryExpr {
                    id: entry.id,
                    expr: EntryExpr::MapEntry(MapEntryExpr {
                        key: string_literal(fresh(next_id), &field),
                        value,
                        optional,
                    }),
                });
            }
            let name = s.type_name.strip_prefix('.').unwrap_or(&s.type_name);
            entries.push(IdedEntryExpr {
                id: fresh(next_id),
                expr: EntryExpr::MapEntry(MapEntryExpr {
                    key: string_literal(fresh(next_id), TYPE_KEY),
                    value: string_literal(fresh(next_id), name),
                    optional: false,
                }),
            });
            e.expr = Expr::Map(MapExpr { entries });
        }
        _ => {}
    }
    Ok(())
}

/// The type name of a value a struct literal built (`Object.spec`,
/// `JSONPatch`), `None` for any other value.
pub fn type_name(v: &cel::Value) -> Option<&str> {
    let cel::Value::Map(m) = v else {
        return None;
    };
    match m.map.get(&cel::objects::Key::from(TYPE_KEY)) {
        Some(cel::Value::String(s)) => Some(s.as_str()),
        _ => None,
    }
}

/// Upstream's `CheckTypeNamesMatchFieldPathNames`: every object literal
/// under `v` (through fields, lists and maps) must be named by its field
/// path from `v`'s own type name (`Object.spec{selector:
/// Object.spec.selector{...}}`). The errors are upstream's, one a line.
pub fn check_type_names(v: &cel::Value) -> Result<(), String> {
    let Some(root) = type_name(v) else {
        return Ok(());
    };
    let mut errs = Vec::new();
    type_check(v, &mut vec![root.to_string()], &mut errs);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("\n"))
    }
}

fn type_check(v: &cel::Value, path: &mut Vec<String>, errs: &mut Vec<String>) {
    match v {
        cel::Value::Map(m) => {
            let typed = type_name(v).map(str::to_string);
            if let Some(tn) = &typed {
                let expected = path.join(".");
                if *tn != expected {
                    errs.push(format!(
                        "unexpected type name {tn:?}, expected {expected:?}, which matches field name path from root Object type"
                    ));
                }
            }
            let mut entries: Vec<_> = m.map.iter().collect();
            entries.sort_by(|a, b| format!("{:?}", a.0).cmp(&format!("{:?}", b.0)));
            for (k, f) in entries {
                match (&typed, k) {
                    (Some(_), cel::objects::Key::String(k)) if k.as_str() == TYPE_KEY => {}
                    (Some(_), cel::objects::Key::String(k)) => {
                        path.push(k.to_string());
                        type_check(f, path, errs);
                        path.pop();
                    }
                    _ => type_check(f, path, errs),
                }
            }
        }
        cel::Value::List(items) => {
            for item in items.iter() {
                type_check(item, path, errs);
            }
        }
        _ => {}
    }
}

/// Converts a CEL value to JSON (maps need string keys; bytes become
/// base64, durations and timestamps their string forms; the type entry of
/// object literals is left out).
pub fn to_json(v: &cel::Value) -> Result<Value, String> {
    use base64::Engine as _;
    Ok(match v {
        cel::Value::Null => Value::Null,
        cel::Value::Bool(b) => Value::Bool(*b),
        cel::Value::Int(i) => Value::from(*i),
        cel::Value::UInt(u) => Value::from(*u),
        cel::Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| format!("cannot represent {f} in JSON"))?,
        cel::Value::String(s) => Value::String(s.to_string()),
        cel::Value::Bytes(b) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(b.as_slice()))
        }
        cel::Value::List(items) => {
            Value::Array(items.iter().map(to_json).collect::<Result<_, _>>()?)
        }
        cel::Value::Map(m) => {
            let mut out = serde_json::Map::new();
            let mut entries: Vec<_> = m.map.iter().collect();
            entries.sort_by(|a, b| format!("{:?}", a.0).cmp(&format!("{:?}", b.0)));
            for (k, v) in entries {
                let cel::objects::Key::String(k) = k else {
                    return Err(format!("map key {k:?} is not a string"));
                };
                if k.as_str() == TYPE_KEY {
                    continue;
                }
                out.insert(k.to_string(), to_json(v)?);
            }
            Value::Object(out)
        }
        cel::Value::Duration(d) => {
            Value::String(format!("{}s", d.num_milliseconds() as f64 / 1000.0))
        }
        cel::Value::Timestamp(t) => Value::String(t.to_rfc3339()),
        other => return Err(format!("{other:?} cannot be represented in JSON")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(source: &str, object: Value) -> Result<Value, String> {
        let p = MutationProgram::compile(source)?;
        let mut ctx = cel::Context::with_env(crate::apiextensions::cel_env());
        ctx.add_variable_from_value("object", crate::cel::to_cel(&object));
        to_json(&p.execute(&ctx)?)
    }

    #[test]
    fn object_literals_become_maps() {
        let got = eval(
            r#"Object{spec: Object.spec{replicas: object.spec.replicas + 1}, metadata: Object.metadata{labels: {"a": "b"}}}"#,
            json!({"spec": {"replicas": 2}}),
        );
        assert_eq!(
            got,
            Ok(json!({"spec": {"replicas": 3}, "metadata": {"labels": {"a": "b"}}}))
        );
    }

    #[test]
    fn json_patch_literals_and_escape_key() {
        let got = eval(
            r#"[JSONPatch{op: "add", path: "/metadata/labels/" + JSONPatch.escapeKey("k8s.io/a~b"), value: "x"}]"#,
            json!({}),
        );
        assert_eq!(
            got,
            Ok(json!([{"op": "add", "path": "/metadata/labels/k8s.io~1a~0b", "value": "x"}]))
        );
    }

    #[test]
    fn literals_inside_lists_and_macros() {
        let got = eval(
            r#"Object{spec: Object.spec{containers: object.spec.containers.map(c, Object.spec.containers{name: c.name + "-x"})}}"#,
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
        );
        assert_eq!(
            got,
            Ok(json!({"spec": {"containers": [{"name": "a-x"}, {"name": "b-x"}]}}))
        );
    }

    fn value(source: &str) -> cel::Value {
        let p = MutationProgram::compile(source).expect("compiles");
        let ctx = cel::Context::with_env(crate::apiextensions::cel_env());
        p.execute(&ctx).expect("evaluates")
    }

    /// Upstream's `CheckTypeNamesMatchFieldPathNames` cases.
    #[test]
    fn type_names_follow_field_paths() {
        let ok = value(
            r#"Object{spec: Object.spec{list: [Object.spec.list{a: 1}], m: {"k": Object.spec.m{b: 2}}}}"#,
        );
        assert_eq!(type_name(&ok), Some("Object"));
        assert_eq!(check_type_names(&ok), Ok(()));
        let bad = value("Object{spec: Object.spec{selector: Object.spec.wrong{}}}");
        assert_eq!(
            check_type_names(&bad),
            Err(r#"unexpected type name "Object.spec.wrong", expected "Object.spec.selector", which matches field name path from root Object type"#.to_string())
        );
        assert_eq!(type_name(&value(r#"{"a": 1}"#)), None);
        assert_eq!(to_json(&value("Object.spec{a: 1}")), Ok(json!({"a": 1})));
    }

    #[test]
    fn unknown_struct_types_do_not_compile() {
        let err = MutationProgram::compile("Foo{a: 1}").unwrap_err();
        assert_eq!(err, "undeclared reference to 'Foo'");
        assert!(MutationProgram::compile("Object{").is_err());
    }
}
