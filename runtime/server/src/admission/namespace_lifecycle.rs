//! `NamespaceLifecycle` (kube's `plugin/pkg/admission/namespace/lifecycle`):
//! no new objects in a namespace that does not exist or is being
//! terminated, and the system namespaces cannot be deleted.
//!
//! An aggregated server (one given `--kubeconfig`, the main server's)
//! checks the main server's namespaces instead of its own, as
//! sample-apiserver's plugin reads them through its core API client: its
//! users create namespaces in the cluster, not in each extension server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Attributes, Context, Error, Operation, Plugin, async_trait};
use crate::webhook;
use apiforge_core::builtin::core_v1::SYSTEM_NAMESPACES;
use apiforge_core::meta::{Status, StatusCause, StatusDetails};

/// How long after a namespace DELETE creations in it check storage rather
/// than the (possibly stale) cache (kube's `forceLiveLookupTTL`).
const FORCE_LIVE_LOOKUP_TTL: Duration = Duration::from_secs(30);

/// The `NamespaceLifecycle` admission plugin (mutating, as in kube).
///
/// Namespaces are read from the watch cache; from storage when the cache
/// does not have the namespace (it may be new), when the namespace was
/// deleted through this server in the last 30 s (the cache may not show it
/// terminating yet), and before refusing a creation because the cache
/// shows it terminating (it may have been re-created meanwhile through
/// another replica).
#[derive(Clone, Default)]
pub struct NamespaceLifecycle {
    recently_deleted: Arc<Mutex<HashMap<String, Instant>>>,
    /// The main server's namespaces, when this server is aggregated.
    core_api: Option<Arc<CoreNamespaces>>,
}

impl std::fmt::Debug for NamespaceLifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamespaceLifecycle")
            .field("core_api", &self.core_api.as_ref().map(|c| c.client.url()))
            .finish()
    }
}

/// How long a namespace read from the main server is trusted (upstream's
/// plugin reads an informer's cache, a little behind the main server).
const CORE_API_CACHE_TTL: Duration = Duration::from_secs(2);

/// Namespaces read from the main server: whether each is terminating,
/// remembered for [`CORE_API_CACHE_TTL`]; a missing one is asked again.
struct CoreNamespaces {
    client: webhook::Client,
    terminating: webhook::TtlCache<bool>,
    /// A client per namespace path, so lookups reuse their connections.
    clients: Mutex<HashMap<String, Arc<webhook::Client>>>,
}

/// Namespace clients kept before the map starts over.
const MAX_NAMESPACE_CLIENTS: usize = 1024;

impl CoreNamespaces {
    /// Whether namespace `name` exists on the main server, and is
    /// terminating; `live` skips what was remembered.
    async fn get(&self, name: &str, live: bool) -> Result<Option<bool>, Error> {
        if !live && let Some(terminating) = self.terminating.get(name) {
            return Ok(Some(terminating));
        }
        let failed = |message: String| {
            Error::status(Status::internal(format!(
                "failed to look up namespace {name} on the main server: {message}"
            )))
        };
        let client = {
            let mut clients = self
                .clients
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match clients.get(name) {
                Some(client) => client.clone(),
                None => {
                    let client = Arc::new(
                        self.client
                            .at_path(&format!("/api/v1/namespaces/{name}"))
                            .map_err(failed)?,
                    );
                    if clients.len() >= MAX_NAMESPACE_CLIENTS {
                        clients.clear();
                    }
                    clients.insert(name.to_string(), client.clone());
                    client
                }
            }
        };
        let (code, body) = client.get().await.map_err(|e| failed(e.to_string()))?;
        if code == http::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !code.is_success() {
            return Err(failed(format!("the main server answered {code}")));
        }
        let namespace: Value = serde_json::from_slice(&body).map_err(|e| failed(e.to_string()))?;
        let terminating = is_terminating(&namespace);
        self.terminating
            .set(name.to_string(), terminating, CORE_API_CACHE_TTL);
        Ok(Some(terminating))
    }
}

impl NamespaceLifecycle {
    /// The plugin's name.
    pub const NAME: &'static str = "NamespaceLifecycle";

    /// A new plugin instance.
    pub fn new() -> Self {
        Self::default()
    }

    /// A plugin that checks the namespaces of the main server `client`
    /// reaches (an aggregated server's `--kubeconfig`) rather than this
    /// server's own.
    pub fn with_core_api(client: webhook::Client) -> Self {
        NamespaceLifecycle {
            core_api: Some(Arc::new(CoreNamespaces {
                client,
                terminating: webhook::TtlCache::default(),
                clients: Mutex::default(),
            })),
            ..Self::default()
        }
    }

    fn remember_deleted(&self, name: &str) {
        if let Ok(mut map) = self.recently_deleted.lock() {
            let now = Instant::now();
            map.retain(|_, at| now.duration_since(*at) < FORCE_LIVE_LOOKUP_TTL);
            map.insert(name.to_string(), now);
        }
    }

    fn deleted_recently(&self, name: &str) -> bool {
        self.recently_deleted.lock().is_ok_and(|map| {
            map.get(name)
                .is_some_and(|at| at.elapsed() < FORCE_LIVE_LOOKUP_TTL)
        })
    }
}

/// `namespaces "<name>" not found`.
fn namespace_not_found(name: &str) -> Error {
    Error::status(
        Status::failure(404, "NotFound", format!("namespaces \"{name}\" not found")).with_details(
            StatusDetails {
                name: name.into(),
                kind: "namespaces".into(),
                ..Default::default()
            },
        ),
    )
}

fn is_terminating(ns: &Value) -> bool {
    ns.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating")
}

#[async_trait]
impl Plugin for NamespaceLifecycle {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Delete)
    }

    async fn admit(&self, attrs: &mut Attributes, ctx: &Context) -> Result<(), Error> {
        let is_namespace = attrs.is_kind("", "Namespace");
        if attrs.operation() == Operation::Delete {
            if is_namespace {
                if SYSTEM_NAMESPACES.contains(&attrs.name.as_str()) {
                    return Err(Error::forbidden_named(
                        "",
                        "namespaces",
                        &attrs.name,
                        "this namespace may not be deleted",
                    ));
                }
                self.remember_deleted(&attrs.name);
            }
            return Ok(());
        }
        // Only creations of namespaced objects are checked.
        if is_namespace || attrs.namespace.is_empty() {
            return Ok(());
        }
        let ns = &attrs.namespace;
        if let Some(core_api) = &self.core_api {
            return match core_api.get(ns, self.deleted_recently(ns)).await? {
                None => Err(namespace_not_found(ns)),
                Some(true) => Err(terminating(attrs)),
                Some(false) => Ok(()),
            };
        }
        let lookup = ctx.lookup();
        if !lookup.serves("", "v1", "namespaces") {
            return Ok(());
        }
        let cached = if self.deleted_recently(ns) {
            None
        } else {
            lookup.get("", "v1", "namespaces", "", ns, false).await?
        };
        let (found, fresh) = match cached {
            Some(found) => (found, false),
            None => match lookup.get("", "v1", "namespaces", "", ns, true).await? {
                Some(found) => (found, true),
                None => return Err(namespace_not_found(ns)),
            },
        };
        if !is_terminating(&found) {
            return Ok(());
        }
        // Before refusing, make sure the namespace is still the terminating
        // one: the cache can be behind a namespace deleted through another
        // replica (which alone remembers the delete) and already re-created.
        if !fresh
            && let Some(current) = lookup.get("", "v1", "namespaces", "", ns, true).await?
            && !is_terminating(&current)
        {
            return Ok(());
        }
        Err(terminating(attrs))
    }
}

/// Upstream's refusal of new content in a terminating namespace.
fn terminating(attrs: &Attributes) -> Error {
    let ns = &attrs.namespace;
    Error::forbidden(
        attrs,
        format_args!(
            "unable to create new content in namespace {ns} because it is being terminated"
        ),
    )
    .with_cause(StatusCause {
        reason: "NamespaceTerminating".into(),
        message: format!("namespace {ns} is being terminated"),
        field: "metadata.namespace".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Lookup;
    use crate::error::ApiResult;

    /// A cache that still has the old, terminating namespace `again`, and
    /// storage, whose `again` is `live_phase`.
    struct StaleCache {
        live_phase: &'static str,
    }

    #[async_trait]
    impl Lookup for StaleCache {
        fn serves(&self, _: &str, _: &str, resource: &str) -> bool {
            resource == "namespaces"
        }

        async fn get(
            &self,
            _: &str,
            _: &str,
            _: &str,
            _: &str,
            name: &str,
            fresh: bool,
        ) -> ApiResult<Option<Value>> {
            let phase = if fresh {
                self.live_phase
            } else {
                "Terminating"
            };
            Ok(Some(serde_json::json!({
                "metadata": {"name": name},
                "status": {"phase": phase},
            })))
        }

        async fn list(
            &self,
            _: &str,
            _: &str,
            _: &str,
            _: Option<&str>,
        ) -> ApiResult<Option<Vec<Value>>> {
            Ok(None)
        }
    }

    fn create_configmap() -> Attributes {
        Attributes {
            operation: Some(Operation::Create),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            resource: "configmaps".into(),
            namespace: "again".into(),
            name: "same".into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_stale_terminating_namespace_is_checked_in_storage_before_refusing() {
        let plugin = NamespaceLifecycle::new();
        let recreated = Context::new(Arc::new(StaleCache {
            live_phase: "Active",
        }));
        plugin
            .admit(&mut create_configmap(), &recreated)
            .await
            .expect("re-created namespace: admitted");
        let still = Context::new(Arc::new(StaleCache {
            live_phase: "Terminating",
        }));
        let err = plugin
            .admit(&mut create_configmap(), &still)
            .await
            .expect_err("terminating: refused");
        assert!(
            format!("{err:?}").contains("because it is being terminated"),
            "{err:?}"
        );
    }
}
