//! Classification: which FlowSchema a request matches (the rules of
//! `PolicyRulesWithSubjects`), and its flow distinguisher.

use crate::request::RequestInfo;
use crate::request::user::UserInfo;
use apiforge_core::builtin::flowcontrol_v1::{
    FlowSchemaSpec, NonResourcePolicyRule, PolicyRulesWithSubjects, ResourcePolicyRule, Subject,
};

const ALL: &str = "*";
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == ALL || v == value)
}

/// Whether a subject names the user.
pub fn subject_matches(subject: &Subject, user: &UserInfo) -> bool {
    match subject.kind.as_str() {
        "User" => subject
            .user
            .as_ref()
            .is_some_and(|u| u.name == ALL || u.name == user.name),
        "Group" => subject
            .group
            .as_ref()
            .is_some_and(|g| g.name == ALL || user.groups.contains(&g.name)),
        "ServiceAccount" => {
            let Some(sa) = &subject.service_account else {
                return false;
            };
            let Some((namespace, name)) = user
                .name
                .strip_prefix(SERVICE_ACCOUNT_PREFIX)
                .and_then(|rest| rest.split_once(':'))
            else {
                return false;
            };
            sa.namespace == namespace && (sa.name == ALL || sa.name == name)
        }
        _ => false,
    }
}

fn resource_rule_matches(rule: &ResourcePolicyRule, info: &RequestInfo) -> bool {
    if !has(&rule.verbs, &info.verb) || !has(&rule.api_groups, &info.group) {
        return false;
    }
    let resource_ok = if info.subresource.is_empty() {
        has(&rule.resources, &info.resource)
    } else {
        has(
            &rule.resources,
            &format!("{}/{}", info.resource, info.subresource),
        )
    };
    if !resource_ok {
        return false;
    }
    if info.namespace.is_empty() {
        rule.cluster_scope == Some(true)
    } else {
        has(&rule.namespaces, &info.namespace)
    }
}

fn non_resource_rule_matches(rule: &NonResourcePolicyRule, info: &RequestInfo) -> bool {
    if !has(&rule.verbs, &info.verb) {
        return false;
    }
    rule.non_resource_urls.iter().any(|pattern| {
        if pattern == ALL {
            return true;
        }
        match pattern.strip_suffix("/*") {
            Some(prefix) => {
                info.path == prefix
                    || info
                        .path
                        .strip_prefix(prefix)
                        .is_some_and(|rest| rest.starts_with('/'))
            }
            None => info.path == *pattern,
        }
    })
}

fn rules_match(rules: &PolicyRulesWithSubjects, user: &UserInfo, info: &RequestInfo) -> bool {
    if !rules.subjects.iter().any(|s| subject_matches(s, user)) {
        return false;
    }
    if info.is_resource_request {
        rules
            .resource_rules
            .iter()
            .any(|r| resource_rule_matches(r, info))
    } else {
        rules
            .non_resource_rules
            .iter()
            .any(|r| non_resource_rule_matches(r, info))
    }
}

/// Whether a FlowSchema matches the request.
pub fn schema_matches(spec: &FlowSchemaSpec, user: &UserInfo, info: &RequestInfo) -> bool {
    spec.rules.iter().any(|r| rules_match(r, user, info))
}

/// The flow distinguisher of a request under a schema.
pub fn distinguisher<'a>(
    spec: &FlowSchemaSpec,
    user: &'a UserInfo,
    info: &'a RequestInfo,
) -> &'a str {
    match spec.distinguisher_method.as_ref().map(|d| d.type_.as_str()) {
        Some("ByUser") => &user.name,
        Some("ByNamespace") => &info.namespace,
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apiforge_core::builtin::flowcontrol_v1::FlowSchema;

    fn specs() -> Vec<(String, FlowSchemaSpec)> {
        let mut out: Vec<(i32, String, FlowSchemaSpec)> = super::super::bootstrap::all()
            .into_iter()
            .filter(|o| o["kind"] == "FlowSchema")
            .map(|o| {
                let fs: FlowSchema = serde_json::from_value(o).expect("flow schema");
                (
                    fs.spec.matching_precedence.unwrap_or(1000),
                    fs.metadata.name.clone(),
                    fs.spec,
                )
            })
            .collect();
        out.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        out.into_iter().map(|(_, n, s)| (n, s)).collect()
    }

    fn classify(user: &UserInfo, info: &RequestInfo) -> (String, String) {
        let specs = specs();
        let (name, spec) = specs
            .iter()
            .find(|(_, s)| schema_matches(s, user, info))
            .expect("catch-all matches everything");
        (name.clone(), distinguisher(spec, user, info).to_string())
    }

    fn resource(verb: &str, group: &str, resource: &str, ns: &str) -> RequestInfo {
        RequestInfo {
            is_resource_request: true,
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            namespace: ns.into(),
            ..Default::default()
        }
    }

    fn non_resource(verb: &str, path: &str) -> RequestInfo {
        RequestInfo {
            verb: verb.into(),
            path: path.into(),
            ..Default::default()
        }
    }

    #[test]
    fn default_schemas_classify_as_upstream() {
        let admin = UserInfo::new("admin", &["system:masters", "system:authenticated"]);
        let alice = UserInfo::new("alice", &["system:authenticated"]);
        let anonymous = UserInfo::new("system:anonymous", &["system:unauthenticated"]);
        let sa = UserInfo::new(
            "system:serviceaccount:apps:builder",
            &["system:serviceaccounts", "system:authenticated"],
        );
        let kube_sa = UserInfo::new(
            "system:serviceaccount:kube-system:job",
            &["system:serviceaccounts", "system:authenticated"],
        );
        let node = UserInfo::new("system:node:n1", &["system:nodes", "system:authenticated"]);
        let list_cm = resource("list", "", "configmaps", "default");
        assert_eq!(classify(&admin, &list_cm).0, "exempt");
        assert_eq!(
            classify(&alice, &list_cm),
            ("global-default".into(), "alice".into())
        );
        assert_eq!(
            classify(&anonymous, &non_resource("get", "/readyz")).0,
            "probes"
        );
        assert_eq!(
            classify(&anonymous, &non_resource("get", "/version")).0,
            "global-default"
        );
        assert_eq!(classify(&sa, &list_cm).0, "service-accounts");
        assert_eq!(
            classify(&kube_sa, &list_cm),
            ("kube-system-service-accounts".into(), "default".into())
        );
        assert_eq!(
            classify(
                &kube_sa,
                &resource("update", "coordination.k8s.io", "leases", "kube-system")
            )
            .0,
            "workload-leader-election"
        );
        assert_eq!(
            classify(&node, &resource("patch", "", "nodes", "")).0,
            "system-node-high"
        );
        assert_eq!(classify(&node, &list_cm).0, "system-nodes");
    }

    #[test]
    fn rule_details() {
        let alice = UserInfo::new("alice", &["dev"]);
        let rule: PolicyRulesWithSubjects = serde_json::from_value(serde_json::json!({
            "subjects": [{"kind": "User", "user": {"name": "alice"}}],
            "resourceRules": [{"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments/scale"], "namespaces": ["prod"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["/metrics", "/apis/*"]}],
        }))
        .expect("rule");
        let mut scale = resource("get", "apps", "deployments", "prod");
        scale.subresource = "scale".into();
        assert!(rules_match(&rule, &alice, &scale));
        assert!(!rules_match(
            &rule,
            &alice,
            &resource("get", "apps", "deployments", "prod")
        ));
        scale.namespace = "dev".into();
        assert!(!rules_match(&rule, &alice, &scale));
        scale.namespace = String::new();
        assert!(!rules_match(&rule, &alice, &scale), "clusterScope not set");
        assert!(rules_match(&rule, &alice, &non_resource("get", "/metrics")));
        assert!(rules_match(&rule, &alice, &non_resource("get", "/apis")));
        assert!(rules_match(
            &rule,
            &alice,
            &non_resource("get", "/apis/x/v1")
        ));
        assert!(!rules_match(&rule, &alice, &non_resource("get", "/apisx")));
        assert!(!rules_match(
            &rule,
            &alice,
            &non_resource("get", "/metrics/x")
        ));
        let bob = UserInfo::new("bob", &["dev"]);
        assert!(!rules_match(&rule, &bob, &non_resource("get", "/metrics")));
        let wildcard: Subject =
            serde_json::from_value(serde_json::json!({"kind": "Group", "group": {"name": "*"}}))
                .expect("subject");
        assert!(subject_matches(&wildcard, &bob));
        let sa: Subject = serde_json::from_value(serde_json::json!(
            {"kind": "ServiceAccount", "serviceAccount": {"namespace": "ns", "name": "*"}}))
        .expect("subject");
        assert!(subject_matches(
            &sa,
            &UserInfo::new("system:serviceaccount:ns:x", &[])
        ));
        assert!(!subject_matches(
            &sa,
            &UserInfo::new("system:serviceaccount:other:x", &[])
        ));
        assert!(!subject_matches(&sa, &bob));
    }
}
