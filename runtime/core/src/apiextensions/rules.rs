//! `x-kubernetes-validations`: rules compiled once with the schema and
//! evaluated along the object (upstream `schema/cel/validation.go`).
//!
//! A transition rule (one reading `oldSelf`) runs only where an old value
//! is correlated, unless it sets `optionalOldSelf: true`: then it runs
//! everywhere, `oldSelf` being `optional.of(old)` or `optional.none()`.
//! Other rules do not run on values equal to their old value (ratcheting).
//! Each evaluation is charged first against the request's budget with the
//! static estimate over the actual values (`cost.rs`; see the parent
//! module's docs for how this approximates upstream's runtime costs).

use std::sync::{Arc, OnceLock};

use cel::common::types::{CelBool, CelList, CelString};
use regex::Regex;
use serde_json::Value;

use super::cost::{PER_CALL_LIMIT, RUNTIME_CEL_COST_BUDGET, ValueSizes, escape, estimate};
use super::schema::Node;
use crate::cel::to_cel;
use crate::validation::{ErrorList, FieldError, FieldPath};

/// The `reason` of a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    Invalid,
    Forbidden,
    Required,
    Duplicate,
}

/// One compiled rule.
#[derive(Clone, Debug)]
pub(crate) struct CompiledRule {
    pub(crate) rule: String,
    pub(crate) message: String,
    pub(crate) message_expression: Option<Result<Arc<cel::Program>, String>>,
    /// The source of `messageExpression`, as upstream quotes it in errors.
    pub(crate) message_expression_src: String,
    pub(crate) reason: Reason,
    pub(crate) field_path: Vec<String>,
    pub(crate) optional_old_self: bool,
    pub(crate) transition: bool,
    pub(crate) program: Result<Arc<cel::Program>, String>,
}

/// The CEL environment of CRD rules: the standard library, the strings
/// extension and the Kubernetes functions the rules we serve use.
pub(crate) fn env() -> Arc<cel::Env> {
    static ENV: OnceLock<Arc<cel::Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(new_env())).clone()
}

/// A new environment with what [`env`] has, for environments that add to
/// it (admission's adds the authorizer library).
pub(crate) fn new_env() -> cel::Env {
    let mut env = cel::Env::stdlib();
    // Registration of fixed, distinct overloads cannot fail; a failure
    // only leaves a function out (rules using it then fail to compile).
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_extension(kubernetes_library);
    env
}

fn is_ip(s: &CelString<'_>) -> CelBool {
    // Kubernetes' `isIP` takes no zone and no IPv4-mapped prefix forms that
    // Go's netip refuses; Rust's parser accepts the same canonical forms.
    CelBool::from(s.inner().parse::<std::net::IpAddr>().is_ok())
}

fn is_cidr(s: &CelString<'_>) -> CelBool {
    CelBool::from(parse_cidr(s.inner()))
}

pub(crate) fn parse_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    if bits.to_string() != s.split_once('/').map(|p| p.1).unwrap_or_default() {
        return false;
    }
    match ip.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => bits <= 32,
        Ok(std::net::IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

fn is_url(s: &CelString<'_>) -> CelBool {
    CelBool::from(super::formats::is_request_uri(s.inner()))
}

fn regex_find(
    s: &CelString<'_>,
    re: &CelString<'_>,
) -> Result<CelString<'static>, cel::ExecutionError> {
    let re = Regex::new(re.inner())
        .map_err(|e| cel::ExecutionError::function_error("find", e.to_string()))?;
    Ok(re
        .find(s.inner())
        .map(|m| m.as_str().to_string())
        .unwrap_or_default()
        .into())
}

fn regex_find_all(
    s: &CelString<'_>,
    re: &CelString<'_>,
) -> Result<CelList<'static>, cel::ExecutionError> {
    let re = Regex::new(re.inner())
        .map_err(|e| cel::ExecutionError::function_error("findAll", e.to_string()))?;
    let found: Vec<Box<dyn cel::common::value::Val>> = re
        .find_iter(s.inner())
        .map(|m| {
            Box::new(CelString::from(m.as_str().to_string())) as Box<dyn cel::common::value::Val>
        })
        .collect();
    Ok(CelList::from(found))
}

/// The Kubernetes CEL library functions we provide: `isIP`, `isCIDR`,
/// `isURL` and the regex `find` / `findAll`.
fn kubernetes_library(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    cel::add_overload!(env, fn is_ip: (CelString) -> CelBool, name = "isIP")?;
    cel::add_overload!(env, fn is_cidr: (CelString) -> CelBool, name = "isCIDR")?;
    cel::add_overload!(env, fn is_url: (CelString) -> CelBool, name = "isURL")?;
    cel::add_member_overload!(env, fn regex_find: (CelString, CelString) -> Result<CelString>, name = "find")?;
    cel::add_member_overload!(env, fn regex_find_all: (CelString, CelString) -> Result<CelList>, name = "findAll")?;
    Ok(())
}

fn mentions_old_self(rule: &str) -> bool {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\boldSelf\b").ok())
        .as_ref()
        .is_some_and(|re| re.is_match(rule))
}

fn compile(src: &str) -> Result<Arc<cel::Program>, String> {
    env().compile(src).map(Arc::new).map_err(|e| e.to_string())
}

/// Parses a rule's `fieldPath` (`.a.b`, `['a.b']`) into child names.
fn parse_field_path(p: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("['") {
            let end = r
                .find("']")
                .ok_or_else(|| format!("invalid field path: {p}"))?;
            out.push(r[..end].to_string());
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return Err(format!("invalid field path: {p}"));
            }
            out.push(r[..end].to_string());
            rest = &r[end..];
        } else {
            return Err(format!("invalid field path: {p}"));
        }
    }
    Ok(out)
}

impl CompiledRule {
    /// Parses and compiles one `x-kubernetes-validations` entry. A rule that
    /// does not compile is kept, and reported where it applies.
    pub(crate) fn parse(v: &Value, path: &str) -> Result<CompiledRule, String> {
        let rule = v
            .get("rule")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{path}.rule: Required value"))?
            .to_string();
        let reason = match v.get("reason").and_then(Value::as_str) {
            None | Some("FieldValueInvalid") => Reason::Invalid,
            Some("FieldValueForbidden") => Reason::Forbidden,
            Some("FieldValueRequired") => Reason::Required,
            Some("FieldValueDuplicate") => Reason::Duplicate,
            Some(other) => return Err(format!("{path}.reason: unsupported value {other:?}")),
        };
        let field_path = match v.get("fieldPath").and_then(Value::as_str) {
            Some(p) => parse_field_path(p).map_err(|e| format!("{path}.fieldPath: {e}"))?,
            None => Vec::new(),
        };
        let program = compile(&rule);
        // A rule is a transition rule when it reads `oldSelf` (upstream:
        // the checked expression's references); a rule that does not parse
        // falls back to the word.
        let transition = match &program {
            Ok(p) => p.references().has_variable("oldSelf"),
            Err(_) => mentions_old_self(&rule),
        };
        Ok(CompiledRule {
            transition,
            program,
            message: v
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            message_expression: v
                .get("messageExpression")
                .and_then(Value::as_str)
                .map(compile),
            message_expression_src: v
                .get("messageExpression")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            reason,
            field_path,
            optional_old_self: v
                .get("optionalOldSelf")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            rule,
        })
    }

    /// The rule, or its message, as upstream names it in errors.
    fn error_string(&self) -> &str {
        let m = self.message.trim();
        if m.is_empty() { self.rule.trim() } else { m }
    }

    /// The detail of a failed rule: the message expression's result, else
    /// the message, else `failed rule: <rule>`.
    fn detail(&self, ctx: &cel::Context) -> String {
        if let Some(Ok(p)) = &self.message_expression
            && let Ok(cel::Value::String(s)) = p.execute(ctx)
            && !s.trim().is_empty()
            && !s.contains('\n')
        {
            return s.trim().to_string();
        }
        if self.message.trim().is_empty() {
            format!("failed rule: {}", self.rule.trim())
        } else {
            self.message.trim().to_string()
        }
    }
}

/// The error of a failed rule, as Kubernetes 1.33 (the version this
/// server reports) gives it: the bad value is the schema's type
/// (`spec.listeners: Invalid value: "array": ...`). (Kubernetes 1.35
/// shows scalars' values instead.)
fn error_for(reason: Reason, path: &FieldPath, node: &Node, detail: String) -> FieldError {
    let shown = Value::String(node.type_.clone());
    match reason {
        Reason::Invalid => FieldError::invalid(path, shown, detail),
        Reason::Forbidden => FieldError::forbidden(path, detail),
        Reason::Required => FieldError::required(path, detail),
        Reason::Duplicate => FieldError::duplicate(path, shown),
    }
}

/// The path of a rule's `fieldPath` below `path`: a named property is a
/// child (`a.b`), a key of a map a key (`m[k]`).
fn rule_path(node: &Node, path: &FieldPath, segments: &[String]) -> FieldPath {
    let mut at = path.clone();
    let mut cur = Some(node);
    for seg in segments {
        match cur {
            Some(n) if n.properties.is_empty() && n.additional.schema().is_some() => {
                at = at.key(seg);
                cur = n.additional.schema();
            }
            Some(n) => {
                at = at.child(seg);
                cur = n.properties.get(seg);
            }
            None => at = at.child(seg),
        }
    }
    at
}

/// Runs a one-variable conversion program (`duration(v)`, `timestamp(v)`).
fn convert(program: &OnceLock<Option<cel::Program>>, src: &str, s: &str) -> Option<cel::Value> {
    let p = program.get_or_init(|| env().compile(src).ok()).as_ref()?;
    let mut ctx = cel::Context::with_env(env());
    ctx.add_variable_from_value("v", cel::Value::String(Arc::new(s.to_string())));
    p.execute(&ctx).ok()
}

/// The CEL value of `v` as Kubernetes types it from the schema: `number`s
/// are doubles, strings of `format` `duration` durations, `date` and
/// `date-time` timestamps, `byte` bytes; anything the schema does not
/// describe converts as plain JSON ([`to_cel`]). A value that does not parse
/// in its format stays a string.
fn typed(node: Option<&Node>, v: &Value) -> cel::Value {
    static DURATION: OnceLock<Option<cel::Program>> = OnceLock::new();
    static TIMESTAMP: OnceLock<Option<cel::Program>> = OnceLock::new();
    let Some(node) = node else {
        return to_cel(v);
    };
    match v {
        Value::Object(map) => {
            // As Kubernetes' unstructured CEL values: in an object with
            // properties, a null field is absent (`has()` is false).
            let is_object = !node.properties.is_empty();
            let m: std::collections::HashMap<cel::objects::Key, cel::Value> = map
                .iter()
                .filter(|(_, item)| !(is_object && item.is_null()))
                .map(|(k, item)| {
                    // Declared properties are seen under their CEL names
                    // (`namespace` as `__namespace__`, `a-b` as
                    // `a__dash__b`); map keys stay as they are.
                    if let Some(child) = node.properties.get(k) {
                        let name = escape(k).unwrap_or_else(|| k.clone());
                        (cel::objects::Key::from(name), typed(Some(child), item))
                    } else {
                        let child = node.additional.schema();
                        (cel::objects::Key::from(k.as_str()), typed(child, item))
                    }
                })
                .collect();
            cel::Value::Map(m.into())
        }
        Value::Array(items) => {
            let item_node = node.items.as_deref();
            cel::Value::List(Arc::new(
                items.iter().map(|i| typed(item_node, i)).collect(),
            ))
        }
        Value::Number(n) if node.type_ == "number" => {
            cel::Value::Float(n.as_f64().unwrap_or(f64::NAN))
        }
        Value::String(s) => {
            let converted = match node.format.as_deref() {
                Some("duration") => convert(&DURATION, "duration(v)", s),
                Some("date-time") => convert(&TIMESTAMP, "timestamp(v)", s),
                Some("date") => convert(&TIMESTAMP, "timestamp(v)", &format!("{s}T00:00:00Z")),
                Some("byte") => {
                    use base64::Engine;
                    base64::engine::general_purpose::STANDARD
                        .decode(s)
                        .ok()
                        .map(|b| cel::Value::Bytes(Arc::new(b)))
                }
                _ => None,
            };
            converted.unwrap_or_else(|| to_cel(v))
        }
        _ => to_cel(v),
    }
}

/// Whether `node` or any node below it has rules (upstream's
/// `hasXValidations`).
pub(crate) fn any(node: &Node) -> bool {
    !node.rules.is_empty()
        || node.properties.values().any(any)
        || node.additional.schema().is_some_and(any)
        || node.items.as_deref().is_some_and(any)
        || node.checks.all_of.iter().any(any)
}

/// Evaluates the rules of `node` on `value`, then those below it, within
/// one request's cost budget (upstream's `RuntimeCELCostBudget`).
/// `old` is the correlated old value (updates); the rules that are not
/// transition rules are skipped where the value is unchanged (ratcheting).
pub(crate) fn validate(
    node: &Node,
    value: &Value,
    old: Option<&Value>,
    path: &FieldPath,
    errs: &mut ErrorList,
) {
    let mut budget = RUNTIME_CEL_COST_BUDGET;
    validate_within(node, value, old, path, errs, &mut budget);
}

/// What evaluating `program` may cost on these values: the static estimate
/// with the sizes of the actual `self` and `oldSelf` (an upper bound of
/// what cel-go would count, see the module docs). An estimate that depends
/// on a size the estimator cannot know (the result of a function it does
/// not model, compared or iterated) is not charged: the actual data bounds
/// the actual cost, but not our estimate of it.
fn runtime_cost(program: &cel::Program, value: &Value, old: Option<&Value>) -> u64 {
    let sizes = ValueSizes {
        roots: std::iter::once(value).chain(old).collect(),
    };
    let cost = estimate(program.expression(), &sizes).max;
    if cost >= UNKNOWN_COST { 0 } else { cost }
}

/// Estimates at or above this come from unknown sizes (2^64 - 1 times a
/// cost factor), not from data that fits in a request.
const UNKNOWN_COST: u64 = 1 << 60;

/// [`validate`] with the budget left; a negative budget stops every rule
/// after it (upstream returns `-1`).
fn validate_within(
    node: &Node,
    value: &Value,
    old: Option<&Value>,
    path: &FieldPath,
    errs: &mut ErrorList,
    budget: &mut i64,
) {
    if value.is_null() || *budget < 0 {
        return;
    }
    let unchanged = old.is_some_and(|o| o == value);
    if !node.rules.is_empty() && *budget == 0 {
        errs.push(FieldError::invalid(
            path,
            node.type_.as_str(),
            OUT_OF_BUDGET,
        ));
        *budget = -1;
        return;
    }
    if !node.rules.is_empty() {
        let self_value = typed(Some(node), value);
        let old_value = old.map(|o| typed(Some(node), o));
        let mut ctx = cel::Context::with_env(env());
        ctx.add_variable_from_value("self", self_value.clone());
        if let Some(o) = &old_value {
            ctx.add_variable_from_value("oldSelf", o.clone());
        }
        // Rules with `optionalOldSelf: true` see `oldSelf` as an optional:
        // `optional.of(old)`, or `optional.none()` without an old value
        // (upstream's optionalOldSelfActivation).
        let optional_ctx = node.rules.iter().any(|r| r.optional_old_self).then(|| {
            let mut c = cel::Context::with_env(env());
            c.add_variable_from_value("self", self_value.clone());
            let opt = match &old_value {
                Some(o) => cel::objects::OptionalValue::of(o.clone()),
                None => cel::objects::OptionalValue::none(),
            };
            c.add_variable_from_value("oldSelf", cel::Value::Opaque(Arc::new(opt)));
            c
        });
        for rule in &node.rules {
            // Transition rules run only with an old value, unless they take
            // `oldSelf` as an optional.
            if rule.transition && old.is_none() && !rule.optional_old_self {
                continue;
            }
            if !rule.transition && unchanged {
                continue;
            }
            let rule_ctx = match &optional_ctx {
                Some(c) if rule.optional_old_self => c,
                _ => &ctx,
            };
            let at = rule_path(node, path, &rule.field_path);
            let program = match &rule.program {
                Ok(p) => p,
                Err(e) => {
                    errs.push(FieldError::invalid(
                        path,
                        node.type_.as_str(),
                        format!("rule compile error: {e}"),
                    ));
                    continue;
                }
            };
            // Charged before evaluating: a rule that would exceed the
            // per-call limit is stopped (cel-go stops it once its cost
            // passes the limit, having spent just over it).
            let cost = runtime_cost(program, value, old);
            let spent = if cost > PER_CALL_LIMIT {
                PER_CALL_LIMIT + 1
            } else {
                cost
            };
            if i64::try_from(spent).map_or(true, |s| s > *budget) {
                errs.push(FieldError::invalid(
                    path,
                    node.type_.as_str(),
                    OUT_OF_BUDGET,
                ));
                *budget = -1;
                return;
            }
            if cost > PER_CALL_LIMIT {
                errs.push(FieldError::invalid(
                    path,
                    node.type_.as_str(),
                    format!(
                        "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                        rule.error_string()
                    ),
                ));
                *budget = -1;
                return;
            }
            *budget -= spent as i64;
            match program.execute(rule_ctx) {
                Ok(cel::Value::Bool(true)) => {}
                Ok(cel::Value::Bool(false)) => {
                    // The message expression is charged as the rule is
                    // (upstream's evalMessageExpression).
                    if let Some(Ok(message)) = &rule.message_expression {
                        let cost = runtime_cost(message, value, old);
                        let spent = if cost > PER_CALL_LIMIT {
                            PER_CALL_LIMIT + 1
                        } else {
                            cost
                        };
                        let stop = if i64::try_from(spent).map_or(true, |s| s > *budget) {
                            Some("messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".to_string())
                        } else if cost > PER_CALL_LIMIT {
                            Some(format!(
                                "no further validation rules will be run due to call cost exceeds limit for messageExpression: {:?}",
                                rule.message_expression_src
                            ))
                        } else {
                            None
                        };
                        if let Some(detail) = stop {
                            errs.push(FieldError::invalid(&at, node.type_.as_str(), detail));
                            *budget = -1;
                            return;
                        }
                        *budget -= spent as i64;
                    }
                    // The message expression runs with the plain `oldSelf`, as
                    // upstream evaluates it with the rule's non-optional
                    // activation.
                    errs.push(error_for(rule.reason, &at, node, rule.detail(&ctx)));
                }
                Ok(other) => errs.push(FieldError::invalid(
                    path,
                    node.type_.as_str(),
                    format!(
                        "rule did not evaluate to a bool ({other:?}) evaluating rule: {}",
                        rule.error_string()
                    ),
                )),
                Err(e) => {
                    let e = e.to_string();
                    let detail = if e.starts_with("no such overload") {
                        format!(
                            "'{e}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                            rule.error_string()
                        )
                    } else {
                        format!("{e} evaluating rule: {}", rule.error_string())
                    };
                    errs.push(FieldError::invalid(path, node.type_.as_str(), detail));
                }
            }
        }
    }
    // Rules under allOf apply to the same value (upstream's AllOfValidators).
    for sub in &node.checks.all_of {
        validate_within(sub, value, old, path, errs, budget);
        if *budget < 0 {
            return;
        }
    }
    match value {
        Value::Object(map) => {
            let old_map = old.and_then(Value::as_object);
            for (k, v) in map {
                let old_v = old_map.and_then(|o| o.get(k));
                if let Some(child) = node.properties.get(k) {
                    validate_within(child, v, old_v, &path.child(k), errs, budget);
                } else if let Some(child) = node.additional.schema() {
                    validate_within(child, v, old_v, &path.key(k), errs, budget);
                }
                if *budget < 0 {
                    return;
                }
            }
        }
        Value::Array(items) => {
            let Some(item_node) = node.items.as_deref() else {
                return;
            };
            let old_items = old.and_then(Value::as_array);
            for (i, v) in items.iter().enumerate() {
                let old_v = old_items.and_then(|o| correlate(node, v, o));
                validate_within(item_node, v, old_v, &path.index(i), errs, budget);
                if *budget < 0 {
                    return;
                }
            }
        }
        _ => {}
    }
}

/// Upstream's error once the request's budget is spent.
const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// The old item an item of a list corresponds to: by key for
/// `x-kubernetes-list-type: map`, by value for `set`; atomic lists have none.
pub(crate) fn correlate<'a>(node: &Node, item: &Value, old: &'a [Value]) -> Option<&'a Value> {
    match node.list_type.as_deref() {
        Some("set") => old.iter().find(|o| *o == item),
        Some("map") if !node.list_map_keys.is_empty() => {
            let item = item.as_object()?;
            old.iter().find(|o| {
                o.as_object()
                    .is_some_and(|o| node.list_map_keys.iter().all(|k| o.get(k) == item.get(k)))
            })
        }
        _ => None,
    }
}
