//! The garbage collector (kube-controller-manager's
//! `pkg/controller/garbagecollector`): deletes objects whose owners are
//! all gone, orphans the dependents of objects deleted with the `orphan`
//! finalizer, and deletes the dependents of objects deleted in the
//! foreground before removing their `foregroundDeletion` finalizer.
//!
//! It works on every kind the server serves, through the erased kind
//! interface of the stores:
//!
//! - one informer per kind watches the kind's store (served by the watch
//!   cache) and feeds what it sees into the `graph`, which keeps only
//!   each object's identity, owner references and dependents — never the
//!   objects themselves;
//! - the graph turns changes into work on two queues, like kube's
//!   `attemptToDelete` and `attemptToOrphan`;
//! - workers look objects and owners up in storage (live reads, not the
//!   cache) before they delete or change anything, so a graph that lags
//!   behind never deletes an object that still has an owner.
//!
//! Only one replica runs it: the holder of the controllers' Lease
//! (`kube-system/apiforge-controller-manager`, [`leader_election`], see
//! [`super::start`]).
//!
//! kube records an `OwnerRefInvalidNamespace` Event for a cross-namespace
//! owner reference; this server has no Events kind, so it logs the same
//! text at warn level instead.
//!
//! [`leader_election`]: super::leader_election

mod graph;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::Value;
use tokio::sync::Notify;

use self::graph::{
    Change, Graph, NodeView, ObjectRef, Observed, OwnerRef, OwnerState, Partial, Verdict, Work,
};
use crate::error::{ApiError, ApiResult};
use apiforge_storage as storage;

use crate::registry::{
    FINALIZER_FOREGROUND, FINALIZER_ORPHAN, ListParams, Preconditions, Propagation, Store, Stores,
    WatchEvent,
};

/// Workers of the `attemptToDelete` queue (kube: `--concurrent-gc-syncs`,
/// 20, shared by both queues).
const DELETE_WORKERS: usize = 8;
/// Workers of the `attemptToOrphan` queue.
const ORPHAN_WORKERS: usize = 2;
/// First and longest delay of an item retried after a failure (kube's
/// per-item exponential rate limiter starts at 5 ms).
const RETRY_BASE: Duration = Duration::from_millis(5);
const RETRY_MAX: Duration = Duration::from_secs(10);
/// Pause before an informer watches again after its watch ended.
const REWATCH: Duration = Duration::from_secs(1);

/// Where an informer's next watch starts, as a client-go reflector keeps
/// its last resourceVersion: a watch that ended (its queue fell behind
/// the writes, or the connection to storage went) resumes after the last
/// event handled, and only a first watch, one that ended before its
/// initial events did, or one refused with 410 Gone (the events it missed
/// left the watch cache's window) lists the whole kind again. Listing
/// again costs as much as the kind holds: with a million objects, every
/// re-list took long enough for the live events to overflow the queue
/// once more, and the informer never caught up.
#[derive(Debug, Default)]
struct Cursor {
    /// The revision after which the next watch resumes; `None` while the
    /// kind is (to be) listed: a listing watch's initial events come in
    /// key order, so their revisions are no place to resume from, and its
    /// place is set by the bookmark that ends them.
    resume: Option<storage::Revision>,
}

impl Cursor {
    /// The parameters of the next watch.
    fn params(&self) -> ListParams {
        match self.resume {
            Some(rv) => ListParams {
                resource_version: Some(rv),
                ..Default::default()
            },
            None => ListParams {
                send_initial_events: Some(true),
                ..Default::default()
            },
        }
    }

    /// Whether the current watch lists the kind first (until its initial
    /// events end).
    fn lists(&self) -> bool {
        self.resume.is_none()
    }

    /// Records an event of the current watch.
    fn saw(&mut self, event: &WatchEvent) {
        match event {
            WatchEvent::Object(_, object) if !self.lists() => {
                self.resume = Some(object.revision);
            }
            WatchEvent::Bookmark(rv) if !self.lists() => self.resume = Some(*rv),
            WatchEvent::InitialEventsEnd(rv) => self.resume = Some(*rv),
            WatchEvent::Error(status) if status.code == 410 => self.resume = None,
            _ => {}
        }
    }
}

/// Runs the collector over the kinds served until `stop` turns true; when
/// the served kinds change (custom resources come or go), it starts over
/// with the new kinds, as kube's collector resyncs its monitors.
pub async fn run(stores: Stores, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut changes = stores.changes();
    loop {
        changes.borrow_and_update();
        let kinds = Arc::new(Kinds::new(&stores));
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut running = tokio::spawn(GarbageCollector::new(kinds).run(stop_rx));
        let restart = tokio::select! {
            _ = &mut running => return,
            _ = stop.wait_for(|stop| *stop) => false,
            changed = changes.changed() => changed.is_ok(),
        };
        let _ = stop_tx.send(true);
        let _ = running.await;
        if !restart {
            return;
        }
        // Definitions often come in a burst: start over once.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One served kind: its store and how owner references name it.
struct KindEntry {
    store: Store,
    group: &'static str,
    kind: &'static str,
    versions: Vec<&'static str>,
    namespaced: bool,
}

impl KindEntry {
    /// The namespace `at` lives in for this kind (none when the kind is
    /// cluster-scoped).
    fn namespace_of<'a>(&self, at: &'a ObjectRef) -> &'a str {
        if self.namespaced { &at.namespace } else { "" }
    }

    fn api_version(&self) -> String {
        let version = self.versions.first().copied().unwrap_or_default();
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }
}

/// Every served kind (kube's REST mapper, for the kinds of this server).
struct Kinds(Vec<KindEntry>);

impl Kinds {
    fn new(stores: &Stores) -> Self {
        let mut entries: Vec<KindEntry> = Vec::new();
        let mut served: Vec<_> = stores.iter().collect();
        served.sort_by_key(|(_, info)| (info.group, info.kind, info.version));
        for (store, info) in served {
            // Subresource stores share the kind's storage; one entry per kind.
            match entries
                .iter_mut()
                .find(|e| Arc::ptr_eq(e.store.kind(), store.kind()))
            {
                Some(entry) => {
                    if !entry.versions.contains(&info.version) {
                        entry.versions.push(info.version);
                    }
                }
                None => entries.push(KindEntry {
                    store: store.clone(),
                    group: info.group,
                    kind: info.kind,
                    versions: vec![info.version],
                    namespaced: info.namespaced(),
                }),
            }
        }
        for entry in &mut entries {
            // The kind's preferred version first.
            let preferred = entry.store.kind().storage_info().version;
            entry.versions.sort_by_key(|v| *v != preferred);
        }
        Kinds(entries)
    }

    /// The kind an owner reference's `apiVersion` and `kind` name (the
    /// version must be served, as kube's REST mapping requires).
    fn resolve(&self, api_version: &str, kind: &str) -> Option<&KindEntry> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.0
            .iter()
            .find(|e| e.group == group && e.kind == kind && e.versions.contains(&version))
    }
}

/// Why a work item failed.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// A request to a store failed.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// An owner reference names a kind this server does not serve (kube's
    /// `restMappingError`; retried, as the kind may appear).
    #[error("unable to get REST mapping for {api_version}/{kind}")]
    UnknownKind { api_version: String, kind: String },
}

/// What to do with a work item after it ran.
enum Outcome {
    /// Done.
    Forget,
    /// Look again later (rate limited).
    Requeue,
}

/// A work queue as client-go's: an item is queued at most once, and an
/// item added while a worker has it runs again after that worker is done.
/// Its `workqueue_*` metrics carry its `name`, as client-go's.
struct Queue {
    name: &'static str,
    state: Mutex<QueueState>,
    ready: Notify,
}

#[derive(Default)]
struct QueueState {
    order: VecDeque<String>,
    queued: HashSet<String>,
    active: HashSet<String>,
    dirty: HashSet<String>,
    failures: HashMap<String, u32>,
    /// When each queued item was added; when each active item was taken.
    since: HashMap<String, Instant>,
}

impl Queue {
    fn new(name: &'static str) -> Self {
        crate::metrics::global()
            .workqueue_depth
            .with_label_values(&[name])
            .set(0);
        Queue {
            name,
            state: Mutex::default(),
            ready: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, uid: String) {
        let metrics = crate::metrics::global();
        metrics.workqueue_adds.with_label_values(&[self.name]).inc();
        let mut state = self.lock();
        if state.active.contains(&uid) {
            state.dirty.insert(uid);
            return;
        }
        if state.queued.insert(uid.clone()) {
            state.since.insert(uid.clone(), Instant::now());
            state.order.push_back(uid);
            metrics
                .workqueue_depth
                .with_label_values(&[self.name])
                .inc();
            drop(state);
            self.ready.notify_one();
        }
    }

    async fn get(&self) -> String {
        loop {
            {
                let mut state = self.lock();
                if let Some(uid) = state.order.pop_front() {
                    state.queued.remove(&uid);
                    state.active.insert(uid.clone());
                    let metrics = crate::metrics::global();
                    metrics
                        .workqueue_depth
                        .with_label_values(&[self.name])
                        .dec();
                    if let Some(added) = state.since.insert(uid.clone(), Instant::now()) {
                        metrics
                            .workqueue_queue_duration
                            .with_label_values(&[self.name])
                            .observe(added.elapsed().as_secs_f64());
                    }
                    if !state.order.is_empty() {
                        self.ready.notify_one();
                    }
                    return uid;
                }
            }
            self.ready.notified().await;
        }
    }

    /// Marks `uid` done; with `retry`, adds it again after its backoff.
    fn done(self: &Arc<Self>, uid: &str, retry: bool) {
        let metrics = crate::metrics::global();
        let mut state = self.lock();
        state.active.remove(uid);
        if let Some(taken) = state.since.remove(uid) {
            metrics
                .workqueue_work_duration
                .with_label_values(&[self.name])
                .observe(taken.elapsed().as_secs_f64());
        }
        let again = state.dirty.remove(uid);
        if !retry {
            state.failures.remove(uid);
            drop(state);
            if again {
                self.add(uid.to_string());
            }
            return;
        }
        metrics
            .workqueue_retries
            .with_label_values(&[self.name])
            .inc();
        let failures = state.failures.entry(uid.to_string()).or_insert(0);
        let delay = RETRY_BASE
            .saturating_mul(2u32.saturating_pow((*failures).min(20)))
            .min(RETRY_MAX);
        *failures += 1;
        drop(state);
        if again {
            self.add(uid.to_string());
            return;
        }
        let queue = self.clone();
        let uid = uid.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(uid);
        });
    }
}

/// Which informers have delivered their initial list.
#[derive(Default)]
struct Synced {
    kinds: Mutex<HashSet<usize>>,
    /// Notified once every kind is synced.
    all: Notify,
}

impl Synced {
    fn kind_synced(&self, index: usize, of: usize) {
        let mut kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        if kinds.insert(index) && kinds.len() == of {
            self.all.notify_one();
        }
    }
}

/// One run of the garbage collector (one term of leadership).
struct GarbageCollector {
    kinds: Arc<Kinds>,
    graph: Arc<Mutex<Graph>>,
    deletes: Arc<Queue>,
    orphans: Arc<Queue>,
}

impl Clone for GarbageCollector {
    fn clone(&self) -> Self {
        GarbageCollector {
            kinds: self.kinds.clone(),
            graph: self.graph.clone(),
            deletes: self.deletes.clone(),
            orphans: self.orphans.clone(),
        }
    }
}

impl GarbageCollector {
    fn new(kinds: Arc<Kinds>) -> Self {
        GarbageCollector {
            kinds,
            graph: Arc::new(Mutex::new(Graph::default())),
            deletes: Arc::new(Queue::new("garbage_collector_attempt_to_delete")),
            orphans: Arc::new(Queue::new("garbage_collector_attempt_to_orphan")),
        }
    }

    fn graph(&self) -> std::sync::MutexGuard<'_, Graph> {
        self.graph.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs until `stop` turns true. The informers apply what they see to
    /// the graph themselves (no hop through another task per event). The
    /// workers start once every informer has delivered its initial list
    /// (kube's `WaitForCacheSync`), so that nothing is orphaned or
    /// collected on a half-built graph; work queues up meanwhile.
    async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        tracing::info!(kinds = self.kinds.0.len(), "garbage collector: starting");
        let mut tasks = tokio::task::JoinSet::new();
        let synced = Arc::new(Synced::default());
        for index in 0..self.kinds.0.len() {
            tasks.spawn(self.clone().inform(index, synced.clone()));
        }
        let synced_now = tokio::select! {
            () = synced.all.notified() => true,
            _ = stop.wait_for(|stop| *stop) => false,
        };
        if synced_now {
            tracing::info!("garbage collector: graph synced; collecting");
            self.start_workers(&mut tasks);
            let _ = stop.wait_for(|stop| *stop).await;
        }
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
        tracing::info!("garbage collector: stopped");
    }

    fn start_workers(&self, tasks: &mut tokio::task::JoinSet<()>) {
        for _ in 0..DELETE_WORKERS {
            let gc = self.clone();
            tasks.spawn(async move {
                loop {
                    let uid = gc.deletes.get().await;
                    let outcome = gc.attempt_to_delete(&uid).await;
                    gc.deletes.done(&uid, gc.retry(&uid, "delete", outcome));
                }
            });
        }
        for _ in 0..ORPHAN_WORKERS {
            let gc = self.clone();
            tasks.spawn(async move {
                loop {
                    let uid = gc.orphans.get().await;
                    let outcome = gc.attempt_to_orphan(&uid).await;
                    gc.orphans.done(&uid, gc.retry(&uid, "orphan", outcome));
                }
            });
        }
    }

    /// Whether a work item's outcome asks for a retry (logging failures).
    fn retry(&self, uid: &str, what: &str, outcome: Result<Outcome, Error>) -> bool {
        match outcome {
            Ok(Outcome::Forget) => false,
            Ok(Outcome::Requeue) => true,
            Err(e @ Error::UnknownKind { .. }) => {
                tracing::debug!(%uid, error = %e, "garbage collector: {what} failed");
                true
            }
            Err(e) => {
                tracing::warn!(%uid, error = %e, "garbage collector: {what} failed");
                true
            }
        }
    }

    /// Applies a change to the graph and queues the work it makes.
    fn apply(&self, change: Change) {
        let (work, invalid) = {
            let mut graph = self.graph();
            let work = graph.apply(change);
            (work, graph.take_invalid())
        };
        for i in invalid {
            report_invalid_namespace(&i.dependent, &i.owner);
        }
        for w in work {
            match w {
                Work::Delete(uid) => self.deletes.add(uid),
                Work::Orphan(uid) => self.orphans.add(uid),
            }
        }
    }

    /// The informer of kind `index`: watches its store (initial events
    /// first, then changes) and sends what it sees; after a watch ends it
    /// watches again and reports the objects that went meanwhile.
    async fn inform(self, index: usize, synced: Arc<Synced>) {
        let Some(entry) = self.kinds.0.get(index) else {
            return;
        };
        let api_version = entry.api_version();
        let mut cursor = Cursor::default();
        loop {
            let mut events = match entry.store.watch(None, &cursor.params(), true).await {
                Ok(events) => events,
                Err(e) => {
                    tracing::warn!(kind = entry.kind, error = %e, "garbage collector: watch failed");
                    tokio::time::sleep(REWATCH).await;
                    continue;
                }
            };
            let mut initial = cursor.lists().then(HashSet::new);
            while let Some(event) = events.next().await {
                cursor.saw(&event);
                match event {
                    WatchEvent::Object(kind, cached) => {
                        let Ok(partial) = cached.parse::<Partial>() else {
                            continue;
                        };
                        let Some(observed) =
                            Observed::from_partial(partial, &api_version, entry.kind)
                        else {
                            continue;
                        };
                        if let Some(seen) = &mut initial {
                            seen.insert(observed.identity.uid.clone());
                        }
                        let change = if kind == "DELETED" {
                            Change::Deleted(observed)
                        } else {
                            Change::Observed(observed)
                        };
                        self.apply(change);
                    }
                    WatchEvent::InitialEventsEnd(_) => {
                        if let Some(seen) = initial.take() {
                            self.apply(Change::Relisted {
                                group: entry.group.to_string(),
                                kind: entry.kind.to_string(),
                                seen,
                            });
                            synced.kind_synced(index, self.kinds.0.len());
                        }
                    }
                    WatchEvent::Bookmark(_) => {}
                    WatchEvent::Error(status) => {
                        tracing::debug!(kind = entry.kind, message = %status.message, "garbage collector: watch ended");
                        break;
                    }
                }
            }
            tokio::time::sleep(REWATCH).await;
        }
    }

    /// Reads the object at `identity` from storage; `None` when it is gone
    /// (or another object has its name).
    async fn live(&self, entry: &KindEntry, identity: &ObjectRef) -> ApiResult<Option<Value>> {
        match entry
            .store
            .get_live(entry.namespace_of(identity), &identity.name)
            .await
        {
            Ok(obj) => {
                let uid = obj.pointer("/metadata/uid").and_then(Value::as_str);
                Ok((uid == Some(identity.uid.as_str())).then_some(obj))
            }
            Err(e) if e.code() == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn resolve(&self, api_version: &str, kind: &str) -> Result<&KindEntry, Error> {
        self.kinds
            .resolve(api_version, kind)
            .ok_or_else(|| Error::UnknownKind {
                api_version: api_version.to_string(),
                kind: kind.to_string(),
            })
    }

    /// kube's `attemptToDeleteItem`.
    async fn attempt_to_delete(&self, uid: &str) -> Result<Outcome, Error> {
        let Some(node) = self.graph().node(uid) else {
            return Ok(Outcome::Forget);
        };
        // Being deleted is a one-way trip: its dependents are looked at
        // when it is gone.
        if node.deleting && !node.deleting_dependents {
            return Ok(Outcome::Forget);
        }
        let entry = self.resolve(&node.identity.api_version, &node.identity.kind)?;
        if entry.namespaced && node.identity.namespace.is_empty() {
            // A namespaced kind named as the owner of cluster-scoped objects
            // has no namespace to be looked up in: those references can
            // never resolve (kube: `namespacedOwnerOfClusterScopedObjectErr`).
            let owner = OwnerRef {
                api_version: node.identity.api_version.to_string(),
                kind: node.identity.kind.to_string(),
                name: node.identity.name.clone(),
                uid: node.identity.uid.clone(),
                block: false,
            };
            for dependent in self.graph().dependents(uid) {
                if dependent.namespace.is_empty() {
                    report_invalid_namespace(&dependent, &owner);
                }
            }
            return Ok(Outcome::Forget);
        }
        let Some(latest) = self.live(entry, &node.identity).await? else {
            // Absent: a virtual delete removes the node and looks at its
            // dependents.
            self.apply(Change::Absent(node.identity.clone()));
            return Ok(Outcome::Forget);
        };
        if node.virtual_
            && let Some(found) = Observed::of(&latest, &entry.api_version(), entry.kind)
        {
            // An owner only named so far exists: the graph knows it now
            // (its informer reports later changes).
            self.apply(Change::Found(found));
        }
        if node.deleting_dependents {
            return self.finish_foreground(entry, &node).await;
        }
        let owners = OwnerRef::all_of(&latest);
        if owners.is_empty() {
            return Ok(Outcome::Forget);
        }
        let mut states = Vec::with_capacity(owners.len());
        for owner in owners {
            match self.owner_state(&owner, &node.identity).await? {
                Some(state) => states.push((owner, state)),
                // A cluster-scoped object naming a namespaced owner: never
                // resolves, so nothing to retry.
                None => return Ok(Outcome::Forget),
            }
        }
        let finalizers = Observed::of(&latest, "", "").unwrap_or_default();
        let (has_dependents, dependent_deleting_dependents) = {
            let graph = self.graph();
            (
                node.has_dependents,
                graph.has_dependent_deleting_dependents(uid),
            )
        };
        let verdict = graph::decide(
            &states,
            has_dependents,
            dependent_deleting_dependents,
            finalizers.orphan,
            finalizers.foreground,
        );
        let resource_version = latest
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        match verdict {
            Verdict::Keep => {}
            Verdict::DropRefs(drop) if drop.is_empty() => {}
            Verdict::DropRefs(drop) => {
                tracing::debug!(object = %describe(&node.identity), ?drop, "garbage collector: removing references to owners that are gone or being deleted");
                self.change_owner_refs(entry, &node.identity, |refs| {
                    refs.retain(|r| {
                        !r.get("uid")
                            .and_then(Value::as_str)
                            .is_some_and(|u| drop.iter().any(|d| d == u))
                    })
                })
                .await?;
            }
            Verdict::Delete { policy, unblock } => {
                if unblock {
                    self.change_owner_refs(entry, &node.identity, |refs| {
                        for r in refs.iter_mut() {
                            if r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true)
                                && let Some(map) = r.as_object_mut()
                            {
                                map.insert("blockOwnerDeletion".into(), Value::Bool(false));
                            }
                        }
                    })
                    .await?;
                }
                tracing::debug!(object = %describe(&node.identity), policy = policy.as_str(), "garbage collector: deleting a dependent whose owners are gone or being deleted in the foreground");
                let pre = Preconditions {
                    uid: Some(node.identity.uid.clone()),
                    resource_version,
                };
                match entry
                    .store
                    .delete_propagating(
                        &node.identity.namespace,
                        &node.identity.name,
                        &pre,
                        false,
                        &Propagation::policy(policy),
                    )
                    .await
                {
                    Ok(_) => {}
                    Err(e) if e.code() == 404 => {}
                    // Changed meanwhile: look again.
                    Err(e) if e.code() == 409 => return Ok(Outcome::Requeue),
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(Outcome::Forget)
    }

    /// The state of `owner` of `dependent` (kube's `isDangling` and
    /// `classifyReferences`); `None` for a cluster-scoped dependent naming
    /// a namespaced owner.
    async fn owner_state(
        &self,
        owner: &OwnerRef,
        dependent: &ObjectRef,
    ) -> Result<Option<OwnerState>, Error> {
        if self.graph().is_absent(owner, &dependent.namespace) {
            return Ok(Some(OwnerState::Dangling));
        }
        let entry = self.resolve(&owner.api_version, &owner.kind)?;
        if entry.namespaced && dependent.namespace.is_empty() {
            report_invalid_namespace(dependent, owner);
            return Ok(None);
        }
        let namespace = entry.namespace_of(dependent).to_string();
        let at = ObjectRef {
            api_version: owner.api_version.as_str().into(),
            kind: owner.kind.as_str().into(),
            namespace: namespace.as_str().into(),
            name: owner.name.clone(),
            uid: owner.uid.clone(),
        };
        let Some(found) = self.live(entry, &at).await? else {
            self.graph().mark_absent(owner, &namespace);
            return Ok(Some(OwnerState::Dangling));
        };
        let state = Observed::of(&found, "", "").unwrap_or_default();
        Ok(Some(if state.deleting && state.foreground {
            OwnerState::WaitingForDependents
        } else {
            OwnerState::Solid
        }))
    }

    /// An owner deleted in the foreground: removes its finalizer when no
    /// blocking dependent is left, or looks at the blocking ones (kube's
    /// `processDeletingDependentsItem`).
    async fn finish_foreground(
        &self,
        entry: &KindEntry,
        node: &NodeView,
    ) -> Result<Outcome, Error> {
        let blocking = self.graph().blocking_dependents(&node.identity.uid);
        if blocking.is_empty() {
            tracing::debug!(object = %describe(&node.identity), "garbage collector: no blocking dependents left; removing the foregroundDeletion finalizer");
            self.remove_finalizer(entry, &node.identity, FINALIZER_FOREGROUND)
                .await?;
            return Ok(Outcome::Forget);
        }
        for (dep, deleting_dependents) in blocking {
            if !deleting_dependents {
                self.deletes.add(dep);
            }
        }
        Ok(Outcome::Forget)
    }

    /// kube's `attemptToOrphanWorker`: removes the owner's reference from
    /// each dependent, then the `orphan` finalizer from the owner.
    async fn attempt_to_orphan(&self, uid: &str) -> Result<Outcome, Error> {
        let (node, dependents) = {
            let graph = self.graph();
            (graph.node(uid), graph.dependents(uid))
        };
        let Some(node) = node else {
            return Ok(Outcome::Forget);
        };
        for dep in dependents {
            let entry = self.resolve(&dep.api_version, &dep.kind)?;
            self.change_owner_refs(entry, &dep, |refs| {
                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
            })
            .await?;
        }
        let entry = self.resolve(&node.identity.api_version, &node.identity.kind)?;
        self.remove_finalizer(entry, &node.identity, FINALIZER_ORPHAN)
            .await?;
        tracing::debug!(object = %describe(&node.identity), "garbage collector: dependents orphaned");
        Ok(Outcome::Forget)
    }

    /// Edits the metadata of the object at `at`, if it is still the same
    /// object (same uid); `edit` says whether it changed anything (only
    /// then is it written).
    async fn edit_metadata(
        &self,
        entry: &KindEntry,
        at: &ObjectRef,
        mut edit: impl FnMut(&mut serde_json::Map<String, Value>) -> bool + Send,
    ) -> ApiResult<()> {
        entry
            .store
            .update_internal(entry.namespace_of(at), &at.name, |obj| {
                if obj.pointer("/metadata/uid").and_then(Value::as_str) != Some(at.uid.as_str()) {
                    return false;
                }
                obj.get_mut("metadata")
                    .and_then(Value::as_object_mut)
                    .is_some_and(&mut edit)
            })
            .await?;
        Ok(())
    }

    /// Edits the owner references of the object at `at` (if it is still
    /// the same object), writing only when they changed.
    async fn change_owner_refs(
        &self,
        entry: &KindEntry,
        at: &ObjectRef,
        mut edit: impl FnMut(&mut Vec<Value>) + Send,
    ) -> ApiResult<()> {
        self.edit_metadata(entry, at, |meta| {
            let Some(refs) = meta.get("ownerReferences").and_then(Value::as_array) else {
                return false;
            };
            let mut edited = refs.clone();
            edit(&mut edited);
            if &edited == refs {
                return false;
            }
            if edited.is_empty() {
                meta.remove("ownerReferences");
            } else {
                meta.insert("ownerReferences".into(), Value::Array(edited));
            }
            true
        })
        .await
    }

    /// Removes `finalizer` from the object at `at` (which then goes when
    /// it was the last one).
    async fn remove_finalizer(
        &self,
        entry: &KindEntry,
        at: &ObjectRef,
        finalizer: &str,
    ) -> ApiResult<()> {
        self.edit_metadata(entry, at, |meta| {
            let Some(list) = meta.get_mut("finalizers").and_then(Value::as_array_mut) else {
                return false;
            };
            let before = list.len();
            list.retain(|f| f.as_str() != Some(finalizer));
            if list.len() == before {
                return false;
            }
            if list.is_empty() {
                meta.remove("finalizers");
            }
            true
        })
        .await
    }
}

/// `kind namespace/name` of an object, for logs.
fn describe(at: &ObjectRef) -> String {
    if at.namespace.is_empty() {
        format!("{} {} ({})", at.kind, at.name, at.uid)
    } else {
        format!("{} {}/{} ({})", at.kind, at.namespace, at.name, at.uid)
    }
}

/// kube's `OwnerRefInvalidNamespace` event, as a warning in the log (this
/// server has no Events kind), with the event's message.
fn report_invalid_namespace(dependent: &ObjectRef, owner: &OwnerRef) {
    tracing::warn!(
        reason = "OwnerRefInvalidNamespace",
        object = %describe(dependent),
        "ownerRef [{}/{}, namespace: {}, name: {}, uid: {}] does not exist in namespace {:?}",
        owner.api_version,
        owner.kind,
        dependent.namespace,
        owner.name,
        owner.uid,
        dependent.namespace
    );
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use apiforge_core::meta::Status;
    use serde_json::json;

    use super::Cursor;
    use crate::registry::WatchEvent;
    use crate::registry::cache::CachedObject;

    fn object(revision: i64) -> WatchEvent {
        WatchEvent::Object(
            "ADDED",
            Arc::new(CachedObject::new(
                format!("/registry/x/{revision}"),
                revision,
                json!({}),
            )),
        )
    }

    #[test]
    fn a_watch_resumes_after_the_last_event_and_lists_again_only_when_gone() {
        let mut c = Cursor::default();
        // The first watch lists; its initial events (key order) are no
        // place to resume from.
        let p = c.params();
        assert!(c.lists());
        assert_eq!(
            (p.send_initial_events, p.resource_version),
            (Some(true), None)
        );
        c.saw(&object(7));
        c.saw(&object(3));
        c.saw(&WatchEvent::InitialEventsEnd(9));
        c.saw(&object(10));
        c.saw(&object(12));
        // It ended (fell behind): the next resumes after revision 12.
        let p = c.params();
        assert!(!c.lists());
        assert_eq!(
            (p.send_initial_events, p.resource_version),
            (None, Some(12))
        );
        c.saw(&WatchEvent::Bookmark(20));
        assert_eq!(c.params().resource_version, Some(20));
        // An error other than 410 keeps the place.
        c.saw(&WatchEvent::Error(Box::new(Status::internal("boom"))));
        assert_eq!(c.params().resource_version, Some(20));
        // 410 Gone: list again.
        c.saw(&WatchEvent::Error(Box::new(Status::expired("too old"))));
        let p = c.params();
        assert!(c.lists());
        assert_eq!(
            (p.send_initial_events, p.resource_version),
            (Some(true), None)
        );
        // A listing watch that ends before its initial events did lists
        // again.
        c.saw(&object(30));
        assert!(c.params().resource_version.is_none());
    }
}
