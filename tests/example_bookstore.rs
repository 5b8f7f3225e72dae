//! The `bookstore` example (`examples/bookstore.rs`) is a working server:
//! start it and create a Book with kube-rs.
//!
//! Examples have no `CARGO_BIN_EXE_*`; `cargo test` builds them next to
//! the test binaries (`target/<profile>/examples/`), which is where this
//! test looks. `cargo test --test example_bookstore` alone does not build
//! examples: run `cargo build --examples` first.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};

fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/<test> -> target/<profile>/examples/bookstore
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let bin = profile_dir.join("examples").join("bookstore");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --examples` (plain `cargo test` builds it)",
        bin.display()
    );
    bin
}

struct Example(Child);

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn bookstore_example_serves_books() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let log = tmp.path().join("bookstore.log");
    let port = common::free_port();
    let out = std::fs::File::create(&log).expect("log");
    let _server = Example(
        Command::new(example_binary())
            .args(["serve", "--secure-port", &port.to_string(), "--data-dir"])
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .expect("spawn bookstore"),
    );
    let kubeconfig = data.join("admin.kubeconfig");
    let deadline = Instant::now() + Duration::from_secs(30);
    let client = loop {
        if kubeconfig.exists()
            && let Ok(kc) = kube::config::Kubeconfig::read_from(&kubeconfig)
            && let Ok(config) = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await
            && let Ok(client) = kube::Client::try_from(config)
            && let Ok(Ok(body)) = tokio::time::timeout(
                Duration::from_secs(2),
                client.request_text(http::Request::get("/readyz").body(Vec::new()).expect("req")),
            )
            .await
            && body == "ok"
        {
            break client;
        }
        assert!(
            Instant::now() < deadline,
            "bookstore did not become ready; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    let gvk = GroupVersionKind::gvk("bookstore.example.com", "v1", "Book");
    let books: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "books"),
    );
    let book: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "bookstore.example.com/v1",
        "kind": "Book",
        "metadata": {"name": "dune"},
        "spec": {"title": "Dune", "author": "Frank Herbert", "isbn": "9780441013593"},
    }))
    .expect("book");
    let created = books
        .create(&PostParams::default(), &book)
        .await
        .expect("create book");
    assert_eq!(created.data["spec"]["pages"], 100, "defaulted");
    let got = books.get("dune").await.expect("get book");
    assert_eq!(got.data["spec"]["author"], "Frank Herbert");

    // validation runs: no title, too many pages, a malformed ISBN
    let bad: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "bookstore.example.com/v1",
        "kind": "Book",
        "metadata": {"name": "bad"},
        "spec": {"author": "X", "pages": 20000, "isbn": "12"},
    }))
    .expect("book");
    match books.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            for field in ["spec.title", "spec.pages", "spec.isbn"] {
                assert!(
                    status.message.contains(field),
                    "{field}: {}",
                    status.message
                );
            }
        }
        other => panic!("expected 422, got {other:?}"),
    }

    // discovery and OpenAPI were generated at start-up
    let v3 = client
        .request_text(
            http::Request::get("/openapi/v3/apis/bookstore.example.com/v1")
                .body(Vec::new())
                .expect("req"),
        )
        .await
        .expect("openapi v3");
    assert!(v3.contains("com.example.bookstore.v1.Book"));
    assert!(v3.contains("The number of pages."));
    let v2 = client
        .request_text(
            http::Request::get("/openapi/v2")
                .body(Vec::new())
                .expect("req"),
        )
        .await
        .expect("openapi v2");
    assert!(v2.contains("\"swagger\":\"2.0\""));
}

/// The example's `main` is the runtime's command line: every `apiforge
/// serve` flag under kube-apiserver-style headings, and the `openapi`,
/// `crd` and `snapshot` subcommands, for its own group.
#[test]
fn bookstore_has_the_full_command_line() {
    let run = |args: &[&str]| {
        let out = Command::new(example_binary())
            .args(args)
            .output()
            .expect("run bookstore");
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let top = run(&["--help"]);
    assert!(
        top.starts_with("A bookstore API server built with apiforge"),
        "{top}"
    );
    for sub in ["serve", "openapi", "crd", "snapshot"] {
        assert!(top.contains(&format!("  {sub} ")), "no {sub} in:\n{top}");
    }
    let help = run(&["serve", "--help"]);
    // Each flag under its heading: the lines between the heading and the
    // next one (a line that is not indented and ends with ':').
    let section = |heading: &str| -> String {
        let mut lines = help.lines().skip_while(|l| *l != heading);
        assert!(lines.next().is_some(), "no heading {heading:?} in:\n{help}");
        lines
            .take_while(|l| l.is_empty() || l.starts_with(' ') || !l.ends_with(':'))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for (heading, flag) in [
        ("Secure serving:", "--tls-cert-file"),
        ("Storage:", "--etcd-servers"),
        ("Authentication:", "--client-ca-file"),
        ("Authorization:", "--authorization-mode"),
        ("Auditing:", "--audit-policy-file"),
        ("Admission:", "--enable-admission-plugins"),
    ] {
        assert!(
            section(heading).contains(flag),
            "{flag} is not under {heading:?}:\n{help}"
        );
    }
    // The admission help names the plugins this program has.
    assert!(help.contains("NamespaceLifecycle"), "{help}");
    assert!(!help.contains("BanFlunder"), "{help}");

    let tmp = tempfile::tempdir().expect("tempdir");
    run(&["openapi", "--out", tmp.path().to_str().expect("path")]);
    let v3 = tmp
        .path()
        .join("v3/apis__bookstore.example.com__v1_openapi.json");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&v3).expect("v3 document")).expect("json");
    let book = &doc["components"]["schemas"]["com.example.bookstore.v1.Book"];
    assert_eq!(
        book["x-kubernetes-group-version-kind"][0]["kind"], "Book",
        "{doc}"
    );
    let crd = run(&["crd"]);
    assert!(
        crd.contains("\"name\": \"books.bookstore.example.com\""),
        "{crd}"
    );
}
