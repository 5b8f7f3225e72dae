//! Validation of the webhook configurations, as upstream's
//! `pkg/apis/admissionregistration/validation` words it (with the URL and
//! service checks of `k8s.io/apiserver/pkg/util/webhook`): the same field
//! paths and messages.

use std::collections::BTreeSet;

use super::mutating_policy::{MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, Mutation};
use super::policy::{
    MatchResources, NamedRuleWithOperations, ParamKind, ParamRef, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyStatus, Validation, Variable,
};
use super::{
    LabelSelector, MatchCondition, MutatingWebhook, MutatingWebhookConfiguration,
    RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use crate::validation::{
    ErrorList, FieldError, FieldPath, is_dns1035_label, is_dns1123_subdomain, is_qualified_name,
    is_valid_label_value, is_valid_path_segment_name,
};

/// The operations a rule may name.
const OPERATIONS: [&str; 5] = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
/// `failurePolicy` values.
const FAILURE_POLICIES: [&str; 2] = ["Fail", "Ignore"];
/// `matchPolicy` values.
const MATCH_POLICIES: [&str; 2] = ["Equivalent", "Exact"];
/// `reinvocationPolicy` values.
const REINVOCATION_POLICIES: [&str; 2] = ["IfNeeded", "Never"];
/// A rule's `scope` values.
const SCOPES: [&str; 3] = ["*", "Cluster", "Namespaced"];
/// Every side effect class (what an update keeps accepting when the old
/// object already had one outside [`NO_SIDE_EFFECTS`]).
const SIDE_EFFECTS: [&str; 4] = ["None", "NoneOnDryRun", "Some", "Unknown"];
/// The side effect classes v1 accepts on create.
const NO_SIDE_EFFECTS: [&str; 2] = ["None", "NoneOnDryRun"];
/// The AdmissionReview versions this server understands.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];
/// The most match conditions a webhook may have.
const MAX_MATCH_CONDITIONS: usize = 64;

/// Upstream's `validationOptions` (the ones webhook configurations use).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Skip the match conditions (an update that leaves them as they were).
    pub ignore_match_conditions: bool,
    /// Accept only `None` and `NoneOnDryRun` side effects.
    pub require_no_side_effects: bool,
    /// Require `v1` or `v1beta1` among `admissionReviewVersions`.
    pub require_recognized_review_version: bool,
    /// Reject repeated webhook names.
    pub require_unique_names: bool,
    /// Accept selector requirement values that are not label values.
    pub allow_invalid_label_value_in_selector: bool,
}

impl Options {
    /// What a create checks: everything.
    pub const CREATE: Options = Options {
        ignore_match_conditions: false,
        require_no_side_effects: true,
        require_recognized_review_version: true,
        require_unique_names: true,
        allow_invalid_label_value_in_selector: false,
    };

    fn update(old: &[Hook<'_>], new: &[Hook<'_>]) -> Options {
        let conditions_same = old.len() == new.len()
            && old
                .iter()
                .zip(new)
                .all(|(a, b)| a.match_conditions == b.match_conditions);
        let mut names = BTreeSet::new();
        Options {
            ignore_match_conditions: conditions_same,
            require_no_side_effects: old.iter().all(|h| {
                h.side_effects
                    .as_deref()
                    .is_some_and(|s| NO_SIDE_EFFECTS.contains(&s))
            }),
            require_recognized_review_version: old.iter().all(|h| {
                h.admission_review_versions.is_empty()
                    || h.admission_review_versions
                        .iter()
                        .any(|v| REVIEW_VERSIONS.contains(&v.as_str()))
            }),
            require_unique_names: old.iter().all(|h| names.insert(h.name)),
            allow_invalid_label_value_in_selector: old.iter().any(|h| {
                [h.namespace_selector, h.object_selector]
                    .into_iter()
                    .flatten()
                    .any(|s| !label_selector(s, &FieldPath::new("x"), false).is_empty())
            }),
        }
    }

    /// `ValidateMutatingWebhookConfigurationUpdate`'s options: what the old
    /// object already had stays acceptable.
    pub fn mutating_update(
        new: &MutatingWebhookConfiguration,
        old: &MutatingWebhookConfiguration,
    ) -> Options {
        let o: Vec<Hook> = old.webhooks.iter().map(Hook::mutating).collect();
        let n: Vec<Hook> = new.webhooks.iter().map(Hook::mutating).collect();
        Options::update(&o, &n)
    }

    /// `ValidateValidatingWebhookConfigurationUpdate`'s options.
    pub fn validating_update(
        new: &ValidatingWebhookConfiguration,
        old: &ValidatingWebhookConfiguration,
    ) -> Options {
        let o: Vec<Hook> = old.webhooks.iter().map(Hook::validating).collect();
        let n: Vec<Hook> = new.webhooks.iter().map(Hook::validating).collect();
        Options::update(&o, &n)
    }
}

/// The fields both webhook kinds share (and the mutating one's
/// `reinvocationPolicy`).
struct Hook<'a> {
    name: &'a str,
    client_config: &'a WebhookClientConfig,
    rules: &'a [RuleWithOperations],
    failure_policy: &'a Option<String>,
    match_policy: &'a Option<String>,
    namespace_selector: Option<&'a LabelSelector>,
    object_selector: Option<&'a LabelSelector>,
    side_effects: &'a Option<String>,
    timeout_seconds: Option<i32>,
    admission_review_versions: &'a [String],
    reinvocation_policy: Option<&'a str>,
    match_conditions: &'a [MatchCondition],
}

impl<'a> Hook<'a> {
    fn mutating(h: &'a MutatingWebhook) -> Self {
        Hook {
            name: &h.name,
            client_config: &h.client_config,
            rules: &h.rules,
            failure_policy: &h.failure_policy,
            match_policy: &h.match_policy,
            namespace_selector: h.namespace_selector.as_ref(),
            object_selector: h.object_selector.as_ref(),
            side_effects: &h.side_effects,
            timeout_seconds: h.timeout_seconds,
            admission_review_versions: &h.admission_review_versions,
            reinvocation_policy: h.reinvocation_policy.as_deref(),
            match_conditions: &h.match_conditions,
        }
    }

    fn validating(h: &'a ValidatingWebhook) -> Self {
        Hook {
            name: &h.name,
            client_config: &h.client_config,
            rules: &h.rules,
            failure_policy: &h.failure_policy,
            match_policy: &h.match_policy,
            namespace_selector: h.namespace_selector.as_ref(),
            object_selector: h.object_selector.as_ref(),
            side_effects: &h.side_effects,
            timeout_seconds: h.timeout_seconds,
            admission_review_versions: &h.admission_review_versions,
            reinvocation_policy: None,
            match_conditions: &h.match_conditions,
        }
    }
}

/// `validateMutatingWebhookConfiguration`.
pub fn validate_mutating(c: &MutatingWebhookConfiguration, opts: &Options) -> ErrorList {
    let hooks: Vec<Hook> = c.webhooks.iter().map(Hook::mutating).collect();
    validate_configuration(&c.metadata.name, &hooks, opts)
}

/// `validateValidatingWebhookConfiguration`.
pub fn validate_validating(c: &ValidatingWebhookConfiguration, opts: &Options) -> ErrorList {
    let hooks: Vec<Hook> = c.webhooks.iter().map(Hook::validating).collect();
    validate_configuration(&c.metadata.name, &hooks, opts)
}

fn validate_configuration(name: &str, hooks: &[Hook<'_>], opts: &Options) -> ErrorList {
    let mut errs = ErrorList::default();
    if !name.is_empty() {
        for msg in is_dns1123_subdomain(name) {
            errs.push(FieldError::invalid("metadata.name", name, msg));
        }
    }
    let mut names = BTreeSet::new();
    for (i, hook) in hooks.iter().enumerate() {
        let path = FieldPath::new("webhooks").index(i);
        errs.extend(validate_hook(hook, opts, &path));
        errs.extend(review_versions(
            hook.admission_review_versions,
            opts.require_recognized_review_version,
            &path.child("admissionReviewVersions"),
        ));
        if opts.require_unique_names && !hook.name.is_empty() && !names.insert(hook.name) {
            errs.push(FieldError::duplicate(path.child("name"), hook.name));
        }
    }
    errs
}

fn validate_hook(hook: &Hook<'_>, opts: &Options, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    fully_qualified_name(&mut errs, &path.child("name"), hook.name);
    for (i, rule) in hook.rules.iter().enumerate() {
        errs.extend(rule_with_operations(rule, &path.child("rules").index(i)));
    }
    let enums = [
        ("failurePolicy", hook.failure_policy, &FAILURE_POLICIES[..]),
        ("matchPolicy", hook.match_policy, &MATCH_POLICIES[..]),
    ];
    for (field, value, allowed) in enums {
        if let Some(v) = value
            && !allowed.contains(&v.as_str())
        {
            errs.push(FieldError::not_supported(
                path.child(field),
                v.as_str(),
                allowed,
            ));
        }
    }
    let allowed_side_effects: &[&str] = if opts.require_no_side_effects {
        &NO_SIDE_EFFECTS
    } else {
        &SIDE_EFFECTS
    };
    match hook.side_effects {
        None => errs.push(FieldError::required(
            path.child("sideEffects"),
            format!("must specify one of {}", allowed_side_effects.join(", ")),
        )),
        Some(s) if !allowed_side_effects.contains(&s.as_str()) => errs.push(
            FieldError::not_supported(path.child("sideEffects"), s.as_str(), allowed_side_effects),
        ),
        Some(_) => {}
    }
    if let Some(t) = hook.timeout_seconds
        && !(1..=30).contains(&t)
    {
        errs.push(FieldError::invalid(
            path.child("timeoutSeconds"),
            t,
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    let allow_invalid = opts.allow_invalid_label_value_in_selector;
    if let Some(s) = hook.namespace_selector {
        errs.extend(label_selector(
            s,
            &path.child("namespaceSelector"),
            allow_invalid,
        ));
    }
    if let Some(s) = hook.object_selector {
        errs.extend(label_selector(
            s,
            &path.child("objectSelector"),
            allow_invalid,
        ));
    }
    if let Some(p) = hook.reinvocation_policy
        && !REINVOCATION_POLICIES.contains(&p)
    {
        errs.push(FieldError::not_supported(
            path.child("reinvocationPolicy"),
            p,
            &REINVOCATION_POLICIES,
        ));
    }
    errs.extend(client_config(
        hook.client_config,
        &path.child("clientConfig"),
    ));
    if !opts.ignore_match_conditions {
        errs.extend(match_conditions(
            hook.match_conditions,
            &path.child("matchConditions"),
        ));
    }
    errs
}

/// Upstream's `IsFullyQualifiedName`: a DNS-1123 subdomain of at least
/// three dot-separated segments.
fn fully_qualified_name(errs: &mut ErrorList, path: &FieldPath, name: &str) {
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
        return;
    }
    let msgs = is_dns1123_subdomain(name);
    if !msgs.is_empty() {
        errs.push(FieldError::invalid(path, name, msgs.join(",")));
        return;
    }
    if name.split('.').count() < 3 {
        errs.push(FieldError::invalid(
            path,
            name,
            "should be a domain with at least three segments separated by dots",
        ));
    }
}

/// `validateAdmissionReviewVersions`.
fn review_versions(versions: &[String], require_recognized: bool, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    if versions.is_empty() {
        errs.push(FieldError::required(
            path,
            format!("must specify one of {}", REVIEW_VERSIONS.join(", ")),
        ));
        return errs;
    }
    let mut seen = BTreeSet::new();
    let mut recognized = false;
    for (i, v) in versions.iter().enumerate() {
        if !seen.insert(v.as_str()) {
            errs.push(FieldError::invalid(
                path.index(i),
                v.as_str(),
                "duplicate version",
            ));
            continue;
        }
        for msg in is_dns1035_label(v) {
            errs.push(FieldError::invalid(path.index(i), v.as_str(), msg));
        }
        recognized |= REVIEW_VERSIONS.contains(&v.as_str());
    }
    if require_recognized && !recognized {
        errs.push(FieldError::invalid(
            path,
            serde_json::json!(versions),
            format!(
                "must include at least one of {}",
                REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
    errs
}

/// A list of a rule that must not be empty, and where `*` stands alone
/// (`if '*' is present, must not specify other <what>`).
fn required_with_lone_wildcard(
    values: &[String],
    path: &FieldPath,
    what: &str,
    errs: &mut ErrorList,
) {
    if values.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    if values.len() > 1 && values.iter().any(|v| v == "*") {
        errs.push(FieldError::invalid(
            path,
            serde_json::json!(values),
            format!("if '*' is present, must not specify other {what}"),
        ));
    }
}

/// `validateRuleWithOperations` (subresources allowed).
fn rule_with_operations(rule: &RuleWithOperations, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    let ops = path.child("operations");
    required_with_lone_wildcard(&rule.operations, &ops, "operations", &mut errs);
    for (i, op) in rule.operations.iter().enumerate() {
        if !OPERATIONS.contains(&op.as_str()) {
            errs.push(FieldError::not_supported(
                ops.index(i),
                op.as_str(),
                &OPERATIONS,
            ));
        }
    }
    let groups = path.child("apiGroups");
    required_with_lone_wildcard(&rule.api_groups, &groups, "API groups", &mut errs);
    let versions = path.child("apiVersions");
    required_with_lone_wildcard(&rule.api_versions, &versions, "API versions", &mut errs);
    for (i, v) in rule.api_versions.iter().enumerate() {
        if v.is_empty() {
            errs.push(FieldError::required(versions.index(i), ""));
        }
    }
    errs.extend(resources(&rule.resources, &path.child("resources")));
    if let Some(scope) = &rule.scope
        && !SCOPES.contains(&scope.as_str())
    {
        errs.push(FieldError::not_supported(
            path.child("scope"),
            scope.as_str(),
            &SCOPES,
        ));
    }
    errs
}

/// `validateResources`: `x/*` excludes other `x/...`, `*/y` excludes other
/// `.../y`, `*/*` stands alone and `*` excludes plain resources.
fn resources(resources: &[String], path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    if resources.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    let mut wildcard_sub_of = BTreeSet::new();
    let mut wildcard_res_for = BTreeSet::new();
    let mut double_wildcard = false;
    let mut single_wildcard = false;
    let mut plain = false;
    for (i, r) in resources.iter().enumerate() {
        if r.is_empty() {
            errs.push(FieldError::required(path.index(i), ""));
            continue;
        }
        double_wildcard |= r == "*/*";
        single_wildcard |= r == "*";
        let Some((res, sub)) = r.split_once('/') else {
            // Upstream keeps only the last plain entry's verdict.
            plain = r != "*";
            continue;
        };
        if wildcard_sub_of.contains(res) {
            errs.push(FieldError::invalid(
                path.index(i),
                r.as_str(),
                format!("if '{res}/*' is present, must not specify {r}"),
            ));
        }
        if wildcard_res_for.contains(sub) {
            errs.push(FieldError::invalid(
                path.index(i),
                r.as_str(),
                format!("if '*/{sub}' is present, must not specify {r}"),
            ));
        }
        if sub == "*" {
            wildcard_sub_of.insert(res);
        }
        if res == "*" {
            wildcard_res_for.insert(sub);
        }
    }
    if resources.len() > 1 && double_wildcard {
        errs.push(FieldError::invalid(
            path,
            serde_json::json!(resources),
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single_wildcard && plain {
        errs.push(FieldError::invalid(
            path,
            serde_json::json!(resources),
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
    errs
}

/// metav1 validation's `ValidateLabelSelector`.
pub(crate) fn label_selector(
    s: &LabelSelector,
    path: &FieldPath,
    allow_invalid_values: bool,
) -> ErrorList {
    let mut errs = ErrorList::default();
    let labels = path.child("matchLabels");
    for (k, v) in &s.match_labels {
        for msg in is_qualified_name(k) {
            errs.push(FieldError::invalid(&labels, k.as_str(), msg));
        }
        for msg in is_valid_label_value(v) {
            errs.push(FieldError::invalid(&labels, v.as_str(), msg));
        }
    }
    for (i, r) in s.match_expressions.iter().enumerate() {
        let p = path.child("matchExpressions").index(i);
        match r.operator.as_str() {
            "In" | "NotIn" => {
                if r.values.is_empty() {
                    errs.push(FieldError::required(
                        p.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !r.values.is_empty() {
                    errs.push(FieldError::forbidden(
                        p.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            op => errs.push(FieldError::invalid(
                p.child("operator"),
                op,
                "not a valid selector operator",
            )),
        }
        for msg in is_qualified_name(&r.key) {
            errs.push(FieldError::invalid(p.child("key"), r.key.as_str(), msg));
        }
        if !allow_invalid_values {
            for (j, v) in r.values.iter().enumerate() {
                for msg in is_valid_label_value(v) {
                    errs.push(FieldError::invalid(
                        p.child("values").index(j),
                        v.as_str(),
                        msg,
                    ));
                }
            }
        }
    }
    errs
}

/// The `clientConfig` switch: exactly one of `url` and `service`, each
/// checked as `k8s.io/apiserver/pkg/util/webhook` does.
fn client_config(cc: &WebhookClientConfig, path: &FieldPath) -> ErrorList {
    match (&cc.url, &cc.service) {
        (Some(url), None) => webhook_url(&path.child("url"), url),
        (None, Some(s)) => webhook_service(
            &path.child("service"),
            &s.namespace,
            &s.name,
            s.path.as_deref(),
            s.port.unwrap_or(443),
        ),
        _ => {
            let mut errs = ErrorList::default();
            errs.push(FieldError::required(
                path,
                "exactly one of url or service is required",
            ));
            errs
        }
    }
}

/// `ValidateWebhookURL` with https required.
pub fn webhook_url(path: &FieldPath, url: &str) -> ErrorList {
    const FORM: &str = "; desired format: https://host[/path]";
    let mut errs = ErrorList::default();
    let u = match GoUrl::parse(url) {
        Ok(u) => u,
        Err(e) => {
            errs.push(FieldError::required(
                path,
                format!("url must be a valid URL: {e}{FORM}"),
            ));
            return errs;
        }
    };
    if u.scheme != "https" {
        errs.push(FieldError::invalid(
            path,
            u.scheme.as_str(),
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if u.host.is_empty() {
        errs.push(FieldError::invalid(
            path,
            u.host.as_str(),
            format!("host must be specified{FORM}"),
        ));
    }
    if let Some(user) = &u.user {
        errs.push(FieldError::invalid(
            path,
            user.as_str(),
            "user information is not permitted in the URL",
        ));
    }
    if !u.fragment.is_empty() {
        errs.push(FieldError::invalid(
            path,
            u.fragment.as_str(),
            "fragments are not permitted in the URL",
        ));
    }
    if !u.raw_query.is_empty() {
        errs.push(FieldError::invalid(
            path,
            u.raw_query.as_str(),
            "query parameters are not permitted in the URL",
        ));
    }
    errs
}

/// `ValidateWebhookService`.
pub fn webhook_service(
    path: &FieldPath,
    namespace: &str,
    name: &str,
    url_path: Option<&str>,
    port: i32,
) -> ErrorList {
    let mut errs = ErrorList::default();
    if name.is_empty() {
        errs.push(FieldError::required(
            path.child("name"),
            "service name is required",
        ));
    }
    if namespace.is_empty() {
        errs.push(FieldError::required(
            path.child("namespace"),
            "service namespace is required",
        ));
    }
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid(
            path.child("port"),
            port,
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let Some(p) = url_path else {
        return errs;
    };
    if p.is_empty() || p == "/" {
        return errs;
    }
    let field = path.child("path");
    if p == "//" {
        errs.push(FieldError::invalid(
            &field,
            p,
            "segment[0] may not be empty",
        ));
        return errs;
    }
    if !p.starts_with('/') {
        errs.push(FieldError::invalid(&field, p, "must start with a '/'"));
    }
    // Upstream drops the first byte whatever it is, then one trailing '/'.
    let rest = p.get(1..).unwrap_or_default();
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    for (i, step) in rest.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                &field,
                p,
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for msg in is_dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                &field,
                p,
                format!("segment[{i}]: {msg}"),
            ));
        }
    }
    errs
}

/// `validateMatchConditions`: at most 64, unique names, each a qualified
/// name with an expression that compiles.
fn match_conditions(conditions: &[MatchCondition], path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errs.push(FieldError::too_many(
            path,
            conditions.len(),
            MAX_MATCH_CONDITIONS,
        ));
    }
    let mut names = BTreeSet::new();
    for (i, c) in conditions.iter().enumerate() {
        let p = path.index(i);
        let expression = c.expression.trim();
        if expression.is_empty() {
            errs.push(FieldError::required(p.child("expression"), ""));
        } else if let Err(e) = cel::Program::compile(expression) {
            errs.push(FieldError::invalid(
                p.child("expression"),
                c.expression.as_str(),
                format!("compilation failed: {e}"),
            ));
        }
        if c.name.is_empty() {
            errs.push(FieldError::required(p.child("name"), ""));
        } else {
            for msg in is_qualified_name(&c.name) {
                errs.push(FieldError::invalid(p.child("name"), c.name.as_str(), msg));
            }
            if !names.insert(c.name.as_str()) {
                errs.push(FieldError::duplicate(p.child("name"), c.name.as_str()));
            }
        }
    }
    errs
}

/// The parts of a URL that `ValidateWebhookURL` reads, split as Go's
/// `net/url.Parse` splits them.
#[derive(Debug, Default, PartialEq)]
struct GoUrl {
    scheme: String,
    user: Option<String>,
    host: String,
    raw_query: String,
    fragment: String,
}

impl GoUrl {
    /// Splits `raw` as `url.Parse` does; the error reads as Go's
    /// (`parse "<url>": <reason>`).
    fn parse(raw: &str) -> Result<GoUrl, String> {
        let fail = |why: &str| format!("parse {raw:?}: {why}");
        let (rest, fragment) = raw.split_once('#').unwrap_or((raw, ""));
        if rest.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err(fail("net/url: invalid control character in URL"));
        }
        let mut u = GoUrl {
            fragment: fragment.to_string(),
            ..GoUrl::default()
        };
        let mut rest = rest;
        // getScheme: letters first, then letters, digits, '+', '-', '.'.
        for (i, c) in rest.char_indices() {
            if c.is_ascii_alphabetic() {
                continue;
            }
            if c.is_ascii_digit() || matches!(c, '+' | '-' | '.') {
                if i == 0 {
                    break;
                }
                continue;
            }
            if c == ':' {
                if i == 0 {
                    return Err(fail("missing protocol scheme"));
                }
                u.scheme = rest[..i].to_ascii_lowercase();
                rest = &rest[i + 1..];
            }
            break;
        }
        if rest.ends_with('?') && rest.matches('?').count() == 1 {
            rest = &rest[..rest.len() - 1];
        } else if let Some((r, q)) = rest.split_once('?') {
            rest = r;
            u.raw_query = q.to_string();
        }
        if !rest.starts_with('/') {
            if u.scheme.is_empty() {
                let first = rest.split('/').next().unwrap_or_default();
                if first.contains(':') {
                    return Err(fail("first path segment in URL cannot contain colon"));
                }
            }
            // An opaque URL (`scheme:opaque`) has no host.
            return Ok(u);
        }
        if let Some(after) = rest.strip_prefix("//")
            && (!u.scheme.is_empty() || !after.starts_with('/'))
        {
            let authority = after.split('/').next().unwrap_or_default();
            let host = match authority.rfind('@') {
                Some(at) => {
                    let user = &authority[..at];
                    if !user.bytes().all(valid_userinfo_byte) {
                        return Err(fail("net/url: invalid userinfo"));
                    }
                    u.user = Some(user.to_string());
                    &authority[at + 1..]
                }
                None => authority,
            };
            if !host.starts_with('[')
                && let Some((_, port)) = host.rsplit_once(':')
                && !port.bytes().all(|b| b.is_ascii_digit())
            {
                return Err(fail(&format!("invalid port \":{port}\" after host")));
            }
            u.host = host.to_string();
        }
        Ok(u)
    }
}

/// Go's `validUserinfo`: unreserved, sub-delims, ':' and '%'.
fn valid_userinfo_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b':'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b'%'
                | b'@'
        )
}

/// `supportedValidationPolicyReason`.
const POLICY_REASONS: [&str; 4] = [
    "Forbidden",
    "Invalid",
    "RequestEntityTooLarge",
    "Unauthorized",
];
/// `validValidationActions`.
const VALIDATION_ACTIONS: [&str; 3] = ["Audit", "Deny", "Warn"];
/// `maxAuditAnnotations`.
const MAX_AUDIT_ANNOTATIONS: usize = 20;
/// `maxAuditAnnotationValueExpressionLength`.
const MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH: usize = 5 * 1024;
/// Words a CEL identifier may not be (`celReserved`).
const CEL_RESERVED: [&str; 21] = crate::apiextensions::cost::RESERVED;

/// Compiles `expression` in the Kubernetes CEL environment: upstream's
/// `convertCELErrorToValidationError` of a compile error (`Invalid`, the
/// expression as the bad value, `compilation failed: ...`).
fn compile_check(errs: &mut ErrorList, path: FieldPath, expression: &str) {
    if let Err(e) = crate::apiextensions::cel_env().compile(expression) {
        errs.push(FieldError::invalid(
            path,
            expression,
            format!("compilation failed: {e}"),
        ));
    }
}

/// `isCELIdentifier`.
fn is_cel_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !CEL_RESERVED.contains(&name)
}

/// `ValidateValidatingAdmissionPolicy` (`ignore_match_conditions` on an
/// update that leaves them as they were).
pub fn validate_policy(p: &ValidatingAdmissionPolicy, ignore_match_conditions: bool) -> ErrorList {
    let mut errs = ErrorList::default();
    let name = &p.metadata.name;
    if !name.is_empty() {
        for msg in is_dns1123_subdomain(name) {
            errs.push(FieldError::invalid("metadata.name", name.as_str(), msg));
        }
    }
    let spec = &p.spec;
    let path = FieldPath::new("spec");
    match &spec.failure_policy {
        None => errs.push(FieldError::required(path.child("failurePolicy"), "")),
        Some(f) if !FAILURE_POLICIES.contains(&f.as_str()) => errs.push(FieldError::not_supported(
            path.child("failurePolicy"),
            f.as_str(),
            &FAILURE_POLICIES,
        )),
        Some(_) => {}
    }
    if let Some(pk) = &spec.param_kind {
        errs.extend(param_kind(pk, &path.child("paramKind")));
    }
    match &spec.match_constraints {
        None => errs.push(FieldError::required(path.child("matchConstraints"), "")),
        Some(m) => {
            errs.extend(match_resources(m, &path.child("matchConstraints")));
            if m.resource_rules.is_empty() {
                errs.push(FieldError::required(
                    path.child("matchConstraints").child("resourceRules"),
                    "",
                ));
            }
        }
    }
    if !ignore_match_conditions {
        errs.extend(match_conditions(
            &spec.match_conditions,
            &path.child("matchConditions"),
        ));
    }
    errs.extend(variables(&spec.variables, &path.child("variables")));
    if spec.validations.is_empty() && spec.audit_annotations.is_empty() {
        let msg = "validations or auditAnnotations must contain at least one item";
        errs.push(FieldError::required(path.child("validations"), msg));
        errs.push(FieldError::required(path.child("auditAnnotations"), msg));
        return errs;
    }
    for (i, v) in spec.validations.iter().enumerate() {
        errs.extend(validation_rule(v, &path.child("validations").index(i)));
    }
    let annotations = path.child("auditAnnotations");
    if spec.audit_annotations.len() > MAX_AUDIT_ANNOTATIONS {
        errs.push(FieldError::invalid(
            &annotations,
            serde_json::to_value(&spec.audit_annotations).unwrap_or_default(),
            format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
        ));
    }
    let mut keys = BTreeSet::new();
    for (i, a) in spec.audit_annotations.iter().enumerate() {
        let p = annotations.index(i);
        if name.is_empty() {
            errs.push(FieldError::invalid(
                p.child("key"),
                a.key.as_str(),
                "requires metadata.name be non-empty",
            ));
        } else {
            let qualified = format!("{name}/{}", a.key);
            for msg in is_qualified_name(&qualified) {
                errs.push(FieldError::invalid(p.child("key"), qualified.as_str(), msg));
            }
        }
        let value = a.value_expression.trim();
        if value.is_empty() {
            errs.push(FieldError::required(
                p.child("valueExpression"),
                "valueExpression is not specified",
            ));
        } else if value.len() > MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH {
            errs.push(FieldError::required(
                p.child("valueExpression"),
                format!(
                    "must not exceed {MAX_AUDIT_ANNOTATION_VALUE_EXPRESSION_LENGTH} bytes in length"
                ),
            ));
        } else {
            compile_check(&mut errs, p.child("valueExpression"), &a.value_expression);
        }
        if !keys.insert(a.key.as_str()) {
            errs.push(FieldError::duplicate(p.child("key"), a.key.as_str()));
        }
    }
    errs
}

/// `validateVariable` of each of a policy's variables.
fn variables(variables: &[Variable], path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    for (i, v) in variables.iter().enumerate() {
        let p = path.index(i);
        if v.name.trim().is_empty() {
            errs.push(FieldError::required(
                p.child("name"),
                "name is not specified",
            ));
        } else if !is_cel_identifier(&v.name) {
            errs.push(FieldError::invalid(
                p.child("name"),
                v.name.as_str(),
                "name is not a valid CEL identifier",
            ));
        }
        if v.expression.trim().is_empty() {
            errs.push(FieldError::required(
                p.child("expression"),
                "expression is not specified",
            ));
        } else {
            compile_check(&mut errs, p.child("expression"), &v.expression);
        }
    }
    errs
}

/// `validateValidation`.
fn validation_rule(v: &Validation, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    if v.expression.trim().is_empty() {
        errs.push(FieldError::required(
            path.child("expression"),
            "expression is not specified",
        ));
    } else {
        compile_check(&mut errs, path.child("expression"), &v.expression);
    }
    if !v.message_expression.is_empty() && v.message_expression.trim().is_empty() {
        errs.push(FieldError::invalid(
            path.child("messageExpression"),
            v.message_expression.as_str(),
            "must be non-empty if specified",
        ));
    } else if !v.message_expression.trim().is_empty() {
        compile_check(
            &mut errs,
            path.child("messageExpression"),
            &v.message_expression,
        );
    }
    let message = v.message.trim();
    if !v.message.is_empty() && message.is_empty() {
        errs.push(FieldError::invalid(
            path.child("message"),
            v.message.as_str(),
            "message must be non-empty if specified",
        ));
    } else if message.contains(['\n', '\r']) {
        errs.push(FieldError::invalid(
            path.child("message"),
            v.message.as_str(),
            "message must not contain line breaks",
        ));
    }
    if let Some(reason) = &v.reason
        && !POLICY_REASONS.contains(&reason.as_str())
    {
        errs.push(FieldError::not_supported(
            path.child("reason"),
            reason.as_str(),
            &POLICY_REASONS,
        ));
    }
    errs
}

/// `validateParamKind`.
fn param_kind(pk: &ParamKind, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    let av = path.child("apiVersion");
    if pk.api_version.is_empty() {
        errs.push(FieldError::required(&av, ""));
    } else if pk.api_version.matches('/').count() > 1 {
        errs.push(FieldError::invalid(
            &av,
            pk.api_version.as_str(),
            format!("unexpected GroupVersion string: {}", pk.api_version),
        ));
    } else if pk.api_version != "/" {
        let (group, version) = pk
            .api_version
            .split_once('/')
            .unwrap_or(("", pk.api_version.as_str()));
        if !group.is_empty() {
            let msgs = is_dns1123_subdomain(group);
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(&av, group, msgs.join(",")));
            }
        }
        if version.is_empty() {
            errs.push(FieldError::invalid(
                &av,
                pk.api_version.as_str(),
                "version must be specified",
            ));
        } else {
            let msgs = is_dns1035_label(version);
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(&av, version, msgs.join(",")));
            }
        }
    }
    if pk.kind.is_empty() {
        errs.push(FieldError::required(path.child("kind"), ""));
    } else {
        let msgs = is_dns1035_label(&pk.kind.to_lowercase());
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(
                path.child("kind"),
                pk.kind.as_str(),
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    msgs.join(",")
                ),
            ));
        }
    }
    errs
}

/// `validateMatchResources`.
fn match_resources(m: &MatchResources, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    match &m.match_policy {
        None => errs.push(FieldError::required(path.child("matchPolicy"), "")),
        Some(p) if !MATCH_POLICIES.contains(&p.as_str()) => errs.push(FieldError::not_supported(
            path.child("matchPolicy"),
            p.as_str(),
            &MATCH_POLICIES,
        )),
        Some(_) => {}
    }
    for (field, selector) in [
        ("namespaceSelector", &m.namespace_selector),
        ("objectSelector", &m.object_selector),
    ] {
        match selector {
            None => errs.push(FieldError::required(path.child(field), "")),
            Some(s) => errs.extend(label_selector(s, &path.child(field), false)),
        }
    }
    for (field, rules) in [
        ("resourceRules", &m.resource_rules),
        ("excludeResourceRules", &m.exclude_resource_rules),
    ] {
        for (i, rule) in rules.iter().enumerate() {
            errs.extend(named_rule(rule, &path.child(field).index(i)));
        }
    }
    errs
}

/// `validateNamedRuleWithOperations`.
fn named_rule(rule: &NamedRuleWithOperations, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    let mut names = BTreeSet::new();
    for (i, name) in rule.resource_names.iter().enumerate() {
        let p = path.child("resourceNames").index(i);
        for msg in is_valid_path_segment_name(name) {
            errs.push(FieldError::invalid(&p, name.as_str(), msg));
        }
        if !names.insert(name.as_str()) {
            errs.push(FieldError::duplicate(&p, name.as_str()));
        }
    }
    errs.extend(rule_with_operations(&rule.rule(), path));
    errs
}

/// What the validating and mutating policy bindings share: the name, the
/// policy named and the `paramRef`, under `spec`.
fn binding_reference(name: &str, policy_name: &str, pr: Option<&ParamRef>) -> ErrorList {
    let mut errs = ErrorList::default();
    if !name.is_empty() {
        for msg in is_dns1123_subdomain(name) {
            errs.push(FieldError::invalid("metadata.name", name, msg));
        }
    }
    let path = FieldPath::new("spec");
    if policy_name.is_empty() {
        errs.push(FieldError::required(path.child("policyName"), ""));
    } else {
        for msg in is_dns1123_subdomain(policy_name) {
            errs.push(FieldError::invalid(
                path.child("policyName"),
                policy_name,
                msg,
            ));
        }
    }
    if let Some(pr) = pr {
        errs.extend(param_ref(pr, &path.child("paramRef")));
    }
    errs
}

/// `ValidateValidatingAdmissionPolicyBinding`.
pub fn validate_binding(b: &ValidatingAdmissionPolicyBinding) -> ErrorList {
    let spec = &b.spec;
    let path = FieldPath::new("spec");
    let mut errs = binding_reference(&b.metadata.name, &spec.policy_name, spec.param_ref.as_ref());
    if let Some(m) = &spec.match_resources {
        // Upstream's field path is spelt `matchResouces`.
        errs.extend(match_resources(m, &path.child("matchResouces")));
    }
    let actions_path = path.child("validationActions");
    let mut actions = BTreeSet::new();
    for (i, action) in spec.validation_actions.iter().enumerate() {
        if !VALIDATION_ACTIONS.contains(&action.as_str()) {
            errs.push(FieldError::not_supported(
                actions_path.index(i),
                action.as_str(),
                &VALIDATION_ACTIONS,
            ));
        }
        if !actions.insert(action.as_str()) {
            errs.push(FieldError::duplicate(
                actions_path.index(i),
                action.as_str(),
            ));
        }
    }
    if actions.contains("Deny") && actions.contains("Warn") {
        errs.push(FieldError::invalid(
            &actions_path,
            serde_json::json!(spec.validation_actions),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if actions.is_empty() {
        errs.push(FieldError::required(
            &actions_path,
            "at least one validation action is required",
        ));
    }
    errs
}

/// `validateParamRef`.
fn param_ref(pr: &ParamRef, path: &FieldPath) -> ErrorList {
    const EXCLUSIVE: &str = "name and selector are mutually exclusive";
    let mut errs = ErrorList::default();
    if !pr.name.is_empty() {
        for msg in is_valid_path_segment_name(&pr.name) {
            errs.push(FieldError::invalid(
                path.child("name"),
                pr.name.as_str(),
                msg,
            ));
        }
        if pr.selector.is_some() {
            errs.push(FieldError::forbidden(path.child("name"), EXCLUSIVE));
        }
    }
    if let Some(s) = &pr.selector {
        errs.extend(label_selector(s, &path.child("selector"), false));
        if !pr.name.is_empty() {
            errs.push(FieldError::forbidden(path.child("selector"), EXCLUSIVE));
        }
    }
    if pr.name.is_empty() && pr.selector.is_none() {
        errs.push(FieldError::required(
            path,
            "one of name or selector must be specified",
        ));
    }
    match pr.parameter_not_found_action.as_deref() {
        None | Some("") => errs.push(FieldError::required(
            path.child("parameterNotFoundAction"),
            "",
        )),
        Some("Deny" | "Allow") => {}
        Some(other) => errs.push(FieldError::not_supported(
            path.child("parameterNotFoundAction"),
            other,
            &["Deny", "Allow"],
        )),
    }
    errs
}

/// `validateValidatingAdmissionPolicyStatus`: each type-checking warning
/// has a warning and a field reference; each condition a qualified type and
/// a status of `True`, `False` or `Unknown` (the checks of metav1's
/// `ValidateConditions` users get wrong).
pub fn validate_policy_status(status: &ValidatingAdmissionPolicyStatus) -> ErrorList {
    let mut errs = ErrorList::default();
    let path = FieldPath::new("status");
    if let Some(tc) = &status.type_checking {
        let warnings = path.child("typeChecking").child("expressionWarnings");
        for (i, w) in tc.expression_warnings.iter().enumerate() {
            if w.warning.is_empty() {
                errs.push(FieldError::required(warnings.index(i).child("warning"), ""));
            }
            if w.field_ref.trim().is_empty() {
                errs.push(FieldError::required(
                    warnings.index(i).child("fieldRef"),
                    "",
                ));
            }
        }
    }
    for (i, c) in status.conditions.iter().enumerate() {
        let p = path.child("conditions").index(i);
        if c.type_.is_empty() {
            errs.push(FieldError::required(p.child("type"), "must be set"));
        } else {
            for msg in is_qualified_name(&c.type_) {
                errs.push(FieldError::invalid(p.child("type"), c.type_.as_str(), msg));
            }
        }
        const STATUSES: [&str; 3] = ["False", "True", "Unknown"];
        if !STATUSES.contains(&c.status.as_str()) {
            errs.push(FieldError::not_supported(
                p.child("status"),
                c.status.as_str(),
                &STATUSES,
            ));
        }
    }
    errs
}

/// The operations a mutating policy's rules may name
/// (`supportedMutatingOperations`: a delete has no object to mutate).
const MUTATING_OPERATIONS: [&str; 4] = ["*", "CONNECT", "CREATE", "UPDATE"];
/// `patchType` values.
const PATCH_TYPES: [&str; 2] = ["ApplyConfiguration", "JSONPatch"];
/// A mutating policy's `reinvocationPolicy` values, in upstream's order.
const POLICY_REINVOCATION_POLICIES: [&str; 2] = ["Never", "IfNeeded"];

/// The rules of `m` naming an operation a mutation cannot apply to, at
/// `<path>.resourceRules.operations` (upstream's path has no index).
fn mutable_operations(m: &MatchResources, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    let ops = path.child("resourceRules").child("operations");
    for rule in &m.resource_rules {
        for op in &rule.operations {
            if !MUTATING_OPERATIONS.contains(&op.as_str()) {
                errs.push(FieldError::not_supported(
                    &ops,
                    op.as_str(),
                    &MUTATING_OPERATIONS,
                ));
            }
        }
    }
    errs
}

/// Compiles a mutation expression ([`super::cel_mutation`]):
/// `compilation failed: ...` as [`compile_check`] words it.
fn mutation_compile_check(errs: &mut ErrorList, path: FieldPath, expression: &str) {
    if let Err(e) = super::cel_mutation::MutationProgram::compile(expression) {
        errs.push(FieldError::invalid(
            path,
            expression,
            format!("compilation failed: {e}"),
        ));
    }
}

/// `ValidateMutatingAdmissionPolicy` (`ignore_match_conditions` on an
/// update that leaves them as they were).
pub fn validate_mutating_policy(
    p: &MutatingAdmissionPolicy,
    ignore_match_conditions: bool,
) -> ErrorList {
    let mut errs = ErrorList::default();
    let name = &p.metadata.name;
    if !name.is_empty() {
        for msg in is_dns1123_subdomain(name) {
            errs.push(FieldError::invalid("metadata.name", name.as_str(), msg));
        }
    }
    let spec = &p.spec;
    let path = FieldPath::new("spec");
    match &spec.failure_policy {
        None => errs.push(FieldError::required(path.child("failurePolicy"), "")),
        Some(f) if !FAILURE_POLICIES.contains(&f.as_str()) => errs.push(FieldError::not_supported(
            path.child("failurePolicy"),
            f.as_str(),
            &FAILURE_POLICIES,
        )),
        Some(_) => {}
    }
    if let Some(pk) = &spec.param_kind {
        errs.extend(param_kind(pk, &path.child("paramKind")));
    }
    match &spec.match_constraints {
        None => errs.push(FieldError::required(path.child("matchConstraints"), "")),
        Some(m) => {
            let mc = path.child("matchConstraints");
            errs.extend(match_resources(m, &mc));
            if m.resource_rules.is_empty() {
                errs.push(FieldError::required(mc.child("resourceRules"), ""));
            }
            errs.extend(mutable_operations(m, &mc));
        }
    }
    if !ignore_match_conditions {
        errs.extend(match_conditions(
            &spec.match_conditions,
            &path.child("matchConditions"),
        ));
    }
    errs.extend(variables(&spec.variables, &path.child("variables")));
    if spec.mutations.is_empty() {
        errs.push(FieldError::required(
            path.child("mutations"),
            "mutations must contain at least one item",
        ));
    }
    for (i, m) in spec.mutations.iter().enumerate() {
        errs.extend(mutation(m, &path.child("mutations").index(i)));
    }
    let reinvocation = path.child("reinvocationPolicy");
    if spec.reinvocation_policy.is_empty() {
        errs.push(FieldError::required(reinvocation, ""));
    } else if !POLICY_REINVOCATION_POLICIES.contains(&spec.reinvocation_policy.as_str()) {
        errs.push(FieldError::not_supported(
            reinvocation,
            spec.reinvocation_policy.as_str(),
            &POLICY_REINVOCATION_POLICIES,
        ));
    }
    errs
}

/// `validateMutation`: the `patchType` union and its expression.
fn mutation(m: &Mutation, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    let apply = path.child("applyConfiguration");
    let json_patch = path.child("jsonPatch");
    let expression = |errs: &mut ErrorList, path: FieldPath, expression: &str| {
        if expression.trim().is_empty() {
            errs.push(FieldError::required(path, ""));
        } else {
            mutation_compile_check(errs, path, expression.trim());
        }
    };
    match m.patch_type.as_str() {
        "" => errs.push(FieldError::required(path.child("patchType"), "")),
        "JSONPatch" => {
            match &m.json_patch {
                None => errs.push(FieldError::required(
                    &json_patch,
                    "must be specified when patchType is JSONPatch",
                )),
                Some(p) => expression(&mut errs, json_patch.child("expression"), &p.expression),
            }
            if m.apply_configuration.is_some() {
                errs.push(FieldError::invalid(
                    &apply,
                    "{applyConfiguration}",
                    "must not be specified when patchType is JSONPatch",
                ));
            }
        }
        "ApplyConfiguration" => {
            match &m.apply_configuration {
                None => errs.push(FieldError::required(
                    &apply,
                    "must be specified when patchType is ApplyConfiguration",
                )),
                Some(a) => expression(&mut errs, apply.child("expression"), &a.expression),
            }
            if m.json_patch.is_some() {
                errs.push(FieldError::invalid(
                    &json_patch,
                    "{jsonPatch}",
                    "must not be specified when patchType is ApplyConfiguration",
                ));
            }
        }
        other => errs.push(FieldError::not_supported(
            path.child("patchType"),
            other,
            &PATCH_TYPES,
        )),
    }
    errs
}

/// `ValidateMutatingAdmissionPolicyBinding`.
pub fn validate_mutating_binding(b: &MutatingAdmissionPolicyBinding) -> ErrorList {
    let spec = &b.spec;
    let path = FieldPath::new("spec");
    let mut errs = binding_reference(&b.metadata.name, &spec.policy_name, spec.param_ref.as_ref());
    if let Some(m) = &spec.match_resources {
        let mr = path.child("matchResources");
        errs.extend(match_resources(m, &mr));
        errs.extend(mutable_operations(m, &mr));
    }
    errs
}
