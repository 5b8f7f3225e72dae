//! The policies and bindings of one policy kind (validating or mutating),
//! read like an informer: a snapshot listed through the plugin
//! [`Context`]'s lookup, listed again when older than [`REFRESH`]; a
//! policy is compiled when its resource version is first seen (and again
//! while its `paramKind` is not served).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::super::matching;
use super::super::{Context, Error};

/// How old the snapshot of policies and bindings may get before it is
/// listed again.
pub const REFRESH: Duration = Duration::from_millis(200);

/// A compiled policy, as the snapshot needs it.
pub(super) trait Compiled: Send + Sync + 'static {
    /// The policy's name.
    fn name(&self) -> &str;
    /// The resource version it was compiled from.
    fn resource_version(&self) -> &str;
    /// Whether its `paramKind` named no served resource when compiled.
    fn params_unresolved(&self) -> bool;
    /// Whether its `matchConstraints` may match requests of `group`.
    fn handles_group(&self, group: &str) -> bool;
}

/// A policy kind: its resources and how its objects decode and compile.
pub(super) trait Kinds: Send + Sync + 'static {
    /// A policy as listed.
    type Raw;
    /// A compiled policy.
    type Policy: Compiled;
    /// A binding, ready to match.
    type Binding: Send + Sync + 'static;
    /// The policies' plural resource.
    const POLICIES: &'static str;
    /// The bindings' plural resource.
    const BINDINGS: &'static str;
    /// A listed policy: its name, resource version and itself.
    fn decode_policy(v: Value) -> Result<(String, String, Self::Raw), serde_json::Error>;
    /// Compiles a policy.
    fn compile(raw: Self::Raw, ctx: &Context) -> Self::Policy;
    /// A listed binding: its policy's name, its own name and itself.
    fn decode_binding(v: Value) -> Result<(String, String, Self::Binding), serde_json::Error>;
}

/// A policy with the bindings that name it (in name order).
pub(super) struct Hook<K: Kinds> {
    pub(super) policy: Arc<K::Policy>,
    pub(super) bindings: Vec<K::Binding>,
}

/// The policies with bindings, in name order.
pub(super) struct Snapshot<K: Kinds> {
    taken: Option<Instant>,
    pub(super) hooks: Vec<Hook<K>>,
}

impl<K: Kinds> Snapshot<K> {
    fn fresh(&self) -> bool {
        self.taken.is_some_and(|t| t.elapsed() < REFRESH)
    }
}

/// The snapshot of one policy kind.
pub(super) struct Source<K: Kinds> {
    snapshot: RwLock<Arc<Snapshot<K>>>,
    refreshing: tokio::sync::Mutex<()>,
}

impl<K: Kinds> Source<K> {
    /// Nothing listed yet.
    pub(super) fn new() -> Self {
        Source {
            snapshot: RwLock::new(Arc::new(Snapshot {
                taken: None,
                hooks: Vec::new(),
            })),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    /// The snapshot as it is (possibly stale).
    pub(super) fn current(&self) -> Arc<Snapshot<K>> {
        self.snapshot
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether a request of `group` may match (a stale snapshot may: it
    /// is refreshed when the plugin runs).
    pub(super) fn may_handle(&self, group: &str) -> bool {
        let snapshot = self.current();
        !snapshot.fresh() || snapshot.hooks.iter().any(|h| h.policy.handles_group(group))
    }

    /// The snapshot, listed again when stale.
    pub(super) async fn hooks(&self, ctx: &Context) -> Result<Arc<Snapshot<K>>, Error> {
        let snapshot = self.current();
        if snapshot.fresh() {
            return Ok(snapshot);
        }
        let _guard = self.refreshing.lock().await;
        let previous = self.current();
        if previous.fresh() {
            return Ok(previous);
        }
        let lookup = ctx.lookup();
        let group = matching::ADMISSION_GROUP;
        let policies = lookup
            .list(group, "v1", K::POLICIES, None)
            .await?
            .unwrap_or_default();
        let bindings = lookup
            .list(group, "v1", K::BINDINGS, None)
            .await?
            .unwrap_or_default();
        let known: HashMap<&str, &Arc<K::Policy>> = previous
            .hooks
            .iter()
            .map(|h| (h.policy.name(), &h.policy))
            .collect();
        let mut by_policy: BTreeMap<String, Vec<(String, K::Binding)>> = BTreeMap::new();
        for b in bindings {
            match K::decode_binding(b) {
                Ok((policy, name, b)) => by_policy.entry(policy).or_default().push((name, b)),
                Err(e) => {
                    tracing::warn!(error = %e, resource = K::BINDINGS, "skipping an undecodable policy binding");
                }
            }
        }
        let mut hooks: Vec<Hook<K>> = Vec::new();
        for p in policies {
            let (name, resource_version, raw) = match K::decode_policy(p) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(error = %e, resource = K::POLICIES, "skipping an undecodable policy");
                    continue;
                }
            };
            let Some(mut bindings) = by_policy.remove(&name) else {
                continue;
            };
            bindings.sort_by(|a, b| a.0.cmp(&b.0));
            // A policy whose params are unresolved is compiled again: its
            // param kind may be served by now.
            let policy = match known.get(name.as_str()) {
                Some(old)
                    if old.resource_version() == resource_version && !old.params_unresolved() =>
                {
                    Arc::clone(old)
                }
                _ => Arc::new(K::compile(raw, ctx)),
            };
            hooks.push(Hook {
                policy,
                bindings: bindings.into_iter().map(|(_, b)| b).collect(),
            });
        }
        hooks.sort_by(|a, b| a.policy.name().cmp(b.policy.name()));
        let fresh = Arc::new(Snapshot {
            taken: Some(Instant::now()),
            hooks,
        });
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = fresh.clone();
        Ok(fresh)
    }
}
