//! A static type checker for CEL expressions, after cel-go's checker: what
//! kube-controller-manager's ValidatingAdmissionPolicy status controller
//! runs to fill `status.typeChecking` (see
//! `builtin::admissionregistration_v1::type_checking`).
//!
//! It works on the AST of the `cel` crate's parser and infers a [`Type`]
//! for every node: literals, identifiers, field selection, indexing, the
//! operators, the standard functions and macros (`has`, `all`, `exists`,
//! `exists_one`, `map`, `filter`), the strings extension and the
//! Kubernetes libraries (lists, regex, URLs, quantities, IPs, the
//! authorizer). Errors carry cel-go's messages (`undefined field 'foo'`,
//! `found no matching overload for '_==_' applied to '(int, string)'`,
//! `undeclared reference to 'x' (in container '')`) at cel-go's positions,
//! and [`Issues::display`] formats them as cel-go's `ToDisplayString`
//! (`ERROR: <input>:1:7: …`, the source line, dots and a caret).
//!
//! The checker is deliberately one-sided: whatever it does not model (an
//! unknown function, an opaque library type, an object compared with a
//! map, anything involving `null`) is `dyn`, which type-checks against
//! everything. A missed warning is acceptable; a warning upstream would
//! not give is not.
//!
//! Object types built from OpenAPI schemas ([`schema::from_openapi`]) are
//! named `<Kind>` at the root, `<parent>.<property>` for nested objects,
//! `<parent>.@idx` for list items and `<parent>.@elem` for map values —
//! upstream's scheme without its per-process nanosecond suffix, so that
//! messages naming object types are stable.

pub mod schema;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, SourceInfo, operators as op};

/// A CEL type, as far as the checker knows it.
#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    /// Any value: assignable to and from everything.
    Dyn,
    /// The type of an expression that already has an error: assignable to
    /// everything, so it causes no further errors.
    Error,
    /// `null_type`.
    Null,
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `uint`.
    Uint,
    /// `double`.
    Double,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `google.protobuf.Duration`.
    Duration,
    /// `google.protobuf.Timestamp`.
    Timestamp,
    /// `list(T)`.
    List(Box<Type>),
    /// `map(K, V)`.
    Map(Box<Type>, Box<Type>),
    /// An object with declared fields (a schema's object, the admission
    /// request, ...).
    Object(Arc<ObjectType>),
    /// A library's opaque type (`kubernetes.authorization.Authorizer`,
    /// `kubernetes.Quantity`, ...).
    Opaque(&'static str),
    /// `optional_type(T)`.
    Optional(Box<Type>),
    /// A type value (`int`, `string`, ... used as values).
    TypeValue,
}

/// An object type: its name and its fields (by their CEL names).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ObjectType {
    /// The type's name, as messages print it.
    pub name: String,
    /// The declared fields.
    pub fields: BTreeMap<String, Type>,
}

impl Type {
    /// An object type named `name` with `fields`.
    pub fn object(name: impl Into<String>, fields: Vec<(&str, Type)>) -> Type {
        Type::Object(Arc::new(ObjectType {
            name: name.into(),
            fields: fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        }))
    }

    /// `list(item)`.
    pub fn list(item: Type) -> Type {
        Type::List(Box::new(item))
    }

    /// `map(key, value)`.
    pub fn map(key: Type, value: Type) -> Type {
        Type::Map(Box::new(key), Box::new(value))
    }

    /// `dyn` or the error type: anything goes.
    fn is_open(&self) -> bool {
        matches!(self, Type::Dyn | Type::Error)
    }

    fn is_number(&self) -> bool {
        matches!(self, Type::Int | Type::Uint | Type::Double)
    }

    /// A type the checker knows completely and that has no fields: only
    /// these take part in overload errors of the ordering operators and
    /// receiver functions.
    fn is_scalar(&self) -> bool {
        matches!(
            self,
            Type::Bool
                | Type::Int
                | Type::Uint
                | Type::Double
                | Type::String
                | Type::Bytes
                | Type::Duration
                | Type::Timestamp
        )
    }

    /// The type a policy variable of this type has (`variables.<name>`):
    /// upstream's `convertCelTypeToDeclType` keeps primitives, lists and
    /// maps, and makes anything else `dyn`.
    pub fn as_variable(&self) -> Type {
        match self {
            Type::Null
            | Type::Bool
            | Type::Int
            | Type::Uint
            | Type::Double
            | Type::String
            | Type::Bytes
            | Type::Duration
            | Type::Timestamp => self.clone(),
            Type::List(t) => Type::list(t.as_variable()),
            Type::Map(k, v) => Type::map(k.as_variable(), v.as_variable()),
            _ => Type::Dyn,
        }
    }
}

impl fmt::Display for Type {
    /// cel-go's `FormatCELType`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Dyn => f.write_str("dyn"),
            Type::Error => f.write_str("*error*"),
            Type::Null => f.write_str("null_type"),
            Type::Bool => f.write_str("bool"),
            Type::Int => f.write_str("int"),
            Type::Uint => f.write_str("uint"),
            Type::Double => f.write_str("double"),
            Type::String => f.write_str("string"),
            Type::Bytes => f.write_str("bytes"),
            Type::Duration => f.write_str("google.protobuf.Duration"),
            Type::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Type::List(t) => write!(f, "list({t})"),
            Type::Map(k, v) => write!(f, "map({k}, {v})"),
            Type::Object(o) => f.write_str(&o.name),
            Type::Opaque(name) => f.write_str(name),
            Type::Optional(t) => write!(f, "optional_type({t})"),
            Type::TypeValue => f.write_str("type"),
        }
    }
}

/// Whether values of `a` and `b` can be the two arguments of an overload
/// taking `(A, A)` (equality, `?:`, list items). Unknown, `null` and object
/// types are always compatible (the checker does not model their
/// subtleties).
fn compatible(a: &Type, b: &Type) -> bool {
    match (a, b) {
        (x, y) if x.is_open() || y.is_open() => true,
        (Type::Null, _) | (_, Type::Null) => true,
        (Type::List(x), Type::List(y)) => compatible(x, y),
        (Type::Map(k1, v1), Type::Map(k2, v2)) => compatible(k1, k2) && compatible(v1, v2),
        (Type::Object(_) | Type::Map(..), Type::Object(_) | Type::Map(..)) => true,
        (Type::Opaque(x), Type::Opaque(y)) => x == y,
        (Type::Optional(x), Type::Optional(y)) => compatible(x, y),
        (Type::Opaque(_), _) | (_, Type::Opaque(_)) => true,
        (x, y) => std::mem::discriminant(x) == std::mem::discriminant(y),
    }
}

/// The more specific of two compatible types (`dyn` when they differ).
fn join(a: &Type, b: &Type) -> Type {
    match (a, b) {
        (x, y) if x.is_open() => y.clone(),
        (x, y) if y.is_open() => x.clone(),
        (x, y) if x == y => x.clone(),
        (Type::List(x), Type::List(y)) => Type::list(join(x, y)),
        (Type::Map(k1, v1), Type::Map(k2, v2)) => Type::map(join(k1, k2), join(v1, v2)),
        _ => Type::Dyn,
    }
}

/// The declared variables an expression is checked against.
#[derive(Clone, Debug, Default)]
pub struct Env {
    vars: Vec<(String, Type)>,
}

impl Env {
    /// An environment without variables.
    pub fn new() -> Self {
        Env::default()
    }

    /// Declares `name` with type `ty` (a later declaration of the same
    /// name wins).
    pub fn declare(&mut self, name: impl Into<String>, ty: Type) -> &mut Self {
        self.vars.push((name.into(), ty));
        self
    }

    fn lookup(&self, name: &str) -> Option<&Type> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
    }
}

/// One checker error: where (a byte offset into the source) and what.
#[derive(Clone, Debug, PartialEq)]
pub struct Issue {
    /// Byte offset of the error's location in the source.
    pub offset: usize,
    /// cel-go's message.
    pub message: String,
}

/// The outcome of checking one expression.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The expression's type (`dyn` when it does not parse).
    pub ty: Type,
    /// The errors found, in the order found.
    pub issues: Issues,
}

/// The errors of one expression, with its source for display.
#[derive(Clone, Debug, Default)]
pub struct Issues {
    source: String,
    /// The errors.
    pub errors: Vec<Issue>,
}

/// cel-go shows at most this many errors.
const MAX_DISPLAYED_ERRORS: usize = 100;
/// cel-go leaves out the snippet of a line longer than this (bytes).
const MAX_SNIPPET_BYTES: usize = 16384;

impl Issues {
    /// No errors.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// cel-go's `Errors.ToDisplayString()`: the errors sorted by position,
    /// each as `ERROR: <input>:line:col: message` with the source line and
    /// a caret under the column, joined by newlines.
    pub fn display(&self) -> String {
        let mut located: Vec<(usize, usize, &Issue)> = self
            .errors
            .iter()
            .map(|e| {
                let (line, col) = self.line_col(e.offset);
                (line, col, e)
            })
            .collect();
        located.sort_by_key(|(line, col, _)| (*line, *col));
        let mut out: Vec<String> = located
            .iter()
            .take(MAX_DISPLAYED_ERRORS)
            .map(|(line, col, e)| self.display_one(*line, *col, &e.message))
            .collect();
        if located.len() > MAX_DISPLAYED_ERRORS {
            out.push(format!(
                "{} more errors were truncated",
                located.len() - MAX_DISPLAYED_ERRORS
            ));
        }
        out.join("\n")
    }

    /// 1-based line and 0-based column (in code points) of a byte offset.
    fn line_col(&self, offset: usize) -> (usize, usize) {
        let mut line = 1;
        let mut line_start = 0;
        for (i, c) in self.source.char_indices() {
            if i >= offset {
                break;
            }
            if c == '\n' {
                line += 1;
                line_start = i + 1;
            }
        }
        let end = offset.min(self.source.len());
        let col = self
            .source
            .get(line_start..end)
            .map_or(0, |s| s.chars().count());
        (line, col)
    }

    fn display_one(&self, line: usize, col: usize, message: &str) -> String {
        let mut out = format!("ERROR: <input>:{line}:{}: {message}", col + 1);
        if let Some(snippet) = self.source.split('\n').nth(line - 1)
            && snippet.len() <= MAX_SNIPPET_BYTES
        {
            let snippet = snippet.replace('\t', " ");
            out.push_str("\n | ");
            out.push_str(&snippet);
            out.push_str("\n | ");
            let mut chars = snippet.chars();
            for _ in 0..col {
                match chars.next() {
                    Some(c) if c.len_utf8() > 1 => out.push('\u{FF0E}'),
                    _ => out.push('.'),
                }
            }
            match chars.next() {
                Some(c) if c.len_utf8() > 1 => out.push('\u{FF3E}'),
                _ => out.push('^'),
            }
        }
        out
    }
}

/// Parses `source` with `parser` and checks it against `env`. An
/// expression that does not parse gives no issues (API validation refuses
/// those) and type `dyn`.
pub fn check(parser: cel::parser::Parser, source: &str, env: &Env) -> Checked {
    let Ok((ast, info)) = parser.parse_with_source_info(source) else {
        return Checked {
            ty: Type::Dyn,
            issues: Issues {
                source: source.to_string(),
                errors: Vec::new(),
            },
        };
    };
    let mut cx = Checker {
        env,
        locals: Vec::new(),
        info: &info,
        errors: Vec::new(),
    };
    let ty = cx.check(&ast);
    Checked {
        ty,
        issues: Issues {
            source: source.to_string(),
            errors: cx.errors,
        },
    }
}

/// Type names usable as values (`int(x)` is a call; `int` alone a type).
const TYPE_NAMES: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
    "google.protobuf.Duration",
    "google.protobuf.Timestamp",
];

/// The authorizer library's types.
const AUTHORIZER: &str = "kubernetes.authorization.Authorizer";
const PATH_CHECK: &str = "kubernetes.authorization.PathCheck";
const GROUP_CHECK: &str = "kubernetes.authorization.GroupCheck";
const RESOURCE_CHECK: &str = "kubernetes.authorization.ResourceCheck";
const DECISION: &str = "kubernetes.authorization.Decision";

/// The type of the `authorizer` variable.
pub fn authorizer_type() -> Type {
    Type::Opaque(AUTHORIZER)
}

/// The authorizer library's member functions: name, receiver, argument
/// count, result.
const AUTHZ_FUNCTIONS: &[(&str, &str, usize, &str)] = &[
    ("path", AUTHORIZER, 1, PATH_CHECK),
    ("group", AUTHORIZER, 1, GROUP_CHECK),
    ("serviceAccount", AUTHORIZER, 2, AUTHORIZER),
    ("resource", GROUP_CHECK, 1, RESOURCE_CHECK),
    ("subresource", RESOURCE_CHECK, 1, RESOURCE_CHECK),
    ("namespace", RESOURCE_CHECK, 1, RESOURCE_CHECK),
    ("name", RESOURCE_CHECK, 1, RESOURCE_CHECK),
    ("fieldSelector", RESOURCE_CHECK, 1, RESOURCE_CHECK),
    ("labelSelector", RESOURCE_CHECK, 1, RESOURCE_CHECK),
    ("check", RESOURCE_CHECK, 1, DECISION),
    ("check", PATH_CHECK, 1, DECISION),
    ("allowed", DECISION, 0, "bool"),
    ("errored", DECISION, 0, "bool"),
    ("reason", DECISION, 0, "string"),
    ("error", DECISION, 0, "string"),
];

struct Checker<'a> {
    env: &'a Env,
    /// Comprehension variables, innermost last.
    locals: Vec<(String, Type)>,
    info: &'a SourceInfo,
    errors: Vec<Issue>,
}

impl Checker<'_> {
    fn error(&mut self, id: u64, message: String) -> Type {
        let offset = self
            .info
            .offset_for(id)
            .map_or(0, |(start, _)| start as usize);
        self.errors.push(Issue { offset, message });
        Type::Error
    }

    fn no_overload(&mut self, id: u64, func: &str, args: &[&Type]) -> Type {
        let names: Vec<String> = args.iter().map(ToString::to_string).collect();
        self.error(
            id,
            format!(
                "found no matching overload for '{func}' applied to '({})'",
                names.join(", ")
            ),
        )
    }

    fn no_receiver_overload(&mut self, id: u64, func: &str, target: &Type, args: &[&Type]) -> Type {
        let names: Vec<String> = args.iter().map(ToString::to_string).collect();
        self.error(
            id,
            format!(
                "found no matching overload for '{func}' applied to '{target}.({})'",
                names.join(", ")
            ),
        )
    }

    fn lookup(&self, name: &str) -> Option<Type> {
        self.locals
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
            .or_else(|| self.env.lookup(name).cloned())
    }

    /// Whether `e` spells a qualified name whose root is not a variable:
    /// a namespace of functions (`optional.none()`, `strings.quote(x)`).
    fn namespace_of(&self, e: &IdedExpr) -> Option<String> {
        let mut parts = Vec::new();
        let mut cur = e;
        loop {
            match &cur.expr {
                Expr::Ident(name) => {
                    if self.lookup(name).is_some() {
                        return None;
                    }
                    parts.push(name.as_str());
                    parts.reverse();
                    return Some(parts.join("."));
                }
                Expr::Select(s) if !s.test => {
                    parts.push(s.field.as_str());
                    cur = &s.operand;
                }
                _ => return None,
            }
        }
    }

    fn check(&mut self, e: &IdedExpr) -> Type {
        match &e.expr {
            Expr::Unspecified | Expr::Struct(_) => Type::Dyn,
            Expr::Literal(l) => match l {
                LiteralValue::Boolean(_) => Type::Bool,
                LiteralValue::Bytes(_) => Type::Bytes,
                LiteralValue::Double(_) => Type::Double,
                LiteralValue::Int(_) => Type::Int,
                LiteralValue::Null => Type::Null,
                LiteralValue::String(_) => Type::String,
                LiteralValue::UInt(_) => Type::Uint,
            },
            Expr::Ident(name) => match self.lookup(name) {
                Some(t) => t,
                None if TYPE_NAMES.contains(&name.as_str()) => Type::TypeValue,
                None => self.error(
                    e.id,
                    format!("undeclared reference to '{name}' (in container '')"),
                ),
            },
            Expr::Select(s) => {
                let operand = self.check(&s.operand);
                let field = self.select(e.id, &operand, &s.field);
                if s.test { Type::Bool } else { field }
            }
            Expr::List(l) => {
                let mut item: Option<Type> = None;
                for el in &l.elements {
                    let t = self.check(el);
                    item = Some(match item {
                        Some(prev) if compatible(&prev, &t) => join(&prev, &t),
                        Some(_) => Type::Dyn,
                        None => t,
                    });
                }
                if !l.optional_indices.is_empty() {
                    return Type::list(Type::Dyn);
                }
                Type::list(item.unwrap_or(Type::Dyn))
            }
            Expr::Map(m) => {
                let mut key: Option<Type> = None;
                let mut value: Option<Type> = None;
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        let k = self.check(&entry.key);
                        let v = self.check(&entry.value);
                        let v = if entry.optional { Type::Dyn } else { v };
                        key = Some(match key {
                            Some(prev) if compatible(&prev, &k) => join(&prev, &k),
                            Some(_) => Type::Dyn,
                            None => k,
                        });
                        value = Some(match value {
                            Some(prev) if compatible(&prev, &v) => join(&prev, &v),
                            Some(_) => Type::Dyn,
                            None => v,
                        });
                    }
                }
                Type::map(key.unwrap_or(Type::Dyn), value.unwrap_or(Type::Dyn))
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Call(call) => {
                self.call(e.id, &call.func_name, call.target.as_deref(), &call.args)
            }
        }
    }

    /// The type of field `field` of a value of type `operand`.
    fn select(&mut self, id: u64, operand: &Type, field: &str) -> Type {
        match operand {
            // A reserved word's field is declared escaped (`__namespace__`)
            // and found by either name (upstream's DeclTypeProvider
            // recognizes keywords as field names since Kubernetes 1.32).
            Type::Object(o) => match o.fields.get(field).or_else(|| {
                schema::is_reserved(field)
                    .then(|| o.fields.get(&format!("__{field}__")))
                    .flatten()
            }) {
                Some(t) => t.clone(),
                None => self.error(id, format!("undefined field '{field}'")),
            },
            Type::Map(_, v) => (**v).clone(),
            Type::Bool
            | Type::Int
            | Type::Uint
            | Type::Double
            | Type::String
            | Type::Bytes
            | Type::Null
            | Type::List(_) => self.error(
                id,
                format!("type '{operand}' does not support field selection"),
            ),
            _ => Type::Dyn,
        }
    }

    fn comprehension(&mut self, c: &cel::common::ast::ComprehensionExpr) -> Type {
        let range = self.check(&c.iter_range);
        let (first, second) = match &range {
            Type::List(item) => (Type::Int, (**item).clone()),
            Type::Map(k, v) => ((**k).clone(), (**v).clone()),
            t if t.is_scalar() || matches!(t, Type::Null) => {
                self.error(
                    c.iter_range.id,
                    format!(
                        "expression of type '{t}' cannot be range of a comprehension (must be list, map, or dynamic)"
                    ),
                );
                (Type::Error, Type::Error)
            }
            _ => (Type::Dyn, Type::Dyn),
        };
        let depth = self.locals.len();
        match &c.iter_var2 {
            Some(v2) => {
                self.locals.push((c.iter_var.clone(), first));
                self.locals.push((v2.clone(), second));
            }
            None => {
                let item = match &range {
                    Type::List(item) => (**item).clone(),
                    _ => first,
                };
                self.locals.push((c.iter_var.clone(), item));
            }
        }
        let init = self.check(&c.accu_init);
        // An accumulator that starts as an empty list (`map`, `filter`)
        // takes its item type from the step.
        let empty_list = matches!(&c.accu_init.expr, Expr::List(l) if l.elements.is_empty());
        self.locals.push((c.accu_var.clone(), init.clone()));
        self.check(&c.loop_cond);
        let step = self.check(&c.loop_step);
        if empty_list && let Type::List(_) = step {
            self.locals.pop();
            self.locals.push((c.accu_var.clone(), step));
        }
        let result = self.check(&c.result);
        self.locals.truncate(depth);
        result
    }

    fn call(&mut self, id: u64, func: &str, target: Option<&IdedExpr>, args: &[IdedExpr]) -> Type {
        if let Some(t) = target
            && let Some(namespace) = self.namespace_of(t)
        {
            let types: Vec<Type> = args.iter().map(|a| self.check(a)).collect();
            return namespaced_function(&format!("{namespace}.{func}"), &types);
        }
        let target = target.map(|t| self.check(t));
        let types: Vec<Type> = args.iter().map(|a| self.check(a)).collect();
        let any_error = types.contains(&Type::Error) || target.as_ref() == Some(&Type::Error);
        match target {
            None => self.global(id, func, &types, any_error),
            Some(target) => self.member(id, func, &target, &types, any_error),
        }
    }

    fn global(&mut self, id: u64, func: &str, t: &[Type], any_error: bool) -> Type {
        let open = t.iter().any(Type::is_open);
        let refs: Vec<&Type> = t.iter().collect();
        match (func, t) {
            (op::LOGICAL_AND | op::LOGICAL_OR, [a, b]) => {
                if !any_error
                    && [a, b]
                        .iter()
                        .any(|x| !matches!(x, Type::Bool) && !x.is_open())
                {
                    return self.no_overload(id, func, &refs);
                }
                Type::Bool
            }
            (op::LOGICAL_NOT | op::NOT_STRICTLY_FALSE, [a]) => {
                if !any_error && !matches!(a, Type::Bool) && !a.is_open() {
                    return self.no_overload(id, func, &refs);
                }
                Type::Bool
            }
            (op::CONDITIONAL, [c, a, b]) => {
                if any_error {
                    return join(a, b);
                }
                if (!matches!(c, Type::Bool) && !c.is_open()) || !compatible(a, b) {
                    return self.no_overload(id, func, &refs);
                }
                join(a, b)
            }
            (op::EQUALS | op::NOT_EQUALS, [a, b]) => {
                if !any_error && !compatible(a, b) {
                    return self.no_overload(id, func, &refs);
                }
                Type::Bool
            }
            (op::LESS | op::LESS_EQUALS | op::GREATER | op::GREATER_EQUALS, [a, b]) => {
                let ok = open
                    || (a.is_number() && b.is_number())
                    || (a.is_scalar() && a == b)
                    || !a.is_scalar()
                    || !b.is_scalar();
                if !ok && !any_error {
                    return self.no_overload(id, func, &refs);
                }
                Type::Bool
            }
            (op::ADD, [a, b]) => {
                if open {
                    return Type::Dyn;
                }
                match (a, b) {
                    (Type::List(x), Type::List(y)) => {
                        if compatible(x, y) {
                            Type::list(join(x, y))
                        } else {
                            Type::list(Type::Dyn)
                        }
                    }
                    (Type::Timestamp, Type::Duration) | (Type::Duration, Type::Timestamp) => {
                        Type::Timestamp
                    }
                    (x, y)
                        if x == y
                            && matches!(
                                x,
                                Type::Int
                                    | Type::Uint
                                    | Type::Double
                                    | Type::String
                                    | Type::Bytes
                                    | Type::Duration
                            ) =>
                    {
                        x.clone()
                    }
                    (x, y) if x.is_scalar() && y.is_scalar() => self.no_overload(id, func, &refs),
                    _ => Type::Dyn,
                }
            }
            (op::SUBSTRACT, [a, b]) => {
                if open {
                    return Type::Dyn;
                }
                match (a, b) {
                    (Type::Timestamp, Type::Timestamp) => Type::Duration,
                    (Type::Timestamp, Type::Duration) => Type::Timestamp,
                    (Type::Duration, Type::Duration) => Type::Duration,
                    (x, y) if x == y && x.is_number() => x.clone(),
                    (x, y) if x.is_scalar() && y.is_scalar() => self.no_overload(id, func, &refs),
                    _ => Type::Dyn,
                }
            }
            (op::MULTIPLY | op::DIVIDE | op::MODULO, [a, b]) => {
                if open {
                    return Type::Dyn;
                }
                let numeric = if func == op::MODULO {
                    matches!(a, Type::Int | Type::Uint)
                } else {
                    a.is_number()
                };
                if a == b && numeric {
                    a.clone()
                } else if a.is_scalar() && b.is_scalar() {
                    self.no_overload(id, func, &refs)
                } else {
                    Type::Dyn
                }
            }
            (op::NEGATE, [a]) => match a {
                Type::Int | Type::Double => a.clone(),
                x if x.is_scalar() => self.no_overload(id, func, &refs),
                _ => Type::Dyn,
            },
            (op::INDEX, [c, i]) => self.index(id, func, c, i, any_error),
            (op::OPT_INDEX, [c, i]) => match self.index(id, func, c, i, any_error) {
                Type::Error => Type::Error,
                _ => Type::Optional(Box::new(Type::Dyn)),
            },
            // `a.?f`: the field of an optional value; not modelled.
            (op::OPT_SELECT, [_, _]) => Type::Optional(Box::new(Type::Dyn)),
            (op::IN, [x, c]) => {
                let ok = match c {
                    Type::List(item) => compatible(item, x),
                    Type::Map(k, _) => compatible(k, x),
                    t if t.is_scalar() => false,
                    _ => true,
                };
                if !ok && !any_error {
                    return self.no_overload(id, func, &refs);
                }
                Type::Bool
            }
            ("size", [a]) => self.size(id, None, a, any_error),
            ("int", [_]) => Type::Int,
            ("uint", [_]) => Type::Uint,
            ("double", [_]) => Type::Double,
            ("string", [_]) => Type::String,
            ("bytes", [_]) => Type::Bytes,
            ("bool", [_]) => Type::Bool,
            ("duration", [_]) => Type::Duration,
            ("timestamp", [_]) => Type::Timestamp,
            ("type", [_]) => Type::TypeValue,
            ("dyn", [_]) => Type::Dyn,
            ("matches", [_, _]) => Type::Bool,
            ("isURL" | "isQuantity" | "isIP" | "isCIDR" | "isSemver", _) => Type::Bool,
            ("url", [_]) => Type::Opaque("kubernetes.URL"),
            ("quantity", [_]) => Type::Opaque("kubernetes.Quantity"),
            ("ip", [_]) => Type::Opaque("net.IP"),
            ("cidr", [_]) => Type::Opaque("net.CIDR"),
            ("semver", _) => Type::Opaque("kubernetes.Semver"),
            _ => Type::Dyn,
        }
    }

    fn index(&mut self, id: u64, func: &str, c: &Type, i: &Type, any_error: bool) -> Type {
        let refs = [c, i];
        match c {
            Type::List(item) => {
                if matches!(i, Type::Int) || i.is_open() || !i.is_scalar() {
                    (**item).clone()
                } else if any_error {
                    Type::Error
                } else {
                    self.no_overload(id, func, &refs)
                }
            }
            Type::Map(k, v) => {
                if compatible(k, i) || any_error {
                    (**v).clone()
                } else {
                    self.no_overload(id, func, &refs)
                }
            }
            t if t.is_scalar() && !any_error => self.no_overload(id, func, &refs),
            _ => Type::Dyn,
        }
    }

    fn size(&mut self, id: u64, target: Option<&Type>, a: &Type, any_error: bool) -> Type {
        let ok = !matches!(
            a,
            Type::Bool
                | Type::Int
                | Type::Uint
                | Type::Double
                | Type::Null
                | Type::Duration
                | Type::Timestamp
        );
        if ok || any_error {
            return Type::Int;
        }
        match target {
            Some(t) => self.no_receiver_overload(id, "size", t, &[]),
            None => self.no_overload(id, "size", &[a]),
        }
    }

    fn member(&mut self, id: u64, func: &str, target: &Type, t: &[Type], any_error: bool) -> Type {
        if let Type::Opaque(name) = target
            && let Some(result) = self.authz_member(id, func, name, t, any_error)
        {
            return result;
        }
        let refs: Vec<&Type> = t.iter().collect();
        let string_like = |x: &Type| matches!(x, Type::String) || x.is_open();
        match (func, t) {
            ("size", []) => self.size(id, Some(target), target, any_error),
            ("contains" | "startsWith" | "endsWith" | "matches", [arg]) => {
                let bad_target = target.is_scalar() && !matches!(target, Type::String);
                let bad_arg = arg.is_scalar() && !matches!(arg, Type::String);
                if (bad_target || (matches!(target, Type::String) && bad_arg)) && !any_error {
                    return self.no_receiver_overload(id, func, target, &refs);
                }
                Type::Bool
            }
            ("charAt" | "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring", _)
                if string_like(target) =>
            {
                Type::String
            }
            ("reverse", []) if matches!(target, Type::String) => Type::String,
            ("format", [_]) if matches!(target, Type::String) => Type::String,
            ("split", _) if string_like(target) => Type::list(Type::String),
            ("find", [_]) if string_like(target) => Type::String,
            ("findAll", _) if string_like(target) => Type::list(Type::String),
            ("indexOf" | "lastIndexOf", _)
                if matches!(target, Type::String | Type::List(_)) || target.is_open() =>
            {
                Type::Int
            }
            ("join", _) if matches!(target, Type::List(_)) => Type::String,
            ("isSorted", []) if matches!(target, Type::List(_)) => Type::Bool,
            ("sum" | "min" | "max", []) => match target {
                Type::List(item) => (**item).clone(),
                _ => Type::Dyn,
            },
            (
                "getFullYear" | "getMonth" | "getDate" | "getDayOfMonth" | "getDayOfWeek"
                | "getDayOfYear" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds",
                _,
            ) if matches!(target, Type::Timestamp | Type::Duration) => Type::Int,
            ("hasValue", []) if matches!(target, Type::Optional(_)) => Type::Bool,
            ("value", []) => match target {
                Type::Optional(inner) => (**inner).clone(),
                _ => Type::Dyn,
            },
            ("orValue", [x]) => match target {
                Type::Optional(inner) if compatible(inner, x) => join(inner, x),
                _ => Type::Dyn,
            },
            ("or", [_]) if matches!(target, Type::Optional(_)) => target.clone(),
            ("isInteger" | "isGreaterThan" | "isLessThan", _)
                if *target == Type::Opaque("kubernetes.Quantity") =>
            {
                Type::Bool
            }
            ("asInteger" | "sign" | "compareTo", _)
                if *target == Type::Opaque("kubernetes.Quantity") =>
            {
                Type::Int
            }
            ("asApproximateFloat", []) if *target == Type::Opaque("kubernetes.Quantity") => {
                Type::Double
            }
            ("add" | "sub", [_]) if *target == Type::Opaque("kubernetes.Quantity") => {
                target.clone()
            }
            ("getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath", [])
                if *target == Type::Opaque("kubernetes.URL") =>
            {
                Type::String
            }
            ("getQuery", []) if *target == Type::Opaque("kubernetes.URL") => {
                Type::map(Type::String, Type::list(Type::String))
            }
            _ => Type::Dyn,
        }
    }

    /// A member call on one of the authorizer library's types: `None` when
    /// `func` is none of the library's functions (then nothing is known).
    fn authz_member(
        &mut self,
        id: u64,
        func: &str,
        receiver: &'static str,
        t: &[Type],
        any_error: bool,
    ) -> Option<Type> {
        if !AUTHZ_FUNCTIONS.iter().any(|(name, ..)| *name == func) {
            return None;
        }
        let found = AUTHZ_FUNCTIONS
            .iter()
            .find(|(name, recv, arity, _)| *name == func && *recv == receiver && *arity == t.len());
        Some(match found {
            Some((.., "bool")) => Type::Bool,
            Some((.., "string")) => Type::String,
            Some((.., result)) => Type::Opaque(result),
            None if any_error => Type::Error,
            None if AUTHZ_FUNCTIONS
                .iter()
                .any(|(name, recv, ..)| *name == func && *recv == receiver) =>
            {
                // The right receiver with another number of arguments:
                // not modelled closely enough to report.
                Type::Dyn
            }
            None => {
                let refs: Vec<&Type> = t.iter().collect();
                self.no_receiver_overload(id, func, &Type::Opaque(receiver), &refs)
            }
        })
    }
}

/// The result of a function called through a namespace
/// (`optional.of(x)`, `strings.quote(s)`, ...).
fn namespaced_function(name: &str, args: &[Type]) -> Type {
    match (name, args) {
        ("optional.of" | "optional.ofNonZeroValue", [x]) => Type::Optional(Box::new(x.clone())),
        ("optional.none", []) => Type::Optional(Box::new(Type::Dyn)),
        ("strings.quote", [_]) => Type::String,
        _ => Type::Dyn,
    }
}
