//! The real kubectl's patching commands against a running apiforge:
//! client-side `apply -f` (create, then a strategic merge patch with
//! `$setElementOrder` and last-applied-configuration), `label`, `annotate`,
//! `patch --type=merge|json|strategic` and `edit` with a scripted editor,
//! for the wardle Flunder and the core Namespace.

mod common;

use std::path::Path;

use serde_json::Value;

use common::kubectl::{Kubectl, sed_editor};

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write file");
}

#[tokio::test]
async fn kubectl_apply_label_annotate_patch_edit_flunder() {
    let server = common::Server::start().await;
    let k = Kubectl::new(&server);
    let tmp = tempfile::tempdir().expect("tempdir");
    let manifest = tmp.path().join("flunder.yaml");

    write(
        &manifest,
        "apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: applied\n  labels:\n    color: red\n    size: big\nspec:\n  referenceType: Flunder\n  flunderReference: one\n",
    );
    let out = k.ok(&["apply", "-f", manifest.to_str().expect("path")]);
    assert!(
        out.contains("flunder.wardle.example.com/applied created"),
        "{out}"
    );

    // Second apply: a three-way patch removes `size`, changes the spec.
    write(
        &manifest,
        "apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: applied\n  labels:\n    color: blue\nspec:\n  referenceType: Flunder\n  flunderReference: two\n",
    );
    let out = k.ok(&["apply", "-f", manifest.to_str().expect("path")]);
    assert!(
        out.contains("flunder.wardle.example.com/applied configured"),
        "{out}"
    );
    let obj = k.json(&["get", "flunder", "applied"]);
    assert_eq!(
        obj["metadata"]["labels"],
        serde_json::json!({"color": "blue"})
    );
    assert_eq!(obj["spec"]["flunderReference"], "two");
    let last = obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .unwrap_or_default();
    assert!(last.contains("\"two\""), "{last}");
    // Applying the same manifest again changes nothing.
    let out = k.ok(&["apply", "-f", manifest.to_str().expect("path")]);
    assert!(out.contains("unchanged"), "{out}");

    k.ok(&["label", "flunder", "applied", "tier=gold"]);
    k.ok(&["label", "flunder", "applied", "color-"]);
    k.ok(&["annotate", "flunder", "applied", "note=hello"]);
    let obj = k.json(&["get", "flunder", "applied"]);
    assert_eq!(
        obj["metadata"]["labels"],
        serde_json::json!({"tier": "gold"})
    );
    assert_eq!(obj["metadata"]["annotations"]["note"], "hello");

    k.ok(&[
        "patch",
        "flunder",
        "applied",
        "--type=merge",
        "-p",
        r#"{"spec":{"flunderReference":"three"}}"#,
    ]);
    k.ok(&[
        "patch",
        "flunder",
        "applied",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/metadata/labels/tier","value":"silver"}]"#,
    ]);
    k.ok(&[
        "patch",
        "flunder",
        "applied",
        "--type=strategic",
        "-p",
        r#"{"metadata":{"annotations":{"note":null,"other":"x"}}}"#,
    ]);
    let obj = k.json(&["get", "flunder", "applied"]);
    assert_eq!(obj["spec"]["flunderReference"], "three");
    assert_eq!(obj["metadata"]["labels"]["tier"], "silver");
    assert!(obj["metadata"]["annotations"].get("note").is_none());
    assert_eq!(obj["metadata"]["annotations"]["other"], "x");

    let editor = sed_editor(
        tmp.path(),
        "edit.sh",
        "s/flunderReference: three/flunderReference: four/",
    );
    let out = k.ok_with(&["edit", "flunder", "applied"], &[("EDITOR", &editor)]);
    assert!(out.contains("edited"), "{out}");
    let obj = k.json(&["get", "flunder", "applied"]);
    assert_eq!(obj["spec"]["flunderReference"], "four");
}

#[tokio::test]
async fn kubectl_apply_label_annotate_patch_edit_namespace() {
    let server = common::Server::start().await;
    let k = Kubectl::new(&server);
    let tmp = tempfile::tempdir().expect("tempdir");
    let manifest = tmp.path().join("ns.yaml");

    write(
        &manifest,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n  labels:\n    a: \"1\"\n  finalizers:\n  - example.com/one\n",
    );
    let out = k.ok(&["apply", "-f", manifest.to_str().expect("path")]);
    assert!(out.contains("namespace/team created"), "{out}");
    write(
        &manifest,
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team\n  labels:\n    b: \"2\"\n  finalizers:\n  - example.com/two\n  - example.com/one\n",
    );
    let out = k.ok(&["apply", "-f", manifest.to_str().expect("path")]);
    assert!(out.contains("namespace/team configured"), "{out}");
    let obj = k.json(&["get", "namespace", "team"]);
    assert_eq!(obj["metadata"]["labels"]["b"], "2", "{}", obj["metadata"]);
    assert!(obj["metadata"]["labels"].get("a").is_none());
    assert_eq!(
        obj["metadata"]["finalizers"],
        serde_json::json!(["example.com/two", "example.com/one"])
    );

    k.ok(&["label", "namespace", "team", "c=3"]);
    k.ok(&["annotate", "namespace", "team", "note=hi"]);
    k.ok(&[
        "patch",
        "namespace",
        "team",
        "-p",
        r#"{"metadata":{"labels":{"b":null}}}"#,
    ]);
    k.ok(&[
        "patch",
        "namespace",
        "team",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"d":"4"}}}"#,
    ]);
    k.ok(&[
        "patch",
        "namespace",
        "team",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/labels/c"}]"#,
    ]);
    let editor = sed_editor(tmp.path(), "edit.sh", "s/note: hi/note: edited/");
    let out = k.ok_with(&["edit", "namespace", "team"], &[("EDITOR", &editor)]);
    assert!(out.contains("edited"), "{out}");
    let obj = k.json(&["get", "namespace", "team"]);
    let labels = obj["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(
        labels.get("b").is_none() && labels.get("c").is_none(),
        "{labels:?}"
    );
    assert_eq!(labels.get("d").and_then(Value::as_str), Some("4"));
    assert_eq!(obj["metadata"]["annotations"]["note"], "edited");
}
