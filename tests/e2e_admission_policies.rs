//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding end to
//! end: stored with upstream's defaults and validation, and enforced by the
//! `ValidatingAdmissionPolicy` plugin, following the examples of the
//! Kubernetes "Validating Admission Policy" documentation (a replica limit
//! with a ConfigMap param, a label requirement scoped by a namespace
//! selector, the Warn and Audit actions with audit annotations,
//! `parameterNotFoundAction`, `failurePolicy`), and Gateway API's shipped
//! `safe-upgrades` policy. Expected messages are upstream's: the denial is
//! the validating dispatcher's `Dispatch`
//! (`ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s`
//! inside `admission.NewForbidden`), the warning its `Warn` case, the
//! messages `validator.Validate`'s and `generic.CollectParams`'.
//! Policies take effect within a fraction of a second: every check after a
//! change polls with `common::eventually`.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use common::Server;
use common::kubectl::Kubectl;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ApiResource, DynamicObject, ObjectMeta, PostParams};
use serde_json::{Value, json};

fn api_status(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("object")
}

fn config_map(name: &str, labels: Value, data: Value) -> ConfigMap {
    from(json!({"metadata": {"name": name, "labels": labels}, "data": data}))
}

/// A policy on configmaps (CREATE and UPDATE) with the given spec fields.
fn configmap_policy(name: &str, extra: Value) -> ValidatingAdmissionPolicy {
    let mut spec = json!({
        "matchConstraints": {"resourceRules": [{
            "apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"],
        }]},
    });
    for (k, v) in extra.as_object().expect("object") {
        spec[k] = v.clone();
    }
    from(json!({"metadata": {"name": name}, "spec": spec}))
}

fn binding(name: &str, spec: Value) -> ValidatingAdmissionPolicyBinding {
    from(json!({"metadata": {"name": name}, "spec": spec}))
}

/// Creates `cm` in `namespace`; the error Status if refused.
async fn try_create(
    client: &kube::Client,
    namespace: &str,
    cm: &ConfigMap,
) -> Result<(), Box<kube::core::Status>> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    match api.create(&PostParams::default(), cm).await {
        Ok(_) => Ok(()),
        Err(e) => Err(api_status(e)),
    }
}

/// Polls `f` (with the attempt's number) through `common::eventually`
/// until it gives a value.
async fn eventually_some<T, F, Fut>(server: &Server, what: &str, mut f: F) -> T
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let slot = Arc::new(Mutex::new(None));
    let mut n = 0;
    common::eventually(server, what, || {
        n += 1;
        let fut = f(n);
        let slot = slot.clone();
        async move {
            match fut.await {
                Some(t) => {
                    *slot.lock().expect("lock") = Some(t);
                    true
                }
                None => false,
            }
        }
    })
    .await;
    let value = slot.lock().expect("lock").take();
    value.expect("value")
}

/// Waits until creating `cm` (under a fresh name each time) is refused;
/// returns the Status.
async fn refused(
    server: &Server,
    client: &kube::Client,
    namespace: &str,
    cm: &ConfigMap,
) -> Box<kube::core::Status> {
    eventually_some(server, "the policy refuses", |n| {
        let mut cm = cm.clone();
        cm.metadata.name = Some(format!(
            "{}-{n}",
            cm.metadata.name.clone().unwrap_or_default()
        ));
        let client = client.clone();
        let namespace = namespace.to_string();
        async move { try_create(&client, &namespace, &cm).await.err() }
    })
    .await
}

/// Waits (at most 10 s) until policy `name`'s `status.observedGeneration`
/// is `generation` (set by the status controller with `typeChecking`).
async fn observed(
    server: &Server,
    policies: &Api<ValidatingAdmissionPolicy>,
    name: &str,
    generation: i64,
) -> ValidatingAdmissionPolicy {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Ok(p) = policies.get(name).await
            && let Some(status) = &p.status
            && status.observed_generation == Some(generation)
            && status.type_checking.is_some()
        {
            return p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "policy {name}: generation {generation} not observed within 10 s; log:\n{}",
            server.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// `status.typeChecking`, as kube-controller-manager's status controller
/// writes it: each validation's expressions are type-checked against the
/// schema of core `v1` ConfigMaps; a bad expression gets a warning with
/// cel-go's text, a good policy `typeChecking: {}`.
#[tokio::test]
async fn policy_status_reports_type_checking() {
    let server = Server::start().await;
    let client = server.client().await;
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let raw: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk(
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingAdmissionPolicy",
            ),
            "validatingadmissionpolicies",
        ),
    );
    let created = policies
        .create(
            &PostParams::default(),
            &configmap_policy(
                "typed",
                json!({"validations": [
                    {"expression": "object.data.size() < 3 && object.metadata.name != ''"},
                    {"expression": "object.foo == 'bar'",
                     "messageExpression": "'name: ' + object.metadata.name"},
                    {"expression": "has(object.data)", "messageExpression": "object.data.x + 1"},
                ]}),
            ),
        )
        .await
        .expect("create policy");
    // Not yet checked when the create answers (upstream's strategy clears
    // the status).
    assert_eq!(
        created.status.as_ref().and_then(|s| s.observed_generation),
        None
    );
    observed(&server, &policies, "typed", 1).await;
    let status = raw.get("typed").await.expect("get").data["status"].clone();
    assert_eq!(
        status,
        json!({"observedGeneration": 1, "typeChecking": {"expressionWarnings": [
            {"fieldRef": "spec.validations[1].expression",
             "warning": "/v1, Kind=ConfigMap: ERROR: <input>:1:7: undefined field 'foo'\n | object.foo == 'bar'\n | ......^\n"},
            {"fieldRef": "spec.validations[2].messageExpression",
             "warning": "/v1, Kind=ConfigMap: ERROR: <input>:1:15: found no matching overload for '_+_' applied to '(string, int)'\n | object.data.x + 1\n | ..............^\n"},
        ]}})
    );
    // Fixing the spec: checked again, no warnings left.
    let mut fixed = policies.get("typed").await.expect("get");
    fixed.spec.as_mut().expect("spec").validations =
        Some(vec![from(json!({"expression": "object.data.size() < 3"}))]);
    policies
        .replace("typed", &PostParams::default(), &fixed)
        .await
        .expect("replace");
    observed(&server, &policies, "typed", 2).await;
    let status = raw.get("typed").await.expect("get").data["status"].clone();
    assert_eq!(status, json!({"observedGeneration": 2, "typeChecking": {}}));
}

#[tokio::test]
async fn policies_and_bindings_are_stored_defaulted_and_validated() {
    let server = Server::start().await;
    let client = server.client().await;
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());

    // Defaults (`SetDefaults_ValidatingAdmissionPolicySpec`,
    // `SetDefaults_MatchResources`, `SetDefaults_Rule`); the status records
    // the generation.
    let created = policies
        .create(
            &PostParams::default(),
            &configmap_policy(
                "demo",
                json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                    "validations": [{"expression": "object.data.size() < 3"}]}),
            ),
        )
        .await
        .expect("create policy");
    let spec = created.spec.as_ref().expect("spec");
    assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
    let constraints = spec.match_constraints.as_ref().expect("constraints");
    assert_eq!(constraints.match_policy.as_deref(), Some("Equivalent"));
    assert!(constraints.namespace_selector.is_some());
    assert!(constraints.object_selector.is_some());
    assert_eq!(
        constraints.resource_rules.as_ref().expect("rules")[0]
            .scope
            .as_deref(),
        Some("*")
    );
    assert_eq!(created.metadata.generation, Some(1));
    // The status controller type-checks the policy and records the
    // generation it checked (with `typeChecking`, not on the write itself).
    let checked = observed(&server, &policies, "demo", 1).await;
    assert_eq!(
        checked
            .status
            .as_ref()
            .and_then(|s| s.type_checking.clone()),
        Some(Default::default())
    );
    // A spec change bumps the generation; the status follows.
    let mut changed = checked.clone();
    changed.spec.as_mut().expect("spec").validations =
        Some(vec![from(json!({"expression": "object.data.size() < 4"}))]);
    let replaced = policies
        .replace("demo", &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert_eq!(replaced.metadata.generation, Some(2));
    observed(&server, &policies, "demo", 2).await;

    // A CEL compile error, at upstream's field path.
    let s = api_status(
        policies
            .create(
                &PostParams::default(),
                &configmap_policy(
                    "broken",
                    json!({"validations": [{"expression": "object.data.size( < 3"}]}),
                ),
            )
            .await
            .expect_err("bad CEL"),
    );
    assert_eq!(s.code, 422);
    assert!(
        s.message.starts_with("ValidatingAdmissionPolicy.admissionregistration.k8s.io \"broken\" is invalid: spec.validations[0].expression: Invalid value: \"object.data.size( < 3\": compilation failed: "),
        "{}",
        s.message
    );
    // An unknown reason (`validateValidation`).
    let s = api_status(
        policies
            .create(
                &PostParams::default(),
                &configmap_policy(
                    "reason",
                    json!({"validations": [{"expression": "true", "reason": "Teapot"}]}),
                ),
            )
            .await
            .expect_err("bad reason"),
    );
    assert_eq!(
        s.message,
        "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"reason\" is invalid: spec.validations[0].reason: Unsupported value: \"Teapot\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\", \"Unauthorized\""
    );

    // Bindings: Deny with Warn, no policy name, name with selector
    // (`validateValidatingAdmissionPolicyBindingSpec`, `validateParamRef`,
    // `validateValidationActions`).
    let s = api_status(
        bindings
            .create(
                &PostParams::default(),
                &binding(
                    "both",
                    json!({"policyName": "demo", "validationActions": ["Deny", "Warn"]}),
                ),
            )
            .await
            .expect_err("Deny and Warn"),
    );
    assert_eq!(s.code, 422);
    assert_eq!(
        s.message,
        "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io \"both\" is invalid: spec.validationActions: Invalid value: [\"Deny\",\"Warn\"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"
    );
    let s = api_status(
        bindings
            .create(
                &PostParams::default(),
                &binding(
                    "nameless",
                    json!({"validationActions": ["Deny"],
                        "paramRef": {"name": "a", "selector": {}, "parameterNotFoundAction": "Deny"}}),
                ),
            )
            .await
            .expect_err("no policy name"),
    );
    assert_eq!(
        s.message,
        "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io \"nameless\" is invalid: [spec.policyName: Required value, spec.paramRef.name: Forbidden: name and selector are mutually exclusive, spec.paramRef.selector: Forbidden: name and selector are mutually exclusive]"
    );
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "demo-binding",
                json!({"policyName": "demo", "validationActions": ["Deny"],
                    "paramRef": {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Allow"}}),
            ),
        )
        .await
        .expect("binding");

    // `kubectl get` prints upstream's columns.
    let k = Kubectl::new(&server);
    let out = k.ok(&["get", "validatingadmissionpolicies"]);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"],
        "{out}"
    );
    assert_eq!(rows[1][..3], ["demo", "1", "v1/ConfigMap"], "{out}");
    let out = k.ok(&["get", "validatingadmissionpolicybindings"]);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "POLICYNAME", "PARAMREF", "AGE"], "{out}");
    assert_eq!(
        rows[1][..3],
        ["demo-binding", "demo", "default/limits"],
        "{out}"
    );
}

const WIDGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              replicas: {type: integer}
"#;

/// Creates the CustomResourceDefinitions `crds` (name and YAML, Widget's
/// among them) with kubectl, waits until each is Established, and returns
/// the Widgets of `default` once their collection answers.
async fn serve_widgets(
    server: &Server,
    client: &kube::Client,
    k: &Kubectl,
    dir: &Path,
    crds: &[(&str, &str)],
) -> Api<DynamicObject> {
    for (name, yaml) in crds {
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(&path, yaml).expect("write");
        k.ok(&["apply", "-f", path.to_str().expect("path")]);
    }
    for (name, _) in crds {
        k.ok(&[
            "wait",
            "--for=condition=Established",
            "--timeout=20s",
            &format!("crd/{name}"),
        ]);
    }
    let ar = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    common::eventually(server, "widgets served", || {
        let widgets = widgets.clone();
        async move { widgets.list(&Default::default()).await.is_ok() }
    })
    .await;
    widgets
}

/// A Widget with `spec.replicas`.
fn widget(name: &str, replicas: i64) -> DynamicObject {
    from(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": {"replicas": replicas}}))
}

/// The documentation's first example: a replica limit read from a param
/// (here a ConfigMap, the target a custom resource with `spec.replicas`),
/// with `parameterNotFoundAction` Deny and Allow.
#[tokio::test]
async fn replica_limit_with_a_param_config_map() {
    let server = Server::start().await;
    let client = server.client().await;
    let k = Kubectl::new(&server);
    let dir = tempfile::tempdir().expect("tmp");
    let widgets = serve_widgets(
        &server,
        &client,
        &k,
        dir.path(),
        &[("widgets.example.com", WIDGETS)],
    )
    .await;

    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    policies
        .create(
            &PostParams::default(),
            &from(json!({
                "metadata": {"name": "replica-limit.example.com"},
                "spec": {
                    "failurePolicy": "Fail",
                    "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                    "matchConstraints": {"resourceRules": [{
                        "apiGroups": ["example.com"], "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"], "resources": ["widgets"],
                    }]},
                    "validations": [{
                        "expression": "object.spec.replicas <= int(params.data.maxReplicas)",
                        "messageExpression": "'object.spec.replicas must be no greater than ' + params.data.maxReplicas",
                        "reason": "Invalid",
                    }],
                },
            })),
        )
        .await
        .expect("policy");
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "replica-limit-binding.example.com",
                json!({"policyName": "replica-limit.example.com", "validationActions": ["Deny"],
                    "paramRef": {"name": "replica-limit", "parameterNotFoundAction": "Deny"}}),
            ),
        )
        .await
        .expect("binding");

    // No param yet: `CollectParams`' Deny.
    let s = eventually_some(&server, "denied without the param", |n| {
        let widgets = widgets.clone();
        let w = widget(&format!("early-{n}"), 1);
        async move {
            widgets
                .create(&PostParams::default(), &w)
                .await
                .err()
                .map(api_status)
        }
    })
    .await;
    assert_eq!(s.code, 422, "{s:?}");
    assert_eq!(s.reason, "Invalid");
    assert!(
        s.message.ends_with("is forbidden: ValidatingAdmissionPolicy 'replica-limit.example.com' with binding 'replica-limit-binding.example.com' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{}",
        s.message
    );

    // The param, in the request's namespace (the binding names none).
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &config_map("replica-limit", json!({}), json!({"maxReplicas": "5"})),
    )
    .await
    .expect("param");
    widgets
        .create(&PostParams::default(), &widget("small", 3))
        .await
        .expect("within the limit");
    let s = api_status(
        widgets
            .create(&PostParams::default(), &widget("big", 10))
            .await
            .expect_err("over the limit"),
    );
    assert_eq!(s.code, 422);
    assert_eq!(s.reason, "Invalid");
    assert_eq!(
        s.message,
        "widgets.example.com \"big\" is forbidden: ValidatingAdmissionPolicy 'replica-limit.example.com' with binding 'replica-limit-binding.example.com' denied request: object.spec.replicas must be no greater than 5"
    );
    // Updates are checked too.
    let mut small = widgets.get("small").await.expect("get");
    small.data["spec"]["replicas"] = json!(6);
    let s = api_status(
        widgets
            .replace("small", &PostParams::default(), &small)
            .await
            .expect_err("update over the limit"),
    );
    assert!(
        s.message
            .ends_with("denied request: object.spec.replicas must be no greater than 5"),
        "{}",
        s.message
    );

    // A binding whose param is missing, with parameterNotFoundAction Allow,
    // lets requests through.
    let mut b = bindings
        .get("replica-limit-binding.example.com")
        .await
        .expect("get binding");
    let spec = &mut b.spec;
    let param_ref = spec.param_ref.as_mut().expect("paramRef");
    param_ref.name = Some("absent".into());
    param_ref.parameter_not_found_action = Some("Allow".into());
    bindings
        .replace(
            "replica-limit-binding.example.com",
            &PostParams::default(),
            &b,
        )
        .await
        .expect("replace binding");
    eventually_some(&server, "allowed without the param", |n| {
        let widgets = widgets.clone();
        let w = widget(&format!("huge-{n}"), 100);
        async move { widgets.create(&PostParams::default(), &w).await.ok() }
    })
    .await;

    // A selector picks every matching param; each is evaluated, so the
    // smallest limit decides.
    for (name, max) in [("limit-a", "50"), ("limit-b", "20")] {
        cms.create(
            &PostParams::default(),
            &config_map(
                name,
                json!({"limits": "widgets"}),
                json!({"maxReplicas": max}),
            ),
        )
        .await
        .expect("param");
    }
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "by-selector.example.com",
                json!({"policyName": "replica-limit.example.com", "validationActions": ["Deny"],
                    "paramRef": {"selector": {"matchLabels": {"limits": "widgets"}},
                        "parameterNotFoundAction": "Deny"}}),
            ),
        )
        .await
        .expect("selector binding");
    let s = eventually_some(&server, "the smallest selected limit", |n| {
        let widgets = widgets.clone();
        let w = widget(&format!("thirty-{n}"), 30);
        async move {
            widgets
                .create(&PostParams::default(), &w)
                .await
                .err()
                .map(api_status)
        }
    })
    .await;
    assert!(
        s.message.ends_with("with binding 'by-selector.example.com' denied request: object.spec.replicas must be no greater than 20"),
        "{}",
        s.message
    );
    widgets
        .create(&PostParams::default(), &widget("ten", 10))
        .await
        .expect("within every selected limit");
}

/// The ReplicaLimit kind of the documentation's first example, and its
/// param object, as the documentation writes them.
const REPLICA_LIMITS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: replicalimits.rules.example.com
spec:
  group: rules.example.com
  scope: Namespaced
  names: {plural: replicalimits, singular: replicalimit, kind: ReplicaLimit}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          maxReplicas: {type: integer}
"#;

/// The documentation's first example as it is written: the param is a
/// custom resource (`paramKind: rules.example.com/v1 ReplicaLimit`, served
/// from a CustomResourceDefinition created after the server started),
/// named with its namespace by the binding.
#[tokio::test]
async fn replica_limit_with_a_custom_resource_param() {
    let server = Server::start().await;
    let client = server.client().await;
    let k = Kubectl::new(&server);
    let dir = tempfile::tempdir().expect("tmp");
    let widgets = serve_widgets(
        &server,
        &client,
        &k,
        dir.path(),
        &[
            ("widgets.example.com", WIDGETS),
            ("replicalimits.rules.example.com", REPLICA_LIMITS),
        ],
    )
    .await;
    let param = dir.path().join("param.yaml");
    std::fs::write(
        &param,
        "apiVersion: rules.example.com/v1\nkind: ReplicaLimit\nmetadata:\n  name: replica-limit-test.example.com\n  namespace: default\nmaxReplicas: 3\n",
    )
    .expect("write");
    common::eventually(&server, "replicalimits served", || {
        let out = k.run(&["apply", "-f", param.to_str().expect("path")]);
        async move { out.status.success() }
    })
    .await;

    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    policies
        .create(
            &PostParams::default(),
            &from(json!({
                "metadata": {"name": "replicalimit-policy.example.com"},
                "spec": {
                    "failurePolicy": "Fail",
                    "paramKind": {"apiVersion": "rules.example.com/v1", "kind": "ReplicaLimit"},
                    "matchConstraints": {"resourceRules": [{
                        "apiGroups": ["example.com"], "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"], "resources": ["widgets"],
                    }]},
                    "validations": [{
                        "expression": "object.spec.replicas <= params.maxReplicas",
                        "messageExpression": "'object.spec.replicas must be no greater than ' + string(params.maxReplicas)",
                        "reason": "Invalid",
                    }],
                },
            })),
        )
        .await
        .expect("policy");
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "replicalimit-binding-test.example.com",
                json!({"policyName": "replicalimit-policy.example.com", "validationActions": ["Deny"],
                    "paramRef": {"name": "replica-limit-test.example.com", "namespace": "default",
                        "parameterNotFoundAction": "Deny"}}),
            ),
        )
        .await
        .expect("binding");

    let s = eventually_some(&server, "the custom resource's limit", |n| {
        let widgets = widgets.clone();
        let w = widget(&format!("big-{n}"), 10);
        async move {
            widgets
                .create(&PostParams::default(), &w)
                .await
                .err()
                .map(api_status)
        }
    })
    .await;
    assert_eq!(s.code, 422, "{s:?}");
    assert_eq!(s.reason, "Invalid");
    assert!(
        s.message.ends_with("is forbidden: ValidatingAdmissionPolicy 'replicalimit-policy.example.com' with binding 'replicalimit-binding-test.example.com' denied request: object.spec.replicas must be no greater than 3"),
        "{}",
        s.message
    );
    widgets
        .create(&PostParams::default(), &widget("small", 3))
        .await
        .expect("within the limit");
    // The param's change applies to the next request.
    k.ok(&[
        "patch",
        "replicalimit",
        "replica-limit-test.example.com",
        "--type=merge",
        "-p",
        r#"{"maxReplicas": 12}"#,
    ]);
    eventually_some(&server, "the raised limit", |n| {
        let widgets = widgets.clone();
        let w = widget(&format!("ten-{n}"), 10);
        async move { widgets.create(&PostParams::default(), &w).await.ok() }
    })
    .await;
}

/// A label requirement bound to namespaces labelled `environment: test`
/// (the documentation's namespaceSelector binding), then the Warn and
/// Audit actions with `auditAnnotations`, and `failurePolicy` on an
/// evaluation error.
#[tokio::test]
async fn label_requirement_warn_audit_and_failure_policy() {
    let tmp = tempfile::tempdir().expect("tmp");
    let audit_policy = tmp.path().join("policy.yaml");
    std::fs::write(
        &audit_policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Request\n  resources:\n  - group: \"\"\n    resources: [configmaps]\n",
    )
    .expect("audit policy");
    let log = tmp.path().join("audit.log");
    let server = Server::start_with(&[
        "--audit-policy-file",
        audit_policy.to_str().expect("path"),
        "--audit-log-path",
        log.to_str().expect("path"),
    ])
    .await;
    let client = server.client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for (name, env) in [("test-ns", "test"), ("prod-ns", "prod")] {
        namespaces
            .create(
                &PostParams::default(),
                &from(json!({"metadata": {"name": name, "labels": {"environment": env}}})),
            )
            .await
            .expect("namespace");
    }
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    policies
        .create(
            &PostParams::default(),
            &configmap_policy(
                "require-team",
                json!({"validations": [{
                    "expression": "has(object.metadata.labels) && 'team' in object.metadata.labels",
                    "message": "all configmaps must have a team label",
                    "reason": "Forbidden",
                }]}),
            ),
        )
        .await
        .expect("policy");
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "require-team-in-test",
                json!({"policyName": "require-team", "validationActions": ["Deny"],
                    "matchResources": {"namespaceSelector": {"matchLabels": {"environment": "test"}}}}),
            ),
        )
        .await
        .expect("binding");
    let unlabelled = config_map("plain", json!({}), json!({}));
    let s = refused(&server, &client, "test-ns", &unlabelled).await;
    assert_eq!(s.code, 403);
    assert_eq!(s.reason, "Forbidden");
    assert!(
        s.message.starts_with("configmaps \"plain-"),
        "{}",
        s.message
    );
    assert!(
        s.message.ends_with("\" is forbidden: ValidatingAdmissionPolicy 'require-team' with binding 'require-team-in-test' denied request: all configmaps must have a team label"),
        "{}",
        s.message
    );
    try_create(
        &client,
        "test-ns",
        &config_map("labelled", json!({"team": "a"}), json!({})),
    )
    .await
    .expect("labelled");
    try_create(&client, "prod-ns", &unlabelled)
        .await
        .expect("other namespaces are not bound");

    // Warn and Audit: the request passes with a Warning header, the audit
    // event carries the failure and the policy's annotation.
    policies
        .create(
            &PostParams::default(),
            &configmap_policy(
                "small-data",
                json!({
                    "validations": [{"expression": "!has(object.data) || object.data.size() <= 1",
                        "messageExpression": "'too many keys: ' + string(object.data.size())"}],
                    "auditAnnotations": [{"key": "keys",
                        "valueExpression": "has(object.data) ? string(object.data.size()) : null"}],
                }),
            ),
        )
        .await
        .expect("policy");
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "small-data-warn",
                json!({"policyName": "small-data", "validationActions": ["Warn", "Audit"],
                    "matchResources": {"namespaceSelector": {"matchLabels": {"environment": "prod"}}}}),
            ),
        )
        .await
        .expect("binding");
    let server_ref = &server;
    let (name, warning) = eventually_some(server_ref, "the warning", |n| {
        let name = format!("wide-{n}");
        let body = serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name}, "data": {"a": "1", "b": "2"}}))
        .expect("json");
        async move {
            let resp = common::raw::request(
                server_ref,
                "POST",
                "/api/v1/namespaces/prod-ns/configmaps",
                &[("Content-Type", "application/json")],
                &body,
            )
            .await;
            assert_eq!(resp.status, 201, "{}", resp.text());
            let warning = resp.header("warning").unwrap_or_default().to_string();
            (!warning.is_empty()).then_some((name, warning))
        }
    })
    .await;
    assert_eq!(
        warning,
        "299 - \"Validation failed for ValidatingAdmissionPolicy 'small-data' with binding 'small-data-warn': too many keys: 2\""
    );
    let mut event = Value::Null;
    common::eventually(&server, "audit event of the create", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        event = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| {
                e["verb"] == "create"
                    && e["objectRef"]["name"] == name.as_str()
                    && e["stage"] == "ResponseComplete"
            })
            .unwrap_or(Value::Null);
        let found = !event.is_null();
        async move { found }
    })
    .await;
    let ann = &event["annotations"];
    assert_eq!(ann["small-data/keys"], "2", "{ann}");
    let failure: Value = serde_json::from_str(
        ann["validation.policy.admission.k8s.io/validation_failure"]
            .as_str()
            .expect("validation_failure annotation"),
    )
    .expect("json");
    assert_eq!(
        failure,
        json!([{"message": "too many keys: 2", "policy": "small-data", "binding": "small-data-warn",
            "expressionIndex": 0, "validationActions": ["Warn", "Audit"]}])
    );

    // failurePolicy: an expression that fails to evaluate denies under
    // Fail with the CEL filter's message, and is ignored under Ignore.
    policies
        .create(
            &PostParams::default(),
            &configmap_policy(
                "needs-owner",
                json!({"failurePolicy": "Fail",
                    "validations": [{"expression": "object.data.owner != ''"}]}),
            ),
        )
        .await
        .expect("policy");
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "needs-owner",
                json!({"policyName": "needs-owner", "validationActions": ["Deny"],
                    "matchResources": {"objectSelector": {"matchLabels": {"check": "owner"}}}}),
            ),
        )
        .await
        .expect("binding");
    let checked = config_map("checked", json!({"check": "owner"}), json!({"x": "1"}));
    let s = refused(&server, &client, "default", &checked).await;
    assert_eq!(s.code, 422);
    assert!(
        s.message
            .contains("denied request: expression 'object.data.owner != ''' resulted in error: "),
        "{}",
        s.message
    );
    let mut p = policies.get("needs-owner").await.expect("get");
    p.spec.as_mut().expect("spec").failure_policy = Some("Ignore".into());
    policies
        .replace("needs-owner", &PostParams::default(), &p)
        .await
        .expect("replace");
    eventually_some(&server, "errors ignored", |n| {
        let mut cm = checked.clone();
        cm.metadata = ObjectMeta {
            name: Some(format!("ignored-{n}")),
            ..cm.metadata
        };
        let client = client.clone();
        async move { try_create(&client, "default", &cm).await.ok() }
    })
    .await;
}

fn gateway_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/gateway-api/crds")
}

/// Gateway API's `safe-upgrades` policy, as shipped: CRDs of a bundle
/// version before v1.5.0 (the dev build's `v0.0.0-dev`, `v1.2.0`) are
/// refused with its message, `v1.5.0` is installed.
#[tokio::test]
async fn gateway_api_safe_upgrades_policy() {
    let server = Server::start().await;
    let client = server.client().await;
    let k = Kubectl::new(&server);
    let vap = gateway_data().join("gateway.networking.k8s.io_vap_safeupgrades.yaml");
    let out = k.ok(&["apply", "-f", vap.to_str().expect("path")]);
    assert!(out.contains("validatingadmissionpolicy.admissionregistration.k8s.io/safe-upgrades.gateway.networking.k8s.io created"), "{out}");
    assert!(out.contains("validatingadmissionpolicybinding.admissionregistration.k8s.io/safe-upgrades.gateway.networking.k8s.io created"), "{out}");
    let policy = std::fs::read_to_string(&vap).expect("read");
    assert!(policy.contains("Installing CRDs with version before v1.5.0 is prohibited by default. Uninstall ValidatingAdmissionPolicy safe-upgrades.gateway.networking.k8s.io to install older versions."));

    let text = std::fs::read_to_string(
        gateway_data().join("gateway.networking.k8s.io_gatewayclasses.yaml"),
    )
    .expect("read CRD");
    let crd: Value = serde_saphyr::from_str(&text).expect("yaml");
    let with_version = |version: &str| -> DynamicObject {
        let mut c = crd.clone();
        c["metadata"]["annotations"]["gateway.networking.k8s.io/bundle-version"] = json!(version);
        from(c)
    };
    let ar = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    let crds: Api<DynamicObject> = Api::all_with(client, &ar);
    let expected = "customresourcedefinitions.apiextensions.k8s.io \"gatewayclasses.gateway.networking.k8s.io\" is forbidden: ValidatingAdmissionPolicy 'safe-upgrades.gateway.networking.k8s.io' with binding 'safe-upgrades.gateway.networking.k8s.io' denied request: Installing CRDs with version before v1.5.0 is prohibited by default. Uninstall ValidatingAdmissionPolicy safe-upgrades.gateway.networking.k8s.io to install older versions.";
    // Until the policy is seen, a create may pass: it is deleted again.
    let s = eventually_some(&server, "the dev bundle refused", |_| {
        let crds = crds.clone();
        let c = with_version("v0.0.0-dev");
        async move {
            match crds.create(&PostParams::default(), &c).await {
                Ok(_) => {
                    let _ = crds
                        .delete(
                            "gatewayclasses.gateway.networking.k8s.io",
                            &Default::default(),
                        )
                        .await;
                    None
                }
                Err(e) => {
                    Some(api_status(e)).filter(|s| s.message.contains("ValidatingAdmissionPolicy"))
                }
            }
        }
    })
    .await;
    assert_eq!(s.code, 422);
    assert_eq!(s.reason, "Invalid");
    assert_eq!(s.message, expected);
    let s = api_status(
        crds.create(&PostParams::default(), &with_version("v1.2.0"))
            .await
            .expect_err("v1.2.0"),
    );
    assert_eq!(s.message, expected);
    crds.create(&PostParams::default(), &with_version("v1.5.0"))
        .await
        .expect("v1.5.0 installs");
}

/// CEL's `authorizer` (upstream's authz library) asks the server's RBAC
/// about the requesting user: a match condition that exempts whoever may
/// list every secret, a resource check by namespace and name, the
/// request's own resource (`authorizer.requestResource`), and a service
/// account's permissions (`serviceAccount`, matched by RBAC as the
/// `ServiceAccount` subject).
#[tokio::test]
async fn authorizer_checks_ask_rbac() {
    use common::auth::{Credential, client_with, token_file};
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

    let tmp = tempfile::tempdir().expect("tmp");
    let tokens = token_file(tmp.path(), &["alice-token,alice,1", "bob-token,bob,2"]);
    let server = Server::start_with(&["--token-auth-file", tokens.to_str().expect("path")]).await;
    let admin = server.client().await;
    let roles: Api<Role> = Api::namespaced(admin.clone(), "default");
    let role_bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), "default");
    // alice: create and delete configmaps, read the secret `allowed` only;
    // bob: create configmaps, read every secret, delete nothing; the
    // builder service account reads configmaps.
    for (name, rules, subject) in [
        (
            "alice",
            json!([
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "delete"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["allowed"]},
            ]),
            json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}),
        ),
        (
            "bob",
            json!([
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
            ]),
            json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}),
        ),
        (
            "builder",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
            json!({"kind": "ServiceAccount", "name": "builder", "namespace": "default"}),
        ),
    ] {
        roles
            .create(
                &PostParams::default(),
                &from(json!({"metadata": {"name": name}, "rules": rules})),
            )
            .await
            .expect("role");
        role_bindings
            .create(
                &PostParams::default(),
                &from(json!({"metadata": {"name": name},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                    "subjects": [subject]})),
            )
            .await
            .expect("role binding");
    }
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(admin.clone());
    policies
        .create(
            &PostParams::default(),
            &configmap_policy(
                "authorizer-checks",
                json!({
                    "matchConditions": [{"name": "not-a-secret-lister",
                        "expression": "!authorizer.group('').resource('secrets').check('list').allowed()"}],
                    "validations": [
                        {"expression": "authorizer.group('').resource('secrets').namespace(object.metadata.namespace).name(object.metadata.labels['secret']).check('get').allowed()",
                         "message": "the creator must read the secret it names"},
                        {"expression": "authorizer.requestResource.check('delete').allowed()",
                         "message": "the creator must be able to delete it"},
                        {"expression": "authorizer.serviceAccount('default', 'builder').group('').resource('configmaps').namespace('default').check('get').allowed()",
                         "message": "the builder service account must read configmaps"},
                        {"expression": "!authorizer.path('/healthz').check('get').errored()",
                         "message": "the authorizer failed"},
                    ],
                }),
            ),
        )
        .await
        .expect("policy");
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(admin.clone());
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "authorizer-checks-binding",
                json!({"policyName": "authorizer-checks", "validationActions": ["Deny"]}),
            ),
        )
        .await
        .expect("binding");

    let alice = client_with(&server, &Credential::token("alice-token")).await;
    let bob = client_with(&server, &Credential::token("bob-token")).await;
    let denial = |message: &str| {
        format!(
            "is forbidden: ValidatingAdmissionPolicy 'authorizer-checks' with binding 'authorizer-checks-binding' denied request: {message}"
        )
    };
    // alice may not read the secret `other` her configmap names.
    let s = refused(
        &server,
        &alice,
        "default",
        &config_map("other", json!({"secret": "other"}), json!({})),
    )
    .await;
    // A validation without `reason` answers 422 Invalid.
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
    assert!(
        s.message
            .ends_with(&denial("the creator must read the secret it names")),
        "{}",
        s.message
    );
    // alice reads `allowed`, may delete configmaps, and the service
    // account reads configmaps: admitted.
    try_create(
        &alice,
        "default",
        &config_map("allowed", json!({"secret": "allowed"}), json!({})),
    )
    .await
    .expect("every check allows alice");
    // bob reads every secret but may not delete configmaps.
    let s = try_create(
        &bob,
        "default",
        &config_map("b", json!({"secret": "allowed"}), json!({})),
    )
    .await
    .expect_err("bob cannot delete what he creates");
    assert!(
        s.message
            .ends_with(&denial("the creator must be able to delete it")),
        "{}",
        s.message
    );
    // The admin may list every secret: the match condition exempts it
    // (it may still create configmaps the others may not).
    try_create(
        &admin,
        "default",
        &config_map("other", json!({"secret": "other"}), json!({})),
    )
    .await
    .expect("the admin is not matched");
    // Without the service account's role, every check of it fails.
    role_bindings
        .delete("builder", &Default::default())
        .await
        .expect("delete role binding");
    let s = refused(
        &server,
        &alice,
        "default",
        &config_map("allowed", json!({"secret": "allowed"}), json!({})),
    )
    .await;
    assert!(
        s.message
            .ends_with(&denial("the builder service account must read configmaps")),
        "{}",
        s.message
    );
}
