//! kubectl 1.32 and 1.33 typed-client commands (`create namespace`,
//! `create configmap`, `create secret generic`, `create service`), which send protobuf
//! bodies with `Accept: application/vnd.kubernetes.protobuf,application/json`.

mod common;

use std::process::Command;

fn run(bin: &str, server: &common::Server, cache: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .env("HOME", cache)
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout),
        server.log()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn typed_create_commands(version: &str) {
    let bin = common::kubectl::versioned_binary(version);
    let server = common::Server::start().await;
    let cache = tempfile::tempdir().expect("cache dir");
    let k = |args: &[&str]| run(&bin, &server, cache.path(), args);

    assert_eq!(
        k(&["create", "namespace", "x"]).trim(),
        "namespace/x created"
    );
    assert_eq!(
        k(&["create", "configmap", "c", "--from-literal=a=b"]).trim(),
        "configmap/c created"
    );
    assert_eq!(
        k(&["create", "secret", "generic", "s", "--from-literal=k=v"]).trim(),
        "secret/s created"
    );
    assert_eq!(
        k(&[
            "-n",
            "x",
            "create",
            "configmap",
            "in-x",
            "--from-literal=x=y"
        ])
        .trim(),
        "configmap/in-x created"
    );

    let yaml = k(&["get", "cm", "c", "-o", "yaml"]);
    assert!(yaml.contains("kind: ConfigMap"), "{yaml}");
    assert!(yaml.contains("data:\n  a: b\n"), "{yaml}");
    assert_eq!(
        k(&["get", "secret", "s", "-o", "jsonpath={.data.k} {.type}"]),
        "dg== Opaque"
    );
    assert_eq!(
        k(&["get", "namespace", "x", "-o", "jsonpath={.status.phase}"]),
        "Active"
    );
    assert!(k(&["get", "cm", "-n", "x"]).contains("in-x"));

    // `create service` sends a protobuf Service too.
    assert_eq!(
        k(&["create", "service", "clusterip", "web", "--tcp=80:8080"]).trim(),
        "service/web created"
    );
    assert_eq!(
        k(&[
            "get",
            "service",
            "web",
            "-o",
            "jsonpath={.spec.type} {.spec.ports[0].port} {.spec.ports[0].targetPort} {.spec.selector.app}"
        ]),
        "ClusterIP 80 8080 web"
    );
    assert_eq!(
        k(&[
            "create",
            "service",
            "externalname",
            "ext",
            "--external-name=example.com"
        ])
        .trim(),
        "service/ext created"
    );
    assert_eq!(
        k(&[
            "get",
            "service",
            "ext",
            "-o",
            "jsonpath={.spec.externalName}"
        ]),
        "example.com"
    );

    // An error on a protobuf request reads as kubectl prints it for
    // kube-apiserver.
    let out = Command::new(&bin)
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["create", "configmap", "c", "--from-literal=a=b"])
        .env("HOME", cache.path())
        .output()
        .expect("run kubectl");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("configmaps \"c\" already exists"),
        "{stderr}"
    );
}

#[tokio::test]
async fn kubectl_1_32_typed_creates() {
    typed_create_commands("1.32").await;
}

#[tokio::test]
async fn kubectl_1_33_typed_creates() {
    typed_create_commands("1.33").await;
}
