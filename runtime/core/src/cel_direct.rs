//! A common subset of CEL evaluated straight over JSON, without the
//! interpreter.
//!
//! Most admission expressions read a few fields of the request's object
//! and compare them: `has(object.spec.paused)`,
//! `object.metadata.name.size() < 64`, `object.spec.replicas <=
//! params.maxReplicas`, `a && !b`. The interpreter answers each after
//! resolving names and overloads and wrapping every value it meets; a
//! [`Program`] compiled from such an expression walks the JSON and answers
//! in a fraction of that time (the policies of a create spent most of
//! their time there).
//!
//! A program answers only where it is sure to give the interpreter's
//! answer. An expression outside the subset does not compile
//! ([`Program::compile`] gives `None`); an evaluation that would fail, or
//! that meets a value the subset leaves to the interpreter, gives `None`,
//! and the caller runs the interpreter, which gives the value or the error
//! itself (evaluation has no side effects, so running both is safe). The
//! subset:
//! - the variables named when compiling, bound to JSON when evaluating
//!   (read as [`crate::cel_json::val`] and [`crate::cel::to_cel`] read
//!   JSON: a number is an `int` when it fits, else a `uint`, else a
//!   `double`);
//! - selecting a field of a JSON object, and `has()` of one;
//! - `size()` of a string (in code points), a list or a map;
//! - `<`, `<=`, `>`, `>=`, `==` and `!=` between two ints, two uints or two
//!   strings; `==` and `!=` also between two bools and two nulls;
//! - `x in list` for a string, int or bool `x` and a list (JSON, or a list
//!   literal) of values of its type, up to the first equal one; `key in
//!   map` for a string `key`;
//! - `!`, `&&` and `||` (with the interpreter's short circuits: `false &&
//!   x` is `false` whatever `x` is), and `c ? a : b`;
//! - literals: null, bool, int, uint and string.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::ast::{Expr, IdedExpr, LiteralValue, operators};
use serde_json::Value;

/// An expression of the subset, compiled.
#[derive(Debug)]
pub struct Program {
    root: Node,
}

impl Program {
    /// `program` for evaluation over JSON bound to `variables` (by
    /// position: [`Program::evaluate`] takes the values in this order), or
    /// `None` when it is outside the subset or names other variables.
    pub fn compile(program: &cel::Program, variables: &[&str]) -> Option<Self> {
        Some(Program {
            root: Node::compile(program.expression(), variables)?,
        })
    }

    /// The expression's value over `values` (one per variable named when
    /// compiling), or `None` when the interpreter has to answer: the
    /// evaluation fails, or its value is a list, a map or a double.
    pub fn evaluate(&self, values: &[&Value]) -> Option<cel::Value> {
        Some(match self.root.evaluate(values)? {
            V::Null => cel::Value::Null,
            V::Bool(b) => cel::Value::Bool(b),
            V::Int(i) => cel::Value::Int(i),
            V::UInt(u) => cel::Value::UInt(u),
            V::Str(s) => cel::Value::String(Arc::new(s.to_string())),
            V::Double | V::Json(_) => return None,
        })
    }
}

/// A node of a compiled expression.
#[derive(Debug)]
enum Node {
    /// The variable at this position.
    Variable(usize),
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Str(Box<str>),
    /// `operand.field`.
    Select(Box<Node>, Box<str>),
    /// `has(operand.field)`.
    Has(Box<Node>, Box<str>),
    /// `size(operand)`, `operand.size()`.
    Size(Box<Node>),
    Not(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    /// `condition ? then : otherwise`.
    Conditional(Box<[Node; 3]>),
    Compare(Comparison, Box<Node>, Box<Node>),
    /// `element in container`.
    In(Box<Node>, Box<Node>),
    /// A list literal (only as the container of `in`).
    List(Vec<Node>),
}

/// A comparison operator.
#[derive(Clone, Copy, Debug)]
enum Comparison {
    Less,
    LessEquals,
    Greater,
    GreaterEquals,
    Equals,
    NotEquals,
}

/// A value met while evaluating: scalars as themselves (strings borrowed),
/// lists and maps as their JSON.
#[derive(Clone, Copy, Debug)]
enum V<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    /// A double (left to the interpreter).
    Double,
    Str(&'a str),
    /// A JSON array or object.
    Json(&'a Value),
}

impl<'a> V<'a> {
    fn of(json: &'a Value) -> Self {
        match json {
            Value::Null => V::Null,
            Value::Bool(b) => V::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => V::Int(i),
                (None, Some(u)) => V::UInt(u),
                (None, None) => V::Double,
            },
            Value::String(s) => V::Str(s),
            Value::Array(_) | Value::Object(_) => V::Json(json),
        }
    }
}

impl Node {
    fn compile(expr: &IdedExpr, variables: &[&str]) -> Option<Node> {
        let boxed = |e: &IdedExpr| Node::compile(e, variables).map(Box::new);
        Some(match &expr.expr {
            Expr::Ident(name) => Node::Variable(variables.iter().position(|v| v == name)?),
            Expr::Literal(literal) => match literal {
                LiteralValue::Null => Node::Null,
                LiteralValue::Boolean(b) => Node::Bool(*b.inner()),
                LiteralValue::Int(i) => Node::Int(*i.inner()),
                LiteralValue::UInt(u) => Node::UInt(*u.inner()),
                LiteralValue::String(s) => Node::Str(s.inner().into()),
                LiteralValue::Double(_) | LiteralValue::Bytes(_) => return None,
            },
            Expr::List(list) if list.optional_indices.is_empty() => Node::List(
                list.elements
                    .iter()
                    .map(|e| Node::compile(e, variables))
                    .collect::<Option<_>>()?,
            ),
            Expr::Select(select) => {
                let operand = boxed(&select.operand)?;
                let field = select.field.as_str().into();
                if select.test {
                    Node::Has(operand, field)
                } else {
                    Node::Select(operand, field)
                }
            }
            Expr::Call(call) => {
                let name = call.func_name.as_str();
                match (call.target.as_deref(), call.args.as_slice()) {
                    (Some(operand), []) | (None, [operand]) if name == "size" => {
                        Node::Size(boxed(operand)?)
                    }
                    (None, [operand]) if name == operators::LOGICAL_NOT => {
                        Node::Not(boxed(operand)?)
                    }
                    (None, [a, b]) if name == operators::LOGICAL_AND => {
                        Node::And(boxed(a)?, boxed(b)?)
                    }
                    (None, [a, b]) if name == operators::LOGICAL_OR => {
                        Node::Or(boxed(a)?, boxed(b)?)
                    }
                    (None, [c, a, b]) if name == operators::CONDITIONAL => {
                        Node::Conditional(Box::new([
                            Node::compile(c, variables)?,
                            Node::compile(a, variables)?,
                            Node::compile(b, variables)?,
                        ]))
                    }
                    (None, [a, b]) if name == operators::IN => Node::In(boxed(a)?, boxed(b)?),
                    (None, [a, b]) => {
                        let comparison = match name {
                            operators::LESS => Comparison::Less,
                            operators::LESS_EQUALS => Comparison::LessEquals,
                            operators::GREATER => Comparison::Greater,
                            operators::GREATER_EQUALS => Comparison::GreaterEquals,
                            operators::EQUALS => Comparison::Equals,
                            operators::NOT_EQUALS => Comparison::NotEquals,
                            _ => return None,
                        };
                        Node::Compare(comparison, boxed(a)?, boxed(b)?)
                    }
                    _ => return None,
                }
            }
            _ => return None,
        })
    }

    fn evaluate<'a>(&'a self, values: &[&'a Value]) -> Option<V<'a>> {
        Some(match self {
            Node::Variable(i) => V::of(values.get(*i)?),
            Node::Null => V::Null,
            Node::Bool(b) => V::Bool(*b),
            Node::Int(i) => V::Int(*i),
            Node::UInt(u) => V::UInt(*u),
            Node::Str(s) => V::Str(s),
            Node::Select(operand, field) => match operand.evaluate(values)? {
                V::Json(Value::Object(map)) => V::of(map.get(&**field)?),
                _ => return None,
            },
            Node::Has(operand, field) => match operand.evaluate(values)? {
                V::Json(Value::Object(map)) => V::Bool(map.contains_key(&**field)),
                _ => return None,
            },
            Node::Size(operand) => {
                let size = match operand.evaluate(values)? {
                    V::Str(s) => s.chars().count(),
                    V::Json(Value::Array(items)) => items.len(),
                    V::Json(Value::Object(map)) => map.len(),
                    _ => return None,
                };
                V::Int(i64::try_from(size).ok()?)
            }
            Node::Not(operand) => match operand.evaluate(values)? {
                V::Bool(b) => V::Bool(!b),
                _ => return None,
            },
            Node::And(a, b) => logical(a, b, values, false)?,
            Node::Or(a, b) => logical(a, b, values, true)?,
            Node::Conditional(nodes) => {
                let [condition, then, otherwise] = &**nodes;
                match condition.evaluate(values)? {
                    V::Bool(true) => then.evaluate(values)?,
                    V::Bool(false) => otherwise.evaluate(values)?,
                    _ => return None,
                }
            }
            Node::Compare(comparison, a, b) => {
                let (a, b) = (a.evaluate(values)?, b.evaluate(values)?);
                let ordering = match (a, b) {
                    (V::Int(a), V::Int(b)) => a.cmp(&b),
                    (V::UInt(a), V::UInt(b)) => a.cmp(&b),
                    (V::Str(a), V::Str(b)) => a.cmp(b),
                    (V::Bool(a), V::Bool(b)) if comparison.is_equality() => a.cmp(&b),
                    (V::Null, V::Null) if comparison.is_equality() => Ordering::Equal,
                    _ => return None,
                };
                V::Bool(comparison.holds(ordering))
            }
            Node::List(_) => return None,
            Node::In(element, container) => {
                let element = element.evaluate(values)?;
                if !matches!(element, V::Str(_) | V::Int(_) | V::Bool(_)) {
                    return None;
                }
                // Whether `item` equals the element; `None` for a value of
                // another type, where the interpreter's equality decides.
                let equals = |item: V<'_>| match (element, item) {
                    (V::Str(a), V::Str(b)) => Some(a == b),
                    (V::Int(a), V::Int(b)) => Some(a == b),
                    (V::Bool(a), V::Bool(b)) => Some(a == b),
                    _ => None,
                };
                if let Node::List(items) = &**container {
                    for item in items {
                        if equals(item.evaluate(values)?)? {
                            return Some(V::Bool(true));
                        }
                    }
                    return Some(V::Bool(false));
                }
                match (element, container.evaluate(values)?) {
                    (V::Str(key), V::Json(Value::Object(map))) => V::Bool(map.contains_key(key)),
                    (_, V::Json(Value::Array(items))) => {
                        for item in items {
                            if equals(V::of(item))? {
                                return Some(V::Bool(true));
                            }
                        }
                        V::Bool(false)
                    }
                    _ => return None,
                }
            }
        })
    }
}

/// The interpreter's `&&` (`decisive` false) and `||` (`decisive` true):
/// a left side equal to `decisive` decides; otherwise the right side
/// decides when it equals `decisive`, or when the left side is the other
/// bool and the right side a bool; anything else is an error (which the
/// interpreter words).
fn logical<'a>(a: &'a Node, b: &'a Node, values: &[&'a Value], decisive: bool) -> Option<V<'a>> {
    let left = a.evaluate(values);
    if let Some(V::Bool(l)) = left
        && l == decisive
    {
        return Some(V::Bool(decisive));
    }
    match (left, b.evaluate(values)?) {
        (Some(V::Bool(_)), V::Bool(r)) => Some(V::Bool(r)),
        (_, V::Bool(r)) if r == decisive => Some(V::Bool(r)),
        _ => None,
    }
}

impl Comparison {
    fn is_equality(self) -> bool {
        matches!(self, Comparison::Equals | Comparison::NotEquals)
    }

    fn holds(self, ordering: Ordering) -> bool {
        match self {
            Comparison::Less => ordering == Ordering::Less,
            Comparison::LessEquals => ordering != Ordering::Greater,
            Comparison::Greater => ordering == Ordering::Greater,
            Comparison::GreaterEquals => ordering != Ordering::Less,
            Comparison::Equals => ordering == Ordering::Equal,
            Comparison::NotEquals => ordering != Ordering::Equal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const VARIABLES: [&str; 2] = ["object", "params"];

    fn object() -> Value {
        json!({
            "apiVersion": "wardle.example.com/v1beta1",
            "kind": "Flunder",
            "metadata": {
                "name": "héllo-world",
                "namespace": "default",
                "labels": {"team": "a", "tier": ""},
                "annotations": {},
                "generation": 1,
            },
            "spec": {
                "replicas": 3,
                "big": 18446744073709551615u64,
                "ratio": 0.5,
                "paused": false,
                "nothing": null,
                "items": ["a", "b"],
                "nested": {"deep": {"x": 1}},
            }
        })
    }

    fn params() -> Value {
        json!({"maxReplicas": 5, "name": "héllo-world", "big": 18446744073709551615u64})
    }

    /// The interpreter's answer, over the variables bound as the policies
    /// bind them.
    fn interpreted(program: &cel::Program, object: &Value, params: &Value) -> Option<cel::Value> {
        let mut ctx = cel::Context::with_env(crate::cel_authorizer::admission_env());
        ctx.add_variable_as_val("object", crate::cel_json::val(object));
        ctx.add_variable_from_value("params", crate::cel::to_cel(params));
        program.execute(&ctx).ok()
    }

    /// Compiles `source` for both, and checks that the direct program,
    /// where it answers, answers as the interpreter; returns whether it
    /// compiled and whether it answered.
    fn check(source: &str, object: &Value, params: &Value) -> (bool, bool) {
        let program = crate::cel_authorizer::admission_env()
            .compile(source)
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        let expected = interpreted(&program, object, params);
        let Some(direct) = Program::compile(&program, &VARIABLES) else {
            return (false, false);
        };
        let got = direct.evaluate(&[object, params]);
        if let Some(got) = &got {
            assert_eq!(Some(got), expected.as_ref(), "{source}");
        }
        (true, got.is_some())
    }

    #[test]
    fn the_subset_answers_as_the_interpreter() {
        let (object, params) = (object(), params());
        // Each of these compiles and answers directly.
        for source in [
            "object.metadata.name.size() < 200 && !has(object.spec.flunderReference)",
            "size(object.metadata.name) == 11",
            "object.metadata.name.size() <= 11",
            "object.metadata.name.size() > 11",
            "object.metadata.name.size() >= 12",
            "object.spec.replicas <= params.maxReplicas",
            "object.spec.replicas != 3",
            "object.metadata.name == params.name",
            "object.metadata.name < 'i'",
            "'a' > object.metadata.labels.team",
            "object.metadata.labels.team == 'a' || object.metadata.labels.team == 'b'",
            "has(object.metadata.labels) && object.metadata.labels.tier == ''",
            "has(object.spec.nothing)",
            "object.spec.nothing == null",
            "object.spec.paused == false",
            "!object.spec.paused",
            "object.spec.paused ? 1 : 2",
            "has(object.spec.paused) ? object.metadata.name : 'x'",
            "object.spec.items.size() == 2 && object.spec.nested.size() == 1",
            "object.metadata.annotations.size() == 0",
            "object.spec.big == params.big",
            "object.spec.big > 1u",
            "object.spec.nested.deep.x == 1",
            "'a' in object.spec.items",
            "'c' in object.spec.items",
            "'team' in object.metadata.labels",
            "'owner' in object.metadata.labels",
            "'maxReplicas' in params",
            "object.metadata.labels.team in ['a', 'b']",
            "object.spec.replicas in [1, 2, 3]",
            "object.spec.paused in [true]",
            "1 in []",
            // The first equal element decides, whatever follows it.
            "'a' in ['a', 1]",
            "true",
            "null == null",
            // A false left side decides, whatever the right side is.
            "false && object.missing",
            "object.spec.replicas > 10 && object.spec.missing > 1",
            "true || object.missing",
            // The right side decides when it is false (for `&&`) or true
            // (for `||`), even when the left side fails.
            "object.missing && false",
            "object.missing || true",
            "object.spec.replicas && false",
        ] {
            assert_eq!(check(source, &object, &params), (true, true), "{source}");
        }
    }

    #[test]
    fn failures_and_other_values_are_left_to_the_interpreter() {
        let (object, params) = (object(), params());
        // These compile, and the interpreter answers them (with a value or
        // an error) when the direct program does not.
        for source in [
            "object.missing",
            "object.spec.missing == 1",
            "has(object.metadata.name.x)",
            "has(object.spec.items.x)",
            "object.spec.nothing.x",
            "object.spec.items",
            "object.spec.ratio",
            "object.spec.ratio < 1",
            "object.spec.replicas < 1u",
            "object.spec.replicas == 'a'",
            "object.spec.replicas == 3u",
            "object.spec.paused < true",
            "object.spec.items == object.spec.items",
            "['a'] == ['a']",
            "[1, 2]",
            "!object.spec.replicas",
            "object.spec.replicas ? 1 : 2",
            "object.spec.replicas.size()",
            "true && object.missing",
            "false || object.missing",
            "object.missing && true",
            "object.missing || false",
            "object.missing && object.missing",
            "true && 1",
            "'b' in ['a', 1, 'b']",
            "1 in object.metadata.labels",
            "object.spec.replicas in ['3']",
            "object.spec.big in [1]",
            "object.spec.items in object.spec.items",
            "'a' in object.metadata.name",
        ] {
            assert_eq!(check(source, &object, &params), (true, false), "{source}");
        }
        // These are outside the subset (or name other variables).
        for source in [
            "object.spec.replicas + 1 > 2",
            "object.metadata.name.startsWith('h')",
            "object.spec.items.all(i, i.size() == 1)",
            "object.spec.items[0] == 'a'",
            "object.?spec.orValue(1) == 1",
            "object.spec.ratio < 1.0",
            "b'a' == b'a'",
            "request.operation == 'CREATE'",
            "variables.x",
            "int(object.spec.replicas) == 3",
        ] {
            assert_eq!(check(source, &object, &params), (false, false), "{source}");
        }
    }

    /// Expressions built at random from the subset's parts (and a few
    /// outside it), over the same object: wherever the direct program
    /// answers, it answers as the interpreter.
    #[test]
    fn random_expressions_answer_as_the_interpreter() {
        let (object, params) = (object(), params());
        let atoms = [
            "object.metadata.name",
            "object.metadata.labels.team",
            "object.metadata.labels.tier",
            "object.metadata.labels",
            "object.metadata.missing",
            "object.spec.replicas",
            "object.spec.big",
            "object.spec.ratio",
            "object.spec.paused",
            "object.spec.nothing",
            "object.spec.items",
            "['a', 'b']",
            "[3, 'a']",
            "params.maxReplicas",
            "params.name",
            "params.big",
            "params",
            "has(object.spec.paused)",
            "has(object.metadata.missing)",
            "has(object.metadata.name.x)",
            "object.metadata.name.size()",
            "size(object.spec.items)",
            "object.spec.nested.size()",
            "null",
            "true",
            "false",
            "0",
            "3",
            "-1",
            "11",
            "1u",
            "18446744073709551615u",
            "'a'",
            "''",
            "'héllo-world'",
        ];
        let binary = ["&&", "||", "<", "<=", ">", ">=", "==", "!=", "in"];
        // A small linear congruential generator: the same cases each run.
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: usize| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            usize::try_from(seed >> 33).unwrap_or(0) % n
        };
        fn build(
            depth: u32,
            next: &mut dyn FnMut(usize) -> usize,
            atoms: &[&str],
            binary: &[&str],
        ) -> String {
            if depth == 0 || next(3) == 0 {
                return atoms[next(atoms.len())].to_string();
            }
            let shape = next(5);
            let mut sub = || build(depth - 1, next, atoms, binary);
            match shape {
                0 => format!("!({})", sub()),
                1 => format!("({}) ? ({}) : ({})", sub(), sub(), sub()),
                _ => {
                    let (a, b) = (sub(), sub());
                    let operator = binary[next(binary.len())];
                    format!("({a}) {operator} ({b})")
                }
            }
        }
        let (mut compiled, mut answered) = (0, 0);
        for _ in 0..3000 {
            let source = build(3, &mut next, &atoms, &binary);
            let (c, a) = check(&source, &object, &params);
            compiled += usize::from(c);
            answered += usize::from(a);
        }
        // The generator reaches both sides of the subset.
        assert!(compiled > 1000 && answered > 300, "{compiled} {answered}");
    }

    #[test]
    fn a_missing_variable_is_left_to_the_interpreter() {
        let program = crate::cel_authorizer::admission_env()
            .compile("params.x == 1")
            .expect("compiles");
        let direct = Program::compile(&program, &VARIABLES).expect("in the subset");
        assert_eq!(direct.evaluate(&[&json!({})]), None);
        assert_eq!(
            direct.evaluate(&[&json!({}), &json!({"x": 1})]),
            Some(cel::Value::Bool(true))
        );
    }
}
