//! `kubectl explain` against the real server for every served kind and a
//! nested field: kubectl finds the kind through discovery and the OpenAPI
//! v3 index, then renders the schema's descriptions.

mod common;

use std::process::Command;

/// `kubectl explain ARGS` must succeed and print every `expected` text.
fn explain(server: &common::Server, cache: &std::path::Path, args: &[&str], expected: &[&str]) {
    let out = Command::new(common::kubectl::default_binary())
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--cache-dir")
        .arg(cache)
        .env("HOME", cache)
        .arg("explain")
        .args(args)
        .output()
        .expect("run kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubectl explain {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    for text in expected {
        assert!(
            stdout.contains(text),
            "kubectl explain {args:?}: {text:?} missing from:\n{stdout}"
        );
    }
}

#[tokio::test]
async fn kubectl_explain_every_kind() {
    let server = common::Server::start().await;
    let cache = tempfile::tempdir().expect("cache dir");
    let c = cache.path();
    explain(
        &server,
        c,
        &["flunders"],
        &[
            "KIND:",
            "Flunder",
            "wardle.example.com",
            "A Flunder is an example namespaced resource",
            "spec",
        ],
    );
    explain(
        &server,
        c,
        &["flunders.spec"],
        &[
            "The desired state of the Flunder",
            "fischerReference",
            "reference",
        ],
    );
    explain(
        &server,
        c,
        &["flunders", "--api-version=wardle.example.com/v1alpha1"],
        &["VERSION:", "v1alpha1", "Flunder"],
    );
    explain(
        &server,
        c,
        &["fischers"],
        &["Fischer", "wardle.example.com"],
    );
    explain(
        &server,
        c,
        &["databases"],
        &[
            "Database",
            "showcase.apiforge.dev",
            "A managed database",
            "status",
        ],
    );
    explain(
        &server,
        c,
        &["databases.spec", "--api-version=showcase.apiforge.dev/v1"],
        &[
            "The desired state of a Database",
            "replicas",
            "The number of instances",
            "users",
        ],
    );
    explain(
        &server,
        c,
        &["databases.spec.storage.sizeGiB"],
        &["Size in GiB"],
    );
    explain(
        &server,
        c,
        &[
            "databases.spec",
            "--api-version=showcase.apiforge.dev/v1alpha1",
        ],
        &["engineVersion", "storageGiB"],
    );
    explain(&server, c, &["namespaces"], &["Namespace", "KIND:"]);
    explain(&server, c, &["namespaces.metadata"], &["name", "labels"]);
}
