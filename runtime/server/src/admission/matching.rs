//! Which requests an admission webhook (or policy) applies to: its
//! `rules`, `namespaceSelector`, `objectSelector` and `matchConditions`,
//! as the generic apiserver's webhook predicates
//! (`admission/plugin/webhook/predicates/{rules,namespace,object}`) and the
//! CEL match conditions (`admission/plugin/cel`) decide.

use std::sync::Arc;

use serde_json::Value;

use super::{Attributes, Context, Error, Operation};
use apiforge_core::builtin::admissionregistration_v1::{
    LabelSelector, MatchCondition, NamedRuleWithOperations, RuleWithOperations,
};
use apiforge_core::cel_direct;
use apiforge_core::meta::Status;
use apiforge_core::resource::KindInfo;

/// The group of the admission configuration kinds.
pub const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";

/// Requests for the webhook configurations and admission policies
/// themselves never reach webhooks or policies, so a broken webhook cannot
/// lock its own configuration (`rules.IsExemptAdmissionConfigurationResource`).
pub fn is_exempt(attrs: &Attributes) -> bool {
    attrs.group == ADMISSION_GROUP
        && matches!(
            attrs.kind.as_str(),
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

/// The resource (and version) a rule is checked against: the request's
/// own, or, for `matchPolicy: Equivalent`, another version of it.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// API group.
    pub group: &'a str,
    /// API version.
    pub version: &'a str,
    /// Plural resource name.
    pub resource: &'a str,
}

/// Whether `rule` matches the request (`rules.Matcher.Matches`): operation,
/// group, version, resource with subresource (`*`, `*/*`, `*/status`,
/// `pods/*`), and scope.
pub fn rule_matches(rule: &RuleWithOperations, attrs: &Attributes, target: Target<'_>) -> bool {
    RuleFields {
        operations: &rule.operations,
        api_groups: &rule.api_groups,
        api_versions: &rule.api_versions,
        resources: &rule.resources,
        scope: rule.scope.as_deref(),
    }
    .matches(attrs, target)
}

/// The fields of a rule, borrowed from a webhook's or a policy's rule.
struct RuleFields<'a> {
    operations: &'a [String],
    api_groups: &'a [String],
    api_versions: &'a [String],
    resources: &'a [String],
    scope: Option<&'a str>,
}

impl<'a> RuleFields<'a> {
    fn named(rule: &'a NamedRuleWithOperations) -> Self {
        RuleFields {
            operations: &rule.operations,
            api_groups: &rule.api_groups,
            api_versions: &rule.api_versions,
            resources: &rule.resources,
            scope: rule.scope.as_deref(),
        }
    }

    fn matches(&self, attrs: &Attributes, target: Target<'_>) -> bool {
        let exact_or_all =
            |list: &[String], value: &str| list.iter().any(|v| v == "*" || v == value);
        let op = attrs.operation().as_str();
        let resource = || {
            self.resources.iter().any(|r| {
                let (res, sub) = r.split_once('/').unwrap_or((r, ""));
                (res == "*" || res == target.resource) && (sub == "*" || sub == attrs.subresource)
            })
        };
        exact_or_all(self.operations, op)
            && exact_or_all(self.api_groups, target.group)
            && exact_or_all(self.api_versions, target.version)
            && resource()
            && scope_matches(self.scope, attrs)
    }
}

/// `rules.Matcher.scope`: namespaces themselves count as cluster-scoped.
fn scope_matches(scope: Option<&str>, attrs: &Attributes) -> bool {
    let is_namespace = attrs.group.is_empty() && attrs.resource == "namespaces";
    match scope {
        Some("Namespaced") => !is_namespace && !attrs.namespace.is_empty(),
        Some("Cluster") => is_namespace || attrs.namespace.is_empty(),
        _ => true,
    }
}

/// Whether `selector` matches the labels of `obj` (its string-valued
/// `metadata.labels`, none without an object), read in place.
fn selects(selector: &LabelSelector, obj: Option<&Value>) -> bool {
    let labels = obj
        .and_then(|o| o.get("metadata"))
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object);
    selector.matches_by(|k| labels?.get(k)?.as_str())
}

/// `object.Matcher.MatchObjectSelector`: the selector matches the new or
/// the old object's labels.
pub fn object_selector_matches(selector: Option<&LabelSelector>, attrs: &Attributes) -> bool {
    let Some(selector) = selector.filter(|s| !s.is_empty()) else {
        return true;
    };
    [attrs.object.as_ref(), attrs.old_object.as_ref()]
        .into_iter()
        .flatten()
        .any(|obj| selects(selector, Some(obj)))
}

/// `namespace.Matcher.MatchNamespaceSelector`: cluster-scoped requests
/// (other than for namespaces) always match; a namespace being created or
/// updated is matched by its own labels; otherwise the labels of the
/// request's namespace, read from the cache and then from storage. A
/// namespace that does not exist answers 404, as upstream.
pub async fn namespace_selector_matches(
    selector: Option<&LabelSelector>,
    attrs: &Attributes,
    ctx: &Context,
) -> Result<bool, Error> {
    let is_namespace = attrs.group.is_empty() && attrs.resource == "namespaces";
    if attrs.namespace.is_empty() && !is_namespace {
        return Ok(true);
    }
    let Some(selector) = selector.filter(|s| !s.is_empty()) else {
        return Ok(true);
    };
    if is_namespace && attrs.operation() != Operation::Delete {
        return Ok(selects(selector, attrs.object.as_ref()));
    }
    let name = if is_namespace {
        attrs.name.as_str()
    } else {
        attrs.namespace.as_str()
    };
    let ns = namespace(ctx, name).await?;
    Ok(selects(selector, Some(&ns)))
}

/// The namespace `name`, from the cache, else from storage (it may have
/// been created just before the request); 404 when it does not exist.
pub async fn namespace(ctx: &Context, name: &str) -> Result<Value, Error> {
    let lookup = ctx.lookup();
    let mut ns = lookup.get("", "v1", "namespaces", "", name, false).await?;
    if ns.is_none() {
        ns = lookup.get("", "v1", "namespaces", "", name, true).await?;
    }
    ns.ok_or_else(|| Error::status(Status::not_found("", "namespaces", name)))
}

/// [`namespace`] without reading the namespace: `Ok` when it exists, 404
/// when it does not.
pub async fn namespace_exists(ctx: &Context, name: &str) -> Result<(), Error> {
    let lookup = ctx.lookup();
    if lookup
        .exists("", "v1", "namespaces", "", name, false)
        .await?
        || lookup
            .exists("", "v1", "namespaces", "", name, true)
            .await?
    {
        return Ok(());
    }
    Err(Error::status(Status::not_found("", "namespaces", name)))
}

/// The object and old object of `attrs` encoded in `version` (with
/// `apiVersion` and `kind`), as webhooks and policies see them.
pub fn versioned(
    attrs: &Attributes,
    version: &str,
) -> Result<(Option<Value>, Option<Value>), String> {
    Ok((
        encode_in(attrs, version, &attrs.object)?,
        encode_in(attrs, version, &attrs.old_object)?,
    ))
}

/// `object` (the object or old object of `attrs`, in the hub form) encoded
/// in `version` with the kind's codec.
pub fn encode_in(
    attrs: &Attributes,
    version: &str,
    object: &Option<Value>,
) -> Result<Option<Value>, String> {
    match (object, &attrs.codec) {
        (Some(hub), Some(codec)) => codec
            .0
            .encode(version, hub)
            .map(Some)
            .map_err(|e| e.to_string()),
        (object, _) => Ok(object.clone()),
    }
}

/// Compiled `matchConditions`.
pub struct Conditions(Vec<Condition>);

/// One compiled match condition.
struct Condition {
    name: String,
    program: Result<Arc<cel::Program>, String>,
    /// The condition evaluated straight over the request's JSON, when it
    /// is of the subset [`cel_direct`] evaluates.
    direct: Option<cel_direct::Program>,
}

/// The JSON variables a webhook's conditions read directly, in the order
/// [`Conditions::evaluate`] binds them.
const WEBHOOK_VARIABLES: [&str; 3] = ["object", "oldObject", "request"];

/// What a JSON variable the request does not have is bound to.
static NULL: Value = Value::Null;

impl Conditions {
    /// Compiles a webhook's conditions (a compile error is reported when
    /// the condition is evaluated; validation refuses such conditions on
    /// write).
    pub fn compile(conditions: &[MatchCondition]) -> Self {
        Self::compile_over(conditions, &WEBHOOK_VARIABLES)
    }

    /// Compiles conditions whose direct programs read the JSON `variables`
    /// (in the order [`Conditions::evaluate_in`] is given them).
    pub fn compile_over(conditions: &[MatchCondition], variables: &[&str]) -> Self {
        let env = apiforge_core::cel_authorizer::admission_env();
        Conditions(
            conditions
                .iter()
                .map(|c| {
                    let program = env
                        .compile(&c.expression)
                        .map(Arc::new)
                        .map_err(|e| format!("compilation failed: {e}"));
                    let direct = program
                        .as_ref()
                        .ok()
                        .and_then(|p| cel_direct::Program::compile(p, variables));
                    Condition {
                        name: c.name.clone(),
                        program,
                        direct,
                    }
                })
                .collect(),
        )
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Evaluates the conditions over `object`, `oldObject`, `request` and
    /// `authorizer` (for the request of `attrs`, through `ctx`)
    /// (`matching.Matcher.Match`): `Ok(false)` as soon as one is false;
    /// errors (when none is false) are returned joined, for the caller to
    /// apply its failure policy. The interpreter's activation is built only
    /// when a condition's direct program cannot answer.
    pub fn evaluate(
        &self,
        object: Option<&Value>,
        old_object: Option<&Value>,
        request: &Value,
        ctx: &Context,
        attrs: &Attributes,
    ) -> Result<bool, String> {
        if self.0.is_empty() {
            return Ok(true);
        }
        let interpreter = std::cell::OnceCell::new();
        let activation = || {
            interpreter.get_or_init(|| {
                let env = apiforge_core::cel_authorizer::admission_env();
                let mut cel_ctx = cel::Context::with_env(env);
                let to_cel =
                    |v: Option<&Value>| v.map_or(cel::Value::Null, apiforge_core::cel::to_cel);
                cel_ctx.add_variable_from_value("object", to_cel(object));
                cel_ctx.add_variable_from_value("oldObject", to_cel(old_object));
                cel_ctx.add_variable_from_value("request", apiforge_core::cel::to_cel(request));
                ctx.bind_authorizer(&mut cel_ctx, attrs);
                cel_ctx
            })
        };
        let json = [
            object.unwrap_or(&NULL),
            old_object.unwrap_or(&NULL),
            request,
        ];
        self.decide(&json, activation)
    }

    /// [`evaluate`](Self::evaluate) with the variables already bound in
    /// `cel_ctx` (policies add `params`), and their JSON in `json` (the
    /// variables given to [`Conditions::compile_over`], in order).
    pub fn evaluate_in(
        &self,
        cel_ctx: &cel::Context<'_, '_>,
        json: &[&Value],
    ) -> Result<bool, String> {
        self.decide(json, || cel_ctx)
    }

    /// The conditions' decision: each answered by its direct program over
    /// `json` when it can, else by the interpreter in `activation()`.
    fn decide<'c, 'p: 'c, 'v: 'p>(
        &self,
        json: &[&Value],
        activation: impl Fn() -> &'c cel::Context<'p, 'v>,
    ) -> Result<bool, String> {
        let mut errors = Vec::new();
        for Condition {
            name,
            program,
            direct,
        } in &self.0
        {
            let result = match (direct.as_ref().and_then(|d| d.evaluate(json)), program) {
                (Some(value), _) => Ok(value),
                (None, Ok(program)) => program.execute(activation()).map_err(|e| e.to_string()),
                (None, Err(e)) => Err(e.clone()),
            };
            match result {
                Ok(cel::Value::Bool(false)) => return Ok(false),
                Ok(cel::Value::Bool(true)) => {}
                Ok(other) => errors.push(format!(
                    "matchCondition {name:?}: expression must evaluate to bool, got {other:?}"
                )),
                Err(e) => errors.push(format!("matchCondition {name:?}: {e}")),
            }
        }
        if errors.is_empty() {
            Ok(true)
        } else if errors.len() == 1 {
            Err(errors.remove(0))
        } else {
            Err(format!("[{}]", errors.join(", ")))
        }
    }
}

/// The version of the request's kind a rule matched: the request's own or,
/// for `matchPolicy: Equivalent`, another served version of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matched {
    /// The version.
    pub version: String,
    /// The plural resource in that version.
    pub resource: String,
    /// The kind in that version.
    pub kind: String,
}

/// The name a rule's `resourceNames` are compared with: the request's, or
/// the new object's.
fn request_name(attrs: &Attributes) -> &str {
    if !attrs.name.is_empty() {
        return &attrs.name;
    }
    attrs
        .object
        .as_ref()
        .and_then(|o| o.pointer("/metadata/name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Which version of the request's kind a rule matched, without copying
/// its names: the request's own, or another served version.
#[derive(Clone, Copy, Debug)]
pub enum Hit {
    /// The request's own version.
    Own,
    /// Another served version (`matchPolicy: Equivalent`).
    Other(&'static KindInfo),
}

impl Hit {
    /// The matched version.
    pub fn version<'a>(&self, attrs: &'a Attributes) -> &'a str {
        match self {
            Hit::Own => &attrs.version,
            Hit::Other(info) => info.version,
        }
    }

    /// The match with its names.
    pub fn matched(&self, attrs: &Attributes) -> Matched {
        match self {
            Hit::Own => Matched {
                version: attrs.version.clone(),
                resource: attrs.resource.clone(),
                kind: attrs.kind.clone(),
            },
            Hit::Other(info) => Matched {
                version: info.version.to_string(),
                resource: info.plural.to_string(),
                kind: info.kind.to_string(),
            },
        }
    }
}

/// The policies' `matchesResourceRules`: the first rule matching the
/// request (its operation, group, version, resource and scope, then
/// `resourceNames` when it has any), trying the kind's other served versions
/// when `equivalent` (`matchPolicy: Equivalent`) and the request's own
/// version matched none.
pub fn named_rules_match(
    rules: &[NamedRuleWithOperations],
    equivalent: bool,
    attrs: &Attributes,
) -> Option<Matched> {
    named_rules_hit(rules, equivalent, attrs).map(|h| h.matched(attrs))
}

/// [`named_rules_match`], telling only which version matched.
pub fn named_rules_hit(
    rules: &[NamedRuleWithOperations],
    equivalent: bool,
    attrs: &Attributes,
) -> Option<Hit> {
    if rules.is_empty() {
        return None;
    }
    let names_match = |r: &NamedRuleWithOperations| {
        r.resource_names.is_empty() || r.resource_names.iter().any(|n| n == request_name(attrs))
    };
    let own = Target {
        group: &attrs.group,
        version: &attrs.version,
        resource: &attrs.resource,
    };
    if rules
        .iter()
        .any(|r| RuleFields::named(r).matches(attrs, own) && names_match(r))
    {
        return Some(Hit::Own);
    }
    if !equivalent {
        return None;
    }
    let codec = attrs.codec.as_ref()?;
    for rule in rules {
        let plain = RuleFields::named(rule);
        for v in codec.0.versions() {
            let info = v.info;
            if info.version == attrs.version {
                continue;
            }
            let target = Target {
                group: info.group,
                version: info.version,
                resource: info.plural,
            };
            if plain.matches(attrs, target) && names_match(rule) {
                return Some(Hit::Other(info));
            }
        }
    }
    None
}

/// A group, version and kind of an `AdmissionRequest`.
#[derive(serde::Serialize)]
struct Gvk<'a> {
    group: &'a str,
    version: &'a str,
    kind: &'a str,
}

/// A group, version and resource of an `AdmissionRequest`.
#[derive(serde::Serialize)]
struct Gvr<'a> {
    group: &'a str,
    version: &'a str,
    resource: &'a str,
}

/// The requesting user of an `AdmissionRequest` (`authentication.k8s.io`
/// `UserInfo`).
#[derive(serde::Serialize)]
struct User<'a> {
    username: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    uid: &'a str,
    groups: &'a [String],
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    extra: &'a std::collections::BTreeMap<String, Vec<String>>,
}

/// The options of an `AdmissionRequest` (`CreateOptions`, …).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Options {
    kind: &'static str,
    api_version: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dry_run: Option<[&'static str; 1]>,
}

/// An `AdmissionRequest` (admission.k8s.io) borrowing the request's
/// attributes and objects: serialized straight into an `AdmissionReview`
/// body, or made the JSON value CEL's `request` variable is
/// ([`admission_request`]).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest<'a> {
    uid: &'a str,
    kind: Gvk<'a>,
    resource: Gvr<'a>,
    #[serde(skip_serializing_if = "str::is_empty")]
    sub_resource: &'a str,
    request_kind: Gvk<'a>,
    request_resource: Gvr<'a>,
    #[serde(skip_serializing_if = "str::is_empty")]
    request_sub_resource: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'a str,
    operation: &'static str,
    user_info: User<'a>,
    object: Option<&'a Value>,
    old_object: Option<&'a Value>,
    dry_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    options: Option<Options>,
}

impl<'a> AdmissionRequest<'a> {
    /// The request `attrs` describes, for `target` (the resource in the
    /// version the webhook or policy matched) of kind `target_kind`, with
    /// the objects in that version; `uid` identifies it.
    pub fn new(
        uid: &'a str,
        attrs: &'a Attributes,
        target: Target<'a>,
        target_kind: &'a str,
        object: Option<&'a Value>,
        old_object: Option<&'a Value>,
    ) -> Self {
        let options_kind = match attrs.operation() {
            Operation::Create => Some("CreateOptions"),
            Operation::Update => Some("UpdateOptions"),
            Operation::Delete => Some("DeleteOptions"),
            Operation::Connect => None,
        };
        AdmissionRequest {
            uid,
            kind: Gvk {
                group: target.group,
                version: target.version,
                kind: target_kind,
            },
            resource: Gvr {
                group: target.group,
                version: target.version,
                resource: target.resource,
            },
            sub_resource: &attrs.subresource,
            request_kind: Gvk {
                group: &attrs.group,
                version: &attrs.version,
                kind: &attrs.kind,
            },
            request_resource: Gvr {
                group: &attrs.group,
                version: &attrs.version,
                resource: &attrs.resource,
            },
            request_sub_resource: &attrs.subresource,
            name: &attrs.name,
            namespace: &attrs.namespace,
            operation: attrs.operation().as_str(),
            user_info: User {
                username: &attrs.user.username,
                uid: &attrs.user.uid,
                groups: &attrs.user.groups,
                extra: &attrs.user.extra,
            },
            object,
            old_object,
            dry_run: attrs.dry_run,
            options: options_kind.map(|kind| Options {
                kind,
                api_version: "meta.k8s.io/v1",
                dry_run: attrs.dry_run.then_some(["All"]),
            }),
        }
    }
}

/// The `AdmissionRequest` a webhook receives (and CEL's `request`
/// variable), as a JSON value: see [`AdmissionRequest::new`].
pub fn admission_request(
    uid: &str,
    attrs: &Attributes,
    target: Target<'_>,
    target_kind: &str,
    object: Option<&Value>,
    old_object: Option<&Value>,
) -> Value {
    serde_json::to_value(AdmissionRequest::new(
        uid,
        attrs,
        target,
        target_kind,
        object,
        old_object,
    ))
    .unwrap_or(Value::Null)
}

/// The ~1 KiB flunder the admission timing loops evaluate over.
#[cfg(test)]
pub(crate) fn timing_flunder() -> Value {
    let labels: serde_json::Map<String, Value> = (0..8)
        .map(|i| (format!("label-{i}"), Value::from(format!("value-{i}"))))
        .collect();
    serde_json::json!({
        "apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
        "metadata": {"name": "bench-flunder-0001", "namespace": "default", "labels": labels,
            "annotations": {"note": "x".repeat(400)}},
        "spec": {"reference": "some-reference", "referenceType": "Flunder"},
    })
}

/// The rounds of an admission timing loop: the environment variable
/// `name`, or a few for the test suite.
#[cfg(test)]
pub(crate) fn timing_rounds(name: &str) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(op: Operation, resource: &str, sub: &str, ns: &str) -> Attributes {
        Attributes {
            operation: Some(op),
            group: "wardle.example.com".into(),
            version: "v1beta1".into(),
            kind: "Flunder".into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            ..Default::default()
        }
    }

    fn rule(ops: &[&str], resources: &[&str], scope: Option<&str>) -> RuleWithOperations {
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        RuleWithOperations {
            operations: v(ops),
            api_groups: v(&["wardle.example.com"]),
            api_versions: v(&["*"]),
            resources: v(resources),
            scope: scope.map(str::to_string),
        }
    }

    fn target(a: &Attributes) -> Target<'_> {
        Target {
            group: &a.group,
            version: &a.version,
            resource: &a.resource,
        }
    }

    /// Upstream's `rules.Matcher.resource`: `*` is every resource but no
    /// subresource, `*/*` both, `*/status` every status; `flunders/*`
    /// also matches the main resource (the `*` matches an empty
    /// subresource).
    #[test]
    fn resources_and_subresources() {
        let main = attrs(Operation::Create, "flunders", "", "ns");
        let status = attrs(Operation::Update, "flunders", "status", "ns");
        let all_ops = ["*"];
        for (resources, main_ok, status_ok) in [
            (vec!["*"], true, false),
            (vec!["*/*"], true, true),
            (vec!["*/status"], false, true),
            (vec!["flunders"], true, false),
            (vec!["flunders/*"], true, true),
            (vec!["fischers"], false, false),
        ] {
            let r = rule(&all_ops, &resources, None);
            assert_eq!(
                rule_matches(&r, &main, target(&main)),
                main_ok,
                "{resources:?}"
            );
            assert_eq!(
                rule_matches(&r, &status, target(&status)),
                status_ok,
                "{resources:?}"
            );
        }
    }

    #[test]
    fn operations_and_scope() {
        let create = attrs(Operation::Create, "flunders", "", "ns");
        assert!(rule_matches(
            &rule(&["CREATE"], &["*"], None),
            &create,
            target(&create)
        ));
        assert!(!rule_matches(
            &rule(&["UPDATE"], &["*"], None),
            &create,
            target(&create)
        ));
        assert!(rule_matches(
            &rule(&["*"], &["*"], Some("Namespaced")),
            &create,
            target(&create)
        ));
        assert!(!rule_matches(
            &rule(&["*"], &["*"], Some("Cluster")),
            &create,
            target(&create)
        ));
        let cluster = attrs(Operation::Create, "fischers", "", "");
        assert!(rule_matches(
            &rule(&["*"], &["*"], Some("Cluster")),
            &cluster,
            target(&cluster)
        ));
    }

    #[test]
    fn object_selector_matches_new_or_old() {
        let selector = LabelSelector {
            match_labels: [("team".to_string(), "a".to_string())].into(),
            ..Default::default()
        };
        let mut a = attrs(Operation::Update, "flunders", "", "ns");
        a.object = Some(json!({"metadata": {"labels": {"team": "b"}}}));
        a.old_object = Some(json!({"metadata": {"labels": {"team": "a"}}}));
        assert!(object_selector_matches(Some(&selector), &a));
        a.old_object = None;
        assert!(!object_selector_matches(Some(&selector), &a));
        assert!(object_selector_matches(None, &a));
    }

    /// Labels are read in place: values that are not strings are no
    /// labels, and a missing object has none.
    #[test]
    fn object_selector_reads_string_labels() {
        let exists = LabelSelector {
            match_expressions: vec![
                apiforge_core::builtin::admissionregistration_v1::LabelSelectorRequirement {
                    key: "team".into(),
                    operator: "DoesNotExist".into(),
                    values: vec![],
                },
            ],
            ..Default::default()
        };
        let mut a = attrs(Operation::Create, "flunders", "", "ns");
        a.object = Some(json!({"metadata": {"labels": {"team": 1}}}));
        assert!(object_selector_matches(Some(&exists), &a));
        a.object = Some(json!({"metadata": {"labels": {"team": "a"}}}));
        assert!(!object_selector_matches(Some(&exists), &a));
        a.object = Some(json!({"metadata": {}}));
        assert!(object_selector_matches(Some(&exists), &a));
        a.object = None;
        assert!(!object_selector_matches(Some(&exists), &a));
    }

    /// The policies' `matchesResourceRules`: a rule with `resourceNames`
    /// matches only those names (the request's, else the new object's).
    #[test]
    fn named_rules_and_resource_names() {
        let named = |names: &[&str]| NamedRuleWithOperations {
            resource_names: names.iter().map(|s| s.to_string()).collect(),
            operations: vec!["*".into()],
            api_groups: vec!["wardle.example.com".into()],
            api_versions: vec!["*".into()],
            resources: vec!["flunders".into()],
            scope: None,
        };
        let mut a = attrs(Operation::Create, "flunders", "", "ns");
        a.object = Some(json!({"metadata": {"name": "one"}}));
        let hit = named_rules_match(&[named(&[])], true, &a).expect("any name");
        assert_eq!(hit.version, "v1beta1");
        let own = named_rules_hit(&[named(&[])], true, &a).expect("any name");
        assert!(matches!(own, Hit::Own));
        assert_eq!(own.version(&a), "v1beta1");
        assert_eq!(own.matched(&a), hit);
        assert!(named_rules_hit(&[], true, &a).is_none());
        assert!(named_rules_match(&[named(&["one", "two"])], true, &a).is_some());
        assert!(named_rules_match(&[named(&["two"])], true, &a).is_none());
        a.name = "two".into();
        assert!(named_rules_match(&[named(&["two"])], false, &a).is_some());
        let mut other = named(&[]);
        other.resources = vec!["fischers".into()];
        assert!(named_rules_match(&[other], true, &a).is_none());
    }

    #[test]
    fn match_conditions() {
        let conds = Conditions::compile(&[
            MatchCondition {
                name: "not-kube-system".into(),
                expression: "request.namespace != 'kube-system'".into(),
            },
            MatchCondition {
                name: "labelled".into(),
                expression: "has(object.metadata.labels) && 'x' in object.metadata.labels".into(),
            },
        ]);
        let obj = json!({"metadata": {"labels": {"x": "1"}}});
        let req = json!({"namespace": "default"});
        let ctx = Context::new(Arc::new(super::super::NoLookup));
        let attrs = Attributes::default();
        assert_eq!(
            conds.evaluate(Some(&obj), None, &req, &ctx, &attrs),
            Ok(true)
        );
        let req = json!({"namespace": "kube-system"});
        assert_eq!(
            conds.evaluate(Some(&obj), None, &req, &ctx, &attrs),
            Ok(false)
        );
        let bad = Conditions::compile(&[MatchCondition {
            name: "broken".into(),
            expression: "object.nope.deeper == 1".into(),
        }]);
        let err = bad
            .evaluate(Some(&obj), None, &json!({}), &ctx, &attrs)
            .expect_err("no such key");
        assert!(err.starts_with("matchCondition \"broken\": "), "{err}");
    }

    /// Conditions answered by their direct programs decide as the
    /// interpreter alone does, alongside ones only the interpreter answers
    /// (in either order), with the same errors.
    #[test]
    fn direct_conditions_decide_as_the_interpreter() {
        let sources = [
            "request.operation in ['CREATE', 'UPDATE']",
            "!(request.resource.group == 'coordination.k8s.io' && request.resource.resource == 'leases')",
            "!('system:nodes' in request.userInfo.groups)",
            "object.metadata.name.startsWith('a')",
            "has(object.spec) && object.spec.replicas > 2",
            "object.nope.deeper == 1",
            "oldObject == null",
        ];
        let obj = json!({"metadata": {"name": "abc"}, "spec": {"replicas": 3}});
        let requests = [
            json!({"operation": "CREATE", "resource": {"group": "", "resource": "pods"},
                "userInfo": {"groups": ["system:authenticated"]}}),
            json!({"operation": "DELETE", "resource": {"group": "coordination.k8s.io", "resource": "leases"},
                "userInfo": {"groups": ["system:nodes"]}}),
            json!({"operation": "UPDATE"}),
        ];
        let ctx = Context::new(Arc::new(super::super::NoLookup));
        let attrs = Attributes::default();
        let mut checked = 0;
        for (i, first) in sources.iter().enumerate() {
            for second in &sources[i..] {
                let conditions: Vec<MatchCondition> = [first, second]
                    .iter()
                    .enumerate()
                    .map(|(n, e)| MatchCondition {
                        name: format!("c{n}"),
                        expression: e.to_string(),
                    })
                    .collect();
                let direct = Conditions::compile(&conditions);
                let mut interpreted = Conditions::compile(&conditions);
                for c in &mut interpreted.0 {
                    c.direct = None;
                }
                for req in &requests {
                    for old in [None, Some(&obj)] {
                        assert_eq!(
                            direct.evaluate(Some(&obj), old, req, &ctx, &attrs),
                            interpreted.evaluate(Some(&obj), old, req, &ctx, &attrs),
                            "{first} / {second} / {req}"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 28 * 6);
        // The common shapes of upstream's examples are in the subset.
        let compiled = Conditions::compile(
            &sources[..3]
                .iter()
                .map(|e| MatchCondition {
                    name: "c".into(),
                    expression: e.to_string(),
                })
                .collect::<Vec<_>>(),
        );
        assert!(compiled.0.iter().all(|c| c.direct.is_some()));
    }

    /// Timing loop: a webhook's two conditions in upstream's examples'
    /// shapes over a ~1 KiB object, by their direct programs and by the
    /// interpreter alone. A few rounds in the suite (no timing is
    /// asserted); for figures run `CONDITION_TIMING_ROUNDS=20000 cargo test
    /// --release -p apiforge-server --lib condition_timing -- --nocapture`.
    #[test]
    fn condition_timing() {
        use std::time::Instant;
        let conditions = [
            "!(request.resource.group == 'coordination.k8s.io' && request.resource.resource == 'leases')",
            "!('system:nodes' in request.userInfo.groups)",
        ]
        .map(|e| MatchCondition {
            name: "c".into(),
            expression: e.into(),
        });
        let direct = Conditions::compile(&conditions);
        let mut interpreted = Conditions::compile(&conditions);
        for c in &mut interpreted.0 {
            c.direct = None;
        }
        let object = timing_flunder();
        let request = json!({"uid": "u", "operation": "CREATE", "namespace": "default",
            "resource": {"group": "wardle.example.com", "version": "v1beta1", "resource": "flunders"},
            "userInfo": {"username": "admin", "groups": ["system:masters", "system:authenticated"]}});
        let ctx = Context::new(Arc::new(super::super::NoLookup));
        let attrs = Attributes::default();
        let n = timing_rounds("CONDITION_TIMING_ROUNDS");
        let time = |c: &Conditions| {
            let t = Instant::now();
            for _ in 0..n {
                assert_eq!(
                    c.evaluate(Some(&object), None, &request, &ctx, &attrs),
                    Ok(true)
                );
            }
            t.elapsed().as_secs_f64() * 1e6 / f64::from(n)
        };
        let (old, new) = (time(&interpreted), time(&direct));
        println!("2 conditions: interpreted {old:.1} µs, direct {new:.1} µs per request");
    }

    /// Allows what `alice` asks.
    struct AllowAlice;

    impl apiforge_core::cel_authorizer::Checker for AllowAlice {
        fn check(
            &self,
            request: &apiforge_core::cel_authorizer::CheckRequest,
        ) -> apiforge_core::cel_authorizer::Answer {
            apiforge_core::cel_authorizer::Answer {
                allowed: request.user.name == "alice",
                ..Default::default()
            }
        }
    }

    /// Conditions ask the context's authorizer about the request's user;
    /// without an authorizer, `authorizer` is undeclared.
    #[test]
    fn match_conditions_ask_the_authorizer() {
        let conds = Conditions::compile(&[MatchCondition {
            name: "may-delete".into(),
            expression: "authorizer.requestResource.check('delete').allowed()".into(),
        }]);
        let mut ctx = Context::new(Arc::new(super::super::NoLookup));
        let mut attrs = Attributes {
            resource: "flunders".into(),
            ..Default::default()
        };
        let err = conds
            .evaluate(None, None, &json!({}), &ctx, &attrs)
            .expect_err("undeclared");
        assert!(err.contains("authorizer"), "{err}");
        ctx.authorizer = Some(Arc::new(AllowAlice));
        assert_eq!(
            conds.evaluate(None, None, &json!({}), &ctx, &attrs),
            Ok(false)
        );
        attrs.user.username = "alice".into();
        assert_eq!(
            conds.evaluate(None, None, &json!({}), &ctx, &attrs),
            Ok(true)
        );
    }
}
