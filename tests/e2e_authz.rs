//! Authorization against the real binary: the 403 Status of each mode
//! (AlwaysDeny, ABAC, RBAC) and impersonation.

mod common;

use common::Server;
use common::auth::{Credential, client_with, get, token_file};

const TOKENS: &[&str] = &[
    "alice-token,alice,1,dev",
    "bob-token,bob,2",
    "carol-token,carol,3",
];

async fn start(extra: &[&str], tmp: &tempfile::TempDir) -> Server {
    let tokens = token_file(tmp.path(), TOKENS);
    let mut args = vec!["--token-auth-file", tokens.to_str().expect("path")];
    args.extend_from_slice(extra);
    Server::start_in(&tmp.path().join("data"), common::free_port(), &args).await
}

async fn as_user(server: &Server, token: &str) -> kube::Client {
    client_with(server, &Credential::token(token)).await
}

#[tokio::test]
async fn always_deny() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = start(&["--authorization-mode=AlwaysDeny"], &tmp).await;
    let alice = as_user(&server, "alice-token").await;
    assert_eq!(
        get(&alice, "/apis/wardle.example.com/v1beta1/namespaces/default/flunders").await,
        (
            403,
            "flunders.wardle.example.com is forbidden: User \"alice\" cannot list resource \"flunders\" in API group \"wardle.example.com\" in the namespace \"default\": Everything is forbidden.".to_string()
        )
    );
    assert_eq!(
        get(&alice, "/api/v1/namespaces/kube-system").await,
        (
            403,
            "namespaces \"kube-system\" is forbidden: User \"alice\" cannot get resource \"namespaces\" in API group \"\" at the cluster scope: Everything is forbidden.".to_string()
        )
    );
    assert_eq!(
        get(&alice, "/version").await,
        (
            403,
            "forbidden: User \"alice\" cannot get path \"/version\": Everything is forbidden."
                .to_string()
        )
    );
    // system:masters is always allowed.
    assert_eq!(
        get(&server.client().await, "/api/v1/namespaces").await.0,
        200
    );
}

#[tokio::test]
async fn abac_policy_file() {
    let tmp = tempfile::tempdir().expect("tmp");
    let policy = tmp.path().join("policy.jsonl");
    let line = |spec: &str| {
        format!(
            "{{\"apiVersion\":\"abac.authorization.kubernetes.io/v1beta1\",\"kind\":\"Policy\",\"spec\":{spec}}}"
        )
    };
    std::fs::write(
        &policy,
        [
            "# alice reads configmaps in dev; the group dev may read /version".to_string(),
            line(r#"{"user":"alice","namespace":"dev","resource":"configmaps","apiGroup":"*","readonly":true}"#),
            line(r#"{"group":"dev","nonResourcePath":"/version"}"#),
            line(r#"{"user":"bob","namespace":"*","resource":"*","apiGroup":"*"}"#),
            line(r#"{"user":"bob","nonResourcePath":"*"}"#),
        ]
        .join("\n"),
    )
    .expect("policy");
    let server = start(
        &[
            "--authorization-mode=ABAC",
            "--authorization-policy-file",
            policy.to_str().expect("path"),
        ],
        &tmp,
    )
    .await;
    let admin = server.client().await;
    let create = |client: kube::Client, ns: &'static str| async move {
        let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}});
        let req = http::Request::post(format!("/api/v1/namespaces/{ns}/configmaps"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).expect("json"))
            .expect("request");
        match client.request_text(req).await {
            Ok(_) => (201, String::new()),
            Err(kube::Error::Api(s)) => (s.code, s.message),
            Err(e) => (0, e.to_string()),
        }
    };
    assert_eq!(
        create(admin.clone(), "dev").await.0,
        404,
        "namespace dev does not exist yet"
    );
    let ns =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev"}});
    let req = http::Request::post("/api/v1/namespaces")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&ns).expect("json"))
        .expect("request");
    admin.request_text(req).await.expect("create namespace");

    let alice = as_user(&server, "alice-token").await;
    assert_eq!(
        get(&alice, "/api/v1/namespaces/dev/configmaps").await.0,
        200
    );
    assert_eq!(get(&alice, "/version").await.0, 200);
    assert_eq!(
        get(&alice, "/api/v1/namespaces/default/configmaps").await,
        (
            403,
            "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\": No policy matched.".to_string()
        )
    );
    assert_eq!(
        create(alice.clone(), "dev").await,
        (
            403,
            "configmaps is forbidden: User \"alice\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"dev\": No policy matched.".to_string()
        )
    );
    let bob = as_user(&server, "bob-token").await;
    assert_eq!(create(bob.clone(), "dev").await.0, 201);
    assert_eq!(get(&bob, "/apis").await.0, 200);
    let carol = as_user(&server, "carol-token").await;
    assert_eq!(get(&carol, "/version").await.0, 403);
}

#[tokio::test]
async fn impersonation() {
    let tmp = tempfile::tempdir().expect("tmp");
    let policy = tmp.path().join("policy.jsonl");
    let line = |spec: &str| {
        format!(
            "{{\"apiVersion\":\"abac.authorization.kubernetes.io/v1beta1\",\"kind\":\"Policy\",\"spec\":{spec}}}"
        )
    };
    std::fs::write(
        &policy,
        [
            // alice may impersonate users (not groups); bob reads configmaps everywhere.
            line(r#"{"user":"alice","namespace":"*","resource":"users","apiGroup":"*"}"#),
            line(r#"{"user":"bob","namespace":"*","resource":"configmaps","apiGroup":"*","readonly":true}"#),
        ]
        .join("\n"),
    )
    .expect("policy");
    let server = start(
        &[
            "--authorization-mode=ABAC",
            "--authorization-policy-file",
            policy.to_str().expect("path"),
        ],
        &tmp,
    )
    .await;
    let path = "/api/v1/namespaces/default/configmaps";

    let alice = as_user(&server, "alice-token").await;
    assert_eq!(get(&alice, path).await.0, 403);
    let alice_as_bob = client_with(
        &server,
        &Credential::token("alice-token").impersonating("bob", &[]),
    )
    .await;
    assert_eq!(get(&alice_as_bob, path).await.0, 200);
    // Acting as carol, alice has carol's (no) permissions.
    let alice_as_carol = client_with(
        &server,
        &Credential::token("alice-token").impersonating("carol", &[]),
    )
    .await;
    assert_eq!(
        get(&alice_as_carol, path).await,
        (
            403,
            "configmaps is forbidden: User \"carol\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\": No policy matched.".to_string()
        )
    );
    // Groups need their own permission.
    let alice_as_group = client_with(
        &server,
        &Credential::token("alice-token").impersonating("bob", &["system:masters"]),
    )
    .await;
    assert_eq!(
        get(&alice_as_group, path).await,
        (
            403,
            "groups \"system:masters\" is forbidden: User \"alice\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope: No policy matched.".to_string()
        )
    );
    // bob may not impersonate at all.
    let bob_as_alice = client_with(
        &server,
        &Credential::token("bob-token").impersonating("alice", &[]),
    )
    .await;
    assert_eq!(
        get(&bob_as_alice, path).await,
        (
            403,
            "users \"alice\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope: No policy matched.".to_string()
        )
    );
    // The admin (system:masters) may impersonate anyone, and then is that user.
    let admin_token = common::auth::admin_token(&server);
    let admin_as_carol = client_with(
        &server,
        &Credential::token(&admin_token).impersonating("carol", &[]),
    )
    .await;
    assert_eq!(get(&admin_as_carol, path).await.0, 403);
}
