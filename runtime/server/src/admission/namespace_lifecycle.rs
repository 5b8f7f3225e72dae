//! `NamespaceLifecycle` (kube's `plugin/pkg/admission/namespace/lifecycle`):
//! no new objects in a namespace that does not exist or is being
//! terminated, and the system namespaces cannot be deleted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Attributes, Context, Error, Operation, Plugin, async_trait};
use apiforge_core::builtin::core_v1::SYSTEM_NAMESPACES;
use apiforge_core::meta::{Status, StatusCause, StatusDetails};

/// How long after a namespace DELETE creations in it check storage rather
/// than the (possibly stale) cache (kube's `forceLiveLookupTTL`).
const FORCE_LIVE_LOOKUP_TTL: Duration = Duration::from_secs(30);

/// The `NamespaceLifecycle` admission plugin (mutating, as in kube).
///
/// Namespaces are read from the watch cache; from storage when the cache
/// does not have the namespace (it may be new) or the namespace was
/// deleted in the last 30 s (the cache may not show it terminating yet).
#[derive(Clone, Debug, Default)]
pub struct NamespaceLifecycle {
    recently_deleted: Arc<Mutex<HashMap<String, Instant>>>,
}

impl NamespaceLifecycle {
    /// The plugin's name.
    pub const NAME: &'static str = "NamespaceLifecycle";

    /// A new plugin instance.
    pub fn new() -> Self {
        Self::default()
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
        let lookup = ctx.lookup();
        if !lookup.serves("", "v1", "namespaces") {
            return Ok(());
        }
        let ns = &attrs.namespace;
        let cached = if self.deleted_recently(ns) {
            None
        } else {
            lookup.get("", "v1", "namespaces", "", ns, false).await?
        };
        let found = match cached {
            Some(found) => found,
            None => match lookup.get("", "v1", "namespaces", "", ns, true).await? {
                Some(found) => found,
                None => return Err(namespace_not_found(ns)),
            },
        };
        if !is_terminating(&found) {
            return Ok(());
        }
        Err(Error::forbidden(
            attrs,
            format_args!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ),
        )
        .with_cause(StatusCause {
            reason: "NamespaceTerminating".into(),
            message: format!("namespace {ns} is being terminated"),
            field: "metadata.namespace".into(),
        }))
    }
}
