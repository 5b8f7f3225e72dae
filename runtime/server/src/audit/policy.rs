//! The audit policy (`audit.k8s.io/v1` `Policy`, from
//! `--audit-policy-file`): rules evaluated in order, the first match decides
//! the level of a request and which stages are left out.

use serde::Deserialize;

use crate::request::user::UserInfo;

/// How much of a request is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
pub enum Level {
    /// Nothing.
    None,
    /// Request metadata (user, verb, resource, timestamps, response code).
    Metadata,
    /// Metadata and the request body.
    Request,
    /// Metadata, the request body and the response body.
    RequestResponse,
}

/// The stages an event can be generated at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
pub enum Stage {
    /// As soon as the audit handler receives the request.
    RequestReceived,
    /// Once the response headers are sent (long-running requests only).
    ResponseStarted,
    /// Once the response body was sent.
    ResponseComplete,
    /// When the handler panicked.
    Panic,
}

/// One `resources` entry of a rule.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupResources {
    /// The API group (`""` is core).
    #[serde(default)]
    pub group: String,
    /// Resources (`pods`, `pods/log`, `*`, `*/status`, `pods/*`); empty
    /// matches every resource of the group.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Object names; empty matches every name.
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// A policy rule.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyRule {
    /// The level of matching requests.
    pub level: Level,
    /// User names; empty matches all.
    #[serde(default)]
    pub users: Vec<String>,
    /// Groups; empty matches all.
    #[serde(default)]
    pub user_groups: Vec<String>,
    /// Verbs; empty matches all.
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Resources; with `namespaces`, limits the rule to resource requests.
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    /// Namespaces (`""` is cluster-scoped).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Non-resource URL paths (`/healthz`, `/api*`, `*`).
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    /// Stages not recorded for matching requests.
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    /// Overrides the policy's `omitManagedFields`.
    #[serde(default)]
    pub omit_managed_fields: Option<bool>,
}

/// The policy document.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// `audit.k8s.io/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `Policy`.
    #[serde(default)]
    pub kind: String,
    /// Ignored (the document's metadata).
    #[serde(default)]
    pub metadata: Option<serde_json::Value>,
    /// The rules, first match wins.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
    /// Stages never recorded.
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    /// Whether `metadata.managedFields` is dropped from recorded objects.
    #[serde(default)]
    pub omit_managed_fields: bool,
}

/// What the policy decided for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestAuditConfig {
    /// The level.
    pub level: Level,
    /// Stages left out (the policy's and the rule's).
    pub omit_stages: Vec<Stage>,
    /// Whether managed fields are dropped from recorded objects.
    pub omit_managed_fields: bool,
}

/// The request attributes a policy looks at.
#[derive(Clone, Debug, Default)]
pub struct Attributes<'a> {
    /// The authenticated user (before impersonation).
    pub user: Option<&'a UserInfo>,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, ...).
    pub verb: &'a str,
    /// Whether this is a resource request.
    pub is_resource_request: bool,
    /// The request path.
    pub path: &'a str,
    /// The API group.
    pub api_group: &'a str,
    /// The namespace (`""` for cluster-scoped).
    pub namespace: &'a str,
    /// The resource.
    pub resource: &'a str,
    /// The subresource.
    pub subresource: &'a str,
    /// The object name.
    pub name: &'a str,
}

/// A policy that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read.
    #[error("failed to read audit policy file {0:?}: {1}")]
    Io(std::path::PathBuf, #[source] std::io::Error),
    /// The document is not a valid policy.
    #[error("failed decoding audit policy file {0:?}: {1}")]
    Invalid(std::path::PathBuf, String),
}

impl Policy {
    /// Parses a policy (YAML or JSON) and validates it as kube-apiserver
    /// does: `apiVersion` `audit.k8s.io/v1` (or `v1beta1`), `kind` `Policy`,
    /// and at least one rule.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let policy: Policy = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| e.to_string())?
        } else {
            serde_saphyr::from_str(text).map_err(|e| e.to_string())?
        };
        if !matches!(
            policy.api_version.as_str(),
            "audit.k8s.io/v1" | "audit.k8s.io/v1beta1"
        ) {
            return Err(format!(
                "apiVersion {:?} is not supported, expected \"audit.k8s.io/v1\"",
                policy.api_version
            ));
        }
        if policy.kind != "Policy" {
            return Err(format!("kind {:?} is not \"Policy\"", policy.kind));
        }
        if policy.rules.is_empty() {
            return Err("loaded illegal policy with 0 rules".into());
        }
        for (i, rule) in policy.rules.iter().enumerate() {
            if !rule.non_resource_urls.is_empty()
                && (!rule.resources.is_empty() || !rule.namespaces.is_empty())
            {
                return Err(format!(
                    "rules[{i}].nonResourceURLs: Invalid value: rules cannot apply to both regular resources and non-resource URLs"
                ));
            }
            for (j, gr) in rule.resources.iter().enumerate() {
                if !gr.resource_names.is_empty() && gr.resources.iter().any(|r| r.contains('*')) {
                    return Err(format!(
                        "rules[{i}].resources[{j}].resourceNames: Invalid value: using resourceNames requires no wildcards in resources"
                    ));
                }
            }
        }
        Ok(policy)
    }

    /// Reads and parses a policy file.
    pub fn load(path: &std::path::Path) -> Result<Policy, PolicyError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| PolicyError::Io(path.to_path_buf(), e))?;
        Policy::parse(&text).map_err(|e| PolicyError::Invalid(path.to_path_buf(), e))
    }

    /// The level and omitted stages of a request: the first matching rule
    /// decides; no match is `None`.
    pub fn evaluate(&self, attrs: &Attributes<'_>) -> RequestAuditConfig {
        for rule in &self.rules {
            if rule.matches(attrs) {
                let mut omit = self.omit_stages.clone();
                for s in &rule.omit_stages {
                    if !omit.contains(s) {
                        omit.push(*s);
                    }
                }
                return RequestAuditConfig {
                    level: rule.level,
                    omit_stages: omit,
                    omit_managed_fields: rule
                        .omit_managed_fields
                        .unwrap_or(self.omit_managed_fields),
                };
            }
        }
        RequestAuditConfig {
            level: Level::None,
            omit_stages: self.omit_stages.clone(),
            omit_managed_fields: self.omit_managed_fields,
        }
    }
}

fn has(list: &[String], s: &str) -> bool {
    list.iter().any(|x| x == s)
}

/// `/api*` matches by prefix, `*` matches everything, else exact.
fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || spec
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix))
}

impl PolicyRule {
    /// Whether the rule applies to a request.
    pub fn matches(&self, attrs: &Attributes<'_>) -> bool {
        if !self.users.is_empty() && !attrs.user.is_some_and(|u| has(&self.users, &u.name)) {
            return false;
        }
        if !self.user_groups.is_empty()
            && !attrs
                .user
                .is_some_and(|u| u.groups.iter().any(|g| has(&self.user_groups, g)))
        {
            return false;
        }
        if !self.verbs.is_empty() && !has(&self.verbs, attrs.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(attrs);
        }
        if !self.non_resource_urls.is_empty() {
            return !attrs.is_resource_request
                && self
                    .non_resource_urls
                    .iter()
                    .any(|spec| path_matches(attrs.path, spec));
        }
        true
    }

    fn matches_resource(&self, attrs: &Attributes<'_>) -> bool {
        if !attrs.is_resource_request {
            return false;
        }
        if !self.namespaces.is_empty() && !has(&self.namespaces, attrs.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let combined = if attrs.subresource.is_empty() {
            attrs.resource.to_string()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        self.resources.iter().any(|gr| {
            if gr.group != attrs.api_group {
                return false;
            }
            if gr.resources.is_empty() {
                return true;
            }
            if !gr.resource_names.is_empty() && !has(&gr.resource_names, attrs.name) {
                return false;
            }
            gr.resources.iter().any(|res| {
                res == "*"
                    || *res == combined
                    || (!attrs.subresource.is_empty()
                        && res.strip_prefix("*/") == Some(attrs.subresource))
                    || res.strip_suffix("/*") == Some(attrs.resource)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    users: ["system:kube-proxy"]
    verbs: ["watch"]
  - level: None
    nonResourceURLs: ["/healthz*", "/version"]
  - level: RequestResponse
    resources:
      - group: ""
        resources: ["pods/status", "*/scale"]
  - level: Request
    userGroups: ["devs"]
    resources:
      - group: ""
        resources: ["configmaps"]
        resourceNames: ["settings"]
  - level: Metadata
    namespaces: ["kube-system"]
    omitStages: [ResponseStarted]
  - level: Request
    resources:
      - group: "apps"
        resources: ["deployments/*"]
  - level: Metadata
    omitManagedFields: true
"#;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo::new(name, groups)
    }

    fn res<'a>(
        u: &'a UserInfo,
        verb: &'a str,
        group: &'a str,
        ns: &'a str,
        resource: &'a str,
        sub: &'a str,
        name: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            user: Some(u),
            verb,
            is_resource_request: true,
            path: "/api/v1/x",
            api_group: group,
            namespace: ns,
            resource,
            subresource: sub,
            name,
        }
    }

    #[test]
    fn first_match_decides_levels() {
        let p = Policy::parse(POLICY).expect("policy");
        let proxy = user("system:kube-proxy", &[]);
        let alice = user("alice", &["devs"]);
        let bob = user("bob", &[]);
        let lvl = |a: Attributes<'_>| p.evaluate(&a).level;
        assert_eq!(
            lvl(res(&proxy, "watch", "", "a", "pods", "", "")),
            Level::None
        );
        assert_eq!(
            lvl(res(&proxy, "get", "", "a", "pods", "status", "p")),
            Level::RequestResponse
        );
        assert_eq!(
            lvl(res(&bob, "update", "", "a", "pods", "status", "p")),
            Level::RequestResponse
        );
        assert_eq!(
            lvl(res(&bob, "get", "", "a", "deployments", "scale", "d")),
            Level::RequestResponse
        );
        assert_eq!(
            lvl(res(&alice, "get", "", "a", "configmaps", "", "settings")),
            Level::Request
        );
        assert_eq!(
            lvl(res(&alice, "get", "", "a", "configmaps", "", "other")),
            Level::Metadata
        );
        assert_eq!(
            lvl(res(&bob, "get", "", "a", "configmaps", "", "settings")),
            Level::Metadata
        );
        assert_eq!(
            lvl(res(&bob, "get", "apps", "a", "deployments", "status", "d")),
            Level::Request
        );
        // `deployments/*` also matches `deployments` itself, as upstream.
        assert_eq!(
            lvl(res(&bob, "get", "apps", "a", "deployments", "", "d")),
            Level::Request
        );
    }

    #[test]
    fn non_resource_urls_and_stages() {
        let p = Policy::parse(POLICY).expect("policy");
        let bob = user("bob", &[]);
        let nr = |path| Attributes {
            user: Some(&bob),
            verb: "get",
            path,
            ..Default::default()
        };
        assert_eq!(p.evaluate(&nr("/healthz")).level, Level::None);
        assert_eq!(p.evaluate(&nr("/healthz/etcd")).level, Level::None);
        assert_eq!(p.evaluate(&nr("/version")).level, Level::None);
        let other = p.evaluate(&nr("/apis"));
        assert_eq!(other.level, Level::Metadata);
        assert!(other.omit_managed_fields);
        let ks = p.evaluate(&res(&bob, "list", "", "kube-system", "secrets", "", ""));
        assert_eq!(ks.level, Level::Metadata);
        assert_eq!(
            ks.omit_stages,
            vec![Stage::RequestReceived, Stage::ResponseStarted]
        );
        assert!(!ks.omit_managed_fields);
    }

    #[test]
    fn no_match_is_none_and_validation() {
        let p = Policy::parse(
            r#"{"apiVersion":"audit.k8s.io/v1","kind":"Policy","rules":[{"level":"Metadata","users":["x"]}]}"#,
        )
        .expect("json policy");
        let bob = user("bob", &[]);
        assert_eq!(
            p.evaluate(&res(&bob, "get", "", "", "nodes", "", "")).level,
            Level::None
        );
        assert!(Policy::parse("apiVersion: v1\nkind: Policy\nrules: [{level: None}]").is_err());
        assert!(Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []").is_err());
        assert!(
            Policy::parse("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Loud}]")
                .is_err()
        );
        assert!(Policy::parse(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, resources: [{resources: ['*'], resourceNames: [a]}]}]"
        )
        .is_err());
    }
}
