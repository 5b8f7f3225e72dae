//! Delegated authentication and authorization (k8s.io/apiserver's
//! delegating options, as an aggregated API server uses them), between
//! two real binaries: server A is the main server (static tokens, RBAC, a
//! client CA and a front proxy's request-header CA, which it publishes in
//! `kube-system/extension-apiserver-authentication`); server B runs with
//! `--authentication-kubeconfig` and `--authorization-kubeconfig` naming A
//! and a user bound to `system:auth-delegator` and
//! `extension-apiserver-authentication-reader` there.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::Server;
use common::auth::{Credential, TestCa, admin_token, client_with, token_file};
use serde_json::{Value, json};

const LIST_CM: &str = "/api/v1/namespaces/default/configmaps";
const WHOAMI: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
const AUTH_CM: &str =
    "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication";
const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

/// Sends `method path` with extra headers and an optional JSON body: the
/// status code and the body (errors: their Status message; transport
/// failures: code 0).
async fn request(
    client: &kube::Client,
    method: http::Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, String) {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(
            body.map(|b| serde_json::to_vec(&b).expect("json"))
                .unwrap_or_default(),
        )
        .expect("request");
    match client.request_text(req).await {
        Ok(body) => (200, body),
        Err(kube::Error::Api(s)) => (s.code, s.message),
        Err(other) => (0, other.to_string()),
    }
}

/// Who the server thinks the client is (a SelfSubjectReview), or the
/// failure.
async fn whoami(client: &kube::Client, headers: &[(&str, &str)]) -> Result<Value, (u16, String)> {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    match request(client, http::Method::POST, WHOAMI, headers, Some(body)).await {
        (200, text) => {
            let review: Value = serde_json::from_str(&text).expect("review");
            Ok(review["status"]["userInfo"].clone())
        }
        other => Err(other),
    }
}

/// Repeats `check` until it returns true or `limit` passes.
async fn wait_for<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn forbidden_list(user: &str) -> String {
    format!(
        "configmaps is forbidden: User \"{user}\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    )
}

/// A kubeconfig for A authenticating with `token`.
fn kubeconfig_for(a: &Server, token: &str, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(a.kubeconfig()).expect("A's kubeconfig");
    let text = text.replace(&admin_token(a), token);
    let path = dir.join(format!("{token}.kubeconfig"));
    std::fs::write(&path, text).expect("write kubeconfig");
    path
}

/// The main server's test fixture.
struct Main {
    a: Server,
    proxy_ca: TestCa,
    client_ca: TestCa,
    tmp: tempfile::TempDir,
}

/// Starts A with tokens for `server-b`, `alice` and `bob`, a client CA,
/// a front-proxy CA (allowed name `front-proxy-client`), and binds
/// `server-b` to the delegation roles.
async fn main_server() -> Main {
    let tmp = tempfile::tempdir().expect("tmp");
    let proxy_ca = TestCa::new("front-proxy-ca");
    let client_ca = TestCa::new("client-ca");
    let proxy_ca_file = proxy_ca.write(tmp.path(), "front-proxy-ca.crt");
    let client_ca_file = client_ca.write(tmp.path(), "client-ca.crt");
    let tokens = token_file(
        tmp.path(),
        &[
            "b-token,server-b,100",
            "alice-token,alice,101,\"dev\"",
            "bob-token,bob,102",
        ],
    );
    let a = Server::start_in(
        &tmp.path().join("a"),
        common::free_port(),
        &[
            "--token-auth-file",
            tokens.to_str().expect("path"),
            "--client-ca-file",
            client_ca_file.to_str().expect("path"),
            "--requestheader-client-ca-file",
            proxy_ca_file.to_str().expect("path"),
            "--requestheader-allowed-names=front-proxy-client",
        ],
    )
    .await;
    let admin = a.client().await;
    let user =
        json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "server-b"}]);
    let created = request(
        &admin,
        http::Method::POST,
        &format!("{RBAC}/clusterrolebindings"),
        &[],
        Some(json!({"metadata": {"name": "server-b:auth-delegator"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
            "subjects": user})),
    )
    .await;
    assert_eq!(created.0, 200, "{}", created.1);
    let created = request(
        &admin,
        http::Method::POST,
        &format!("{RBAC}/namespaces/kube-system/rolebindings"),
        &[],
        Some(json!({"metadata": {"name": "server-b:auth-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"},
            "subjects": user})),
    )
    .await;
    assert_eq!(created.0, 200, "{}", created.1);
    // RBAC applies once A's cache saw the bindings.
    let b_on_a = client_with(&a, &Credential::token("b-token")).await;
    wait_for("server-b's bindings on A", Duration::from_secs(10), || {
        let b_on_a = b_on_a.clone();
        async move {
            request(&b_on_a, http::Method::GET, AUTH_CM, &[], None)
                .await
                .0
                == 200
        }
    })
    .await;
    Main {
        a,
        proxy_ca,
        client_ca,
        tmp,
    }
}

/// Starts B delegating to A as `server-b`, with `extra` flags.
async fn delegating_server(main: &Main, name: &str, extra: &[&str]) -> Server {
    let kubeconfig = kubeconfig_for(&main.a, "b-token", main.tmp.path());
    let kubeconfig = kubeconfig.to_str().expect("path");
    let mut flags = vec![
        "--authentication-kubeconfig",
        kubeconfig,
        "--authorization-kubeconfig",
        kubeconfig,
        "--authorization-webhook-cache-unauthorized-ttl",
        "1s",
    ];
    flags.extend_from_slice(extra);
    Server::start_in(&main.tmp.path().join(name), common::free_port(), &flags).await
}

#[tokio::test]
async fn main_server_publishes_authentication_configmap_and_delegation_roles() {
    let main = main_server().await;
    let admin = main.a.client().await;
    let (code, text) = request(&admin, http::Method::GET, AUTH_CM, &[], None).await;
    assert_eq!(code, 200, "{text}");
    let cm: Value = serde_json::from_str(&text).expect("configmap");
    let data = &cm["data"];
    assert_eq!(data["client-ca-file"], json!(main.client_ca.cert_pem));
    assert_eq!(
        data["requestheader-client-ca-file"],
        json!(main.proxy_ca.cert_pem)
    );
    assert_eq!(
        data["requestheader-username-headers"],
        r#"["X-Remote-User"]"#
    );
    assert_eq!(data["requestheader-group-headers"], r#"["X-Remote-Group"]"#);
    assert_eq!(
        data["requestheader-extra-headers-prefix"],
        r#"["X-Remote-Extra-"]"#
    );
    assert_eq!(
        data["requestheader-allowed-names"],
        r#"["front-proxy-client"]"#
    );
    // Upstream's bootstrap roles for aggregated servers.
    let (code, text) = request(
        &admin,
        http::Method::GET,
        &format!("{RBAC}/clusterroles/system:auth-delegator"),
        &[],
        None,
    )
    .await;
    assert_eq!(code, 200, "{text}");
    let role: Value = serde_json::from_str(&text).expect("role");
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}
        ])
    );
    let (code, text) = request(
        &admin,
        http::Method::GET,
        &format!("{RBAC}/namespaces/kube-system/roles/extension-apiserver-authentication-reader"),
        &[],
        None,
    )
    .await;
    assert_eq!(code, 200, "{text}");
    let role: Value = serde_json::from_str(&text).expect("role");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["configmaps"],
            "resourceNames": ["extension-apiserver-authentication"], "verbs": ["get", "list", "watch"]}])
    );
    // A removed key is put back; an added header stays (the union, as
    // upstream's controller keeps).
    let mut changed = cm.clone();
    changed["data"]
        .as_object_mut()
        .expect("data")
        .remove("client-ca-file");
    changed["data"]["requestheader-username-headers"] =
        json!(r#"["X-Remote-User","X-Other-User"]"#);
    let (code, text) = request(&admin, http::Method::PUT, AUTH_CM, &[], Some(changed)).await;
    assert_eq!(code, 200, "{text}");
    wait_for(
        "the ConfigMap to be repaired",
        Duration::from_secs(30),
        || {
            let admin = admin.clone();
            async move {
                let (_, text) = request(&admin, http::Method::GET, AUTH_CM, &[], None).await;
                let cm: Value = serde_json::from_str(&text).unwrap_or_default();
                cm["data"]["client-ca-file"].is_string()
            }
        },
    )
    .await;
    let (_, text) = request(&admin, http::Method::GET, AUTH_CM, &[], None).await;
    let cm: Value = serde_json::from_str(&text).expect("configmap");
    assert_eq!(
        cm["data"]["requestheader-username-headers"],
        r#"["X-Remote-User","X-Other-User"]"#
    );
}

#[tokio::test]
async fn delegated_tokens_and_authorization() {
    let main = main_server().await;
    let b = delegating_server(&main, "b", &[]).await;

    // A token of A authenticates on B (a TokenReview against A).
    let alice = client_with(&b, &Credential::token("alice-token")).await;
    let user = whoami(&alice, &[]).await.expect("alice on B");
    assert_eq!(user["username"], "alice");
    assert_eq!(user["uid"], "101");
    assert_eq!(user["groups"], json!(["dev", "system:authenticated"]));
    // A token A does not know is 401 on B.
    let nobody = client_with(&b, &Credential::token("unknown-token")).await;
    assert_eq!(
        request(&nobody, http::Method::GET, LIST_CM, &[], None).await,
        (401, "Unauthorized".to_string())
    );

    // Without a binding in A: 403 from B, with upstream's message.
    let bob = client_with(&b, &Credential::token("bob-token")).await;
    assert_eq!(
        request(&bob, http::Method::GET, LIST_CM, &[], None).await,
        (403, forbidden_list("bob"))
    );
    // A RoleBinding in A lets bob list on B.
    let admin_a = main.a.client().await;
    let created = request(
        &admin_a,
        http::Method::POST,
        &format!("{RBAC}/namespaces/default/rolebindings"),
        &[],
        Some(json!({"metadata": {"name": "bob-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]})),
    )
    .await;
    assert_eq!(created.0, 200, "{}", created.1);
    wait_for("bob's binding to reach B", Duration::from_secs(20), || {
        let bob = bob.clone();
        async move { request(&bob, http::Method::GET, LIST_CM, &[], None).await.0 == 200 }
    })
    .await;
    // Still only what the binding allows.
    let (code, msg) = request(
        &bob,
        http::Method::POST,
        LIST_CM,
        &[],
        Some(json!({"metadata": {"name": "x"}})),
    )
    .await;
    assert_eq!(code, 403, "{msg}");

    // Always-allowed paths need no credentials and no review.
    let anonymous = client_with(&b, &Credential::default()).await;
    for path in ["/healthz", "/readyz", "/livez"] {
        assert_eq!(
            request(&anonymous, http::Method::GET, path, &[], None).await,
            (200, "ok".to_string()),
            "{path}"
        );
    }
    // Other paths are A's decision: /metrics is not public.
    assert_eq!(
        request(&anonymous, http::Method::GET, "/metrics", &[], None).await,
        (
            403,
            "forbidden: User \"system:anonymous\" cannot get path \"/metrics\"".to_string()
        )
    );
    // B's own admin (system:masters) is always allowed.
    let admin_b = b.client().await;
    assert_eq!(
        request(&admin_b, http::Method::GET, LIST_CM, &[], None)
            .await
            .0,
        200
    );
    // A client certificate signed by A's client CA (from the ConfigMap).
    let dave = client_with(
        &b,
        &Credential::cert(
            main.client_ca
                .client_cert(main.tmp.path(), "dave", Some("team")),
        ),
    )
    .await;
    let user = whoami(&dave, &[]).await.expect("dave on B");
    assert_eq!(user["username"], "dave");
    assert_eq!(user["groups"], json!(["team", "system:authenticated"]));
}

#[tokio::test]
async fn delegated_request_header_from_the_configmap() {
    let main = main_server().await;
    let b = delegating_server(&main, "b", &[]).await;
    let dir = main.tmp.path();
    let headers = [("X-Remote-User", "carol"), ("X-Remote-Group", "proxied")];

    // A's front proxy (CA and allowed name from the ConfigMap).
    let proxy = client_with(
        &b,
        &Credential::cert(main.proxy_ca.client_cert(dir, "front-proxy-client", None)),
    )
    .await;
    let user = whoami(&proxy, &headers)
        .await
        .expect("carol through the proxy");
    assert_eq!(user["username"], "carol");
    assert_eq!(user["groups"], json!(["proxied", "system:authenticated"]));
    // A CN that is not allowed: 401.
    let other = client_with(
        &b,
        &Credential::cert(main.proxy_ca.client_cert(dir, "someone-else", None)),
    )
    .await;
    assert_eq!(whoami(&other, &headers).await.err().map(|e| e.0), Some(401));

    // A second front-proxy CA added to the ConfigMap in A is trusted by B
    // once B re-read it.
    let second_ca = TestCa::new("second-front-proxy-ca");
    let second = client_with(
        &b,
        &Credential::cert(second_ca.client_cert(dir, "front-proxy-client", None)),
    )
    .await;
    assert!(whoami(&second, &headers).await.is_err());
    let admin_a = main.a.client().await;
    let (_, text) = request(&admin_a, http::Method::GET, AUTH_CM, &[], None).await;
    let mut cm: Value = serde_json::from_str(&text).expect("configmap");
    let bundle = format!(
        "{}{}",
        cm["data"]["requestheader-client-ca-file"]
            .as_str()
            .expect("bundle"),
        second_ca.cert_pem
    );
    cm["data"]["requestheader-client-ca-file"] = json!(bundle);
    let (code, text) = request(&admin_a, http::Method::PUT, AUTH_CM, &[], Some(cm)).await;
    assert_eq!(code, 200, "{text}");
    wait_for("B to trust the second CA", Duration::from_secs(30), || {
        let second = second.clone();
        async move {
            whoami(&second, &headers)
                .await
                .is_ok_and(|u| u["username"] == "carol")
        }
    })
    .await;
    // The first CA is still trusted.
    assert!(whoami(&proxy, &headers).await.is_ok());
    // Header names come from the ConfigMap too: a username header added
    // in A is read by B.
    let other_header = [("X-Other-User", "olga")];
    assert_eq!(
        whoami(&proxy, &other_header).await.err().map(|e| e.0),
        Some(401),
        "without a user header the proxy's certificate is not a client certificate of A's client CA"
    );
    let (_, text) = request(&admin_a, http::Method::GET, AUTH_CM, &[], None).await;
    let mut cm: Value = serde_json::from_str(&text).expect("configmap");
    cm["data"]["requestheader-username-headers"] = json!(r#"["X-Remote-User","X-Other-User"]"#);
    let (code, text) = request(&admin_a, http::Method::PUT, AUTH_CM, &[], Some(cm)).await;
    assert_eq!(code, 200, "{text}");
    wait_for("B to read X-Other-User", Duration::from_secs(30), || {
        let proxy = proxy.clone();
        async move {
            whoami(&proxy, &other_header)
                .await
                .is_ok_and(|u| u["username"] == "olga")
        }
    })
    .await;

    // With --authentication-skip-lookup the ConfigMap is not read: the
    // proxy's headers mean nothing there (B asks for no client
    // certificate, the request is anonymous).
    // (--kubeconfig stands for both --authentication-kubeconfig and
    // --authorization-kubeconfig.)
    let kubeconfig = kubeconfig_for(&main.a, "b-token", dir);
    let skipping = Server::start_in(
        &dir.join("b-skip"),
        common::free_port(),
        &[
            "--kubeconfig",
            kubeconfig.to_str().expect("path"),
            "--authentication-skip-lookup",
        ],
    )
    .await;
    assert!(!skipping.data_dir.join("delegated-authentication").exists());
    let proxy = client_with(
        &skipping,
        &Credential::cert(main.proxy_ca.client_cert(dir, "front-proxy-client", None)),
    )
    .await;
    let (code, msg) = request(&proxy, http::Method::GET, LIST_CM, &headers, None).await;
    assert_eq!((code, msg), (403, forbidden_list("system:anonymous")));
    // Tokens are still reviewed by A, and requests authorized by A: a
    // binding that exists only in A counts.
    let alice = client_with(&skipping, &Credential::token("alice-token")).await;
    assert_eq!(
        whoami(&alice, &[]).await.expect("alice")["username"],
        "alice"
    );
    let created = request(
        &admin_a,
        http::Method::POST,
        &format!("{RBAC}/namespaces/default/rolebindings"),
        &[],
        Some(json!({"metadata": {"name": "alice-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})),
    )
    .await;
    assert_eq!(created.0, 200, "{}", created.1);
    wait_for(
        "alice's binding to reach B",
        Duration::from_secs(30),
        || {
            let alice = alice.clone();
            async move {
                request(&alice, http::Method::GET, LIST_CM, &[], None)
                    .await
                    .0
                    == 200
            }
        },
    )
    .await;
}

/// Runs `apiforge serve` with `args` expecting it to fail within 30 s;
/// returns its stderr.
fn serve_fails(args: &[&str]) -> String {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .arg("serve")
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(!status.success());
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .expect("stderr")
                .read_to_string(&mut err)
                .expect("read stderr");
            return err;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the server did not fail");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test]
async fn lookup_failures_and_flag_conflicts() {
    let main = main_server().await;
    // bob may not read the ConfigMap.
    let bob = kubeconfig_for(&main.a, "bob-token", main.tmp.path());
    let bob = bob.to_str().expect("path");
    let data = main.tmp.path().join("failing");
    let err = serve_fails(&[
        "--data-dir",
        data.to_str().expect("path"),
        "--secure-port",
        "0",
        "--authentication-kubeconfig",
        bob,
        "--authorization-kubeconfig",
        bob,
        "--authentication-tolerate-lookup-failure=false",
    ]);
    assert!(
        err.contains(
            "unable to load configmap based request-header-client-ca-file: configmaps \"extension-apiserver-authentication\" is forbidden: User \"bob\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"kube-system\""
        ),
        "{err}"
    );
    // Tolerated (the default): the server starts without the settings.
    let tolerant = Server::start_in(
        &main.tmp.path().join("tolerant"),
        common::free_port(),
        &[
            "--authentication-kubeconfig",
            bob,
            "--authorization-kubeconfig",
            bob,
        ],
    )
    .await;
    assert!(
        tolerant
            .log()
            .contains("Error looking up in-cluster authentication configuration"),
        "{}",
        tolerant.log()
    );

    // The delegated authorizer replaces --authorization-mode; the token
    // webhook and the delegated token review are one slot.
    let err = serve_fails(&[
        "--authorization-kubeconfig",
        bob,
        "--authorization-mode",
        "RBAC",
    ]);
    assert!(
        err.contains("--authorization-mode cannot be combined with --authorization-kubeconfig"),
        "{err}"
    );
    let err = serve_fails(&[
        "--kubeconfig",
        bob,
        "--authentication-token-webhook-config-file",
        bob,
    ]);
    assert!(
        err.contains("--authentication-token-webhook-config-file cannot be combined with --authentication-kubeconfig"),
        "{err}"
    );
}
