//! The generic registry store: the REST semantics of one kind on top of the
//! [`Storage`] interface, driven by the kind's strategy (the generic
//! apiserver's `registry.Store`).
//!
//! Objects enter and leave in their hub form: as JSON values, or, on the
//! create path, as one typed [`Object`] decoded once from the request body.
//! They are stored in the kind's storage version without
//! `metadata.resourceVersion`, which is set from the storage revision on
//! every read.

pub mod cache;
pub mod continue_token;
mod hooks;
pub mod informer;
mod lifecycle;
mod lookup;
mod selector;
mod stores;
#[cfg(test)]
mod subresource_tests;
#[cfg(test)]
mod tests;

pub use cache::{CacheOptions, Caches};
pub use lifecycle::{
    DeleteOutcome, FINALIZER_FOREGROUND, FINALIZER_ORPHAN, Propagation, PropagationPolicy,
};
pub use lookup::{StoreLookup, StoreMap, attach_admission};
pub use selector::{FieldSelector, LabelSelector, SelectorError};
pub use stores::{Stores, store_for_object};

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;

use crate::admission::{self, Operation};
use crate::error::{ApiError, ApiResult};
use apiforge_core::meta::{ObjectMeta, Status, Time};
use apiforge_core::resource::KindInfo;
use apiforge_core::scheme::{Kind, Object};
use apiforge_core::validation::{self, ErrorList, FieldError};
use apiforge_storage::{self as storage, KeyValue, Revision, Storage, WatchItem, WriteOutcome};

/// The registry store of one kind.
#[derive(Clone)]
pub struct Store {
    kind: Arc<Kind>,
    info: &'static KindInfo,
    storage: Arc<dyn Storage>,
    prefix: String,
    cache: Option<Arc<cache::WatchCache>>,
    admission: Arc<admission::Chain>,
    /// The subresource this store writes through (`""`, `status` or
    /// `scale`; see [`Store::subresource`]).
    subresource: &'static str,
}

/// What a list returns.
#[derive(Debug, Default)]
pub struct ListPage {
    /// The objects (hub form, resourceVersion set).
    pub items: Vec<Value>,
    /// The revision the list was read at.
    pub resource_version: Revision,
    /// The continue token, when more items follow.
    pub continue_token: Option<String>,
    /// Items after this page (only without selectors).
    pub remaining: Option<i64>,
}

/// A list page served by the watch cache: what the caller made of each
/// shared cached object (its memoized encoding, say), without copying the
/// objects.
#[derive(Debug)]
pub struct SharedPage<T> {
    /// What the caller made of the cached objects, in key order.
    pub items: Vec<T>,
    /// The revision the list was read at.
    pub resource_version: Revision,
    /// The continue token, when more items follow.
    pub continue_token: Option<String>,
    /// Items after this page (only without selectors).
    pub remaining: Option<i64>,
}

/// Options of a list or watch.
#[derive(Debug, Default, Clone)]
pub struct ListParams {
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
    /// Page size (0 = all).
    pub limit: usize,
    /// Continue token from a previous page.
    pub continue_token: Option<String>,
    /// `resourceVersion` as given (`None` = unset).
    pub resource_version: Option<Revision>,
    /// `resourceVersionMatch=Exact`.
    pub exact: bool,
    /// `sendInitialEvents` of a watch (`None` when absent).
    pub send_initial_events: Option<bool>,
}

/// One translated watch event.
#[derive(Debug, Clone)]
pub enum WatchEvent {
    /// `ADDED`, `MODIFIED` or `DELETED` with the object (hub form). Events
    /// from the watch cache share one object, and so its encodings, among
    /// all watchers.
    Object(&'static str, Arc<cache::CachedObject>),
    /// A bookmark at this revision.
    Bookmark(Revision),
    /// The bookmark that ends the initial events of a
    /// `sendInitialEvents=true` watch (annotated
    /// `k8s.io/initial-events-end`).
    InitialEventsEnd(Revision),
    /// An error that ends the watch.
    Error(Box<Status>),
}

/// Preconditions of a delete.
#[derive(Debug, Default, Clone)]
pub struct Preconditions {
    /// The object's uid must be this.
    pub uid: Option<String>,
    /// The object's resourceVersion must be this.
    pub resource_version: Option<String>,
}

impl Store {
    /// A store for `kind` under `<prefix>/<group>/<plural>/`. With
    /// `caches`, reads and watches are served by the resource's watch cache
    /// (started on first use); without, they go to storage.
    pub fn new(
        kind: Arc<Kind>,
        storage: Arc<dyn Storage>,
        root_prefix: &str,
        caches: Option<(&Caches, &CacheOptions)>,
    ) -> Self {
        let info = kind.storage_info();
        let prefix = if info.group.is_empty() {
            format!("{root_prefix}/{}/", info.plural)
        } else {
            format!("{root_prefix}/{}/{}/", info.group, info.plural)
        };
        let resource = if info.group.is_empty() {
            info.plural.to_string()
        } else {
            format!("{}.{}", info.plural, info.group)
        };
        let cache = caches.and_then(|(caches, opts)| {
            let mut opts = opts.clone();
            if let Some(size) = opts.sizes.get(&resource) {
                if *size == 0 {
                    return None;
                }
                opts.window = *size;
            }
            opts.resource = resource.clone();
            let decoder_kind = kind.clone();
            let rehydrate = rehydrate(&kind);
            Some(caches.get_or_start(
                &storage,
                &prefix,
                &opts,
                Arc::new(move |kv: &KeyValue| cached_object(&decoder_kind, kv, &rehydrate)),
            ))
        });
        Store {
            kind,
            info,
            storage,
            prefix,
            cache,
            admission: Arc::new(admission::Chain::empty()),
            subresource: "",
        }
    }

    /// The watch cache serving this store's reads, if any.
    pub fn cache(&self) -> Option<&Arc<cache::WatchCache>> {
        self.cache.as_ref()
    }

    /// The storage key prefix of this store's objects
    /// (`<prefix>/<group>/<plural>/`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The storage backend.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The kind this store serves.
    pub fn kind(&self) -> &Arc<Kind> {
        &self.kind
    }

    fn namespaced(&self) -> bool {
        self.info.namespaced()
    }

    /// The storage key of an object.
    pub fn key(&self, namespace: &str, name: &str) -> String {
        if self.namespaced() {
            format!("{}{namespace}/{name}", self.prefix)
        } else {
            format!("{}{name}", self.prefix)
        }
    }

    fn collection_prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced() => format!("{}{ns}/", self.prefix),
            _ => self.prefix.clone(),
        }
    }

    fn not_found(&self, name: &str) -> ApiError {
        Status::not_found(self.info.group, self.info.plural, name).into()
    }

    fn invalid(&self, name: &str, errs: &ErrorList) -> ApiError {
        Status::invalid(self.info.group, self.info.kind, name, errs.to_causes()).into()
    }

    fn decode_err(e: apiforge_core::scheme::DecodeError) -> ApiError {
        Status::internal(e.to_string()).into()
    }

    /// Encodes a hub object for storage (storage version, no resourceVersion).
    fn encode(&self, hub: &Value) -> ApiResult<Encoded> {
        let mut stored = self.kind.to_storage(hub).map_err(Self::decode_err)?;
        if let Some(meta) = stored.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        let bytes =
            Bytes::from(serde_json::to_vec(&stored).map_err(|e| Status::internal(e.to_string()))?);
        Ok(Encoded { bytes, stored })
    }

    /// The hub form of an object written as `encoded` at `revision`: what
    /// reading it back would give, without parsing the written bytes again.
    fn written(&self, encoded: Encoded, revision: Revision) -> ApiResult<Value> {
        let mut hub = self
            .kind
            .from_storage(encoded.stored)
            .map_err(Self::decode_err)?;
        set_resource_version(&mut hub, revision);
        Ok(hub)
    }

    /// Decodes a stored key-value into the hub form with its resourceVersion.
    pub fn decode(&self, kv: &KeyValue) -> ApiResult<Value> {
        decode_kv(&self.kind, kv)
    }

    /// Validation shared by create and update: upstream's generic
    /// `ValidateObjectMetaAccessor` at `metadata`, with names as path
    /// segments (scope, name and generateName, generation, labels,
    /// annotations and their total size, owner references, finalizers,
    /// managed fields), for every kind, compiled-in or custom.
    fn validate_meta(&self, meta: &ObjectMeta) -> ErrorList {
        validation::validate_object_meta(
            meta,
            self.namespaced(),
            path_segment_name,
            &validation::FieldPath::new("metadata"),
        )
    }

    /// Creates `obj`, the JSON form of this kind's `version`, in
    /// `namespace` unless an object of its name exists already: how the
    /// server's defaults (system namespaces, bootstrap RBAC and flow-control
    /// objects) are put in place. A 409 from a concurrent creator counts as
    /// present. Returns whether this call created the object.
    pub async fn ensure(&self, namespace: &str, version: &str, obj: Value) -> ApiResult<bool> {
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match self.get(namespace, &name, None).await {
            Ok(_) => return Ok(false),
            Err(e) if e.code() == 404 => {}
            Err(e) => return Err(e),
        }
        let hub = self
            .kind()
            .decode_object(version, obj)
            .map_err(|e| ApiError::from(Status::internal(e.to_string())))?;
        match self.create_object(namespace, hub, false).await {
            Ok(_) => Ok(true),
            Err(e) if e.code() == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Creates an object. `hub` is the decoded, defaulted request body in
    /// the hub's JSON form; the namespace comes from the path. Returns the
    /// stored object. [`Store::create_object`] without JSON: the body
    /// decoded once, typed.
    pub async fn create(&self, namespace: &str, hub: Value, dry_run: bool) -> ApiResult<Value> {
        let hub = self.kind.hub_object(&hub).map_err(|e| {
            ApiError::from(Status::bad_request(format!(
                "the object is not a {}: {e}",
                self.info.kind
            )))
        })?;
        let created = self.create_object(namespace, hub, dry_run).await?;
        created.to_value().map_err(Self::decode_err)
    }

    /// Creates an object from its typed hub form (the request body, decoded
    /// once): admission, the strategy's status reset, preparation,
    /// validation and warnings, and the storage encoding all work on it
    /// without decoding JSON again. Returns the stored object.
    pub async fn create_object(
        &self,
        namespace: &str,
        mut hub: Object,
        dry_run: bool,
    ) -> ApiResult<Object> {
        if self.namespaced() {
            let meta = hub.metadata_mut();
            if !meta.namespace.is_empty() && meta.namespace != namespace {
                return Err(Status::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
                .into());
            }
            meta.namespace = namespace.to_string();
        }
        let requested_name = hub.metadata().name.clone();
        let mut hub = self
            .admit_typed(Operation::Create, namespace, &requested_name, hub, dry_run)
            .await?;
        let meta = hub.metadata_mut();
        let name = meta.name.clone();
        let generate_name = meta.generate_name.clone();
        meta.uid = uuid::Uuid::new_v4().to_string();
        meta.creation_timestamp = Some(Time::now());
        meta.resource_version.clear();
        meta.deletion_timestamp = None;
        meta.deletion_grace_period_seconds = None;
        meta.self_link.clear();
        // With the status subresource, status is only written through
        // `/status`: a create starts without it.
        self.kind
            .reset_status_on_create_object(&mut hub)
            .map_err(Self::decode_err)?;
        self.kind
            .prepare_for_create_object(&mut hub)
            .map_err(Self::decode_err)?;
        if self.kind.bump_generation_on_spec_change() {
            hub.metadata_mut().generation = 1;
        }

        let attempts = if name.is_empty() && !generate_name.is_empty() {
            8
        } else {
            1
        };
        for _ in 0..attempts {
            let name = if name.is_empty() && !generate_name.is_empty() {
                let generated = format!("{generate_name}{}", random_suffix());
                hub.metadata_mut().name = generated.clone();
                generated
            } else {
                name.clone()
            };
            let mut errs = self
                .kind
                .validate_create_object(&hub)
                .map_err(Self::decode_err)?;
            if errs.is_empty() {
                errs = self.validate_meta(hub.metadata());
            }
            if !errs.is_empty() {
                return Err(self.invalid(&name, &errs));
            }
            if self.admission.wants(Operation::Create, self.info.group) {
                let object = hub.to_value().map_err(Self::decode_err)?;
                self.validate_admission(
                    Operation::Create,
                    namespace,
                    &name,
                    Some(&object),
                    None,
                    dry_run,
                )
                .await?;
            }
            for w in self
                .kind
                .warnings_on_create_object(&hub)
                .map_err(Self::decode_err)?
            {
                crate::request::warning::add(w);
            }
            let (bytes, mut stored) = self.kind.store_object(&hub).map_err(Self::decode_err)?;
            let key = self.key(namespace, &name);
            if dry_run {
                return match self.storage.get(&key, 0).await? {
                    Some(_) => {
                        Err(Status::already_exists(self.info.group, self.info.plural, &name).into())
                    }
                    None => Ok(stored),
                };
            }
            match self.storage.create(&key, Bytes::from(bytes)).await {
                Ok(kv) => {
                    stored.metadata_mut().resource_version = kv.mod_revision.to_string();
                    return Ok(stored);
                }
                Err(storage::Error::AlreadyExists(_)) if attempts > 1 => continue,
                Err(storage::Error::AlreadyExists(_)) => {
                    return Err(
                        Status::already_exists(self.info.group, self.info.plural, &name).into(),
                    );
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(Status::already_exists(self.info.group, self.info.plural, &name).into())
    }

    /// What storing and reading back `hub` would give (used by dry runs).
    fn round_trip(&self, hub: &Value) -> ApiResult<Value> {
        let encoded = self.encode(hub)?;
        self.kind
            .from_storage(encoded.stored)
            .map_err(Self::decode_err)
    }

    /// Reads one object. `resource_version`: `None` = most recent
    /// (consistent), `Some(0)` = any, `Some(n)` = not older than `n`.
    pub async fn get(
        &self,
        namespace: &str,
        name: &str,
        resource_version: Option<Revision>,
    ) -> ApiResult<Value> {
        if let Some(cached) = self.get_shared(namespace, name, resource_version).await? {
            return Ok(Arc::unwrap_or_clone(
                cached.object().map_err(Status::internal)?,
            ));
        }
        self.get_from_storage(namespace, name).await
    }

    /// Reads the current state of one object from storage, past the watch
    /// cache.
    pub async fn get_from_storage(&self, namespace: &str, name: &str) -> ApiResult<Value> {
        match self.storage.get(&self.key(namespace, name), 0).await? {
            Some(kv) => self.decode(&kv),
            None => Err(self.not_found(name)),
        }
    }

    /// Reads one object from the watch cache, sharing the cached object
    /// (and its encodings); `None` when the store has no cache, or when a
    /// consistent read finds the cache behind (read storage then:
    /// [`Store::get_from_storage`]).
    pub async fn get_shared(
        &self,
        namespace: &str,
        name: &str,
        resource_version: Option<Revision>,
    ) -> ApiResult<Option<Arc<cache::CachedObject>>> {
        let Some(cache) = &self.cache else {
            return Ok(None);
        };
        match resource_version {
            None => {
                if !cache.caught_up().await? {
                    return Ok(None);
                }
            }
            Some(rv) => cache.wait_for(rv).await?,
        }
        match cache.snapshot().get(&self.key(namespace, name)) {
            Some(o) => Ok(Some(o)),
            None => Err(self.not_found(name)),
        }
    }

    /// Lists objects (all namespaces when `namespace` is `None`).
    pub async fn list(&self, namespace: Option<&str>, params: &ListParams) -> ApiResult<ListPage> {
        let decoded = |o: &cache::CachedObject| -> ApiResult<Value> {
            o.object()
                .map(|v| (*v).clone())
                .map_err(|e| Status::internal(e).into())
        };
        if let Some(cache) = &self.cache
            && let Some(page) = self.list_cached(cache, namespace, params, decoded).await?
        {
            return Ok(ListPage {
                items: page.items,
                resource_version: page.resource_version,
                continue_token: page.continue_token,
                remaining: page.remaining,
            });
        }
        self.list_storage(namespace, params).await
    }

    /// Lists from the watch cache, calling `each` with every cached object
    /// of the page in turn (shared, not copied) and keeping what it
    /// returns; `None` when only storage can answer (no cache, an exact old
    /// revision, or a continue token whose snapshot is gone) — then use
    /// [`Store::list`].
    pub async fn list_shared<T>(
        &self,
        namespace: Option<&str>,
        params: &ListParams,
        each: impl FnMut(&cache::CachedObject) -> ApiResult<T> + Send,
    ) -> ApiResult<Option<SharedPage<T>>> {
        match &self.cache {
            Some(cache) => self.list_cached(cache, namespace, params, each).await,
            None => Ok(None),
        }
    }

    /// Serves a list from the watch cache; `None` when only storage can
    /// answer (an exact old revision, or a continue token whose snapshot is
    /// gone).
    async fn list_cached<T>(
        &self,
        cache: &cache::WatchCache,
        namespace: Option<&str>,
        params: &ListParams,
        mut each: impl FnMut(&cache::CachedObject) -> ApiResult<T> + Send,
    ) -> ApiResult<Option<SharedPage<T>>> {
        let prefix = self.collection_prefix(namespace);
        let (snapshot, start) = match &params.continue_token {
            Some(token) => {
                let t = continue_token::decode(token, &prefix)?;
                // A snapshot older than the storage compaction is gone, as
                // kube-apiserver's cache drops snapshots on compaction:
                // storage then answers 410 with an inconsistent continuation.
                let compacted = self.storage.compacted_revision().await.unwrap_or_default();
                match cache.snapshot_at(t.revision) {
                    Some(s) if t.revision >= compacted => (s, Some(t.start)),
                    _ => return Ok(None),
                }
            }
            None => {
                match params.resource_version {
                    // Behind after the wait: storage answers.
                    None => {
                        if !cache.caught_up().await? {
                            return Ok(None);
                        }
                    }
                    Some(0) => cache.wait_for(0).await?,
                    Some(rv) if params.exact || params.limit > 0 => {
                        cache.wait_for(rv).await?;
                        if cache.revision() != rv {
                            return Ok(None);
                        }
                    }
                    Some(rv) => cache.wait_for(rv).await?,
                }
                (cache.snapshot(), None)
            }
        };
        let filtered = !params.labels.is_empty() || !params.fields.is_empty();
        let mut page = SharedPage {
            items: Vec::new(),
            resource_version: snapshot.revision,
            continue_token: None,
            remaining: None,
        };
        let mut iter = snapshot.range(&prefix, start.as_deref());
        let mut fetched = 0u64;
        for o in iter.by_ref() {
            fetched += 1;
            if self.matches_cached(o, params) {
                page.items.push(each(o)?);
                if params.limit > 0 && page.items.len() >= params.limit {
                    break;
                }
            }
        }
        if params.limit > 0
            && page.items.len() >= params.limit
            && let Some(next) = iter.next()
        {
            page.continue_token = Some(continue_token::encode(
                snapshot.revision,
                &next.key,
                &prefix,
            ));
            if !filtered {
                // Objects after this page: from the count the previous page
                // left for this one, or for a first page the prefix's count
                // (kept while the objects do not change); else counted.
                let from_start = match start.as_deref() {
                    Some(k) => cache.remaining_from(snapshot.revision, &prefix, k),
                    None => Some(cache.count(&snapshot, &prefix)),
                };
                let rest = match from_start {
                    Some(n) => n.saturating_sub(fetched),
                    None => 1 + iter.count() as u64,
                };
                page.remaining = Some(rest as i64);
                cache.remember_remaining(snapshot.revision, &prefix, &next.key, rest);
            }
            cache.remember(&snapshot);
        }
        // kube-apiserver's cacher metrics; no index serves lists here.
        let metrics = crate::metrics::global();
        let [group, resource] = cache.metric_labels();
        metrics
            .cache_list
            .with_label_values(&[group, resource, ""])
            .inc();
        metrics
            .cache_list_fetched
            .with_label_values(&[group, resource, ""])
            .inc_by(fetched);
        metrics
            .cache_list_returned
            .with_label_values(&[group, resource])
            .inc_by(page.items.len() as u64);
        Ok(Some(page))
    }

    async fn list_storage(
        &self,
        namespace: Option<&str>,
        params: &ListParams,
    ) -> ApiResult<ListPage> {
        let prefix = self.collection_prefix(namespace);
        let (revision, start_key) = match &params.continue_token {
            Some(token) => {
                let t = continue_token::decode(token, &prefix)?;
                // -1: the inconsistent continuation handed out with a 410
                // (see `continue_expired`), read at the latest revision.
                (t.revision.max(0), Some(t.start))
            }
            None => {
                let rv = match params.resource_version {
                    Some(rv) if rv > 0 && (params.exact || params.limit > 0) => rv,
                    _ => 0,
                };
                (rv, None)
            }
        };
        let filtered = !params.labels.is_empty() || !params.fields.is_empty();
        let mut page = ListPage::default();
        {
            let result = self
                .storage
                .list(
                    &prefix,
                    storage::ListOptions {
                        revision,
                        limit: params.limit,
                        start_key: start_key.clone(),
                    },
                )
                .await
                .map_err(|e| match e {
                    storage::Error::Compacted { .. } if params.continue_token.is_some() => {
                        continue_token::expired(start_key.as_deref().unwrap_or_default(), &prefix)
                    }
                    storage::Error::Compacted { .. } => {
                        Status::expired("The resourceVersion for the provided list is too old.")
                            .into()
                    }
                    other => ApiError::from(other),
                })?;
            page.resource_version = result.revision;
            let last_key = result.items.last().map(|kv| kv.key.clone());
            for kv in &result.items {
                let obj = self.decode(kv)?;
                if self.matches(&obj, params) {
                    page.items.push(obj);
                }
            }
            if result.more {
                let next = format!("{}\u{0}", last_key.unwrap_or_default());
                if params.limit > 0 && page.items.len() < params.limit && filtered {
                    // Keep filling the page from the same snapshot.
                    return self
                        .fill_page(page, &prefix, result.revision, Some(next), params)
                        .await;
                }
                page.continue_token = Some(continue_token::encode(result.revision, &next, &prefix));
                if !filtered {
                    page.remaining = Some(result.remaining);
                }
            }
        }
        Ok(page)
    }

    async fn fill_page(
        &self,
        mut page: ListPage,
        prefix: &str,
        revision: Revision,
        mut start_key: Option<String>,
        params: &ListParams,
    ) -> ApiResult<ListPage> {
        loop {
            let want = params.limit - page.items.len();
            let result = self
                .storage
                .list(
                    prefix,
                    storage::ListOptions {
                        revision,
                        limit: want.max(1),
                        start_key: start_key.clone(),
                    },
                )
                .await?;
            let last_key = result.items.last().map(|kv| kv.key.clone());
            for kv in &result.items {
                let obj = self.decode(kv)?;
                if self.matches(&obj, params) {
                    page.items.push(obj);
                }
            }
            if !result.more {
                return Ok(page);
            }
            let next = format!("{}\u{0}", last_key.unwrap_or_default());
            if page.items.len() >= params.limit {
                page.continue_token = Some(continue_token::encode(revision, &next, prefix));
                return Ok(page);
            }
            start_key = Some(next);
        }
    }

    /// Whether a cached object passes the selectors; decodes it only when
    /// there are selectors (an object that cannot be decoded never matches).
    fn matches_cached(&self, obj: &cache::CachedObject, params: &ListParams) -> bool {
        if params.fields.is_empty() && params.labels.is_empty() {
            return true;
        }
        match obj.object() {
            Ok(v) => self.matches(&v, params),
            Err(e) => {
                tracing::error!(key = %obj.key, error = %e, "cached object cannot be decoded");
                false
            }
        }
    }

    fn matches(&self, obj: &Value, params: &ListParams) -> bool {
        if params.fields.is_empty() && params.labels.is_empty() {
            return true;
        }
        let meta = apiforge_core::scheme::object_meta(obj);
        params.labels.matches(&meta.labels)
            && params.fields.matches(&|field| field_value(obj, field))
    }

    /// Replaces an object (PUT). Returns the stored object and whether it
    /// was created.
    pub async fn update(
        &self,
        namespace: &str,
        name: &str,
        hub: Value,
        dry_run: bool,
    ) -> ApiResult<(Value, bool)> {
        self.update_with(namespace, name, hub, dry_run, None).await
    }

    /// [`Store::update`], with `transform` run on each attempt's new object
    /// (hub form) against the stored object it replaces (`None` when the
    /// update creates), before admission: the field manager's bookkeeping
    /// (kube-apiserver's `UpdatedObjectInfo` transformers).
    pub async fn update_with(
        &self,
        namespace: &str,
        name: &str,
        mut hub: Value,
        dry_run: bool,
        transform: Option<UpdateTransform<'_>>,
    ) -> ApiResult<(Value, bool)> {
        {
            let meta = metadata_mut(&mut hub)?;
            let body_name = meta.get("name").and_then(Value::as_str).unwrap_or_default();
            if body_name.is_empty() {
                meta.insert("name".into(), Value::String(name.into()));
            } else if body_name != name {
                return Err(Status::bad_request(format!(
                    "the name of the object ({body_name}) does not match the name on the URL ({name})"
                ))
                .into());
            }
            if self.namespaced() {
                match meta.get("namespace").and_then(Value::as_str) {
                    Some(ns) if !ns.is_empty() && ns != namespace => {
                        return Err(Status::bad_request(
                            "the namespace of the provided object does not match the namespace sent on the request",
                        )
                        .into());
                    }
                    _ => {
                        meta.insert("namespace".into(), Value::String(namespace.into()));
                    }
                }
            }
        }
        let key = self.key(namespace, name);
        let requested_rv = apiforge_core::scheme::object_meta(&hub).resource_version;
        // Like kube-apiserver's guaranteed update, start from the watch
        // cache's copy when it is the version the request names (or any
        // version, for an unconditional update) and fall back to a storage
        // read whenever that copy could be stale: a failed compare-and-swap
        // or an update that looks like it changes nothing.
        let mut cached = self.cached_for_update(&key, &requested_rv).await;
        loop {
            let current = match cached.take() {
                Some(c) => Current {
                    revision: c.revision,
                    old: Arc::unwrap_or_clone(c.object().map_err(Status::internal)?),
                    stored: None,
                    stale: false,
                },
                None => {
                    let Some(kv) = self.storage.get(&key, 0).await? else {
                        if !self.subresource.is_empty() || !self.kind.allow_create_on_update() {
                            return Err(self.not_found(name));
                        }
                        let mut hub = hub.clone();
                        if let Some(transform) = transform {
                            transform(None, &mut hub)?;
                        }
                        let created = self.create(namespace, hub, dry_run).await?;
                        return Ok((created, true));
                    };
                    Current {
                        revision: kv.mod_revision,
                        old: self.decode(&kv)?,
                        stale: kv.stale,
                        stored: Some(kv.value),
                    }
                }
            };
            let old = current.old;
            if requested_rv.is_empty() {
                if !self.kind.allow_unconditional_update() {
                    let errs = ErrorList(vec![FieldError::invalid(
                        "metadata.resourceVersion",
                        "0x0",
                        "must be specified for an update",
                    )]);
                    // The generic store names the group-resource here,
                    // not the kind.
                    return Err(Status::invalid(
                        self.info.group,
                        self.info.plural,
                        name,
                        errs.to_causes(),
                    )
                    .into());
                }
            } else if requested_rv != current.revision.to_string() {
                return Err(self.conflict(name));
            }
            // A uid in the body is a precondition of the update.
            if let Some(uid) = hub
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .filter(|u| !u.is_empty())
            {
                let stored_uid = old
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if uid != stored_uid {
                    return Err(Status::conflict(
                        self.info.group,
                        self.info.plural,
                        name,
                        &format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {stored_uid}"
                        ),
                    )
                    .into());
                }
            }
            let mut new = hub.clone();
            copy_immutable_meta(&mut new, &old)?;
            if let Some(transform) = transform {
                transform(Some(&old), &mut new)?;
            }
            let mut new = self
                .admit_object(Operation::Update, namespace, name, new, Some(&old), dry_run)
                .await?;
            self.prepare_write(&mut new, &old)?;
            self.next_generation(&mut new, &old)?;
            self.keep_managed_times(&mut new, &old)?;
            let mut errs = self
                .kind
                .validate_update(&new, &old)
                .map_err(Self::decode_err)?;
            if errs.is_empty() {
                errs = self.validate_meta(&apiforge_core::scheme::object_meta(&new));
            }
            if !errs.is_empty() {
                return Err(self.invalid(name, &errs));
            }
            self.validate_admission(
                Operation::Update,
                namespace,
                name,
                Some(&new),
                Some(&old),
                dry_run,
            )
            .await?;
            if self.subresource != "status" {
                self.warn_update(&new, &old)?;
            }
            if dry_run {
                let mut out = self.round_trip(&new)?;
                set_resource_version(&mut out, current.revision);
                return Ok((out, false));
            }
            let encoded = self.encode(&new)?;
            // Like kube-apiserver's storage, an update that would store the
            // same bytes writes nothing: the object keeps its
            // resourceVersion (kubectl then reports "(no change)"). Only
            // the stored bytes can tell, so a cached start that looks
            // unchanged is checked against storage. A stale value (read
            // with an encryption key that no longer writes) is written
            // anyway, which re-encrypts it: key rotation.
            match &current.stored {
                Some(stored) if !current.stale && encoded.bytes == *stored => {
                    return Ok((old, false));
                }
                Some(_) => {}
                None if same_object(&new, &old) => continue,
                None => {}
            }
            match self.write_update(&key, current.revision, encoded).await? {
                Some(obj) => return Ok((obj, false)),
                // The cached copy was stale, or someone wrote meanwhile:
                // storage decides.
                None if current.stored.is_none() || requested_rv.is_empty() => continue,
                None => return Err(self.conflict(name)),
            }
        }
    }

    /// The watch cache's copy of `key` to start an update from: when the
    /// request names a resourceVersion, only the copy at that version.
    ///
    /// A client that updates again right after its last write names a
    /// version whose watch event may still be on its way to the cache; a
    /// short wait for it (bounded by [`CACHE_WAIT_FOR_UPDATE`]) is cheaper
    /// than reading the object from storage.
    async fn cached_for_update(
        &self,
        key: &str,
        requested_rv: &str,
    ) -> Option<Arc<cache::CachedObject>> {
        let cache = self.cache.as_ref()?;
        if requested_rv.is_empty() {
            return cache.snapshot().get(key);
        }
        let rv = requested_rv.parse::<Revision>().ok()?;
        if cache.revision() < rv && !cache.sees_within(rv, CACHE_WAIT_FOR_UPDATE).await {
            return None;
        }
        cache.snapshot().get(key).filter(|obj| obj.revision == rv)
    }

    fn conflict(&self, name: &str) -> ApiError {
        Status::conflict(
            self.info.group,
            self.info.plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
        .into()
    }

    /// Deletes an object: removes it, or, while finalizers hold it, marks
    /// it terminating. The kind's default decides what happens to the
    /// dependents ([`Store::delete_propagating`] with no options).
    pub async fn delete(
        &self,
        namespace: &str,
        name: &str,
        pre: &Preconditions,
        dry_run: bool,
    ) -> ApiResult<DeleteOutcome> {
        self.delete_propagating(namespace, name, pre, dry_run, &Propagation::default())
            .await
    }

    /// [`Store::delete`] with the garbage-collection options of the
    /// DELETE: orphaning or foreground deletion add their finalizer, so
    /// the object stays (terminating) until the garbage collector is done.
    pub async fn delete_propagating(
        &self,
        namespace: &str,
        name: &str,
        pre: &Preconditions,
        dry_run: bool,
        propagation: &Propagation,
    ) -> ApiResult<DeleteOutcome> {
        let key = self.key(namespace, name);
        self.admit_delete(namespace, name, dry_run).await?;
        loop {
            let Some(current) = self.storage.get(&key, 0).await? else {
                return Err(self.not_found(name));
            };
            let obj = self.decode(&current)?;
            let meta = apiforge_core::scheme::object_meta(&obj);
            if let Some(uid) = &pre.uid
                && *uid != meta.uid
            {
                return Err(Status::conflict(
                    self.info.group,
                    self.info.plural,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta.uid
                    ),
                )
                .into());
            }
            if let Some(rv) = &pre.resource_version
                && *rv != meta.resource_version
            {
                return Err(Status::conflict(
                        self.info.group,
                        self.info.plural,
                        name,
                        &format!(
                            "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                            meta.resource_version
                        ),
                    )
                    .into());
            }
            self.validate_admission(
                Operation::Delete,
                namespace,
                name,
                None,
                Some(&obj),
                dry_run,
            )
            .await?;
            match self
                .graceful_delete(&key, &current, &obj, dry_run, propagation)
                .await?
            {
                lifecycle::Graceful::Immediate => {}
                lifecycle::Graceful::Pending(obj) => return Ok(DeleteOutcome::Terminating(obj)),
                lifecycle::Graceful::Retry => continue,
            }
            if dry_run {
                return Ok(DeleteOutcome::Removed(obj));
            }
            match self.storage.delete(&key, Some(current.mod_revision)).await {
                Ok(WriteOutcome::Done(_)) => return Ok(DeleteOutcome::Removed(obj)),
                Ok(WriteOutcome::Conflict(_)) => continue,
                Err(storage::Error::NotFound(_)) => return Err(self.not_found(name)),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Watches objects. With `resource_version` unset or 0 the current state
    /// comes first as `ADDED` events.
    pub async fn watch(
        &self,
        namespace: Option<&str>,
        params: &ListParams,
        bookmarks: bool,
    ) -> ApiResult<futures::stream::BoxStream<'static, WatchEvent>> {
        if let Some(cache) = &self.cache {
            return self.watch_cached(cache, namespace, params, bookmarks).await;
        }
        let prefix = self.collection_prefix(namespace);
        let (initial, start) = match (params.send_initial_events, params.resource_version) {
            (Some(false), rv) => {
                let start = match rv {
                    Some(rv) if rv > 0 => rv,
                    _ => self.storage.current_revision().await?,
                };
                (Vec::new(), start)
            }
            (None, Some(rv)) if rv > 0 => (Vec::new(), rv),
            _ => {
                let page = self
                    .list(
                        namespace,
                        &ListParams {
                            limit: 0,
                            continue_token: None,
                            ..params.clone()
                        },
                    )
                    .await?;
                (page.items, page.resource_version)
            }
        };
        let stream = match self.storage.watch(&prefix, start, bookmarks).await {
            Ok(s) => s,
            // As kube-apiserver's etcd3 watcher (`interpretWatchError`); only
            // the watch cache names the revisions.
            Err(storage::Error::Compacted { .. }) => {
                let status = Status::expired(WATCH_TOO_OLD);
                return Ok(
                    futures::stream::iter(vec![WatchEvent::Error(Box::new(status))]).boxed(),
                );
            }
            Err(e) => return Err(e.into()),
        };
        let end_marker = (params.send_initial_events == Some(true) && bookmarks)
            .then_some(WatchEvent::InitialEventsEnd(start));
        let initial = futures::stream::iter(
            initial
                .into_iter()
                .map(|o| {
                    WatchEvent::Object(
                        "ADDED",
                        Arc::new(cache::CachedObject::new(String::new(), 0, o)),
                    )
                })
                .chain(end_marker),
        );
        let store = self.clone();
        let params = params.clone();
        let live = stream.filter_map(move |item| {
            let out = store.translate(item, &params);
            async move { out }
        });
        // Stop after the first error event.
        let mut done = false;
        let live = live.take_while(move |ev| {
            let keep = !done;
            if matches!(ev, WatchEvent::Error(_)) {
                done = true;
            }
            async move { keep }
        });
        Ok(initial.chain(live).boxed())
    }

    async fn watch_cached(
        &self,
        cache: &cache::WatchCache,
        namespace: Option<&str>,
        params: &ListParams,
        bookmarks: bool,
    ) -> ApiResult<futures::stream::BoxStream<'static, WatchEvent>> {
        let prefix = self.collection_prefix(namespace);
        // Wait until the cache is at least as new as the request needs.
        match params.resource_version {
            None => cache.wait_consistent().await?,
            Some(rv) => cache.wait_for(rv).await?,
        }
        let from = match (params.send_initial_events, params.resource_version) {
            // Initial events from the current state.
            (Some(true), _) | (None, None) | (None, Some(0)) => None,
            // No initial events: start at the given or the current revision.
            (Some(false), rv) => Some(rv.filter(|r| *r > 0).unwrap_or_else(|| cache.revision())),
            (None, Some(rv)) => Some(rv),
        };
        let watch = match cache.watch(&prefix, from) {
            Ok(watch) => watch,
            Err(e) if e.code() == 410 => {
                return Ok(futures::stream::iter(vec![WatchEvent::Error(e.0)]).boxed());
            }
            Err(e) => return Err(e),
        };
        let end_marker = (params.send_initial_events == Some(true) && bookmarks)
            .then_some(cache::CacheItem::Progress(watch.revision));
        let items = futures::stream::iter(watch.initial.into_iter().map(Ok))
            .chain(futures::stream::iter(end_marker.map(Err)))
            .chain(watch.live.map(Ok));
        let store = self.clone();
        let params = params.clone();
        let mut last_bookmark = std::time::Instant::now();
        let events = items.filter_map(move |item| {
            let item = match item {
                Ok(item) => item,
                // The marker that ends the initial events.
                Err(cache::CacheItem::Progress(rev)) => {
                    return futures::future::ready(Some(WatchEvent::InitialEventsEnd(rev)));
                }
                Err(other) => other,
            };
            let out = match item {
                cache::CacheItem::Progress(rev) => {
                    if bookmarks && last_bookmark.elapsed() >= BOOKMARK_INTERVAL {
                        last_bookmark = std::time::Instant::now();
                        Some(WatchEvent::Bookmark(rev))
                    } else {
                        None
                    }
                }
                cache::CacheItem::Event(ev) => {
                    let now = store.matches_cached(&ev.object, &params);
                    let before = ev
                        .prev
                        .as_ref()
                        .is_some_and(|p| store.matches_cached(p, &params));
                    // A deleted object carries the delete's revision (the
                    // storage contract), so the shared object is sent as is.
                    transition(ev.kind, before, now)
                        .map(|ty| WatchEvent::Object(ty, ev.object.clone()))
                }
            };
            futures::future::ready(out)
        });
        Ok(events.boxed())
    }

    fn translate(
        &self,
        item: storage::Result<WatchItem>,
        params: &ListParams,
    ) -> Option<WatchEvent> {
        match item {
            Ok(WatchItem::Progress(rev)) => Some(WatchEvent::Bookmark(rev)),
            Ok(WatchItem::Event(ev)) => {
                let obj = match self.decode(&ev.kv) {
                    Ok(o) => o,
                    Err(e) => return Some(WatchEvent::Error(e.0)),
                };
                let now = self.matches(&obj, params);
                let before = match &ev.prev {
                    Some(prev) => self
                        .decode(prev)
                        .map(|p| self.matches(&p, params))
                        .unwrap_or(false),
                    None => false,
                };
                transition(ev.kind, before, now).map(|ty| {
                    WatchEvent::Object(
                        ty,
                        Arc::new(cache::CachedObject::new(ev.kv.key, ev.kv.mod_revision, obj)),
                    )
                })
            }
            Err(storage::Error::Compacted { .. }) => {
                Some(WatchEvent::Error(Box::new(Status::expired(WATCH_TOO_OLD))))
            }
            Err(e) => Some(WatchEvent::Error(ApiError::from(e).0)),
        }
    }
}

/// The 410 message of a storage watch from a compacted revision.
const WATCH_TOO_OLD: &str = "The resourceVersion for the provided watch is too old.";

/// How often a watcher that allows bookmarks gets one (at most).
const BOOKMARK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// How long an update naming a resourceVersion the watch cache has not seen
/// yet waits for it before reading the object from storage instead.
const CACHE_WAIT_FOR_UPDATE: std::time::Duration = std::time::Duration::from_millis(100);

/// The watch event type of a change, given whether the object matched the
/// watcher's selectors before and after it (`None`: not the watcher's
/// business).
fn transition(kind: storage::EventType, before: bool, now: bool) -> Option<&'static str> {
    match kind {
        storage::EventType::Deleted if before || now => Some("DELETED"),
        storage::EventType::Created if now => Some("ADDED"),
        storage::EventType::Modified if now && before => Some("MODIFIED"),
        storage::EventType::Modified if now => Some("ADDED"),
        storage::EventType::Modified if before => Some("DELETED"),
        _ => None,
    }
}

/// Decodes a cached object's encoding (JSON in a served version,
/// resourceVersion set) back into the hub form.
fn rehydrate(kind: &Kind) -> cache::Rehydrate {
    let kind = kind.clone();
    Arc::new(move |version: &'static str, bytes: &[u8]| {
        let object: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        kind.decode(version, object).map_err(|e| e.to_string())
    })
}

/// A stored key-value as the watch cache keeps it: its JSON encoding in the
/// storage version with its resourceVersion (what a read in that version
/// serves), or the hub form if that encoding cannot be made.
fn cached_object(
    kind: &Kind,
    kv: &KeyValue,
    rehydrate: &cache::Rehydrate,
) -> ApiResult<cache::CachedObject> {
    let hub = decode_kv(kind, kv)?;
    let version = kind.storage_info().version;
    match kind
        .encode(version, &hub)
        .map_err(|e| e.to_string())
        .and_then(|v| serde_json::to_vec(&v).map_err(|e| e.to_string()))
    {
        Ok(bytes) => Ok(cache::CachedObject::from_encoding(
            kv.key.clone(),
            kv.mod_revision,
            version,
            // Exactly sized: the encoding lives as long as it is cached. A
            // copy, not the vector shrunk in place: the vector can have
            // grown to twice the encoding, and the allocator keeps a block
            // that shrinks by less than half (docs/performance.md).
            bytes::Bytes::copy_from_slice(&bytes),
            rehydrate.clone(),
        )),
        Err(_) => Ok(cache::CachedObject::new(
            kv.key.clone(),
            kv.mod_revision,
            hub,
        )),
    }
}

/// An object encoded for storage.
struct Encoded {
    /// The bytes to write.
    bytes: Bytes,
    /// The storage-version value `bytes` serialize (no resourceVersion).
    stored: Value,
}

/// The state a guaranteed update starts from.
struct Current {
    /// Its resourceVersion (the compare-and-swap's expected revision).
    revision: Revision,
    /// The object in the hub form.
    old: Value,
    /// The stored bytes, when read from storage (`None`: the watch cache's
    /// copy, which may be stale).
    stored: Option<Bytes>,
    /// The stored bytes were read with an encryption provider or key that
    /// no longer writes ([`apiforge_storage::KeyValue::stale`]): even an
    /// unchanged object is written, to re-encrypt it.
    stale: bool,
}

/// Whether `new` is `old` apart from `metadata.resourceVersion`.
fn same_object(new: &Value, old: &Value) -> bool {
    let (Some(new), Some(old)) = (new.as_object(), old.as_object()) else {
        return new == old;
    };
    new.len() == old.len()
        && new
            .iter()
            .all(|(field, value)| match (field.as_str(), old.get(field)) {
                ("metadata", Some(before)) => same_meta(value, before),
                (_, Some(before)) => value == before,
                (_, None) => false,
            })
}

/// Whether two `metadata` values are equal apart from `resourceVersion`.
fn same_meta(new: &Value, old: &Value) -> bool {
    let (Some(new), Some(old)) = (new.as_object(), old.as_object()) else {
        return new == old;
    };
    let others =
        |m: &serde_json::Map<String, Value>| m.keys().filter(|k| *k != "resourceVersion").count();
    others(new) == others(old)
        && new
            .iter()
            .filter(|(k, _)| *k != "resourceVersion")
            .all(|(k, v)| old.get(k) == Some(v))
}

/// Decodes a stored key-value into the hub form with its resourceVersion.
fn decode_kv(kind: &Kind, kv: &KeyValue) -> ApiResult<Value> {
    let stored: Value = serde_json::from_slice(&kv.value)
        .map_err(|e| Status::internal(format!("object stored at {} is not JSON: {e}", kv.key)))?;
    let mut hub = kind.from_storage(stored).map_err(Store::decode_err)?;
    set_resource_version(&mut hub, kv.mod_revision);
    Ok(hub)
}

fn random_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

fn metadata_mut(obj: &mut Value) -> ApiResult<&mut serde_json::Map<String, Value>> {
    let map = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::from(Status::bad_request("the object is not a JSON object")))?;
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    if meta.is_null() {
        *meta = Value::Object(Default::default());
    }
    meta.as_object_mut()
        .ok_or_else(|| ApiError::from(Status::bad_request("metadata must be an object")))
}

/// Sets `metadata.resourceVersion`.
pub fn set_resource_version(obj: &mut Value, rv: Revision) {
    if let Ok(meta) = metadata_mut(obj) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

/// `path.ValidatePathSegmentName`: a name, or with `prefix` a
/// generateName, that can be a segment of a URL path.
fn path_segment_name(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        validation::is_valid_path_segment_prefix(name)
    } else {
        validation::is_valid_path_segment_name(name)
    }
}

fn copy_immutable_meta(new: &mut Value, old: &Value) -> ApiResult<()> {
    let none = serde_json::Map::new();
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&none);
    let meta = metadata_mut(new)?;
    for key in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old_meta.get(key) {
            Some(v) => {
                meta.insert(key.into(), v.clone());
            }
            None => {
                meta.remove(key);
            }
        }
    }
    meta.remove("resourceVersion");
    Ok(())
}

/// A change made to an update's new object with the stored object it
/// replaces (None when the update creates); both in hub form.
pub type UpdateTransform<'t> =
    &'t (dyn Fn(Option<&Value>, &mut Value) -> ApiResult<()> + Send + Sync);

/// Reads a simple dotted field (`metadata.name`, `spec.x`) as a string.
pub fn field_value(obj: &Value, path: &str) -> Option<String> {
    let mut cur = obj;
    for part in path.split('.') {
        cur = cur.get(part)?;
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}
