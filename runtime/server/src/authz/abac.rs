//! ABAC (`--authorization-mode=ABAC`): a policy file of JSON lines, each a
//! `abac.authorization.kubernetes.io/v1beta1` `Policy`. A request is
//! allowed when some policy matches its subject (user or group, `*` for
//! all), its verb (read-only requests always; writes unless the policy is
//! `readonly`) and either its resource (namespace, resource, API group;
//! `*` for any) or its path (`nonResourcePath`, exact, `*`, or a `prefix*`).

use std::path::Path;

use serde::Deserialize;

use super::{Attributes, Authorize, Decision, Error};

const API_VERSION: &str = "abac.authorization.kubernetes.io/v1beta1";

/// One policy line.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct PolicyLine {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    spec: Policy,
}

/// What a policy grants.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// The user it applies to (`*` for all).
    #[serde(default)]
    pub user: String,
    /// The group it applies to (`*` for all).
    #[serde(default)]
    pub group: String,
    /// Only read-only verbs (`get`, `list`, `watch`).
    #[serde(default)]
    pub readonly: bool,
    /// API group (`*` for all).
    #[serde(default)]
    pub api_group: String,
    /// Resource (`*` for all).
    #[serde(default)]
    pub resource: String,
    /// Namespace (`*` for all).
    #[serde(default)]
    pub namespace: String,
    /// Non-resource path (`*` for all, `/prefix*` for a subtree).
    #[serde(default)]
    pub non_resource_path: String,
}

/// The loaded policies.
#[derive(Clone, Debug, Default)]
pub struct PolicyList(Vec<Policy>);

impl PolicyList {
    /// Reads a policy file: one JSON policy per line; blank lines and lines
    /// starting with `#` are skipped.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Io(path.to_path_buf(), e))?;
        let mut policies = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |message: String| Error::Policy {
                path: path.to_path_buf(),
                line: n + 1,
                message,
            };
            let parsed: PolicyLine = serde_json::from_str(line).map_err(|e| err(e.to_string()))?;
            if parsed.api_version != API_VERSION || parsed.kind != "Policy" {
                return Err(err(format!(
                    "expected apiVersion {API_VERSION:?} and kind \"Policy\", got {:?} {:?}",
                    parsed.api_version, parsed.kind
                )));
            }
            policies.push(parsed.spec);
        }
        Ok(PolicyList(policies))
    }
}

impl Policy {
    fn subject_matches(&self, attrs: &Attributes) -> bool {
        let mut matched = false;
        if !self.user.is_empty() {
            if self.user != "*" && self.user != attrs.user.name {
                return false;
            }
            matched = true;
        }
        if !self.group.is_empty() {
            if self.group == "*" || attrs.user.in_group(&self.group) {
                matched = true;
            } else {
                return false;
            }
        }
        matched
    }

    fn verb_matches(&self, attrs: &Attributes) -> bool {
        attrs.is_read_only() || !self.readonly
    }

    fn resource_matches(&self, attrs: &Attributes) -> bool {
        attrs.resource_request
            && (self.namespace == "*" || self.namespace == attrs.namespace)
            && (self.resource == "*" || self.resource == attrs.resource)
            && (self.api_group == "*" || self.api_group == attrs.api_group)
    }

    fn path_matches(&self, attrs: &Attributes) -> bool {
        if attrs.resource_request {
            return false;
        }
        let p = &self.non_resource_path;
        p == "*"
            || *p == attrs.path
            || (p.ends_with('*') && attrs.path.starts_with(p.trim_end_matches('*')))
    }

    /// Whether this policy allows `attrs`.
    pub fn matches(&self, attrs: &Attributes) -> bool {
        self.subject_matches(attrs)
            && self.verb_matches(attrs)
            && (self.resource_matches(attrs) || self.path_matches(attrs))
    }
}

#[async_trait::async_trait]
impl Authorize for PolicyList {
    fn metric_type(&self) -> &'static str {
        "ABAC"
    }

    async fn authorize(
        &self,
        attrs: &Attributes,
    ) -> Result<(Decision, String), super::EvaluationError> {
        Ok(if self.0.iter().any(|p| p.matches(attrs)) {
            (Decision::Allow, String::new())
        } else {
            (Decision::NoOpinion, "No policy matched.".into())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::user::UserInfo;

    fn attrs(user: &str, verb: &str, ns: &str, resource: &str) -> Attributes {
        Attributes {
            user: UserInfo::new(user, &["team"]),
            verb: verb.into(),
            resource_request: true,
            namespace: ns.into(),
            resource: resource.into(),
            ..Default::default()
        }
    }

    #[test]
    fn matching() {
        let ro = Policy {
            user: "alice".into(),
            readonly: true,
            api_group: "*".into(),
            resource: "*".into(),
            namespace: "projectCaribou".into(),
            ..Default::default()
        };
        assert!(ro.matches(&attrs("alice", "list", "projectCaribou", "pods")));
        assert!(!ro.matches(&attrs("alice", "create", "projectCaribou", "pods")));
        assert!(!ro.matches(&attrs("alice", "list", "other", "pods")));
        assert!(!ro.matches(&attrs("bob", "list", "projectCaribou", "pods")));
        let group = Policy {
            group: "team".into(),
            non_resource_path: "/healthz*".into(),
            ..Default::default()
        };
        let mut a = attrs("bob", "get", "", "");
        a.resource_request = false;
        a.path = "/healthz/ping".into();
        assert!(group.matches(&a));
        a.path = "/version".into();
        assert!(!group.matches(&a));
        assert!(!Policy::default().matches(&attrs("x", "get", "", "")));
    }
}
