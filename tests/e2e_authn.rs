//! Authentication against the real binary over TLS: x509 client
//! certificates (`--client-ca-file`), static tokens (`--token-auth-file`),
//! the admin token, and anonymous requests (`--anonymous-auth`).
//! Identity is observed through RBAC's 403 message (which names the user)
//! and the bootstrap policy (`/version` is public, discovery needs
//! authentication, `system:masters` may do everything).

mod common;

use common::Server;
use common::auth::{Credential, TestCa, client_with, get, token_file};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};

const LIST_CM: &str = "/api/v1/namespaces/default/configmaps";

fn forbidden_list(user: &str) -> String {
    format!(
        "configmaps is forbidden: User \"{user}\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    )
}

async fn start(extra: &[&str], tmp: &tempfile::TempDir) -> Server {
    Server::start_in(&tmp.path().join("data"), common::free_port(), extra).await
}

#[tokio::test]
async fn static_tokens_admin_token_and_bad_tokens() {
    let tmp = tempfile::tempdir().expect("tmp");
    let tokens = token_file(
        tmp.path(),
        &[
            "alice-token,alice,1001,\"dev,ops\"",
            "root-token,root,0,system:masters",
        ],
    );
    let server = start(&["--token-auth-file", tokens.to_str().expect("path")], &tmp).await;

    // A known token authenticates (the user has no permissions yet).
    let alice = client_with(&server, &Credential::token("alice-token")).await;
    assert_eq!(get(&alice, LIST_CM).await, (403, forbidden_list("alice")));
    // Authenticated users may discover the API (system:discovery).
    assert_eq!(get(&alice, "/apis").await.0, 200);

    // Groups from the file count: system:masters may do everything.
    let root = client_with(&server, &Credential::token("root-token")).await;
    Api::<ConfigMap>::namespaced(root, "default")
        .list(&ListParams::default())
        .await
        .expect("masters list");

    // The admin token still works.
    let admin = server.client().await;
    assert_eq!(get(&admin, LIST_CM).await.0, 200);

    // An unknown token is 401 even though anonymous requests are allowed.
    let bad = client_with(&server, &Credential::token("nope")).await;
    match Api::<ConfigMap>::namespaced(bad.clone(), "default")
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!(
                (s.code, s.reason.as_str(), s.message.as_str()),
                (401, "Unauthorized", "Unauthorized")
            )
        }
        other => panic!("expected 401, got {other:?}"),
    }
    assert_eq!(get(&bad, "/version").await.0, 401);
}

#[tokio::test]
async fn client_certificates() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ca = TestCa::new("test-client-ca");
    let ca_file = ca.write(tmp.path(), "client-ca.crt");
    let server = start(&["--client-ca-file", ca_file.to_str().expect("path")], &tmp).await;

    // CN is the user, O the group.
    let carol = ca.client_cert(tmp.path(), "carol", Some("system:masters"));
    let client = client_with(&server, &Credential::cert(carol)).await;
    assert_eq!(get(&client, LIST_CM).await.0, 200);
    let dave = ca.client_cert(tmp.path(), "dave", Some("team"));
    let client = client_with(&server, &Credential::cert(dave)).await;
    assert_eq!(get(&client, LIST_CM).await, (403, forbidden_list("dave")));
    assert_eq!(get(&client, "/apis").await.0, 200);

    // A certificate from another CA is refused (the TLS handshake fails).
    let other = TestCa::new("other-ca");
    let mallory = other.client_cert(tmp.path(), "mallory", Some("system:masters"));
    let client = client_with(&server, &Credential::cert(mallory.clone())).await;
    let (code, msg) = get(&client, LIST_CM).await;
    assert!(
        code == 0 || code == 401,
        "expected a refusal, got {code}: {msg}"
    );
    // ... as kube-apiserver refuses it: the certificate is requested, not
    // verified in the handshake, and fails in the x509 authenticator: 401.
    assert_eq!(code, 401, "{msg}");

    // An expired certificate of the right CA is refused too.
    let expired = ca.expired_client_cert(tmp.path(), "erin");
    let client = client_with(&server, &Credential::cert(expired.clone())).await;
    let (code, msg) = get(&client, LIST_CM).await;
    assert!(
        code == 0 || code == 401,
        "expected a refusal of an expired certificate, got {code}: {msg}"
    );
    assert_eq!(code, 401, "{msg}");

    // A bearer token sent with a certificate that does not verify still
    // authenticates: a failed credential is not a failed connection.
    for cert in [mallory, expired] {
        let cred = Credential {
            cert: Some(cert),
            ..Credential::token(&common::auth::admin_token(&server))
        };
        let client = client_with(&server, &cred).await;
        assert_eq!(get(&client, LIST_CM).await.0, 200);
    }

    // No certificate and no token: anonymous.
    let anon = client_with(&server, &Credential::default()).await;
    assert_eq!(
        get(&anon, LIST_CM).await,
        (403, forbidden_list("system:anonymous"))
    );
    assert_eq!(get(&anon, "/version").await.0, 200);
    assert_eq!(get(&anon, "/readyz").await, (200, "ok".to_string()));
    assert_eq!(
        get(&anon, "/apis").await,
        (
            403,
            "forbidden: User \"system:anonymous\" cannot get path \"/apis\"".to_string()
        )
    );
}

#[tokio::test]
async fn anonymous_auth_off() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = start(&["--anonymous-auth=false"], &tmp).await;
    let anon = client_with(&server, &Credential::default()).await;
    assert_eq!(
        get(&anon, "/version").await,
        (401, "Unauthorized".to_string())
    );
    assert_eq!(get(&anon, LIST_CM).await.0, 401);
    let admin = server.client().await;
    assert_eq!(get(&admin, LIST_CM).await.0, 200);
}

#[tokio::test]
async fn always_allow_turns_anonymous_off() {
    let tmp = tempfile::tempdir().expect("tmp");
    let tokens = token_file(tmp.path(), &["t,alice,1"]);
    let server = start(
        &[
            "--authorization-mode=AlwaysAllow",
            "--token-auth-file",
            tokens.to_str().expect("path"),
        ],
        &tmp,
    )
    .await;
    let alice = client_with(&server, &Credential::token("t")).await;
    assert_eq!(get(&alice, LIST_CM).await.0, 200);
    let anon = client_with(&server, &Credential::default()).await;
    assert_eq!(get(&anon, LIST_CM).await.0, 401);
}

#[tokio::test]
async fn bootstrap_tokens() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = start(&["--enable-bootstrap-token-auth"], &tmp).await;
    let admin = server.client().await;
    let secret = |id: &str, secret: &str, extra: serde_json::Value| {
        let mut data = serde_json::json!({
            "token-id": id, "token-secret": secret,
            "usage-bootstrap-authentication": "true",
            "auth-extra-groups": "system:bootstrappers:worker",
        });
        if let (Some(d), Some(e)) = (data.as_object_mut(), extra.as_object()) {
            d.extend(e.clone());
        }
        serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("bootstrap-token-{id}"), "namespace": "kube-system"},
            "type": "bootstrap.kubernetes.io/token",
            "stringData": data,
        })
    };
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(admin, "kube-system");
    for s in [
        secret("abcdef", "0123456789abcdef", serde_json::json!({})),
        secret(
            "expire",
            "0123456789abcdef",
            serde_json::json!({"expiration": "2020-01-01T00:00:00Z"}),
        ),
        secret(
            "nouse1",
            "0123456789abcdef",
            serde_json::json!({"usage-bootstrap-authentication": "false"}),
        ),
    ] {
        api.create(
            &Default::default(),
            &serde_json::from_value(s).expect("secret"),
        )
        .await
        .expect("create secret");
    }
    let client = client_with(&server, &Credential::token("abcdef.0123456789abcdef")).await;
    assert_eq!(
        get(&client, LIST_CM).await,
        (403, forbidden_list("system:bootstrap:abcdef"))
    );
    for bad in [
        "abcdef.0123456789abcdee",
        "expire.0123456789abcdef",
        "nouse1.0123456789abcdef",
        "zzzzzz.0123456789abcdef",
    ] {
        let client = client_with(&server, &Credential::token(bad)).await;
        assert_eq!(get(&client, LIST_CM).await.0, 401, "{bad}");
    }

    // Without the flag the same token is unknown.
    let tmp2 = tempfile::tempdir().expect("tmp");
    let plain = start(&[], &tmp2).await;
    let api: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(plain.client().await, "kube-system");
    api.create(
        &Default::default(),
        &serde_json::from_value(secret("abcdef", "0123456789abcdef", serde_json::json!({})))
            .expect("secret"),
    )
    .await
    .expect("create secret");
    let client = client_with(&plain, &Credential::token("abcdef.0123456789abcdef")).await;
    assert_eq!(get(&client, LIST_CM).await.0, 401);
}

/// GETs `path` with extra headers.
async fn get_with(client: &kube::Client, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut req = http::Request::get(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    match client
        .request_text(req.body(Vec::new()).expect("request"))
        .await
    {
        Ok(body) => (200, body),
        Err(kube::Error::Api(s)) => (s.code, s.message),
        Err(other) => (0, other.to_string()),
    }
}

#[tokio::test]
async fn request_header_front_proxy() {
    let tmp = tempfile::tempdir().expect("tmp");
    let proxy_ca = TestCa::new("front-proxy-ca");
    let client_ca = TestCa::new("client-ca");
    let proxy_ca_file = proxy_ca.write(tmp.path(), "front-proxy-ca.crt");
    let client_ca_file = client_ca.write(tmp.path(), "client-ca.crt");
    let server = start(
        &[
            "--requestheader-client-ca-file",
            proxy_ca_file.to_str().expect("path"),
            "--requestheader-allowed-names=front-proxy-client",
            "--client-ca-file",
            client_ca_file.to_str().expect("path"),
        ],
        &tmp,
    )
    .await;
    let proxy = client_with(
        &server,
        &Credential::cert(proxy_ca.client_cert(tmp.path(), "front-proxy-client", None)),
    )
    .await;
    // The proxy names the user and groups.
    assert_eq!(
        get_with(
            &proxy,
            LIST_CM,
            &[("X-Remote-User", "erin"), ("X-Remote-Group", "team")]
        )
        .await,
        (403, forbidden_list("erin"))
    );
    assert_eq!(
        get_with(
            &proxy,
            LIST_CM,
            &[
                ("X-Remote-User", "erin"),
                ("X-Remote-Group", "system:masters")
            ]
        )
        .await
        .0,
        200
    );
    // Without a user header the proxy's certificate is not a client
    // certificate of --client-ca-file: 401.
    assert_eq!(get_with(&proxy, LIST_CM, &[]).await.0, 401);
    // A front-proxy certificate with a CN that is not allowed: 401.
    let other = client_with(
        &server,
        &Credential::cert(proxy_ca.client_cert(tmp.path(), "someone-else", None)),
    )
    .await;
    assert_eq!(
        get_with(&other, LIST_CM, &[("X-Remote-User", "erin")])
            .await
            .0,
        401
    );
    // A plain client certificate cannot use the headers: it is its CN.
    let frank = client_with(
        &server,
        &Credential::cert(client_ca.client_cert(tmp.path(), "frank", None)),
    )
    .await;
    assert_eq!(
        get_with(
            &frank,
            LIST_CM,
            &[
                ("X-Remote-User", "erin"),
                ("X-Remote-Group", "system:masters")
            ]
        )
        .await,
        (403, forbidden_list("frank"))
    );
}
