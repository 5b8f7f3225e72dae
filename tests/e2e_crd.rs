//! CustomResourceDefinitions on the real binary: a definition applied with
//! kubectl becomes Established and its kind is served — CRUD, list, watch,
//! patch and apply with kube-rs's `DynamicObject`, kubectl's `get` with the
//! definition's printer columns, discovery and OpenAPI updated live, the
//! status subresource, versions converted by `apiVersion`, creates refused
//! while the definition is terminating, the cleanup finalizer, and
//! definitions and resources served again after a restart.

mod common;

use std::path::Path;

use common::kubectl::Kubectl;
use common::{DEADLINE, Server, eventually};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::Discovery;
use serde_json::{Value, json};

fn write(path: &Path, text: &str) -> String {
    std::fs::write(path, text).expect("write");
    path.display().to_string()
}

/// A namespaced definition with two versions, status and scale
/// subresources, printer columns and a short name.
const WIDGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
    additionalPrinterColumns:
    - name: Size
      type: string
      jsonPath: .spec.size
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: string
              replicas:
                type: integer
          status:
            type: object
            properties:
              replicas:
                type: integer
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

fn widget_resource(version: &str) -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: version.into(),
        api_version: format!("example.com/{version}"),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

fn widget(name: &str, size: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size, "replicas": 1}
    }))
    .expect("widget")
}

fn condition<'a>(crd: &'a Value, type_: &str) -> Option<&'a Value> {
    crd["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

#[tokio::test]
async fn a_definition_serves_its_kind_end_to_end() {
    let server = Server::start().await;
    let k = Kubectl::new(&server);
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = write(&tmp.path().join("widgets.yaml"), WIDGETS);
    let out = k.ok(&["apply", "-f", &file]);
    assert!(out.contains("widgets.example.com created"), "{out}");
    let waited = k.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=10s",
        "crd/widgets.example.com",
    ]);
    assert!(waited.contains("condition met"), "{waited}");

    let crd = k.json(&["get", "crd", "widgets.example.com", "-o", "json"]);
    let names = condition(&crd, "NamesAccepted").expect("NamesAccepted");
    assert_eq!(names["status"], "True");
    assert_eq!(names["reason"], "NoConflicts");
    assert_eq!(names["message"], "no conflicts found");
    let established = condition(&crd, "Established").expect("Established");
    assert_eq!(established["reason"], "InitialNamesAccepted");
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Widget");
    assert_eq!(crd["status"]["acceptedNames"]["listKind"], "WidgetList");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    assert!(crd["metadata"].get("finalizers").is_none(), "{crd}");
    let table = k.ok(&["get", "crd"]);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("CREATED AT"), "{table}");
    assert!(table.contains("widgets.example.com"), "{table}");

    // CRUD with kube-rs.
    let client = server.client().await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v1"));
    let created = api
        .create(&PostParams::default(), &widget("w1", "small"))
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.data["spec"]["size"], "small");
    let got = api.get("w1").await.expect("get");
    assert_eq!(got.metadata.uid, created.metadata.uid);
    let list = api.list(&Default::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);

    // Another version: the same object, its apiVersion rewritten.
    let beta: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &widget_resource("v1beta1"));
    let as_beta = beta.get("w1").await.expect("get v1beta1");
    assert_eq!(
        as_beta.types.as_ref().map(|t| t.api_version.as_str()),
        Some("example.com/v1beta1")
    );
    assert_eq!(as_beta.data["spec"]["size"], "small");

    // Merge patch, status ignored on the main resource, generation bumps.
    let patched = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": "large"}, "status": {"replicas": 5}})),
        )
        .await
        .expect("patch");
    assert_eq!(patched.data["spec"]["size"], "large");
    assert!(patched.data.get("status").is_none(), "{:?}", patched.data);
    assert_eq!(patched.metadata.generation, Some(2));
    // /status takes only status, and leaves generation alone.
    let status = api
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": "ignored"}, "status": {"replicas": 3}})),
        )
        .await
        .expect("status");
    assert_eq!(status.data["status"]["replicas"], 3);
    assert_eq!(status.data["spec"]["size"], "large");
    assert_eq!(status.metadata.generation, Some(2));

    // Server-side apply.
    let applied = api
        .patch(
            "w2",
            &PatchParams::apply("test").force(),
            &Patch::Apply(json!({
                "apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w2"}, "spec": {"size": "medium"}
            })),
        )
        .await
        .expect("apply");
    assert_eq!(applied.data["spec"]["size"], "medium");
    let managers: Vec<&str> = applied
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.as_deref())
        .collect();
    assert_eq!(managers, ["test"]);

    // kubectl: the printer columns, the short name, the category.
    let table = k.ok(&["get", "wd", "-n", "default"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "SIZE", "REPLICAS"], "{table}");
    assert!(table.contains("w1") && table.contains("large"), "{table}");
    let all = k.ok(&["get", "all", "-n", "default"]);
    assert!(all.contains("widget.example.com/w1"), "{all}");
    let scaled = k.ok(&["scale", "widget/w1", "-n", "default", "--replicas=4"]);
    assert!(scaled.contains("scaled"), "{scaled}");
    assert_eq!(
        api.get("w1").await.expect("get").data["spec"]["replicas"],
        4
    );

    // Discovery and OpenAPI know the kind.
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let group = discovery
        .groups()
        .find(|g| g.name() == "example.com")
        .expect("example.com in discovery");
    assert_eq!(group.preferred_version_or_latest(), "v1");
    let resources = k.ok(&["api-resources", "--api-group=example.com"]);
    assert!(
        resources.contains("widgets") && resources.contains("wd"),
        "{resources}"
    );
    let explain = k.ok(&["explain", "widgets.spec"]);
    assert!(explain.contains("size"), "{explain}");

    // Watch sees a change.
    let mut watch = std::pin::pin!(kube::runtime::watcher(
        api.clone(),
        kube::runtime::watcher::Config::default()
    ));
    use futures::StreamExt;
    let first = tokio::time::timeout(DEADLINE, watch.next()).await;
    assert!(matches!(first, Ok(Some(Ok(_)))), "{first:?}");

    // Deleting the definition empties it first; creates are refused meanwhile.
    let held = api
        .patch(
            "w2",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}})),
        )
        .await
        .expect("hold");
    assert!(held.metadata.finalizers.is_some());
    k.ok(&["delete", "crd", "widgets.example.com", "--wait=false"]);
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            plural: "customresourcedefinitions".into(),
        },
    );
    // Upstream's REST Delete: the cleanup finalizer joins, Terminating.
    let crd =
        serde_json::to_value(crds.get("widgets.example.com").await.expect("crd")).expect("json");
    assert_eq!(
        crd["metadata"]["finalizers"],
        json!(["customresourcecleanup.apiextensions.k8s.io"])
    );
    assert_eq!(
        condition(&crd, "Terminating").map(|c| &c["status"]),
        Some(&json!("True"))
    );
    let refused = api
        .create(&PostParams::default(), &widget("w3", "x"))
        .await
        .expect_err("refused");
    match refused {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 405);
            assert_eq!(status.reason, "MethodNotAllowed");
            assert_eq!(
                status.message,
                "create not allowed while custom resource definition is terminating"
            );
        }
        other => panic!("{other:?}"),
    }
    eventually(&server, "w1 is deleted", || async {
        api.get_opt("w1").await.expect("get").is_none()
    })
    .await;
    assert!(
        crds.get_opt("widgets.example.com")
            .await
            .expect("crd")
            .is_some()
    );
    api.patch(
        "w2",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("release");
    eventually(&server, "the definition is gone", || async {
        crds.get_opt("widgets.example.com")
            .await
            .expect("crd")
            .is_none()
    })
    .await;
    let after = api.get("w1").await.expect_err("404");
    assert!(
        matches!(after, kube::Error::Api(ref s) if s.code == 404),
        "{after:?}"
    );
    // (A discovery walk that races the documents' update finds a group
    // listed whose document is gone: it tries again, as any client must.)
    eventually(&server, "discovery forgets the group", || async {
        match Discovery::new(client.clone()).run().await {
            Ok(discovery) => discovery.groups().all(|g| g.name() != "example.com"),
            Err(_) => false,
        }
    })
    .await;
    let _ = api.delete("w2", &DeleteParams::default()).await;
}

#[tokio::test]
async fn definitions_and_resources_come_back_after_a_restart() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let port = common::free_port();
    let mut server = Server::start_in(&dir, port, &[]).await;
    let k = Kubectl::new(&server);
    let file = write(&tmp.path().join("widgets.yaml"), WIDGETS);
    k.ok(&["apply", "-f", &file]);
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=10s",
        "crd/widgets.example.com",
    ]);
    let client = server.client().await;
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &widget_resource("v1"));
    api.create(&PostParams::default(), &widget("kept", "s"))
        .await
        .expect("create");
    server.terminate();
    drop(server);
    // Ready means served: the first request after /readyz finds the kind.
    let server = Server::start_in(&dir, port, &[]).await;
    let client = server.client().await;
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &widget_resource("v1"));
    let kept = api.get("kept").await.expect("served after restart");
    assert_eq!(kept.data["spec"]["size"], "s");
}

/// The Status causes (field, reason) of a refused write. (The messages are
/// each side's upstream counterpart's: apimachinery's validators for a
/// compiled-in kind, kube-openapi's for a CRD, e.g. `must be less than or
/// equal to 9` against `spec.replicas in body should be less than or equal
/// to 9`; a bad `format` is `FieldValueTypeInvalid` in a CRD, as upstream
/// converts kube-openapi's errors, and `FieldValueInvalid` in a compiled
/// kind; and a CRD whose schema has CEL rules adds upstream's `<nil>`
/// "some validation rules were not checked" cause after such an error.)
fn causes(result: Result<DynamicObject, kube::Error>) -> Vec<(String, String)> {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
            let mut out: Vec<(String, String)> = status
                .details
                .map(|d| d.causes)
                .unwrap_or_default()
                .into_iter()
                .filter(|c| c.field != "<nil>")
                .map(|c| {
                    let reason = if c.reason == "FieldValueTypeInvalid" {
                        "FieldValueInvalid".to_string()
                    } else {
                        c.reason
                    };
                    (c.field, reason)
                })
                .collect();
            out.sort();
            out
        }
        other => panic!("not refused: {other:?}"),
    }
}

/// One declaration served natively and as a CRD: `apiforge crd` prints the
/// showcase group's definitions, applied to apiforge itself under another
/// group; invalid Databases are refused by both, on the same fields for
/// the same reasons.
#[tokio::test]
async fn a_rust_kind_as_a_crd_validates_like_the_compiled_kind() {
    const CRD_GROUP: &str = "showcase.crd.example.com";
    let server = Server::start().await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .args(["crd", "showcase.apiforge.dev", "--as-group", CRD_GROUP])
        .output()
        .expect("apiforge crd");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("showcase.yaml");
    std::fs::write(&file, &out.stdout).expect("write");
    let k = Kubectl::new(&server);
    let applied = k.ok(&["apply", "-f", &file.display().to_string()]);
    assert!(
        applied.contains("databases.showcase.crd.example.com created"),
        "{applied}"
    );
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=10s",
        "crd/databases.showcase.crd.example.com",
    ]);
    let client = server.client().await;
    let resource = |group: &str| ApiResource {
        group: group.into(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "Database".into(),
        plural: "databases".into(),
    };
    let native: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &resource("showcase.apiforge.dev"),
    );
    let custom: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &resource(CRD_GROUP));
    let database = |group: &str, name: &str, spec: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": format!("{group}/v1"), "kind": "Database",
            "metadata": {"name": name}, "spec": spec
        }))
        .expect("database")
    };
    let invalid = [
        json!({"version": "x.y", "replicas": 12}),
        json!({"engine": "mysql", "version": "8.0", "replicas": 5}),
        json!({"version": "16", "users": [
            {"name": "app", "privileges": ["read", "root"]},
            {"name": "app"}
        ]}),
        json!({"version": "16", "users": [{"name": "Bad_Name"}]}),
        json!({"version": "16", "storage": {"sizeGiB": 2000, "className": "Not A Class"}}),
    ];
    for (i, spec) in invalid.iter().enumerate() {
        let name = format!("bad-{i}");
        let a = causes(
            native
                .create(
                    &PostParams::default(),
                    &database("showcase.apiforge.dev", &name, spec.clone()),
                )
                .await,
        );
        let b = causes(
            custom
                .create(
                    &PostParams::default(),
                    &database(CRD_GROUP, &name, spec.clone()),
                )
                .await,
        );
        assert!(!a.is_empty(), "{spec}");
        assert_eq!(a, b, "{spec}");
    }
    // Updates: an immutable field and a transition rule.
    for (group, api) in [("showcase.apiforge.dev", &native), (CRD_GROUP, &custom)] {
        api.create(
            &PostParams::default(),
            &database(
                group,
                "good",
                json!({"version": "16", "storage": {"sizeGiB": 20}}),
            ),
        )
        .await
        .expect("valid");
    }
    let mut answers = Vec::new();
    for api in [&native, &custom] {
        let result = api
            .patch(
                "good",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"engine": "mysql", "storage": {"sizeGiB": 5}}})),
            )
            .await;
        answers.push(causes(result));
    }
    assert!(!answers[0].is_empty());
    assert_eq!(answers[0], answers[1]);
}

/// A cluster-scoped definition and a namespaced one with selectable
/// fields and a deprecated version.
const COLORS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: paints.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: paints, singular: paint, kind: Paint}
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields:
    - jsonPath: .spec.color
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
  - name: v1beta1
    served: true
    storage: false
    deprecated: true
    deprecationWarning: "example.com/v1beta1 Paint is going away; use example.com/v1"
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: palettes.example.com
spec:
  group: example.com
  scope: Cluster
  names: {plural: palettes, singular: palette, kind: Palette}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

#[tokio::test]
async fn custom_resources_behave_like_any_kind() {
    let server = Server::start().await;
    let k = Kubectl::new(&server);
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = write(&tmp.path().join("colors.yaml"), COLORS);
    k.ok(&["apply", "-f", &file]);
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=10s",
        "crd/paints.example.com",
        "crd/palettes.example.com",
    ]);
    k.ok(&["create", "namespace", "art"]);
    for (name, color) in [("a", "red"), ("b", "blue"), ("c", "red")] {
        let paint = json!({"apiVersion": "example.com/v1", "kind": "Paint",
            "metadata": {"name": name, "namespace": "art"}, "spec": {"color": color}});
        let f = write(&tmp.path().join(format!("{name}.json")), &paint.to_string());
        k.ok(&["create", "-f", &f]);
    }
    // Selectable fields.
    let red = k.ok(&[
        "get",
        "paints",
        "-n",
        "art",
        "--field-selector=spec.color=red",
        "-o",
        "name",
    ]);
    assert_eq!(
        red.lines().collect::<Vec<_>>(),
        ["paint.example.com/a", "paint.example.com/c"]
    );
    let bad = k.run(&[
        "get",
        "paints",
        "-n",
        "art",
        "--field-selector=spec.shade=red",
    ]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains(
            r#""spec.shade" is not a known field selector: only "metadata.name", "metadata.namespace""#
        ),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    // The deprecated version warns.
    let out = k.run(&["get", "paints.v1beta1.example.com", "-n", "art"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Warning: example.com/v1beta1 Paint is going away; use example.com/v1"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Unknown fields: pruned, reported by fieldValidation.
    let strict = write(
        &tmp.path().join("strict.json"),
        &json!({"apiVersion": "example.com/v1", "kind": "Paint",
            "metadata": {"name": "d", "namespace": "art"}, "spec": {"color": "x", "bogus": 1}})
        .to_string(),
    );
    let refused = k.run(&["create", "-f", &strict]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("unknown field \"spec.bogus\""),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let warned = k.run(&["create", "-f", &strict, "--validate=warn"]);
    assert!(warned.status.success());
    let d = k.json(&["get", "paint", "d", "-n", "art", "-o", "json"]);
    assert!(d["spec"].get("bogus").is_none(), "pruned: {d}");
    // Strategic merge patches are refused as upstream does for custom resources.
    let smp = k.run(&[
        "patch",
        "paint",
        "a",
        "-n",
        "art",
        "--type=strategic",
        "-p",
        r#"{"spec":{"color":"green"}}"#,
    ]);
    assert!(!smp.status.success());
    assert!(
        String::from_utf8_lossy(&smp.stderr).contains(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
        ),
        "{}",
        String::from_utf8_lossy(&smp.stderr)
    );
    // A cluster-scoped kind.
    let palette = write(
        &tmp.path().join("palette.json"),
        &json!({"apiVersion": "example.com/v1", "kind": "Palette",
            "metadata": {"name": "warm"}, "anything": {"goes": true}})
        .to_string(),
    );
    k.ok(&["create", "-f", &palette]);
    let warm = k.json(&["get", "palette", "warm", "-o", "json"]);
    assert_eq!(warm["anything"]["goes"], true);
    assert!(warm["metadata"].get("namespace").is_none());
    // deletecollection, then the namespace's deletion empties the rest.
    k.ok(&[
        "delete",
        "paints",
        "-n",
        "art",
        "--field-selector=spec.color=red",
    ]);
    let left = k.ok(&["get", "paints", "-n", "art", "-o", "name"]);
    assert_eq!(
        left.lines().collect::<Vec<_>>(),
        ["paint.example.com/b", "paint.example.com/d"]
    );
    k.ok(&["delete", "namespace", "art", "--timeout=30s"]);
    let after = k.ok(&["get", "paints", "-A", "-o", "name"]);
    assert!(after.trim().is_empty(), "{after}");
}

/// A typed kube-rs client of the Widget kind (what `#[derive(CustomResource)]`
/// would generate).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Widget {
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: WidgetSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<Value>,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
struct WidgetSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    size: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    replicas: Option<i64>,
}

impl kube::Resource for Widget {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Widget".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "example.com".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "widgets".into()
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.metadata
    }
}

/// Invalid definitions get upstream's Status (`ValidateCustomResourceDefinition`'s
/// field paths and messages), over raw HTTP and through kube-rs; a typed
/// client reads and writes custom resources.
#[tokio::test]
async fn invalid_definitions_and_a_typed_client() {
    let server = Server::start().await;
    let client = server.client().await;
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            plural: "customresourcedefinitions".into(),
        },
    );
    let definition = |name: &str, spec_schema: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}}}]}
        }))
        .expect("definition")
    };
    // The name must be <plural>.<group>.
    let err = crds
        .create(
            &PostParams::default(),
            &definition("wrong.example.com", json!({"type": "object"})),
        )
        .await
        .expect_err("refused");
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status.message,
        "CustomResourceDefinition.apiextensions.k8s.io \"wrong.example.com\" is invalid: metadata.name: Invalid value: \"wrong.example.com\": must be spec.names.plural+\".\"+spec.group"
    );
    // A structural schema needs a type for every specified field (a
    // single-version definition reports it under spec.validation, as
    // upstream's conversion to its internal form does); raw HTTP.
    let body = serde_json::to_vec(&definition(
        "widgets.example.com",
        json!({"properties": {"size": {"type": "string"}}}),
    ))
    .expect("json");
    let raw = common::raw::request(
        &server,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &[("content-type", "application/json")],
        &body,
    )
    .await;
    assert_eq!(raw.status, 422, "{}", raw.text());
    let causes: Vec<(String, String)> = raw.json()["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| {
            (
                c["field"].as_str().unwrap_or_default().to_string(),
                c["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(
        causes.contains(&(
            "spec.validation.openAPIV3Schema.properties[spec].type".to_string(),
            "Required value: must not be empty for specified object fields".to_string()
        )),
        "{causes:?}"
    );

    // A CEL rule over an unbounded list of unbounded strings costs more
    // than upstream's estimator allows: upstream reports the rule, its
    // contribution to the schema's total (the rules it names as the most
    // expensive), and the total.
    let err = crds
        .create(
            &PostParams::default(),
            &definition(
                "widgets.example.com",
                json!({"type": "object", "properties": {"hosts": {
                    "type": "array", "items": {"type": "string"},
                    "x-kubernetes-validations": [{"rule": "self.all(h, h.matches('^[a-z.]+$'))"}]}}}),
            ),
        )
        .await
        .expect_err("too costly");
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    let hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    assert_eq!(
        status.message,
        format!(
            "CustomResourceDefinition.apiextensions.k8s.io \"widgets.example.com\" is invalid: [spec.validation.openAPIV3Schema.properties[spec].properties[hosts].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {hint}, spec.validation.openAPIV3Schema.properties[spec].properties[hosts].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema, spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {hint}]"
        )
    );

    // A valid one, then a typed client.
    crds.create(
        &PostParams::default(),
        &definition(
            "widgets.example.com",
            json!({"type": "object", "properties": {
                "size": {"type": "string"}, "replicas": {"type": "integer"}}}),
        ),
    )
    .await
    .expect("valid");
    let widgets: Api<Widget> = Api::namespaced(client, "default");
    let mut created = None;
    for _ in 0..100 {
        let w = Widget {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("typed".into()),
                ..Default::default()
            },
            spec: WidgetSpec {
                size: Some("m".into()),
                replicas: Some(2),
            },
            status: None,
        };
        match widgets.create(&PostParams::default(), &w).await {
            Ok(w) => {
                created = Some(w);
                break;
            }
            // Until the definition is established.
            Err(kube::Error::Api(s)) if s.code == 404 => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let created = created.expect("served within 5 s");
    assert_eq!(created.spec.size.as_deref(), Some("m"));
    let listed = widgets.list(&Default::default()).await.expect("list");
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].spec.replicas, Some(2));
}
