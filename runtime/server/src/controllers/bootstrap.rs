//! The server's own objects that exist from the first start: the system
//! namespaces (`default`, `kube-system`, `kube-public`). The RBAC and
//! flow-control defaults are put in place the same way, by
//! [`Store::ensure`](crate::registry::Store::ensure), from their own
//! modules.

use crate::error::ApiResult;
use crate::registry::Stores;
use apiforge_core::builtin::core_v1::SYSTEM_NAMESPACES;

/// Creates the system namespaces when the core Namespace kind is served
/// and they do not exist yet.
pub async fn system_namespaces(stores: &Stores) -> ApiResult<()> {
    let Some((store, info)) = stores.get("", "v1", "namespaces") else {
        return Ok(());
    };
    for name in SYSTEM_NAMESPACES {
        let body = serde_json::json!({"metadata": {"name": name}});
        if store.ensure("", info.version, body).await? {
            tracing::info!(namespace = name, "created system namespace");
        }
    }
    Ok(())
}
