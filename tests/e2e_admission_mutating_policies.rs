//! MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding end to end
//! (`admissionregistration.k8s.io/v1`): stored with upstream's defaults and
//! validation, and enforced by the `MutatingAdmissionPolicy` plugin,
//! following the examples of the Kubernetes "Mutating Admission Policy"
//! documentation: an `ApplyConfiguration` that sets labels, a `JSONPatch`
//! that appends to a list (with `JSONPatch.escapeKey`), a param-driven
//! default, `reinvocationPolicy: IfNeeded`, and `failurePolicy`. Expected
//! messages are upstream's: the denial is the generic policy dispatcher's
//! (`policy '%s' with binding '%s' denied request: %s` as the message of
//! `admission.NewForbidden`'s 403, reason `Invalid` for an evaluation
//! error), the validation messages `validation.go`'s. Policies take effect
//! within a fraction of a second: checks after a change poll with
//! `common::eventually`.

mod common;

use std::sync::{Arc, Mutex};

use common::Server;
use common::kubectl::Kubectl;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
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

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "admissionregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "admissionregistration.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

fn policies(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource("MutatingAdmissionPolicy", "mutatingadmissionpolicies"),
    )
}

fn bindings(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource(
            "MutatingAdmissionPolicyBinding",
            "mutatingadmissionpolicybindings",
        ),
    )
}

/// A policy on configmaps (CREATE and UPDATE) with the given spec fields.
fn configmap_policy(name: &str, extra: Value) -> DynamicObject {
    let mut spec = json!({
        "matchConstraints": {"resourceRules": [{
            "apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"],
        }]},
        "reinvocationPolicy": "Never",
    });
    for (k, v) in extra.as_object().expect("object") {
        spec[k] = v.clone();
    }
    from(json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec}))
}

fn binding(name: &str, spec: Value) -> DynamicObject {
    from(json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": spec}))
}

fn apply(expression: &str) -> Value {
    json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}}])
}

fn config_map(name: &str, labels: Value) -> ConfigMap {
    from(json!({"metadata": {"name": name, "labels": labels}, "data": {"a": "1"}}))
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

/// Creates configmaps named `<prefix>-<n>` with `labels` in `default`
/// until `done` holds for the created one; returns it.
async fn created_until(
    server: &Server,
    client: &kube::Client,
    prefix: &str,
    labels: Value,
    done: impl Fn(&ConfigMap) -> bool,
) -> ConfigMap {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let done = &done;
    eventually_some(server, "the policy mutates", |n| {
        let cms = cms.clone();
        let cm = config_map(&format!("{prefix}-{n}"), labels.clone());
        async move {
            let created = cms.create(&PostParams::default(), &cm).await.ok()?;
            done(&created).then_some(created)
        }
    })
    .await
}

fn label<'a>(cm: &'a ConfigMap, key: &str) -> Option<&'a str> {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// The sidecar policy of the "Mutating Admission Policy" documentation.
const SIDECAR_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: "sidecar-policy.example.com"
spec:
  paramKind:
    kind: Sidecar
    apiVersion: mutations.example.com/v1
  matchConstraints:
    resourceRules:
    - apiGroups:   [""]
      apiVersions: ["v1"]
      operations:  ["CREATE"]
      resources:   ["pods"]
  matchConditions:
    - name: does-not-already-have-sidecar
      expression: "!object.spec.initContainers.exists(ic, ic.name == \"mesh-proxy\")"
  failurePolicy: Fail
  reinvocationPolicy: IfNeeded
  mutations:
    - patchType: "ApplyConfiguration"
      applyConfiguration:
        expression: >
          Object{
            spec: Object.spec{
              initContainers: [
                Object.spec.initContainers{
                  name: "mesh-proxy",
                  image: "mesh/proxy:v1.0.0",
                  args: ["proxy", "sidecar"],
                  restartPolicy: "Always"
                }
              ]
            }
          }
"#;

#[tokio::test]
async fn policies_and_bindings_are_stored_defaulted_and_validated() {
    let server = Server::start().await;
    let client = server.client().await;
    let policies = policies(&client);
    let bindings = bindings(&client);

    // Defaults (`SetDefaults_MutatingAdmissionPolicySpec`,
    // `SetDefaults_MatchResources`, `SetDefaults_Rule`).
    let created = policies
        .create(
            &PostParams::default(),
            &configmap_policy(
                "demo",
                json!({"mutations": apply("Object{metadata: Object.metadata{labels: {\"a\": \"b\"}}}")}),
            ),
        )
        .await
        .expect("create policy");
    let spec = &created.data["spec"];
    assert_eq!(spec["failurePolicy"], "Fail");
    assert_eq!(spec["matchConstraints"]["matchPolicy"], "Equivalent");
    assert_eq!(spec["matchConstraints"]["namespaceSelector"], json!({}));
    assert_eq!(
        spec["matchConstraints"]["resourceRules"][0]["scope"],
        json!("*")
    );
    assert_eq!(created.metadata.generation, Some(1));

    // A CEL compile error, at upstream's field path.
    let s = api_status(
        policies
            .create(
                &PostParams::default(),
                &configmap_policy(
                    "broken",
                    json!({"mutations": apply("Object{metadata: Object.metadata{labels: }}")}),
                ),
            )
            .await
            .expect_err("bad CEL"),
    );
    assert_eq!(s.code, 422);
    assert!(
        s.message.starts_with("MutatingAdmissionPolicy.admissionregistration.k8s.io \"broken\" is invalid: spec.mutations[0].applyConfiguration.expression: Invalid value: \"Object{metadata: Object.metadata{labels: }}\": compilation failed: "),
        "{}",
        s.message
    );
    // `validateMutatingAdmissionPolicySpec` and `validateMutation`.
    let bad: DynamicObject = from(json!({"apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "MutatingAdmissionPolicy", "metadata": {"name": "bad"}, "spec": {
        "matchConstraints": {"resourceRules": [{
            "apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["DELETE"], "resources": ["configmaps"],
        }]},
        "mutations": [{"patchType": "JSONPatch"}],
        "reinvocationPolicy": "Sometimes",
    }}));
    let s = api_status(
        policies
            .create(&PostParams::default(), &bad)
            .await
            .expect_err("bad policy"),
    );
    assert_eq!(
        s.message,
        "MutatingAdmissionPolicy.admissionregistration.k8s.io \"bad\" is invalid: [spec.matchConstraints.resourceRules.operations: Unsupported value: \"DELETE\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"UPDATE\", spec.mutations[0].jsonPatch: Required value: must be specified when patchType is JSONPatch, spec.reinvocationPolicy: Unsupported value: \"Sometimes\": supported values: \"Never\", \"IfNeeded\"]"
    );
    // `validateMutatingAdmissionPolicyBindingSpec`.
    let s = api_status(
        bindings
            .create(
                &PostParams::default(),
                &binding("nameless", json!({"paramRef": {"name": "a"}})),
            )
            .await
            .expect_err("no policy name"),
    );
    assert_eq!(
        s.message,
        "MutatingAdmissionPolicyBinding.admissionregistration.k8s.io \"nameless\" is invalid: [spec.policyName: Required value, spec.paramRef.parameterNotFoundAction: Required value]"
    );
    bindings
        .create(
            &PostParams::default(),
            &binding("demo-binding", json!({"policyName": "demo"})),
        )
        .await
        .expect("binding");

    // A spec change bumps the generation.
    let mut changed = created.clone();
    changed.data["spec"]["mutations"] =
        apply("Object{metadata: Object.metadata{labels: {\"a\": \"c\"}}}");
    let replaced = policies
        .replace("demo", &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert_eq!(replaced.metadata.generation, Some(2));

    // The documentation's sidecar example is accepted as written.
    let k = Kubectl::new(&server);
    let dir = tempfile::tempdir().expect("tmp");
    let sidecar = dir.path().join("sidecar.yaml");
    std::fs::write(&sidecar, SIDECAR_POLICY).expect("write");
    assert_eq!(
        k.ok(&["apply", "-f", sidecar.to_str().expect("path")])
            .trim(),
        "mutatingadmissionpolicy.admissionregistration.k8s.io/sidecar-policy.example.com created"
    );

    // kubectl's columns are upstream's printers'.
    let out = k.ok(&["get", "mutatingadmissionpolicies"]);
    let header = out.lines().next().unwrap_or_default();
    assert!(
        header.split_whitespace().collect::<Vec<_>>() == ["NAME", "MUTATIONS", "PARAMKIND", "AGE"],
        "{out}"
    );
    assert!(out.contains("demo"), "{out}");
    let out = k.ok(&["get", "mutatingadmissionpolicybindings"]);
    let header = out.lines().next().unwrap_or_default();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["NAME", "POLICYNAME", "PARAMREF", "AGE"],
        "{out}"
    );
}

/// The documentation's ApplyConfiguration example (labels set on every
/// matching object, the object's other labels kept): the mutation is in
/// the response and in storage; a binding whose `matchResources` does not
/// match leaves objects alone.
#[tokio::test]
async fn apply_configuration_sets_labels_and_unmatched_bindings_do_nothing() {
    let server = Server::start().await;
    let client = server.client().await;
    let policies = policies(&client);
    let bindings = bindings(&client);
    policies
        .create(
            &PostParams::default(),
            &configmap_policy(
                "add-env",
                json!({"mutations": apply(
                    r#"Object{metadata: Object.metadata{labels: {"environment": "test"}}, data: {"added": "yes"}}"#,
                )}),
            ),
        )
        .await
        .expect("policy");
    bindings
        .create(
            &PostParams::default(),
            &binding("add-env-binding", json!({"policyName": "add-env"})),
        )
        .await
        .expect("binding");
    // A second policy whose binding only matches namespaces labelled
    // `team: x` (none is).
    policies
        .create(
            &PostParams::default(),
            &configmap_policy(
                "add-team",
                json!({"mutations": apply(r#"Object{metadata: Object.metadata{labels: {"team": "x"}}}"#)}),
            ),
        )
        .await
        .expect("policy");
    bindings
        .create(
            &PostParams::default(),
            &binding(
                "add-team-binding",
                json!({"policyName": "add-team",
                    "matchResources": {"namespaceSelector": {"matchLabels": {"team": "x"}}}}),
            ),
        )
        .await
        .expect("binding");

    let created = created_until(&server, &client, "cm", json!({"app": "demo"}), |cm| {
        label(cm, "environment").is_some()
    })
    .await;
    assert_eq!(label(&created, "environment"), Some("test"));
    assert_eq!(label(&created, "app"), Some("demo"));
    assert_eq!(label(&created, "team"), None);
    let data = created.data.clone().unwrap_or_default();
    assert_eq!(data.get("added").map(String::as_str), Some("yes"));
    assert_eq!(data.get("a").map(String::as_str), Some("1"));
    // Stored as returned.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let name = created.metadata.name.clone().expect("name");
    let stored = cms.get(&name).await.expect("get");
    assert_eq!(label(&stored, "environment"), Some("test"));
    assert_eq!(stored.data, created.data);
    // An update is mutated too (the policy matches UPDATE).
    let mut changed = stored.clone();
    changed
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("environment".into(), "prod".into());
    let replaced = cms
        .replace(&name, &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert_eq!(label(&replaced, "environment"), Some("test"));
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
              items:
                type: array
                items: {type: string}
"#;

/// A JSONPatch appending to a list and adding a label whose key needs
/// escaping (`JSONPatch.escapeKey`), and a param-driven ApplyConfiguration
/// defaulting `spec.replicas` from a ConfigMap when it is unset (a
/// `matchConditions` gate), on a custom resource.
#[tokio::test]
async fn json_patch_and_param_driven_defaults_on_a_custom_resource() {
    let server = Server::start().await;
    let client = server.client().await;
    let k = Kubectl::new(&server);
    let dir = tempfile::tempdir().expect("tmp");
    let crd = dir.path().join("widgets.yaml");
    std::fs::write(&crd, WIDGETS).expect("write");
    k.ok(&["apply", "-f", crd.to_str().expect("path")]);
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=20s",
        "crd/widgets.example.com",
    ]);
    let ar = ApiResource {
        group: "example.com".into(),
        version: "v1".into(),
        api_version: "example.com/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    };
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    common::eventually(&server, "widgets served", || {
        let widgets = widgets.clone();
        async move { widgets.list(&Default::default()).await.is_ok() }
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &from(json!({"metadata": {"name": "widget-defaults"}, "data": {"replicas": "3"}})),
    )
    .await
    .expect("param");

    let rules = json!({"resourceRules": [{
        "apiGroups": ["example.com"], "apiVersions": ["v1"],
        "operations": ["CREATE"], "resources": ["widgets"],
    }]});
    let policies = policies(&client);
    let bindings = bindings(&client);
    policies
        .create(
            &PostParams::default(),
            &from(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
                "metadata": {"name": "append-item"}, "spec": {
                "matchConstraints": rules,
                "reinvocationPolicy": "Never",
                "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": r#"[
                    JSONPatch{op: "add", path: "/spec/items/-", value: "added"},
                    JSONPatch{op: "add", path: "/metadata/labels/" + JSONPatch.escapeKey("example.com/mutated"), value: "true"},
                ]"#}}],
            }})),
        )
        .await
        .expect("policy");
    policies
        .create(
            &PostParams::default(),
            &from(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
                "metadata": {"name": "default-replicas"}, "spec": {
                "matchConstraints": rules,
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConditions": [{"name": "no-replicas", "expression": "!has(object.spec.replicas)"}],
                "reinvocationPolicy": "Never",
                "mutations": apply("Object{spec: Object.spec{replicas: int(params.data.replicas)}}"),
            }})),
        )
        .await
        .expect("policy");
    for (name, policy, extra) in [
        ("append-item-binding", "append-item", json!({})),
        (
            "default-replicas-binding",
            "default-replicas",
            json!({"paramRef": {"name": "widget-defaults", "parameterNotFoundAction": "Deny"}}),
        ),
    ] {
        let mut spec = json!({"policyName": policy});
        for (k, v) in extra.as_object().expect("object") {
            spec[k] = v.clone();
        }
        bindings
            .create(&PostParams::default(), &binding(name, spec))
            .await
            .expect("binding");
    }

    let widget = |name: &str, spec: Value| -> DynamicObject {
        from(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "labels": {"app": "w"}}, "spec": spec}))
    };
    let created = eventually_some(&server, "both policies mutate", |n| {
        let widgets = widgets.clone();
        let w = widget(&format!("w-{n}"), json!({"items": ["first"]}));
        async move {
            let c = widgets.create(&PostParams::default(), &w).await.ok()?;
            (c.data["spec"]["items"] == json!(["first", "added"])
                && c.data["spec"]["replicas"] == json!(3))
            .then_some(c)
        }
    })
    .await;
    let labels = created.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("example.com/mutated").map(String::as_str),
        Some("true")
    );
    assert_eq!(labels.get("app").map(String::as_str), Some("w"));
    let stored = widgets
        .get(created.metadata.name.as_deref().expect("name"))
        .await
        .expect("get");
    assert_eq!(
        stored.data["spec"],
        json!({"items": ["first", "added"], "replicas": 3})
    );
    // Replicas given: the match condition leaves them.
    let given = widgets
        .create(
            &PostParams::default(),
            &widget("given", json!({"replicas": 7, "items": []})),
        )
        .await
        .expect("create");
    assert_eq!(
        given.data["spec"],
        json!({"replicas": 7, "items": ["added"]})
    );

    // An apply configuration may not set an atomic list (`spec.items` has
    // no `x-kubernetes-list-type`): upstream's `validatePatch`.
    policies
        .create(
            &PostParams::default(),
            &from(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
                "metadata": {"name": "set-items"}, "spec": {
                "matchConstraints": rules,
                "matchConditions": [{"name": "opted-in", "expression": "'atomic' in object.metadata.labels"}],
                "reinvocationPolicy": "Never",
                "mutations": apply(r#"Object{spec: Object.spec{items: ["replaced"]}}"#),
            }})),
        )
        .await
        .expect("policy");
    bindings
        .create(
            &PostParams::default(),
            &binding("set-items-binding", json!({"policyName": "set-items"})),
        )
        .await
        .expect("binding");
    let s = eventually_some(&server, "the atomic list is refused", |n| {
        let widgets = widgets.clone();
        let mut w = widget(&format!("atomic-{n}"), json!({"replicas": 1, "items": []}));
        w.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("atomic".into(), "yes".into());
        async move {
            widgets
                .create(&PostParams::default(), &w)
                .await
                .err()
                .map(api_status)
        }
    })
    .await;
    assert_eq!(s.code, 403, "{s:?}");
    assert_eq!(s.reason, "Invalid");
    assert_eq!(
        s.message,
        "policy 'set-items' with binding 'set-items-binding' denied request: error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: .spec.items"
    );
}

/// `reinvocationPolicy: IfNeeded`: a policy that ran before a later one
/// changed the object runs again and sees the change; one with `Never`
/// does not.
#[tokio::test]
async fn reinvocation_if_needed() {
    let server = Server::start().await;
    let client = server.client().await;
    let policies = policies(&client);
    let bindings = bindings(&client);
    let saw_b = r#"Object{metadata: Object.metadata{labels: {"LABEL": string(has(object.metadata.labels) && "b" in object.metadata.labels)}}}"#;
    for (name, extra) in [
        (
            "a-if-needed",
            json!({"reinvocationPolicy": "IfNeeded", "mutations": apply(&saw_b.replace("LABEL", "seen-b-again"))}),
        ),
        (
            "a-never",
            json!({"mutations": apply(&saw_b.replace("LABEL", "seen-b-once"))}),
        ),
        (
            "b-sets-b",
            json!({"mutations": apply(r#"Object{metadata: Object.metadata{labels: {"b": "set"}}}"#)}),
        ),
    ] {
        policies
            .create(&PostParams::default(), &configmap_policy(name, extra))
            .await
            .expect("policy");
        bindings
            .create(
                &PostParams::default(),
                &binding(&format!("{name}-binding"), json!({"policyName": name})),
            )
            .await
            .expect("binding");
    }
    let created = created_until(&server, &client, "cm", json!({}), |cm| {
        label(cm, "b").is_some() && label(cm, "seen-b-again").is_some()
    })
    .await;
    assert_eq!(label(&created, "seen-b-again"), Some("true"));
    assert_eq!(label(&created, "seen-b-once"), Some("false"));
}

/// An evaluation error fails the request under `failurePolicy: Fail` with
/// upstream's message, and is ignored under `Ignore`.
#[tokio::test]
async fn failure_policy() {
    let server = Server::start().await;
    let client = server.client().await;
    let policies = policies(&client);
    let bindings = bindings(&client);
    let broken = r#"Object{data: {"copy": object.data.missing}}"#;
    policies
        .create(
            &PostParams::default(),
            &configmap_policy(
                "broken",
                json!({"mutations": apply(broken),
                    "matchConditions": [{"name": "opted-in", "expression": "has(object.metadata.labels) && 'broken' in object.metadata.labels"}]}),
            ),
        )
        .await
        .expect("policy");
    bindings
        .create(
            &PostParams::default(),
            &binding("broken-binding", json!({"policyName": "broken"})),
        )
        .await
        .expect("binding");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let s = eventually_some(&server, "the policy fails the request", |n| {
        let cms = cms.clone();
        let cm = config_map(&format!("cm-{n}"), json!({"broken": "yes"}));
        async move {
            cms.create(&PostParams::default(), &cm)
                .await
                .err()
                .map(api_status)
        }
    })
    .await;
    assert_eq!(s.code, 403, "{s:?}");
    assert_eq!(s.reason, "Invalid");
    assert!(
        s.message.starts_with(&format!(
            "policy 'broken' with binding 'broken-binding' denied request: expression '{broken}' resulted in error: "
        )),
        "{}",
        s.message
    );
    // Objects the match condition leaves out are admitted.
    cms.create(&PostParams::default(), &config_map("other", json!({})))
        .await
        .expect("not opted in");

    // Ignore: admitted unchanged.
    let mut p = policies.get("broken").await.expect("get");
    p.data["spec"]["failurePolicy"] = json!("Ignore");
    policies
        .replace("broken", &PostParams::default(), &p)
        .await
        .expect("replace");
    let created = created_until(
        &server,
        &client,
        "ignored",
        json!({"broken": "yes"}),
        |_| true,
    )
    .await;
    assert_eq!(
        created.data.unwrap_or_default().get("copy"),
        None,
        "not mutated"
    );
}

/// Creates the MutatingWebhookConfiguration `name` calling `hook` (as
/// `webhook`) on CREATEs of configmaps labelled `opted-in: yes`, with
/// `reinvocation` as its `reinvocationPolicy`.
async fn configure_webhook(
    client: &kube::Client,
    hook: &common::webhook::Webhook,
    name: &str,
    webhook: &str,
    reinvocation: &str,
) {
    use base64::Engine as _;
    let configs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
        ),
    );
    configs
        .create(
            &PostParams::default(),
            &from(json!({"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration", "metadata": {"name": name},
                "webhooks": [{
                    "name": webhook,
                    "clientConfig": {
                        "url": format!("https://127.0.0.1:{}/", hook.port),
                        "caBundle": base64::engine::general_purpose::STANDARD.encode(&hook.ca.cert_pem),
                    },
                    "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                        "operations": ["CREATE"], "resources": ["configmaps"]}],
                    "objectSelector": {"matchLabels": {"opted-in": "yes"}},
                    "reinvocationPolicy": reinvocation,
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                }],
            })),
        )
        .await
        .expect("webhook configuration");
}

/// A webhook's answer allowing the review, with `patch` as its JSON patch.
fn patching_answer(review: &Value, patch: Option<Value>) -> (u16, Value) {
    use base64::Engine as _;
    let mut response = json!({"uid": review["request"]["uid"], "allowed": true});
    if let Some(patch) = patch {
        response["patchType"] = json!("JSONPatch");
        response["patch"] =
            json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
    }
    (
        200,
        json!({"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": response}),
    )
}

/// The chain's reinvocation: a mutating webhook (which runs after the
/// policies) changes the object, so the `IfNeeded` policy runs once more
/// and sees the change; the `Never` one does not.
#[tokio::test]
async fn policies_are_reinvoked_after_a_mutating_webhook() {
    use common::webhook::Webhook;

    let server = Server::start().await;
    let client = server.client().await;
    let hook = Webhook::start(
        Arc::new(|review: &Value| {
            let labels = &review["request"]["object"]["metadata"]["labels"];
            let patch = labels.get("webhook").is_none().then(
                || json!([{"op": "add", "path": "/metadata/labels/webhook", "value": "yes"}]),
            );
            patching_answer(review, patch)
        }),
        None,
    )
    .await;
    // The webhook only sees configmaps labelled `opted-in`, which the
    // policies create them with.
    configure_webhook(
        &client,
        &hook,
        "add-webhook-label",
        "add.example.com",
        "Never",
    )
    .await;
    let policies = policies(&client);
    let bindings = bindings(&client);
    let saw = r#"Object{metadata: Object.metadata{labels: {"LABEL": string("webhook" in object.metadata.labels)}}}"#;
    for (name, extra) in [
        (
            "saw-webhook-if-needed",
            json!({"reinvocationPolicy": "IfNeeded", "mutations": apply(&saw.replace("LABEL", "saw-webhook-again"))}),
        ),
        (
            "saw-webhook-never",
            json!({"mutations": apply(&saw.replace("LABEL", "saw-webhook-once"))}),
        ),
    ] {
        policies
            .create(&PostParams::default(), &configmap_policy(name, extra))
            .await
            .expect("policy");
        bindings
            .create(
                &PostParams::default(),
                &binding(&format!("{name}-binding"), json!({"policyName": name})),
            )
            .await
            .expect("binding");
    }
    let created = created_until(&server, &client, "cm", json!({"opted-in": "yes"}), |cm| {
        label(cm, "webhook").is_some() && label(cm, "saw-webhook-again").is_some()
    })
    .await;
    assert_eq!(label(&created, "saw-webhook-again"), Some("true"));
    assert_eq!(label(&created, "saw-webhook-once"), Some("false"));
    assert!(hook.calls() > 0);
}

/// The reinvocation pass goes on after the policies: a mutating webhook
/// changes the object, the `IfNeeded` policy run before it runs again and
/// changes the object in turn, so the `IfNeeded` webhook is called again
/// and sees the policy's second answer (upstream's webhook dispatcher
/// reinvokes its previously invoked webhooks when the object changed since
/// their last output).
#[tokio::test]
async fn webhooks_are_reinvoked_after_a_reinvoked_policy() {
    use common::webhook::Webhook;

    let server = Server::start().await;
    let client = server.client().await;
    // Adds `webhook: yes` and copies the policy's label into `webhook-saw`.
    let hook = Webhook::start(
        Arc::new(|review: &Value| {
            let labels = &review["request"]["object"]["metadata"]["labels"];
            let saw = labels
                .get("policy-saw-webhook")
                .and_then(Value::as_str)
                .unwrap_or("none");
            let patch = json!([
                {"op": "add", "path": "/metadata/labels/webhook", "value": "yes"},
                {"op": "add", "path": "/metadata/labels/webhook-saw", "value": saw},
            ]);
            patching_answer(review, Some(patch))
        }),
        None,
    )
    .await;
    configure_webhook(
        &client,
        &hook,
        "copy-policy-label",
        "copy.example.com",
        "IfNeeded",
    )
    .await;
    let saw = r#"Object{metadata: Object.metadata{labels: {"policy-saw-webhook": string("webhook" in object.metadata.labels)}}}"#;
    policies(&client)
        .create(
            &PostParams::default(),
            &configmap_policy(
                "saw-webhook",
                json!({"reinvocationPolicy": "IfNeeded", "mutations": apply(saw)}),
            ),
        )
        .await
        .expect("policy");
    bindings(&client)
        .create(
            &PostParams::default(),
            &binding("saw-webhook-binding", json!({"policyName": "saw-webhook"})),
        )
        .await
        .expect("binding");
    let created = created_until(&server, &client, "cm", json!({"opted-in": "yes"}), |cm| {
        label(cm, "webhook").is_some() && label(cm, "policy-saw-webhook").is_some()
    })
    .await;
    // First pass: the policy answers "false", the webhook copies it; the
    // reinvocation pass: the policy answers "true", and the webhook,
    // called again, copies that.
    assert_eq!(label(&created, "policy-saw-webhook"), Some("true"));
    assert_eq!(label(&created, "webhook-saw"), Some("true"));
}
