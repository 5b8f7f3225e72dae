//! [`StoreLookup`]: read access to every served resource by group, version
//! and plural, for admission plugins and controllers.

use std::collections::HashMap;
use std::sync::{Arc, RwLock, Weak};

use serde_json::Value;

use super::{ListParams, Store};
use crate::admission::{Lookup, async_trait};
use crate::error::{ApiError, ApiResult};
use apiforge_core::meta::Status;
use apiforge_core::resource::KindInfo;

/// Stores keyed by `(group, version, plural)`, each with that version's
/// facts (as the API server keys them).
pub type StoreMap = HashMap<(String, String, String), (Store, &'static KindInfo)>;

/// The served map of [`super::Stores`] (keyed by the scheme's names),
/// which kinds added at run time (custom resources) join.
pub(crate) type ServedMap =
    HashMap<(&'static str, &'static str, &'static str), (Store, &'static KindInfo)>;

/// The stores of the served resources, keyed by `(group, version, plural)`.
#[derive(Clone, Default)]
pub struct StoreLookup {
    stores: Arc<StoreMap>,
    /// The live map of the server's stores, for the kinds added after the
    /// chain was built (weak: those stores hold the chain that holds this).
    added: Option<Weak<RwLock<Arc<ServedMap>>>>,
}

impl StoreLookup {
    /// A lookup over `stores` (as the API server keys them).
    pub fn new(stores: StoreMap) -> Self {
        StoreLookup {
            stores: Arc::new(stores),
            added: None,
        }
    }

    /// Also reads the kinds served later from `served` (custom resources).
    pub(crate) fn with_added(mut self, served: Weak<RwLock<Arc<ServedMap>>>) -> Self {
        self.added = Some(served);
        self
    }

    /// The live map of kinds added later, if the server still runs.
    fn added(&self) -> Option<Arc<ServedMap>> {
        let served = self.added.as_ref()?.upgrade()?;
        let map = served
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        Some(map)
    }

    /// The store serving `group`/`version`/`resource`, with that version's
    /// facts.
    pub fn store(
        &self,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<(Store, &'static KindInfo)> {
        if let Some(found) =
            self.stores
                .get(&(group.to_string(), version.to_string(), resource.to_string()))
        {
            return Some(found.clone());
        }
        let added = self.added()?;
        let map: &HashMap<(&str, &str, &str), _> = &added;
        map.get(&(group, version, resource)).cloned()
    }

    fn encode(store: &Store, info: &KindInfo, hub: &Value) -> ApiResult<Value> {
        store
            .kind()
            .encode(info.version, hub)
            .map_err(|e| ApiError::from(Status::internal(e.to_string())))
    }
}

impl std::fmt::Debug for StoreLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.stores.keys()).finish()
    }
}

#[async_trait]
impl Lookup for StoreLookup {
    fn serves(&self, group: &str, version: &str, resource: &str) -> bool {
        self.store(group, version, resource).is_some()
    }

    fn resource_for_kind(&self, group: &str, version: &str, kind: &str) -> Option<(String, bool)> {
        let mapping = |info: &&'static KindInfo| {
            (info.group == group && info.version == version && info.kind == kind)
                .then(|| (info.plural.to_string(), info.namespaced()))
        };
        self.stores
            .values()
            .find_map(|(_, info)| mapping(info))
            .or_else(|| self.added()?.values().find_map(|(_, info)| mapping(info)))
    }

    fn revision(&self, group: &str, version: &str, resource: &str) -> Option<u64> {
        self.store(group, version, resource)?.0.cache()?.changes()
    }

    async fn exists(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        namespace: &str,
        name: &str,
        fresh: bool,
    ) -> ApiResult<bool> {
        if !fresh {
            let Some((store, _)) = self.store(group, version, resource) else {
                return Ok(false);
            };
            match store.get_shared(namespace, name, Some(0)).await {
                Ok(Some(_)) => return Ok(true),
                // No watch cache: storage answers below.
                Ok(None) => {}
                Err(e) if e.code() == 404 => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(self
            .get(group, version, resource, namespace, name, fresh)
            .await?
            .is_some())
    }

    async fn get(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        namespace: &str,
        name: &str,
        fresh: bool,
    ) -> ApiResult<Option<Value>> {
        let Some((store, info)) = self.store(group, version, resource) else {
            return Ok(None);
        };
        let store = &store;
        if !fresh {
            // From the watch cache: the object's encoding in `version` is
            // made once and shared (with GETs and watches), so a lookup on
            // every admitted request costs one small JSON parse.
            match store.get_shared(namespace, name, Some(0)).await {
                Ok(Some(cached)) => {
                    let bytes = cached.encoded(info.version, |hub| {
                        Self::encode(store, info, hub)
                            .map_err(|e| e.to_string())
                            .and_then(|v| serde_json::to_vec(&v).map_err(|e| e.to_string()))
                            .map(bytes::Bytes::from)
                    });
                    return bytes
                        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
                        .map(Some)
                        .map_err(|e| ApiError::from(Status::internal(e)));
                }
                // No watch cache: storage answers below.
                Ok(None) => {}
                Err(e) if e.code() == 404 => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        let got = if fresh {
            store.get_live(namespace, name).await
        } else {
            store.get(namespace, name, Some(0)).await
        };
        match got {
            Ok(hub) => Self::encode(store, info, &hub).map(Some),
            Err(e) if e.code() == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn list(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> ApiResult<Option<Vec<Value>>> {
        let Some((store, info)) = self.store(group, version, resource) else {
            return Ok(None);
        };
        let store = &store;
        // Like an informer's lister in kube: the watch cache as it is. A
        // consistent list would ask storage for its current revision and
        // wait for the cache to reach it on every admitted request.
        let params = ListParams {
            resource_version: Some(0),
            ..ListParams::default()
        };
        let page = store.list(namespace, &params).await?;
        page.items
            .iter()
            .map(|hub| Self::encode(store, info, hub))
            .collect::<ApiResult<Vec<_>>>()
            .map(Some)
    }
}

/// Gives every store the admission chain of `plugins`. The chain's
/// [`Lookup`] reads through the stores as they were (without admission), so
/// no store holds a chain that holds it.
pub fn attach_admission(stores: StoreMap, plugins: crate::admission::Plugins) -> StoreMap {
    attach_admission_with(stores, plugins, None)
}

/// [`attach_admission`], with a chain whose lookup also reads the kinds
/// added to `served` later.
pub(crate) fn attach_admission_with(
    stores: StoreMap,
    plugins: crate::admission::Plugins,
    served: Option<Weak<RwLock<Arc<ServedMap>>>>,
) -> StoreMap {
    let mut lookup = StoreLookup::new(stores.clone());
    if let Some(served) = served {
        lookup = lookup.with_added(served);
    }
    let lookup = Arc::new(lookup);
    let chain = Arc::new(crate::admission::Chain::new(plugins, lookup));
    stores
        .into_iter()
        .map(|(key, (store, info))| (key, (store.with_admission(chain.clone()), info)))
        .collect()
}
