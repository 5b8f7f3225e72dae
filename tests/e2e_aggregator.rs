//! The aggregation layer, as upstream's aggregator e2e test runs
//! sample-apiserver behind kube-apiserver: server A does not serve wardle
//! (`--runtime-config` turns it off), server B (the same binary) serves it
//! and trusts A's front-proxy client certificate; an APIService in A sends
//! `wardle.example.com/v1beta1` to B through a Service.
//!
//! Expected values come from kube-aggregator: condition reasons and
//! messages (`remote_available_controller.go`), the proxy's plain-text
//! `service unavailable` (`handler_proxy.go`), `ValidateAPIService`.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Server;
use common::auth::TestCa;
use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, PostParams, WatchEvent, WatchParams,
};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

const WARDLE_OFF: &str =
    "--runtime-config=wardle.example.com/v1beta1=false,wardle.example.com/v1alpha1=false";

fn flunders(client: kube::Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("wardle.example.com", "v1beta1", "Flunder");
    Api::namespaced_with(
        client,
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, "flunders"),
    )
}

fn flunder(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "wardle.example.com/v1beta1", "kind": "Flunder",
        "metadata": {"name": name}, "spec": {},
    }))
    .expect("flunder")
}

fn dynamic(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// A client of `server`'s admin without kube-rs's default retries (it
/// retries 503 answers up to 15 times with a backoff of up to 1000 s; these
/// tests look at the 503s themselves).
async fn client_of(server: &Server) -> kube::Client {
    server.client_without_retries().await
}

/// GET `path` as the client's user: status and body.
async fn get(client: &kube::Client, path: &str) -> (u16, String) {
    common::auth::get(client, path).await
}

/// Writes `obj` (any kind) with a server-side apply through `client`.
async fn apply(client: &kube::Client, obj: Value) {
    let (group, version) = match obj["apiVersion"]
        .as_str()
        .expect("apiVersion")
        .split_once('/')
    {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (
            String::new(),
            obj["apiVersion"].as_str().expect("v").to_string(),
        ),
    };
    let kind = obj["kind"].as_str().expect("kind").to_string();
    let plural = format!("{}s", kind.to_lowercase());
    let plural = match kind.as_str() {
        "Endpoints" => "endpoints".to_string(),
        _ => plural,
    };
    let ar = dynamic(&group, &version, &kind, &plural);
    let name = obj["metadata"]["name"].as_str().expect("name").to_string();
    let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let patch = kube::api::Patch::Apply(obj);
    api.patch(
        &name,
        &kube::api::PatchParams::apply("test").force(),
        &patch,
    )
    .await
    .unwrap_or_else(|e| panic!("apply {kind} {name}: {e}"));
}

fn api_services(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &dynamic("apiregistration.k8s.io", "v1", "APIService", "apiservices"),
    )
}

/// The `Available` condition of APIService `name` once `pred` holds (30 s).
async fn wait_available(
    client: &kube::Client,
    name: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = Value::Null;
    while Instant::now() < deadline {
        if let Ok(obj) = api_services(client).get(name).await {
            let v = serde_json::to_value(&obj).expect("json");
            let cond = v["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Available").cloned())
                .unwrap_or(Value::Null);
            if pred(&cond) {
                return cond;
            }
            last = cond;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("APIService {name} never became {what}; last condition: {last}");
}

/// Retries `check` (a GET of `path`) until it gives `code` (30 s).
async fn eventually_code(client: &kube::Client, path: &str, code: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = (0, String::new());
    while Instant::now() < deadline {
        last = get(client, path).await;
        if last.0 == code {
            return last.1;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("GET {path}: wanted {code}, last got {} {}", last.0, last.1);
}

/// The certificates of one set-up: the front-proxy CA with A's client
/// certificate, and B's serving certificate for `api.wardle-system.svc`.
struct Certs {
    front_proxy_ca: std::path::PathBuf,
    proxy_client: (std::path::PathBuf, std::path::PathBuf),
    serving_ca: TestCa,
    serving: (std::path::PathBuf, std::path::PathBuf),
}

fn certs(dir: &Path) -> Certs {
    let host = common::host_address();
    let fp = TestCa::new("front-proxy-ca");
    let front_proxy_ca = fp.write(dir, "front-proxy-ca.crt");
    let proxy_client = fp.client_cert(dir, "front-proxy-client", None);
    let serving_ca = TestCa::new("wardle-serving-ca");
    let serving = serving_ca.server_cert(
        dir,
        "wardle",
        &["api.wardle-system.svc", "localhost", "127.0.0.1", &host],
    );
    Certs {
        front_proxy_ca,
        proxy_client,
        serving_ca,
        serving,
    }
}

/// Server B: serves wardle with `certs`' serving certificate and trusts
/// the front-proxy CA for request-header authentication.
async fn start_b(dir: &Path, port: u16, certs: &Certs) -> Server {
    start_b_on(dir, port, certs, "127.0.0.1").await
}

/// [`start_b`] listening on `address`.
async fn start_b_on(dir: &Path, port: u16, certs: &Certs, address: &str) -> Server {
    Server::start_in(
        dir,
        port,
        &[
            "--bind-address",
            address,
            "--tls-cert-file",
            certs.serving.0.to_str().expect("path"),
            "--tls-private-key-file",
            certs.serving.1.to_str().expect("path"),
            "--requestheader-client-ca-file",
            certs.front_proxy_ca.to_str().expect("path"),
            "--requestheader-allowed-names=front-proxy-client",
        ],
    )
    .await
}

/// Server A: the aggregator, without wardle.
async fn start_a(dir: &Path, certs: &Certs, extra: &[&str]) -> Server {
    let mut args = vec![
        WARDLE_OFF,
        "--proxy-client-cert-file",
        certs.proxy_client.0.to_str().expect("path"),
        "--proxy-client-key-file",
        certs.proxy_client.1.to_str().expect("path"),
    ];
    args.extend_from_slice(extra);
    Server::start_in(dir, common::free_port(), &args).await
}

fn api_service(port: u16, ca_pem: &str) -> Value {
    use base64::Engine;
    json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1beta1.wardle.example.com"},
        "spec": {
            "group": "wardle.example.com", "version": "v1beta1",
            "groupPriorityMinimum": 2000, "versionPriority": 200,
            "service": {"namespace": "wardle-system", "name": "api", "port": port},
            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem),
        },
    })
}

/// The Service `wardle-system/api`: `type: ExternalName` to localhost.
fn external_name_service() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "api", "namespace": "wardle-system"},
        "spec": {"type": "ExternalName", "externalName": "localhost"},
    })
}

async fn namespace(client: &kube::Client, name: &str) {
    apply(
        client,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .await;
}

#[tokio::test]
async fn a_group_served_by_another_server_is_reached_through_the_aggregator() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let certs = certs(tmp.path());
    let b_port = common::free_port();
    let mut b = start_b(&tmp.path().join("b"), b_port, &certs).await;
    let audit_policy = tmp.path().join("audit-policy.yaml");
    std::fs::write(
        &audit_policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )
    .expect("policy");
    let audit_log = tmp.path().join("audit.log");
    let a = start_a(
        &tmp.path().join("a"),
        &certs,
        &[
            "--audit-policy-file",
            audit_policy.to_str().expect("path"),
            "--audit-log-path",
            audit_log.to_str().expect("path"),
        ],
    )
    .await;
    let client = client_of(&a).await;

    // A does not serve wardle itself.
    let (code, _) = get(&client, "/apis/wardle.example.com").await;
    assert_eq!(code, 404, "A must not serve wardle before the APIService");
    // Its own group versions have local APIServices.
    let local = wait_available(&client, "v1.rbac.authorization.k8s.io", "local", |c| {
        c["status"] == "True"
    })
    .await;
    assert_eq!(local["reason"], "Local");
    assert_eq!(local["message"], "Local APIServices are always available");
    assert!(
        api_services(&client)
            .get("v1beta1.wardle.example.com")
            .await
            .is_err()
    );

    // Register B.
    namespace(&client, "wardle-system").await;
    apply(&client, external_name_service()).await;
    apply(&client, api_service(b_port, &certs.serving_ca.cert_pem)).await;
    let cond = wait_available(&client, "v1beta1.wardle.example.com", "available", |c| {
        c["status"] == "True"
    })
    .await;
    assert_eq!(cond["reason"], "Passed");
    assert_eq!(cond["message"], "all checks passed");

    // Discovery through A lists B's group.
    let body = eventually_code(&client, "/apis/wardle.example.com", 200).await;
    let group: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(group["preferredVersion"]["version"], "v1beta1");
    let kubectl = common::kubectl::Kubectl::new(&a);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = kubectl.run(&["api-resources", "--api-group=wardle.example.com"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text.contains("flunders") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl api-resources via A never listed flunders: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let index = eventually_code(&client, "/openapi/v3", 200).await;
    assert!(index.contains("apis/wardle.example.com/v1beta1"), "{index}");
    let (code, v3) = get(&client, "/openapi/v3/apis/wardle.example.com/v1beta1").await;
    assert_eq!(code, 200);
    assert!(
        v3.contains("io.k8s.sample-apiserver.pkg.apis.wardle.v1beta1.Flunder"),
        "{v3}"
    );
    let (code, v2) = get(&client, "/openapi/v2").await;
    assert_eq!(code, 200);
    assert!(
        v2.contains("/apis/wardle.example.com/v1beta1/namespaces/{namespace}/flunders"),
        "the backend's paths are in A's OpenAPI v2"
    );
    let (code, resources) = get(&client, "/apis/wardle.example.com/v1beta1").await;
    assert_eq!(code, 200);
    assert!(resources.contains("\"flunders\""), "{resources}");

    // CRUD and watch through A; the objects live in B.
    namespace(&client, "demo").await;
    let b_client = b.client().await;
    namespace(&b_client, "demo").await;
    let via_a = flunders(client.clone(), "demo");
    let mut watch = via_a
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch through A")
        .boxed();
    let created = via_a
        .create(&PostParams::default(), &flunder("through-a"))
        .await
        .expect("create through A");
    assert_eq!(created.metadata.name.as_deref(), Some("through-a"));
    let event = tokio::time::timeout(Duration::from_secs(10), watch.try_next())
        .await
        .expect("event in time")
        .expect("watch ok")
        .expect("watch open");
    match event {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("through-a")),
        other => panic!("expected ADDED, got {other:?}"),
    }
    let in_b = flunders(b_client.clone(), "demo")
        .get("through-a")
        .await
        .expect("stored in B");
    assert_eq!(in_b.metadata.uid, created.metadata.uid);
    let listed = via_a.list(&Default::default()).await.expect("list");
    assert_eq!(listed.items.len(), 1);
    via_a
        .delete("through-a", &DeleteParams::default())
        .await
        .expect("delete through A");

    // A's audit log records the proxied requests.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(&audit_log).unwrap_or_default();
        if log.contains("/apis/wardle.example.com/v1beta1/namespaces/demo/flunders") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no audit event of the proxied create"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // B stops: the APIService becomes unavailable, A answers 503 for it and
    // keeps serving its own groups.
    b.kill();
    let (code, body) = get(
        &client,
        "/apis/wardle.example.com/v1beta1/namespaces/demo/flunders",
    )
    .await;
    assert_eq!(code, 503, "{body}");
    let cond = wait_available(&client, "v1beta1.wardle.example.com", "unavailable", |c| {
        c["status"] == "False"
    })
    .await;
    assert_eq!(cond["reason"], "FailedDiscoveryCheck");
    let message = cond["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "failing or missing response from https://localhost:{b_port}/apis/wardle.example.com/v1beta1: "
        )),
        "{message}"
    );
    let body = eventually_code(
        &client,
        "/apis/wardle.example.com/v1beta1/namespaces/demo/flunders",
        503,
    )
    .await;
    assert_eq!(body.trim_end(), "service unavailable");
    let (code, _) = get(&client, "/api/v1/namespaces").await;
    assert_eq!(code, 200);

    // B comes back on its port: A recovers without a restart.
    let b = start_b(&tmp.path().join("b"), b_port, &certs).await;
    wait_available(
        &client,
        "v1beta1.wardle.example.com",
        "available again",
        |c| c["status"] == "True",
    )
    .await;
    eventually_code(
        &client,
        "/apis/wardle.example.com/v1beta1/namespaces/demo/flunders",
        200,
    )
    .await;

    // Deleting the APIService takes the group out of A's discovery.
    api_services(&client)
        .delete("v1beta1.wardle.example.com", &DeleteParams::default())
        .await
        .expect("delete apiservice");
    eventually_code(&client, "/apis/wardle.example.com", 404).await;
    let (_, groups) = get(&client, "/apis").await;
    assert!(!groups.contains("wardle.example.com"), "{groups}");
    drop(b);
}

#[tokio::test]
async fn endpoints_routing_reaches_the_backend_by_its_endpoints() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let certs = certs(tmp.path());
    let b_port = common::free_port();
    // Endpoints may not name loopback addresses: B listens on this
    // machine's own address.
    let host = common::host_address();
    let _b = start_b_on(&tmp.path().join("b"), b_port, &certs, &host).await;
    let a = start_a(
        &tmp.path().join("a"),
        &certs,
        &["--enable-aggregator-routing"],
    )
    .await;
    let client = client_of(&a).await;
    namespace(&client, "wardle-system").await;
    // A ClusterIP Service whose port 443 maps to the endpoint port named
    // `https` on this machine's address.
    apply(
        &client,
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "api", "namespace": "wardle-system"},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": b_port}]},
        }),
    )
    .await;
    let mut service = api_service(443, &certs.serving_ca.cert_pem);
    service["spec"]["service"]["port"] = json!(443);
    apply(&client, service).await;
    // No endpoints yet.
    let cond = wait_available(
        &client,
        "v1beta1.wardle.example.com",
        "without endpoints",
        |c| c["reason"] == "EndpointsNotFound",
    )
    .await;
    assert_eq!(cond["status"], "False");
    assert_eq!(
        cond["message"],
        "cannot find endpointslices for service/api in \"wardle-system\""
    );
    apply(
        &client,
        json!({
            "apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "api", "namespace": "wardle-system"},
            "subsets": [{"addresses": [{"ip": host}], "ports": [{"name": "https", "port": b_port}]}],
        }),
    )
    .await;
    wait_available(&client, "v1beta1.wardle.example.com", "available", |c| {
        c["status"] == "True"
    })
    .await;
    namespace(&client, "default").await;
    let via_a = flunders(client.clone(), "default");
    via_a
        .create(&PostParams::default(), &flunder("routed"))
        .await
        .expect("create through A by endpoints");
    // A Service port the APIService does not name.
    let mut wrong = api_service(8443, &certs.serving_ca.cert_pem);
    wrong["metadata"]["name"] = json!("v1beta1.wardle.example.com");
    apply(&client, wrong).await;
    let cond = wait_available(&client, "v1beta1.wardle.example.com", "port error", |c| {
        c["reason"] == "ServicePortError"
    })
    .await;
    assert_eq!(
        cond["message"],
        "service/api in \"wardle-system\" is not listening on port 8443"
    );
}

#[tokio::test]
async fn broken_apiservices_get_their_condition_and_never_break_the_rest() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let certs = certs(tmp.path());
    let b_port = common::free_port();
    let _b = start_b(&tmp.path().join("b"), b_port, &certs).await;
    let a = start_a(&tmp.path().join("a"), &certs, &[]).await;
    let client = client_of(&a).await;

    // A missing Service.
    let mut missing = api_service(b_port, &certs.serving_ca.cert_pem);
    missing["spec"]["service"]["name"] = json!("missing");
    apply(&client, missing).await;
    let cond = wait_available(
        &client,
        "v1beta1.wardle.example.com",
        "ServiceNotFound",
        |c| c["reason"] == "ServiceNotFound",
    )
    .await;
    assert_eq!(cond["status"], "False");
    assert_eq!(
        cond["message"],
        "service/missing in \"wardle-system\" is not present"
    );
    let body = eventually_code(&client, "/apis/wardle.example.com/v1beta1/flunders", 503).await;
    assert_eq!(body.trim_end(), "service unavailable");

    // The Service exists, but the caBundle is not the backend's CA.
    namespace(&client, "wardle-system").await;
    apply(&client, external_name_service()).await;
    let other_ca = TestCa::new("someone-else");
    apply(&client, api_service(b_port, &other_ca.cert_pem)).await;
    // Upstream's availability check does not verify the backend's
    // certificate, so the APIService is available; the proxy verifies, so
    // requests fail with 503.
    wait_available(&client, "v1beta1.wardle.example.com", "checked", |c| {
        c["reason"] == "Passed"
    })
    .await;
    let (code, body) = get(&client, "/apis/wardle.example.com/v1beta1/flunders").await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("certificate") || body.contains("UnknownIssuer"),
        "{body}"
    );
    // A backend answering garbage to discovery: available (upstream checks
    // the status code only), its group left out of aggregated discovery,
    // and A's own groups unharmed.
    let garbage = common::webhook::Webhook::start_named(
        std::sync::Arc::new(|_: &Value| (200, json!("not a discovery document"))),
        None,
        &["garbage.wardle-system.svc"],
    )
    .await;
    apply(
        &client,
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "garbage", "namespace": "wardle-system"},
            "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
        }),
    )
    .await;
    use base64::Engine;
    apply(
        &client,
        json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1.garbage.example.com"},
            "spec": {
                "group": "garbage.example.com", "version": "v1",
                "groupPriorityMinimum": 100, "versionPriority": 10,
                "service": {"namespace": "wardle-system", "name": "garbage", "port": garbage.port},
                "caBundle": base64::engine::general_purpose::STANDARD.encode(&garbage.ca.cert_pem),
            },
        }),
    )
    .await;
    wait_available(&client, "v1.garbage.example.com", "available", |c| {
        c["status"] == "True"
    })
    .await;
    // Legacy discovery lists the group (from its APIService); aggregated
    // discovery has nothing to say about it; A's groups are all there.
    eventually_code(&client, "/apis/garbage.example.com", 200).await;
    let (code, apis) = get(&client, "/apis").await;
    assert_eq!(code, 200);
    assert!(apis.contains("garbage.example.com"), "{apis}");
    let kubectl = common::kubectl::Kubectl::new(&a);
    let out = kubectl.run(&["api-resources", "--api-group=rbac.authorization.k8s.io"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("clusterroles"), "{text}");
    let (code, _) = get(&client, "/api/v1/namespaces").await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn invalid_apiservices_are_refused_with_upstreams_messages() {
    let a = Server::start().await;
    let client = client_of(&a).await;
    let api = api_services(&client);
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1.wrong.example.com"},
        "spec": {
            "group": "example.com", "version": "v1",
            "groupPriorityMinimum": 0, "versionPriority": 10,
            "insecureSkipTLSVerify": true,
        },
    }))
    .expect("object");
    let err = api
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("invalid");
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "APIService.apiregistration.k8s.io \"v1.wrong.example.com\" is invalid: [metadata.name: Invalid value: \"v1.wrong.example.com\": must be `spec.version+\".\"+spec.group`: \"v1.example.com\", spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000, spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify]"
    );
}

/// The whole deployment as a platform team runs it: B delegates
/// authentication and authorization to A (a user of A with
/// `system:auth-delegator` and `extension-apiserver-authentication-reader`),
/// reads the front-proxy CA from A's `extension-apiserver-authentication`
/// ConfigMap, and A's RBAC decides what a user may do on B.
#[tokio::test]
async fn users_rights_in_the_aggregator_decide_on_the_backend() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let certs = certs(tmp.path());
    let tokens = common::auth::token_file(
        tmp.path(),
        &[
            "bob-token,bob,1001",
            "alice-token,alice,1002",
            "server-b-token,server-b,1003",
        ],
    );
    let a = start_a(
        &tmp.path().join("a"),
        &certs,
        &[
            "--token-auth-file",
            tokens.to_str().expect("path"),
            "--requestheader-client-ca-file",
            certs.front_proxy_ca.to_str().expect("path"),
            "--requestheader-allowed-names=front-proxy-client",
        ],
    )
    .await;
    let admin = client_of(&a).await;
    // B's user in A and its two bindings; bob may work with flunders in
    // `demo`, alice nowhere.
    for binding in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "server-b:auth-delegator"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "server-b"}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "server-b:auth-reader", "namespace": "kube-system"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "server-b"}]}),
    ] {
        apply(&admin, binding).await;
    }
    namespace(&admin, "demo").await;
    apply(
        &admin,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "flunder-editor", "namespace": "demo"},
            "rules": [{"apiGroups": ["wardle.example.com"], "resources": ["flunders"], "verbs": ["*"]}]}),
    )
    .await;
    apply(
        &admin,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "bob-flunders", "namespace": "demo"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "flunder-editor"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]}),
    )
    .await;
    // B's kubeconfig for A: A's admin kubeconfig with server-b's token.
    let admin_kubeconfig = std::fs::read_to_string(a.kubeconfig()).expect("kubeconfig");
    let admin_token = common::auth::admin_token(&a);
    let b_kubeconfig = tmp.path().join("server-b.kubeconfig");
    std::fs::write(
        &b_kubeconfig,
        admin_kubeconfig.replace(&admin_token, "server-b-token"),
    )
    .expect("write kubeconfig");
    let b_port = common::free_port();
    let b = Server::start_in(
        &tmp.path().join("b"),
        b_port,
        &[
            "--tls-cert-file",
            certs.serving.0.to_str().expect("path"),
            "--tls-private-key-file",
            certs.serving.1.to_str().expect("path"),
            "--authentication-kubeconfig",
            b_kubeconfig.to_str().expect("path"),
            "--authorization-kubeconfig",
            b_kubeconfig.to_str().expect("path"),
            "--kubeconfig",
            b_kubeconfig.to_str().expect("path"),
        ],
    )
    .await;
    // B reads namespaces from A (its `--kubeconfig`), as upstream's e2e
    // grants sample-apiserver's account: `demo` exists in A only.
    apply(
        &admin,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "server-b:namespace-reader"},
            "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}]}),
    )
    .await;
    apply(
        &admin,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "server-b:namespace-reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "server-b:namespace-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "server-b"}]}),
    )
    .await;
    namespace(&admin, "wardle-system").await;
    apply(&admin, external_name_service()).await;
    apply(&admin, api_service(b_port, &certs.serving_ca.cert_pem)).await;
    wait_available(&admin, "v1beta1.wardle.example.com", "available", |c| {
        c["status"] == "True"
    })
    .await;

    let bob = common::auth::client_with(&a, &common::auth::Credential::token("bob-token")).await;
    let created = flunders(bob.clone(), "demo")
        .create(&PostParams::default(), &flunder("bobs"))
        .await
        .expect("bob may create flunders in demo");
    assert_eq!(created.metadata.name.as_deref(), Some("bobs"));
    // A namespace A does not have is missing for B too.
    let err = flunders(admin.clone(), "nowhere")
        .create(&PostParams::default(), &flunder("lost"))
        .await
        .expect_err("no namespace nowhere in A");
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(
        (status.code, status.message.as_str()),
        (404, "namespaces \"nowhere\" not found")
    );

    // A authorizes proxied requests as any other (upstream's handler chain
    // does), so she is refused there; on B directly, B asks A (TokenReview,
    // then SubjectAccessReview) and refuses her too.
    for (server, why) in [(&a, "alice has no binding in A"), (&b, "B asks A")] {
        let alice =
            common::auth::client_with(server, &common::auth::Credential::token("alice-token"))
                .await;
        let err = flunders(alice, "demo")
            .list(&Default::default())
            .await
            .expect_err(why);
        let kube::Error::Api(status) = err else {
            panic!("{err:?}")
        };
        assert_eq!(status.code, 403);
        assert!(
            status.message.starts_with(
                "flunders.wardle.example.com is forbidden: User \"alice\" cannot list resource \"flunders\" in API group \"wardle.example.com\" in the namespace \"demo\""
            ),
            "{}",
            status.message
        );
    }
    // bob directly on B: B's delegated authorization allows him.
    let bob_on_b =
        common::auth::client_with(&b, &common::auth::Credential::token("bob-token")).await;
    let listed = flunders(bob_on_b, "demo")
        .list(&Default::default())
        .await
        .expect("bob on B");
    assert_eq!(listed.items.len(), 1);
    drop(b);
}

/// A CustomResourceDefinition's group versions get local APIServices
/// (crdregistration), managed continuously: they go with the definition.
#[tokio::test]
async fn custom_resource_group_versions_get_local_apiservices() {
    let a = Server::start().await;
    let client = client_of(&a).await;
    apply(
        &client,
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.stable.example.com"},
            "spec": {
                "group": "stable.example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                    {"name": "v1beta1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                ],
            },
        }),
    )
    .await;
    for name in ["v1.stable.example.com", "v1beta1.stable.example.com"] {
        let cond = wait_available(&client, name, "local", |c| c["status"] == "True").await;
        assert_eq!(cond["reason"], "Local");
        let obj = api_services(&client).get(name).await.expect("apiservice");
        assert_eq!(
            obj.metadata.labels.unwrap_or_default()["kube-aggregator.kubernetes.io/automanaged"],
            "true"
        );
    }
    let obj = serde_json::to_value(
        api_services(&client)
            .get("v1.stable.example.com")
            .await
            .expect("apiservice"),
    )
    .expect("json");
    assert_eq!(obj["spec"]["groupPriorityMinimum"], 1000);
    assert_eq!(obj["spec"]["versionPriority"], 100);
    Api::<DynamicObject>::all_with(
        client.clone(),
        &dynamic(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
    )
    .delete("widgets.stable.example.com", &DeleteParams::default())
    .await
    .expect("delete definition");
    let deadline = Instant::now() + Duration::from_secs(60);
    while api_services(&client)
        .get_opt("v1.stable.example.com")
        .await
        .expect("get")
        .is_some()
    {
        assert!(
            Instant::now() < deadline,
            "the APIService did not go with its definition"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A backend that is not an API server: it answers the legacy discovery of
/// `wardle.example.com/v1beta1` (what the availability check asks; no
/// aggregated discovery, as servers before Kubernetes 1.26) and switches
/// every request carrying `Upgrade` to an echo of the bytes it receives,
/// recording the front-proxy user it was told about.
struct EchoBackend {
    port: u16,
    users: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EchoBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EchoBackend {
    async fn start(serving: &(std::path::PathBuf, std::path::PathBuf)) -> EchoBackend {
        use rustls_pki_types::pem::PemObject;
        let certs = rustls_pki_types::CertificateDer::pem_file_iter(&serving.0)
            .expect("cert")
            .map(|c| c.expect("cert pem"))
            .collect();
        let key = rustls_pki_types::PrivateKeyDer::from_pem_file(&serving.1).expect("key");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let users = Arc::new(Mutex::new(Vec::new()));
        let seen = users.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, seen) = (acceptor.clone(), seen.clone());
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        let seen = seen.clone();
                        async move { Ok::<_, std::convert::Infallible>(echo(req, &seen)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        EchoBackend { port, users, task }
    }
}

/// [`EchoBackend`]'s answer to `req`.
fn echo(
    mut req: http::Request<hyper::body::Incoming>,
    seen: &Mutex<Vec<String>>,
) -> http::Response<http_body_util::Full<bytes::Bytes>> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let protocol = header("upgrade");
    if protocol.is_empty() {
        let body = if req.uri().path() == "/apis/wardle.example.com/v1beta1" {
            json!({"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": "wardle.example.com/v1beta1", "resources": [
                    {"name": "flunders", "singularName": "flunder", "namespaced": true,
                     "kind": "Flunder", "verbs": ["get", "list"]},
                    {"name": "flunders/exec", "singularName": "", "namespaced": true,
                     "kind": "", "verbs": ["get"]}]})
        } else {
            json!({})
        };
        let mut resp = http::Response::new(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )));
        resp.headers_mut().insert(
            "content-type",
            http::HeaderValue::from_static("application/json"),
        );
        return resp;
    }
    seen.lock().expect("lock").push(header("x-remote-user"));
    let switched = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(io) = switched.await else { return };
        let (mut read, mut write) = tokio::io::split(hyper_util::rt::TokioIo::new(io));
        let _ = tokio::io::copy(&mut read, &mut write).await;
    });
    let mut resp = http::Response::new(http_body_util::Full::new(bytes::Bytes::new()));
    *resp.status_mut() = http::StatusCode::SWITCHING_PROTOCOLS;
    let headers = resp.headers_mut();
    headers.insert("connection", http::HeaderValue::from_static("Upgrade"));
    headers.insert(
        "upgrade",
        http::HeaderValue::from_str(&protocol).expect("protocol"),
    );
    resp
}

/// An upgrade request (what exec, attach and port-forward send) is
/// authenticated and authorized by the aggregator, switched by the backend,
/// and the two connections are then bridged byte for byte, as
/// kube-aggregator's proxy does with `UpgradeAwareHandler`.
#[tokio::test]
async fn upgraded_connections_are_bridged_to_the_backend() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tmp = tempfile::tempdir().expect("tempdir");
    let certs = certs(tmp.path());
    let backend = EchoBackend::start(&certs.serving).await;
    let a = start_a(&tmp.path().join("a"), &certs, &[]).await;
    let client = client_of(&a).await;
    namespace(&client, "wardle-system").await;
    apply(&client, external_name_service()).await;
    apply(
        &client,
        api_service(backend.port, &certs.serving_ca.cert_pem),
    )
    .await;
    wait_available(&client, "v1beta1.wardle.example.com", "available", |c| {
        c["status"] == "True"
    })
    .await;

    let path = "/apis/wardle.example.com/v1beta1/namespaces/default/flunders/x/exec?command=cat";
    let mut stream = common::raw::connect(&a).await;
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\
         Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n",
        common::raw::token(&a)
    );
    stream.write_all(head.as_bytes()).await.expect("write");
    stream.flush().await.expect("flush");
    let mut answer = Vec::new();
    while !answer.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut byte))
            .await
            .expect("answer within 10 s")
            .expect("read");
        assert_eq!(
            n,
            1,
            "connection closed after {:?}",
            String::from_utf8_lossy(&answer)
        );
        answer.push(byte[0]);
    }
    let answer = String::from_utf8_lossy(&answer).to_lowercase();
    assert!(answer.starts_with("http/1.1 101"), "{answer}");
    assert!(answer.contains("upgrade: spdy/3.1"), "{answer}");
    for message in [&b"ping"[..], b"a longer second message"] {
        stream.write_all(message).await.expect("write");
        stream.flush().await.expect("flush");
        let mut echoed = vec![0u8; message.len()];
        tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut echoed))
            .await
            .expect("echo within 10 s")
            .expect("read echo");
        assert_eq!(echoed, message);
    }
    // Its legacy resource list is in A's aggregated discovery, converted as
    // kube-aggregator converts it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let wardle = loop {
        let request = http::Request::get("/apis")
            .header(
                "accept",
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
            )
            .body(Vec::new())
            .expect("request");
        let doc: Value = client.request(request).await.expect("aggregated discovery");
        let found = doc["items"].as_array().and_then(|groups| {
            groups
                .iter()
                .find(|g| g["metadata"]["name"] == "wardle.example.com")
                .cloned()
        });
        if let Some(found) = found {
            break found;
        }
        assert!(Instant::now() < deadline, "wardle never in /apis: {doc}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let version = &wardle["versions"][0];
    assert_eq!(version["version"], "v1beta1", "{wardle}");
    assert_eq!(version["resources"][0]["resource"], "flunders", "{wardle}");
    assert_eq!(version["resources"][0]["scope"], "Namespaced", "{wardle}");
    assert_eq!(version["resources"][0]["responseKind"]["kind"], "Flunder");
    assert_eq!(
        version["resources"][0]["subresources"][0]["subresource"], "exec",
        "{wardle}"
    );
    assert_eq!(
        *backend.users.lock().expect("lock"),
        ["apiforge-admin"],
        "the backend is told who the caller is (the admin token's user)"
    );
}
