//! The one map from group, version and resource to the store serving it.

use std::collections::HashMap;
use std::sync::Arc;

use apiforge_core::resource::KindInfo;
use apiforge_core::scheme::Scheme;
use apiforge_storage::Storage;

use super::{CacheOptions, Caches, Store, attach_admission};

/// Key of [`Stores`]: group, version and plural, as the scheme names them.
type Key = (&'static str, &'static str, &'static str);

/// The store and kind facts of every served (group, version, plural).
/// One store serves every version of a kind. Cloning is cheap.
#[derive(Clone, Default)]
pub struct Stores {
    by_resource: Arc<HashMap<Key, (Store, &'static KindInfo)>>,
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
        let by_resource = attach_admission(stores, admission)
            .into_iter()
            .filter_map(|((group, _, _), (store, info))| {
                let group = scheme.groups().iter().find(|g| g.name == group)?.name;
                Some(((group, info.version, info.plural), (store, info)))
            })
            .collect();
        Stores {
            by_resource: Arc::new(by_resource),
        }
    }

    /// The store and kind serving `group`, `version` and `plural`.
    pub fn get<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
        plural: &'a str,
    ) -> Option<&'a (Store, &'static KindInfo)> {
        // The map is covariant in its keys: look up with shorter-lived
        // `&str`s without allocating owned keys.
        let stores: &HashMap<(&str, &str, &str), _> = &self.by_resource;
        stores.get(&(group, version, plural))
    }

    /// Every served store with the facts of one of its versions (one entry
    /// per kind and served version).
    pub fn iter(&self) -> impl Iterator<Item = (&Store, &'static KindInfo)> {
        self.by_resource
            .values()
            .map(|(store, info)| (store, *info))
    }

    /// The store of `plural` in `group`, in whichever version.
    pub fn find(&self, group: &str, plural: &str) -> Option<Store> {
        self.iter()
            .find(|(_, info)| info.group == group && info.plural == plural)
            .map(|(store, _)| store.clone())
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
                out.push((store.clone(), kind));
            }
        }
        out
    }
}
