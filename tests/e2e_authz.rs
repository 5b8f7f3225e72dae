//! Authorization against the real binary: the 403 Status of each mode
//! (AlwaysDeny, ABAC, RBAC) and impersonation.

mod common;

use common::Server;
use common::auth::{Credential, client_with, eventually, get, send, token_file};
use http::Method;
use serde_json::json;

const TOKENS: &[&str] = &[
    "alice-token,alice,1,dev",
    "bob-token,bob,2",
    "carol-token,carol,3,viewers",
    "dave-token,dave,4",
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

/// A request of the RBAC matrix: client, user name, method, path, body and
/// the expected status code.
type Case<'a> = (
    &'a kube::Client,
    &'a str,
    Method,
    String,
    Option<serde_json::Value>,
    u16,
);

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

fn binding(
    kind: &str,
    name: &str,
    role_kind: &str,
    role: &str,
    subject: serde_json::Value,
) -> serde_json::Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [subject],
    })
}

fn user(name: &str) -> serde_json::Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name})
}

fn role(kind: &str, name: &str, rules: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "rules": rules})
}

fn configmap(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
}

async fn created(client: &kube::Client, path: &str, body: serde_json::Value) {
    let (code, msg) = send(client, Method::POST, path, Some(body)).await;
    assert_eq!(code, 200, "POST {path}: {msg}");
}

/// POSTs `body` until it is created (200), for up to 10 s while `pending`
/// says the authorizer has not seen a change it depends on yet.
async fn created_once_visible(
    client: &kube::Client,
    path: &str,
    body: serde_json::Value,
    pending: impl Fn(u16, &str) -> bool,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (code, msg) = send(client, Method::POST, path, Some(body.clone())).await;
        if pending(code, &msg) && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        }
        assert_eq!(code, 200, "POST {path}: {msg}");
        return;
    }
}

#[tokio::test]
async fn rbac_matrix_escalation_and_impersonation() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = start(&[], &tmp).await;
    let admin = server.client().await;

    // The bootstrap policy is served as objects.
    let (code, body) = get(&admin, &format!("{RBAC}/clusterroles/cluster-admin")).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        get(
            &admin,
            &format!("{RBAC}/clusterrolebindings/system:discovery")
        )
        .await
        .0,
        200
    );

    for ns in ["dev", "prod"] {
        created(
            &admin,
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await;
    }
    created(
        &admin,
        "/api/v1/namespaces/prod/configmaps",
        configmap("one"),
    )
    .await;
    created(
        &admin,
        "/api/v1/namespaces/prod/configmaps",
        configmap("two"),
    )
    .await;
    // alice edits dev; the group viewers views everything; bob reads one
    // configmap in prod and manages roles there; dave reads flunders.
    created(
        &admin,
        &format!("{RBAC}/namespaces/dev/rolebindings"),
        binding(
            "RoleBinding",
            "alice-edit",
            "ClusterRole",
            "edit",
            user("alice"),
        ),
    )
    .await;
    created(
        &admin,
        &format!("{RBAC}/clusterrolebindings"),
        binding(
            "ClusterRoleBinding",
            "viewers",
            "ClusterRole",
            "view",
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "viewers"}),
        ),
    )
    .await;
    created(&admin, &format!("{RBAC}/namespaces/prod/roles"), role("Role", "bob", json!([
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["one"], "verbs": ["get"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "update", "get"]}
    ]))).await;
    created(
        &admin,
        &format!("{RBAC}/namespaces/prod/rolebindings"),
        binding("RoleBinding", "bob", "Role", "bob", user("bob")),
    )
    .await;
    created(&admin, &format!("{RBAC}/clusterroles"), role("ClusterRole", "flunder-reader", json!([
        {"apiGroups": ["wardle.example.com"], "resources": ["flunders"], "verbs": ["get", "list", "watch"]},
        {"nonResourceURLs": ["/openapi/*"], "verbs": ["get"]}
    ]))).await;
    created(
        &admin,
        &format!("{RBAC}/clusterrolebindings"),
        binding(
            "ClusterRoleBinding",
            "dave",
            "ClusterRole",
            "flunder-reader",
            user("dave"),
        ),
    )
    .await;

    let alice = as_user(&server, "alice-token").await;
    let bob = as_user(&server, "bob-token").await;
    let carol = as_user(&server, "carol-token").await;
    let dave = as_user(&server, "dave-token").await;
    let flunders = "/apis/wardle.example.com/v1beta1/namespaces/default/flunders";

    // Wait until the server has seen the last binding.
    assert_eq!(eventually(&dave, flunders, 200).await.0, 200);

    // user × verb × resource × namespace
    let cases: Vec<Case<'_>> = vec![
        (
            &alice,
            "alice",
            Method::GET,
            "/api/v1/namespaces/dev/configmaps".into(),
            None,
            200,
        ),
        (
            &alice,
            "alice",
            Method::POST,
            "/api/v1/namespaces/dev/configmaps".into(),
            Some(configmap("a")),
            200,
        ),
        (
            &alice,
            "alice",
            Method::GET,
            "/api/v1/namespaces/dev/secrets".into(),
            None,
            200,
        ),
        (
            &alice,
            "alice",
            Method::GET,
            "/api/v1/namespaces/prod/configmaps".into(),
            None,
            403,
        ),
        (
            &alice,
            "alice",
            Method::GET,
            "/api/v1/namespaces/dev".into(),
            None,
            403,
        ),
        (
            &alice,
            "alice",
            Method::POST,
            format!("{RBAC}/namespaces/dev/roles"),
            Some(role("Role", "r", json!([]))),
            403,
        ),
        (
            &carol,
            "carol",
            Method::GET,
            "/api/v1/namespaces/dev/configmaps".into(),
            None,
            200,
        ),
        (
            &carol,
            "carol",
            Method::GET,
            "/api/v1/namespaces/prod/configmaps/one".into(),
            None,
            200,
        ),
        (
            &carol,
            "carol",
            Method::GET,
            "/api/v1/namespaces/dev".into(),
            None,
            200,
        ),
        (
            &carol,
            "carol",
            Method::GET,
            "/api/v1/namespaces/dev/secrets".into(),
            None,
            403,
        ),
        (
            &carol,
            "carol",
            Method::POST,
            "/api/v1/namespaces/dev/configmaps".into(),
            Some(configmap("c")),
            403,
        ),
        (
            &carol,
            "carol",
            Method::DELETE,
            "/api/v1/namespaces/prod/configmaps/one".into(),
            None,
            403,
        ),
        (
            &bob,
            "bob",
            Method::GET,
            "/api/v1/namespaces/prod/configmaps/one".into(),
            None,
            200,
        ),
        (
            &bob,
            "bob",
            Method::GET,
            "/api/v1/namespaces/prod/configmaps/two".into(),
            None,
            403,
        ),
        (
            &bob,
            "bob",
            Method::GET,
            "/api/v1/namespaces/prod/configmaps".into(),
            None,
            403,
        ),
        (&dave, "dave", Method::GET, flunders.into(), None, 200),
        (&dave, "dave", Method::GET, "/openapi/v3".into(), None, 200),
        (
            &dave,
            "dave",
            Method::POST,
            flunders.into(),
            Some(
                json!({"apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder", "metadata": {"name": "f"}}),
            ),
            403,
        ),
        (
            &dave,
            "dave",
            Method::GET,
            "/api/v1/namespaces/default/configmaps".into(),
            None,
            403,
        ),
    ];
    for (client, name, method, path, body, want) in cases {
        let (code, msg) = send(client, method.clone(), &path, body).await;
        assert_eq!(code, want, "{name} {method} {path}: {msg}");
        if want == 403 {
            assert!(msg.contains(&format!("User \"{name}\" cannot ")), "{msg}");
        }
    }
    assert_eq!(
        get(&alice, "/api/v1/namespaces/prod/configmaps").await.1,
        "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"prod\""
    );
    assert_eq!(
        get(&alice, "/api/v1/namespaces/dev").await.1,
        "namespaces \"dev\" is forbidden: User \"alice\" cannot get resource \"namespaces\" in API group \"\" at the cluster scope"
    );

    // Escalation: bob may write roles in prod, but only with rules he holds.
    let roles = format!("{RBAC}/namespaces/prod/roles");
    let (code, msg) = send(&bob, Method::POST, &roles, Some(role("Role", "subset", json!([
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["one"], "verbs": ["get"]}
    ])))).await;
    assert_eq!(code, 200, "{msg}");
    let (code, msg) = send(&bob, Method::POST, &roles, Some(role("Role", "too-much", json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "delete"], "resourceNames": ["one"]}
    ])))).await;
    assert_eq!(
        (code, msg.as_str()),
        (
            403,
            "roles.rbac.authorization.k8s.io \"too-much\" is forbidden: user \"bob\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"configmaps\"], ResourceNames:[\"one\"], Verbs:[\"delete\"]}"
        )
    );
    let bindings = format!("{RBAC}/namespaces/prod/rolebindings");
    let (code, msg) = send(
        &bob,
        Method::POST,
        &bindings,
        Some(binding(
            "RoleBinding",
            "carol-edit",
            "ClusterRole",
            "edit",
            user("carol"),
        )),
    )
    .await;
    assert_eq!(code, 403, "{msg}");
    assert!(
        msg.contains("is attempting to grant RBAC permissions not currently held"),
        "{msg}"
    );
    // The authorizer learns of the new Role through its watch, as
    // kube-apiserver's informers do: until then the Role "does not exist".
    created_once_visible(
        &bob,
        &bindings,
        binding(
            "RoleBinding",
            "carol-subset",
            "Role",
            "subset",
            user("carol"),
        ),
        |code, msg| code == 403 && msg.ends_with("it does not exist"),
    )
    .await;
    // With `bind` on the edit ClusterRole, bob may bind it.
    created(&admin, &roles, role("Role", "bind-edit", json!([
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "resourceNames": ["edit"], "verbs": ["bind"]}
    ]))).await;
    created(
        &admin,
        &bindings,
        binding(
            "RoleBinding",
            "bob-bind-edit",
            "Role",
            "bind-edit",
            user("bob"),
        ),
    )
    .await;
    created_once_visible(
        &bob,
        &bindings,
        binding(
            "RoleBinding",
            "carol-edit",
            "ClusterRole",
            "edit",
            user("carol"),
        ),
        |code, _| code != 200,
    )
    .await;
    // The roleRef of a binding cannot change.
    let (code, msg) = send(
        &admin,
        Method::PATCH,
        &format!("{bindings}/carol-edit"),
        Some(json!({"roleRef": {"name": "view"}})),
    )
    .await;
    assert_eq!(code, 422, "{msg}");

    // Aggregation: a ClusterRole labelled aggregate-to-view extends view
    // (and so edit and admin), in evaluation and in the stored object.
    let flunders_all = "/apis/wardle.example.com/v1beta1/flunders";
    assert_eq!(get(&carol, flunders_all).await.0, 403);
    let mut agg = role(
        "ClusterRole",
        "flunders-view",
        json!([
            {"apiGroups": ["wardle.example.com"], "resources": ["flunders"], "verbs": ["get", "list", "watch"]}
        ]),
    );
    agg["metadata"]["labels"] = json!({"rbac.authorization.k8s.io/aggregate-to-view": "true"});
    created(&admin, &format!("{RBAC}/clusterroles"), agg).await;
    assert_eq!(eventually(&carol, flunders_all, 200).await.0, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, body) = get(&admin, &format!("{RBAC}/clusterroles/admin")).await;
        let admin_role: serde_json::Value = serde_json::from_str(&body).expect("json");
        let rules = admin_role["rules"].as_array().cloned().unwrap_or_default();
        if rules.iter().any(|r| r["resources"] == json!(["flunders"])) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "admin never aggregated: {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // Impersonation under RBAC: alice may impersonate carol only.
    created(&admin, &format!("{RBAC}/clusterroles"), role("ClusterRole", "impersonate-carol", json!([
        {"apiGroups": [""], "resources": ["users"], "resourceNames": ["carol"], "verbs": ["impersonate"]}
    ]))).await;
    created(
        &admin,
        &format!("{RBAC}/clusterrolebindings"),
        binding(
            "ClusterRoleBinding",
            "alice-impersonates",
            "ClusterRole",
            "impersonate-carol",
            user("alice"),
        ),
    )
    .await;
    let as_carol = client_with(
        &server,
        &Credential::token("alice-token").impersonating("carol", &[]),
    )
    .await;
    // carol (without the viewers group, which was not impersonated) has carol-edit in prod now.
    assert_eq!(
        eventually(&as_carol, "/api/v1/namespaces/prod/configmaps", 200)
            .await
            .0,
        200
    );
    assert_eq!(
        get(&as_carol, "/api/v1/namespaces/dev/configmaps").await.1,
        "configmaps is forbidden: User \"carol\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"dev\""
    );
    let as_dave = client_with(
        &server,
        &Credential::token("alice-token").impersonating("dave", &[]),
    )
    .await;
    assert_eq!(
        get(&as_dave, flunders).await,
        (403, "users \"dave\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope".to_string())
    );
}

#[tokio::test]
async fn access_reviews_and_kubectl_auth() {
    let tmp = tempfile::tempdir().expect("tmp");
    let server = start(&[], &tmp).await;
    let admin = server.client().await;
    created(
        &admin,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev"}}),
    )
    .await;
    created(
        &admin,
        &format!("{RBAC}/namespaces/dev/rolebindings"),
        binding(
            "RoleBinding",
            "alice-edit",
            "ClusterRole",
            "edit",
            user("alice"),
        ),
    )
    .await;
    let alice = as_user(&server, "alice-token").await;
    assert_eq!(
        eventually(&alice, "/api/v1/namespaces/dev/configmaps", 200)
            .await
            .0,
        200
    );

    // JSON SelfSubjectAccessReview (allowed for every authenticated user).
    let review = |ns: &str| {
        json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": ns, "verb": "create", "resource": "configmaps"}}
        })
    };
    let ssar = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let (code, body) = send(&alice, Method::POST, ssar, Some(review("dev"))).await;
    assert_eq!(code, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(answer["kind"], "SelfSubjectAccessReview");
    assert_eq!(answer["status"]["allowed"], true);
    assert_eq!(
        answer["status"]["reason"],
        "RBAC: allowed by RoleBinding \"alice-edit/dev\" of ClusterRole \"edit\" to User \"alice\""
    );
    let (_, body) = send(&alice, Method::POST, ssar, Some(review("prod"))).await;
    let answer: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(answer["status"]["allowed"], false);
    // Neither attribute set: 422.
    let (code, _) = send(&alice, Method::POST, ssar, Some(json!({"spec": {}}))).await;
    assert_eq!(code, 422);
    // SubjectAccessReview needs its own permission; the admin has it.
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "alice", "resourceAttributes": {"namespace": "dev", "verb": "delete", "resource": "secrets"}}});
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    assert_eq!(
        send(&alice, Method::POST, path, Some(sar.clone())).await.0,
        403
    );
    let (code, body) = send(&admin, Method::POST, path, Some(sar)).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).expect("json")["status"]["allowed"],
        true
    );

    // kubectl 1.32+ sends these reviews as protobuf.
    let kubectl = common::kubectl::Kubectl::new(&server);
    let can_i = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--token", "alice-token"]);
        let out = kubectl.run(&all);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(can_i(&["create", "configmaps", "-n", "dev"]), "yes");
    assert_eq!(can_i(&["create", "configmaps", "-n", "default"]), "no");
    assert_eq!(can_i(&["get", "/version"]), "yes");
    assert_eq!(can_i(&["create", "roles", "-n", "dev"]), "no");
    let list = kubectl.ok(&[
        "auth",
        "can-i",
        "--list",
        "-n",
        "dev",
        "--token",
        "alice-token",
    ]);
    assert!(list.lines().any(|l| l.starts_with("configmaps ")), "{list}");
    let whoami = kubectl.ok(&["auth", "whoami", "-o", "json", "--token", "alice-token"]);
    let who: serde_json::Value = serde_json::from_str(&whoami).expect("whoami json");
    assert_eq!(who["status"]["userInfo"]["username"], "alice");
    assert_eq!(who["status"]["userInfo"]["uid"], "1");
    assert_eq!(
        who["status"]["userInfo"]["groups"],
        json!(["dev", "system:authenticated"])
    );
    // Impersonated by the admin.
    let whoami = kubectl.ok(&[
        "auth",
        "whoami",
        "-o",
        "json",
        "--as",
        "bob",
        "--as-group",
        "team",
    ]);
    let who: serde_json::Value = serde_json::from_str(&whoami).expect("whoami json");
    assert_eq!(who["status"]["userInfo"]["username"], "bob");
    assert_eq!(
        who["status"]["userInfo"]["groups"],
        json!(["team", "system:authenticated"])
    );
}
