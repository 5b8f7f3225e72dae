//! The cases of upstream's `typechecking_test.go` and `controller_test.go`
//! (the data sheet's table): a resolver that serves every resource with
//! one schema.

use serde_json::{Value, json};

use super::*;
use crate::cel_check::schema;

/// Every resource is served (kind: the resource's name with a capital
/// `Deployment` for `deployments`); every kind has `schema` (`None`: no
/// schema).
struct Fake {
    schema: Option<Value>,
}

impl SchemaResolver for Fake {
    fn kind_for(&self, _group: &str, _version: &str, resource: &str) -> Option<String> {
        Some(match resource {
            "deployments" => "Deployment".into(),
            "replicasets" => "ReplicaSet".into(),
            other => other.to_string(),
        })
    }

    fn object_type(&self, _group: &str, _version: &str, kind: &str) -> Option<Option<Type>> {
        let s = self.schema.as_ref()?;
        Some(schema::from_openapi(s, &serde_json::Map::new(), kind))
    }
}

fn props(p: Value) -> Option<Value> {
    Some(json!({"type": "object", "properties": p}))
}

fn policy(spec: Value) -> ValidatingAdmissionPolicy {
    let mut spec = spec;
    if spec.get("matchConstraints").is_none() {
        spec["matchConstraints"] = json!({"resourceRules": [{
            "apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["deployments"]}]});
    }
    serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("policy")
}

fn warnings(spec: Value, schema: Option<Value>) -> Vec<(String, String)> {
    type_check(&policy(spec), &Fake { schema })
        .expression_warnings
        .into_iter()
        .map(|w| (w.field_ref, w.warning))
        .collect()
}

fn validations(exprs: &[&str]) -> Value {
    Value::Array(exprs.iter().map(|e| json!({"expression": e})).collect())
}

#[test]
fn upstream_cases() {
    let foo_string = || props(json!({"foo": {"type": "string"}}));
    let foo_int = || props(json!({"foo": {"type": "integer", "format": "int64"}}));
    let v = |e: &[&str]| json!({"validations": validations(e)});

    assert!(warnings(v(&["object.foo == 'bar'"]), foo_string()).is_empty());
    // No schema: the kind is not checked.
    assert!(warnings(v(&["object.foo == 'bar'"]), None).is_empty());
    assert_eq!(
        warnings(v(&["object.foo == 'bar'"]), props(json!({"bar": {"type": "string"}}))),
        vec![(
            "spec.validations[0].expression".to_string(),
            "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'foo'\n | object.foo == 'bar'\n | ......^\n".to_string()
        )]
    );
    assert_eq!(
        warnings(v(&["object.foo == 'bar'"]), foo_int()),
        vec![(
            "spec.validations[0].expression".to_string(),
            "apps/v1, Kind=Deployment: ERROR: <input>:1:12: found no matching overload for '_==_' applied to '(int, string)'\n | object.foo == 'bar'\n | ...........^\n".to_string()
        )]
    );
    // Params typed from the parameter kind's schema.
    let w = warnings(
        json!({"paramKind": {"apiVersion": "v1", "kind": "DoesNotMatter"},
            "validations": validations(&["object.foo == params.bar"])}),
        foo_string(),
    );
    assert_eq!(w.len(), 1);
    assert_eq!(
        w[0].1,
        format!(
            "apps/v1, Kind=Deployment: ERROR: <input>:1:21: undefined field 'bar'\n | object.foo == params.bar\n | {}^\n",
            ".".repeat(20)
        )
    );
    assert!(
        warnings(
            json!({"paramKind": {"apiVersion": "v1", "kind": "Config"},
                "validations": validations(&["params != null"])}),
            Some(json!({})),
        )
        .is_empty()
    );
    // Without a paramKind, `params` is undeclared.
    let w = warnings(v(&["params != null"]), foo_string());
    assert!(
        w[0].1
            .contains("undeclared reference to 'params' (in container '')")
    );
    // Only the bad expression.
    let w = warnings(
        v(&["object.foo == 'bar'", "object.bar == 'foo'"]),
        foo_string(),
    );
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].0, "spec.validations[1].expression");
    // messageExpression.
    let w = warnings(
        json!({"validations": [{"expression": "object.foo == 'bar'", "messageExpression": "object.foo + 114514"}]}),
        foo_string(),
    );
    assert_eq!(
        w,
        vec![(
            "spec.validations[0].messageExpression".to_string(),
            "apps/v1, Kind=Deployment: ERROR: <input>:1:12: found no matching overload for '_+_' applied to '(string, int)'\n | object.foo + 114514\n | ...........^\n".to_string()
        )]
    );
    // The authorizer.
    assert!(
        warnings(
            v(&["authorizer.group('').resource('endpoints').check('create').allowed()"]),
            foo_string()
        )
        .is_empty()
    );
    let w = warnings(v(&["authorizer.allowed()"]), foo_string());
    assert_eq!(w.len(), 1);
    assert!(w[0].1.contains(
        "found no matching overload for 'allowed' applied to 'kubernetes.authorization.Authorizer.()'"
    ));
    // An object allowing any property.
    let reproducer = props(json!({
        "spec": {"type": "object", "properties": {"text": {"type": "string"}}},
        "status": {"type": "object", "properties": {
            "problematicProperty": {"type": "object", "additionalProperties": true}}},
    }));
    assert!(
        warnings(
            json!({"matchConstraints": {"resourceRules": [{"apiGroups": ["example.com"],
                "apiVersions": ["v1alpha1"], "operations": ["CREATE"], "resources": ["reproducers"]}]},
                "validations": validations(&["has(object.spec.text)"])}),
            reproducer,
        )
        .is_empty()
    );
    assert!(warnings(v(&["true"]), Some(json!({}))).is_empty());
}

#[test]
fn variables() {
    let foo_int = || props(json!({"foo": {"type": "integer", "format": "int64"}}));
    let with = |vars: Value, e: &str| json!({"variables": vars, "validations": validations(&[e])});
    assert!(
        warnings(
            with(
                json!([{"name": "works", "expression": "true"}]),
                "variables.works"
            ),
            foo_int()
        )
        .is_empty()
    );
    let w = warnings(
        with(
            json!([{"name": "works", "expression": "true"}]),
            "variables.nonExisting",
        ),
        foo_int(),
    );
    assert_eq!(
        w,
        vec![(
            "spec.validations[0].expression".to_string(),
            "apps/v1, Kind=Deployment: ERROR: <input>:1:10: undefined field 'nonExisting'\n | variables.nonExisting\n | .........^\n".to_string()
        )]
    );
    let w = warnings(
        with(
            json!([{"name": "name", "expression": "'something'"}]),
            "variables.name == object.foo",
        ),
        foo_int(),
    );
    assert_eq!(w.len(), 1);
    assert!(
        w[0].1
            .contains("1:16: found no matching overload for '_==_' applied to '(string, int)'")
    );
    // A variable with an error is `dyn`, its error unreported.
    assert!(
        warnings(
            with(
                json!([{"name": "name", "expression": "object.foo == 'str'"}]),
                "variables.name == object.foo",
            ),
            foo_int(),
        )
        .is_empty()
    );
}

#[test]
fn several_kinds_and_errors() {
    let spec = json!({"matchConstraints": {"resourceRules": [{
            "apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
            "resources": ["replicasets", "deployments"]}]},
        "validations": validations(&["object.replicas > 1"])});
    let w = warnings(spec, props(json!({"spec": {"type": "object"}})));
    let one = |kind: &str| {
        format!(
            "apps/v1, Kind={kind}: ERROR: <input>:1:7: undefined field 'replicas'\n | object.replicas > 1\n | ......^\n"
        )
    };
    assert_eq!(
        w,
        vec![(
            "spec.validations[0].expression".to_string(),
            format!("{}\n{}", one("Deployment"), one("ReplicaSet"))
        )]
    );
    let deployment = props(json!({"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "format": "int32"}}}}));
    let w = warnings(
        json!({"validations": validations(&[
            "object.spec.nonExistingFirst > 1",
            "object.spec.replicas > '1' && object.spec.nonExisting == 1",
        ])}),
        deployment,
    );
    assert_eq!(w.len(), 2);
    assert!(w[0].1.contains("1:12: undefined field 'nonExistingFirst'"));
    let second = &w[1].1;
    let first_at =
        second.find("1:22: found no matching overload for '_>_' applied to '(int, string)'");
    let then_at = second.find("\nERROR: <input>:1:42: undefined field 'nonExisting'");
    assert!(first_at.is_some() && then_at > first_at, "{second}");
    assert_eq!(second.matches("Kind=Deployment").count(), 1);
}

#[test]
fn kinds_to_check() {
    let rules = |rules: Value| policy(json!({"matchConstraints": {"resourceRules": rules}}));
    let kinds = |p: &ValidatingAdmissionPolicy| -> Vec<String> {
        types_to_check(p, &Fake { schema: None })
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    // Wildcards and subresources are skipped; the rest sorted.
    let p = rules(json!([
        {"apiGroups": ["*"], "apiVersions": ["v1"], "resources": ["a"]},
        {"apiGroups": ["g"], "apiVersions": ["*"], "resources": ["a"]},
        {"apiGroups": ["g", ""], "apiVersions": ["v1"], "resources": ["b", "a", "c/status", "*"]},
    ]));
    assert_eq!(
        kinds(&p),
        vec!["/v1, Kind=a", "/v1, Kind=b", "g/v1, Kind=a", "g/v1, Kind=b"]
    );
    // At most 10 per rule, and the first rule reaching 10 ends the walk.
    let many: Vec<String> = (0..12).map(|i| format!("r{i:02}")).collect();
    let p = rules(json!([
        {"apiGroups": ["g"], "apiVersions": ["v1"], "resources": many},
        {"apiGroups": ["h"], "apiVersions": ["v1"], "resources": ["x"]},
    ]));
    let k = kinds(&p);
    assert_eq!(k.len(), 10);
    assert_eq!(k[9], "g/v1, Kind=r09");
    assert!(kinds(&policy(json!({"matchConstraints": {}}))).is_empty());
}

/// The schemas the server generates for compiled-in kinds (schemars'
/// OpenAPI 3 settings, as `patch::schema::KindSchema`), served for
/// resources `configmaps` and `services`.
struct Generated;

fn generated<V: crate::resource::Resource>(kind: &str) -> Option<Type> {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let root = generator.subschema_for::<V>().to_value();
    V::publish_schema(&mut generator);
    let defs = generator.take_definitions(true);
    schema::from_openapi(&root, &defs, kind)
}

impl SchemaResolver for Generated {
    fn kind_for(&self, _group: &str, _version: &str, resource: &str) -> Option<String> {
        match resource {
            "configmaps" => Some("ConfigMap".into()),
            "services" => Some("Service".into()),
            _ => None,
        }
    }

    fn object_type(&self, _group: &str, _version: &str, kind: &str) -> Option<Option<Type>> {
        use crate::builtin::core_v1::{ConfigMap, Service};
        match kind {
            "ConfigMap" => Some(generated::<ConfigMap>(kind)),
            "Service" => Some(generated::<Service>(kind)),
            _ => None,
        }
    }
}

/// Everyday expressions on the generated schemas of compiled-in kinds give
/// no warning; mistakes do.
#[test]
fn generated_schemas_of_compiled_in_kinds() {
    let check = |exprs: &[&str]| {
        let p = policy(json!({
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps", "services"]}]},
            "validations": validations(exprs),
        }));
        type_check(&p, &Generated).expression_warnings
    };
    let good = [
        "object.metadata.name.startsWith('a') && object.metadata.namespace != ''",
        "object.metadata.labels.all(k, object.metadata.labels[k].size() < 64)",
        "!has(object.metadata.annotations) || 'x' in object.metadata.annotations",
        "object.metadata.creationTimestamp < timestamp('2030-01-01T00:00:00Z') || true",
        "object.metadata.ownerReferences.all(r, r.kind != '' && r.uid != '')",
        "object.metadata.generation >= 0 && object.metadata.resourceVersion != 'x'",
        "object.metadata.finalizers.exists(f, f == 'x') || true",
        "object.apiVersion == 'v1' && object.kind != ''",
        "request.operation == 'CREATE' && request.userInfo.groups.exists(g, g == 'x')",
        "namespaceObject.metadata.labels['env'] == 'prod' || true",
    ];
    assert_eq!(check(&good), vec![], "no warnings for everyday expressions");
    let configmap_only = [
        "object.data.all(k, object.data[k].size() < 10)",
        "has(object.binaryData) || object.immutable == true",
    ];
    let w = check(&configmap_only);
    // The Service has neither field: its kind's block only.
    assert!(
        w.iter().all(|w| !w.warning.contains("Kind=ConfigMap")),
        "{w:?}"
    );
    let service_only = [
        "object.spec.ports.all(p, p.port > 0 && p.port < 65536 && p.protocol in ['TCP', 'UDP'])",
        "object.spec.type == 'ClusterIP' || object.spec.selector.size() > 0",
        "object.spec.ports.exists(p, p.targetPort == 8080 || p.targetPort == 'http')",
    ];
    let w = check(&service_only);
    assert!(
        w.iter().all(|w| !w.warning.contains("Kind=Service")),
        "{w:?}"
    );
    let w = check(&[
        "object.metadata.name == 1",
        "object.metadata.labels.size() == 'x'",
    ]);
    assert_eq!(w.len(), 2);
    assert!(w[0].warning.starts_with(
        "/v1, Kind=ConfigMap: ERROR: <input>:1:22: found no matching overload for '_==_' applied to '(string, int)'"
    ));
    assert!(
        w[0].warning
            .contains("\n\n/v1, Kind=Service: ERROR: <input>:1:22:")
    );
}
