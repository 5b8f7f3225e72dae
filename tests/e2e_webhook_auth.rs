//! Webhook token authentication (`--authentication-token-webhook-*`),
//! webhook authorization (`--authorization-mode=Webhook,...`) and the
//! `authentication.k8s.io/v1` TokenReview endpoint, against the real binary
//! and an HTTPS webhook server run by the test.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Server;
use common::auth::{TestCa, token_file};
use common::raw::{RawResponse, post_json_as as post, request_as};
use common::webhook::{Handler, Webhook};
use prost::Message;
use serde_json::{Value, json};

const LIST_CM: &str = "/api/v1/namespaces/default/configmaps";
const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const WHOAMI: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

fn unauthorized() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
}

/// The token webhook: `good-token` is webhook-alice, `revoked-token` an
/// error, anything else unknown.
fn token_handler() -> Handler {
    Arc::new(|review: &Value| {
        let token = review["spec"]["token"].as_str().unwrap_or_default();
        let status = match token {
            "good-token" => json!({"authenticated": true, "user": {
                "username": "webhook-alice", "uid": "42", "groups": ["webhook-team"],
                "extra": {"scopes": ["read", "write"]}}}),
            "revoked-token" => json!({"authenticated": false, "error": "token revoked"}),
            _ => json!({"authenticated": false}),
        };
        (
            200,
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": status}),
        )
    })
}

async fn whoami(server: &Server, token: &str) -> RawResponse {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    post(server, token, WHOAMI, &body).await
}

async fn get(server: &Server, token: &str, path: &str) -> RawResponse {
    request_as(server, token, "GET", path, &[], b"").await
}

#[tokio::test]
async fn token_webhook_authenticates_and_caches() {
    let tmp = tempfile::tempdir().expect("tmp");
    // The webhook only accepts the apiserver's client certificate.
    let client_ca = TestCa::new("webhook-client-ca");
    let client_cert = client_ca.client_cert(tmp.path(), "apiserver", None);
    let webhook = Webhook::start(token_handler(), Some(&client_ca)).await;
    let kubeconfig = webhook.kubeconfig(tmp.path(), "authn", None, Some(&client_cert));
    let tokens = token_file(tmp.path(), &["file-token,filed,7"]);
    let server = Server::start_in(
        &tmp.path().join("data"),
        common::free_port(),
        &[
            "--authentication-token-webhook-config-file",
            kubeconfig.to_str().expect("path"),
            "--authentication-token-webhook-cache-ttl",
            "3s",
            "--token-auth-file",
            tokens.to_str().expect("path"),
        ],
    )
    .await;

    // A good token: the webhook's user, uid, groups and extra.
    let resp = whoami(&server, "good-token").await;
    assert_eq!(resp.status, 201, "{}", resp.text());
    assert_eq!(
        resp.json()["status"]["userInfo"],
        json!({"username": "webhook-alice", "uid": "42",
            "groups": ["webhook-team", "system:authenticated"],
            "extra": {"scopes": ["read", "write"]}})
    );
    assert_eq!(webhook.calls(), 1);
    let (review, auth) = webhook.requests().remove(0);
    assert_eq!(
        review,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "metadata": {"creationTimestamp": null}, "spec": {"token": "good-token"},
            "status": {"user": {}}})
    );
    assert_eq!(auth, None);

    // Cached: no second call within the TTL.
    let resp = get(&server, "good-token", LIST_CM).await;
    assert_eq!(resp.status, 403);
    assert_eq!(
        resp.json()["message"],
        "configmaps is forbidden: User \"webhook-alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    assert_eq!(webhook.calls(), 1);

    // The token file is asked first: its tokens never reach the webhook.
    let resp = whoami(&server, "file-token").await;
    assert_eq!(resp.json()["status"]["userInfo"]["username"], "filed");
    assert_eq!(webhook.calls(), 1);

    // An unknown token: 401, and the refusal is cached too.
    let resp = get(&server, "unknown-token", "/version").await;
    assert_eq!((resp.status, resp.json()), (401, unauthorized()));
    assert_eq!(webhook.calls(), 2);
    let resp = get(&server, "unknown-token", LIST_CM).await;
    assert_eq!((resp.status, resp.json()), (401, unauthorized()));
    assert_eq!(webhook.calls(), 2);

    // A webhook error: 401, not cached.
    for calls in [3, 4] {
        let resp = get(&server, "revoked-token", "/version").await;
        assert_eq!((resp.status, resp.json()), (401, unauthorized()));
        assert_eq!(webhook.calls(), calls);
    }

    // After the TTL the webhook is asked again.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let resp = whoami(&server, "good-token").await;
    assert_eq!(resp.status, 201);
    assert_eq!(webhook.calls(), 5);

    // TokenReview runs the same authenticators (admin only).
    let admin = common::raw::token(&server);
    let review = |token: &str| {
        json!({"apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview", "spec": {"token": token}})
    };
    let resp = post(&server, &admin, TOKEN_REVIEWS, &review("good-token")).await;
    assert_eq!(resp.status, 201, "{}", resp.text());
    assert_eq!(
        resp.json(),
        json!({"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": null}, "spec": {"token": "good-token"},
            "status": {"authenticated": true, "user": {"username": "webhook-alice", "uid": "42",
                "groups": ["webhook-team", "system:authenticated"],
                "extra": {"scopes": ["read", "write"]}}}})
    );
    let resp = post(&server, &admin, TOKEN_REVIEWS, &review("file-token")).await;
    assert_eq!(
        resp.json()["status"],
        json!({"authenticated": true, "user": {"username": "filed", "uid": "7",
            "groups": ["system:authenticated"]}})
    );
    let resp = post(&server, &admin, TOKEN_REVIEWS, &review("unknown-token")).await;
    assert_eq!(resp.status, 201);
    assert_eq!(
        resp.json()["status"],
        json!({"user": {}, "error": "invalid bearer token"})
    );
    let resp = post(&server, &admin, TOKEN_REVIEWS, &review("revoked-token")).await;
    assert_eq!(
        resp.json()["status"],
        json!({"user": {}, "error": "token revoked"})
    );
    let resp = post(&server, &admin, TOKEN_REVIEWS, &review("")).await;
    assert_eq!(
        (resp.status, resp.json()["message"].clone()),
        (
            400,
            json!("token is required for TokenReview in authentication")
        )
    );
    let mut namespaced = review("good-token");
    namespaced["metadata"] = json!({"namespace": "default"});
    let resp = post(&server, &admin, TOKEN_REVIEWS, &namespaced).await;
    assert_eq!(
        (resp.status, resp.json()["message"].clone()),
        (400, json!("namespace is not allowed on this type: default"))
    );
    let resp = request_as(&server, &admin, "GET", TOKEN_REVIEWS, &[], b"").await;
    assert_eq!(resp.status, 405, "{}", resp.text());
    // Creating TokenReviews needs permission.
    let resp = post(&server, "good-token", TOKEN_REVIEWS, &review("file-token")).await;
    assert_eq!(
        (resp.status, resp.json()["message"].clone()),
        (
            403,
            json!(
                "tokenreviews.authentication.k8s.io is forbidden: User \"webhook-alice\" cannot create resource \"tokenreviews\" in API group \"authentication.k8s.io\" at the cluster scope"
            )
        )
    );

    // Protobuf in and out, as client-go sends it.
    use k8s_pb::api::authentication::v1 as pb;
    let raw = pb::TokenReview {
        spec: Some(pb::TokenReviewSpec {
            token: Some("good-token".into()),
            audiences: vec![],
        }),
        ..Default::default()
    }
    .encode_to_vec();
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some("authentication.k8s.io/v1".into()),
            kind: Some("TokenReview".into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.encode_to_vec());
    let proto = "application/vnd.kubernetes.protobuf";
    let resp = request_as(
        &server,
        &admin,
        "POST",
        TOKEN_REVIEWS,
        &[("Content-Type", proto), ("Accept", proto)],
        &body,
    )
    .await;
    assert_eq!(resp.status, 201, "{}", resp.text());
    assert_eq!(&resp.body[..4], b"k8s\0");
    let unknown =
        k8s_pb::apimachinery::pkg::runtime::Unknown::decode(&resp.body[4..]).expect("unknown");
    let answer =
        pb::TokenReview::decode(unknown.raw.unwrap_or_default().as_slice()).expect("TokenReview");
    let status = answer.status.unwrap_or_default();
    assert_eq!(status.authenticated, Some(true));
    let user = status.user.unwrap_or_default();
    assert_eq!(user.username.as_deref(), Some("webhook-alice"));
    assert_eq!(user.groups, ["webhook-team", "system:authenticated"]);
}

#[tokio::test]
async fn token_webhook_down_is_401() {
    let tmp = tempfile::tempdir().expect("tmp");
    let webhook = Webhook::start(token_handler(), None).await;
    let kubeconfig = webhook.kubeconfig(tmp.path(), "authn", Some("hook-secret"), None);
    let server = Server::start_in(
        &tmp.path().join("data"),
        common::free_port(),
        &[
            "--authentication-token-webhook-config-file",
            kubeconfig.to_str().expect("path"),
        ],
    )
    .await;
    let resp = whoami(&server, "good-token").await;
    assert_eq!(resp.status, 201);
    // The kubeconfig's token is sent to the webhook.
    assert_eq!(
        webhook.requests()[0].1.as_deref(),
        Some("Bearer hook-secret")
    );
    drop(webhook);
    // Cached answers still work; new tokens fail (after the retries).
    assert_eq!(whoami(&server, "good-token").await.status, 201);
    let resp = get(&server, "other-token", "/version").await;
    assert_eq!((resp.status, resp.json()), (401, unauthorized()));
}

/// The authorization webhook: allows `get` for everyone in
/// `webhook-readers`, denies anything on `secrets`, no opinion otherwise.
fn authz_handler() -> Handler {
    Arc::new(|review: &Value| {
        let spec = &review["spec"];
        let readers = spec["groups"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g == "webhook-readers"));
        let status = if spec["resourceAttributes"]["resource"] == "secrets" {
            json!({"allowed": false, "denied": true, "reason": "secrets are off limits"})
        } else if readers && spec["resourceAttributes"]["verb"] == "get" {
            json!({"allowed": true, "reason": "readers may read"})
        } else if readers && spec["nonResourceAttributes"]["path"] == "/healthz" {
            json!({"allowed": true})
        } else {
            json!({"allowed": false, "reason": "no opinion"})
        };
        (
            200,
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "status": status}),
        )
    })
}

#[tokio::test]
async fn webhook_authorization_in_a_union_with_rbac() {
    let tmp = tempfile::tempdir().expect("tmp");
    let webhook = Webhook::start(authz_handler(), None).await;
    let kubeconfig = webhook.kubeconfig(tmp.path(), "authz", Some("authz-secret"), None);
    let tokens = token_file(
        tmp.path(),
        &[
            "reader-token,reader,r1,\"webhook-readers\"",
            "nobody-token,nobody,n1",
            "editor-token,editor,e1",
        ],
    );
    let server = Server::start_in(
        &tmp.path().join("data"),
        common::free_port(),
        &[
            "--authorization-mode",
            "Webhook,RBAC",
            "--authorization-webhook-config-file",
            kubeconfig.to_str().expect("path"),
            "--authorization-webhook-cache-authorized-ttl",
            "2s",
            "--authorization-webhook-cache-unauthorized-ttl",
            "1s",
            "--token-auth-file",
            tokens.to_str().expect("path"),
        ],
    )
    .await;
    let admin = common::raw::token(&server);

    // RBAC grants editor everything on secrets and configmaps in default.
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "editor", "namespace": "default"},
        "rules": [{"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["*"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "editor", "namespace": "default"},
        "subjects": [{"kind": "User", "name": "editor", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "Role", "name": "editor", "apiGroup": "rbac.authorization.k8s.io"}});
    let rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default";
    assert_eq!(
        post(&server, &admin, &format!("{rbac}/roles"), &role)
            .await
            .status,
        201
    );
    assert_eq!(
        post(&server, &admin, &format!("{rbac}/rolebindings"), &binding)
            .await
            .status,
        201
    );
    // system:masters never reaches the webhook.
    assert_eq!(webhook.calls(), 0);

    // Allowed by the webhook.
    let cm = format!("{LIST_CM}/missing");
    let resp = get(&server, "reader-token", &cm).await;
    assert_eq!(resp.status, 404, "{}", resp.text());
    let (review, auth) = webhook.requests().remove(0);
    assert_eq!(auth.as_deref(), Some("Bearer authz-secret"));
    assert_eq!(
        review,
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "metadata": {"creationTimestamp": null},
            "spec": {"resourceAttributes": {"namespace": "default", "verb": "get",
                "version": "v1", "resource": "configmaps", "name": "missing"},
                "user": "reader", "groups": ["webhook-readers", "system:authenticated"],
                "uid": "r1"},
            "status": {"allowed": false}})
    );
    let calls = webhook.calls();
    // Cached for the authorized TTL.
    assert_eq!(get(&server, "reader-token", &cm).await.status, 404);
    assert_eq!(webhook.calls(), calls);
    // Non-resource requests send nonResourceAttributes.
    let resp = get(&server, "reader-token", "/healthz").await;
    assert_eq!(resp.status, 200);
    let (review, _) = webhook.requests().pop().expect("review");
    assert_eq!(
        review["spec"]["nonResourceAttributes"],
        json!({"path": "/healthz", "verb": "get"})
    );

    // No opinion from the webhook: RBAC decides.
    let resp = get(&server, "editor-token", LIST_CM).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    let resp = get(&server, "nobody-token", LIST_CM).await;
    assert_eq!(resp.status, 403);
    assert_eq!(
        resp.json(),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "configmaps is forbidden: User \"nobody\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\": no opinion",
            "reason": "Forbidden", "details": {"kind": "configmaps"}, "code": 403})
    );

    // Denied by the webhook: RBAC's grant is not consulted.
    let resp = get(
        &server,
        "editor-token",
        "/api/v1/namespaces/default/secrets",
    )
    .await;
    assert_eq!(resp.status, 403);
    assert_eq!(
        resp.json()["message"],
        "secrets is forbidden: User \"editor\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\": secrets are off limits"
    );
    // Denials are cached for the unauthorized TTL, then asked again.
    let calls = webhook.calls();
    assert_eq!(
        get(
            &server,
            "editor-token",
            "/api/v1/namespaces/default/secrets"
        )
        .await
        .status,
        403
    );
    assert_eq!(webhook.calls(), calls);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        get(
            &server,
            "editor-token",
            "/api/v1/namespaces/default/secrets"
        )
        .await
        .status,
        403
    );
    assert_eq!(webhook.calls(), calls + 1);

    // SubjectAccessReviews go through the union too.
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "editor", "resourceAttributes": {"verb": "get", "resource": "secrets",
            "namespace": "default"}}});
    let resp = post(
        &server,
        &admin,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        &sar,
    )
    .await;
    assert_eq!(
        resp.json()["status"],
        json!({"allowed": false, "denied": true, "reason": "secrets are off limits"})
    );

    // A webhook that cannot be reached: no opinion with an error; RBAC may
    // still allow, otherwise upstream's plain-text 500.
    drop(webhook);
    let resp = get(
        &server,
        "editor-token",
        "/api/v1/namespaces/default/configmaps/x",
    )
    .await;
    assert_eq!(resp.status, 404, "{}", resp.text());
    let resp = get(
        &server,
        "nobody-token",
        "/api/v1/namespaces/default/configmaps/y",
    )
    .await;
    assert_eq!(resp.status, 500);
    assert_eq!(
        resp.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    let text = resp.text();
    assert!(
        text.starts_with("Internal Server Error: &#34;/api/v1/namespaces/default/configmaps/y&#34;: Post &#34;https://127.0.0.1:"),
        "{text}"
    );
}

#[tokio::test]
async fn webhook_mode_flags_are_validated() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .args(["serve", "--authorization-mode", "Webhook,RBAC"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("authorization-mode Webhook's authorization config file not passed"),
        "{err}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_apiforge"))
        .args([
            "serve",
            "--authorization-webhook-config-file",
            "/nonexistent",
            "--authentication-token-webhook-version",
            "v2",
        ])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot specify --authorization-webhook-config-file without mode Webhook"),
        "{err}"
    );
    assert!(
        err.contains("--authentication-token-webhook-version \"v2\" is not supported"),
        "{err}"
    );
}

#[tokio::test]
async fn review_resources_are_in_discovery() {
    let server = Server::start().await;
    let admin = common::raw::token(&server);
    let resp = get(&server, &admin, "/apis/authentication.k8s.io/v1").await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(
        resp.json(),
        json!({"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "authentication.k8s.io/v1", "resources": [
                {"name": "selfsubjectreviews", "singularName": "selfsubjectreview",
                    "namespaced": false, "kind": "SelfSubjectReview", "verbs": ["create"]},
                {"name": "tokenreviews", "singularName": "tokenreview",
                    "namespaced": false, "kind": "TokenReview", "verbs": ["create"]}]})
    );
    let resp = get(&server, &admin, "/apis/authorization.k8s.io").await;
    assert_eq!(
        resp.json()["preferredVersion"],
        json!({"groupVersion": "authorization.k8s.io/v1", "version": "v1"})
    );
    let groups = get(&server, &admin, "/apis").await.json();
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .map(|g| g.iter().filter_map(|g| g["name"].as_str()).collect())
        .unwrap_or_default();
    assert!(names.contains(&"authentication.k8s.io"), "{names:?}");
    assert!(names.contains(&"authorization.k8s.io"), "{names:?}");
    let aggregated = request_as(
        &server,
        &admin,
        "GET",
        "/apis",
        &[(
            "Accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )],
        b"",
    )
    .await
    .json();
    let authz = aggregated["items"]
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .find(|i| i["metadata"]["name"] == "authorization.k8s.io")
        })
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        authz["versions"][0]["resources"][0],
        json!({"resource": "localsubjectaccessreviews",
            "responseKind": {"group": "authorization.k8s.io", "version": "v1",
                "kind": "LocalSubjectAccessReview"},
            "scope": "Namespaced", "singularResource": "localsubjectaccessreview",
            "verbs": ["create"]})
    );
    // kubectl resolves the review resources through discovery.
    let out = common::kubectl::Kubectl::new(&server).ok(&[
        "api-resources",
        "--api-group=authentication.k8s.io",
        "-o",
        "name",
    ]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "selfsubjectreviews.authentication.k8s.io",
            "tokenreviews.authentication.k8s.io"
        ]
    );
}
