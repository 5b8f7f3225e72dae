//! Two replicas on one etcd run the singleton controllers once, as
//! kube-controller-manager does: the holder of the Lease
//! `kube-system/apiforge-controller-manager` runs the namespace controller;
//! namespace deletion works through either replica; when the leader is
//! killed (`kill -9`) the other replica takes the lease over within the
//! lease duration and finishes a namespace deletion; a namespace deleted
//! and re-created at once under the same name keeps its `kubernetes`
//! finalizer and its objects. Short `--leader-elect-*` timings keep it
//! fast.

mod common;

use std::time::{Duration, Instant};

use common::{Server, eventually};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

const LEASE: &str = "apiforge-controller-manager";
/// `--leader-elect-lease-duration` of the replicas.
const LEASE_DURATION: Duration = Duration::from_secs(3);
const FINALIZED: &str = "namespace controller: namespace emptied and finalized";
const ACQUIRED: &str = "leader election: acquired the lease";

struct Cluster {
    _etcd: common::Etcd,
    replicas: Vec<Server>,
    _tmp: tempfile::TempDir,
}

async fn two_replicas(leader_elect: bool) -> Cluster {
    let etcd = common::Etcd::start().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let args = [
        "--etcd-servers",
        etcd.url.as_str(),
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=500ms",
        if leader_elect {
            "--leader-elect=true"
        } else {
            "--leader-elect=false"
        },
    ];
    let a = Server::start_in(&tmp.path().join("a"), common::free_port(), &args).await;
    let b = Server::start_in(&tmp.path().join("b"), common::free_port(), &args).await;
    Cluster {
        _etcd: etcd,
        replicas: vec![a, b],
        _tmp: tmp,
    }
}

async fn lease(client: &kube::Client) -> Option<k8s_openapi::api::coordination::v1::LeaseSpec> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    leases.get_opt(LEASE).await.expect("get lease")?.spec
}

/// The index of the replica holding the lease (its identity is in its
/// log), once one does.
async fn leader(c: &Cluster) -> usize {
    let client = c.replicas[0].client().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let holder = lease(&client)
            .await
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty());
        if let Some(holder) = holder {
            let holding: Vec<usize> = (0..c.replicas.len())
                .filter(|&i| c.replicas[i].log().contains(&holder))
                .collect();
            if let [i] = holding[..] {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "no leader");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn named<K: kube::Resource<DynamicType = ()> + Default>(name: &str) -> K {
    let mut k = K::default();
    *k.meta_mut() = ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    };
    k
}

async fn create_ns_with(client: &kube::Client, ns: &str, configmaps: &[&str]) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(&PostParams::default(), &named(ns))
        .await
        .expect("create namespace");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for name in configmaps {
        cms.create(&PostParams::default(), &named(name))
            .await
            .expect("create configmap");
    }
}

async fn gone(client: &kube::Client, ns: &str) -> bool {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .get_opt(ns)
        .await
        .expect("get namespace")
        .is_none()
}

/// One replica leads and runs the namespace controller; deletions through
/// either replica are carried out by it; killed, the other one takes over
/// within the lease duration and finishes a deletion.
#[tokio::test]
async fn one_namespace_controller_per_cluster_and_takeover() {
    let mut c = two_replicas(true).await;
    let lead = leader(&c).await;
    let follow = 1 - lead;
    // The follower keeps trying; it must not lead too.
    tokio::time::sleep(LEASE_DURATION + Duration::from_secs(1)).await;
    assert!(
        !c.replicas[follow].log().contains(ACQUIRED),
        "two leaders; follower log:\n{}",
        c.replicas[follow].log()
    );
    assert_eq!(leader(&c).await, lead);
    // Deletion through either replica: the leader's controller does it.
    for (i, ns) in [(follow, "via-follower"), (lead, "via-leader")] {
        let client = c.replicas[i].client().await;
        create_ns_with(&client, ns, &["a", "b"]).await;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .delete(ns, &DeleteParams::default())
            .await
            .expect("delete namespace");
        eventually(&c.replicas[lead], &format!("{ns} deleted"), || async {
            gone(&client, ns).await
        })
        .await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        assert!(cms.get_opt("a").await.expect("get").is_none());
    }
    assert!(c.replicas[lead].log().contains(FINALIZED));
    assert!(
        !c.replicas[follow].log().contains("namespace controller:"),
        "the follower ran the namespace controller:\n{}",
        c.replicas[follow].log()
    );

    // kill -9 the leader; delete a namespace through the follower at once.
    let client = c.replicas[follow].client().await;
    create_ns_with(&client, "after-takeover", &["a"]).await;
    let before = lease(&client).await.expect("lease");
    c.replicas[lead].kill();
    let killed = Instant::now();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete("after-takeover", &DeleteParams::default())
        .await
        .expect("delete namespace");
    // The follower saw the lease renewed at most a retry period before
    // the kill; it takes over once the lease duration passed on its clock,
    // at its next retry.
    let limit = LEASE_DURATION + Duration::from_secs(3);
    while !c.replicas[follow].log().contains(ACQUIRED) {
        assert!(
            killed.elapsed() < limit,
            "no takeover within {limit:?}; log:\n{}",
            c.replicas[follow].log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let takeover = killed.elapsed();
    let after = lease(&client).await.expect("lease");
    assert_ne!(after.holder_identity, before.holder_identity);
    assert_eq!(
        after.lease_transitions,
        before.lease_transitions.map(|t| t + 1)
    );
    eventually(&c.replicas[follow], "deleted by the new leader", || async {
        gone(&client, "after-takeover").await
    })
    .await;
    eprintln!(
        "takeover {takeover:?} after kill -9 (lease duration {LEASE_DURATION:?}); namespace gone {:?} after",
        killed.elapsed()
    );
    assert!(c.replicas[follow].log().contains(FINALIZED));
}

/// A namespace deleted through one replica and re-created through the
/// other as soon as the name is free, with objects (one of the old
/// object's name), keeps its `kubernetes` finalizer and its objects; over
/// a few rounds.
#[tokio::test]
async fn recreated_namespace_keeps_its_finalizer_and_objects() {
    let c = two_replicas(true).await;
    leader(&c).await;
    recreate_rounds(&c).await;
}

/// The same with `--leader-elect=false`: both replicas run the namespace
/// controller, and its uid preconditions alone keep the re-created
/// namespace whole.
#[tokio::test]
async fn recreated_namespace_survives_two_namespace_controllers() {
    let c = two_replicas(false).await;
    let client = c.replicas[0].client().await;
    assert!(lease(&client).await.is_none(), "no election");
    recreate_rounds(&c).await;
    for r in &c.replicas {
        assert!(!r.log().contains(ACQUIRED));
    }
}

async fn recreate_rounds(c: &Cluster) {
    let first = c.replicas[0].client().await;
    let second = c.replicas[1].client().await;
    create_ns_with(&first, "again", &["old", "same"]).await;
    for round in 0..4 {
        let (deleter, creator) = if round % 2 == 0 {
            (&first, &second)
        } else {
            (&second, &first)
        };
        let namespaces: Api<Namespace> = Api::all(deleter.clone());
        namespaces
            .delete("again", &DeleteParams::default())
            .await
            .expect("delete namespace");
        // Re-create as soon as the name is free.
        let recreate: Api<Namespace> = Api::all(creator.clone());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match recreate
                .create(&PostParams::default(), &named("again"))
                .await
            {
                Ok(_) => break,
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => panic!("re-create: {e}"),
            }
            assert!(Instant::now() < deadline, "old namespace never went");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let cms: Api<ConfigMap> = Api::namespaced(creator.clone(), "again");
        for name in ["same", "new"] {
            cms.create(&PostParams::default(), &named(name))
                .await
                .expect("create configmap in the new namespace");
        }
        // Give a late controller time to act wrongly.
        tokio::time::sleep(Duration::from_secs(2)).await;
        for client in [&first, &second] {
            let ns = Api::<Namespace>::all(client.clone())
                .get("again")
                .await
                .expect("the new namespace");
            assert!(ns.metadata.deletion_timestamp.is_none(), "round {round}");
            assert_eq!(
                ns.spec.and_then(|s| s.finalizers),
                Some(vec!["kubernetes".to_string()]),
                "round {round}: the new namespace keeps its finalizer"
            );
            let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "again");
            for name in ["same", "new"] {
                assert!(
                    cms.get_opt(name).await.expect("get").is_some(),
                    "round {round}: configmap {name} of the new namespace deleted; logs:\n{}\n---\n{}",
                    c.replicas[0].log(),
                    c.replicas[1].log()
                );
            }
            assert!(cms.get_opt("old").await.expect("get").is_none());
        }
    }
}

fn gadgets_crd() -> kube::api::DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    }))
    .expect("definition")
}

fn crds(client: &kube::Client) -> Api<kube::api::DynamicObject> {
    Api::all_with(
        client.clone(),
        &kube::api::ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            plural: "customresourcedefinitions".into(),
        },
    )
}

fn gadgets(client: &kube::Client) -> Api<kube::api::DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        "default",
        &kube::api::ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            api_version: "example.com/v1".into(),
            kind: "Gadget".into(),
            plural: "gadgets".into(),
        },
    )
}

/// Creates gadget `name` through `client` once its replica serves the kind.
async fn create_gadget(server: &Server, client: &kube::Client, name: &str) {
    let body: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": name}}))
    .expect("gadget");
    eventually(server, &format!("gadget {name} created"), || async {
        gadgets(client)
            .create(&PostParams::default(), &body)
            .await
            .is_ok()
    })
    .await;
}

/// A definition deleted through the follower is finalized by the leader
/// (its resources deleted, then the definition); one re-created at once
/// under the same name keeps its new resources.
#[tokio::test]
async fn definition_finalized_once_and_recreated_one_kept() {
    let c = two_replicas(true).await;
    let lead = leader(&c).await;
    let follow = 1 - lead;
    let (fc, lc) = (
        c.replicas[follow].client().await,
        c.replicas[lead].client().await,
    );
    crds(&fc)
        .create(&PostParams::default(), &gadgets_crd())
        .await
        .expect("create definition");
    create_gadget(&c.replicas[follow], &fc, "one").await;
    create_gadget(&c.replicas[lead], &lc, "two").await;
    crds(&fc)
        .delete("gadgets.example.com", &DeleteParams::default())
        .await
        .expect("delete definition");
    eventually(&c.replicas[lead], "definition finalized", || async {
        crds(&fc)
            .get_opt("gadgets.example.com")
            .await
            .is_ok_and(|d| d.is_none())
    })
    .await;
    // Re-created at once, with a resource of an old name.
    crds(&lc)
        .create(&PostParams::default(), &gadgets_crd())
        .await
        .expect("re-create definition");
    create_gadget(&c.replicas[follow], &fc, "one").await;
    create_gadget(&c.replicas[lead], &lc, "three").await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for client in [&fc, &lc] {
        let crd = crds(client)
            .get("gadgets.example.com")
            .await
            .expect("the new definition");
        assert!(crd.metadata.deletion_timestamp.is_none());
        for name in ["one", "three"] {
            assert!(
                gadgets(client).get_opt(name).await.expect("get").is_some(),
                "gadget {name} of the new definition deleted"
            );
        }
        assert!(gadgets(client).get_opt("two").await.expect("get").is_none());
    }
}
