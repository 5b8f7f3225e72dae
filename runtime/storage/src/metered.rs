//! A storage decorator that times every call and hands the duration to an
//! [`Observer`]. The server's observer records it as
//! `etcd_request_duration_seconds{operation,type}` (the name
//! kube-apiserver's etcd3 store uses; recorded for either backend), where
//! `type` is the resource of the key (`configmaps`,
//! `flunders.wardle.example.com`). Storage itself knows no metrics
//! registry.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::{
    KeyValue, ListOptions, ListResult, Result, Revision, Storage, WatchStream, WriteOutcome,
};

/// Receives the duration of every timed storage call.
pub trait Observer: Send + Sync {
    /// `operation` (`create`, `get`, `list`, ...) on `resource` (the
    /// resource of the key, `""` for whole-store calls such as compaction)
    /// took `seconds`.
    fn observe(&self, operation: &str, resource: &str, seconds: f64);
}

/// Times the calls of the wrapped backend.
pub struct Metered {
    inner: Arc<dyn Storage>,
    prefix: String,
    observer: Arc<dyn Observer>,
}

impl Metered {
    /// Wraps `inner`, whose keys start with `prefix` (`/registry`),
    /// reporting every call to `observer`.
    pub fn new(inner: Arc<dyn Storage>, prefix: &str, observer: Arc<dyn Observer>) -> Self {
        Metered {
            inner,
            prefix: prefix.trim_end_matches('/').to_string(),
            observer,
        }
    }

    fn observe(&self, operation: &str, key: &str, started: Instant) {
        self.observer.observe(
            operation,
            &resource_of(&self.prefix, key),
            started.elapsed().as_secs_f64(),
        );
    }
}

/// The resource a key or prefix under `prefix` belongs to.
fn resource_of(prefix: &str, key: &str) -> String {
    let rest = key.strip_prefix(prefix).unwrap_or(key);
    let mut parts = rest.trim_start_matches('/').split('/');
    match (parts.next(), parts.next()) {
        // `<group>/<plural>/...`: groups carry a dot (core has none).
        (Some(group), Some(plural)) if group.contains('.') && !plural.is_empty() => {
            format!("{plural}.{group}")
        }
        (Some(plural), _) => plural.to_string(),
        _ => String::new(),
    }
}

#[async_trait::async_trait]
impl Storage for Metered {
    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        let started = Instant::now();
        let r = self.inner.create(key, value).await;
        self.observe("create", key, started);
        r
    }

    async fn get(&self, key: &str, revision: Revision) -> Result<Option<KeyValue>> {
        let started = Instant::now();
        let r = self.inner.get(key, revision).await;
        self.observe("get", key, started);
        r
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        let started = Instant::now();
        let r = self.inner.list(prefix, opts).await;
        self.observe("list", prefix, started);
        r
    }

    async fn count(&self, prefix: &str) -> Result<i64> {
        let started = Instant::now();
        let r = self.inner.count(prefix).await;
        self.observe("listWithCount", prefix, started);
        r
    }

    async fn update(
        &self,
        key: &str,
        expected_mod_revision: Revision,
        value: Bytes,
    ) -> Result<WriteOutcome> {
        let started = Instant::now();
        let r = self.inner.update(key, expected_mod_revision, value).await;
        self.observe("update", key, started);
        r
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<WriteOutcome> {
        let started = Instant::now();
        let r = self.inner.delete(key, expected_mod_revision).await;
        self.observe("delete", key, started);
        r
    }

    async fn watch(
        &self,
        prefix: &str,
        start_revision: Revision,
        progress: bool,
    ) -> Result<WatchStream> {
        self.inner.watch(prefix, start_revision, progress).await
    }

    async fn watch_without_prev(
        &self,
        prefix: &str,
        start_revision: Revision,
        progress: bool,
    ) -> Result<WatchStream> {
        self.inner
            .watch_without_prev(prefix, start_revision, progress)
            .await
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let started = Instant::now();
        let r = self.inner.compact(revision).await;
        self.observer
            .observe("compact", "", started.elapsed().as_secs_f64());
        r
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

    fn watch_reconnecting(&self) -> bool {
        self.inner.watch_reconnecting()
    }

    async fn size_bytes(&self) -> Result<Option<(String, i64)>> {
        self.inner.size_bytes().await
    }

    fn health_check_name(&self) -> &'static str {
        self.inner.health_check_name()
    }

    fn snapshot(&self, dest: &std::path::Path) -> Result<crate::embedded::snapshot::SnapshotInfo> {
        self.inner.snapshot(dest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_of_keys() {
        assert_eq!(
            resource_of("/registry", "/registry/configmaps/default/x"),
            "configmaps"
        );
        assert_eq!(
            resource_of("/registry", "/registry/namespaces/"),
            "namespaces"
        );
        assert_eq!(
            resource_of("/registry", "/registry/wardle.example.com/flunders/ns/x"),
            "flunders.wardle.example.com"
        );
    }
}
