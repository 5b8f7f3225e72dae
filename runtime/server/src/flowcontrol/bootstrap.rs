//! The default configuration (kube-apiserver's bootstrap FlowSchemas and
//! PriorityLevelConfigurations): the mandatory `exempt` and `catch-all`
//! objects plus the suggested ones. All carry
//! `apf.kubernetes.io/autoupdate-spec: "true"`; the reconciler only
//! rewrites the spec of objects that still say so.

use serde_json::{Value, json};

use apiforge_core::builtin::flowcontrol_v1::GROUP;

/// The annotation that lets the server keep a default object's spec
/// current.
pub const AUTOUPDATE_ANNOTATION: &str = "apf.kubernetes.io/autoupdate-spec";

const ALL: &str = "*";
const MASTERS: &str = "system:masters";
const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const NODES: &str = "system:nodes";
const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";

fn object(kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"),
        "kind": kind,
        "metadata": {"name": name, "annotations": {AUTOUPDATE_ANNOTATION: "true"}},
        "spec": spec,
    })
}

fn limited(name: &str, shares: i32, lendable: i32, queuing: Option<(i32, i32, i32)>) -> Value {
    let limit_response = match queuing {
        Some((queues, hand, length)) => json!({"type": "Queue", "queuing": {
            "queues": queues, "handSize": hand, "queueLengthLimit": length}}),
        None => json!({"type": "Reject"}),
    };
    object(
        "PriorityLevelConfiguration",
        name,
        json!({"type": "Limited", "limited": {
            "nominalConcurrencyShares": shares,
            "lendablePercent": lendable,
            "limitResponse": limit_response,
        }}),
    )
}

fn group(name: &str) -> Value {
    json!({"kind": "Group", "group": {"name": name}})
}

fn user(name: &str) -> Value {
    json!({"kind": "User", "user": {"name": name}})
}

fn service_account(namespace: &str, name: &str) -> Value {
    json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": namespace, "name": name}})
}

fn resource_rule(
    verbs: &[&str],
    groups: &[&str],
    resources: &[&str],
    cluster: bool,
    ns: &[&str],
) -> Value {
    let mut rule = json!({"verbs": verbs, "apiGroups": groups, "resources": resources});
    if cluster {
        rule["clusterScope"] = json!(true);
    }
    if !ns.is_empty() {
        rule["namespaces"] = json!(ns);
    }
    rule
}

fn everything() -> (Value, Value) {
    (
        json!([resource_rule(&[ALL], &[ALL], &[ALL], true, &[ALL])]),
        json!([{"verbs": [ALL], "nonResourceURLs": [ALL]}]),
    )
}

fn schema(
    name: &str,
    level: &str,
    precedence: i32,
    distinguisher: Option<&str>,
    rules: Vec<Value>,
) -> Value {
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": rules,
    });
    if let Some(d) = distinguisher {
        spec["distinguisherMethod"] = json!({"type": d});
    }
    object("FlowSchema", name, spec)
}

fn all_of(subjects: Vec<Value>) -> Value {
    let (resource, non_resource) = everything();
    json!({"subjects": subjects, "resourceRules": resource, "nonResourceRules": non_resource})
}

/// The mandatory objects: recreated whenever they are missing.
pub fn mandatory() -> Vec<Value> {
    vec![
        object(
            "PriorityLevelConfiguration",
            "exempt",
            json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
        ),
        limited("catch-all", 5, 0, None),
        schema(
            "exempt",
            "exempt",
            1,
            None,
            vec![all_of(vec![group(MASTERS)])],
        ),
        schema(
            "catch-all",
            "catch-all",
            10000,
            Some("ByUser"),
            vec![all_of(vec![group(UNAUTHENTICATED), group(AUTHENTICATED)])],
        ),
    ]
}

/// The suggested objects: created when missing at start-up.
pub fn suggested() -> Vec<Value> {
    let leader_resources = |subjects: Vec<Value>| {
        json!({"subjects": subjects, "resourceRules": [
            resource_rule(&["get", "create", "update"], &[""], &["endpoints", "configmaps"], false, &["kube-system"]),
            resource_rule(&["get", "create", "update"], &["coordination.k8s.io"], &["leases"], false, &["kube-system"]),
        ]})
    };
    vec![
        limited("system", 30, 33, Some((64, 6, 50))),
        limited("node-high", 40, 25, Some((64, 6, 50))),
        limited("leader-election", 10, 0, Some((16, 4, 50))),
        limited("workload-high", 40, 50, Some((128, 6, 50))),
        limited("workload-low", 100, 90, Some((128, 6, 50))),
        limited("global-default", 20, 50, Some((128, 6, 50))),
        schema(
            "probes",
            "exempt",
            2,
            None,
            vec![
                json!({"subjects": [group(UNAUTHENTICATED), group(AUTHENTICATED)],
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}]}),
            ],
        ),
        schema(
            "system-leader-election",
            "leader-election",
            100,
            Some("ByUser"),
            vec![leader_resources(vec![
                user("system:kube-controller-manager"),
                user("system:kube-scheduler"),
            ])],
        ),
        schema(
            "endpoint-controller",
            "workload-high",
            150,
            Some("ByUser"),
            vec![
                json!({"subjects": [user("system:kube-controller-manager"), service_account("kube-system", "endpoint-controller")],
                "resourceRules": [resource_rule(&["get", "create", "update"], &[""], &["endpoints"], false, &[ALL])]}),
            ],
        ),
        schema(
            "workload-leader-election",
            "leader-election",
            200,
            Some("ByUser"),
            vec![leader_resources(vec![service_account("kube-system", ALL)])],
        ),
        schema(
            "system-node-high",
            "node-high",
            400,
            Some("ByUser"),
            vec![json!({"subjects": [group(NODES)], "resourceRules": [
                resource_rule(&[ALL], &[""], &["nodes", "nodes/status"], true, &[]),
                resource_rule(&[ALL], &["coordination.k8s.io"], &["leases"], false, &[ALL]),
            ]})],
        ),
        schema(
            "system-nodes",
            "system",
            500,
            Some("ByUser"),
            vec![all_of(vec![group(NODES)])],
        ),
        schema(
            "kube-controller-manager",
            "workload-high",
            800,
            Some("ByNamespace"),
            vec![all_of(vec![user("system:kube-controller-manager")])],
        ),
        schema(
            "kube-scheduler",
            "workload-high",
            800,
            Some("ByNamespace"),
            vec![all_of(vec![user("system:kube-scheduler")])],
        ),
        schema(
            "kube-system-service-accounts",
            "workload-high",
            900,
            Some("ByNamespace"),
            vec![all_of(vec![service_account("kube-system", ALL)])],
        ),
        schema(
            "service-accounts",
            "workload-low",
            9000,
            Some("ByUser"),
            vec![all_of(vec![group(SERVICE_ACCOUNTS)])],
        ),
        schema(
            "global-default",
            "global-default",
            9900,
            Some("ByUser"),
            vec![all_of(vec![group(UNAUTHENTICATED), group(AUTHENTICATED)])],
        ),
    ]
}

/// Every default object: the mandatory ones, then the suggested ones.
pub fn all() -> Vec<Value> {
    let mut out = mandatory();
    out.extend(suggested());
    out
}
