//! The policies and bindings of one policy kind (validating or mutating),
//! read like an informer: a snapshot listed through the plugin
//! [`Context`]'s lookup. Once older than [`REFRESH`] it is listed again,
//! unless the lookup's [`revision`](super::super::Lookup::revision) of both
//! resources is still the one it was listed at (and no policy waits for its
//! `paramKind` to be served). A policy is compiled when its resource version
//! is first seen (and again while its `paramKind` is not served).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::super::matching;
use super::super::{Context, Error};

/// How old the snapshot of policies and bindings may get before it is
/// checked (and, when its resources moved, listed) again.
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
    /// When it was last listed or found current, in nanoseconds since the
    /// source's epoch; `None` before the first list.
    checked: Option<AtomicU64>,
    /// The lookup's revisions of the policies and the bindings read before
    /// they were listed (`None` when the lookup knows none).
    revisions: Option<(u64, u64)>,
    pub(super) hooks: Vec<Hook<K>>,
}

/// Whether a snapshot checked at `checked` (nanoseconds since the epoch)
/// is still fresh at `now` for `refresh`.
fn fresh_at(checked: u64, now: u64, refresh: Duration) -> bool {
    u128::from(now.saturating_sub(checked)) < refresh.as_nanos()
}

/// Whether a snapshot listed at `listed` revisions is current at `now`
/// (revisions of the policies and the bindings): only when both are known
/// and unchanged, and no policy is to be compiled again.
fn unchanged(listed: Option<(u64, u64)>, now: Option<(u64, u64)>, recompile: bool) -> bool {
    !recompile && listed.is_some() && listed == now
}

/// The snapshot of one policy kind.
pub(super) struct Source<K: Kinds> {
    snapshot: RwLock<Arc<Snapshot<K>>>,
    refreshing: tokio::sync::Mutex<()>,
    epoch: Instant,
    refresh: Duration,
}

impl<K: Kinds> Source<K> {
    /// Nothing listed yet.
    pub(super) fn new() -> Self {
        Self::with_refresh(REFRESH)
    }

    /// Nothing listed yet; the snapshot is checked again once older than
    /// `refresh`.
    pub(super) fn with_refresh(refresh: Duration) -> Self {
        Source {
            snapshot: RwLock::new(Arc::new(Snapshot {
                checked: None,
                revisions: None,
                hooks: Vec::new(),
            })),
            refreshing: tokio::sync::Mutex::new(()),
            epoch: Instant::now(),
            refresh,
        }
    }

    /// Nanoseconds since the epoch.
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn fresh(&self, snapshot: &Snapshot<K>) -> bool {
        snapshot
            .checked
            .as_ref()
            .is_some_and(|c| fresh_at(c.load(Ordering::Relaxed), self.now(), self.refresh))
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
        !self.fresh(&snapshot) || snapshot.hooks.iter().any(|h| h.policy.handles_group(group))
    }

    /// The lookup's revisions of the policies and the bindings.
    fn revisions(ctx: &Context) -> Option<(u64, u64)> {
        let lookup = ctx.lookup();
        let group = matching::ADMISSION_GROUP;
        Some((
            lookup.revision(group, "v1", K::POLICIES)?,
            lookup.revision(group, "v1", K::BINDINGS)?,
        ))
    }

    /// The snapshot, listed again when stale.
    pub(super) async fn hooks(&self, ctx: &Context) -> Result<Arc<Snapshot<K>>, Error> {
        let snapshot = self.current();
        if self.fresh(&snapshot) {
            return Ok(snapshot);
        }
        let _guard = self.refreshing.lock().await;
        let previous = self.current();
        if self.fresh(&previous) {
            return Ok(previous);
        }
        let revisions = Self::revisions(ctx);
        let recompile = previous.hooks.iter().any(|h| h.policy.params_unresolved());
        if let Some(checked) = &previous.checked
            && unchanged(previous.revisions, revisions, recompile)
        {
            checked.store(self.now(), Ordering::Relaxed);
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
            checked: Some(AtomicU64::new(self.now())),
            revisions,
            hooks,
        });
        *self.snapshot.write().unwrap_or_else(|p| p.into_inner()) = fresh.clone();
        Ok(fresh)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::AtomicUsize;

    use serde_json::json;

    use super::super::super::{Lookup, async_trait};
    use super::super::Validating;
    use super::*;
    use crate::error::ApiResult;

    #[test]
    fn fresh_for_the_refresh_interval() {
        let refresh = Duration::from_millis(200);
        assert!(fresh_at(1_000, 1_000, refresh));
        assert!(fresh_at(1_000, 1_000 + 199_999_999, refresh));
        assert!(!fresh_at(1_000, 1_000 + 200_000_000, refresh));
        // A check racing ahead of `now` is fresh.
        assert!(fresh_at(2_000, 1_000, refresh));
    }

    /// Listed again unless both revisions are known and unchanged and no
    /// policy is to be compiled again.
    #[test]
    fn kept_only_while_the_revisions_stay() {
        assert!(unchanged(Some((1, 2)), Some((1, 2)), false));
        assert!(!unchanged(Some((1, 2)), Some((1, 3)), false));
        assert!(!unchanged(Some((1, 2)), Some((2, 2)), false));
        assert!(!unchanged(Some((1, 2)), None, false));
        assert!(!unchanged(None, None, false));
        assert!(!unchanged(Some((1, 2)), Some((1, 2)), true));
    }

    /// Policies and bindings, counting lists, with revisions set by the
    /// test (`None`: unknown).
    #[derive(Default)]
    struct Counting {
        lists: AtomicUsize,
        revisions: Mutex<Option<(u64, u64)>>,
        policies: Mutex<Vec<Value>>,
    }

    #[async_trait]
    impl Lookup for Counting {
        fn serves(&self, _: &str, _: &str, _: &str) -> bool {
            true
        }

        fn revision(&self, _: &str, _: &str, resource: &str) -> Option<u64> {
            let (p, b) = (*self.revisions.lock().expect("revisions"))?;
            Some(if resource == Validating::POLICIES {
                p
            } else {
                b
            })
        }

        async fn get(
            &self,
            _: &str,
            _: &str,
            _: &str,
            _: &str,
            _: &str,
            _: bool,
        ) -> ApiResult<Option<Value>> {
            Ok(None)
        }

        async fn list(
            &self,
            _: &str,
            _: &str,
            resource: &str,
            _: Option<&str>,
        ) -> ApiResult<Option<Vec<Value>>> {
            self.lists.fetch_add(1, Ordering::Relaxed);
            let items = if resource == Validating::POLICIES {
                self.policies.lock().expect("policies").clone()
            } else {
                let policies = self.policies.lock().expect("policies");
                policies
                    .iter()
                    .map(|p| {
                        json!({
                            "metadata": {"name": p["metadata"]["name"]},
                            "spec": {"policyName": p["metadata"]["name"], "validationActions": ["Deny"]},
                        })
                    })
                    .collect()
            };
            Ok(Some(items))
        }
    }

    fn policy(name: &str, rv: &str) -> Value {
        json!({
            "metadata": {"name": name, "resourceVersion": rv},
            "spec": {"validations": [{"expression": "true"}]},
        })
    }

    /// A stale snapshot is listed again only when a revision moved (or is
    /// unknown); the policies listed then are the current ones.
    #[tokio::test]
    async fn relisted_when_a_revision_moves() {
        let lookup = Arc::new(Counting::default());
        *lookup.policies.lock().expect("policies") = vec![policy("a", "1")];
        *lookup.revisions.lock().expect("revisions") = Some((1, 1));
        let ctx = Context::new(lookup.clone());
        let source: Source<Validating> = Source::with_refresh(Duration::ZERO);
        let lists = || lookup.lists.load(Ordering::Relaxed);

        let first = source.hooks(&ctx).await.expect("listed");
        assert_eq!(first.hooks.len(), 1);
        assert_eq!(lists(), 2, "policies and bindings listed once");
        let again = source.hooks(&ctx).await.expect("kept");
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(lists(), 2, "unchanged revisions: not listed");

        lookup
            .policies
            .lock()
            .expect("policies")
            .push(policy("b", "2"));
        *lookup.revisions.lock().expect("revisions") = Some((2, 2));
        let moved = source.hooks(&ctx).await.expect("listed");
        assert_eq!(lists(), 4);
        let names: Vec<_> = moved.hooks.iter().map(|h| h.policy.name()).collect();
        assert_eq!(names, ["a", "b"]);
        // The unchanged policy is not compiled again.
        assert!(Arc::ptr_eq(&first.hooks[0].policy, &moved.hooks[0].policy));

        *lookup.revisions.lock().expect("revisions") = None;
        source.hooks(&ctx).await.expect("listed");
        source.hooks(&ctx).await.expect("listed");
        assert_eq!(lists(), 8, "unknown revisions: listed whenever stale");
    }

    /// Within the refresh interval the snapshot is used as it is.
    #[tokio::test]
    async fn fresh_snapshots_are_not_checked() {
        let lookup = Arc::new(Counting::default());
        let ctx = Context::new(lookup.clone());
        let source: Source<Validating> = Source::with_refresh(Duration::from_secs(3600));
        source.hooks(&ctx).await.expect("listed");
        source.hooks(&ctx).await.expect("kept");
        assert_eq!(lookup.lists.load(Ordering::Relaxed), 2);
    }
}
