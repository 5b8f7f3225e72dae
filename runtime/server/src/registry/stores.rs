//! The one map from group, version and resource to the store serving it.
//! The compiled-in kinds are there from the start; the kinds of custom
//! resource definitions come and go ([`Stores::add_kind`],
//! [`Stores::remove_kind`]) and every clone sees them.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use apiforge_core::resource::KindInfo;
use apiforge_core::scheme::{Kind, Scheme};
use apiforge_storage::Storage;

use super::{CacheOptions, Caches, Store, attach_admission};

/// Key of [`Stores`]: group, version and plural, as the scheme names them.
type Key = (&'static str, &'static str, &'static str);

/// The store and kind facts of every served (group, version, plural).
/// One store serves every version of a kind. Cloning is cheap; clones
/// share the map.
#[derive(Clone, Default)]
pub struct Stores {
    shared: Arc<Shared>,
}

type Map = HashMap<Key, (Store, &'static KindInfo)>;

/// What the clones of one [`Stores`] share.
#[derive(Default)]
struct Shared {
    by_resource: RwLock<Arc<Map>>,
    /// What a store for a kind added later is built from.
    factory: Option<Factory>,
    /// The (group, plural) of kinds whose definition is being deleted:
    /// creates are refused.
    terminating: RwLock<Vec<(String, String)>>,
    /// Bumped on every change of the map (controllers that hold one store
    /// per kind look again).
    changes: tokio::sync::watch::Sender<u64>,
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
        let by_resource: Map = attach_admission(stores, admission)
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
        Stores {
            shared: Arc::new(Shared {
                by_resource: RwLock::new(Arc::new(by_resource)),
                factory: Some(Factory {
                    storage,
                    prefix: prefix.to_string(),
                    watch_cache: watch_cache.cloned(),
                    admission: chain,
                }),
                changes: tokio::sync::watch::Sender::new(0),
                terminating: RwLock::default(),
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
    /// of its versions, replacing what served its group and plural before;
    /// returns its store. Its watch cache starts now, its writes go through
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
        self.change(|map| {
            map.retain(|(g, _, p), _| !(*g == group && *p == plural));
            for v in kind.versions() {
                map.insert(
                    (v.info.group, v.info.version, v.info.plural),
                    (store.clone(), v.info),
                );
            }
        });
        Some(added)
    }

    /// Stops serving `plural` in `group` (every version); returns the
    /// store that served it.
    pub fn remove_kind(&self, group: &str, plural: &str) -> Option<Store> {
        let mut removed = None;
        self.change(|map| {
            map.retain(|(g, _, p), (store, _)| {
                let hit = *g == group && *p == plural;
                if hit {
                    removed = Some(store.clone());
                }
                !hit
            });
        });
        removed
    }

    /// Marks `plural` in `group` as terminating (its definition is being
    /// deleted: creates are refused) or not.
    pub fn set_terminating(&self, group: &str, plural: &str, terminating: bool) {
        let mut list = self
            .shared
            .terminating
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        list.retain(|(g, p)| !(g == group && p == plural));
        if terminating {
            list.push((group.to_string(), plural.to_string()));
        }
    }

    /// Whether `plural` in `group` is terminating.
    pub fn is_terminating(&self, group: &str, plural: &str) -> bool {
        self.shared
            .terminating
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .any(|(g, p)| g == group && p == plural)
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
