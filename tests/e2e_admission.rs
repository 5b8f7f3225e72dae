//! Admission end to end: NamespaceLifecycle (missing and terminating
//! namespaces, system namespaces), namespace deletion through the
//! namespace controller (kube client and `kubectl delete ns`), dry runs,
//! the admission flags, and wardle's BanFlunder (names a Fischer disallows).

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

fn flunders(client: kube::Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("wardle.example.com", "v1beta1", "Flunder");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "flunders");
    Api::namespaced_with(client, ns, &ar)
}

fn flunder(body: Value) -> DynamicObject {
    let mut obj =
        json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder", "spec": {}});
    obj["metadata"] = body;
    serde_json::from_value(obj).expect("flunder")
}

fn namespace(name: &str) -> Namespace {
    serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace")
}

/// The error's Status as JSON (what the server sent).
fn status(err: kube::Error) -> Value {
    match err {
        kube::Error::Api(s) => serde_json::to_value(&*s).expect("status json"),
        other => panic!("not an API error: {other:?}"),
    }
}

/// Polls until `done` or panics after 30 s.
async fn eventually<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn create_in_a_missing_namespace_is_404() {
    let server = common::Server::start().await;
    let api = flunders(server.client().await, "missing");
    let err = api
        .create(&PostParams::default(), &flunder(json!({"name": "f"})))
        .await
        .expect_err("missing namespace");
    assert_eq!(
        status(err),
        json!({"status":"Failure","code":404,"message":"namespaces \"missing\" not found",
               "metadata":{},"reason":"NotFound","details":{"name":"missing","kind":"namespaces"}})
    );
    // Also for dry runs.
    let err = api
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &flunder(json!({"name": "f"})),
        )
        .await
        .expect_err("missing namespace, dry run");
    assert_eq!(status(err)["code"], 404);
}

#[tokio::test]
async fn terminating_namespaces_take_no_new_content_and_go_away_when_empty() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(&PostParams::default(), &namespace("doomed"))
        .await
        .expect("create namespace");
    let api = flunders(client.clone(), "doomed");
    api.create(
        &PostParams::default(),
        &flunder(json!({"name": "held", "finalizers": ["example.com/hold"]})),
    )
    .await
    .expect("create held flunder");
    api.create(&PostParams::default(), &flunder(json!({"name": "plain"})))
        .await
        .expect("create plain flunder");

    // DELETE marks the namespace: 200 with the object.
    let deleted = namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .expect("delete namespace");
    let ns = deleted.left().expect("namespace object, not a Status");
    assert!(ns.metadata.deletion_timestamp.is_some());
    assert_eq!(
        ns.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );

    let err = api
        .create(&PostParams::default(), &flunder(json!({"name": "late"})))
        .await
        .expect_err("terminating namespace");
    assert_eq!(
        status(err),
        json!({"status":"Failure","code":403,"metadata":{},"reason":"Forbidden",
               "message":"flunders.wardle.example.com \"late\" is forbidden: unable to create new content in namespace doomed because it is being terminated",
               "details":{"name":"late","group":"wardle.example.com","kind":"flunders",
                          "causes":[{"reason":"NamespaceTerminating","message":"namespace doomed is being terminated","field":"metadata.namespace"}]}})
    );

    // The controller deletes the content; the finalizer holds one flunder
    // (and so the namespace) until it is removed.
    eventually("plain flunder deleted", || async {
        api.get_opt("plain").await.expect("get").is_none()
    })
    .await;
    let held = api.get("held").await.expect("held flunder");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(namespaces.get_opt("doomed").await.expect("get").is_some());
    let mut held = held;
    held.metadata.finalizers = None;
    api.replace("held", &PostParams::default(), &held)
        .await
        .expect("remove finalizer");
    eventually("namespace removed", || async {
        namespaces.get_opt("doomed").await.expect("get").is_none()
    })
    .await;
    assert!(api.get_opt("held").await.expect("get").is_none());
}

#[tokio::test]
async fn system_namespaces_cannot_be_deleted() {
    let server = common::Server::start().await;
    let namespaces: Api<Namespace> = Api::all(server.client().await);
    for name in ["default", "kube-system", "kube-public"] {
        let err = namespaces
            .delete(name, &DeleteParams::default())
            .await
            .expect_err("system namespace");
        assert_eq!(
            status(err),
            json!({"status":"Failure","code":403,"metadata":{},"reason":"Forbidden",
                   "message":format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
                   "details":{"name":name,"kind":"namespaces"}})
        );
        let ns = namespaces.get(name).await.expect("still there");
        assert!(ns.metadata.deletion_timestamp.is_none());
    }
}

#[tokio::test]
async fn dry_run_create_is_admitted_but_not_persisted() {
    let server = common::Server::start().await;
    let api = flunders(server.client().await, "default");
    let created = api
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &flunder(json!({"name": "dry"})),
        )
        .await
        .expect("dry-run create");
    assert_eq!(created.metadata.name.as_deref(), Some("dry"));
    assert!(api.get_opt("dry").await.expect("get").is_none());
}

#[tokio::test]
async fn admission_flags_select_plugins() {
    // Without NamespaceLifecycle a missing namespace is not checked.
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = common::Server::start_in(
        &tmp.path().join("data"),
        common::free_port(),
        &["--disable-admission-plugins=NamespaceLifecycle"],
    )
    .await;
    flunders(server.client().await, "nowhere")
        .create(&PostParams::default(), &flunder(json!({"name": "f"})))
        .await
        .expect("create without NamespaceLifecycle");

    // Unknown names stop the server at start-up with a clear message.
    let out = Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .args(["serve", "--secure-port", "0", "--data-dir"])
        .arg(tmp.path().join("other"))
        .arg("--enable-admission-plugins=BanFlunder,NoSuchPlugin")
        .stdin(Stdio::null())
        .output()
        .expect("run apiforge");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("enable-admission-plugins plugin \"NoSuchPlugin\" is unknown"),
        "{err}"
    );
}

// --- BanFlunder ---

fn fischers(client: kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("wardle.example.com", "v1alpha1", "Fischer");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "fischers");
    Api::all_with(client, &ar)
}

fn fischer(name: &str, disallowed: &[&str]) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "wardle.example.com/v1alpha1", "kind": "Fischer",
        "metadata": {"name": name}, "disallowedFlunders": disallowed,
    }))
    .expect("fischer")
}

#[tokio::test]
async fn ban_flunder_refuses_names_a_fischer_disallows() {
    let server = common::Server::start().await;
    let client = server.client().await;
    fischers(client.clone())
        .create(&PostParams::default(), &fischer("ban", &["x", "y"]))
        .await
        .expect("create fischer");
    let api = flunders(client.clone(), "default");
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    // The plugin may read Fischers from a cache: wait (with dry runs) until
    // it refuses, then create for real.
    eventually("BanFlunder refuses \"x\"", || async {
        api.create(&dry_run, &flunder(json!({"name": "x"})))
            .await
            .is_err_and(|e| matches!(e, kube::Error::Api(s) if s.code == 403))
    })
    .await;
    let err = api
        .create(&PostParams::default(), &flunder(json!({"name": "x"})))
        .await
        .expect_err("banned name");
    assert_eq!(
        status(err),
        json!({"status":"Failure","code":403,"metadata":{},"reason":"Forbidden",
               "message":"flunders.wardle.example.com \"x\" is forbidden: this name may not be used, please change the resource name",
               "details":{"name":"x","group":"wardle.example.com","kind":"flunders"}})
    );
    assert!(api.get_opt("x").await.expect("get").is_none());

    // Both served versions of Flunder are checked.
    let gvk = GroupVersionKind::gvk("wardle.example.com", "v1alpha1", "Flunder");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "flunders");
    let v1alpha1: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let mut body = flunder(json!({"name": "y"}));
    body.types = Some(kube::core::TypeMeta {
        api_version: "wardle.example.com/v1alpha1".into(),
        kind: "Flunder".into(),
    });
    let err = v1alpha1
        .create(&PostParams::default(), &body)
        .await
        .expect_err("banned name in v1alpha1");
    assert_eq!(
        status(err)["message"],
        "flunders.wardle.example.com \"y\" is forbidden: this name may not be used, please change the resource name"
    );

    // Other names pass; Fischers themselves are never checked.
    api.create(&PostParams::default(), &flunder(json!({"name": "z"})))
        .await
        .expect("allowed name");
    fischers(client)
        .create(&PostParams::default(), &fischer("x", &["x"]))
        .await
        .expect("fischers are not checked");
}

#[tokio::test]
async fn ban_flunder_can_be_disabled() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = common::Server::start_in(
        &tmp.path().join("data"),
        common::free_port(),
        &["--disable-admission-plugins=BanFlunder"],
    )
    .await;
    let client = server.client().await;
    fischers(client.clone())
        .create(&PostParams::default(), &fischer("ban", &["x"]))
        .await
        .expect("create fischer");
    // Give a cache-based plugin time to see the Fischer: it must stay silent.
    tokio::time::sleep(Duration::from_millis(500)).await;
    flunders(client, "default")
        .create(&PostParams::default(), &flunder(json!({"name": "x"})))
        .await
        .expect("BanFlunder is disabled");
}

// --- kubectl ---

fn kubectl(server: &common::Server, home: &std::path::Path, args: &[&str]) -> Output {
    let bin = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    Command::new(&bin)
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--cache-dir")
        .arg(home)
        .args(args)
        .env("HOME", home)
        .output()
        .unwrap_or_else(|e| {
            panic!("kubectl not runnable ({bin:?}: {e}); install it or set KUBECTL; this test does not skip")
        })
}

fn kubectl_ok(server: &common::Server, home: &std::path::Path, args: &[&str]) -> String {
    let out = kubectl(server, home, args);
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn kubectl_delete_namespace_waits_until_it_is_gone() {
    let server = common::Server::start().await;
    let home = tempfile::tempdir().expect("home");
    let home = home.path();
    // (`kubectl create namespace` sends protobuf, which is not served yet.)
    let client = server.client().await;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace("team"))
        .await
        .expect("create namespace");
    let api = flunders(client, "team");
    for name in ["f1", "f2", "f3"] {
        api.create(&PostParams::default(), &flunder(json!({"name": name})))
            .await
            .expect("create flunder");
    }
    let out = kubectl_ok(
        &server,
        home,
        &["get", "flunders", "-n", "team", "-o", "name"],
    );
    assert_eq!(out.lines().count(), 3, "{out}");

    let started = Instant::now();
    let out = kubectl_ok(
        &server,
        home,
        &["delete", "namespace", "team", "--timeout=60s"],
    );
    assert_eq!(out.trim(), "namespace \"team\" deleted");
    assert!(started.elapsed() < Duration::from_secs(30));

    let out = kubectl(&server, home, &["get", "namespace", "team"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Error from server (NotFound): namespaces \"team\" not found"),
        "{err}"
    );
    let list = api.list(&Default::default()).await.expect("list flunders");
    assert!(list.items.is_empty(), "{:?}", list.items);

    let out = kubectl(&server, home, &["delete", "namespace", "kube-system"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Error from server (Forbidden): namespaces \"kube-system\" is forbidden: this namespace may not be deleted"),
        "{err}"
    );
}
