//! The `MutatingAdmissionPolicy` plugin: requests matched by a
//! `mutatingadmissionpolicies` policy and one of its
//! `mutatingadmissionpolicybindings` are changed by the policy's CEL
//! mutations, as the generic apiserver's `admission/plugin/policy/mutating`
//! dispatcher does. It shares the validating plugin's machinery (the parent
//! module): the snapshot of policies and bindings ([`super::source`]), matching (`matchConstraints`, then the binding's
//! `matchResources`), params (`paramKind` / `paramRef`), the activation
//! (`object`, `oldObject`, `request`, `params`, `namespaceObject`),
//! `matchConditions` and `variables`.
//!
//! - **Order**: the invocations matching the request as it is when a round
//!   starts (a mutation does not change which policies match in that
//!   round), policies in name order, their bindings in name order, each
//!   binding once per param; a policy's mutations in order, each seeing the
//!   object as the previous one left it (converted to the matched version,
//!   mutated, then decoded and defaulted into the hub form again).
//! - **`JSONPatch`**: the expression gives a list of `JSONPatch{op, path,
//!   from, value}`, applied as RFC 6902 to the object in the matched
//!   version; a failing `test` operation leaves the object unchanged.
//! - **`ApplyConfiguration`**: the expression gives an `Object{...}`,
//!   merged into the object with the server-side apply merge of
//!   [`crate::patch::structured::merge`] on the kind's schema (maps merge,
//!   associative lists merge by key, scalars are replaced); an apply
//!   configuration that sets an atomic list, map or struct is refused, as
//!   upstream's `validatePatch` does.
//! - **Reinvocation** (upstream's reinvoker, through the request's
//!   [`Reinvocation`](crate::admission::Reinvocation)): the `IfNeeded`
//!   invocations run before a later change of the object, by a later
//!   policy or by a mutating webhook, run once more in the chain's
//!   reinvocation pass ([`Plugin::reinvoke`]); a change made then
//!   reinvokes the `IfNeeded` webhooks after them in turn.
//! - **Errors** are upstream's `PolicyError`s: `policy '<p>' with binding
//!   '<b>' denied request: <why>` (`policy "<p>" denied request: ...` for a
//!   policy-level configuration error), dropped under `failurePolicy:
//!   Ignore`; the request fails with 403, the first error as the message
//!   (reason `Invalid` for evaluation errors, `Forbidden` for configuration
//!   errors) and every error as a cause.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};

use super::super::matching::{self, Conditions, Matched, Target};
use super::super::{Attributes, Context, Error, Operation, Plugin, async_trait};
use super::source::{Compiled, Kinds, Snapshot, Source};
use super::{
    Activation, DIRECT_VARIABLES, Expression, ParamSource, Variables, bind_variables,
    cel_type_name, collect_params, namespace_value, or_null, param_source, resources_match,
};
use apiforge_core::builtin::admissionregistration_v1::cel_mutation::{
    JSON_PATCH, MutationProgram, OBJECT, check_type_names, to_json, type_name,
};
use apiforge_core::builtin::admissionregistration_v1::{
    MatchResources, MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, ParamRef,
};
use apiforge_core::meta::StatusCause;

/// The plugin's name.
pub const PLUGIN: &str = "MutatingAdmissionPolicy";

/// How a mutation changes the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PatchType {
    ApplyConfiguration,
    JsonPatch,
}

/// A compiled mutation with its source.
struct CompiledMutation {
    patch_type: PatchType,
    source: String,
    program: Result<MutationProgram, String>,
}

impl CompiledMutation {
    /// Runs the expression; errors read as the validating plugin's
    /// (`expression '<expr>' resulted in error: <why>`, a failed variable's
    /// error when it uses one, `compilation error: <why>`).
    fn run(&self, ctx: &cel::Context<'_, '_>, vars: &Variables) -> Result<cel::Value, String> {
        match &self.program {
            Err(e) => Err(format!("compilation error: {e}")),
            Ok(p) => p.execute(ctx).map_err(|e| {
                let why = vars.failure_in(&self.source).map_or(e, str::to_string);
                format!("expression '{}' resulted in error: {why}", self.source)
            }),
        }
    }
}

/// A policy ready to match and evaluate.
struct Policy {
    name: String,
    resource_version: String,
    params: Option<Result<ParamSource, String>>,
    constraints: Option<MatchResources>,
    ignore_failures: bool,
    reinvoke: bool,
    conditions: Conditions,
    variables: Vec<(String, Expression)>,
    mutations: Vec<CompiledMutation>,
}

impl Policy {
    fn new(p: MutatingAdmissionPolicy, ctx: &Context) -> Self {
        let spec = p.spec;
        let mutations = spec
            .mutations
            .iter()
            .filter_map(|m| {
                let (patch_type, source) = match m.patch_type.as_str() {
                    "JSONPatch" => (PatchType::JsonPatch, &m.json_patch.as_ref()?.expression),
                    "ApplyConfiguration" => (
                        PatchType::ApplyConfiguration,
                        &m.apply_configuration.as_ref()?.expression,
                    ),
                    _ => return None,
                };
                let source = source.trim().to_string();
                Some(CompiledMutation {
                    patch_type,
                    program: MutationProgram::compile(&source),
                    source,
                })
            })
            .collect();
        Policy {
            name: p.metadata.name,
            resource_version: p.metadata.resource_version,
            params: spec.param_kind.as_ref().map(|pk| param_source(pk, ctx)),
            constraints: spec.match_constraints,
            ignore_failures: spec.failure_policy.as_deref() == Some("Ignore"),
            reinvoke: spec.reinvocation_policy == "IfNeeded",
            conditions: Conditions::compile_over(&spec.match_conditions, &DIRECT_VARIABLES),
            variables: spec
                .variables
                .iter()
                .map(|v| (v.name.clone(), Expression::compile(&v.expression)))
                .collect(),
            mutations,
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

struct Binding {
    name: String,
    param_ref: Option<ParamRef>,
    match_resources: Option<MatchResources>,
}

/// The mutating policy kinds for the [`Source`].
struct Mutating;

impl Kinds for Mutating {
    type Raw = MutatingAdmissionPolicy;
    type Policy = Policy;
    type Binding = Binding;
    const POLICIES: &'static str = "mutatingadmissionpolicies";
    const BINDINGS: &'static str = "mutatingadmissionpolicybindings";

    fn decode_policy(v: Value) -> Result<(String, String, Self::Raw), serde_json::Error> {
        let p: MutatingAdmissionPolicy = serde_json::from_value(v)?;
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
        let b: MutatingAdmissionPolicyBinding = serde_json::from_value(v)?;
        Ok((
            b.spec.policy_name,
            b.metadata.name.clone(),
            Binding {
                name: b.metadata.name,
                param_ref: b.spec.param_ref,
                match_resources: b.spec.match_resources,
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

/// One failed invocation (upstream's `generic.PolicyError`).
#[derive(Debug)]
struct PolicyError {
    policy: String,
    /// `None` for a policy-level configuration error.
    binding: Option<String>,
    message: String,
    /// `Invalid` for evaluation errors; `None` keeps `Forbidden`.
    reason: Option<&'static str>,
    ignore: bool,
}

impl PolicyError {
    /// `PolicyError.Error()`.
    fn text(&self) -> String {
        match &self.binding {
            Some(b) => format!(
                "policy '{}' with binding '{b}' denied request: {}",
                self.policy, self.message
            ),
            None => format!("policy {:?} denied request: {}", self.policy, self.message),
        }
    }
}

/// The error of the errors not ignored (the generic `policyDispatcher`):
/// 403 from `admission.NewForbidden`, with the first error's text as the
/// message and its reason, and every error's text as a cause.
fn into_error(errors: Vec<PolicyError>, attrs: &Attributes) -> Option<Error> {
    let kept: Vec<PolicyError> = errors.into_iter().filter(|e| !e.ignore).collect();
    let first = kept.first()?;
    let mut err = Error::forbidden(attrs, "admission request denied by policy");
    err.0.message = first.text();
    if let Some(reason) = first.reason {
        err.0.reason = reason.to_string();
    }
    for e in &kept {
        err = err.with_cause(StatusCause {
            message: e.text(),
            ..Default::default()
        });
    }
    Some(err)
}

/// The plugin.
pub struct MutatingAdmissionPolicies {
    source: Source<Mutating>,
}

impl Default for MutatingAdmissionPolicies {
    fn default() -> Self {
        Self::new()
    }
}

impl MutatingAdmissionPolicies {
    /// The plugin, with nothing listed yet.
    pub fn new() -> Self {
        MutatingAdmissionPolicies {
            source: Source::new(),
        }
    }

    /// One round: the invocations matching the request as it is when the
    /// round starts (the generic `policyDispatcher.Dispatch`), then each
    /// run in order (`dispatchInvocations`); `only` limits a reinvocation
    /// round to the invocations to run again. The `IfNeeded` invocations
    /// run are recorded in the request's
    /// [`Reinvocation`](crate::admission::Reinvocation), and a change of
    /// the object asks for those run before it to run again.
    async fn round(
        &self,
        snapshot: &Snapshot<Mutating>,
        attrs: &mut Attributes,
        ctx: &Context,
        only: Option<&BTreeSet<String>>,
    ) -> Result<Vec<PolicyError>, Error> {
        let mut errors = Vec::new();
        let mut invocations: Vec<(&Policy, &str, Matched, Value)> = Vec::new();
        for hook in &snapshot.hooks {
            let policy = &hook.policy;
            let config_error = |message: String, binding: Option<&str>| PolicyError {
                policy: policy.name.clone(),
                binding: binding.map(str::to_string),
                message: match binding {
                    Some(_) => format!("failed to configure binding: {message}"),
                    None => format!("failed to configure policy: {message}"),
                },
                reason: None,
                ignore: policy.ignore_failures,
            };
            let Some(constraints) = &policy.constraints else {
                continue;
            };
            let matched = match resources_match(constraints, attrs, ctx).await {
                Ok(Some(m)) => m,
                Ok(None) => continue,
                Err(e) => {
                    errors.push(config_error(e.to_string(), None));
                    continue;
                }
            };
            let params_source = match &policy.params {
                Some(Err(e)) => {
                    errors.push(config_error(e.clone(), None));
                    continue;
                }
                Some(Ok(s)) => Some(s),
                None => None,
            };
            for binding in &hook.bindings {
                if let Some(m) = &binding.match_resources {
                    match resources_match(m, attrs, ctx).await {
                        Ok(Some(_)) => {}
                        Ok(None) => continue,
                        Err(e) => {
                            errors.push(config_error(e.to_string(), Some(&binding.name)));
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
                            errors.push(config_error(e, Some(&binding.name)));
                            continue;
                        }
                    };
                for param in params {
                    invocations.push((policy, &binding.name, matched.clone(), param));
                }
            }
        }
        if invocations.is_empty() {
            return Ok(errors);
        }
        let namespace = namespace_value(attrs, ctx, true).await?;
        for (policy, binding, matched, param) in &invocations {
            let key = invocation_key(&policy.name, binding, param);
            if only.is_some_and(|keys| !keys.contains(&key)) {
                continue;
            }
            let before = attrs.object.clone();
            Invocation {
                policy,
                binding,
                matched,
                param,
                namespace: namespace.clone(),
                context: ctx,
            }
            .run(attrs, &mut errors);
            if attrs.object != before {
                attrs.reinvocation.request_previously_invoked(PLUGIN);
            }
            if policy.reinvoke {
                attrs.reinvocation.invoked(PLUGIN, key);
            }
        }
        Ok(errors)
    }
}

/// Identifies an invocation across rounds: policy, binding and param.
fn invocation_key(policy: &str, binding: &str, param: &Value) -> String {
    let meta = |k: &str| {
        param
            .pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    format!(
        "{policy}\u{0}{binding}\u{0}{}\u{0}{}",
        meta("namespace"),
        meta("name")
    )
}

/// One policy, binding and param applied to the request's object.
struct Invocation<'a> {
    policy: &'a Policy,
    binding: &'a str,
    matched: &'a Matched,
    param: &'a Value,
    namespace: cel::Value,
    /// The plugin context (the authorizer of `authorizer`).
    context: &'a Context,
}

impl Invocation<'_> {
    fn error(&self, message: String) -> PolicyError {
        PolicyError {
            policy: self.policy.name.clone(),
            binding: Some(self.binding.to_string()),
            message,
            reason: Some("Invalid"),
            ignore: self.policy.ignore_failures,
        }
    }

    /// Evaluates the match conditions, the variables and each mutation,
    /// leaving the mutated object in `attrs.object`.
    fn run(&self, attrs: &mut Attributes, errors: &mut Vec<PolicyError>) {
        let version = self.matched.version.as_str();
        let (object, old) = match matching::versioned(attrs, version) {
            Ok(o) => o,
            Err(e) => {
                errors.push(self.error(format!("failed to convert object version: {e}")));
                return;
            }
        };
        // Nothing to mutate (a delete, or a connect without object).
        let Some(mut object) = object else {
            return;
        };
        let target = Target {
            group: &attrs.group,
            version,
            resource: &self.matched.resource,
        };
        let uid = uuid::Uuid::new_v4().to_string();
        let request =
            matching::admission_request(&uid, attrs, target, &self.matched.kind, None, None);
        let to_cel = |v: Option<&Value>| v.map_or(cel::Value::Null, apiforge_core::cel::to_cel);
        let activation = Activation {
            object: to_cel(Some(&object)),
            old_object: to_cel(old.as_ref()),
            request: apiforge_core::cel::to_cel(&request),
            namespace_object: self.namespace.clone(),
        };
        let mut ctx = activation.context(&apiforge_core::cel::to_cel(self.param));
        self.context.bind_authorizer(&mut ctx, attrs);
        let json = [&object, or_null(&old), &request, self.param];
        match self.policy.conditions.evaluate_in(&ctx, &json) {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                errors.push(self.error(e));
                return;
            }
        }
        let vars = bind_variables(&self.policy.variables, &mut ctx);
        for (i, mutation) in self.policy.mutations.iter().enumerate() {
            if i > 0 {
                // Each mutation sees the object the previous ones left.
                match matching::versioned(attrs, version) {
                    Ok((Some(o), _)) => object = o,
                    Ok((None, _)) => return,
                    Err(e) => {
                        errors.push(self.error(format!("failed to convert object version: {e}")));
                        return;
                    }
                }
                ctx.add_variable_from_value("object", apiforge_core::cel::to_cel(&object));
            }
            let value = match mutation.run(&ctx, &vars) {
                Ok(v) => v,
                Err(e) => {
                    errors.push(self.error(e));
                    continue;
                }
            };
            let patched = match mutation.patch_type {
                PatchType::JsonPatch => apply_json_patch(&value, &object),
                PatchType::ApplyConfiguration => {
                    apply_configuration(&value, &object, attrs, version)
                }
            };
            let patched = match patched {
                Ok(Some(p)) => p,
                Ok(None) => continue,
                Err(e) => {
                    errors.push(self.error(e));
                    continue;
                }
            };
            if patched == object {
                continue;
            }
            let hub = match &attrs.codec {
                Some(codec) => match codec.0.decode(version, patched) {
                    Ok(h) => h,
                    Err(e) => {
                        errors.push(self.error(e.to_string()));
                        continue;
                    }
                },
                None => patched,
            };
            attrs.object = Some(hub);
        }
    }
}

/// Applies a `JSONPatch` mutation's value (a list of `JSONPatch{...}`,
/// maps here) to `object`; `None` when a `test` operation failed (the
/// patch is then not applied, as upstream).
fn apply_json_patch(value: &cel::Value, object: &Value) -> Result<Option<Value>, String> {
    let cel::Value::List(items) = value else {
        return Err(format!(
            "type mismatch: JSONPatchType.expression should evaluate to array, got {}",
            cel_type_name(value)
        ));
    };
    let mut ops = Vec::with_capacity(items.len());
    for item in items.iter() {
        let cel::Value::Map(fields) = item else {
            return Err(format!(
                "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of {}",
                cel_type_name(item)
            ));
        };
        if type_name(item) != Some(JSON_PATCH) {
            return Err(format!(
                "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of {}",
                type_name(item).unwrap_or("map")
            ));
        }
        if let Some(v) = fields.map.get(&cel::objects::Key::from("value")) {
            check_type_names(v).map_err(|e| format!("type mismatch: {e}"))?;
        }
        let item = to_json(item).map_err(|e| {
            format!(
                "JSONPath valueExpression evaluated to a type that could not marshal to JSON: {e}"
            )
        })?;
        let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default();
        let mut op = json!({"op": field("op"), "path": field("path")});
        if !field("from").is_empty() {
            op["from"] = json!(field("from"));
        }
        if let Some(v) = item.get("value") {
            op["value"] = v.clone();
        }
        ops.push(op);
    }
    let patch: json_patch::Patch =
        serde_json::from_value(Value::Array(ops)).map_err(|e| format!("JSONPath: {e}"))?;
    let mut doc = object.clone();
    match crate::patch::operations::apply(&mut doc, &patch, crate::patch::JSON_PATCH_MAX_COPY_BYTES)
    {
        Ok(()) => Ok(Some(doc)),
        Err(e) if e.test_failed => Ok(None),
        Err(e) => Err(format!("JSONPath: {e}")),
    }
}

/// Merges an `ApplyConfiguration` mutation's value (an `Object{...}`, a
/// map here) into `object`, with the server-side apply merge on the
/// kind's schema in `version` (a schema that knows nothing when the
/// request has no codec); one that sets an atomic value is refused.
fn apply_configuration(
    value: &cel::Value,
    object: &Value,
    attrs: &Attributes,
    version: &str,
) -> Result<Option<Value>, String> {
    if type_name(value) != Some(OBJECT) {
        return Err(format!(
            "unsupported return type from ApplyConfiguration expression: {}",
            type_name(value).unwrap_or(cel_type_name(value))
        ));
    }
    check_type_names(value).map_err(|e| format!("type mismatch: {e}"))?;
    let patch = to_json(value).map_err(|e| format!("error applying patch: {e}"))?;
    let schema = attrs
        .codec
        .as_ref()
        .and_then(|c| c.0.version(version))
        .map(crate::patch::schema::KindSchema::cached)
        .unwrap_or_else(|| Arc::new(crate::patch::schema::KindSchema::unknown()));
    let root = schema.root();
    let atomics = crate::patch::structured::atomic_paths(&patch, &root);
    if !atomics.is_empty() {
        return Err(format!(
            "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
            atomics.join(", ")
        ));
    }
    Ok(Some(crate::patch::structured::merge(object, &patch, &root)))
}

#[async_trait]
impl Plugin for MutatingAdmissionPolicies {
    fn name(&self) -> &str {
        PLUGIN
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    /// A request of a group no policy's constraints name pays nothing (a
    /// stale snapshot may match: it is refreshed when the plugin runs).
    fn handles_group(&self, group: &str) -> bool {
        self.source.may_handle(group)
    }

    async fn admit(&self, attrs: &mut Attributes, ctx: &Context) -> Result<(), Error> {
        if matching::is_exempt(attrs) {
            return Ok(());
        }
        let snapshot = self.source.hooks(ctx).await?;
        if snapshot.hooks.is_empty() {
            return Ok(());
        }
        let errors = self.round(&snapshot, attrs, ctx, None).await?;
        match into_error(errors, attrs) {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// The reinvocation pass: the `IfNeeded` invocations run before a
    /// later change of the object (by a later policy, or by a mutating
    /// webhook) run once more; one not run in the first round is not run
    /// now.
    async fn reinvoke(&self, attrs: &mut Attributes, ctx: &Context) -> Result<(), Error> {
        let keys = attrs.reinvocation.take_requested(PLUGIN);
        if keys.is_empty() || matching::is_exempt(attrs) {
            return Ok(());
        }
        let snapshot = self.source.hooks(ctx).await?;
        let errors = self.round(&snapshot, attrs, ctx, Some(&keys)).await?;
        match into_error(errors, attrs) {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "mutating_tests.rs"]
mod tests;
