//! CEL validation rules (`x-kubernetes-validations`), evaluated with the
//! `cel` crate.
//!
//! A [`Rule`] is declared with `#[validate(cel(rule = "...", message = "..."))]`
//! on a field or a struct. `self` is the value's JSON (objects as maps,
//! integers as `int`); a rule that mentions `oldSelf` is a *transition rule*:
//! it only runs on update, with `oldSelf` bound to the old value. A failed
//! rule is reported as Kubernetes does:
//! `spec: Invalid value: "object": <message>` (the bad value is the
//! schema type), with `failed rule: <rule>` when there is no message.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::validation::{ErrorList, FieldError, FieldPath};

/// Why a rule could not give a verdict.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// The rule does not compile.
    #[error("compilation failed: {0}")]
    Compile(String),
    /// The rule evaluated to something other than a bool.
    #[error("rule did not evaluate to a bool: {0}")]
    NotBool(String),
    /// Evaluation failed (a missing field, a type error, ...).
    #[error("{0}")]
    Execution(String),
}

/// One CEL rule, compiled on first use.
pub struct Rule {
    rule: &'static str,
    message: &'static str,
    program: OnceLock<Result<cel::Program, EvalError>>,
}

fn env() -> Arc<cel::Env> {
    static ENV: OnceLock<Arc<cel::Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(cel::Env::stdlib())).clone()
}

/// The JSON type name Kubernetes shows as the bad value of a failed rule.
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    }
}

/// Converts JSON to a CEL value: integers become `int` (or `uint` beyond
/// `i64`), other numbers `double`.
pub fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                cel::Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                cel::Value::UInt(u)
            } else {
                cel::Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => {
            let m: HashMap<cel::objects::Key, cel::Value> = map
                .iter()
                .map(|(k, v)| (cel::objects::Key::from(k.as_str()), to_cel(v)))
                .collect();
            cel::Value::Map(m.into())
        }
    }
}

impl Rule {
    /// A rule with its message (`""` for the default
    /// `failed rule: <rule>`).
    pub const fn new(rule: &'static str, message: &'static str) -> Self {
        Rule {
            rule,
            message,
            program: OnceLock::new(),
        }
    }

    /// The rule's source.
    pub fn rule(&self) -> &'static str {
        self.rule
    }

    /// The rule's message.
    pub fn message(&self) -> &'static str {
        self.message
    }

    /// True for a transition rule (one that reads `oldSelf`).
    pub fn is_transition(&self) -> bool {
        self.rule.contains("oldSelf")
    }

    /// The `x-kubernetes-validations` entry of this rule.
    pub fn to_schema(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("rule".into(), Value::String(self.rule.into()));
        if !self.message.is_empty() {
            m.insert("message".into(), Value::String(self.message.into()));
        }
        Value::Object(m)
    }

    fn detail(&self) -> String {
        if self.message.is_empty() {
            format!("failed rule: {}", self.rule)
        } else {
            self.message.to_string()
        }
    }

    /// Evaluates the rule on `value` (and `old` for transition rules),
    /// returning `Ok(true)` when it holds.
    pub fn evaluate(&self, value: &Value, old: Option<&Value>) -> Result<bool, EvalError> {
        let program = self
            .program
            .get_or_init(|| {
                env()
                    .compile(self.rule)
                    .map_err(|e| EvalError::Compile(e.to_string()))
            })
            .as_ref()
            .map_err(Clone::clone)?;
        let mut ctx = cel::Context::with_env(env());
        ctx.add_variable_from_value("self", to_cel(value));
        if let Some(old) = old {
            ctx.add_variable_from_value("oldSelf", to_cel(old));
        }
        match program.execute(&ctx) {
            Ok(cel::Value::Bool(b)) => Ok(b),
            Ok(other) => Err(EvalError::NotBool(format!("{other:?}"))),
            Err(e) => Err(EvalError::Execution(e.to_string())),
        }
    }

    /// Checks the rule on create: transition rules are skipped.
    pub fn check(&self, errs: &mut ErrorList, path: &FieldPath, value: &Value) {
        if !self.is_transition() {
            self.report(errs, path, value, None);
        }
    }

    /// Checks a transition rule on update (other rules were checked by
    /// [`Rule::check`] through `validate`).
    pub fn check_update(&self, errs: &mut ErrorList, path: &FieldPath, value: &Value, old: &Value) {
        if self.is_transition() {
            self.report(errs, path, value, Some(old));
        }
    }

    fn report(&self, errs: &mut ErrorList, path: &FieldPath, value: &Value, old: Option<&Value>) {
        match self.evaluate(value, old) {
            Ok(true) => {}
            Ok(false) => errs.push(FieldError::invalid(path, type_name(value), self.detail())),
            Err(e) => errs.push(FieldError::invalid(
                path,
                type_name(value),
                format!("{}: rule evaluation error: {e}", self.detail()),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rules_evaluate_on_json() {
        let r = Rule::new("self.replicas <= self.max", "replicas must not exceed max");
        let p = FieldPath::new("spec");
        let mut errs = ErrorList::default();
        r.check(&mut errs, &p, &json!({"replicas": 3, "max": 5}));
        assert!(errs.is_empty());
        r.check(&mut errs, &p, &json!({"replicas": 6, "max": 5}));
        assert_eq!(
            errs.0[0].to_string(),
            "spec: Invalid value: \"object\": replicas must not exceed max"
        );
        assert_eq!(errs.0[0].type_.reason(), "FieldValueInvalid");
    }

    #[test]
    fn default_message_and_strings() {
        let r = Rule::new("self.startsWith('db-')", "");
        let mut errs = ErrorList::default();
        r.check(
            &mut errs,
            &FieldPath::new("spec").child("name"),
            &json!("x"),
        );
        assert_eq!(
            errs.0[0].to_string(),
            "spec.name: Invalid value: \"string\": failed rule: self.startsWith('db-')"
        );
    }

    #[test]
    fn has_and_macros() {
        let r = Rule::new("!has(self.a) || self.items.all(i, i > 0)", "");
        assert_eq!(r.evaluate(&json!({"items": [1, 2]}), None), Ok(true));
        assert_eq!(
            r.evaluate(&json!({"a": 1, "items": [1, 0]}), None),
            Ok(false)
        );
    }

    #[test]
    fn transition_rules_run_only_on_update() {
        let r = Rule::new("self >= oldSelf", "may not decrease");
        assert!(r.is_transition());
        let p = FieldPath::new("spec").child("size");
        let mut errs = ErrorList::default();
        r.check(&mut errs, &p, &json!(1));
        assert!(errs.is_empty());
        r.check_update(&mut errs, &p, &json!(1), &json!(2));
        assert_eq!(
            errs.0[0].to_string(),
            "spec.size: Invalid value: \"integer\": may not decrease"
        );
    }

    #[test]
    fn bad_rules_are_reported_not_panicking() {
        let r = Rule::new("self.(", "");
        let mut errs = ErrorList::default();
        r.check(&mut errs, &FieldPath::new("spec"), &json!({}));
        assert_eq!(errs.len(), 1);
        assert!(
            errs.0[0].detail.contains("compilation failed"),
            "{}",
            errs.0[0].detail
        );
    }

    #[test]
    fn schema_entry() {
        assert_eq!(
            Rule::new("self > 0", "").to_schema(),
            json!({"rule": "self > 0"})
        );
        assert_eq!(
            Rule::new("self > 0", "m").to_schema(),
            json!({"rule": "self > 0", "message": "m"})
        );
    }
}
