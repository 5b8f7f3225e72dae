//! The garbage collector and deletion propagation, on the real binary
//! with kube-rs (and kubectl's `--cascade`): background, foreground (with
//! blocking and non-blocking dependents of two kinds), orphan, dangling
//! owners, chains of three levels and dependents created after their
//! owner went — on the embedded store and on etcd; one collector per
//! cluster (leader election between two replicas). The DeleteOptions
//! validation errors are kube-apiserver's.

mod common;

use std::time::{Duration, Instant};

use common::kubectl::Kubectl;
use common::{Server, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

async fn gone<K>(api: &Api<K>, name: &str) -> bool
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.expect("get").is_none()
}

/// A reference to `owner` of kind `kind` (`v1`).
fn owner_ref<K: Resource>(owner: &K, kind: &str, block: Option<bool>) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: kind.into(),
        name: owner.meta().name.clone().expect("name"),
        uid: owner.meta().uid.clone().expect("uid"),
        block_owner_deletion: block,
        controller: None,
    }
}

fn meta(name: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        owner_references: (!owners.is_empty()).then_some(owners),
        ..Default::default()
    }
}

/// The namespaced APIs one scenario uses, in its own namespace.
struct Apis {
    cms: Api<ConfigMap>,
    secrets: Api<Secret>,
}

impl Apis {
    async fn new(client: &kube::Client, ns: &str) -> Apis {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &Namespace {
                    metadata: meta(ns, vec![]),
                    ..Default::default()
                },
            )
            .await
            .expect("create namespace");
        Apis {
            cms: Api::namespaced(client.clone(), ns),
            secrets: Api::namespaced(client.clone(), ns),
        }
    }

    async fn cm(&self, name: &str, owners: Vec<OwnerReference>) -> ConfigMap {
        self.cms
            .create(
                &PostParams::default(),
                &ConfigMap {
                    metadata: meta(name, owners),
                    ..Default::default()
                },
            )
            .await
            .expect("create configmap")
    }

    async fn secret(&self, name: &str, owners: Vec<OwnerReference>) -> Secret {
        self.secrets
            .create(
                &PostParams::default(),
                &Secret {
                    metadata: meta(name, owners),
                    ..Default::default()
                },
            )
            .await
            .expect("create secret")
    }
}

/// Background (and the default, which is background): the owner goes at
/// once, its dependents of two kinds after it.
async fn background(server: &Server, client: &kube::Client) {
    let a = Apis::new(client, "gc-background").await;
    for (owner_name, params) in [
        ("bg-owner", DeleteParams::background()),
        ("default-owner", DeleteParams::default()),
    ] {
        let owner = a.cm(owner_name, vec![]).await;
        let r = owner_ref(&owner, "ConfigMap", None);
        a.cm(&format!("{owner_name}-cm1"), vec![r.clone()]).await;
        a.cm(&format!("{owner_name}-cm2"), vec![r.clone()]).await;
        a.secret(&format!("{owner_name}-s1"), vec![r]).await;
        let deleted = a.cms.delete(owner_name, &params).await.expect("delete");
        assert!(deleted.is_right(), "the owner goes at once: {deleted:?}");
        assert!(gone(&a.cms, owner_name).await);
        eventually(server, "background dependents collected", || async {
            gone(&a.cms, &format!("{owner_name}-cm1")).await
                && gone(&a.cms, &format!("{owner_name}-cm2")).await
                && gone(&a.secrets, &format!("{owner_name}-s1")).await
        })
        .await;
    }
}

/// Foreground: the owner waits (deletionTimestamp, `foregroundDeletion`)
/// for its blocking dependents; non-blocking ones go too.
async fn foreground(server: &Server, client: &kube::Client) {
    let a = Apis::new(client, "gc-foreground").await;
    let owner = a.cm("fg-owner", vec![]).await;
    let block = owner_ref(&owner, "ConfigMap", Some(true));
    let free = owner_ref(&owner, "ConfigMap", Some(false));
    // A blocking dependent that a finalizer of its own holds.
    let mut held = ConfigMap {
        metadata: meta("fg-held", vec![block.clone()]),
        ..Default::default()
    };
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    a.cms
        .create(&PostParams::default(), &held)
        .await
        .expect("create held");
    a.cm("fg-blocking", vec![block.clone()]).await;
    a.secret("fg-blocking-secret", vec![block]).await;
    a.secret("fg-free", vec![free]).await;

    let deleted = a
        .cms
        .delete("fg-owner", &DeleteParams::foreground())
        .await
        .expect("delete");
    let terminating = deleted.left().expect("the owner waits for its dependents");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert!(
        terminating
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .contains(&"foregroundDeletion".to_string()),
        "{:?}",
        terminating.metadata
    );
    eventually(server, "unheld dependents deleted", || async {
        gone(&a.cms, "fg-blocking").await
            && gone(&a.secrets, "fg-blocking-secret").await
            && gone(&a.secrets, "fg-free").await
    })
    .await;
    // The held dependent is terminating, and blocks the owner.
    let held = a.cms.get("fg-held").await.expect("held");
    assert!(held.metadata.deletion_timestamp.is_some());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let owner = a.cms.get("fg-owner").await.expect("owner still there");
    assert!(owner.metadata.deletion_timestamp.is_some());
    // Releasing it lets both go.
    a.cms
        .patch(
            "fg-held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("release the held dependent");
    eventually(server, "foreground owner removed", || async {
        gone(&a.cms, "fg-held").await && gone(&a.cms, "fg-owner").await
    })
    .await;

    // Several dependents of two kinds, all blocking.
    let owner = a.cm("fg-many", vec![]).await;
    let r = owner_ref(&owner, "ConfigMap", Some(true));
    for i in 0..3 {
        a.cm(&format!("fg-many-cm{i}"), vec![r.clone()]).await;
        a.secret(&format!("fg-many-s{i}"), vec![r.clone()]).await;
    }
    a.cms
        .delete("fg-many", &DeleteParams::foreground())
        .await
        .expect("delete");
    eventually(server, "foreground with several dependents", || async {
        let mut all = gone(&a.cms, "fg-many").await;
        for i in 0..3 {
            all &= gone(&a.cms, &format!("fg-many-cm{i}")).await;
            all &= gone(&a.secrets, &format!("fg-many-s{i}")).await;
        }
        all
    })
    .await;
}

/// Orphan: the owner goes once the dependents no longer name it; they stay.
async fn orphan(server: &Server, client: &kube::Client) {
    let a = Apis::new(client, "gc-orphan").await;
    let owner = a.cm("orphan-owner", vec![]).await;
    let other = a.cm("other-owner", vec![]).await;
    let r = owner_ref(&owner, "ConfigMap", Some(true));
    a.cm("orphan-cm", vec![r.clone()]).await;
    a.secret(
        "orphan-secret",
        vec![r, owner_ref(&other, "ConfigMap", None)],
    )
    .await;
    let deleted = a
        .cms
        .delete("orphan-owner", &DeleteParams::orphan())
        .await
        .expect("delete");
    let terminating = deleted.left().expect("the owner waits for orphaning");
    assert_eq!(
        terminating.metadata.finalizers.as_deref(),
        Some(&["orphan".to_string()][..])
    );
    eventually(server, "orphaned owner removed", || async {
        gone(&a.cms, "orphan-owner").await
    })
    .await;
    let cm = a.cms.get("orphan-cm").await.expect("dependent stays");
    assert_eq!(cm.metadata.owner_references, None);
    let secret = a
        .secrets
        .get("orphan-secret")
        .await
        .expect("dependent stays");
    let refs = secret.metadata.owner_references.unwrap_or_default();
    assert_eq!(refs.len(), 1, "{refs:?}");
    assert_eq!(refs[0].name, "other-owner");
    // Still there a while later.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!gone(&a.cms, "orphan-cm").await);

    // DeleteCollection with the orphan policy: every owner goes, the
    // dependents stay without their reference.
    let mut owners = Vec::new();
    for i in 0..2 {
        let mut owner = ConfigMap {
            metadata: meta(&format!("coll-owner-{i}"), vec![]),
            ..Default::default()
        };
        owner.metadata.labels = Some([("gc-collection".to_string(), "owner".to_string())].into());
        owners.push(
            a.cms
                .create(&PostParams::default(), &owner)
                .await
                .expect("create owner"),
        );
    }
    for (i, owner) in owners.iter().enumerate() {
        a.secret(
            &format!("coll-dep-{i}"),
            vec![owner_ref(owner, "ConfigMap", Some(true))],
        )
        .await;
    }
    a.cms
        .delete_collection(
            &DeleteParams::orphan(),
            &kube::api::ListParams::default().labels("gc-collection=owner"),
        )
        .await
        .expect("delete collection");
    eventually(server, "collection owners removed", || async {
        gone(&a.cms, "coll-owner-0").await && gone(&a.cms, "coll-owner-1").await
    })
    .await;
    for i in 0..2 {
        let dep = a
            .secrets
            .get(&format!("coll-dep-{i}"))
            .await
            .expect("dependent stays");
        assert_eq!(dep.metadata.owner_references, None);
    }
}

/// Owners that never existed, or whose name another object now has, are
/// dangling; a dependent with one solid owner stays and loses the
/// dangling reference.
async fn dangling(server: &Server, client: &kube::Client) {
    let a = Apis::new(client, "gc-dangling").await;
    let ghost = OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "ghost".into(),
        uid: "00000000-0000-0000-0000-000000000001".into(),
        block_owner_deletion: None,
        controller: None,
    };
    a.cm("haunted", vec![ghost.clone()]).await;
    let impostor = a.cm("impostor", vec![]).await;
    let mut wrong_uid = owner_ref(&impostor, "ConfigMap", None);
    wrong_uid.uid = "00000000-0000-0000-0000-000000000002".into();
    a.secret("misled", vec![wrong_uid]).await;
    let solid = a.cm("solid", vec![]).await;
    a.cm(
        "half",
        vec![ghost.clone(), owner_ref(&solid, "ConfigMap", None)],
    )
    .await;
    eventually(server, "dangling dependents collected", || async {
        gone(&a.cms, "haunted").await && gone(&a.secrets, "misled").await
    })
    .await;
    eventually(server, "dangling reference removed", || async {
        let half = a.cms.get("half").await.expect("half stays");
        half.metadata
            .owner_references
            .is_some_and(|r| r.len() == 1 && r[0].name == "solid")
    })
    .await;
    assert!(!gone(&a.cms, "impostor").await);

    // A namespaced owner is looked for in the dependent's namespace: one
    // of the same name and uid elsewhere does not count (kube's
    // OwnerRefInvalidNamespace, logged here).
    let elsewhere = Apis::new(client, "gc-dangling-elsewhere").await;
    let far = elsewhere.cm("far-owner", vec![]).await;
    a.cm("cross-ns", vec![owner_ref(&far, "ConfigMap", None)])
        .await;
    eventually(server, "cross-namespace dependent collected", || async {
        gone(&a.cms, "cross-ns").await
    })
    .await;
    assert!(!gone(&elsewhere.cms, "far-owner").await);
    eventually(server, "OwnerRefInvalidNamespace logged", || async {
        server.log().contains("OwnerRefInvalidNamespace")
    })
    .await;

    // A cluster-scoped owner (a Namespace) is found from any namespace.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    // Cluster-scoped dependents: one naming a namespaced owner kind can
    // never be resolved and stays (logged); one whose cluster-scoped owner
    // is gone is collected.
    let namespaced_owner = OwnerReference {
        name: "ghost-cm".into(),
        uid: "00000000-0000-0000-0000-000000000003".into(),
        ..ghost.clone()
    };
    let gone_namespace = OwnerReference {
        kind: "Namespace".into(),
        name: "gone-namespace".into(),
        uid: "00000000-0000-0000-0000-000000000004".into(),
        ..ghost.clone()
    };
    for (name, owner) in [
        ("gc-cluster-invalid", namespaced_owner),
        ("gc-cluster-dangling", gone_namespace),
    ] {
        namespaces
            .create(
                &PostParams::default(),
                &Namespace {
                    metadata: meta(name, vec![owner]),
                    ..Default::default()
                },
            )
            .await
            .expect("create namespace");
    }
    eventually(server, "cluster-scoped dependent collected", || async {
        gone(&namespaces, "gc-cluster-dangling").await
    })
    .await;
    eventually(server, "the invalid reference logged", || async {
        server.log().contains("name: ghost-cm")
    })
    .await;
    let invalid = namespaces.get("gc-cluster-invalid").await.expect("stays");
    assert!(invalid.metadata.deletion_timestamp.is_none());
    let ns = namespaces
        .get("gc-dangling-elsewhere")
        .await
        .expect("namespace");
    a.cm("ns-owned", vec![owner_ref(&ns, "Namespace", None)])
        .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!gone(&a.cms, "ns-owned").await, "its owner exists");
}

/// Chains of three levels, in the background and in the foreground.
async fn chains(server: &Server, client: &kube::Client) {
    let a = Apis::new(client, "gc-chains").await;
    for (prefix, params) in [
        ("bg", DeleteParams::background()),
        ("fg", DeleteParams::foreground()),
    ] {
        let top = a.cm(&format!("{prefix}-top"), vec![]).await;
        let mid = a
            .cm(
                &format!("{prefix}-mid"),
                vec![owner_ref(&top, "ConfigMap", Some(true))],
            )
            .await;
        a.secret(
            &format!("{prefix}-bottom"),
            vec![owner_ref(&mid, "ConfigMap", Some(true))],
        )
        .await;
        a.cms
            .delete(&format!("{prefix}-top"), &params)
            .await
            .expect("delete");
        eventually(server, "chain collected", || async {
            gone(&a.cms, &format!("{prefix}-top")).await
                && gone(&a.cms, &format!("{prefix}-mid")).await
                && gone(&a.secrets, &format!("{prefix}-bottom")).await
        })
        .await;
    }
}

/// A dependent created after its owner was deleted is collected.
async fn late_dependent(server: &Server, client: &kube::Client) {
    let a = Apis::new(client, "gc-late").await;
    let owner = a.cm("late-owner", vec![]).await;
    let r = owner_ref(&owner, "ConfigMap", None);
    a.cms
        .delete("late-owner", &DeleteParams::default())
        .await
        .expect("delete");
    a.cm("late-cm", vec![r.clone()]).await;
    a.secret("late-secret", vec![r]).await;
    eventually(server, "late dependents collected", || async {
        gone(&a.cms, "late-cm").await && gone(&a.secrets, "late-secret").await
    })
    .await;
}

/// Every scenario on one server.
async fn all_scenarios(server: &Server) {
    let client = server.client().await;
    background(server, &client).await;
    foreground(server, &client).await;
    orphan(server, &client).await;
    dangling(server, &client).await;
    chains(server, &client).await;
    late_dependent(server, &client).await;
}

#[tokio::test]
async fn garbage_collection_on_the_embedded_store() {
    let server = Server::start().await;
    all_scenarios(&server).await;
}

#[tokio::test]
async fn garbage_collection_on_etcd() {
    let etcd = common::Etcd::start().await;
    let server = Server::start_with(&["--etcd-servers", &etcd.url]).await;
    all_scenarios(&server).await;
    // One replica holds the controllers' lease (the collector runs under it).
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(server.client().await, "kube-system");
    let lease = leases
        .get("apiforge-controller-manager")
        .await
        .expect("lease");
    let spec = lease.spec.expect("spec");
    assert!(spec.holder_identity.is_some_and(|h| !h.is_empty()), "held");
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert!(spec.renew_time.is_some() && spec.acquire_time.is_some());
    assert_eq!(spec.lease_transitions, Some(0));
}

/// kube-apiserver's DeleteOptions validation errors.
#[tokio::test]
async fn delete_options_validation() {
    let server = Server::start().await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    cms.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: meta("v", vec![]),
            ..Default::default()
        },
    )
    .await
    .expect("create");
    let path = "/api/v1/namespaces/default/configmaps/v";
    let both = common::raw::request(
        &server,
        "DELETE",
        path,
        &[("Content-Type", "application/json")],
        br#"{"orphanDependents": true, "propagationPolicy": "Foreground"}"#,
    )
    .await;
    assert_eq!(both.status, 422, "{}", both.text());
    let body = both.json();
    assert_eq!(
        body["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Invalid value: \"Foreground\": orphanDependents and deletionPropagation cannot be both set"
    );
    assert_eq!(body["reason"], "Invalid");
    assert_eq!(body["details"]["kind"], "DeleteOptions");
    assert_eq!(body["details"]["group"], "meta.k8s.io");
    assert_eq!(body["details"]["causes"][0]["field"], "propagationPolicy");
    assert_eq!(body["details"]["causes"][0]["reason"], "FieldValueInvalid");

    let unknown = common::raw::request(
        &server,
        "DELETE",
        &format!("{path}?propagationPolicy=Sideways"),
        &[],
        b"",
    )
    .await;
    assert_eq!(unknown.status, 422, "{}", unknown.text());
    assert_eq!(
        unknown.json()["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
    );
    let query_both = common::raw::request(
        &server,
        "DELETE",
        &format!("{path}?orphanDependents=false&propagationPolicy=Orphan"),
        &[],
        b"",
    )
    .await;
    assert_eq!(query_both.status, 422, "{}", query_both.text());
    // Nothing was deleted.
    assert!(cms.get_opt("v").await.expect("get").is_some());
    // orphanDependents=false alone: background, 200 when removed at once.
    let ok = common::raw::request(
        &server,
        "DELETE",
        &format!("{path}?orphanDependents=false"),
        &[],
        b"",
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.text());

    // A dry run with the orphan policy shows the finalizer, changes nothing.
    let mut held = ConfigMap {
        metadata: meta("held", vec![]),
        ..Default::default()
    };
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &held)
        .await
        .expect("create");
    let held_path = "/api/v1/namespaces/default/configmaps/held";
    let dry = common::raw::request(
        &server,
        "DELETE",
        &format!("{held_path}?dryRun=All&propagationPolicy=Orphan"),
        &[],
        b"",
    )
    .await;
    assert_eq!(dry.status, 200, "{}", dry.text());
    assert_eq!(
        dry.json()["metadata"]["finalizers"],
        json!(["example.com/hold", "orphan"])
    );
    let stored = cms.get("held").await.expect("get");
    assert_eq!(stored.metadata.deletion_timestamp, None);
    assert_eq!(
        stored.metadata.finalizers,
        Some(vec!["example.com/hold".to_string()])
    );
    // orphanDependents=false on an object that stays: 202 Accepted, no
    // deletion finalizer (background).
    let accepted = common::raw::request(
        &server,
        "DELETE",
        held_path,
        &[("Content-Type", "application/json")],
        br#"{"orphanDependents": false}"#,
    )
    .await;
    assert_eq!(accepted.status, 202, "{}", accepted.text());
    assert_eq!(
        accepted.json()["metadata"]["finalizers"],
        json!(["example.com/hold"])
    );
}

/// `kubectl delete --cascade=background|foreground|orphan`.
#[tokio::test]
async fn kubectl_delete_cascade() {
    let server = Server::start().await;
    let client = server.client().await;
    let a = Apis::new(&client, "gc-kubectl").await;
    let kubectl = Kubectl::new(&server);
    for cascade in ["background", "foreground", "orphan"] {
        let owner = a.cm(&format!("{cascade}-owner"), vec![]).await;
        a.secret(
            &format!("{cascade}-dep"),
            vec![owner_ref(&owner, "ConfigMap", Some(true))],
        )
        .await;
        let out = kubectl.ok(&[
            "delete",
            "configmap",
            &format!("{cascade}-owner"),
            "-n",
            "gc-kubectl",
            &format!("--cascade={cascade}"),
        ]);
        assert!(
            out.contains(&format!("configmap \"{cascade}-owner\" deleted")),
            "{out}"
        );
        eventually(&server, "owner removed", || async {
            gone(&a.cms, &format!("{cascade}-owner")).await
        })
        .await;
        if cascade == "orphan" {
            let dep = a.secrets.get("orphan-dep").await.expect("orphan stays");
            assert_eq!(dep.metadata.owner_references, None);
        } else {
            eventually(&server, "dependent removed", || async {
                gone(&a.secrets, &format!("{cascade}-dep")).await
            })
            .await;
        }
    }
}

/// Two replicas on one etcd: one holds the collector's lease; when it dies
/// the other takes the lease over (after the 15 s lease duration) and
/// collects.
#[tokio::test]
async fn one_collector_per_cluster_and_takeover() {
    let etcd = common::Etcd::start().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let etcd_args = ["--etcd-servers", etcd.url.as_str()];
    let first = Server::start_in(&tmp.path().join("a"), common::free_port(), &etcd_args).await;
    let second = Server::start_in(&tmp.path().join("b"), common::free_port(), &etcd_args).await;
    let acquired = |s: &Server| s.log().contains("leader election: acquired the lease");
    eventually(&first, "a replica leads", || async {
        acquired(&first) || acquired(&second)
    })
    .await;
    // Let the other one try a few times: it must not lead too.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        acquired(&first) != acquired(&second),
        "exactly one leader; logs:\n{}\n---\n{}",
        first.log(),
        second.log()
    );
    let (mut leader, follower) = if acquired(&first) {
        (first, second)
    } else {
        (second, first)
    };
    let client = follower.client().await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "kube-system");
    let before = leases
        .get("apiforge-controller-manager")
        .await
        .expect("lease")
        .spec
        .expect("spec");
    leader.kill();
    // The lease expires 15 s after its last renewal as the follower saw it.
    let deadline = Instant::now() + Duration::from_secs(45);
    while !acquired(&follower) {
        assert!(
            Instant::now() < deadline,
            "no takeover; log:\n{}",
            follower.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let after = leases
        .get("apiforge-controller-manager")
        .await
        .expect("lease")
        .spec
        .expect("spec");
    assert_ne!(after.holder_identity, before.holder_identity);
    assert_eq!(
        after.lease_transitions,
        before.lease_transitions.map(|t| t + 1)
    );
    // The new leader collects.
    let a = Apis::new(&client, "gc-takeover").await;
    let owner = a.cm("owner", vec![]).await;
    a.secret("dep", vec![owner_ref(&owner, "ConfigMap", None)])
        .await;
    a.cms
        .delete("owner", &DeleteParams::background())
        .await
        .expect("delete");
    eventually(&follower, "collected by the new leader", || async {
        gone(&a.secrets, "dep").await
    })
    .await;
}
