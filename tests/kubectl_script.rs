//! One kubectl script against the real server, run with the oldest (1.27)
//! and the newest (1.33) kubectl, each with a server of its own: discovery
//! (`api-resources`, `api-versions`), `create -f`, `get` in every output
//! form, `get -w`, selectors, `apply -f` twice, the three patch types,
//! `label`, `annotate`, `edit`, `create configmap|secret`, `explain` (from
//! OpenAPI v3 and from the protobuf OpenAPI v2), `delete`, `wait
//! --for=delete` and namespace deletion. Assertions are on what kubectl
//! prints; where the two versions print differently, both are accepted.

mod common;

use std::path::Path;

use common::kubectl::{Kubectl, sed_editor, versioned_binary};

fn write(path: &Path, text: &str) -> String {
    std::fs::write(path, text).expect("write manifest");
    path.display().to_string()
}

/// The whitespace-separated cells of each line.
fn rows(out: &str) -> Vec<Vec<&str>> {
    out.lines()
        .map(|l| l.split_whitespace().collect())
        .collect()
}

/// The row whose first cell is `first`.
fn row<'a>(out: &'a str, first: &str) -> Vec<&'a str> {
    rows(out)
        .into_iter()
        .find(|r| r.first() == Some(&first))
        .unwrap_or_else(|| panic!("no row {first:?} in:\n{out}"))
}

fn lines(out: &str) -> Vec<&str> {
    out.lines().collect()
}

async fn script(version: &str) {
    let server = common::Server::start().await;
    let k = Kubectl::with_binary(&server, versioned_binary(version));
    let tmp = tempfile::tempdir().expect("tempdir");

    // Discovery.
    let out = k.ok(&["api-resources"]);
    assert_eq!(
        rows(&out)[0],
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"],
        "{out}"
    );
    assert_eq!(
        row(&out, "flunders"),
        ["flunders", "wardle.example.com/v1beta1", "true", "Flunder"]
    );
    assert_eq!(
        row(&out, "configmaps"),
        ["configmaps", "cm", "v1", "true", "ConfigMap"]
    );
    assert_eq!(
        row(&out, "namespaces"),
        ["namespaces", "ns", "v1", "false", "Namespace"]
    );
    assert_eq!(
        row(&out, "fischers"),
        [
            "fischers",
            "wardle.example.com/v1alpha1",
            "false",
            "Fischer"
        ]
    );
    let out = k.ok(&[
        "api-resources",
        "--api-group=wardle.example.com",
        "-o",
        "name",
    ]);
    assert_eq!(
        lines(&out),
        ["fischers.wardle.example.com", "flunders.wardle.example.com"]
    );
    let out = k.ok(&["api-versions"]);
    for gv in [
        "v1",
        "wardle.example.com/v1alpha1",
        "wardle.example.com/v1beta1",
        "showcase.apiforge.dev/v1",
        "showcase.apiforge.dev/v1alpha1",
    ] {
        assert!(lines(&out).contains(&gv), "{gv} missing from:\n{out}");
    }

    // `create -f` (kubectl 1.27 reads the protobuf /openapi/v2 first).
    let flunder = write(
        &tmp.path().join("flunder.yaml"),
        "apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: first\n  labels:\n    tier: gold\nspec:\n  referenceType: Flunder\n  flunderReference: other\n",
    );
    assert_eq!(
        k.ok(&["create", "-f", &flunder]).trim(),
        "flunder.wardle.example.com/first created"
    );
    let out = k.run(&["create", "-f", &flunder]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Error from server (AlreadyExists): error when creating \"")
            && err.contains("flunders.wardle.example.com \"first\" already exists"),
        "{err}"
    );

    // `get`: table, wide, yaml, json, name.
    let out = k.ok(&["get", "flunders"]);
    assert_eq!(rows(&out)[0], ["NAME", "CREATED", "AT"], "{out}");
    assert_eq!(row(&out, "first").len(), 2, "{out}");
    let out = k.ok(&["get", "flunders", "-o", "wide"]);
    assert_eq!(rows(&out)[0], ["NAME", "CREATED", "AT"], "{out}");
    assert!(row(&out, "first")[1].ends_with('Z'), "{out}");
    let yaml = k.ok(&["get", "flunder", "first", "-o", "yaml"]);
    for text in [
        "apiVersion: wardle.example.com/v1beta1\n",
        "kind: Flunder\n",
        "  name: first\n",
        "  namespace: default\n",
        "    tier: gold\n",
        "  flunderReference: other\n",
        "  uid: ",
        "  resourceVersion: \"",
    ] {
        assert!(yaml.contains(text), "{text:?} missing from:\n{yaml}");
    }
    let obj = k.json(&["get", "flunder", "first"]);
    assert_eq!(obj["kind"], "Flunder");
    assert_eq!(obj["metadata"]["name"], "first");
    assert_eq!(obj["spec"]["referenceType"], "Flunder");
    assert!(
        obj["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| u.len() == 36)
    );
    let list = k.json(&["get", "flunders"]);
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"][0]["metadata"]["name"], "first");
    assert_eq!(
        k.ok(&["get", "flunders", "-o", "name"]).trim(),
        "flunder.wardle.example.com/first"
    );
    let out = k.run(&["get", "flunder", "missing"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "Error from server (NotFound): flunders.wardle.example.com \"missing\" not found"
        ),
        "{err}"
    );

    // `create configmap|secret --from-literal` (protobuf bodies).
    assert_eq!(
        k.ok(&[
            "create",
            "configmap",
            "settings",
            "--from-literal=a=1",
            "--from-literal=b=2"
        ])
        .trim(),
        "configmap/settings created"
    );
    assert_eq!(
        k.ok(&[
            "create",
            "secret",
            "generic",
            "creds",
            "--from-literal=user=admin"
        ])
        .trim(),
        "secret/creds created"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "secret",
            "creds",
            "-o",
            "jsonpath={.type} {.data.user}"
        ]),
        "Opaque YWRtaW4="
    );
    assert_eq!(
        k.ok(&[
            "get",
            "cm",
            "settings",
            "-o",
            "jsonpath={.data.a},{.data.b}"
        ]),
        "1,2"
    );

    // `get -A`, `-l`, `--field-selector` across two namespaces.
    assert_eq!(
        k.ok(&["create", "namespace", "team"]).trim(),
        "namespace/team created"
    );
    let second = write(
        &tmp.path().join("second.yaml"),
        "apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: second\n  namespace: team\n  labels:\n    tier: silver\n",
    );
    k.ok(&["create", "-f", &second]);
    let out = k.ok(&["get", "flunders", "-A"]);
    assert_eq!(
        rows(&out)[0],
        ["NAMESPACE", "NAME", "CREATED", "AT"],
        "{out}"
    );
    assert_eq!(row(&out, "default")[1], "first", "{out}");
    assert_eq!(row(&out, "team")[1], "second", "{out}");
    assert_eq!(
        lines(&k.ok(&["get", "flunders", "-A", "-l", "tier=silver", "-o", "name"])),
        ["flunder.wardle.example.com/second"]
    );
    assert_eq!(
        lines(&k.ok(&[
            "get",
            "flunders",
            "-A",
            "-l",
            "tier in (gold,silver),tier!=silver",
            "-o",
            "name"
        ])),
        ["flunder.wardle.example.com/first"]
    );
    assert_eq!(
        lines(&k.ok(&[
            "get",
            "flunders",
            "-A",
            "--field-selector",
            "metadata.namespace=team",
            "-o",
            "name"
        ])),
        ["flunder.wardle.example.com/second"]
    );
    assert_eq!(
        lines(&k.ok(&[
            "get",
            "flunders",
            "--field-selector",
            "metadata.name!=first",
            "-o",
            "name"
        ])),
        Vec::<&str>::new()
    );
    let out = k.run(&["get", "flunders", "-l", "tier=bronze"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "No resources found in default namespace."
    );

    // `get -w` sees a change made meanwhile.
    let mut watch = k.spawn(&["get", "flunders", "-w", "--request-timeout=0"]);
    watch.line("initial list from get -w", |l| l.starts_with("first "));
    k.ok(&["label", "flunder", "first", "watched=yes"]);
    watch.line("update event from get -w", |l| l.starts_with("first "));
    let third = write(
        &tmp.path().join("third.yaml"),
        "apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: third\n",
    );
    k.ok(&["create", "-f", &third]);
    watch.line("added event from get -w", |l| l.starts_with("third "));
    drop(watch);

    // `apply -f` twice: create, then a three-way update of the same file.
    let applied_path = tmp.path().join("applied.yaml");
    let applied = write(
        &applied_path,
        "apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: applied\n  labels:\n    color: red\n    size: big\nspec:\n  referenceType: Flunder\n  flunderReference: one\n",
    );
    assert_eq!(
        k.ok(&["apply", "-f", &applied]).trim(),
        "flunder.wardle.example.com/applied created"
    );
    write(
        &applied_path,
        "apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: applied\n  labels:\n    color: blue\nspec:\n  referenceType: Flunder\n  flunderReference: two\n",
    );
    assert_eq!(
        k.ok(&["apply", "-f", &applied]).trim(),
        "flunder.wardle.example.com/applied configured"
    );
    assert_eq!(
        k.ok(&["apply", "-f", &applied]).trim(),
        "flunder.wardle.example.com/applied unchanged"
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
    assert!(last.contains("\"flunderReference\":\"two\""), "{last}");

    // `patch` with the three types; strategic on a ConfigMap.
    assert_eq!(
        k.ok(&[
            "patch",
            "flunder",
            "applied",
            "--type=merge",
            "-p",
            r#"{"spec":{"flunderReference":"three"}}"#
        ])
        .trim(),
        "flunder.wardle.example.com/applied patched"
    );
    assert_eq!(
        k.ok(&[
            "patch",
            "flunder",
            "applied",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/metadata/labels/color","value":"green"}]"#
        ])
        .trim(),
        "flunder.wardle.example.com/applied patched"
    );
    let out = k.run(&[
        "patch",
        "flunder",
        "applied",
        "--type=json",
        "-p",
        r#"[{"op":"test","path":"/spec/flunderReference","value":"nope"}]"#,
    ]);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "The request is invalid: the server rejected our request due to an error in our request"
    );
    assert_eq!(
        k.ok(&[
            "patch",
            "configmap",
            "settings",
            "--type=strategic",
            "-p",
            r#"{"data":{"a":null,"c":"3"}}"#
        ])
        .trim(),
        "configmap/settings patched"
    );
    assert_eq!(
        k.json(&["get", "cm", "settings"])["data"],
        serde_json::json!({"b": "2", "c": "3"})
    );
    assert_eq!(
        k.ok(&[
            "patch",
            "configmap",
            "settings",
            "-p",
            r#"{"data":{"c":"3"}}"#
        ])
        .trim(),
        "configmap/settings patched (no change)"
    );

    // `label`, `annotate` (1.27 prints "annotate", later ones "annotated").
    assert_eq!(
        k.ok(&["label", "flunder", "applied", "tier=gold"]).trim(),
        "flunder.wardle.example.com/applied labeled"
    );
    assert_eq!(
        k.ok(&["label", "flunder", "applied", "color-"]).trim(),
        "flunder.wardle.example.com/applied unlabeled"
    );
    let out = k.ok(&["annotate", "flunder", "applied", "note=hello"]);
    assert!(
        out.trim()
            .strip_prefix("flunder.wardle.example.com/applied annotate")
            .is_some_and(|rest| rest.is_empty() || rest == "d"),
        "{out}"
    );
    let out = k.run(&["label", "flunder", "applied", "tier=silver"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("'tier' already has a value (gold), and --overwrite is false"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let obj = k.json(&["get", "flunder", "applied"]);
    assert_eq!(obj["spec"]["flunderReference"], "three");
    assert_eq!(
        obj["metadata"]["labels"],
        serde_json::json!({"tier": "gold"})
    );
    assert_eq!(obj["metadata"]["annotations"]["note"], "hello");

    // `edit` with a scripted editor.
    let editor = sed_editor(
        tmp.path(),
        "edit.sh",
        "s/flunderReference: three/flunderReference: four/",
    );
    assert_eq!(
        k.ok_with(&["edit", "flunder", "applied"], &[("KUBE_EDITOR", &editor)])
            .trim(),
        "flunder.wardle.example.com/applied edited"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "flunder",
            "applied",
            "-o",
            "jsonpath={.spec.flunderReference}"
        ]),
        "four"
    );
    let noop = sed_editor(tmp.path(), "noop.sh", "s/nothing-matches-this//");
    let out = k.run_with(&["edit", "flunder", "applied"], &[("EDITOR", &noop)]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "Edit cancelled, no changes made."
    );

    // `explain`: the v3 document, and the protobuf v2 one.
    let out = k.ok(&["explain", "flunders"]);
    for text in [
        "KIND:",
        "Flunder",
        "wardle.example.com",
        "A Flunder is an example namespaced resource",
        "spec",
    ] {
        assert!(out.contains(text), "{text:?} missing from:\n{out}");
    }
    let out = k.ok(&["explain", "flunders.spec.flunderReference"]);
    assert!(out.contains("<string>"), "{out}");
    assert!(out.contains("A name of another flunder"), "{out}");
    let out = k.ok(&["explain", "flunders.spec", "--output=plaintext-openapiv2"]);
    for text in [
        "KIND:     Flunder",
        "VERSION:  wardle.example.com/v1beta1",
        "RESOURCE: spec <Object>",
        "flunderReference\t<string>",
        "fischerReference\t<string>",
    ] {
        assert!(out.contains(text), "{text:?} missing from:\n{out}");
    }
    let out = k.ok(&["explain", "configmaps", "--output=plaintext-openapiv2"]);
    assert!(out.contains("KIND:     ConfigMap"), "{out}");
    assert!(out.contains("data\t<map[string]string>"), "{out}");

    // `delete`, and `wait --for=delete` on an object held by a finalizer.
    assert_eq!(
        k.ok(&["delete", "flunder", "third"]).trim(),
        "flunder.wardle.example.com \"third\" deleted"
    );
    let held = write(
        &tmp.path().join("held.yaml"),
        "apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: held\n  finalizers:\n  - example.com/hold\n",
    );
    k.ok(&["create", "-f", &held]);
    assert_eq!(
        k.ok(&["delete", "flunder", "held", "--wait=false"]).trim(),
        "flunder.wardle.example.com \"held\" deleted"
    );
    assert!(
        !k.ok(&[
            "get",
            "flunder",
            "held",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}"
        ])
        .is_empty()
    );
    let out = k.run(&["wait", "--for=delete", "flunder/held", "--timeout=1s"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("timed out waiting for the condition"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `-v=6`: the wait's watch request shows on stderr once it is open.
    let wait = k.spawn(&[
        "wait",
        "--for=delete",
        "flunder/held",
        "--timeout=60s",
        "-v=6",
    ]);
    wait.stderr_shows("watch=true");
    k.ok(&[
        "patch",
        "flunder",
        "held",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let (ok, stdout, stderr) = wait.finish();
    assert!(ok, "wait --for=delete failed: {stderr}");
    assert_eq!(
        stdout.trim(),
        "flunder.wardle.example.com/held condition met"
    );
    let out = k.run(&["get", "flunder", "held"]);
    assert!(!out.status.success());

    // `delete ns`: Terminating, its objects go, then it is gone.
    k.ok(&[
        "-n",
        "team",
        "create",
        "configmap",
        "doomed",
        "--from-literal=x=y",
    ]);
    let blocker = write(
        &tmp.path().join("blocker.yaml"),
        "apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: blocker\n  namespace: team\n  finalizers:\n  - example.com/hold\n",
    );
    k.ok(&["create", "-f", &blocker]);
    assert_eq!(
        k.ok(&["delete", "namespace", "team", "--wait=false"])
            .trim(),
        "namespace \"team\" deleted"
    );
    assert_eq!(
        k.ok(&["get", "namespace", "team", "-o", "jsonpath={.status.phase}"]),
        "Terminating"
    );
    let out = k.run(&[
        "-n",
        "team",
        "create",
        "configmap",
        "late",
        "--from-literal=x=y",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("because it is being terminated"), "{err}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let cms = k.ok(&["-n", "team", "get", "configmaps", "-o", "name"]);
        let flunders = k.ok(&["-n", "team", "get", "flunders", "-o", "name"]);
        if cms.trim().is_empty() && flunders.trim() == "flunder.wardle.example.com/blocker" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "namespace content not deleted: {cms} {flunders}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(
        !k.ok(&[
            "-n",
            "team",
            "get",
            "flunder",
            "blocker",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}"
        ])
        .is_empty()
    );
    assert_eq!(
        k.ok(&["get", "namespace", "team", "-o", "jsonpath={.status.phase}"]),
        "Terminating"
    );
    let wait = k.spawn(&[
        "wait",
        "--for=delete",
        "namespace/team",
        "--timeout=60s",
        "-v=6",
    ]);
    wait.stderr_shows("watch=true");
    k.ok(&[
        "-n",
        "team",
        "patch",
        "flunder",
        "blocker",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    let (ok, stdout, stderr) = wait.finish();
    assert!(ok, "wait --for=delete failed: {stderr}");
    assert_eq!(stdout.trim(), "namespace/team condition met");
    let out = k.run(&["get", "namespace", "team"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("Error from server (NotFound): namespaces \"team\" not found"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn kubectl_1_27_script() {
    script("1.27").await;
}

#[tokio::test]
async fn kubectl_1_33_script() {
    script("1.33").await;
}
