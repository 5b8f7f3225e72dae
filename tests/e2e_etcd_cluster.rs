//! Replicas on a real 3-member etcd cluster (`common::etcd_cluster`):
//!
//! - every replica serves consistent reads (a read through one replica
//!   right after a write through the other sees it, with the same
//!   resourceVersion), lists agree, a continue token from one replica pages
//!   on the other, and a watch resumed on the other replica from the last
//!   resourceVersion seen delivers exactly the later events;
//! - under a write load through both replicas, `kill -9` of the etcd
//!   leader (restarted 5 s later), of a follower (for good), or SIGSTOP of
//!   the leader (resumed 5 s later) loses no acknowledged write: each is present
//!   once with the resourceVersion it was acknowledged with and was
//!   delivered in order to a watch that resumes when it ends; clients see
//!   only retriable errors meanwhile, and none at all when a follower is
//!   lost (a member that is down gets no requests);
//! - under the same load, `kill -9` of a replica (restarted 2 s later; the
//!   other replica's client sees no error) and then of both replicas at
//!   once (restarted together) loses no acknowledged write, and the watch
//!   resumes on the restarted replica without a gap (re-listing on a 410
//!   as a reflector does).
//!
//! The figures (writes, errors, the longest pause in acknowledged writes,
//! how soon writes resumed after an etcd election) are printed.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Server;
use common::etcd_cluster::EtcdCluster;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};

/// Two replicas on `etcd` (short leader-election timings).
async fn replicas(etcd: &EtcdCluster, tmp: &tempfile::TempDir) -> (Server, Server) {
    let servers = etcd.servers();
    let args = [
        "--etcd-servers",
        servers.as_str(),
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=500ms",
    ];
    let a = Server::start_in(&tmp.path().join("a"), common::free_port(), &args).await;
    let b = Server::start_in(&tmp.path().join("b"), common::free_port(), &args).await;
    (a, b)
}

fn config_map(name: &str, label: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("test".to_string(), label.to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn rv(cm: &ConfigMap) -> String {
    cm.metadata
        .resource_version
        .clone()
        .expect("resourceVersion")
}

fn name(cm: &ConfigMap) -> String {
    cm.metadata.name.clone().expect("name")
}

/// The next non-bookmark event of `stream` (20 s at most).
async fn next_event<S>(stream: &mut S) -> WatchEvent<ConfigMap>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
            .await
            .expect("an event within 20 s")
            .expect("watch")
            .expect("the watch still open");
        if !matches!(event, WatchEvent::Bookmark(_)) {
            return event;
        }
    }
}

#[tokio::test]
async fn replicas_on_a_three_member_cluster_agree() {
    let etcd = EtcdCluster::start(3).await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let (a, b) = replicas(&etcd, &tmp).await;
    let on_a: Api<ConfigMap> = Api::namespaced(a.client().await, "default");
    let on_b: Api<ConfigMap> = Api::namespaced(b.client().await, "default");
    let pp = PostParams::default();

    // A read through one replica right after a write through the other.
    let mut created = Vec::new();
    for i in 0..20 {
        let (write, read) = if i % 2 == 0 {
            (&on_a, &on_b)
        } else {
            (&on_b, &on_a)
        };
        let cm = write
            .create(&pp, &config_map(&format!("agree-{i:02}"), "agree"))
            .await
            .expect("create");
        let seen = read
            .get(&name(&cm))
            .await
            .expect("read through the other replica right after the write");
        assert_eq!(rv(&seen), rv(&cm), "resourceVersions agree across replicas");
        created.push((name(&cm), rv(&cm)));
    }

    // Lists agree.
    let lp = ListParams::default().labels("test=agree");
    let items = |list: kube::core::ObjectList<ConfigMap>| -> Vec<(String, String)> {
        list.items.iter().map(|c| (name(c), rv(c))).collect()
    };
    let list_a = on_a.list(&lp).await.expect("list on a");
    let from = list_a.metadata.resource_version.clone().expect("list rv");
    assert_eq!(items(list_a), created);
    assert_eq!(items(on_b.list(&lp).await.expect("list on b")), created);

    // A continue token from one replica pages on the other.
    let mut paged = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let api = if pages % 2 == 0 { &on_a } else { &on_b };
        let mut params = lp.clone().limit(7);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = api.list(&params).await.expect("page");
        pages += 1;
        token = page.metadata.continue_.clone().filter(|t| !t.is_empty());
        paged.extend(items(page));
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(paged, created, "pages from alternating replicas");

    // A watch resumed on the other replica from the last resourceVersion
    // seen: exactly the later events.
    let wp = WatchParams::default().labels("test=agree");
    let mut on_first = on_a.watch(&wp, &from).await.expect("watch on a").boxed();
    let mut updated = Vec::new();
    for (i, (n, _)) in created.iter().take(10).enumerate() {
        let api = if i % 2 == 0 { &on_a } else { &on_b };
        let patch = serde_json::json!({"data": {"i": i.to_string()}});
        let cm = api
            .patch(n, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patch");
        updated.push((n.clone(), rv(&cm)));
    }
    let mut seen = Vec::new();
    for _ in 0..5 {
        match next_event(&mut on_first).await {
            WatchEvent::Modified(cm) => seen.push((name(&cm), rv(&cm))),
            other => panic!("unexpected event {other:?}"),
        }
    }
    drop(on_first);
    let last = seen.last().expect("seen").1.clone();
    let mut on_second = on_b.watch(&wp, &last).await.expect("watch on b").boxed();
    for _ in 0..5 {
        match next_event(&mut on_second).await {
            WatchEvent::Modified(cm) => seen.push((name(&cm), rv(&cm))),
            other => panic!("unexpected event {other:?}"),
        }
    }
    assert_eq!(seen, updated, "no gap, no duplicate across the replicas");
    // Nothing more arrives (a duplicate would).
    let extra = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            match on_second.try_next().await {
                Ok(Some(WatchEvent::Bookmark(_))) => continue,
                other => return other,
            }
        }
    })
    .await;
    assert!(extra.is_err(), "no further event: {extra:?}");
}

/// What one writer saw.
#[derive(Default)]
struct Writes {
    /// name -> (resourceVersion, when acknowledged).
    acked: BTreeMap<String, (String, Instant)>,
    /// HTTP codes of refused writes (0: no HTTP answer).
    failures: Vec<(u16, String)>,
}

/// Creates ConfigMaps `<prefix>-<n>` one after another until `until`.
async fn write_load(api: Api<ConfigMap>, prefix: String, until: Instant) -> Writes {
    let mut writes = Writes::default();
    let mut n = 0;
    while Instant::now() < until {
        let cm_name = format!("{prefix}-{n:05}");
        n += 1;
        match api
            .create(&PostParams::default(), &config_map(&cm_name, "load"))
            .await
        {
            Ok(cm) => {
                writes.acked.insert(cm_name, (rv(&cm), Instant::now()));
            }
            Err(kube::Error::Api(status)) => {
                writes.failures.push((status.code, status.message.clone()));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => {
                writes.failures.push((0, e.to_string()));
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    writes
}

/// What [`watch_adds`] saw: the ADDED events as (name, resourceVersion)
/// in delivery order, and how often the watch ended and was resumed.
#[derive(Clone, Default)]
struct Watched {
    adds: Vec<(String, String)>,
    resumed: usize,
    /// How often a 410 made it re-list.
    relisted: usize,
}

/// ADDED events of a watch that resumes from the last resourceVersion it
/// saw whenever it ends: (name, resourceVersion) in delivery order, and how
/// often it resumed.
async fn watch_adds(api: Api<ConfigMap>, from: String, seen: Arc<Mutex<Watched>>) {
    let wp = WatchParams::default().labels("test=load").timeout(30);
    let mut last = from;
    loop {
        let stream = match api.watch(&wp, &last).await {
            Ok(s) => s,
            Err(kube::Error::Api(status)) if status.code == 410 => {
                // Too old for a replica that just started: re-list as a
                // reflector does, taking what came after the last event.
                last = relist(&api, &last, &seen).await;
                continue;
            }
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let mut stream = stream.boxed();
        while let Ok(Some(event)) = stream.try_next().await {
            match event {
                WatchEvent::Added(cm) => {
                    last = rv(&cm);
                    seen.lock().expect("lock").adds.push((name(&cm), rv(&cm)));
                }
                WatchEvent::Modified(cm) | WatchEvent::Deleted(cm) => last = rv(&cm),
                WatchEvent::Bookmark(b) => last = b.metadata.resource_version,
                WatchEvent::Error(e) => {
                    if e.code == 410 {
                        last = relist(&api, &last, &seen).await;
                    }
                    break;
                }
            }
        }
        seen.lock().expect("lock").resumed += 1;
    }
}

/// After a 410: lists, records the objects written after `last` as adds
/// (in resourceVersion order) and returns the list's resourceVersion to
/// watch from.
async fn relist(api: &Api<ConfigMap>, last: &str, seen: &Arc<Mutex<Watched>>) -> String {
    let after: u64 = last.parse().expect("numeric resourceVersion");
    loop {
        match api.list(&ListParams::default().labels("test=load")).await {
            Ok(list) => {
                let mut newer: Vec<(String, String)> = list
                    .items
                    .iter()
                    .filter(|c| rv(c).parse::<u64>().is_ok_and(|r| r > after))
                    .map(|c| (name(c), rv(c)))
                    .collect();
                newer.sort_by_key(|(_, r)| r.parse::<u64>().unwrap_or_default());
                let mut guard = seen.lock().expect("lock");
                guard.adds.extend(newer);
                guard.relisted += 1;
                return list
                    .metadata
                    .resource_version
                    .expect("list resourceVersion");
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// A fault injected into the etcd cluster under the write load.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// `kill -9` of the raft leader, restarted 5 s later.
    KillLeader,
    /// `kill -9` of a follower, never restarted.
    LoseFollower,
    /// SIGSTOP of the leader (cut off as by a partition), SIGCONT 5 s later.
    PauseLeader,
}

#[tokio::test]
async fn acknowledged_writes_survive_etcd_member_faults() {
    // One cluster per fault, one after another (two cores).
    for fault in [Fault::KillLeader, Fault::LoseFollower, Fault::PauseLeader] {
        under_fault(fault).await;
    }
}

/// Two writers (one per replica) and a watch for 12 s; `fault` 2 s in.
async fn under_fault(fault: Fault) {
    let mut etcd = EtcdCluster::start(3).await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let (a, b) = replicas(&etcd, &tmp).await;
    let on_a: Api<ConfigMap> = Api::namespaced(a.client_without_retries().await, "default");
    let on_b: Api<ConfigMap> = Api::namespaced(b.client_without_retries().await, "default");
    let from = on_b
        .list(&ListParams::default().labels("test=load"))
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let watched = Arc::new(Mutex::new(Watched::default()));
    let watcher = tokio::spawn(watch_adds(on_b.clone(), from, watched.clone()));

    let began = Instant::now();
    let until = began + Duration::from_secs(12);
    let writers = [
        tokio::spawn(write_load(on_a.clone(), "via-a".into(), until)),
        tokio::spawn(write_load(on_b.clone(), "via-b".into(), until)),
    ];
    tokio::time::sleep(Duration::from_secs(2)).await;
    let leader = etcd.leader().await;
    let member = match fault {
        Fault::KillLeader | Fault::PauseLeader => leader,
        Fault::LoseFollower => (leader + 1) % etcd.size(),
    };
    match fault {
        Fault::KillLeader | Fault::LoseFollower => etcd.kill(member),
        Fault::PauseLeader => etcd.pause(member),
    }
    let killed = Instant::now();
    let new_leader = etcd.leader_other_than(member).await;
    let elected = killed.elapsed();
    tokio::time::sleep(Duration::from_secs(5)).await;
    match fault {
        Fault::KillLeader => etcd.restart(member).await,
        Fault::LoseFollower => {}
        Fault::PauseLeader => etcd.resume(member),
    }

    let mut acked: BTreeMap<String, (String, Instant)> = BTreeMap::new();
    let mut failures = Vec::new();
    for writer in writers {
        let w = writer.await.expect("writer");
        acked.extend(w.acked);
        failures.extend(w.failures);
    }
    // Only retriable refusals, while etcd elected a leader.
    for (code, message) in &failures {
        assert!(
            *code == 429 || (500..600).contains(code),
            "{fault:?}: a non-retriable error: {code} {message}"
        );
    }
    if matches!(fault, Fault::LoseFollower) {
        // No election: a member that is down gets no requests.
        assert!(
            failures.is_empty(),
            "{fault:?}: refused writes: {failures:?}"
        );
    }
    let (longest_pause, resumed_at) = longest_pause_after(&acked, killed);
    let resumed_after_election = match (fault, resumed_at) {
        (Fault::LoseFollower, _) | (_, None) => "-".to_string(),
        (_, Some(t)) => format!(
            "{:.2}",
            t.saturating_duration_since(killed + elected).as_secs_f64()
        ),
    };
    let (events, resumed, relisted) =
        check_acknowledged(&format!("{fault:?}"), &acked, &watched, [&on_a, &on_b]).await;
    assert_eq!(
        relisted, 0,
        "{fault:?}: the watch expired (a gap for a client)"
    );
    watcher.abort();
    eprintln!(
        "{fault:?} (m{member}; leader was m{leader}) at {:.1} s; leader m{new_leader} after \
         {:.2} s; {} writes acknowledged, 0 lost; {} refused ({:?}); longest pause in \
         acknowledged writes after the fault {:.2} s, writes resumed {} s after the \
         election; watch: {} events, resumed {} times",
        (killed - began).as_secs_f64(),
        elected.as_secs_f64(),
        acked.len(),
        failures.len(),
        failures
            .iter()
            .map(|(c, m)| format!("{c} {m}"))
            .collect::<std::collections::BTreeSet<_>>(),
        longest_pause.as_secs_f64(),
        resumed_after_election,
        events,
        resumed
    );
}

/// The longest pause between acknowledged writes that ends after `from`,
/// and when it ended.
fn longest_pause_after(
    acked: &BTreeMap<String, (String, Instant)>,
    from: Instant,
) -> (Duration, Option<Instant>) {
    let mut times: Vec<Instant> = acked.values().map(|(_, t)| *t).collect();
    times.sort();
    times
        .windows(2)
        .filter(|w| w[1] > from)
        .map(|w| (w[1] - w[0], Some(w[1])))
        .max()
        .unwrap_or_default()
}

/// Every acknowledged write is there exactly once with the resourceVersion
/// it was acknowledged with, through every replica, and the watch saw each
/// of them once, in resourceVersion order. Returns the events the watch
/// saw, how often it resumed and how often it re-listed.
async fn check_acknowledged(
    what: &str,
    acked: &BTreeMap<String, (String, Instant)>,
    watched: &Arc<Mutex<Watched>>,
    replicas: [&Api<ConfigMap>; 2],
) -> (usize, usize, usize) {
    for api in replicas {
        let list = api
            .list(&ListParams::default().labels("test=load"))
            .await
            .expect("list after the faults");
        let stored: BTreeMap<String, String> =
            list.items.iter().map(|c| (name(c), rv(c))).collect();
        assert_eq!(stored.len(), list.items.len(), "no duplicate names");
        for (n, (r, _)) in acked {
            assert_eq!(
                stored.get(n),
                Some(r),
                "{what}: acknowledged write {n} lost or changed"
            );
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = {
            let guard = watched.lock().expect("lock");
            let names: HashSet<&String> = guard.adds.iter().map(|(n, _)| n).collect();
            acked.keys().filter(|n| names.contains(n)).count()
        };
        if seen == acked.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the watch missed acknowledged writes ({seen} of {} seen)",
            acked.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let Watched {
        adds: events,
        resumed,
        relisted,
    } = watched.lock().expect("lock").clone();
    let mut names = HashSet::new();
    let mut previous = 0u64;
    for (n, r) in &events {
        assert!(names.insert(n.clone()), "{what}: {n} delivered twice");
        let r: u64 = r.parse().expect("numeric resourceVersion");
        assert!(r > previous, "{what}: events out of order at {n}");
        previous = r;
        if let Some((acked_rv, _)) = acked.get(n) {
            assert_eq!(acked_rv, &r.to_string());
        }
    }
    (events.len(), resumed, relisted)
}

/// Under a write load through both replicas (on a healthy 3-member etcd
/// cluster): `kill -9` of replica a, restarted 2 s later, then `kill -9`
/// of both replicas at once and both restarted. No acknowledged write is
/// lost; the client of the surviving replica sees no error while a is
/// down; the watch on b ends when b goes and resumes (re-listing after a
/// 410, as a reflector does, if the restarted replica's cache is newer).
#[tokio::test]
async fn acknowledged_writes_survive_replica_kills_and_restarts() {
    let etcd = EtcdCluster::start(3).await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let (mut a, mut b) = replicas(&etcd, &tmp).await;
    let args_servers = etcd.servers();
    let args = [
        "--etcd-servers",
        args_servers.as_str(),
        "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s",
        "--leader-elect-retry-period=500ms",
    ];
    let (dir_a, port_a) = (tmp.path().join("a"), a.port);
    let (dir_b, port_b) = (tmp.path().join("b"), b.port);
    let on_a: Api<ConfigMap> = Api::namespaced(a.client_without_retries().await, "default");
    let on_b: Api<ConfigMap> = Api::namespaced(b.client_without_retries().await, "default");
    let from = on_b
        .list(&ListParams::default().labels("test=load"))
        .await
        .expect("list")
        .metadata
        .resource_version
        .expect("rv");
    let watched = Arc::new(Mutex::new(Watched::default()));
    let watcher = tokio::spawn(watch_adds(on_b.clone(), from, watched.clone()));

    // Phase 1: a is killed and restarted; b's client must see nothing.
    let began = Instant::now();
    let phase1 = began + Duration::from_secs(7);
    let via_a = tokio::spawn(write_load(on_a.clone(), "via-a1".into(), phase1));
    let via_b = tokio::spawn(write_load(on_b.clone(), "via-b1".into(), phase1));
    tokio::time::sleep(Duration::from_secs(2)).await;
    a.kill();
    let killed = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    a = Server::start_in(&dir_a, port_a, &args).await;
    let a_back = killed.elapsed();
    let mut acked: BTreeMap<String, (String, Instant)> = BTreeMap::new();
    let mut failures_a = Vec::new();
    let w = via_a.await.expect("writer");
    acked.extend(w.acked);
    failures_a.extend(w.failures);
    let w = via_b.await.expect("writer");
    assert!(
        w.failures.is_empty(),
        "the surviving replica refused writes: {:?}",
        w.failures
    );
    acked.extend(w.acked);

    // Phase 2: both replicas killed at once and restarted.
    let phase2 = Instant::now() + Duration::from_secs(12);
    let via_a = tokio::spawn(write_load(on_a.clone(), "via-a2".into(), phase2));
    let via_b = tokio::spawn(write_load(on_b.clone(), "via-b2".into(), phase2));
    tokio::time::sleep(Duration::from_secs(2)).await;
    a.kill();
    b.kill();
    let all_killed = Instant::now();
    let (a2, b2) = tokio::join!(
        Server::start_in(&dir_a, port_a, &args),
        Server::start_in(&dir_b, port_b, &args)
    );
    let all_back = all_killed.elapsed();
    let mut failures = Vec::new();
    for writer in [via_a, via_b] {
        let w = writer.await.expect("writer");
        acked.extend(w.acked);
        failures.extend(w.failures);
    }
    for (code, message) in failures.iter().chain(&failures_a) {
        assert!(
            *code == 0 || *code == 429 || (500..600).contains(code),
            "a non-retriable error: {code} {message}"
        );
    }
    let (pause, _) = longest_pause_after(&acked, all_killed);
    let (events, resumed, relisted) =
        check_acknowledged("replica faults", &acked, &watched, [&on_a, &on_b]).await;
    watcher.abort();
    eprintln!(
        "replica faults: a killed and ready again after {:.2} s (restarted after 2 s), b's \
         client saw no error; both killed, restarted at once and ready after {:.2} s, no write \
         acknowledged for {:.2} s; \
         {} writes acknowledged, 0 lost; {} refused while replicas were down; watch: {} \
         events, resumed {} times, re-listed {} times",
        a_back.as_secs_f64(),
        all_back.as_secs_f64(),
        pause.as_secs_f64(),
        acked.len(),
        failures.len() + failures_a.len(),
        events,
        resumed,
        relisted
    );
    drop((a2, b2));
}
