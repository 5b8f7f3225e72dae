//! The `ValidatingAdmissionPolicy` plugin: requests matched by a
//! `validatingadmissionpolicies` policy and one of its
//! `validatingadmissionpolicybindings` are checked with the policy's CEL
//! expressions, as the generic apiserver's
//! `admission/plugin/policy/validating` dispatcher does.
//!
//! - **Policies and bindings** are read like the webhook configurations
//!   (an informer-style snapshot through the plugin [`Context`]'s lookup,
//!   checked when older than [`REFRESH`] and listed again when the
//!   lookup's revision of the policies or bindings moved); expressions are
//!   compiled when a policy's resource version is first seen.
//! - **Matching**: the policy's `matchConstraints` then the binding's
//!   `matchResources` (namespace and object selectors, `excludeResourceRules`
//!   first, then `resourceRules` with `resourceNames` and, for `matchPolicy:
//!   Equivalent`, the kind's other served versions); the configuration
//!   kinds themselves are exempt.
//! - **Params**: the policy's `paramKind` is mapped to a served resource
//!   ([`super::Lookup::resource_for_kind`]); the binding's `paramRef` names
//!   one object (its namespace defaults to the request's for namespaced
//!   params) or selects any number, each evaluated;
//!   `parameterNotFoundAction: Deny` denies when there are none.
//! - **Evaluation** (per binding and param): `matchConditions`, then the
//!   `variables` (in order, each seeing the earlier ones as
//!   `variables.<name>`), the `validations` and `auditAnnotations`, over
//!   `object`, `oldObject`, `request`, `params`, `namespaceObject`,
//!   `variables` and `authorizer` (with `authorizer.requestResource`, see
//!   [`apiforge_core::cel_authorizer`]).
//! - **Actions**: `Deny` fails the request with the first denial, `Warn`
//!   adds a warning, `Audit` the `validation_failure` audit annotation;
//!   `failurePolicy: Ignore` drops evaluation and configuration errors.

use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};

use super::matching::{self, Conditions, Hit, Matched, Target};
use super::{Attributes, Context, Error, Operation, Plugin, async_trait};
use apiforge_core::builtin::admissionregistration_v1::{
    MatchResources, ParamKind, ParamRef, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
};
use apiforge_core::cel_direct;
use apiforge_core::meta::{StatusCause, StatusDetails};

pub mod mutating;
mod source;
#[cfg(test)]
mod tests;

pub use mutating::MutatingAdmissionPolicies;
pub use source::REFRESH;
use source::{Compiled, Kinds, Source};

/// The plugin's name.
pub const PLUGIN: &str = "ValidatingAdmissionPolicy";

/// The audit annotation of a failed validation under the `Audit` action.
pub const VALIDATION_FAILURE_ANNOTATION: &str =
    "validation.policy.admission.k8s.io/validation_failure";

/// `celconfig.MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_EXPRESSION_BYTES: usize = 5 * 1024;
/// `maxAuditAnnotationValueLength`.
const MAX_AUDIT_ANNOTATION_VALUE_BYTES: usize = 10 * 1024;

/// A compiled CEL expression with its source.
struct Expression {
    source: String,
    program: Result<Arc<cel::Program>, String>,
    /// The same expression evaluated straight over the request's JSON,
    /// when it is of the subset [`cel_direct`] evaluates.
    direct: Option<cel_direct::Program>,
}

/// The variables a [`cel_direct`] program reads, in the order of
/// [`Json`].
const DIRECT_VARIABLES: [&str; 4] = ["object", "oldObject", "request", "params"];

/// The JSON bound to [`DIRECT_VARIABLES`] for one evaluation: the same
/// values the interpreter's activation binds (null where it binds null).
type Json<'a> = [&'a Value; 4];

/// What a [`Json`] variable the request does not have is bound to.
static NULL: Value = Value::Null;

/// The interpreter's activation of an evaluation, made (or found) when an
/// expression first needs it.
type Scope<'c, 'p, 'v> = dyn Fn() -> &'c cel::Context<'p, 'v> + 'c;

/// `value`, or null.
fn or_null(value: &Option<Value>) -> &Value {
    value.as_ref().unwrap_or(&NULL)
}

impl Expression {
    fn compile(source: &str) -> Self {
        let program = apiforge_core::cel_authorizer::admission_env()
            .compile(source)
            .map(Arc::new)
            .map_err(|e| e.to_string());
        let direct = program
            .as_ref()
            .ok()
            .and_then(|p| cel_direct::Program::compile(p, &DIRECT_VARIABLES));
        Expression {
            source: source.to_string(),
            program,
            direct,
        }
    }

    /// [`Expression::run`], answered straight from `json` when the
    /// expression's direct program can (its answer is the interpreter's,
    /// and it leaves every error to the interpreter); the interpreter's
    /// activation is asked of `scope` only when it cannot.
    fn run_over(&self, scope: &Scope<'_, '_, '_>, json: &Json<'_>) -> Result<cel::Value, String> {
        match self.direct.as_ref().and_then(|d| d.evaluate(json)) {
            Some(value) => Ok(value),
            None => self.run(scope()),
        }
    }

    /// Runs the expression; errors read as upstream's CEL filter words
    /// them (`expression '<expr>' resulted in error: <why>`, and
    /// `compilation error: <why>` for one that does not compile).
    fn run(&self, ctx: &cel::Context<'_, '_>) -> Result<cel::Value, String> {
        self.eval(ctx).map_err(|e| match e {
            EvalFailure::Compile(e) => format!("compilation error: {e}"),
            EvalFailure::Execute(e) => {
                format!("expression '{}' resulted in error: {e}", self.source)
            }
        })
    }

    fn eval(&self, ctx: &cel::Context<'_, '_>) -> Result<cel::Value, EvalFailure> {
        match &self.program {
            Ok(p) => p
                .execute(ctx)
                .map_err(|e| EvalFailure::Execute(e.to_string())),
            Err(e) => Err(EvalFailure::Compile(e.clone())),
        }
    }
}

/// Why an expression gave no value.
enum EvalFailure {
    Compile(String),
    Execute(String),
}

/// The variables of one evaluation, evaluated in order; the ones that
/// failed keep upstream's error (`composited variable "<name>" fails to
/// evaluate: <why>`, from `variableAccessor.Callback`).
#[derive(Default)]
struct Variables {
    failed: Vec<(String, String)>,
}

impl Variables {
    /// The failure of the first failed variable `source` uses.
    fn failure_in(&self, source: &str) -> Option<&str> {
        self.failed
            .iter()
            .find(|(name, _)| mentions(source, name))
            .map(|(_, e)| e.as_str())
    }

    /// Runs `e` as [`Expression::run`] does, except that when it fails on a
    /// failed variable the variable's error is the reason, as upstream's
    /// lazy variables report it.
    fn run(
        &self,
        e: &Expression,
        scope: &Scope<'_, '_, '_>,
        json: &Json<'_>,
    ) -> Result<cel::Value, String> {
        e.run_over(scope, json)
            .map_err(|err| match self.failure_in(&e.source) {
                Some(why) => format!("expression '{}' resulted in error: {why}", e.source),
                None => err,
            })
    }
}

/// Whether `source` reads `variables.<name>` (as a whole identifier).
fn mentions(source: &str, name: &str) -> bool {
    let needle = format!("variables.{name}");
    source.match_indices(&needle).any(|(at, _)| {
        source[at + needle.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c == '_' || c.is_ascii_alphanumeric()))
    })
}

struct CompiledValidation {
    expression: Expression,
    message: String,
    message_expression: Option<Expression>,
    reason: Option<String>,
}

/// A policy ready to match and evaluate.
struct Policy {
    name: String,
    resource_version: String,
    /// `(apiVersion, kind)` of the params and where they are served:
    /// `Ok((group, version, plural, namespaced))`, or the configuration
    /// error when no served resource has that kind.
    params: Option<Result<ParamSource, String>>,
    constraints: Option<MatchResources>,
    ignore_failures: bool,
    conditions: Conditions,
    variables: Vec<(String, Expression)>,
    validations: Vec<CompiledValidation>,
    audit_annotations: Vec<(String, Expression)>,
    /// The activation variables its expressions may read.
    uses: Uses,
    /// Without `matchConditions` and `variables`: evaluated without params
    /// straight in a request's root context (see [`make_plain`]).
    plain: bool,
    /// Whether a `matchConditions` expression may read `variables` (by the
    /// same conservative scan as [`Uses`]).
    conditions_read_variables: bool,
}

/// Which of the costlier activation variables some expression may read,
/// by a conservative scan of the sources (a CEL variable is only read by
/// its name): the ones no policy reads are bound to null rather than
/// built and converted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Uses {
    old_object: bool,
    request: bool,
    namespace_object: bool,
    authorizer: bool,
}

impl Uses {
    /// What the expressions `sources` may read.
    fn of<'a>(sources: impl IntoIterator<Item = &'a str>) -> Self {
        let mut u = Uses::default();
        for s in sources {
            u = u.or(Uses {
                old_object: s.contains("oldObject"),
                request: s.contains("request"),
                namespace_object: s.contains("namespaceObject"),
                authorizer: s.contains("authorizer"),
            });
        }
        u
    }

    fn or(self, o: Uses) -> Uses {
        Uses {
            old_object: self.old_object || o.old_object,
            request: self.request || o.request,
            namespace_object: self.namespace_object || o.namespace_object,
            authorizer: self.authorizer || o.authorizer,
        }
    }
}

#[derive(Clone, Debug)]
struct ParamSource {
    group: String,
    version: String,
    resource: String,
    namespaced: bool,
}

impl Policy {
    /// The decision when one of its expressions fails: admit under
    /// `failurePolicy: Ignore`, else deny with the error.
    fn on_error(&self, message: String) -> Decision {
        if self.ignore_failures {
            Decision::Admit
        } else {
            Decision::Deny {
                message,
                reason: String::new(),
            }
        }
    }

    fn new(p: ValidatingAdmissionPolicy, ctx: &Context) -> Self {
        let spec = p.spec;
        let uses = Uses::of(
            spec.match_conditions
                .iter()
                .map(|c| c.expression.as_str())
                .chain(spec.variables.iter().map(|v| v.expression.as_str()))
                .chain(
                    spec.validations
                        .iter()
                        .flat_map(|v| [v.expression.as_str(), v.message_expression.as_str()]),
                )
                .chain(
                    spec.audit_annotations
                        .iter()
                        .map(|a| a.value_expression.as_str()),
                ),
        );
        Policy {
            uses,
            plain: spec.match_conditions.is_empty() && spec.variables.is_empty(),
            conditions_read_variables: spec
                .match_conditions
                .iter()
                .any(|c| c.expression.contains("variables")),
            name: p.metadata.name,
            resource_version: p.metadata.resource_version,
            params: spec.param_kind.as_ref().map(|pk| param_source(pk, ctx)),
            constraints: spec.match_constraints,
            ignore_failures: spec.failure_policy.as_deref() == Some("Ignore"),
            conditions: Conditions::compile_over(&spec.match_conditions, &DIRECT_VARIABLES),
            variables: spec
                .variables
                .iter()
                .map(|v| (v.name.clone(), Expression::compile(&v.expression)))
                .collect(),
            validations: spec
                .validations
                .iter()
                .map(|v| CompiledValidation {
                    expression: Expression::compile(&v.expression),
                    message: v.message.clone(),
                    message_expression: (!v.message_expression.trim().is_empty())
                        .then(|| Expression::compile(&v.message_expression)),
                    reason: v.reason.clone(),
                })
                .collect(),
            audit_annotations: spec
                .audit_annotations
                .iter()
                .map(|a| {
                    (
                        a.key.clone(),
                        Expression::compile(a.value_expression.trim()),
                    )
                })
                .collect(),
        }
    }

    fn handles_group(&self, group: &str) -> bool {
        self.constraints.as_ref().is_some_and(|m| {
            m.resource_rules
                .iter()
                .any(|r| r.api_groups.iter().any(|g| g == "*" || g == group))
        })
    }
}

/// Maps a `paramKind` to its served resource; the error is upstream's
/// (`failed to find resource referenced by paramKind: '<group>/<version>,
/// Kind=<kind>'`, a `GroupVersionKind` printed by Go).
fn param_source(pk: &ParamKind, ctx: &Context) -> Result<ParamSource, String> {
    let (group, version) = pk
        .api_version
        .split_once('/')
        .unwrap_or(("", pk.api_version.as_str()));
    match ctx.lookup().resource_for_kind(group, version, &pk.kind) {
        Some((resource, namespaced)) => Ok(ParamSource {
            group: group.to_string(),
            version: version.to_string(),
            resource,
            namespaced,
        }),
        None => Err(format!(
            "failed to find resource referenced by paramKind: '{group}/{version}, Kind={}'",
            pk.kind
        )),
    }
}

struct Binding {
    name: String,
    param_ref: Option<ParamRef>,
    match_resources: Option<MatchResources>,
    actions: Vec<String>,
}

/// The validating policy kinds for the [`Source`].
struct Validating;

impl Kinds for Validating {
    type Raw = ValidatingAdmissionPolicy;
    type Policy = Policy;
    type Binding = Binding;
    const POLICIES: &'static str = "validatingadmissionpolicies";
    const BINDINGS: &'static str = "validatingadmissionpolicybindings";

    fn decode_policy(v: Value) -> Result<(String, String, Self::Raw), serde_json::Error> {
        let p: ValidatingAdmissionPolicy = serde_json::from_value(v)?;
        Ok((
            p.metadata.name.clone(),
            p.metadata.resource_version.clone(),
            p,
        ))
    }

    fn compile(raw: Self::Raw, ctx: &Context) -> Policy {
        Policy::new(raw, ctx)
    }

    fn decode_binding(v: Value) -> Result<(String, String, Binding), serde_json::Error> {
        let b: ValidatingAdmissionPolicyBinding = serde_json::from_value(v)?;
        Ok((
            b.spec.policy_name,
            b.metadata.name.clone(),
            Binding {
                name: b.metadata.name,
                param_ref: b.spec.param_ref,
                match_resources: b.spec.match_resources,
                actions: b.spec.validation_actions,
            },
        ))
    }
}

impl Compiled for Policy {
    fn name(&self) -> &str {
        &self.name
    }

    fn resource_version(&self) -> &str {
        &self.resource_version
    }

    fn params_unresolved(&self) -> bool {
        matches!(self.params, Some(Err(_)))
    }

    fn handles_group(&self, group: &str) -> bool {
        Policy::handles_group(self, group)
    }
}

/// The plugin.
pub struct ValidatingAdmissionPolicies {
    source: Source<Validating>,
}

impl Default for ValidatingAdmissionPolicies {
    fn default() -> Self {
        Self::new()
    }
}

impl ValidatingAdmissionPolicies {
    /// The plugin, with nothing listed yet.
    pub fn new() -> Self {
        ValidatingAdmissionPolicies {
            source: Source::new(),
        }
    }
}

/// Whether a policy's `matchConstraints` or a binding's `matchResources`
/// match (`matching.Matcher.Matches`): `None` when they do not, else the
/// matched version. A binding without `matchResources` matches everything
/// its policy does; constraints without `resourceRules` match any
/// resource (only a binding's may: a policy requires them).
async fn resources_match(
    m: &MatchResources,
    attrs: &Attributes,
    ctx: &Context,
) -> Result<Option<Matched>, Error> {
    Ok(resources_hit(m, attrs, ctx)
        .await?
        .map(|h| h.matched(attrs)))
}

/// [`resources_match`], telling only which version matched.
async fn resources_hit(
    m: &MatchResources,
    attrs: &Attributes,
    ctx: &Context,
) -> Result<Option<Hit>, Error> {
    if !matching::namespace_selector_matches(m.namespace_selector.as_ref(), attrs, ctx).await? {
        return Ok(None);
    }
    if !matching::object_selector_matches(m.object_selector.as_ref(), attrs) {
        return Ok(None);
    }
    let equivalent = m.match_policy.as_deref() != Some("Exact");
    if matching::named_rules_hit(&m.exclude_resource_rules, equivalent, attrs).is_some() {
        return Ok(None);
    }
    if m.resource_rules.is_empty() {
        return Ok(Some(Hit::Own));
    }
    Ok(matching::named_rules_hit(
        &m.resource_rules,
        equivalent,
        attrs,
    ))
}

/// What one validation (or a configuration error) decided.
struct Denial {
    policy: String,
    /// `None` for a policy-level configuration error.
    binding: Option<String>,
    message: String,
    reason: String,
}

/// Upstream's `reasonToCode`.
fn reason_to_code(reason: &str) -> u16 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

impl Denial {
    /// The error of the first denial (the validating dispatcher's
    /// `Dispatch`): `admission.NewForbidden` with the policy's message,
    /// then the reason (default `Invalid`) and its code, and the message as
    /// a cause.
    fn into_error(self, attrs: &Attributes) -> Error {
        let message = match &self.binding {
            Some(b) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
                self.policy, self.message
            ),
            None => format!(
                "ValidatingAdmissionPolicy '{}' denied request: {}",
                self.policy, self.message
            ),
        };
        let mut err = Error::forbidden(attrs, &message);
        let reason = if self.reason.is_empty() {
            "Invalid".to_string()
        } else {
            self.reason
        };
        err.0.code = reason_to_code(&reason);
        err.0.reason = reason;
        err.0
            .details
            .get_or_insert_with(StatusDetails::default)
            .causes
            .push(StatusCause {
                message,
                ..Default::default()
            });
        err
    }
}

/// The objects and variables an evaluation sees (upstream's activation).
struct Activation {
    object: cel::Value,
    old_object: cel::Value,
    request: cel::Value,
    namespace_object: cel::Value,
}

impl Activation {
    fn context(&self, params: &cel::Value) -> cel::Context<'static, 'static> {
        let mut c = Activation {
            object: self.object.clone(),
            old_object: self.old_object.clone(),
            request: self.request.clone(),
            namespace_object: self.namespace_object.clone(),
        }
        .into_root();
        c.add_variable_from_value("params", params.clone());
        c
    }

    /// The activation as a CEL context of its own: binding a variable
    /// converts the whole value into the interpreter's representation,
    /// so a request's policies share one such context and each evaluation
    /// runs in a child scope of it (with its params and variables).
    fn into_root(self) -> cel::Context<'static, 'static> {
        let mut c = cel::Context::with_env(apiforge_core::cel_authorizer::admission_env());
        c.add_variable_from_value("object", self.object);
        c.add_variable_from_value("oldObject", self.old_object);
        c.add_variable_from_value("request", self.request);
        c.add_variable_from_value("namespaceObject", self.namespace_object);
        c
    }
}

/// The shared context of one request and version (see
/// [`Activation::into_root`]): its objects are read in place by the
/// expressions ([`apiforge_core::cel_json`]), not converted first.
fn root_context<'v>(
    object: Option<&'v Value>,
    old_object: Option<&'v Value>,
    request: Option<&'v Value>,
    namespace_object: cel::Value,
) -> cel::Context<'v, 'v> {
    let val = |v: Option<&'v Value>| apiforge_core::cel_json::val(v.unwrap_or(&Value::Null));
    let mut c = cel::Context::with_env(apiforge_core::cel_authorizer::admission_env());
    c.add_variable_as_val("object", val(object));
    c.add_variable_as_val("oldObject", val(old_object));
    c.add_variable_as_val("request", val(request));
    c.add_variable_from_value("namespaceObject", namespace_object);
    c
}

/// One validation's outcome.
enum Decision {
    Admit,
    /// Denied (by a false expression, or an error under `failurePolicy:
    /// Fail`), with the message and reason.
    Deny {
        message: String,
        reason: String,
    },
}

/// What evaluating a policy for one binding and param gives.
#[derive(Default)]
struct Outcome {
    decisions: Vec<Decision>,
    /// Audit annotations to publish, `(key, value)`.
    annotations: Vec<(String, String)>,
    /// Audit annotation errors under `failurePolicy: Fail` (each denies).
    annotation_errors: Vec<String>,
}

fn cel_type_name(v: &cel::Value) -> &'static str {
    match v {
        cel::Value::Int(_) => "int",
        cel::Value::UInt(_) => "uint",
        cel::Value::Float(_) => "double",
        cel::Value::Bool(_) => "bool",
        cel::Value::String(_) => "string",
        cel::Value::Bytes(_) => "bytes",
        cel::Value::List(_) => "list",
        cel::Value::Map(_) => "map",
        cel::Value::Null => "null_type",
        cel::Value::Duration(_) => "google.protobuf.Duration",
        cel::Value::Timestamp(_) => "google.protobuf.Timestamp",
        _ => "unknown",
    }
}

/// Evaluates a policy's `variables` in order into `ctx` (as
/// `variables.<name>`), each seeing the earlier ones; one that fails is
/// absent, and an expression using it fails with its error.
fn bind_variables(variables: &[(String, Expression)], ctx: &mut cel::Context<'_, '_>) -> Variables {
    let mut values: HashMap<cel::objects::Key, cel::Value> = HashMap::new();
    let mut vars = Variables::default();
    for (name, expression) in variables {
        ctx.add_variable_from_value("variables", cel::Value::Map(values.clone().into()));
        match expression.eval(ctx) {
            Ok(v) => {
                values.insert(cel::objects::Key::from(name.as_str()), v);
            }
            Err(failure) => {
                let why = match failure {
                    EvalFailure::Compile(e) => {
                        format!("composited variable {name:?} fails to compile: {e}")
                    }
                    EvalFailure::Execute(e) => {
                        let e = vars
                            .failure_in(&expression.source)
                            .map_or(e, str::to_string);
                        format!("composited variable {name:?} fails to evaluate: {e}")
                    }
                };
                vars.failed.push((name.clone(), why));
            }
        }
    }
    ctx.add_variable_from_value("variables", cel::Value::Map(values.into()));
    vars
}

/// Evaluates `policy` for one param (`validator.Validate`): `params` is
/// the param's CEL value, and `json[3]` its JSON.
fn evaluate(
    policy: &Policy,
    root: &cel::Context<'_, '_>,
    params: &cel::Value,
    json: &Json<'_>,
) -> Outcome {
    let on_error = |message: String| policy.on_error(message);
    let mut ctx = root.new_inner_scope();
    ctx.add_variable_from_value("params", params.clone());
    match policy.conditions.evaluate_in(&ctx, json) {
        Ok(true) => {}
        Ok(false) => return Outcome::default(),
        Err(e) => {
            return Outcome {
                decisions: vec![on_error(e)],
                ..Outcome::default()
            };
        }
    }
    let vars = bind_variables(&policy.variables, &mut ctx);
    judge(policy, &|| &ctx, &vars, json)
}

/// Binds what a [`Policy::plain`] policy without params sees besides the
/// request's variables: `params` null and no `variables` (as
/// [`evaluate`] binds them in its inner scope).
fn make_plain(root: &mut cel::Context<'_, '_>) {
    root.add_variable_from_value("params", cel::Value::Null);
    root.add_variable_from_value(
        "variables",
        cel::Value::Map(HashMap::<cel::objects::Key, cel::Value>::new().into()),
    );
}

/// [`evaluate`] for a [`Policy::plain`] policy without params, straight
/// in a root context made plain by [`make_plain`] (names resolve in one
/// scope, and nothing is bound per policy), which `plain_root` makes when
/// an expression first needs the interpreter.
fn evaluate_plain(policy: &Policy, plain_root: &Scope<'_, '_, '_>, json: &Json<'_>) -> Outcome {
    judge(policy, plain_root, &Variables::default(), json)
}

/// The validations and audit annotations of `policy` in the activation
/// `scope` gives, where its conditions held and its variables are bound
/// (`vars`); `json` is what that activation binds to
/// [`DIRECT_VARIABLES`].
fn judge(policy: &Policy, scope: &Scope<'_, '_, '_>, vars: &Variables, json: &Json<'_>) -> Outcome {
    let on_error = |message: String| policy.on_error(message);
    let mut outcome = Outcome::default();
    for v in &policy.validations {
        let decision = match vars.run(&v.expression, scope, json) {
            Err(e) => on_error(e),
            Ok(cel::Value::Bool(true)) => Decision::Admit,
            Ok(_) => {
                let mut message = String::new();
                if let Some(me) = &v.message_expression {
                    match me.run(scope()) {
                        Ok(cel::Value::String(s)) => {
                            let s = s.trim();
                            if s.len() <= MAX_MESSAGE_EXPRESSION_BYTES && !s.contains('\n') {
                                message = s.to_string();
                            }
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::debug!(error = %e, "error while evaluating messageExpression");
                        }
                    }
                }
                if message.is_empty() {
                    message = v.message.trim().to_string();
                }
                if message.is_empty() {
                    message = format!("failed expression: {}", v.expression.source.trim());
                }
                Decision::Deny {
                    message,
                    reason: v.reason.clone().unwrap_or_else(|| "Invalid".into()),
                }
            }
        };
        outcome.decisions.push(decision);
    }
    for (key, expression) in &policy.audit_annotations {
        let error = match vars.run(expression, scope, json) {
            Ok(cel::Value::String(s)) => {
                let value = s.trim();
                if !value.is_empty() {
                    let mut end = value.len().min(MAX_AUDIT_ANNOTATION_VALUE_BYTES);
                    while !value.is_char_boundary(end) {
                        end -= 1;
                    }
                    outcome
                        .annotations
                        .push((key.clone(), value[..end].to_string()));
                }
                None
            }
            Ok(cel::Value::Null) => None,
            Ok(other) => Some(format!(
                "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                expression.source,
                cel_type_name(&other)
            )),
            Err(e) if policy.ignore_failures => {
                tracing::debug!(error = %e, "audit annotation failed, ignored");
                None
            }
            Err(e) => Some(e),
        };
        if let Some(e) = error {
            // An unsupported type denies whatever the failure policy.
            outcome.annotation_errors.push(e);
        }
    }
    outcome
}

/// The params a binding evaluates with (`generic.CollectParams`): `[null]`
/// when the policy has no `paramKind` or the binding no `paramRef`.
async fn collect_params(
    source: Option<&ParamSource>,
    param_ref: Option<&ParamRef>,
    attrs: &Attributes,
    ctx: &Context,
) -> Result<Vec<Value>, String> {
    let (Some(source), Some(pr)) = (source, param_ref) else {
        return Ok(vec![Value::Null]);
    };
    let namespace = if source.namespaced {
        if !pr.namespace.is_empty() {
            pr.namespace.clone()
        } else if !attrs.namespace.is_empty() {
            attrs.namespace.clone()
        } else {
            return Err(
                "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                    .into(),
            );
        }
    } else if !pr.namespace.is_empty() {
        return Err(
            "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
        );
    } else {
        String::new()
    };
    let lookup = ctx.lookup();
    let (g, v, r) = (
        source.group.as_str(),
        source.version.as_str(),
        source.resource.as_str(),
    );
    let params: Vec<Value> = if !pr.name.is_empty() {
        // The cache first, then storage (a param created just before the
        // request may not have reached the cache yet).
        let mut found = lookup
            .get(g, v, r, &namespace, &pr.name, false)
            .await
            .map_err(|e| e.to_string())?;
        if found.is_none() {
            found = lookup
                .get(g, v, r, &namespace, &pr.name, true)
                .await
                .map_err(|e| e.to_string())?;
        }
        found.into_iter().collect()
    } else if let Some(selector) = &pr.selector {
        let ns = source.namespaced.then_some(namespace.as_str());
        lookup
            .list(g, v, r, ns)
            .await
            .map_err(|e| e.to_string())?
            .unwrap_or_default()
            .into_iter()
            .filter(|p| {
                let labels = p
                    .pointer("/metadata/labels")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                            .collect()
                    })
                    .unwrap_or_default();
                selector.matches(&labels)
            })
            .collect()
    } else {
        return Err("one of name or selector must be provided".into());
    };
    if params.is_empty() && pr.parameter_not_found_action.as_deref() == Some("Deny") {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(params)
}

/// `cel.CreateNamespaceObject`: the namespace's spec, status and metadata
/// without managed fields and owner references.
fn namespace_object(ns: &Value) -> Value {
    let mut out = json!({});
    for key in ["spec", "status"] {
        if let Some(v) = ns.get(key) {
            out[key] = v.clone();
        }
    }
    if let Some(Value::Object(meta)) = ns.get("metadata") {
        let mut meta = meta.clone();
        meta.remove("managedFields");
        meta.remove("ownerReferences");
        meta.remove("selfLink");
        out["metadata"] = Value::Object(meta);
    }
    out
}

/// The annotations of one policy, as upstream's `auditAnnotationCollector`:
/// distinct values of one key are joined with `, `.
#[derive(Default)]
struct Collector(BTreeMap<String, Vec<String>>);

impl Collector {
    fn add(&mut self, key: String, value: String) {
        let values = self.0.entry(key).or_default();
        if !values.contains(&value) {
            values.push(value);
        }
    }

    fn publish(self, policy: &str) {
        for (key, values) in self.0 {
            crate::audit::annotate_current(format!("{policy}/{key}"), values.join(", "));
        }
    }
}

/// What the expressions of one request read in one version: the object
/// and old object encoded in it, and the `request` variable's JSON (when
/// an expression reads it).
struct Prepared {
    object: Option<Value>,
    old_object: Option<Value>,
    request: Option<Value>,
}

impl Prepared {
    /// The objects of `attrs` in `version` (which `hit` matched), or why
    /// they could not be converted.
    fn new(attrs: &Attributes, version: &str, hit: Hit, uses: Uses) -> Result<Self, String> {
        // The old object is encoded only when an expression may read it.
        let object = matching::encode_in(attrs, version, &attrs.object)?;
        let old = if uses.old_object {
            matching::encode_in(attrs, version, &attrs.old_object)?
        } else {
            None
        };
        let request = uses.request.then(|| {
            let matched = hit.matched(attrs);
            let target = Target {
                group: &attrs.group,
                version: &matched.version,
                resource: &matched.resource,
            };
            let uid = uuid::Uuid::new_v4().to_string();
            matching::admission_request(&uid, attrs, target, &matched.kind, None, None)
        });
        Ok(Prepared {
            object,
            old_object: old,
            request,
        })
    }
}

/// One step of a request's dispatch, found while matching (which may
/// await lookups) and carried out, in order, once every lookup is done
/// (evaluations borrow the request's objects, and are not held across an
/// await).
enum Step<'h> {
    /// A configuration error that denies the request.
    Deny(Denial),
    /// Evaluate `policy` for `binding` with each of `params`, over the
    /// objects in `version`.
    Evaluate {
        policy: &'h Policy,
        binding: &'h Binding,
        version: &'h str,
        params: Vec<Value>,
        /// Whether the policy runs straight in the plain root (see
        /// [`evaluate_plain`]).
        plain: bool,
    },
    /// The end of `policy`'s bindings: publish its audit annotations.
    Publish(&'h Policy),
}

impl ValidatingAdmissionPolicies {
    async fn dispatch(&self, attrs: &Attributes, ctx: &Context) -> Result<(), Error> {
        let snapshot = self.source.hooks(ctx).await?;
        let mut namespace: Option<cel::Value> = None;
        // The objects (and request variable) of each version the request is
        // evaluated in, one slot per served version, made once for every
        // policy matching in that version.
        let served = attrs.codec.as_ref().map_or(&[][..], |c| c.0.versions());
        let slots: Vec<OnceLock<Result<Prepared, String>>> =
            (0..=served.len()).map(|_| OnceLock::new()).collect();
        let slot = |version: &str| {
            served
                .iter()
                .position(|v| v.info.version == version)
                .unwrap_or(served.len())
        };
        let uses = snapshot
            .hooks
            .iter()
            .fold(Uses::default(), |u, h| u.or(h.policy.uses));
        // The roots also bind `params` null and no `variables` (see
        // [`make_plain`]) unless a policy's conditions might read
        // `variables`: in the inner scopes of the others both are bound
        // again, and conditions that never name `variables` cannot tell.
        let plain_roots = !snapshot
            .hooks
            .iter()
            .any(|h| h.policy.conditions_read_variables);
        let mut steps: Vec<Step<'_>> = Vec::new();
        for hook in &snapshot.hooks {
            let policy = &*hook.policy;
            let config_error = |message: String, binding: Option<&str>, steps: &mut Vec<Step>| {
                if policy.ignore_failures {
                    return;
                }
                let message = match binding {
                    Some(_) => format!("failed to configure binding: {message}"),
                    None => format!("failed to configure policy: {message}"),
                };
                steps.push(Step::Deny(Denial {
                    policy: policy.name.clone(),
                    binding: binding.map(str::to_string),
                    message,
                    reason: String::new(),
                }));
            };
            let Some(constraints) = &policy.constraints else {
                continue;
            };
            let hit = match resources_hit(constraints, attrs, ctx).await {
                Ok(Some(h)) => h,
                Ok(None) => continue,
                Err(e) => {
                    config_error(e.to_string(), None, &mut steps);
                    continue;
                }
            };
            let version = hit.version(attrs);
            let params_source = match &policy.params {
                Some(Err(e)) => {
                    config_error(e.clone(), None, &mut steps);
                    continue;
                }
                Some(Ok(s)) => Some(s),
                None => None,
            };
            for binding in &hook.bindings {
                if let Some(m) = &binding.match_resources {
                    match resources_hit(m, attrs, ctx).await {
                        Ok(Some(_)) => {}
                        Ok(None) => continue,
                        Err(e) => {
                            config_error(e.to_string(), Some(&binding.name), &mut steps);
                            continue;
                        }
                    }
                }
                let params =
                    match collect_params(params_source, binding.param_ref.as_ref(), attrs, ctx)
                        .await
                    {
                        Ok(p) => p,
                        Err(e) => {
                            config_error(e, Some(&binding.name), &mut steps);
                            continue;
                        }
                    };
                if params.is_empty() {
                    continue;
                }
                if let Err(e) =
                    slots[slot(version)].get_or_init(|| Prepared::new(attrs, version, hit, uses))
                {
                    config_error(
                        format!("failed to convert object version: {e}"),
                        None,
                        &mut steps,
                    );
                    break;
                }
                if namespace.is_none() {
                    namespace = Some(namespace_value(attrs, ctx, uses.namespace_object).await?);
                }
                // A plain policy without params needs no inner scope.
                let plain = plain_roots
                    && policy.plain
                    && (params_source.is_none() || binding.param_ref.is_none());
                steps.push(Step::Evaluate {
                    policy,
                    binding,
                    version,
                    params,
                    plain,
                });
            }
            steps.push(Step::Publish(policy));
        }
        // The activation of each version, built once for every policy
        // matching in that version (building the request variable costs
        // more than most expressions), when an expression first needs the
        // interpreter.
        let mut activations: Vec<(&str, OnceCell<cel::Context<'_, '_>>)> = Vec::new();
        let mut denials: Vec<Denial> = Vec::new();
        let mut collector = Collector::default();
        for step in steps {
            let (policy, binding, version, params, plain) = match step {
                Step::Deny(denial) => {
                    denials.push(denial);
                    continue;
                }
                Step::Publish(policy) => {
                    std::mem::take(&mut collector).publish(&policy.name);
                    continue;
                }
                Step::Evaluate {
                    policy,
                    binding,
                    version,
                    params,
                    plain,
                } => (policy, binding, version, params, plain),
            };
            // Made while matching: a conversion that failed made no step.
            let Some(Ok(prepared)) = slots[slot(version)].get() else {
                continue;
            };
            let position = match activations.iter().position(|(v, _)| *v == version) {
                Some(i) => i,
                None => {
                    activations.push((version, OnceCell::new()));
                    activations.len() - 1
                }
            };
            let cell = &activations[position].1;
            let activation = || {
                cell.get_or_init(|| {
                    let mut root = root_context(
                        prepared.object.as_ref(),
                        prepared.old_object.as_ref(),
                        prepared.request.as_ref(),
                        namespace.clone().unwrap_or(cel::Value::Null),
                    );
                    if uses.authorizer {
                        ctx.bind_authorizer(&mut root, attrs);
                    }
                    if plain_roots {
                        make_plain(&mut root);
                    }
                    root
                })
            };
            for param in &params {
                let json = [
                    or_null(&prepared.object),
                    or_null(&prepared.old_object),
                    or_null(&prepared.request),
                    param,
                ];
                let outcome = if plain {
                    evaluate_plain(policy, &activation, &json)
                } else {
                    evaluate(
                        policy,
                        activation(),
                        &apiforge_core::cel::to_cel(param),
                        &json,
                    )
                };
                for (i, decision) in outcome.decisions.into_iter().enumerate() {
                    let Decision::Deny { message, reason } = decision else {
                        continue;
                    };
                    for action in &binding.actions {
                        match action.as_str() {
                            "Deny" => denials.push(Denial {
                                policy: policy.name.clone(),
                                binding: Some(binding.name.clone()),
                                message: message.clone(),
                                reason: reason.clone(),
                            }),
                            "Warn" => crate::request::warning::add(format!(
                                "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {message}",
                                policy.name, binding.name
                            )),
                            "Audit" => crate::audit::annotate_current(
                                VALIDATION_FAILURE_ANNOTATION,
                                serde_json::to_string(&json!([{
                                    "message": message,
                                    "policy": policy.name,
                                    "binding": binding.name,
                                    "expressionIndex": i,
                                    "validationActions": binding.actions,
                                }]))
                                .unwrap_or_default(),
                            ),
                            _ => {}
                        }
                    }
                }
                for (key, value) in outcome.annotations {
                    collector.add(key, value);
                }
                for message in outcome.annotation_errors {
                    denials.push(Denial {
                        policy: policy.name.clone(),
                        binding: Some(binding.name.clone()),
                        message,
                        reason: String::new(),
                    });
                }
            }
        }
        match denials.into_iter().next() {
            Some(d) => Err(d.into_error(attrs)),
            None => Ok(()),
        }
    }
}

/// The `namespaceObject` variable: the request's namespace (null for
/// cluster-scoped requests and for namespaces themselves). The namespace
/// is looked up (a missing one fails the request) even when no expression
/// reads it (`used` false), but then not converted.
async fn namespace_value(
    attrs: &Attributes,
    ctx: &Context,
    used: bool,
) -> Result<cel::Value, Error> {
    let is_namespace = attrs.group.is_empty() && attrs.kind == "Namespace";
    if attrs.namespace.is_empty() || is_namespace {
        return Ok(cel::Value::Null);
    }
    if !used {
        matching::namespace_exists(ctx, &attrs.namespace).await?;
        return Ok(cel::Value::Null);
    }
    let ns = matching::namespace(ctx, &attrs.namespace).await?;
    Ok(apiforge_core::cel::to_cel(&namespace_object(&ns)))
}

#[async_trait]
impl Plugin for ValidatingAdmissionPolicies {
    fn name(&self) -> &str {
        PLUGIN
    }

    fn handles(&self, operation: Operation) -> bool {
        operation != Operation::Connect
    }

    /// A request of a group no policy's constraints name pays nothing (a
    /// stale snapshot may match: it is refreshed when the plugin runs).
    fn handles_group(&self, group: &str) -> bool {
        self.source.may_handle(group)
    }

    async fn validate(&self, attrs: &Attributes, ctx: &Context) -> Result<(), Error> {
        if matching::is_exempt(attrs) {
            return Ok(());
        }
        self.dispatch(attrs, ctx).await
    }
}
