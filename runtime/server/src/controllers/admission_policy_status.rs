//! The ValidatingAdmissionPolicy status controller
//! (kube-controller-manager's `validatingadmissionpolicy-status`): when a
//! policy's `metadata.generation` is ahead of its
//! `status.observedGeneration` (a new policy, or a spec change), it
//! type-checks the policy's validations against the schemas of the kinds
//! its `matchConstraints.resourceRules` name
//! ([`apiforge_core::builtin::admissionregistration_v1::type_checking`])
//! and writes `status.observedGeneration` together with
//! `status.typeChecking` (`{}` without warnings): the presence of
//! `typeChecking` means checking is complete. As upstream's, it does not
//! check again when schemas change (a CustomResourceDefinition served or
//! updated later), only when the policy's generation does.
//!
//! The schemas are those the server serves: the compiled-in kinds' and
//! the custom resources' (the same documents OpenAPI publishes), looked up
//! through [`Stores`] as a REST mapping would.

use serde_json::Value;

use crate::patch::schema::KindSchema;
use crate::registry::informer::keep_current;
use crate::registry::{ListParams, Stores};
use apiforge_core::builtin::admissionregistration_v1::ValidatingAdmissionPolicy;
use apiforge_core::builtin::admissionregistration_v1::type_checking::{SchemaResolver, type_check};
use apiforge_core::cel_check::{Type, schema};

/// The controller's name (upstream's, also in logs).
pub const NAME: &str = "validatingadmissionpolicy-status-controller";

const GROUP: &str = "admissionregistration.k8s.io";
const PLURAL: &str = "validatingadmissionpolicies";

/// The served kinds as a [`SchemaResolver`].
pub struct ServedSchemas<'a> {
    stores: &'a Stores,
}

impl<'a> ServedSchemas<'a> {
    /// Resolves through `stores`.
    pub fn new(stores: &'a Stores) -> Self {
        ServedSchemas { stores }
    }
}

impl SchemaResolver for ServedSchemas<'_> {
    fn kind_for(&self, group: &str, version: &str, resource: &str) -> Option<String> {
        self.stores
            .get(group, version, resource)
            .map(|(_, info)| info.kind.to_string())
    }

    fn object_type(&self, group: &str, version: &str, kind: &str) -> Option<Option<Type>> {
        let (store, _) = self.stores.iter().find(|(_, info)| {
            info.group == group && info.version == version && info.kind == kind
        })?;
        let ops = store.kind().version(version)?;
        let kind_schema = KindSchema::cached(ops);
        let (root, defs) = kind_schema.parts();
        Some(schema::from_openapi(root, defs, kind))
    }
}

/// Runs until `shutdown` turns true, when the server serves
/// ValidatingAdmissionPolicies.
pub async fn run(stores: Stores, shutdown: tokio::sync::watch::Receiver<bool>) {
    let Some(policies) = stores.find(GROUP, PLURAL) else {
        return;
    };
    let watched = vec![(policies, "ValidatingAdmissionPolicy")];
    keep_current(NAME, watched, shutdown, || reconcile_all(stores.clone())).await;
}

/// Whether `policy` (stored JSON) needs checking: its generation is ahead
/// of the observed one, or it has no type checking result.
fn needs_check(policy: &Value) -> bool {
    let generation = policy
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let observed = policy
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64);
    let checked = policy
        .pointer("/status/typeChecking")
        .is_some_and(|t| !t.is_null());
    !checked || observed.is_none_or(|o| generation > o)
}

/// Checks every policy that needs it and writes its status.
async fn reconcile_all(stores: Stores) {
    let Some(policies) = stores.find(GROUP, PLURAL) else {
        return;
    };
    let page = match policies.list(None, &ListParams::default()).await {
        Ok(page) => page,
        Err(e) => {
            tracing::warn!(error = %e, "{NAME}: list failed");
            return;
        }
    };
    for item in page.items.iter().filter(|p| needs_check(p)) {
        let Some(name) = item.pointer("/metadata/name").and_then(Value::as_str) else {
            continue;
        };
        let result = policies
            .update_internal("", name, |obj| {
                if !needs_check(obj) {
                    return false;
                }
                write_status(obj, &stores)
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(policy = %name, error = %e, "{NAME}: status not written");
        }
    }
}

/// Sets `status.observedGeneration` and `status.typeChecking` of the
/// stored policy `obj`; false when it does not decode.
fn write_status(obj: &mut Value, stores: &Stores) -> bool {
    let Ok(policy) = serde_json::from_value::<ValidatingAdmissionPolicy>(obj.clone()) else {
        return false;
    };
    let checking = type_check(&policy, &ServedSchemas::new(stores));
    let Ok(checking) = serde_json::to_value(&checking) else {
        return false;
    };
    let generation = policy.metadata.generation;
    let Some(map) = obj.as_object_mut() else {
        return false;
    };
    let status = map
        .entry("status")
        .or_insert_with(|| Value::Object(Default::default()));
    if !status.is_object() {
        *status = Value::Object(Default::default());
    }
    if let Some(status) = status.as_object_mut() {
        status.insert("observedGeneration".into(), Value::from(generation));
        status.insert("typeChecking".into(), checking);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_needs_checking() {
        assert!(needs_check(
            &json!({"metadata": {"generation": 1}, "status": {}})
        ));
        assert!(needs_check(&json!({"metadata": {"generation": 2},
            "status": {"observedGeneration": 1, "typeChecking": {}}})));
        assert!(!needs_check(&json!({"metadata": {"generation": 2},
            "status": {"observedGeneration": 2, "typeChecking": {}}})));
        assert!(needs_check(&json!({"metadata": {"generation": 2},
            "status": {"observedGeneration": 2}})));
    }
}
