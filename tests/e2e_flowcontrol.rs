//! API Priority and Fairness against the real binary: the default
//! FlowSchemas and PriorityLevelConfigurations, the `X-Kubernetes-PF-*`
//! response headers, and 429s from a tiny priority level while exempt
//! requests and `/readyz` keep answering.

mod common;

use std::time::{Duration, Instant};

use common::auth::token_file;
use common::kubectl::Kubectl;
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
    // Group "dev" may do everything (RBAC; anonymous /readyz stays allowed).
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
    let started = Instant::now();
    loop {
        let resp = as_user(&server, "slow-token", "GET", CONFIGMAPS).await;
        if resp.header(FS_HEADER) == Some(tiny_fs_uid.as_str()) {
            assert_eq!(resp.header(PL_HEADER), Some(tiny_pl_uid.as_str()));
            assert_eq!(resp.status, 200);
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "tiny FlowSchema not applied"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

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
