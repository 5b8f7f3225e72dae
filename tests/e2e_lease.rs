//! The identity lease of the real binary: `kube-system/apiserver-<id>`,
//! renewed, and expired identity leases of other instances collected.

mod common;

use std::time::{Duration, Instant};

use common::kubectl::Kubectl;
use common::{Server, free_port};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, PostParams};

const IDENTITY: &str = "apiserver.kubernetes.io/identity=kube-apiserver";

async fn own_lease(api: &Api<Lease>) -> Lease {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let list = api
            .list(&ListParams::default().labels(IDENTITY))
            .await
            .expect("list leases");
        if let Some(l) = list.items.into_iter().next() {
            return l;
        }
        assert!(Instant::now() < deadline, "no identity lease");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn identity_lease_is_held_renewed_and_expired_ones_collected() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(
        &tmp.path().join("data"),
        free_port(),
        &[
            "--identity-lease-duration-seconds",
            "3",
            "--identity-lease-renew-interval-seconds",
            "1",
        ],
    )
    .await;
    let client = server.client().await;
    let api: Api<Lease> = Api::namespaced(client, "kube-system");

    let lease = own_lease(&api).await;
    let name = lease.metadata.name.clone().expect("name");
    assert!(name.starts_with("apiserver-"), "{name}");
    let labels = lease.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels
            .get("apiserver.kubernetes.io/identity")
            .map(String::as_str),
        Some("kube-apiserver")
    );
    assert!(labels.contains_key("kubernetes.io/hostname"));
    let spec = lease.spec.clone().expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some(name.as_str()));
    assert_eq!(spec.lease_duration_seconds, Some(3));
    let first = spec.renew_time.expect("renewTime").0;

    // renewTime advances.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let l = api.get(&name).await.expect("get lease");
        let t = l.spec.and_then(|s| s.renew_time).expect("renewTime").0;
        if t > first {
            break;
        }
        assert!(Instant::now() < deadline, "renewTime did not advance");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // An expired identity lease of another instance is deleted; an expired
    // lease without the identity label is not.
    let past = (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(600)).to_string();
    let foreign = |name: &str, identity: bool| {
        let labels = if identity {
            serde_json::json!({"apiserver.kubernetes.io/identity": "kube-apiserver"})
        } else {
            serde_json::json!({})
        };
        serde_json::from_value::<Lease>(serde_json::json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 60, "renewTime": past},
        }))
        .expect("lease")
    };
    api.create(&PostParams::default(), &foreign("apiserver-gone", true))
        .await
        .expect("create expired identity lease");
    api.create(&PostParams::default(), &foreign("not-an-identity", false))
        .await
        .expect("create expired other lease");
    let deadline = Instant::now() + Duration::from_secs(15);
    while api.get_opt("apiserver-gone").await.expect("get").is_some() {
        assert!(
            Instant::now() < deadline,
            "expired identity lease not collected; log:\n{}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(api.get_opt("not-an-identity").await.expect("get").is_some());
    assert!(api.get_opt(&name).await.expect("get").is_some());

    // kubectl lists it.
    let out = Kubectl::new(&server).ok(&["get", "leases", "-n", "kube-system"]);
    assert!(out.contains(&name), "{out}");
}

#[tokio::test]
async fn coordination_group_is_discoverable() {
    let server = Server::start().await;
    let out = Kubectl::new(&server).ok(&["api-resources", "--api-group", "coordination.k8s.io"]);
    assert!(out.contains("leases"), "{out}");
    assert!(out.contains("coordination.k8s.io/v1"), "{out}");
}
