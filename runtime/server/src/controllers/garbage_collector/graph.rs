//! The garbage collector's dependency graph (kube's `GraphBuilder` and
//! `node`): one node per object uid with its identity, its owner
//! references and the uids of its dependents, and nothing else of the
//! object. Owners named by a dependent but not (yet) observed are
//! "virtual" nodes until an event or a lookup settles them.
//!
//! Everything here is pure: [`Graph::apply`] takes an observed change and
//! returns the work it makes (uids to look at again), and [`decide`]
//! turns the state of a dependent's owners into what to do with it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::registry::{FINALIZER_FOREGROUND, FINALIZER_ORPHAN, PropagationPolicy};

/// Where an object is: enough to look it up again.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct ObjectRef {
    /// `apiVersion` (`v1`, `group/version`); shared by the nodes of a kind.
    pub api_version: Arc<str>,
    /// Kind; shared by the nodes of a kind.
    pub kind: Arc<str>,
    /// Namespace (empty for cluster-scoped objects, and for virtual nodes
    /// named by cluster-scoped dependents); shared by the graph's nodes of
    /// a namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: String,
    /// Uid.
    pub uid: String,
}

/// The group of an `apiVersion` (`""` for `v1`).
pub(super) fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(group, _)| group)
}

impl ObjectRef {
    /// Whether `owner` names this object by its coordinates (group, kind
    /// and name; the version does not matter).
    fn matches(&self, owner: &OwnerRef) -> bool {
        group_of(&self.api_version) == group_of(&owner.api_version)
            && *self.kind == *owner.kind
            && self.name == owner.name
    }
}

/// One entry of `metadata.ownerReferences`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct OwnerRef {
    /// `apiVersion` of the owner.
    pub api_version: String,
    /// Kind of the owner.
    pub kind: String,
    /// Name of the owner.
    pub name: String,
    /// Uid of the owner.
    pub uid: String,
    /// `blockOwnerDeletion: true`.
    pub block: bool,
}

impl OwnerRef {
    /// The owner references of `obj` (entries without a uid are skipped).
    pub(super) fn all_of(obj: &Value) -> Vec<OwnerRef> {
        let text = |r: &Value, f: &str| {
            r.get(f)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        obj.pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .map(|r| OwnerRef {
                        api_version: text(r, "apiVersion"),
                        kind: text(r, "kind"),
                        name: text(r, "name"),
                        uid: text(r, "uid"),
                        block: r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true),
                    })
                    .filter(|r| !r.uid.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Where the owner would be for a dependent in `namespace`.
    fn as_virtual(&self, namespace: &str) -> ObjectRef {
        ObjectRef {
            api_version: self.api_version.as_str().into(),
            kind: self.kind.as_str().into(),
            namespace: namespace.into(),
            name: self.name.clone(),
            uid: self.uid.clone(),
        }
    }
}

/// What the graph keeps of an observed object.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Observed {
    /// Where it is.
    pub identity: ObjectRef,
    /// Its owner references.
    pub owners: Vec<OwnerRef>,
    /// It has a `deletionTimestamp`.
    pub deleting: bool,
    /// It has the `orphan` finalizer.
    pub orphan: bool,
    /// It has the `foregroundDeletion` finalizer.
    pub foreground: bool,
}

/// The parts of an object the graph reads (everything else is skipped
/// while parsing).
#[derive(Debug, Default, Deserialize)]
pub(super) struct Partial {
    #[serde(default)]
    metadata: PartialMeta,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartialMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    deletion_timestamp: Option<IgnoredAny>,
    #[serde(default)]
    finalizers: Vec<String>,
    #[serde(default)]
    owner_references: Vec<PartialOwner>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartialOwner {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    block_owner_deletion: Option<bool>,
}

impl Observed {
    /// The facts of `obj`, an object of `api_version` and `kind`.
    pub(super) fn of(obj: &Value, api_version: &str, kind: &str) -> Option<Observed> {
        let partial = Partial::deserialize(obj).ok()?;
        Observed::from_partial(partial, api_version, kind)
    }

    /// The facts of a parsed object of `api_version` and `kind` (`None`
    /// without a uid).
    pub(super) fn from_partial(
        partial: Partial,
        api_version: &str,
        kind: &str,
    ) -> Option<Observed> {
        let meta = partial.metadata;
        if meta.uid.is_empty() {
            return None;
        }
        let has = |f: &str| meta.finalizers.iter().any(|x| x == f);
        Some(Observed {
            orphan: has(FINALIZER_ORPHAN),
            foreground: has(FINALIZER_FOREGROUND),
            deleting: meta.deletion_timestamp.is_some(),
            owners: meta
                .owner_references
                .into_iter()
                .filter(|r| !r.uid.is_empty())
                .map(|r| OwnerRef {
                    api_version: r.api_version,
                    kind: r.kind,
                    name: r.name,
                    uid: r.uid,
                    block: r.block_owner_deletion == Some(true),
                })
                .collect(),
            identity: ObjectRef {
                api_version: api_version.into(),
                kind: kind.into(),
                namespace: meta.namespace.into(),
                name: meta.name,
                uid: meta.uid,
            },
        })
    }
}

/// A change to apply to the graph.
#[derive(Clone, Debug)]
pub(super) enum Change {
    /// An object was added or changed.
    Observed(Observed),
    /// A lookup found an object the graph only knew as a virtual owner
    /// (it becomes an observed node; ignored otherwise).
    Found(Observed),
    /// An object was deleted (its last state).
    Deleted(Observed),
    /// A lookup found no object at this identity (a "virtual delete").
    Absent(ObjectRef),
    /// A relist of the kind `(group, kind)` saw exactly these uids; the
    /// others of that kind are gone.
    Relisted {
        /// The kind's group.
        group: String,
        /// The kind.
        kind: String,
        /// The uids the relist saw.
        seen: HashSet<String>,
    },
}

/// Work the graph asks for after a change.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Work {
    /// Look at the object: delete it if its owners are gone, finish its
    /// foreground deletion (kube's `attemptToDelete` queue).
    Delete(String),
    /// Orphan its dependents, then remove its `orphan` finalizer (kube's
    /// `attemptToOrphan` queue).
    Orphan(String),
}

/// A cross-namespace owner reference kube reports as the
/// `OwnerRefInvalidNamespace` event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct InvalidNamespace {
    /// The dependent.
    pub dependent: ObjectRef,
    /// Its reference to the owner.
    pub owner: OwnerRef,
}

#[derive(Clone, Debug, Default)]
struct Node {
    identity: ObjectRef,
    /// Not observed, only named as an owner.
    virtual_: bool,
    deleting: bool,
    /// Being deleted with the `foregroundDeletion` finalizer.
    deleting_dependents: bool,
    /// Being deleted with the `orphan` finalizer.
    orphaning: bool,
    owners: Vec<OwnerRef>,
}

/// A copy of one node's facts, for a worker.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct NodeView {
    /// Where it is.
    pub identity: ObjectRef,
    /// Only named as an owner, never observed.
    pub virtual_: bool,
    /// Has a `deletionTimestamp`.
    pub deleting: bool,
    /// Being deleted in the foreground.
    pub deleting_dependents: bool,
    /// Has dependents.
    pub has_dependents: bool,
}

/// How many absent owners are remembered (kube: an LRU of 500).
const ABSENT_CACHE: usize = 1024;

/// The dependency graph: a node per observed object (as kube's, so that
/// an owner named from the wrong namespace is recognised), plus virtual
/// nodes for owners only named.
#[derive(Default)]
pub(super) struct Graph {
    nodes: HashMap<String, Node>,
    /// Owner uid → the uids of the nodes naming it, kept from the
    /// dependents' side: it outlives the owner's node until the dependents
    /// go or drop the reference.
    dependents: HashMap<String, HashSet<String>>,
    /// Owners a lookup found absent, by `(group, kind, namespace, name,
    /// uid)` (kube's `absentOwnerCache`).
    absent: HashSet<(String, String, String, String, String)>,
    /// Cross-namespace references found while applying changes, for the
    /// caller to report.
    invalid: Vec<InvalidNamespace>,
    /// The `apiVersion`s, kinds and namespaces the nodes share.
    strings: Strings,
}

/// The `apiVersion`s, kinds and namespaces of the graph's nodes, each held
/// once and shared by the nodes naming it (with 100,000 nodes the copies
/// would take ~8 MiB). Entries no node holds any more are dropped whenever
/// the set has doubled since the last sweep.
#[derive(Default)]
struct Strings {
    held: HashSet<Arc<str>>,
    /// The size that triggers the next sweep.
    sweep_at: usize,
}

impl Strings {
    fn one(&mut self, s: &Arc<str>) -> Arc<str> {
        if let Some(held) = self.held.get(s) {
            return held.clone();
        }
        if self.held.len() >= self.sweep_at {
            self.held.retain(|h| Arc::strong_count(h) > 1);
            self.sweep_at = (self.held.len() * 2).max(1024);
        }
        self.held.insert(s.clone());
        s.clone()
    }

    /// `identity` with its `apiVersion`, kind and namespace shared.
    fn shared(&mut self, identity: ObjectRef) -> ObjectRef {
        ObjectRef {
            api_version: self.one(&identity.api_version),
            kind: self.one(&identity.kind),
            namespace: self.one(&identity.namespace),
            ..identity
        }
    }
}

fn absent_key(owner: &OwnerRef, namespace: &str) -> (String, String, String, String, String) {
    (
        group_of(&owner.api_version).to_string(),
        owner.kind.clone(),
        namespace.to_string(),
        owner.name.clone(),
        owner.uid.clone(),
    )
}

impl Graph {
    /// How many nodes (observed and virtual) the graph holds.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// The uids of the dependents of `uid`, sorted.
    fn dependent_uids(&self, uid: &str) -> Vec<String> {
        let mut deps: Vec<String> = self
            .dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default();
        deps.sort();
        deps
    }

    /// The facts of node `uid`.
    pub(super) fn node(&self, uid: &str) -> Option<NodeView> {
        self.nodes.get(uid).map(|n| NodeView {
            identity: n.identity.clone(),
            virtual_: n.virtual_,
            deleting: n.deleting,
            deleting_dependents: n.deleting_dependents,
            has_dependents: self.dependents.get(uid).is_some_and(|d| !d.is_empty()),
        })
    }

    /// The dependents of `uid` (to orphan them).
    pub(super) fn dependents(&self, uid: &str) -> Vec<ObjectRef> {
        self.dependent_uids(uid)
            .iter()
            .filter_map(|d| self.nodes.get(d))
            .map(|d| d.identity.clone())
            .collect()
    }

    /// Whether some dependent of `uid` is itself being deleted in the
    /// foreground.
    pub(super) fn has_dependent_deleting_dependents(&self, uid: &str) -> bool {
        self.dependents.get(uid).is_some_and(|deps| {
            deps.iter()
                .filter_map(|d| self.nodes.get(d))
                .any(|d| d.deleting_dependents)
        })
    }

    /// The dependents of `uid` whose reference to it blocks its deletion
    /// (kube's `blockingDependents`), with whether each is itself being
    /// deleted in the foreground.
    pub(super) fn blocking_dependents(&self, uid: &str) -> Vec<(String, bool)> {
        self.dependent_uids(uid)
            .into_iter()
            .filter_map(|d| {
                let node = self.nodes.get(&d)?;
                node.owners
                    .iter()
                    .any(|o| o.uid == uid && o.block)
                    .then_some((d, node.deleting_dependents))
            })
            .collect()
    }

    /// Whether a lookup found `owner` absent (as named by a dependent in
    /// `namespace`, or cluster-wide).
    pub(super) fn is_absent(&self, owner: &OwnerRef, namespace: &str) -> bool {
        self.absent.contains(&absent_key(owner, ""))
            || self.absent.contains(&absent_key(owner, namespace))
    }

    /// Remembers that a lookup found `owner` absent in `namespace` (empty
    /// for cluster-scoped owners).
    pub(super) fn mark_absent(&mut self, owner: &OwnerRef, namespace: &str) {
        if self.absent.len() >= ABSENT_CACHE {
            self.absent.clear();
        }
        self.absent.insert(absent_key(owner, namespace));
    }

    /// The cross-namespace references found since the last call.
    pub(super) fn take_invalid(&mut self) -> Vec<InvalidNamespace> {
        std::mem::take(&mut self.invalid)
    }

    /// Applies a change; returns the work it makes.
    pub(super) fn apply(&mut self, change: Change) -> Vec<Work> {
        let mut work = Vec::new();
        match change {
            Change::Observed(obs) => self.observe(obs, &mut work),
            Change::Found(obs) => {
                if self
                    .nodes
                    .get(&obs.identity.uid)
                    .is_some_and(|n| n.virtual_)
                {
                    self.observe(obs, &mut work);
                }
            }
            Change::Deleted(obs) => {
                if self.nodes.contains_key(&obs.identity.uid) {
                    self.remove(&obs.identity.uid, &mut work);
                }
            }
            Change::Absent(identity) => {
                let Some(node) = self.nodes.get(&identity.uid) else {
                    return work;
                };
                // A lookup at other coordinates than the observed object's
                // says nothing about it.
                if !node.virtual_ && node.identity != identity {
                    return work;
                }
                self.remove(&identity.uid, &mut work);
            }
            Change::Relisted { group, kind, seen } => {
                let mut gone: Vec<String> = self
                    .nodes
                    .iter()
                    .filter(|(uid, n)| {
                        !n.virtual_
                            && *n.identity.kind == *kind
                            && group_of(&n.identity.api_version) == group
                            && !seen.contains(*uid)
                    })
                    .map(|(uid, _)| uid.clone())
                    .collect();
                gone.sort();
                for uid in gone {
                    self.remove(&uid, &mut work);
                }
            }
        }
        dedup(work)
    }

    fn observe(&mut self, obs: Observed, work: &mut Vec<Work>) {
        let uid = obs.identity.uid.clone();
        let deleting_dependents = obs.deleting && obs.foreground;
        let orphaning = obs.deleting && obs.orphan;
        let (was_deleting_dependents, was_orphaning, old_owners) = match self.nodes.get_mut(&uid) {
            None => {
                self.nodes.insert(
                    uid.clone(),
                    Node {
                        identity: self.strings.shared(obs.identity.clone()),
                        deleting: obs.deleting,
                        owners: obs.owners.clone(),
                        ..Default::default()
                    },
                );
                (false, false, Vec::new())
            }
            Some(node) => {
                let moved = node.virtual_ && node.identity != obs.identity;
                node.virtual_ = false;
                node.identity = self.strings.shared(obs.identity.clone());
                node.deleting = obs.deleting;
                let old = std::mem::replace(&mut node.owners, obs.owners.clone());
                let state = (node.deleting_dependents, node.orphaning, old);
                if moved {
                    self.recheck_dependents_of(&uid, work);
                }
                state
            }
        };
        // Owners added, removed, or unblocked.
        let added: Vec<OwnerRef> = obs
            .owners
            .iter()
            .filter(|o| !old_owners.iter().any(|p| p.uid == o.uid))
            .cloned()
            .collect();
        if !added.is_empty() {
            self.add_to_owners(&obs.identity, &added, work);
        }
        for old in &old_owners {
            let now = obs.owners.iter().find(|o| o.uid == old.uid);
            let removed = now.is_none();
            if removed {
                self.unlink(&old.uid, &uid);
            }
            let unblocked = removed || (old.block && now.is_some_and(|n| !n.block));
            if unblocked
                && self
                    .nodes
                    .get(&old.uid)
                    .is_some_and(|o| o.deleting_dependents)
            {
                work.push(Work::Delete(old.uid.clone()));
            }
        }
        if let Some(node) = self.nodes.get_mut(&uid) {
            node.deleting_dependents = deleting_dependents;
            node.orphaning = orphaning;
        }
        // Deletion transitions.
        if orphaning && !was_orphaning {
            work.push(Work::Orphan(uid.clone()));
        }
        if deleting_dependents && !was_deleting_dependents {
            work.extend(self.dependent_uids(&uid).into_iter().map(Work::Delete));
            work.push(Work::Delete(uid));
        }
    }

    /// Removes `dependent` from the dependents of `owner`; a virtual owner
    /// nothing names any more goes.
    fn unlink(&mut self, owner: &str, dependent: &str) {
        if let Some(deps) = self.dependents.get_mut(owner) {
            deps.remove(dependent);
            if deps.is_empty() {
                self.dependents.remove(owner);
                if self.nodes.get(owner).is_some_and(|o| o.virtual_) {
                    self.nodes.remove(owner);
                }
            }
        }
    }

    /// A virtual node turned out to be at other coordinates than its
    /// dependents said: they are looked at again (and cross-namespace
    /// references noted).
    fn recheck_dependents_of(&mut self, uid: &str, work: &mut Vec<Work>) {
        let Some(node) = self.nodes.get(uid) else {
            return;
        };
        let observed = node.identity.clone();
        for dep_uid in self.dependent_uids(uid) {
            let Some(dep) = self.nodes.get(&dep_uid) else {
                continue;
            };
            let Some(owner) = dep.owners.iter().find(|o| o.uid == uid) else {
                continue;
            };
            let namespace_mismatch =
                !observed.namespace.is_empty() && dep.identity.namespace != observed.namespace;
            if namespace_mismatch {
                self.invalid.push(InvalidNamespace {
                    dependent: dep.identity.clone(),
                    owner: owner.clone(),
                });
            }
            if namespace_mismatch || !observed.matches(owner) {
                work.push(Work::Delete(dep_uid));
            }
        }
    }

    /// Adds `dependent` to the dependents of `owners`, making virtual
    /// nodes of unknown owners (kube's `addDependentToOwners`).
    fn add_to_owners(&mut self, dependent: &ObjectRef, owners: &[OwnerRef], work: &mut Vec<Work>) {
        let mut recheck = false;
        for owner in owners {
            self.dependents
                .entry(owner.uid.clone())
                .or_default()
                .insert(dependent.uid.clone());
            match self.nodes.get(&owner.uid) {
                None => {
                    self.nodes.insert(
                        owner.uid.clone(),
                        Node {
                            identity: self.strings.shared(owner.as_virtual(&dependent.namespace)),
                            virtual_: true,
                            ..Default::default()
                        },
                    );
                    work.push(Work::Delete(owner.uid.clone()));
                }
                Some(node) => {
                    let namespaced = !node.identity.namespace.is_empty();
                    if namespaced && node.identity.namespace != dependent.namespace {
                        if !node.virtual_ {
                            self.invalid.push(InvalidNamespace {
                                dependent: dependent.clone(),
                                owner: owner.clone(),
                            });
                        }
                        recheck = true;
                    } else {
                        // Other coordinates than the observed owner's; a
                        // virtual cluster-scoped owner named from another
                        // namespace (maybe a namespaced kind named by a
                        // cluster-scoped object); or an owner being deleted
                        // in the foreground, whose new dependents go first.
                        recheck |= !node.identity.matches(owner)
                            || (!namespaced
                                && node.virtual_
                                && node.identity.namespace != dependent.namespace)
                            || node.deleting_dependents;
                    }
                }
            }
        }
        if recheck {
            work.push(Work::Delete(dependent.uid.clone()));
        }
    }

    /// Removes node `uid`: its dependents are looked at again, and owners
    /// waiting for their dependents too.
    fn remove(&mut self, uid: &str, work: &mut Vec<Work>) {
        let Some(node) = self.nodes.remove(uid) else {
            return;
        };
        for owner in &node.owners {
            self.unlink(&owner.uid, uid);
            if self
                .nodes
                .get(&owner.uid)
                .is_some_and(|o| o.deleting_dependents)
            {
                work.push(Work::Delete(owner.uid.clone()));
            }
        }
        for dep in self.dependent_uids(uid) {
            if let Some(r) = self.nodes.get(&dep).and_then(|d| {
                d.owners
                    .iter()
                    .find(|o| o.uid == uid)
                    .map(|r| (r.clone(), d.identity.namespace.clone()))
            }) {
                let (r, dep_namespace) = r;
                let ns: Arc<str> = if node.identity.namespace.is_empty() {
                    "".into()
                } else {
                    dep_namespace
                };
                self.mark_absent(&r, &ns);
            }
            work.push(Work::Delete(dep));
        }
    }
}

fn dedup(work: Vec<Work>) -> Vec<Work> {
    let mut seen = HashSet::new();
    work.into_iter()
        .filter(|w| seen.insert(w.clone()))
        .collect()
}

/// What a lookup says of one owner of a dependent (kube's
/// `classifyReferences`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum OwnerState {
    /// It exists and is not waiting for its dependents.
    Solid,
    /// It does not exist (or another object has its name).
    Dangling,
    /// It is being deleted in the foreground.
    WaitingForDependents,
}

/// What to do with a dependent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Nothing: no owner references.
    Keep,
    /// Some owner is solid: remove the references to the owners that are
    /// gone or waiting (by uid), if any.
    DropRefs(Vec<String>),
    /// No solid owner: delete it with this propagation; with `unblock`,
    /// first make its own owner references non-blocking (to break a
    /// possible cycle of foreground deletions).
    Delete {
        /// The propagation of the delete.
        policy: PropagationPolicy,
        /// Make the owner references non-blocking first.
        unblock: bool,
    },
}

/// Decides about a dependent from the states of its owners (kube's
/// `attemptToDeleteItem` after `classifyReferences`). `has_dependents`:
/// the dependent owns objects itself; `dependent_deleting_dependents`:
/// one of those is being deleted in the foreground; `orphan` and
/// `foreground`: the dependent's own deletion finalizers.
pub(super) fn decide(
    owners: &[(OwnerRef, OwnerState)],
    has_dependents: bool,
    dependent_deleting_dependents: bool,
    orphan: bool,
    foreground: bool,
) -> Verdict {
    if owners.is_empty() {
        return Verdict::Keep;
    }
    let solid = owners.iter().any(|(_, s)| *s == OwnerState::Solid);
    let waiting = owners
        .iter()
        .any(|(_, s)| *s == OwnerState::WaitingForDependents);
    if solid {
        let drop: Vec<String> = owners
            .iter()
            .filter(|(_, s)| *s != OwnerState::Solid)
            .map(|(o, _)| o.uid.clone())
            .collect();
        return Verdict::DropRefs(drop);
    }
    if waiting && has_dependents {
        return Verdict::Delete {
            policy: PropagationPolicy::Foreground,
            unblock: dependent_deleting_dependents,
        };
    }
    let policy = if orphan {
        PropagationPolicy::Orphan
    } else if foreground {
        PropagationPolicy::Foreground
    } else {
        PropagationPolicy::Background
    };
    Verdict::Delete {
        policy,
        unblock: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(kind: &str, ns: &str, name: &str, uid: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: ns.into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    /// Nodes of one kind and namespace share their `apiVersion`, kind and
    /// namespace; a sweep drops the strings no node holds any more.
    #[test]
    fn nodes_share_their_strings() {
        let mut g = Graph::default();
        g.apply(Change::Observed(observed(
            obj("ConfigMap", "ns", "a", "u1"),
            vec![],
        )));
        g.apply(Change::Observed(observed(
            obj("ConfigMap", "ns", "b", "u2"),
            vec![],
        )));
        let (a, b) = (g.node("u1").unwrap(), g.node("u2").unwrap());
        assert!(Arc::ptr_eq(
            &a.identity.api_version,
            &b.identity.api_version
        ));
        assert!(Arc::ptr_eq(&a.identity.kind, &b.identity.kind));
        assert!(Arc::ptr_eq(&a.identity.namespace, &b.identity.namespace));
        drop((a, b));
        for i in 0..2000 {
            let ns = format!("ns-{i}");
            g.apply(Change::Observed(observed(
                obj("ConfigMap", &ns, "x", "u"),
                vec![],
            )));
        }
        // Only the last namespace of "u" and "ns" (nodes u1, u2) are held.
        assert!(g.strings.held.len() < 1100, "{}", g.strings.held.len());
    }

    fn owner(kind: &str, name: &str, uid: &str, block: bool) -> OwnerRef {
        OwnerRef {
            api_version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            block,
        }
    }

    fn observed(identity: ObjectRef, owners: Vec<OwnerRef>) -> Observed {
        Observed {
            identity,
            owners,
            ..Default::default()
        }
    }

    #[test]
    fn parses_objects() {
        let v = serde_json::json!({"metadata": {
            "name": "a", "namespace": "ns", "uid": "u1",
            "deletionTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": ["orphan", "x"],
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u0", "blockOwnerDeletion": true},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "no-uid"}
            ]
        }});
        let o = Observed::of(&v, "v1", "ConfigMap").expect("observed");
        assert_eq!(o.identity, obj("ConfigMap", "ns", "a", "u1"));
        assert!(o.deleting && o.orphan && !o.foreground);
        assert_eq!(o.owners, vec![owner("ConfigMap", "o", "u0", true)]);
        assert!(Observed::of(&serde_json::json!({"metadata": {}}), "v1", "X").is_none());
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(group_of("v1"), "");
    }

    #[test]
    fn unknown_owner_becomes_virtual_and_is_looked_up() {
        let mut g = Graph::default();
        let work = g.apply(Change::Observed(observed(
            obj("ConfigMap", "ns", "child", "c"),
            vec![owner("ConfigMap", "parent", "p", false)],
        )));
        assert_eq!(work, vec![Work::Delete("p".into())]);
        let p = g.node("p").expect("virtual owner");
        assert!(p.virtual_ && p.has_dependents);
        assert_eq!(&*p.identity.namespace, "ns");
        // The lookup finds it absent: the node goes, the child is looked at.
        let work = g.apply(Change::Absent(p.identity.clone()));
        assert_eq!(work, vec![Work::Delete("c".into())]);
        assert!(g.node("p").is_none());
        assert!(g.is_absent(&owner("ConfigMap", "parent", "p", false), "ns"));
    }

    #[test]
    fn observing_the_owner_settles_the_virtual_node() {
        let mut g = Graph::default();
        g.apply(Change::Observed(observed(
            obj("ConfigMap", "ns", "child", "c"),
            vec![owner("ConfigMap", "parent", "p", false)],
        )));
        let work = g.apply(Change::Observed(observed(
            obj("ConfigMap", "ns", "parent", "p"),
            vec![],
        )));
        assert!(work.is_empty(), "{work:?}");
        assert!(!g.node("p").expect("owner").virtual_);
        // An absent lookup at other coordinates does not remove it.
        assert!(
            g.apply(Change::Absent(obj("Secret", "ns", "parent", "p")))
                .is_empty()
        );
        assert!(g.node("p").is_some());
    }

    #[test]
    fn owner_in_another_namespace_is_reported_and_rechecked() {
        let mut g = Graph::default();
        g.apply(Change::Observed(observed(
            obj("ConfigMap", "a", "parent", "p"),
            vec![],
        )));
        let work = g.apply(Change::Observed(observed(
            obj("ConfigMap", "b", "child", "c"),
            vec![owner("ConfigMap", "parent", "p", false)],
        )));
        assert_eq!(work, vec![Work::Delete("c".into())]);
        let invalid = g.take_invalid();
        assert_eq!(invalid.len(), 1);
        assert_eq!(invalid[0].owner.uid, "p");
        assert_eq!(invalid[0].dependent.name, "child");
    }

    #[test]
    fn deleting_an_owner_rechecks_its_dependents() {
        let mut g = Graph::default();
        g.apply(Change::Observed(observed(
            obj("ConfigMap", "ns", "parent", "p"),
            vec![],
        )));
        for c in ["c1", "c2"] {
            g.apply(Change::Observed(observed(
                obj("Secret", "ns", c, c),
                vec![owner("ConfigMap", "parent", "p", false)],
            )));
        }
        let work = g.apply(Change::Deleted(observed(
            obj("ConfigMap", "ns", "parent", "p"),
            vec![],
        )));
        assert_eq!(
            work,
            vec![Work::Delete("c1".into()), Work::Delete("c2".into())]
        );
        assert!(g.is_absent(&owner("ConfigMap", "parent", "p", false), "ns"));
    }

    #[test]
    fn foreground_and_orphan_transitions() {
        let mut g = Graph::default();
        g.apply(Change::Observed(observed(
            obj("ConfigMap", "ns", "parent", "p"),
            vec![],
        )));
        g.apply(Change::Observed(observed(
            obj("Secret", "ns", "block", "b"),
            vec![owner("ConfigMap", "parent", "p", true)],
        )));
        g.apply(Change::Observed(observed(
            obj("Secret", "ns", "free", "f"),
            vec![owner("ConfigMap", "parent", "p", false)],
        )));
        let mut deleting = observed(obj("ConfigMap", "ns", "parent", "p"), vec![]);
        deleting.deleting = true;
        deleting.foreground = true;
        let work = g.apply(Change::Observed(deleting.clone()));
        assert_eq!(
            work,
            vec![
                Work::Delete("b".into()),
                Work::Delete("f".into()),
                Work::Delete("p".into())
            ]
        );
        assert!(g.node("p").expect("owner").deleting_dependents);
        assert_eq!(g.blocking_dependents("p"), vec![("b".to_string(), false)]);
        // The same state again makes no work.
        assert!(g.apply(Change::Observed(deleting)).is_empty());
        // The blocking dependent goes: the owner is looked at again.
        let work = g.apply(Change::Deleted(observed(
            obj("Secret", "ns", "block", "b"),
            vec![owner("ConfigMap", "parent", "p", true)],
        )));
        assert_eq!(work, vec![Work::Delete("p".into())]);
        assert!(g.blocking_dependents("p").is_empty());

        let mut orphaning = observed(obj("ConfigMap", "ns", "other", "o"), vec![]);
        orphaning.deleting = true;
        orphaning.orphan = true;
        assert_eq!(
            g.apply(Change::Observed(orphaning)),
            vec![Work::Orphan("o".into())]
        );
    }

    #[test]
    fn removing_or_unblocking_a_reference_wakes_a_waiting_owner() {
        let mut g = Graph::default();
        let mut parent = observed(obj("ConfigMap", "ns", "parent", "p"), vec![]);
        parent.deleting = true;
        parent.foreground = true;
        g.apply(Change::Observed(parent));
        g.apply(Change::Observed(observed(
            obj("Secret", "ns", "child", "c"),
            vec![owner("ConfigMap", "parent", "p", true)],
        )));
        let work = g.apply(Change::Observed(observed(
            obj("Secret", "ns", "child", "c"),
            vec![owner("ConfigMap", "parent", "p", false)],
        )));
        assert_eq!(work, vec![Work::Delete("p".into())]);
        let work = g.apply(Change::Observed(observed(
            obj("Secret", "ns", "child", "c"),
            vec![],
        )));
        assert_eq!(work, vec![Work::Delete("p".into())]);
        assert!(g.dependents("p").is_empty());
    }

    #[test]
    fn relist_removes_what_is_gone() {
        let mut g = Graph::default();
        g.apply(Change::Observed(observed(
            obj("ConfigMap", "ns", "parent", "p"),
            vec![],
        )));
        g.apply(Change::Observed(observed(
            obj("Secret", "ns", "child", "c"),
            vec![owner("ConfigMap", "parent", "p", false)],
        )));
        let work = g.apply(Change::Relisted {
            group: String::new(),
            kind: "ConfigMap".into(),
            seen: HashSet::new(),
        });
        assert_eq!(work, vec![Work::Delete("c".into())]);
        assert!(g.node("p").is_none());
        assert_eq!(g.len(), 1);
    }

    #[test]
    fn a_found_owner_is_observed_and_keeps_its_dependents() {
        let mut g = Graph::default();
        g.apply(Change::Observed(observed(
            obj("Secret", "ns", "child", "c"),
            vec![owner("ConfigMap", "parent", "p", true)],
        )));
        // Found only settles virtual nodes; it never adds one.
        assert!(
            g.apply(Change::Found(observed(
                obj("ConfigMap", "ns", "x", "x"),
                vec![]
            )))
            .is_empty()
        );
        assert!(g.node("x").is_none());
        g.apply(Change::Found(observed(
            obj("ConfigMap", "ns", "parent", "p"),
            vec![],
        )));
        assert!(!g.node("p").expect("found").virtual_);
        // A relist that missed it drops the node but not the dependents'
        // links: when it shows up deleting in the foreground, the child goes.
        g.apply(Change::Relisted {
            group: String::new(),
            kind: "ConfigMap".into(),
            seen: HashSet::new(),
        });
        assert!(g.node("p").is_none());
        let mut deleting = observed(obj("ConfigMap", "ns", "parent", "p"), vec![]);
        deleting.deleting = true;
        deleting.foreground = true;
        assert_eq!(
            g.apply(Change::Observed(deleting)),
            vec![Work::Delete("c".into()), Work::Delete("p".into())]
        );
        assert_eq!(g.blocking_dependents("p"), vec![("c".to_string(), false)]);
    }

    #[test]
    fn verdicts() {
        let o = |uid: &str| owner("ConfigMap", uid, uid, false);
        assert_eq!(decide(&[], false, false, false, false), Verdict::Keep);
        assert_eq!(
            decide(
                &[
                    (o("a"), OwnerState::Solid),
                    (o("b"), OwnerState::Dangling),
                    (o("c"), OwnerState::WaitingForDependents)
                ],
                false,
                false,
                false,
                false
            ),
            Verdict::DropRefs(vec!["b".into(), "c".into()])
        );
        assert_eq!(
            decide(&[(o("a"), OwnerState::Solid)], false, false, false, false),
            Verdict::DropRefs(vec![])
        );
        let delete = |policy| Verdict::Delete {
            policy,
            unblock: false,
        };
        assert_eq!(
            decide(&[(o("a"), OwnerState::Dangling)], true, false, false, false),
            delete(PropagationPolicy::Background)
        );
        assert_eq!(
            decide(&[(o("a"), OwnerState::Dangling)], false, false, true, false),
            delete(PropagationPolicy::Orphan)
        );
        assert_eq!(
            decide(&[(o("a"), OwnerState::Dangling)], false, false, false, true),
            delete(PropagationPolicy::Foreground)
        );
        assert_eq!(
            decide(
                &[(o("a"), OwnerState::WaitingForDependents)],
                false,
                false,
                false,
                false
            ),
            delete(PropagationPolicy::Background)
        );
        assert_eq!(
            decide(
                &[(o("a"), OwnerState::WaitingForDependents)],
                true,
                false,
                false,
                false
            ),
            delete(PropagationPolicy::Foreground)
        );
        assert_eq!(
            decide(
                &[(o("a"), OwnerState::WaitingForDependents)],
                true,
                true,
                false,
                false
            ),
            Verdict::Delete {
                policy: PropagationPolicy::Foreground,
                unblock: true
            }
        );
    }
}
