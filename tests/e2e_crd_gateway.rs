//! Real CRDs: Gateway API's standard channel (`../shared/data/gateway-api`,
//! Apache-2.0, test data). Every CRD applies with `kubectl apply` (1.33) and
//! with `--server-side` (1.27) and becomes Established; every example
//! applies, reads back as applied (after defaulting) and round-trips through
//! `kubectl replace`; mutated examples are refused with the CRD's own CEL
//! messages and field paths (the expected texts read from the CRD files).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::Server;
use common::kubectl::{Kubectl, versioned_binary};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

const GROUP: &str = "gateway.networking.k8s.io";

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/gateway-api")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("read");
    serde_saphyr::from_multiple::<Value>(&text)
        .expect("yaml")
        .into_iter()
        .filter(|d| d.is_object())
        .collect()
}

/// Whether every field of `applied` is in `read` with the same value
/// (`read` may have more: defaults, metadata the server sets).
fn contains(read: &Value, applied: &Value) -> bool {
    match (read, applied) {
        (Value::Object(r), Value::Object(a)) => a
            .iter()
            .all(|(k, v)| r.get(k).is_some_and(|rv| contains(rv, v))),
        (Value::Array(r), Value::Array(a)) => {
            r.len() == a.len() && r.iter().zip(a).all(|(rv, av)| contains(rv, av))
        }
        (Value::Number(r), Value::Number(a)) => r.as_f64() == a.as_f64(),
        _ => read == applied,
    }
}

fn established(k: &Kubectl) {
    let out = k.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=20s",
        "crd",
        "--all",
    ]);
    assert!(out.contains("condition met"), "{out}");
}

/// The CRD files of `crds/` (the directory also holds a
/// ValidatingAdmissionPolicy, admission policies' business).
fn crd_files() -> Vec<String> {
    let files: Vec<String> = yaml_files(&data().join("crds"))
        .into_iter()
        .filter(|f| {
            documents(f)
                .iter()
                .all(|d| d["kind"] == "CustomResourceDefinition")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert_eq!(files.len(), 10, "{files:?}");
    files
}

/// Applies every CRD with `kubectl apply` (server-side when asked).
fn install(k: &Kubectl, server_side: bool) -> Vec<String> {
    let files = crd_files();
    let mut args = vec!["apply"];
    if server_side {
        args.push("--server-side");
    }
    for f in &files {
        args.extend(["-f", f.as_str()]);
    }
    let out = k.ok(&args);
    assert_eq!(out.lines().count(), files.len(), "{out}");
    established(k);
    args.into_iter().map(str::to_string).collect()
}

#[tokio::test]
async fn gateway_api_crds_and_examples() {
    let server = Server::start().await;
    let k = Kubectl::with_binary(&server, versioned_binary("1.33"));
    install(&k, false);

    // Discovery and explain know the kinds.
    let resources = k.ok(&["api-resources", &format!("--api-group={GROUP}")]);
    for kind in [
        "Gateway",
        "HTTPRoute",
        "GRPCRoute",
        "ReferenceGrant",
        "GatewayClass",
    ] {
        assert!(resources.contains(kind), "{kind} missing: {resources}");
    }
    let explain = k.ok(&["explain", "gateways.spec.listeners"]);
    assert!(explain.contains("allowedRoutes"), "{explain}");

    // The namespaces the examples use.
    let examples = yaml_files(&data().join("examples"));
    let mut namespaces = BTreeSet::new();
    for file in &examples {
        for doc in documents(file) {
            if let Some(ns) = doc["metadata"]["namespace"].as_str() {
                namespaces.insert(ns.to_string());
            }
            if doc["kind"] == "Namespace"
                && let Some(name) = doc["metadata"]["name"].as_str()
            {
                namespaces.insert(name.to_string());
            }
        }
    }
    for ns in &namespaces {
        if ns != "default" {
            k.ok(&["create", "namespace", ns]);
        }
    }

    let client = server.client().await;
    let mut checked = 0;
    for file in &examples {
        let docs: Vec<Value> = documents(file)
            .into_iter()
            .filter(|d| {
                d["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with(GROUP))
            })
            .collect();
        if docs.is_empty() {
            continue;
        }
        let out = k.run(&["apply", "-f", &file.display().to_string()]);
        assert!(
            out.status.success(),
            "{}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        for doc in &docs {
            let kind = doc["kind"].as_str().expect("kind").to_lowercase();
            let name = doc["metadata"]["name"].as_str().expect("name");
            let ns = doc["metadata"]["namespace"].as_str().unwrap_or("default");
            let resource = format!("{kind}.{GROUP}");
            let read = k.json(&["get", &resource, name, "-n", ns, "-o", "json"]);
            assert!(
                contains(&read["spec"], &doc["spec"]),
                "{}: {kind}/{name} read back differs:\napplied {}\nread {}",
                file.display(),
                doc["spec"],
                read["spec"]
            );
            // Round trip: what was read replaces itself unchanged (a PUT;
            // `kubectl replace` would also rewrite the last-applied
            // annotation, and the next `apply` would then null
            // resourceVersion, which a custom resource refuses, as
            // upstream).
            let object: DynamicObject = serde_json::from_value(read.clone()).expect("object");
            let gvk = kube::api::GroupVersionKind::gvk(
                GROUP,
                doc["apiVersion"]
                    .as_str()
                    .and_then(|v| v.split('/').nth(1))
                    .expect("version"),
                doc["kind"].as_str().expect("kind"),
            );
            let resource_of = ApiResource::from_gvk(&gvk);
            let api: Api<DynamicObject> = if read["metadata"].get("namespace").is_some() {
                Api::namespaced_with(client.clone(), ns, &resource_of)
            } else {
                Api::all_with(client.clone(), &resource_of)
            };
            api.replace(name, &PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("{kind}/{name}: replace: {e}"));
            // The same object (a status defaulted on read, as upstream,
            // is written by the first PUT: only resourceVersion moves).
            let mut again = k.json(&["get", &resource, name, "-n", ns, "-o", "json"]);
            let mut expected = read.clone();
            for v in [&mut again, &mut expected] {
                if let Some(meta) = v["metadata"].as_object_mut() {
                    meta.remove("resourceVersion");
                }
            }
            assert_eq!(again, expected, "{kind}/{name}");
            checked += 1;
        }
    }
    assert!(checked >= 90, "only {checked} example objects checked");

    // Mutated examples are refused with the CRD's own messages.
    let gateways: Api<DynamicObject> = Api::namespaced_with(
        client,
        "default",
        &ApiResource {
            group: GROUP.into(),
            version: "v1".into(),
            api_version: format!("{GROUP}/v1"),
            kind: "Gateway".into(),
            plural: "gateways".into(),
        },
    );
    let crd = std::fs::read_to_string(data().join("crds/gateway.networking.k8s.io_gateways.yaml"))
        .expect("crd");
    for message in [
        "Listener name must be unique within the Gateway",
        "hostname must not be specified for protocols ['TCP', 'UDP']",
    ] {
        assert!(crd.contains(message), "the CRD says {message:?}");
    }
    let gateway = |listeners: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": format!("{GROUP}/v1"), "kind": "Gateway",
            "metadata": {"name": "mutated"},
            "spec": {"gatewayClassName": "example", "listeners": listeners}
        }))
        .expect("gateway")
    };
    let causes = |result: Result<DynamicObject, kube::Error>| -> (String, Vec<(String, String)>) {
        match result {
            Err(kube::Error::Api(status)) => {
                assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
                let details = status.details.expect("details");
                (
                    status.message,
                    details
                        .causes
                        .into_iter()
                        .map(|c| (c.field, c.message))
                        .collect(),
                )
            }
            other => panic!("not refused: {other:?}"),
        }
    };
    // Two listeners with the same name: the list-map key and the CEL rule.
    let (message, got) = causes(
        gateways
            .create(
                &PostParams::default(),
                &gateway(json!([
                    {"name": "web", "protocol": "HTTP", "port": 80},
                    {"name": "web", "protocol": "HTTP", "port": 8080}
                ])),
            )
            .await,
    );
    assert!(
        message.starts_with("Gateway.gateway.networking.k8s.io \"mutated\" is invalid: "),
        "{message}"
    );
    assert!(
        got.contains(&(
            "spec.listeners".into(),
            "Invalid value: \"array\": Listener name must be unique within the Gateway".into()
        )),
        "{got:?}"
    );
    assert!(
        got.contains(&(
            "spec.listeners[1]".into(),
            "Duplicate value: map[string]interface {}{\"name\":\"web\"}".into()
        )),
        "{got:?}"
    );
    // A hostname on a TCP listener breaks a CEL rule.
    let (_, got) = causes(
        gateways
            .create(
                &PostParams::default(),
                &gateway(json!([
                    {"name": "tcp", "protocol": "TCP", "port": 9000, "hostname": "a.example.com"}
                ])),
            )
            .await,
    );
    assert_eq!(
        got,
        [(
            "spec.listeners".to_string(),
            "Invalid value: \"array\": hostname must not be specified for protocols ['TCP', 'UDP']"
                .to_string()
        )]
    );
    // An invalid enum.
    let (_, got) = causes(
        gateways
            .create(
                &PostParams::default(),
                &gateway(json!([
                    {"name": "web", "protocol": "HTTP", "port": 80,
                     "allowedRoutes": {"namespaces": {"from": "Everywhere"}}}
                ])),
            )
            .await,
    );
    // An error that blocks the CEL rules adds upstream's reminder.
    assert_eq!(
        got,
        [
            (
                "spec.listeners[0].allowedRoutes.namespaces.from".to_string(),
                "Unsupported value: \"Everywhere\": supported values: \"All\", \"Selector\", \"Same\""
                    .to_string()
            ),
            (
                "<nil>".to_string(),
                "Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".to_string()
            )
        ]
    );
    assert!(gateways.get_opt("mutated").await.expect("get").is_none());
}

#[tokio::test]
async fn gateway_api_crds_apply_server_side_with_kubectl_1_27() {
    let server = Server::start().await;
    let k = Kubectl::with_binary(&server, versioned_binary("1.27"));
    let args = install(&k, true);
    // Applying the same again changes nothing.
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = k.ok(&args);
    assert!(
        out.lines().all(|l| l.ends_with("serverside-applied")),
        "{out}"
    );
    let example = data().join("examples/standard/simple-gateway/gateway.yaml");
    k.ok(&[
        "apply",
        "--server-side",
        "-f",
        &example.display().to_string(),
    ]);
    let read = k.json(&[
        "get",
        "gateway",
        "prod-web",
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    // Defaults from the schema filled in.
    assert_eq!(
        read["spec"]["listeners"][0]["allowedRoutes"]["namespaces"]["from"],
        "Same"
    );
    let managers: Vec<&str> = read["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(managers, ["kubectl"]);
}
