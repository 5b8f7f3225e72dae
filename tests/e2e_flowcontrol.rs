//! API Priority and Fairness against the real binary: the default
//! FlowSchemas and PriorityLevelConfigurations, the `X-Kubernetes-PF-*`
//! response headers, and 429s from a tiny priority level while exempt
//! requests and `/readyz` keep answering; fairness between a flooding user
//! and a normal one of the same level.

mod common;

use std::time::{Duration, Instant};

use common::auth::token_file;
use common::kubectl::Kubectl;
use common::percentile;
use common::raw::{self, RawResponse};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};

const FS_HEADER: &str = "x-kubernetes-pf-flowschema-uid";
const PL_HEADER: &str = "x-kubernetes-pf-prioritylevel-uid";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("flowcontrol.apiserver.k8s.io", "v1", kind),
        plural,
    )
}

async fn as_user(server: &common::Server, token: &str, method: &str, path: &str) -> RawResponse {
    let auth = format!("Bearer {token}");
    let mut stream = raw::connect(server).await;
    raw::send(&mut stream, method, path, &[("Authorization", &auth)], b"").await;
    raw::read_response(&mut stream).await
}

async fn uids(api: &Api<DynamicObject>) -> std::collections::BTreeMap<String, String> {
    api.list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|o| {
            (
                o.metadata.name.unwrap_or_default(),
                o.metadata.uid.unwrap_or_default(),
            )
        })
        .collect()
}

/// Lets group "dev" do everything (RBAC; anonymous /readyz stays allowed).
async fn bind_dev_as_admin(client: &kube::Client) {
    let crb: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "dev-admin"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "dev"}]
    }))
    .expect("crb");
    let crbs: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
            "clusterrolebindings",
        ),
    );
    crbs.create(&PostParams::default(), &crb)
        .await
        .expect("create binding");
}

/// GETs `path` as the user of `token` until the FlowSchema `fs_uid`
/// classifies the request (a new FlowSchema applies shortly after it is
/// written); that response.
async fn classified_by(
    server: &common::Server,
    token: &str,
    path: &str,
    fs_uid: &str,
) -> RawResponse {
    let started = Instant::now();
    loop {
        let resp = as_user(server, token, "GET", path).await;
        if resp.header(FS_HEADER) == Some(fs_uid) {
            return resp;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "FlowSchema {fs_uid} not applied"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn priority_and_fairness() {
    let tmp = tempfile::tempdir().expect("tmp");
    let tokens = token_file(
        tmp.path(),
        &["alice-token,alice,1001,dev", "slow-token,slow,1002,dev"],
    );
    // A total concurrency of 2 seats: every Limited level gets one.
    let server = common::Server::start_in(
        &tmp.path().join("data"),
        common::free_port(),
        &[
            "--token-auth-file",
            tokens.to_str().expect("path"),
            "--max-requests-inflight=1",
            "--max-mutating-requests-inflight=1",
        ],
    )
    .await;
    let client = server.client().await;
    bind_dev_as_admin(&client).await;
    let schemas: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("FlowSchema", "flowschemas"));
    let levels: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("PriorityLevelConfiguration", "prioritylevelconfigurations"),
    );

    // The default configuration is there (created at start-up).
    let fs = uids(&schemas).await;
    for name in [
        "exempt",
        "probes",
        "system-leader-election",
        "system-nodes",
        "service-accounts",
        "global-default",
        "catch-all",
    ] {
        assert!(fs.contains_key(name), "FlowSchema {name} in {fs:?}");
    }
    let pl = uids(&levels).await;
    for name in [
        "exempt",
        "system",
        "node-high",
        "leader-election",
        "workload-high",
        "workload-low",
        "global-default",
        "catch-all",
    ] {
        assert!(
            pl.contains_key(name),
            "PriorityLevelConfiguration {name} in {pl:?}"
        );
    }
    let catch_all = levels.get("catch-all").await.expect("catch-all");
    assert_eq!(
        catch_all.data["spec"]["limited"]["limitResponse"]["type"],
        "Reject"
    );
    assert_eq!(
        catch_all.metadata.annotations.unwrap_or_default()["apf.kubernetes.io/autoupdate-spec"],
        "true"
    );

    // kubectl lists them with upstream's columns.
    let kubectl = Kubectl::new(&server);
    let out = kubectl.ok(&["get", "flowschemas"]);
    assert!(out.contains("PRIORITYLEVEL"), "{out}");
    assert!(out.contains("MATCHINGPRECEDENCE"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("global-default") && l.contains("9900") && l.contains("ByUser")),
        "{out}"
    );
    let out = kubectl.ok(&["get", "prioritylevelconfigurations"]);
    assert!(
        out.lines()
            .any(|l| l.contains("Limited") && l.contains(" 100 ") && l.contains(" 128 ")),
        "{out}"
    );

    // The PF headers: the admin (system:masters) is exempt; a token-file
    // user falls in global-default; anonymous probes in probes/exempt.
    let resp = raw::request(&server, "GET", CONFIGMAPS, &[], b"").await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header(FS_HEADER), Some(fs["exempt"].as_str()));
    assert_eq!(resp.header(PL_HEADER), Some(pl["exempt"].as_str()));
    let resp = as_user(&server, "alice-token", "GET", CONFIGMAPS).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header(FS_HEADER), Some(fs["global-default"].as_str()));
    assert_eq!(resp.header(PL_HEADER), Some(pl["global-default"].as_str()));
    let resp = raw::anonymous(&server, "GET", "/readyz").await;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header(FS_HEADER), Some(fs["probes"].as_str()));

    // A tiny level for user "slow": one seat, one queue of one.
    let tiny_pl: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "tiny"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 1}}}}
    }))
    .expect("plc");
    let tiny_pl = levels
        .create(&PostParams::default(), &tiny_pl)
        .await
        .expect("create plc");
    // Defaults are filled in.
    assert_eq!(tiny_pl.data["spec"]["limited"]["lendablePercent"], 0);
    let tiny_fs: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "tiny"},
        "spec": {"priorityLevelConfiguration": {"name": "tiny"}, "matchingPrecedence": 100,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "User", "user": {"name": "slow"}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}]}]}
    }))
    .expect("fs");
    let tiny_fs = schemas
        .create(&PostParams::default(), &tiny_fs)
        .await
        .expect("create fs");
    let tiny_fs_uid = tiny_fs.metadata.uid.clone().unwrap_or_default();
    let tiny_pl_uid = tiny_pl.metadata.uid.clone().unwrap_or_default();

    // The configuration is picked up.
    let resp = classified_by(&server, "slow-token", CONFIGMAPS, &tiny_fs_uid).await;
    assert_eq!(resp.header(PL_HEADER), Some(tiny_pl_uid.as_str()));
    assert_eq!(resp.status, 200);

    // A validation error is a precise Status.
    let bad: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "bad"},
        "spec": {"priorityLevelConfiguration": {"name": "tiny"}, "matchingPrecedence": 0}
    }))
    .expect("fs");
    match schemas.create(&PostParams::default(), &bad).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422);
            assert!(
                e.message.contains("spec.matchingPrecedence"),
                "{}",
                e.message
            );
        }
        other => panic!("expected 422, got {other:?}"),
    }

    // One request executes, one waits, the next ones get 429.
    let executing = raw::stalled_post(&server, CONFIGMAPS, "slow-token").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let queued = raw::stalled_post(&server, CONFIGMAPS, "slow-token").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut rejected = None;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        let resp = as_user(&server, "slow-token", "GET", CONFIGMAPS).await;
        if resp.status == 429 {
            rejected = Some(resp);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let rejected = rejected.expect("the excess request is rejected");
    assert_eq!(rejected.header("retry-after"), Some("1"));
    assert_eq!(rejected.header(FS_HEADER), Some(tiny_fs_uid.as_str()));
    let status = rejected.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["code"], 429);

    // Meanwhile health checks, exempt users and other levels answer.
    assert_eq!(raw::anonymous(&server, "GET", "/readyz").await.status, 200);
    let resp = raw::request(&server, "GET", CONFIGMAPS, &[], b"").await;
    assert_eq!(resp.status, 200);
    assert_eq!(
        as_user(&server, "alice-token", "GET", CONFIGMAPS)
            .await
            .status,
        200
    );

    // The metrics saw it.
    let metrics = raw::request(&server, "GET", "/metrics", &[], b"")
        .await
        .text();
    assert!(
        metrics.lines().any(
            |l| l.starts_with("apiserver_flowcontrol_rejected_requests_total")
                && l.contains("priority_level=\"tiny\"")
                && l.contains("reason=\"queue-full\"")
        ),
        "{metrics}"
    );
    assert!(
        metrics.lines().any(
            |l| l.starts_with("apiserver_flowcontrol_current_inqueue_requests")
                && l.contains("priority_level=\"tiny\"")
                && l.ends_with(" 1")
        ),
        "{metrics}"
    );
    assert!(metrics.contains("apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"exempt\",priority_level=\"exempt\"}"));

    // Freed seats serve the flow again.
    drop(executing);
    drop(queued);
    let started = Instant::now();
    loop {
        let resp = as_user(&server, "slow-token", "GET", CONFIGMAPS).await;
        if resp.status == 200 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "seats not freed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A deleted mandatory object comes back.
    levels
        .delete("catch-all", &Default::default())
        .await
        .expect("delete");
    let started = Instant::now();
    while levels.get_opt("catch-all").await.expect("get").is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "catch-all not recreated"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A kube client for a token user that does not retry 429s itself.
async fn token_client(kubeconfig: &std::path::Path, token: &str) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.to_string().into()),
        ..Default::default()
    };
    config.default_retry = false;
    kube::Client::try_from(config).expect("client")
}

/// One GET; its status code (0: transport failure) and latency.
async fn timed_get(client: &kube::Client, path: &str) -> (u16, Duration) {
    let started = Instant::now();
    let req = http::Request::get(path).body(Vec::new()).expect("request");
    let code = match client.request_text(req).await {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(_) => 0,
    };
    (code, started.elapsed())
}

/// Fairness under a flood: one user floods a small priority level with 32
/// concurrent request loops while another user of the same FlowSchema
/// (flows distinguished by user) makes one request at a time. Shuffle
/// sharding puts the two flows in different queues and fair queuing
/// dispatches the normal user's queue in turn: the normal user is never
/// rejected, the flooder gets 429 with `Retry-After` once its queues are
/// full. Latencies are printed (no timing is asserted; the figures are in
/// docs/behaviour/security.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_user_does_not_starve_another() {
    const CLUSTERROLES: &str = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    const FLOOD: Duration = Duration::from_secs(4);
    let tmp = tempfile::tempdir().expect("tmp");
    let tokens = token_file(
        tmp.path(),
        &[
            "flooder-token,flooder,2001,dev",
            "normal-token,normal,2002,dev",
        ],
    );
    let server = common::Server::start_in(
        &tmp.path().join("data"),
        common::free_port(),
        &[
            "--token-auth-file",
            tokens.to_str().expect("path"),
            // 15 seats in all (the admin is exempt).
            "--max-requests-inflight=10",
            "--max-mutating-requests-inflight=5",
        ],
    )
    .await;
    let client = server.client().await;
    bind_dev_as_admin(&client).await;
    // A small level (1 of ~246 shares of 15 seats: 1 seat, none
    // borrowed) with 16 queues of 2, hands of 2: the flooder has at most
    // 5 requests in the level, its 32 loops keep more coming.
    let levels: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("PriorityLevelConfiguration", "prioritylevelconfigurations"),
    );
    let level: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": "shared"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
            "lendablePercent": 0, "borrowingLimitPercent": 0,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 16, "handSize": 2, "queueLengthLimit": 2}}}}
    }))
    .expect("plc");
    levels
        .create(&PostParams::default(), &level)
        .await
        .expect("create plc");
    let schemas: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("FlowSchema", "flowschemas"));
    let schema: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
        "metadata": {"name": "shared"},
        "spec": {"priorityLevelConfiguration": {"name": "shared"}, "matchingPrecedence": 100,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "Group", "group": {"name": "dev"}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                    "clusterScope": true, "namespaces": ["*"]}]}]}
    }))
    .expect("fs");
    let schema = schemas
        .create(&PostParams::default(), &schema)
        .await
        .expect("create fs");
    let schema_uid = schema.metadata.uid.clone().unwrap_or_default();
    let resp = classified_by(&server, "normal-token", CLUSTERROLES, &schema_uid).await;
    assert_eq!(resp.status, 200);

    // The normal user runs on a thread and runtime of its own, so that
    // its latencies are the server's and not this runtime's, busy with
    // the flood loops. First alone, then during the flood.
    let kubeconfig = server.kubeconfig();
    let (start_tx, start_rx) = std::sync::mpsc::channel::<Instant>();
    let (alone_tx, alone_rx) = std::sync::mpsc::channel::<Vec<Duration>>();
    let normal_user = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let normal = token_client(&kubeconfig, "normal-token").await;
            let mut alone = Vec::new();
            for _ in 0..50 {
                let (code, took) = timed_get(&normal, CLUSTERROLES).await;
                assert_eq!(code, 200);
                alone.push(took);
            }
            alone_tx.send(alone).expect("send");
            let until = start_rx.recv().expect("flood start");
            let (mut codes, mut during) = (Vec::new(), Vec::new());
            while Instant::now() < until {
                let (code, took) = timed_get(&normal, CLUSTERROLES).await;
                codes.push(code);
                during.push(took);
            }
            (codes, during)
        })
    });
    let mut alone = alone_rx.recv().expect("alone");
    alone.sort();

    // The flood.
    let flooder = token_client(&server.kubeconfig(), "flooder-token").await;
    let until = Instant::now() + FLOOD;
    let loops: Vec<_> = (0..32)
        .map(|_| {
            let flooder = flooder.clone();
            tokio::spawn(async move {
                let mut codes = Vec::new();
                while Instant::now() < until {
                    let (code, _) = timed_get(&flooder, CLUSTERROLES).await;
                    codes.push(code);
                    if code == 429 {
                        // As a client honouring Retry-After would not:
                        // a flooder comes straight back.
                        tokio::task::yield_now().await;
                    }
                }
                codes
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A rejection carries Retry-After (seen raw; kube-rs hides headers).
    let mut retry_after = None;
    while Instant::now() < until && retry_after.is_none() {
        let resp = as_user(&server, "flooder-token", "GET", CLUSTERROLES).await;
        if resp.status == 429 {
            retry_after = Some(resp.header("retry-after").map(str::to_string));
        }
    }
    start_tx.send(until).expect("start");
    let (normal_codes, mut during) =
        tokio::task::spawn_blocking(move || normal_user.join().expect("normal user"))
            .await
            .expect("join");
    let mut flood_codes = Vec::new();
    for l in loops {
        flood_codes.extend(l.await.expect("flood loop"));
    }
    during.sort();
    let served = flood_codes.iter().filter(|c| **c == 200).count();
    let rejected = flood_codes.iter().filter(|c| **c == 429).count();
    eprintln!(
        "APF flood: normal user alone p50 {:?} p99 {:?}; during the flood {} requests p50 {:?} p99 {:?} max {:?}; flooder {} served, {} rejected (429), {} other",
        percentile(&alone, 0.5),
        percentile(&alone, 0.99),
        during.len(),
        percentile(&during, 0.5),
        percentile(&during, 0.99),
        during.last().copied().unwrap_or_default(),
        served,
        rejected,
        flood_codes.len() - served - rejected,
    );
    assert!(
        normal_codes.iter().all(|c| *c == 200),
        "the normal user was refused: {normal_codes:?}"
    );
    assert!(!normal_codes.is_empty(), "the normal user was served");
    assert!(served > 0, "the flooder is served too");
    assert!(rejected > 0, "the flooder's excess is rejected");
    assert_eq!(
        retry_after,
        Some(Some("1".to_string())),
        "a rejection says when to come back"
    );
}
