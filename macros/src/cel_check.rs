//! Compile-time checks of `cel(rule = "...")` rules: each rule is parsed
//! (the `cel` crate's parser, the one the runtime evaluates with),
//! type-checked against the Rust types of the fields it reads, and its
//! cost estimated from the declared bounds (`max_length`, `max_items`), as
//! kube-apiserver does when a CustomResourceDefinition is created — so a
//! rule the API server would refuse, or that could never be true, fails
//! the build at the attribute instead.
//!
//! What is known at the attribute: the struct's own fields (JSON names,
//! types, bounds). A field whose type is another struct is a dynamic value
//! here (its derive is a separate macro call), so rules reaching into it
//! are checked only as far as the types are known; nothing is refused for
//! what cannot be seen.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

/// kube-apiserver's per-expression estimated cost limit
/// (`StaticEstimatedCostLimit`).
pub(crate) const COST_LIMIT: f64 = 10_000_000.0;

/// The request size limit the estimator derives unbounded sizes from (3 MiB).
const MAX_REQUEST_BYTES: f64 = 3.0 * 1024.0 * 1024.0;

/// A CEL type as far as the macro knows it, with the declared bounds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Ty {
    Bool,
    Int,
    Uint,
    Double,
    /// A string and its `max_length`, if declared.
    String(Option<u64>),
    Bytes,
    Null,
    /// Items and `max_items`, if declared.
    List(Box<Ty>, Option<u64>),
    /// String keys; values.
    Map(Box<Ty>),
    /// An object with known fields (JSON names); `open` when other fields
    /// may exist (flattened fields).
    Object(Vec<(String, Ty)>, bool),
    /// Anything: not known at the attribute.
    Dyn,
}

impl Ty {
    fn name(&self) -> String {
        match self {
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Uint => "uint".into(),
            Ty::Double => "double".into(),
            Ty::String(_) => "string".into(),
            Ty::Bytes => "bytes".into(),
            Ty::Null => "null_type".into(),
            Ty::List(t, _) => format!("list({})", t.name()),
            Ty::Map(t) => format!("map(string, {})", t.name()),
            Ty::Object(..) => "object".into(),
            Ty::Dyn => "dyn".into(),
        }
    }

    fn is_dyn(&self) -> bool {
        matches!(self, Ty::Dyn)
    }

    fn is_number(&self) -> bool {
        matches!(self, Ty::Int | Ty::Uint | Ty::Double)
    }

    /// Whether values of the two types can be compared or combined by an
    /// overload taking two values of one type.
    fn same_kind(&self, other: &Ty) -> bool {
        match (self, other) {
            (Ty::Dyn, _) | (_, Ty::Dyn) => true,
            (Ty::String(_), Ty::String(_)) => true,
            (Ty::List(a, _), Ty::List(b, _)) => a.same_kind(b),
            (Ty::Map(a), Ty::Map(b)) => a.same_kind(b),
            (Ty::Object(..), Ty::Object(..)) => true,
            (a, b) => std::mem::discriminant(a) == std::mem::discriminant(b),
        }
    }
}

/// The CEL type of a Rust field type; `max_length` and `max_items` are the
/// field's own bounds.
pub(crate) fn ty_of(ty: &syn::Type, max_length: Option<u64>, max_items: Option<u64>) -> Ty {
    if let syn::Type::Reference(r) = ty {
        return ty_of(&r.elem, max_length, max_items);
    }
    let Some((name, args)) = crate::model::generic_args(ty) else {
        return Ty::Dyn;
    };
    match (name.as_str(), args.as_slice()) {
        ("String" | "str", _) => Ty::String(max_length),
        ("bool", _) => Ty::Bool,
        ("i8" | "i16" | "i32" | "i64" | "isize" | "u8" | "u16" | "u32" | "u64" | "usize", _) => {
            Ty::Int
        }
        ("f32" | "f64", _) => Ty::Double,
        ("Option" | "Box" | "Arc" | "Rc", [inner]) => ty_of(inner, max_length, max_items),
        ("Vec" | "VecDeque" | "BTreeSet" | "HashSet", [item]) => {
            Ty::List(Box::new(ty_of(item, None, None)), max_items)
        }
        ("BTreeMap" | "HashMap" | "IndexMap", [_, value, ..]) => {
            Ty::Map(Box::new(ty_of(value, None, None)))
        }
        _ => Ty::Dyn,
    }
}

/// Why a rule is refused, as the message of the compile error.
pub(crate) type RuleError = String;

/// Parses and checks `rule` with `self` (and `oldSelf`) of type `this`;
/// returns whether the rule reads `oldSelf`.
pub(crate) fn check_rule(rule: &str, this: &Ty) -> Result<bool, RuleError> {
    let ast = cel::parser::Parser::new()
        .parse(rule)
        .map_err(|e| format!("the CEL rule does not parse: {e}"))?;
    let mut cx = Checker {
        vars: vec![("self".to_string(), this.clone())],
        old_self: false,
    };
    cx.vars.push(("oldSelf".to_string(), this.clone()));
    let ty = cx.check(&ast)?;
    if !matches!(ty, Ty::Bool | Ty::Dyn) {
        return Err(format!(
            "the CEL rule must evaluate to a bool, not {}",
            ty.name()
        ));
    }
    let cost = estimate(&ast, &cx.scope_for_cost(this));
    if cost > COST_LIMIT {
        let factor = cost / COST_LIMIT;
        let factor = if factor > 100.0 {
            "more than 100x".to_string()
        } else {
            format!("{factor:.1}x")
        };
        return Err(format!(
            "estimated rule cost exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared): estimated cost {cost:.0}, limit {COST_LIMIT:.0}"
        ));
    }
    Ok(cx.old_self)
}

struct Checker {
    vars: Vec<(String, Ty)>,
    old_self: bool,
}

/// `size(x)` / `x.size()`.
fn size_of_ty(a: &Ty) -> Result<Ty, RuleError> {
    match a {
        Ty::String(_) | Ty::Bytes | Ty::List(..) | Ty::Map(_) | Ty::Object(..) | Ty::Dyn => {
            Ok(Ty::Int)
        }
        _ => Err(no_overload("size", &[a])),
    }
}

fn no_overload(func: &str, args: &[&Ty]) -> RuleError {
    let names: Vec<String> = args.iter().map(|t| t.name()).collect();
    format!(
        "found no matching overload for '{func}' applied to '({})'",
        names.join(", ")
    )
}

impl Checker {
    fn lookup(&mut self, name: &str) -> Option<Ty> {
        if name == "oldSelf" {
            self.old_self = true;
        }
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
    }

    fn scope_for_cost(&self, this: &Ty) -> Vec<(String, Ty)> {
        vec![
            ("self".to_string(), this.clone()),
            ("oldSelf".to_string(), this.clone()),
        ]
    }

    fn check(&mut self, e: &IdedExpr) -> Result<Ty, RuleError> {
        match &e.expr {
            Expr::Unspecified => Ok(Ty::Dyn),
            Expr::Literal(l) => Ok(match l {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Bytes(_) => Ty::Bytes,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::Null => Ty::Null,
                LiteralValue::String(v) => Ty::String(Some(v.inner().len() as u64)),
                LiteralValue::UInt(_) => Ty::Uint,
            }),
            Expr::Ident(name) => match self.lookup(name) {
                Some(t) => Ok(t),
                // Type names and the like (`int`, `string`, `duration`)
                // are values too; anything else is undeclared.
                None if matches!(
                    name.as_str(),
                    "int"
                        | "uint"
                        | "double"
                        | "string"
                        | "bool"
                        | "bytes"
                        | "list"
                        | "map"
                        | "null_type"
                        | "type"
                ) =>
                {
                    Ok(Ty::Dyn)
                }
                None => Err(format!("undeclared reference to '{name}'")),
            },
            Expr::Select(s) => {
                let operand = self.check(&s.operand)?;
                let field = match &operand {
                    Ty::Object(fields, open) => match fields.iter().find(|(n, _)| *n == s.field) {
                        Some((_, t)) => t.clone(),
                        None if *open => Ty::Dyn,
                        None => return Err(format!("undefined field '{}'", s.field)),
                    },
                    Ty::Map(v) => (**v).clone(),
                    Ty::Dyn => Ty::Dyn,
                    other => {
                        return Err(format!(
                            "type '{}' does not support field selection",
                            other.name()
                        ));
                    }
                };
                Ok(if s.test { Ty::Bool } else { field })
            }
            Expr::List(l) => {
                let mut item: Option<Ty> = None;
                for el in &l.elements {
                    let t = self.check(el)?;
                    item = Some(match item {
                        Some(prev) if prev.same_kind(&t) => prev,
                        Some(_) => Ty::Dyn,
                        None => t,
                    });
                }
                Ok(Ty::List(
                    Box::new(item.unwrap_or(Ty::Dyn)),
                    Some(l.elements.len() as u64),
                ))
            }
            Expr::Map(m) => {
                let mut value: Option<Ty> = None;
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        self.check(&entry.key)?;
                        let t = self.check(&entry.value)?;
                        value = Some(match value {
                            Some(prev) if prev.same_kind(&t) => prev,
                            Some(_) => Ty::Dyn,
                            None => t,
                        });
                    }
                }
                Ok(Ty::Map(Box::new(value.unwrap_or(Ty::Dyn))))
            }
            Expr::Struct(_) => Ok(Ty::Dyn),
            Expr::Comprehension(c) => {
                let range = self.check(&c.iter_range)?;
                let (first, second) = match &range {
                    Ty::List(item, _) => (Ty::Int, (**item).clone()),
                    Ty::Map(value) => (Ty::String(None), (**value).clone()),
                    Ty::Dyn => (Ty::Dyn, Ty::Dyn),
                    other => {
                        return Err(format!(
                            "expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)",
                            other.name()
                        ));
                    }
                };
                let depth = self.vars.len();
                match &c.iter_var2 {
                    Some(v2) => {
                        self.vars.push((c.iter_var.clone(), first));
                        self.vars.push((v2.clone(), second));
                    }
                    None => {
                        let item = match &range {
                            Ty::List(item, _) => (**item).clone(),
                            Ty::Map(_) => Ty::String(None),
                            _ => Ty::Dyn,
                        };
                        self.vars.push((c.iter_var.clone(), item));
                    }
                }
                let accu = self.check(&c.accu_init)?;
                self.vars.push((c.accu_var.clone(), accu));
                let result = (|| {
                    self.check(&c.loop_cond)?;
                    self.check(&c.loop_step)?;
                    self.check(&c.result)
                })();
                self.vars.truncate(depth);
                result
            }
            Expr::Call(call) => self.call(&call.func_name, call.target.as_deref(), &call.args),
        }
    }

    fn call(
        &mut self,
        func: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Result<Ty, RuleError> {
        let target = match target {
            Some(t) => Some(self.check(t)?),
            None => None,
        };
        let mut types = Vec::with_capacity(args.len());
        for a in args {
            types.push(self.check(a)?);
        }
        let t: Vec<&Ty> = types.iter().collect();
        let any_dyn = t.iter().any(|t| t.is_dyn()) || target.as_ref().is_some_and(Ty::is_dyn);
        use cel::common::ast::operators as op;
        match (func, target.as_ref(), t.as_slice()) {
            (op::LOGICAL_AND | op::LOGICAL_OR, None, [a, b]) => {
                for x in [a, b] {
                    if !matches!(x, Ty::Bool | Ty::Dyn) {
                        return Err(no_overload(func, &[a, b]));
                    }
                }
                Ok(Ty::Bool)
            }
            (op::LOGICAL_NOT | op::NOT_STRICTLY_FALSE, None, [a]) => {
                if matches!(a, Ty::Bool | Ty::Dyn) {
                    Ok(Ty::Bool)
                } else {
                    Err(no_overload(func, &[a]))
                }
            }
            (op::CONDITIONAL, None, [c, a, b]) => {
                if !matches!(c, Ty::Bool | Ty::Dyn) {
                    return Err(no_overload(func, &[c, a, b]));
                }
                Ok(if a.same_kind(b) {
                    (*a).clone()
                } else {
                    Ty::Dyn
                })
            }
            (op::EQUALS | op::NOT_EQUALS, None, [a, b]) => {
                let null = matches!(a, Ty::Null) || matches!(b, Ty::Null);
                if null || a.same_kind(b) || (a.is_number() && b.is_number()) {
                    Ok(Ty::Bool)
                } else {
                    Err(no_overload(func, &[a, b]))
                }
            }
            (op::LESS | op::LESS_EQUALS | op::GREATER | op::GREATER_EQUALS, None, [a, b]) => {
                // Kubernetes' CEL compares numbers across types.
                let ordered = |t: &Ty| {
                    t.is_number() || matches!(t, Ty::String(_) | Ty::Bool | Ty::Bytes | Ty::Dyn)
                };
                if any_dyn || (a.is_number() && b.is_number()) || (ordered(a) && a.same_kind(b)) {
                    Ok(Ty::Bool)
                } else {
                    Err(no_overload(func, &[a, b]))
                }
            }
            (op::ADD, None, [a, b]) => match (a, b) {
                _ if any_dyn => Ok(if a.is_dyn() {
                    (*b).clone()
                } else {
                    (*a).clone()
                }),
                (Ty::String(x), Ty::String(y)) => Ok(Ty::String(x.zip(*y).map(|(x, y)| x + y))),
                (Ty::List(x, _), Ty::List(y, _)) if x.same_kind(y) => Ok(Ty::List(x.clone(), None)),
                (x, y) if x.is_number() && x == y => Ok((*x).clone()),
                (Ty::Bytes, Ty::Bytes) => Ok(Ty::Bytes),
                _ => Err(no_overload(func, &[a, b])),
            },
            (op::SUBSTRACT | op::MULTIPLY | op::DIVIDE | op::MODULO, None, [a, b]) => {
                if any_dyn {
                    Ok(Ty::Dyn)
                } else if a.is_number() && a == b && !(func == op::MODULO && **a == Ty::Double) {
                    Ok((*a).clone())
                } else {
                    Err(no_overload(func, &[a, b]))
                }
            }
            (op::NEGATE, None, [a]) => {
                if matches!(a, Ty::Int | Ty::Double | Ty::Dyn) {
                    Ok((*a).clone())
                } else {
                    Err(no_overload(func, &[a]))
                }
            }
            (op::INDEX | op::OPT_INDEX, None, [c, i]) => match c {
                Ty::List(item, _) if matches!(i, Ty::Int | Ty::Uint | Ty::Dyn) => {
                    Ok((**item).clone())
                }
                Ty::Map(v) if matches!(i, Ty::String(_) | Ty::Dyn) => Ok((**v).clone()),
                Ty::Object(..) | Ty::Dyn => Ok(Ty::Dyn),
                _ => Err(no_overload(func, &[c, i])),
            },
            (op::IN, None, [x, c]) => match c {
                Ty::List(item, _) if item.same_kind(x) || (item.is_number() && x.is_number()) => {
                    Ok(Ty::Bool)
                }
                Ty::Map(_) if matches!(x, Ty::String(_) | Ty::Dyn) => Ok(Ty::Bool),
                Ty::Dyn => Ok(Ty::Bool),
                _ => Err(no_overload(func, &[x, c])),
            },
            ("size", None, [a]) => size_of_ty(a),
            ("size", Some(a), []) => size_of_ty(a),
            ("contains" | "startsWith" | "endsWith" | "matches", Some(s), [arg]) => {
                if matches!(s, Ty::String(_) | Ty::Dyn) && matches!(arg, Ty::String(_) | Ty::Dyn) {
                    Ok(Ty::Bool)
                } else {
                    Err(no_overload(func, &[s, arg]))
                }
            }
            ("int", None, [_]) => Ok(Ty::Int),
            ("uint", None, [_]) => Ok(Ty::Uint),
            ("double", None, [_]) => Ok(Ty::Double),
            ("string", None, [_]) => Ok(Ty::String(None)),
            ("bool", None, [_]) => Ok(Ty::Bool),
            // Kubernetes' libraries (lists, strings, regex, URLs, IPs,
            // quantities, ...) and anything else: not modelled; dynamic.
            _ => Ok(Ty::Dyn),
        }
    }
}

/// The largest number of items an unbounded list can have in a request:
/// as kube-apiserver's estimator, the request size over the smallest
/// serialized item (here 2 bytes: `0` and a comma).
fn unbounded_items() -> f64 {
    (MAX_REQUEST_BYTES - 2.0) / 2.0
}

/// The longest an unbounded string can be in a request (its quotes aside).
fn unbounded_length() -> f64 {
    MAX_REQUEST_BYTES - 2.0
}

/// cel-go's traversal cost factor of strings (per character).
const STRING_TRAVERSAL_FACTOR: f64 = 0.1;

fn size_of(ty: &Ty) -> f64 {
    match ty {
        Ty::String(Some(n)) => *n as f64,
        Ty::String(None) => unbounded_length(),
        Ty::List(_, Some(n)) => *n as f64,
        Ty::List(_, None) => unbounded_items(),
        // Dynamic values: their size cannot be known here; the API server
        // will estimate them from the schema it has.
        _ => 1.0,
    }
}

/// The static type of `e` for costing (the checker already accepted it).
fn ty_for_cost(e: &IdedExpr, scope: &[(String, Ty)]) -> Ty {
    let mut cx = Checker {
        vars: scope.to_vec(),
        old_self: false,
    };
    cx.check(e).unwrap_or(Ty::Dyn)
}

/// An estimate of the rule's worst-case cost, after cel-go's estimator:
/// one unit per node, strings traversed at a tenth of a unit per
/// character, comprehensions costing their body once per item of a
/// declared (or, unbounded, the largest possible) list.
fn estimate(e: &IdedExpr, scope: &[(String, Ty)]) -> f64 {
    match &e.expr {
        Expr::Literal(_) | Expr::Unspecified => 0.0,
        Expr::Ident(_) => 1.0,
        Expr::Select(s) => 1.0 + estimate(&s.operand, scope),
        Expr::List(l) => 10.0 + l.elements.iter().map(|x| estimate(x, scope)).sum::<f64>(),
        Expr::Map(m) => {
            30.0 + m
                .entries
                .iter()
                .map(|entry| match &entry.expr {
                    EntryExpr::MapEntry(me) => {
                        estimate(&me.key, scope) + estimate(&me.value, scope)
                    }
                    EntryExpr::StructField(f) => estimate(&f.value, scope),
                })
                .sum::<f64>()
        }
        Expr::Struct(_) => 40.0,
        Expr::Comprehension(c) => {
            let range_ty = ty_for_cost(&c.iter_range, scope);
            let items = match &range_ty {
                Ty::List(..) => size_of(&range_ty),
                _ => 1.0,
            };
            let mut inner = scope.to_vec();
            let item = match &range_ty {
                Ty::List(item, _) => (**item).clone(),
                Ty::Map(_) => Ty::String(None),
                _ => Ty::Dyn,
            };
            inner.push((c.iter_var.clone(), item));
            if let Some(v2) = &c.iter_var2 {
                inner.push((v2.clone(), Ty::Dyn));
            }
            // An accumulated list (`map`, `filter`) grows to at most one
            // item per item of the range.
            let accu = match ty_for_cost(&c.accu_init, &inner) {
                Ty::List(t, _) => Ty::List(t, Some(items as u64)),
                other => other,
            };
            inner.push((c.accu_var.clone(), accu));
            estimate(&c.iter_range, scope)
                + estimate(&c.accu_init, scope)
                + items * (estimate(&c.loop_cond, &inner) + estimate(&c.loop_step, &inner))
                + estimate(&c.result, &inner)
        }
        Expr::Call(call) => {
            let args: f64 = call.args.iter().map(|a| estimate(a, scope)).sum::<f64>()
                + call.target.as_deref().map_or(0.0, |t| estimate(t, scope));
            let traverse = |x: &IdedExpr| match ty_for_cost(x, scope) {
                t @ Ty::String(_) => (size_of(&t) * STRING_TRAVERSAL_FACTOR).ceil(),
                t @ Ty::List(..) => size_of(&t),
                _ => 1.0,
            };
            let own = match call.func_name.as_str() {
                "contains" | "startsWith" | "endsWith" => {
                    call.target.as_deref().map_or(1.0, traverse)
                }
                // A regular expression's cost grows with the string and the
                // pattern.
                "matches" => {
                    let s = call.target.as_deref().map_or(1.0, traverse);
                    let p = call.args.first().map_or(1.0, traverse);
                    s * p.max(1.0)
                }
                "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => {
                    call.args.first().map_or(1.0, traverse)
                }
                "@in" => call.args.get(1).map_or(1.0, traverse),
                "_+_" => call.args.iter().map(traverse).sum::<f64>().max(1.0),
                _ => 1.0,
            };
            args + own
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object() -> Ty {
        Ty::Object(
            vec![
                ("replicas".into(), Ty::Int),
                ("name".into(), Ty::String(Some(63))),
                (
                    "tags".into(),
                    Ty::List(Box::new(Ty::String(Some(20))), Some(8)),
                ),
                ("notes".into(), Ty::List(Box::new(Ty::String(None)), None)),
                ("labels".into(), Ty::Map(Box::new(Ty::String(None)))),
                ("spec".into(), Ty::Dyn),
            ],
            false,
        )
    }

    #[test]
    fn valid_rules_pass() {
        for rule in [
            "self.replicas > 3",
            "self.replicas <= 3 || self.name.startsWith('a')",
            "self.tags.all(t, t.size() < 20)",
            "self.tags.exists(t, t == 'x') && size(self.tags) <= 8",
            "has(self.spec) && self.spec.anything.goes > 1",
            "self.replicas >= oldSelf.replicas",
            "self.labels.all(k, k.startsWith('a')) && 'x' in self.labels",
            "self.tags.map(t, t + '!').size() == 8",
            "self.replicas > 1.5",
            "self.name.matches('^[a-z]+$')",
            "self.tags.filter(t, t != '').size() >= 0",
        ] {
            assert!(
                check_rule(rule, &object()).is_ok(),
                "{rule}: {:?}",
                check_rule(rule, &object())
            );
        }
        assert_eq!(
            check_rule("self.replicas >= oldSelf.replicas", &object()),
            Ok(true)
        );
        assert_eq!(check_rule("self.replicas > 1", &object()), Ok(false));
    }

    #[test]
    fn errors() {
        let err = |rule: &str| check_rule(rule, &object()).expect_err(rule);
        assert_eq!(err("self.replicaz > 3"), "undefined field 'replicaz'");
        assert_eq!(
            err("self.replicas > \"3\""),
            "found no matching overload for '_>_' applied to '(int, string)'"
        );
        assert_eq!(
            err("self.name + 1 == 'a1'"),
            "found no matching overload for '_+_' applied to '(string, int)'"
        );
        assert_eq!(
            err("self.replicas"),
            "the CEL rule must evaluate to a bool, not int"
        );
        assert!(err("self.replicas >").starts_with("the CEL rule does not parse: "));
        assert_eq!(err("other > 1"), "undeclared reference to 'other'");
        assert!(
            err("self.notes.all(n, n.matches('^a.*b$'))")
                .starts_with("estimated rule cost exceeds budget by factor of more than 100x")
        );
    }
}
