//! Smoke test with the real kubectl: create, get (table, yaml), watch,
//! delete against a running apiforge, and persistence across SIGKILL.

mod common;

use std::path::Path;

use common::kubectl::Kubectl;

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write manifest");
}

#[tokio::test]
async fn kubectl_walkthrough() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("data");
    let port = common::free_port();
    let mut server = common::Server::start_in(&dir, port, &[]).await;
    let k = Kubectl::new(&server);

    let manifest = tmp.path().join("flunder.yaml");
    write(
        &manifest,
        "apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: my-first-flunder\n  labels:\n    sample-label: \"true\"\nspec: {}\n",
    );
    let out = k.ok(&["create", "-f", manifest.to_str().expect("path")]);
    assert_eq!(
        out.trim(),
        "flunder.wardle.example.com/my-first-flunder created"
    );

    let out = k.ok(&["get", "flunders"]);
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().expect("header").split_whitespace().collect();
    assert_eq!(header, ["NAME", "CREATED", "AT"]);
    assert!(
        lines.next().expect("row").starts_with("my-first-flunder "),
        "{out}"
    );

    let yaml = k.ok(&["get", "flunder", "my-first-flunder", "-o", "yaml"]);
    assert!(
        yaml.contains("apiVersion: wardle.example.com/v1beta1"),
        "{yaml}"
    );
    assert!(yaml.contains("kind: Flunder"), "{yaml}");
    assert!(yaml.contains("sample-label: \"true\""), "{yaml}");
    assert!(yaml.contains("uid: "), "{yaml}");

    // `get -w` sees a flunder created meanwhile.
    let mut watch = k.spawn(&["get", "flunders", "-w", "--request-timeout=0"]);
    // Wait for the initial listing before creating.
    watch.line("initial list from get -w", |l| {
        l.starts_with("my-first-flunder")
    });
    let second = tmp.path().join("second.yaml");
    write(
        &second,
        "apiVersion: wardle.example.com/v1beta1\nkind: Flunder\nmetadata:\n  name: second-flunder\n",
    );
    k.ok(&["create", "-f", second.to_str().expect("path")]);
    watch.line("watch event from get -w", |l| {
        l.starts_with("second-flunder")
    });
    drop(watch);

    // Persistence across SIGKILL.
    server.kill();
    let server = common::Server::start_in(&dir, port, &[]).await;
    let out = k.ok(&["get", "flunders", "-o", "name"]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "flunder.wardle.example.com/my-first-flunder",
            "flunder.wardle.example.com/second-flunder"
        ]
    );

    let out = k.ok(&["delete", "flunder", "my-first-flunder"]);
    assert_eq!(
        out.trim(),
        "flunder.wardle.example.com \"my-first-flunder\" deleted"
    );
    let out = k.run(&["get", "flunder", "my-first-flunder"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Error from server (NotFound): flunders.wardle.example.com \"my-first-flunder\" not found"),
        "{err}"
    );
    drop(server);
}
