//! The one map from group, version and resource to the store serving it.
//! The compiled-in kinds are there from the start; the kinds of custom
//! resource definitions come and go ([`Stores::add_kind`],
//! [`Stores::remove_kind`]) and every clone sees them.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use apiforge_core::resource::KindInfo;
use apiforge_core::scheme::{Kind, Scheme};
use apiforge_storage::Storage;

use super::lookup::{ServedMap, attach_admission_with};
use super::{CacheOptions, Caches, Store};

/// The store and kind facts of every served (group, version, plural).
/// One store serves every version of a kind. Cloning is cheap; clones
/// share the map.
#[derive(Clone, Default)]
pub struct Stores {
    shared: Arc<Shared>,
}

/// Keyed by group, version and plural, as the scheme names them.
type Map = ServedMap;

/// What the clones of one [`Stores`] share.
#[derive(Default)]
struct Shared {
    /// Shared with the admission chain's lookup (weakly), which reads the
    /// kinds added later through it.
    by_resource: Arc<RwLock<Arc<Map>>>,
    /// What a store for a kind added later is built from.
    factory: Option<Factory>,
    /// Bumped on every change of the map (controllers that hold one store
    /// per kind look again).
    changes: tokio::sync::watch::Sender<u64>,
    /// The generation of the map the served documents (discovery,
    /// OpenAPI) describe ([`Stores::mark_published`]).
    published: tokio::sync::watch::Sender<u64>,
}

/// How [`Stores::add_kind`] builds a store.
struct Factory {
    storage: Arc<dyn Storage>,
    prefix: String,
    watch_cache: Option<CacheOptions>,
    admission: Option<Arc<crate::admission::Chain>>,
}

impl Stores {
    /// One store per kind of `scheme` on `storage` under `prefix` (behind
    /// the watch cache when `watch_cache` is set), each with the admission
    /// chain of `admission`.
    pub fn new(
        scheme: &Scheme,
        storage: Arc<dyn Storage>,
        prefix: &str,
        watch_cache: Option<&CacheOptions>,
        admission: crate::admission::Plugins,
    ) -> Self {
        let mut stores = HashMap::new();
        let caches = Caches::default();
        for group in scheme.groups() {
            for kind in &group.kinds {
                let store = Store::new(
                    kind.clone(),
                    storage.clone(),
                    prefix,
                    watch_cache.map(|opts| (&caches, opts)),
                );
                for v in kind.versions() {
                    if scheme.is_disabled(group.name, v.info.version) {
                        continue;
                    }
                    stores.insert(
                        (
                            group.name.to_string(),
                            v.info.version.to_string(),
                            v.info.plural.to_string(),
                        ),
                        (store.clone(), v.info),
                    );
                }
            }
        }
        let served: Arc<RwLock<Arc<Map>>> = Arc::default();
        let by_resource: Map =
            attach_admission_with(stores, admission, Some(Arc::downgrade(&served)))
                .into_iter()
                .filter_map(|((group, _, _), (store, info))| {
                    let group = scheme.groups().iter().find(|g| g.name == group)?.name;
                    Some(((group, info.version, info.plural), (store, info)))
                })
                .collect();
        let chain = by_resource
            .values()
            .next()
            .map(|(store, _)| store.admission().clone());
        *served
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(by_resource);
        Stores {
            shared: Arc::new(Shared {
                by_resource: served,
                factory: Some(Factory {
                    storage,
                    prefix: prefix.to_string(),
                    watch_cache: watch_cache.cloned(),
                    admission: chain,
                }),
                changes: tokio::sync::watch::Sender::new(0),
                published: tokio::sync::watch::Sender::new(0),
            }),
        }
    }

    fn snapshot(&self) -> Arc<Map> {
        self.shared
            .by_resource
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn change(&self, edit: impl FnOnce(&mut Map)) {
        {
            let mut guard = self
                .shared
                .by_resource
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut map = (**guard).clone();
            edit(&mut map);
            *guard = Arc::new(map);
        }
        self.shared.changes.send_modify(|n| *n += 1);
    }

    /// Serves a kind added at run time (a custom resource's) in every one
    /// of its versions, replacing what served its group and plural before
    /// (whose watch cache stops); returns its store. Its watch cache starts now, its writes go through
    /// the admission chain of the other stores.
    pub fn add_kind(&self, kind: Arc<Kind>) -> Option<Store> {
        let factory = self.shared.factory.as_ref()?;
        let caches = Caches::default();
        let mut store = Store::new(
            kind.clone(),
            factory.storage.clone(),
            &factory.prefix,
            factory.watch_cache.as_ref().map(|opts| (&caches, opts)),
        );
        if let Some(chain) = &factory.admission {
            store = store.with_admission(chain.clone());
        }
        let info = kind.storage_info();
        let (group, plural) = (info.group, info.plural);
        let added = store.clone();
        let mut replaced: Option<Store> = None;
        self.change(|map| {
            map.retain(|(g, _, p), (old, _)| {
                let hit = *g == group && *p == plural;
                if hit {
                    replaced = Some(old.clone());
                }
                !hit
            });
            for v in kind.versions() {
                map.insert(
                    (v.info.group, v.info.version, v.info.plural),
                    (store.clone(), v.info),
                );
            }
        });
        if let Some(cache) = replaced.as_ref().and_then(Store::cache) {
            cache.stop();
        }
        Some(added)
    }

    /// Stops serving `plural` in `group` (every version; its watch cache
    /// stops); returns the store that served it.
    pub fn remove_kind(&self, group: &str, plural: &str) -> Option<Store> {
        let mut removed: Option<Store> = None;
        self.change(|map| {
            map.retain(|(g, _, p), (store, _)| {
                let hit = *g == group && *p == plural;
                if hit {
                    removed = Some(store.clone());
                }
                !hit
            });
        });
        if let Some(cache) = removed.as_ref().and_then(Store::cache) {
            cache.stop();
        }
        removed
    }

    /// How many times the served kinds changed (a cheap check of whether a
    /// view built from them is current).
    pub fn generation(&self) -> u64 {
        *self.shared.changes.borrow()
    }

    /// Records that the served documents describe the kinds of
    /// `generation` (the server's document publisher calls it).
    pub fn mark_published(&self, generation: u64) {
        self.shared.published.send_if_modified(|g| {
            let newer = generation > *g;
            if newer {
                *g = generation;
            }
            newer
        });
    }

    /// The generation the served documents describe.
    pub fn published_generation(&self) -> u64 {
        *self.shared.published.borrow()
    }

    /// Waits (at most `limit`) until the served documents describe the
    /// kinds served now: a definition is `Established` once clients can
    /// discover its kind. Without a document publisher it returns after
    /// `limit`.
    pub async fn documents_published(&self, limit: std::time::Duration) {
        let generation = self.generation();
        let mut published = self.shared.published.subscribe();
        let _ = tokio::time::timeout(limit, published.wait_for(|g| *g >= generation)).await;
    }

    /// A receiver that sees every change of the served kinds.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    /// The store and kind serving `group`, `version` and `plural`.
    pub fn get(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<(Store, &'static KindInfo)> {
        let map = self.snapshot();
        // The map is covariant in its keys: look up with shorter-lived
        // `&str`s without allocating owned keys.
        let stores: &HashMap<(&str, &str, &str), _> = &map;
        stores.get(&(group, version, plural)).cloned()
    }

    /// Every served store with the facts of one of its versions (one entry
    /// per kind and served version), as served now.
    pub fn iter(&self) -> impl Iterator<Item = (Store, &'static KindInfo)> + use<> {
        let map = self.snapshot();
        map.values()
            .map(|(store, info)| (store.clone(), *info))
            .collect::<Vec<_>>()
            .into_iter()
    }

    /// The store of `plural` in `group`, in whichever version.
    pub fn find(&self, group: &str, plural: &str) -> Option<Store> {
        self.iter()
            .find(|(_, info)| info.group == group && info.plural == plural)
            .map(|(store, _)| store)
    }

    /// One store per kind of `group` named in `kinds` (`(plural, kind)`
    /// pairs), with its kind name: what controllers that read a whole
    /// built-in group (RBAC, flow control) work on.
    pub fn stores_of(
        &self,
        group: &str,
        kinds: &[(&str, &'static str)],
    ) -> Vec<(Store, &'static str)> {
        let mut out: Vec<(Store, &'static str)> = Vec::new();
        for (store, info) in self.iter() {
            if info.group != group {
                continue;
            }
            if let Some((_, kind)) = kinds.iter().find(|(plural, _)| *plural == info.plural)
                && !out.iter().any(|(s, _)| Arc::ptr_eq(s.kind(), store.kind()))
            {
                out.push((store, kind));
            }
        }
        out
    }
}

/// The store of `obj`'s `kind` among `stores` (as [`Stores::stores_of`]
/// returns them) and that kind; `None` when none of them serves it.
pub fn store_for_object<'a>(
    stores: &'a [(Store, &'static str)],
    obj: &serde_json::Value,
) -> Option<(&'a Store, &'static str)> {
    let kind = obj.get("kind").and_then(serde_json::Value::as_str)?;
    stores
        .iter()
        .find(|(_, k)| *k == kind)
        .map(|(store, k)| (store, *k))
}

#[cfg(test)]
mod tests {
    use super::*;
    use apiforge_storage::embedded::{EmbeddedOptions, EmbeddedStore};
    use serde_json::json;

    fn definition(column: &str) -> serde_json::Value {
        json!({"spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "additionalPrinterColumns": [{"name": column, "type": "string", "jsonPath": ".spec.x"}]}]}})
    }

    #[tokio::test]
    async fn kinds_join_and_leave_and_replaced_caches_stop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let storage: Arc<dyn Storage> =
            Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).expect("store"));
        let stores = Stores::new(
            &Scheme::new(),
            storage,
            "/registry",
            Some(&CacheOptions::default()),
            crate::admission::Plugins::default(),
        );
        let mut changes = stores.changes();
        let kind = |column: &str| {
            Arc::new(
                apiforge_core::scheme::custom::kind_from_definition(&definition(column), None)
                    .expect("kind"),
            )
        };
        let first = stores.add_kind(kind("A")).expect("added");
        assert!(changes.has_changed().expect("sender"));
        changes.borrow_and_update();
        let (_, info) = stores.get("example.com", "v1", "widgets").expect("served");
        assert_eq!(info.printer_columns[1].name, "A");
        // A changed definition replaces the store; the old cache stops.
        let second = stores.add_kind(kind("B")).expect("replaced");
        let (_, info) = stores.get("example.com", "v1", "widgets").expect("served");
        assert_eq!(info.printer_columns[1].name, "B");
        let old = first.cache().expect("cache").clone();
        drop(first);
        assert!(old.is_stopped());
        let weak = Arc::downgrade(&old);
        drop(old);
        for _ in 0..100 {
            if weak.upgrade().is_none() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(weak.upgrade().is_none(), "the stopped cache is freed");
        assert!(stores.remove_kind("example.com", "widgets").is_some());
        assert!(stores.get("example.com", "v1", "widgets").is_none());
        assert!(second.cache().expect("cache").is_stopped());
    }
}
