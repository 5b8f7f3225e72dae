//! The namespace controller (kube's `pkg/controller/namespace`): when a
//! Namespace is terminating (DELETE set its `deletionTimestamp` and phase
//! `Terminating`), it deletes every object of every served namespaced kind
//! in it, then removes the `kubernetes` finalizer from `spec.finalizers`,
//! upon which the registry removes the namespace for good.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use crate::error::ApiResult;
use crate::registry::{DeleteOutcome, ListParams, Preconditions, Store, Stores, WatchEvent};
use apiforge_core::builtin::core_v1::FINALIZER_KUBERNETES;

/// How often terminating namespaces are looked at again while something
/// (objects with finalizers, errors) keeps them from going away.
const RETRY: Duration = Duration::from_secs(1);
/// How often all namespaces are looked at even without events.
const RESYNC: Duration = Duration::from_secs(30);

/// Runs the controller until `shutdown` turns true when the server serves
/// core `v1` Namespaces.
pub async fn run(stores: Stores, shutdown: tokio::sync::watch::Receiver<bool>) {
    let Some(namespaces) = stores.find("", "namespaces") else {
        return;
    };
    let controller = NamespaceController {
        namespaces,
        content: Content::Served(stores),
    };
    controller.run(shutdown).await;
}

/// The stores whose objects a namespace's deletion deletes.
enum Content {
    /// These stores.
    Fixed(Vec<Store>),
    /// Every namespaced kind served at the time (custom resources come and
    /// go).
    Served(Stores),
}

impl Content {
    fn stores(&self) -> Vec<Store> {
        match self {
            Content::Fixed(stores) => stores.clone(),
            Content::Served(served) => {
                let mut content: Vec<Store> = Vec::new();
                for (store, info) in served.iter() {
                    if info.namespaced()
                        && !content.iter().any(|c| Arc::ptr_eq(c.kind(), store.kind()))
                    {
                        content.push(store);
                    }
                }
                content
            }
        }
    }
}

/// The controller's state: the Namespace store and the stores of the
/// namespaced kinds.
pub struct NamespaceController {
    namespaces: Store,
    content: Content,
}

fn is_terminating(ns: &Value) -> bool {
    ns.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

impl NamespaceController {
    /// A controller over `namespaces` and the stores of the namespaced
    /// kinds whose objects it deletes.
    pub fn new(namespaces: Store, content: Vec<Store>) -> Self {
        NamespaceController {
            namespaces,
            content: Content::Fixed(content),
        }
    }

    /// Runs until `shutdown` turns true: reacts to namespace events, and
    /// retries while terminating namespaces remain.
    pub async fn run(self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let mut events = None;
        let mut need_sync = true;
        let mut pending = false;
        let mut last_sync = tokio::time::Instant::now();
        loop {
            if need_sync {
                pending = match self.sync_all().await {
                    Ok(pending) => pending,
                    Err(e) => {
                        tracing::warn!(error = %e, "namespace controller: sync failed");
                        true
                    }
                };
                need_sync = false;
                last_sync = tokio::time::Instant::now();
            }
            if events.is_none() {
                events = match self
                    .namespaces
                    .watch(None, &ListParams::default(), false)
                    .await
                {
                    Ok(stream) => Some(stream),
                    Err(e) => {
                        tracing::warn!(error = %e, "namespace controller: watch failed");
                        None
                    }
                };
            }
            let wait = if pending || events.is_none() {
                RETRY
            } else {
                RESYNC
            };
            let next_event = async {
                match events.as_mut() {
                    Some(stream) => stream.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                ev = next_event => match ev {
                    Some(WatchEvent::Object(_, ns)) => {
                        need_sync = ns.object().map_or(true, |o| is_terminating(&o));
                    }
                    Some(WatchEvent::Bookmark(_) | WatchEvent::InitialEventsEnd(_)) => {}
                    Some(WatchEvent::Error(_)) | None => {
                        events = None;
                        need_sync = true;
                    }
                },
                () = tokio::time::sleep_until(last_sync + wait) => need_sync = true,
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
        }
    }

    /// Works on every terminating namespace once; returns whether some are
    /// still waiting.
    pub async fn sync_all(&self) -> ApiResult<bool> {
        let page = self.namespaces.list(None, &ListParams::default()).await?;
        let mut pending = false;
        for ns in page.items.iter().filter(|ns| is_terminating(ns)) {
            let meta = apiforge_core::scheme::object_meta(ns);
            match self.finalize_uid(&meta.name, &meta.uid).await {
                Ok(done) => pending |= !done,
                Err(e) => {
                    tracing::warn!(namespace = %meta.name, error = %e, "namespace controller: cannot finalize");
                    pending = true;
                }
            }
        }
        Ok(pending)
    }

    /// [`NamespaceController::finalize_uid`] for the namespace `namespace`
    /// is now (its uid read live).
    pub async fn finalize(&self, namespace: &str) -> ApiResult<bool> {
        let uid = match self.namespaces.get_live("", namespace).await {
            Ok(ns) => apiforge_core::scheme::object_meta(&ns).uid,
            Err(e) if e.code() == 404 => return Ok(true),
            Err(e) => return Err(e),
        };
        self.finalize_uid(namespace, &uid).await
    }

    /// Reads namespace `namespace` live: `Some` while it is still the one
    /// with `uid` and terminating. Gone, not terminating (yet), or
    /// re-created under the same name (another uid) is `None`: there is
    /// nothing for this controller to do to it.
    async fn still_terminating(&self, namespace: &str, uid: &str) -> ApiResult<Option<Value>> {
        match self.namespaces.get_live("", namespace).await {
            Ok(ns) if apiforge_core::scheme::object_meta(&ns).uid == uid && is_terminating(&ns) => {
                Ok(Some(ns))
            }
            Ok(_) => Ok(None),
            Err(e) if e.code() == 404 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Deletes the content of the namespace `namespace` whose uid is `uid`;
    /// when nothing is left, removes its `kubernetes` finalizer. Returns
    /// whether the finalizer is gone (or the namespace with `uid` is).
    ///
    /// Every step is guarded by the namespace's uid, as upstream's
    /// namespaced resources deleter guards its writes with the namespace's
    /// uid and resourceVersion: a controller acting late (a slow replica,
    /// or one that lost its lease) never touches a namespace re-created
    /// under the same name, nor its objects:
    ///
    /// - the objects of each kind are listed first, then the namespace is
    ///   read again: when it is still the terminating one with `uid`, every
    ///   object listed was created in it (a namespace of that name with
    ///   another uid can only exist once this one is gone);
    /// - each object is deleted with its own uid as precondition, so an
    ///   object deleted meanwhile and re-created under its name in a new
    ///   namespace stays;
    /// - the finalizer is removed by a compare-and-swap on the namespace's
    ///   revision that checks the uid and the deletion timestamp.
    pub async fn finalize_uid(&self, namespace: &str, uid: &str) -> ApiResult<bool> {
        if self.still_terminating(namespace, uid).await?.is_none() {
            return Ok(true);
        }
        let mut remaining = 0usize;
        for store in &self.content.stores() {
            let page = store.list(Some(namespace), &ListParams::default()).await?;
            if page.items.is_empty() {
                continue;
            }
            if self.still_terminating(namespace, uid).await?.is_none() {
                tracing::info!(%namespace, %uid, "namespace controller: namespace gone or re-created; stopped");
                return Ok(true);
            }
            for obj in &page.items {
                if is_terminating(obj) {
                    remaining += 1;
                    continue;
                }
                let meta = apiforge_core::scheme::object_meta(obj);
                let pre = Preconditions {
                    uid: Some(meta.uid.clone()).filter(|u| !u.is_empty()),
                    resource_version: None,
                };
                match store.delete(namespace, &meta.name, &pre, false).await {
                    Ok(DeleteOutcome::Removed(_)) => {}
                    Ok(DeleteOutcome::Terminating(_)) => remaining += 1,
                    // Gone, or replaced by another object of that name.
                    Err(e) if e.code() == 404 || e.code() == 409 => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if remaining > 0 {
            tracing::debug!(%namespace, remaining, "namespace controller: waiting for finalizers");
            return Ok(false);
        }
        let mut ours = false;
        self.namespaces
            .update_internal("", namespace, |ns| {
                ours = apiforge_core::scheme::object_meta(ns).uid == uid && is_terminating(ns);
                if !ours {
                    return false;
                }
                let Some(list) = ns
                    .pointer_mut("/spec/finalizers")
                    .and_then(Value::as_array_mut)
                else {
                    return false;
                };
                let before = list.len();
                list.retain(|f| f.as_str() != Some(FINALIZER_KUBERNETES));
                list.len() != before
            })
            .await?;
        if ours {
            tracing::info!(%namespace, "namespace controller: namespace emptied and finalized");
        } else {
            tracing::info!(%namespace, %uid, "namespace controller: namespace gone or re-created; stopped");
        }
        Ok(true)
    }
}
