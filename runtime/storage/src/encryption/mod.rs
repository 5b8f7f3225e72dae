//! Encryption at rest, as kube-apiserver's `--encryption-provider-config`:
//! a storage decorator ([`Encrypted`]) that encrypts every value on its way
//! to the backend and decrypts it on every way back (get, list, watch
//! events and their previous states, the current state a failed
//! compare-and-swap returns, a delete's last state).
//!
//! Which providers apply is chosen per group-resource from the storage key
//! (`<prefix>/<plural>/…` for the core group, `<prefix>/<group>/<plural>/…`
//! otherwise) by the rules of an `EncryptionConfiguration` file
//! ([`Transformers::load`]): the exact resource, then `*.<group>`, then
//! `*.*`; a resource no rule names is stored in plain bytes. Stored values
//! are byte-compatible with kube-apiserver's
//! (`k8s:enc:<provider>:v1:<key name>:` + payload; aesgcm authenticates the
//! full storage key).
//!
//! A value read with a provider or key that is not the first one is marked
//! [`KeyValue::stale`]: the registry then writes an update of it even when
//! the object did not change, so re-writing every object re-encrypts it
//! with the current key (key rotation).
//!
//! Values are encrypted once, before the backend's own retries, so an etcd
//! write whose answer was lost is still recognised by its bytes.

mod config;
mod provider;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::StreamExt;

pub use provider::{
    Kind, NamedKey, Provider, ReadError, ReadValue, ResourceTransformer, TransformError,
};

use super::{
    KeyValue, ListOptions, ListResult, Result, Revision, Storage, WatchItem, WatchStream,
    WriteOutcome,
};

/// Why an encryption configuration could not be used (upstream's
/// messages).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read, decoded or validated.
    #[error("error while parsing file: {0}")]
    Parse(String),
    /// A provider could not be built (a KMS provider, which apiforge does
    /// not implement).
    #[error("error while building transformers: {0}")]
    Build(String),
}

/// A group and resource (`secrets`, `flunders.wardle.example.com`); `*`
/// in either is a wildcard of a rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GroupResource {
    /// The group, `""` for core.
    pub group: String,
    /// The resource (plural).
    pub resource: String,
}

impl GroupResource {
    /// Parses `resource[.group]`, splitting at the first dot
    /// (`schema.ParseGroupResource`): `*.` is every core resource, `*.*`
    /// every resource.
    pub fn parse(s: &str) -> GroupResource {
        match s.split_once('.') {
            Some((resource, group)) => GroupResource {
                group: group.to_string(),
                resource: resource.to_string(),
            },
            None => GroupResource {
                group: String::new(),
                resource: s.to_string(),
            },
        }
    }

    fn new(group: &str, resource: &str) -> GroupResource {
        GroupResource {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// The transformers of every resource, from an `EncryptionConfiguration`.
#[derive(Debug, Default)]
pub struct Transformers {
    rules: HashMap<GroupResource, ResourceTransformer>,
}

static UNCONFIGURED: ResourceTransformer = ResourceTransformer::Unconfigured;

impl Transformers {
    /// Reads, validates and builds the configuration file at `path`
    /// (`--encryption-provider-config`).
    pub fn load(path: &Path) -> Result<Transformers, Error> {
        config::load(path)
    }

    /// Builds the configuration given as JSON or YAML text.
    pub fn parse(text: &str) -> Result<Transformers, Error> {
        config::from_str(text)
    }

    /// The transformer of `gr`: its exact rule, else its group's `*.group`
    /// rule, else the `*.*` rule, else plain bytes.
    pub fn for_resource(&self, gr: &GroupResource) -> &ResourceTransformer {
        self.rules
            .get(gr)
            .or_else(|| self.rules.get(&GroupResource::new(&gr.group, "*")))
            .or_else(|| self.rules.get(&GroupResource::new("*", "*")))
            .unwrap_or(&UNCONFIGURED)
    }
}

/// Receives every transformation for metrics
/// (`apiserver_storage_transformation_*`).
pub trait Observer: Send + Sync {
    /// A `to_storage` or `from_storage` `transformation` of a value of
    /// `resource` by the provider `prefix` (`k8s:enc:aescbc:v1:`,
    /// `identity`, `unknown`) took `seconds` and succeeded or not.
    fn observe(&self, resource: &str, transformation: &str, prefix: &str, ok: bool, seconds: f64);
}

/// What the decorator and its watch streams share.
struct Shared {
    prefix: String,
    groups: HashSet<String>,
    transformers: Arc<Transformers>,
    observer: Option<Arc<dyn Observer>>,
}

impl Shared {
    /// The group-resource a storage key belongs to: the first segment
    /// after the prefix is a group when it has a dot (every API group but
    /// core's, custom resources' included) or is one of the known groups.
    fn resource_of(&self, key: &str) -> GroupResource {
        let rest = key.strip_prefix(self.prefix.as_str()).unwrap_or(key);
        let mut parts = rest.trim_start_matches('/').split('/');
        match (parts.next(), parts.next()) {
            (Some(first), Some(plural))
                if !plural.is_empty() && (first.contains('.') || self.groups.contains(first)) =>
            {
                GroupResource::new(first, plural)
            }
            (Some(plural), _) => GroupResource::new("", plural),
            _ => GroupResource::default(),
        }
    }

    fn observe(&self, gr: &GroupResource, what: &str, prefix: &str, ok: bool, started: Instant) {
        if let Some(observer) = &self.observer {
            let seconds = started.elapsed().as_secs_f64();
            observer.observe(&gr.to_string(), what, prefix, ok, seconds);
        }
    }

    fn encrypt(&self, key: &str, value: &Bytes) -> Result<Bytes> {
        let gr = self.resource_of(key);
        let started = Instant::now();
        match self
            .transformers
            .for_resource(&gr)
            .write(value, key.as_bytes())
        {
            Ok((out, prefix)) => {
                self.observe(&gr, "to_storage", prefix, true, started);
                Ok(out)
            }
            Err(e) => {
                self.observe(&gr, "to_storage", "", false, started);
                Err(super::Error::Internal(e.to_string()))
            }
        }
    }

    /// Replaces `kv`'s stored bytes by the plain ones and marks it stale
    /// when a rewrite would change its encryption. An empty value (a
    /// watch's delete event without the last state) stays empty.
    fn decrypt(&self, kv: &mut KeyValue) -> Result<(), TransformError> {
        if kv.value.is_empty() {
            return Ok(());
        }
        let gr = self.resource_of(&kv.key);
        let started = Instant::now();
        match self
            .transformers
            .for_resource(&gr)
            .read(&kv.value, kv.key.as_bytes())
        {
            Ok(read) => {
                self.observe(&gr, "from_storage", read.prefix, true, started);
                kv.value = read.value;
                kv.stale = read.stale;
                Ok(())
            }
            Err(e) => {
                self.observe(&gr, "from_storage", e.prefix, false, started);
                Err(e.error)
            }
        }
    }

    /// [`Shared::decrypt`] for a single-key read: the error is the
    /// transformation's message (500 `Internal error occurred: <message>`).
    fn decrypt_one(&self, kv: &mut KeyValue) -> Result<()> {
        self.decrypt(kv)
            .map_err(|e| super::Error::Internal(e.to_string()))
    }

    /// [`Shared::decrypt`] for a range read or watch: the error names the
    /// key.
    fn decrypt_keyed(&self, kv: &mut KeyValue) -> Result<()> {
        self.decrypt(kv).map_err(|e| {
            super::Error::Internal(format!("unable to transform key {:?}: {e}", kv.key))
        })
    }

    fn decrypt_outcome(&self, outcome: WriteOutcome) -> Result<WriteOutcome> {
        Ok(match outcome {
            WriteOutcome::Done(mut kv) => {
                self.decrypt_one(&mut kv)?;
                WriteOutcome::Done(kv)
            }
            WriteOutcome::Conflict(Some(mut kv)) => {
                self.decrypt_one(&mut kv)?;
                WriteOutcome::Conflict(Some(kv))
            }
            WriteOutcome::Conflict(None) => WriteOutcome::Conflict(None),
        })
    }

    fn decrypt_item(&self, item: Result<WatchItem>) -> Result<WatchItem> {
        match item? {
            WatchItem::Event(mut event) => {
                self.decrypt_keyed(&mut event.kv)?;
                if let Some(prev) = event.prev.as_mut() {
                    self.decrypt_keyed(prev)?;
                }
                Ok(WatchItem::Event(event))
            }
            progress @ WatchItem::Progress(_) => Ok(progress),
        }
    }
}

/// Encrypts values on their way to the wrapped backend and decrypts them
/// on their way back.
pub struct Encrypted {
    inner: Arc<dyn Storage>,
    shared: Arc<Shared>,
}

impl Encrypted {
    /// Wraps `inner`, whose keys start with `prefix` (`/registry`), with
    /// `transformers`. `groups` names the API groups whose names have no
    /// dot (a first key segment that is neither one of them nor dotted is
    /// a core resource).
    pub fn new(
        inner: Arc<dyn Storage>,
        prefix: &str,
        transformers: Arc<Transformers>,
        groups: impl IntoIterator<Item = String>,
    ) -> Self {
        Encrypted {
            inner,
            shared: Arc::new(Shared {
                prefix: prefix.trim_end_matches('/').to_string(),
                groups: groups.into_iter().filter(|g| !g.is_empty()).collect(),
                transformers,
                observer: None,
            }),
        }
    }

    /// Reports every transformation to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        if let Some(shared) = Arc::get_mut(&mut self.shared) {
            shared.observer = Some(observer);
        }
        self
    }

    fn decrypt_stream(&self, stream: WatchStream) -> WatchStream {
        let shared = self.shared.clone();
        Box::pin(stream.map(move |item| shared.decrypt_item(item)))
    }
}

#[async_trait::async_trait]
impl Storage for Encrypted {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        let stored = self.shared.encrypt(key, &value)?;
        let mut kv = self.inner.create(key, stored).await?;
        kv.value = value;
        Ok(kv)
    }

    async fn get(&self, key: &str, revision: Revision) -> Result<Option<KeyValue>> {
        let Some(mut kv) = self.inner.get(key, revision).await? else {
            return Ok(None);
        };
        self.shared.decrypt_one(&mut kv)?;
        Ok(Some(kv))
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        let mut result = self.inner.list(prefix, opts).await?;
        for kv in &mut result.items {
            self.shared.decrypt_keyed(kv)?;
        }
        Ok(result)
    }

    async fn count(&self, prefix: &str) -> Result<i64> {
        self.inner.count(prefix).await
    }

    async fn update(
        &self,
        key: &str,
        expected_mod_revision: Revision,
        value: Bytes,
    ) -> Result<WriteOutcome> {
        let stored = self.shared.encrypt(key, &value)?;
        match self
            .inner
            .update(key, expected_mod_revision, stored)
            .await?
        {
            WriteOutcome::Done(mut kv) => {
                kv.value = value;
                kv.stale = false;
                Ok(WriteOutcome::Done(kv))
            }
            conflict => self.shared.decrypt_outcome(conflict),
        }
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<WriteOutcome> {
        let outcome = self.inner.delete(key, expected_mod_revision).await?;
        self.shared.decrypt_outcome(outcome)
    }

    async fn watch(
        &self,
        prefix: &str,
        start_revision: Revision,
        progress: bool,
    ) -> Result<WatchStream> {
        let stream = self.inner.watch(prefix, start_revision, progress).await?;
        Ok(self.decrypt_stream(stream))
    }

    async fn watch_without_prev(
        &self,
        prefix: &str,
        start_revision: Revision,
        progress: bool,
    ) -> Result<WatchStream> {
        let stream = self
            .inner
            .watch_without_prev(prefix, start_revision, progress)
            .await?;
        Ok(self.decrypt_stream(stream))
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision).await
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        self.inner.compacted_revision().await
    }

    async fn request_progress(&self) -> Result<()> {
        self.inner.request_progress().await
    }

    async fn request_progress_for(&self, prefix: &str) -> Result<()> {
        self.inner.request_progress_for(prefix).await
    }

    async fn size_bytes(&self) -> Result<Option<(String, i64)>> {
        self.inner.size_bytes().await
    }

    fn watch_reconnecting(&self) -> bool {
        self.inner.watch_reconnecting()
    }

    fn snapshot(&self, dest: &Path) -> Result<crate::embedded::snapshot::SnapshotInfo> {
        self.inner.snapshot(dest)
    }

    fn health_check_name(&self) -> &'static str {
        self.inner.health_check_name()
    }
}
