//! `kubectl apply --server-side` and managedFields with the oldest (1.27)
//! and newest (1.33) kubectl: create and update by apply, the managers
//! kubectl's other commands write as, conflicts and `--force-conflicts`,
//! `--field-manager`, `get --show-managed-fields`, `diff --server-side`,
//! the upgrade from client-side apply, and `create namespace` (a protobuf
//! body) defaulted like every other body.

mod common;

use std::path::Path;

use common::kubectl::{Kubectl, versioned_binary};
use serde_json::{Value, json};

fn write(path: &Path, text: &str) -> String {
    std::fs::write(path, text).expect("write");
    path.display().to_string()
}

fn flunder_yaml(name: &str, reference: &str, label: &str) -> String {
    format!(
        "apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: {name}\n  labels:\n    tier: {label}\nspec:\n  referenceType: Flunder\n  flunderReference: {reference}\n"
    )
}

fn entries(obj: &Value) -> Vec<(String, String)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|e| {
                    (
                        e["manager"].as_str().unwrap_or_default().to_string(),
                        e["operation"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn entry<'a>(obj: &'a Value, manager: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|l| l.iter().find(|e| e["manager"] == manager))
        .unwrap_or_else(|| panic!("no entry of {manager}: {obj}"))
}

async fn server_side_apply(version: &str) {
    let server = common::Server::start().await;
    let k = Kubectl::with_binary(&server, versioned_binary(version));
    let tmp = tempfile::tempdir().expect("tempdir");

    // Create by apply.
    let v1 = write(
        &tmp.path().join("v1.yaml"),
        &flunder_yaml("ssa", "a", "gold"),
    );
    assert_eq!(
        k.ok(&["apply", "--server-side", "-f", &v1]).trim(),
        "flunder.wardle.example.com/ssa serverside-applied"
    );
    let obj = k.json(&["get", "flunder", "ssa", "--show-managed-fields"]);
    assert_eq!(entries(&obj), [("kubectl".into(), "Apply".into())]);
    let e = entry(&obj, "kubectl");
    assert_eq!(e["apiVersion"], "wardle.example.com/v1beta1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:tier": {}}},
               "f:spec": {"f:flunderReference": {}, "f:referenceType": {}}})
    );
    // Without --show-managed-fields kubectl hides them.
    let plain = k.json(&["get", "flunder", "ssa"]);
    assert!(plain["metadata"].get("managedFields").is_none());

    // Other kubectl commands write as their own managers.
    k.ok(&["label", "flunder", "ssa", "extra=1"]);
    k.ok(&[
        "patch",
        "flunder",
        "ssa",
        "--type=merge",
        "-p",
        r#"{"spec":{"flunderReference":"patched"}}"#,
    ]);
    let obj = k.json(&["get", "flunder", "ssa", "--show-managed-fields"]);
    assert_eq!(
        entries(&obj),
        [
            ("kubectl".into(), "Apply".into()),
            ("kubectl-label".into(), "Update".into()),
            ("kubectl-patch".into(), "Update".into()),
        ],
        "{obj}"
    );
    assert_eq!(
        entry(&obj, "kubectl-label")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:extra": {}}}})
    );

    // Re-applying the old value of a field kubectl-patch now owns: conflict.
    let v2 = write(
        &tmp.path().join("v2.yaml"),
        &flunder_yaml("ssa", "b", "gold"),
    );
    let out = k.run(&["apply", "--server-side", "-f", &v2]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"Apply failed with 1 conflict: conflict with "kubectl-patch" using wardle.example.com/v1beta1: .spec.flunderReference"#),
        "{stderr}"
    );
    assert_eq!(
        k.json(&["get", "flunder", "ssa"])["spec"]["flunderReference"],
        "patched"
    );
    // --force-conflicts takes it.
    k.ok(&["apply", "--server-side", "--force-conflicts", "-f", &v2]);
    let obj = k.json(&["get", "flunder", "ssa", "--show-managed-fields"]);
    assert_eq!(obj["spec"]["flunderReference"], "b");
    assert_eq!(
        entries(&obj),
        [
            ("kubectl".into(), "Apply".into()),
            ("kubectl-label".into(), "Update".into()),
        ]
    );

    // diff --server-side: exit 1 and the change when there is one, 0 when
    // there is none.
    let v3 = write(
        &tmp.path().join("v3.yaml"),
        &flunder_yaml("ssa", "c", "gold"),
    );
    let out = k.run(&["diff", "--server-side", "-f", &v3]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(diff.contains("-  flunderReference: b"), "{diff}");
    assert!(diff.contains("+  flunderReference: c"), "{diff}");
    let out = k.run(&["diff", "--server-side", "-f", &v2]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // --field-manager names another applier, which shares what it applies
    // with the same value.
    k.ok(&["apply", "--server-side", "--field-manager=ci", "-f", &v2]);
    let obj = k.json(&["get", "flunder", "ssa", "--show-managed-fields"]);
    assert_eq!(
        entry(&obj, "ci")["fieldsV1"],
        entry(&obj, "kubectl")["fieldsV1"]
    );

    // From client-side apply to server-side apply: no conflicts, and the
    // fields end up owned by kubectl's applier.
    let csa = write(
        &tmp.path().join("csa.yaml"),
        &flunder_yaml("csa", "first", "silver"),
    );
    k.ok(&["apply", "-f", &csa]);
    let obj = k.json(&["get", "flunder", "csa", "--show-managed-fields"]);
    assert_eq!(
        entries(&obj),
        [("kubectl-client-side-apply".into(), "Update".into())]
    );
    let csa2 = write(
        &tmp.path().join("csa2.yaml"),
        &flunder_yaml("csa", "second", "silver"),
    );
    k.ok(&["apply", "--server-side", "-f", &csa2]);
    let obj = k.json(&["get", "flunder", "csa", "--show-managed-fields"]);
    assert_eq!(obj["spec"]["flunderReference"], "second");
    let applier = entry(&obj, "kubectl");
    assert_eq!(applier["operation"], "Apply");
    assert!(
        applier["fieldsV1"]["f:spec"]
            .get("f:flunderReference")
            .is_some(),
        "{obj}"
    );

    // create namespace sends protobuf: defaulted like a JSON body.
    k.ok(&["create", "namespace", "proto-ns"]);
    let ns = k.json(&["get", "namespace", "proto-ns", "--show-managed-fields"]);
    assert_eq!(
        ns["metadata"]["labels"],
        json!({"kubernetes.io/metadata.name": "proto-ns"})
    );
    assert_eq!(entry(&ns, "kubectl-create")["operation"], "Update");
}

#[tokio::test]
async fn server_side_apply_kubectl_1_27() {
    server_side_apply("1.27").await;
}

#[tokio::test]
async fn server_side_apply_kubectl_1_33() {
    server_side_apply("1.33").await;
}
