//! RBAC escalation prevention, run as a built-in validating admission step
//! on writes of the four RBAC kinds (the policy-based storage of
//! kube-apiserver's rbac registry).
//!
//! - A Role or ClusterRole may only be written by a user who already holds
//!   every permission it grants (in its namespace, or cluster-wide), or who
//!   may `escalate` it.
//! - A RoleBinding or ClusterRoleBinding may only be written by a user who
//!   holds every permission of the role it refers to, or who may `bind`
//!   that role.
//!
//! `system:masters` is never restricted.

use std::sync::Arc;

use serde_json::Value;

use super::rbac::{self, GROUP, PolicyRule, Rbac, RoleRef};
use super::{Attributes, Authorizer, Decision};
use crate::admission::{self, Context, Error, Operation, Plugin};
use crate::request::user::{MASTERS_GROUP, UserInfo};

/// The escalation check.
pub struct EscalationCheck {
    authorizer: Authorizer,
    rbac: Arc<Rbac>,
}

impl EscalationCheck {
    /// A check evaluating against `rbac`, asking `authorizer` for the
    /// `escalate` and `bind` verbs.
    pub fn new(authorizer: Authorizer, rbac: Arc<Rbac>) -> Self {
        EscalationCheck { authorizer, rbac }
    }

    async fn may(
        &self,
        user: &UserInfo,
        verb: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> bool {
        let attrs = Attributes {
            user: user.clone(),
            verb: verb.into(),
            resource_request: true,
            namespace: namespace.into(),
            api_group: GROUP.into(),
            resource: resource.into(),
            name: name.into(),
            ..Default::default()
        };
        self.authorizer.authorize(&attrs).await.0 == Decision::Allow
    }

    fn refuse(attrs: &admission::Attributes, user: &UserInfo, missing: &[PolicyRule]) -> Error {
        let groups: Vec<String> = user.groups.iter().map(|g| format!("{g:?}")).collect();
        let rules: Vec<String> = missing.iter().map(rbac::compact).collect();
        Error::forbidden(
            attrs,
            format!(
                "user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
                user.name,
                groups.join(" "),
                rules.join("\n")
            ),
        )
    }
}

fn field<T: for<'de> serde::Deserialize<'de> + Default>(obj: Option<&Value>, key: &str) -> T {
    obj.and_then(|o| o.get(key))
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

#[admission::async_trait]
impl Plugin for EscalationCheck {
    fn name(&self) -> &str {
        "RBACEscalationCheck"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    fn handles_group(&self, group: &str) -> bool {
        group == GROUP
    }

    async fn validate(&self, attrs: &admission::Attributes, _ctx: &Context) -> Result<(), Error> {
        // Writes without a requesting user are the server's own (bootstrap
        // policy, controllers).
        if attrs.group != GROUP || attrs.user.username.is_empty() {
            return Ok(());
        }
        let user = UserInfo {
            name: attrs.user.username.clone(),
            uid: attrs.user.uid.clone(),
            groups: attrs.user.groups.clone(),
            ..Default::default()
        };
        if user.in_group(MASTERS_GROUP) {
            return Ok(());
        }
        let object = attrs.object.as_ref();
        let snapshot = self.rbac.snapshot();
        let name = attrs.error_name();
        match attrs.resource.as_str() {
            "roles" | "clusterroles" => {
                if self
                    .may(&user, "escalate", &attrs.resource, &attrs.namespace, &name)
                    .await
                {
                    return Ok(());
                }
                if attrs.resource == "clusterroles"
                    && object
                        .and_then(|o| o.get("aggregationRule"))
                        .is_some_and(|a| !a.is_null())
                {
                    let everything = [PolicyRule {
                        verbs: vec!["*".into()],
                        api_groups: vec!["*".into()],
                        resources: vec!["*".into()],
                        ..Default::default()
                    }];
                    let owned = snapshot.rules_for(&user, "");
                    if !rbac::uncovered(&owned, &everything).is_empty() {
                        return Err(Error::forbidden(
                            attrs,
                            "must have cluster-admin privileges to write aggregated clusterroles",
                        ));
                    }
                    return Ok(());
                }
                let rules: Vec<PolicyRule> = field(object, "rules");
                let owned = snapshot.rules_for(&user, &attrs.namespace);
                let missing = rbac::uncovered(&owned, &rules);
                if missing.is_empty() {
                    Ok(())
                } else {
                    Err(Self::refuse(attrs, &user, &missing))
                }
            }
            "rolebindings" | "clusterrolebindings" => {
                let role_ref: RoleRef = field(object, "roleRef");
                let (resource, namespace) = if role_ref.kind == "Role" {
                    ("roles", attrs.namespace.as_str())
                } else {
                    ("clusterroles", attrs.namespace.as_str())
                };
                if self
                    .may(&user, "bind", resource, namespace, &role_ref.name)
                    .await
                {
                    return Ok(());
                }
                let Some(rules) = snapshot.role_rules(&role_ref, &attrs.namespace) else {
                    let kind = if role_ref.kind == "Role" {
                        "role"
                    } else {
                        "clusterrole"
                    };
                    return Err(Error::forbidden(
                        attrs,
                        format!(
                            "user {:?} cannot bind {kind}.{GROUP} {:?}: it does not exist",
                            user.name, role_ref.name
                        ),
                    ));
                };
                let owned = snapshot.rules_for(&user, &attrs.namespace);
                let missing = rbac::uncovered(&owned, &rules);
                if missing.is_empty() {
                    Ok(())
                } else {
                    Err(Self::refuse(attrs, &user, &missing))
                }
            }
            _ => Ok(()),
        }
    }
}
