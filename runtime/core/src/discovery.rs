//! Discovery documents (legacy `/api`, `/apis`, `/apis/<g>`, `/apis/<g>/<v>`
//! and aggregated `apidiscovery.k8s.io` v2/v2beta1) of the compiled-in groups.
//! Pure functions of the [`Scheme`], computed by `build.rs`.

use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::resource::KindInfo;
use crate::scheme::{Group, Kind, Scheme};

/// The verbs of a resource served by the generic registry, sorted.
pub const RESOURCE_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The verbs of the `status` and `scale` subresources.
pub const SUBRESOURCE_VERBS: [&str; 3] = ["get", "patch", "update"];

/// A create-only review resource answered by `authz::reviews` rather than
/// the registry: group, version, plural, singular, kind, namespaced.
pub type ReviewResource = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
);

/// The review resources kube-apiserver lists in discovery (verbs
/// `create`; no `storageVersionHash`, nothing is stored).
pub const REVIEW_RESOURCES: [ReviewResource; 7] = [
    (
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "selfsubjectreview",
        "SelfSubjectReview",
        false,
    ),
    (
        "authentication.k8s.io",
        "v1",
        "tokenreviews",
        "tokenreview",
        "TokenReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        "LocalSubjectAccessReview",
        true,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        "SelfSubjectRulesReview",
        false,
    ),
    (
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "subjectaccessreview",
        "SubjectAccessReview",
        false,
    ),
    (
        "authentication.k8s.io",
        "v1beta1",
        "selfsubjectreviews",
        "selfsubjectreview",
        "SelfSubjectReview",
        false,
    ),
];

/// The review groups a scheme does not define itself, each with its
/// versions (preferred first).
fn review_groups(scheme: &Scheme) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for (group, version, ..) in REVIEW_RESOURCES {
        if scheme.group(group).is_some() {
            continue;
        }
        match out.iter_mut().find(|(g, _)| *g == group) {
            Some((_, versions)) if !versions.contains(&version) => versions.push(version),
            Some(_) => {}
            None => out.push((group, vec![version])),
        }
    }
    out
}

fn review_api_group(group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": group_version(group, v), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

/// Discovery documents by key.
pub type Documents = Vec<(String, Value)>;

/// `GET /apis/<group>` and `GET /apis/<group>/<version>` documents of the
/// review groups the scheme does not define: (group, document) and
/// (`apis/<group>/<version>`, document).
pub fn review_documents(scheme: &Scheme) -> (Documents, Documents) {
    let mut groups = Vec::new();
    let mut lists = Vec::new();
    for (group, versions) in review_groups(scheme) {
        let mut doc = json!({"kind": "APIGroup", "apiVersion": "v1"});
        if let (Value::Object(out), Value::Object(map)) =
            (&mut doc, review_api_group(group, &versions))
        {
            out.extend(map);
        }
        groups.push((group.to_string(), doc));
        for version in versions {
            let resources: Vec<Value> = REVIEW_RESOURCES
                .iter()
                .filter(|r| r.0 == group && r.1 == version)
                .map(|(_, _, plural, singular, kind, namespaced)| {
                    json!({"name": plural, "singularName": singular, "namespaced": namespaced,
                        "kind": kind, "verbs": ["create"]})
                })
                .collect();
            lists.push((
                format!("apis/{group}/{version}"),
                json!({"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": group_version(group, version), "resources": resources}),
            ));
        }
    }
    (groups, lists)
}

fn review_aggregated(group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|version| {
            let resources: Vec<Value> = REVIEW_RESOURCES
                .iter()
                .filter(|r| r.0 == group && r.1 == *version)
                .map(|(_, _, plural, singular, kind, namespaced)| {
                    json!({
                        "resource": plural,
                        "responseKind": {"group": group, "version": version, "kind": kind},
                        "scope": if *namespaced { "Namespaced" } else { "Cluster" },
                        "singularResource": singular,
                        "verbs": ["create"],
                    })
                })
                .collect();
            json!({"version": version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": {"name": group}, "versions": versions})
}

/// The subresources of a kind in one version: name and response kind
/// (`group`, `version`, `kind`), status first, as CRDs list them.
fn subresources(info: &KindInfo) -> Vec<(&'static str, [&'static str; 3])> {
    let mut out = Vec::new();
    if info.subresources.status {
        out.push(("status", [info.group, info.version, info.kind]));
    }
    if info.subresources.scale.is_some() {
        out.push((
            "scale",
            [
                crate::scale::SCALE_GROUP,
                crate::scale::SCALE_VERSION,
                "Scale",
            ],
        ));
    }
    out
}

/// The legacy `APIResource` entries of a kind's subresources: empty
/// `singularName`, `group`/`version` only when the response kind's group
/// version differs from the resource's, no `storageVersionHash`.
fn api_subresources(info: &KindInfo) -> Vec<Value> {
    subresources(info)
        .into_iter()
        .map(|(name, [group, version, kind])| {
            let mut r = json!({
                "name": format!("{}/{name}", info.plural),
                "singularName": "",
                "namespaced": info.namespaced(),
                "kind": kind,
                "verbs": SUBRESOURCE_VERBS,
            });
            if (group, version) != (info.group, info.version)
                && let Value::Object(map) = &mut r
            {
                map.insert("group".into(), json!(group));
                map.insert("version".into(), json!(version));
            }
            r
        })
        .collect()
}

/// `storageVersionHash`: base64 of the first 8 bytes of SHA-256 of
/// `<group>/<version>/<kind>` of the storage version.
pub fn storage_version_hash(storage: &KindInfo) -> String {
    let digest = Sha256::digest(format!(
        "{}/{}/{}",
        storage.group, storage.version, storage.kind
    ));
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

fn api_group(group: &Group) -> Value {
    let versions: Vec<Value> = group
        .versions
        .iter()
        .map(|v| json!({"groupVersion": group_version(group.name, v), "version": v}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group.name, "versions": versions, "preferredVersion": preferred})
}

/// `GET /api`.
pub fn api_versions(scheme: &Scheme) -> Value {
    let versions: Vec<&str> = scheme
        .group("")
        .map(|g| g.versions.clone())
        .unwrap_or_default();
    json!({"kind": "APIVersions", "versions": versions, "serverAddressByClientCIDRs": []})
}

/// `GET /apis`.
pub fn api_group_list(scheme: &Scheme) -> Value {
    let groups: Vec<Value> = scheme
        .groups()
        .iter()
        .filter(|g| !g.name.is_empty())
        .map(api_group)
        .chain(
            review_groups(scheme)
                .into_iter()
                .map(|(g, versions)| review_api_group(g, &versions)),
        )
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/<group>`.
pub fn api_group_doc(group: &Group) -> Value {
    let mut v = api_group(group);
    if let Value::Object(map) = &mut v {
        let mut out = serde_json::Map::new();
        out.insert("kind".into(), json!("APIGroup"));
        out.insert("apiVersion".into(), json!("v1"));
        out.append(map);
        return Value::Object(out);
    }
    v
}

fn api_resource(kind: &Kind, info: &KindInfo) -> Value {
    let mut r = json!({
        "name": info.plural,
        "singularName": info.singular,
        "namespaced": info.namespaced(),
        "kind": info.kind,
        "verbs": RESOURCE_VERBS,
    });
    if let Value::Object(map) = &mut r {
        if !info.short_names.is_empty() {
            map.insert("shortNames".into(), json!(info.short_names));
        }
        if !info.categories.is_empty() {
            map.insert("categories".into(), json!(info.categories));
        }
        map.insert(
            "storageVersionHash".into(),
            json!(storage_version_hash(kind.storage_info())),
        );
    }
    r
}

/// `GET /apis/<group>/<version>` (or `/api/v1`).
pub fn api_resource_list(group: &Group, version: &str) -> Value {
    let resources: Vec<Value> = group
        .kinds_in(version)
        .into_iter()
        .flat_map(|(k, v)| std::iter::once(api_resource(k, v.info)).chain(api_subresources(v.info)))
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version(group.name, version), "resources": resources})
}

fn aggregated_group(group: &Group) -> Value {
    let versions: Vec<Value> = group
        .versions
        .iter()
        .map(|version| {
            let mut resources: Vec<Value> = group
                .kinds_in(version)
                .into_iter()
                .map(|(_, ops)| {
                    let info = ops.info;
                    let mut r = json!({
                        "resource": info.plural,
                        "responseKind": {"group": info.group, "version": info.version, "kind": info.kind},
                        "scope": if info.namespaced() { "Namespaced" } else { "Cluster" },
                        "singularResource": info.singular,
                        "verbs": RESOURCE_VERBS,
                    });
                    if let Value::Object(map) = &mut r {
                        if !info.short_names.is_empty() {
                            map.insert("shortNames".into(), json!(info.short_names));
                        }
                        if !info.categories.is_empty() {
                            map.insert("categories".into(), json!(info.categories));
                        }
                        let subs: Vec<Value> = subresources(info)
                            .into_iter()
                            .map(|(name, [group, version, kind])| {
                                json!({
                                    "subresource": name,
                                    "responseKind": {"group": group, "version": version, "kind": kind},
                                    "verbs": SUBRESOURCE_VERBS,
                                })
                            })
                            .collect();
                        if !subs.is_empty() {
                            map.insert("subresources".into(), Value::Array(subs));
                        }
                    }
                    r
                })
                .collect();
            resources.sort_by(|a, b| a["resource"].as_str().cmp(&b["resource"].as_str()));
            json!({"version": version, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let metadata = if group.name.is_empty() {
        json!({})
    } else {
        json!({"name": group.name})
    };
    json!({"metadata": metadata, "versions": versions})
}

/// Aggregated discovery for `/api` (`core = true`) or `/apis`, in
/// `apidiscovery.k8s.io/<api_version>` (`v2` or `v2beta1`).
pub fn aggregated(scheme: &Scheme, core: bool, api_version: &str) -> Value {
    let mut items: Vec<Value> = scheme
        .groups()
        .iter()
        .filter(|g| g.name.is_empty() == core)
        .map(aggregated_group)
        .collect();
    if !core {
        items.extend(
            review_groups(scheme)
                .into_iter()
                .map(|(g, versions)| review_aggregated(g, &versions)),
        );
    }
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{api_version}"),
        "metadata": {},
        "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Scope;

    #[test]
    fn subresources_are_listed() {
        use crate::resource::{ScaleSubresource, Subresources};
        let info = KindInfo {
            group: "example.com",
            version: "v1",
            kind: "Widget",
            plural: "widgets",
            singular: "widget",
            subresources: Subresources {
                status: true,
                scale: Some(ScaleSubresource {
                    spec_replicas_path: ".spec.replicas",
                    status_replicas_path: ".status.replicas",
                    label_selector_path: "",
                }),
            },
            ..KindInfo::EMPTY
        };
        assert_eq!(
            api_subresources(&info),
            vec![
                json!({"name": "widgets/status", "singularName": "", "namespaced": true,
                    "kind": "Widget", "verbs": ["get", "patch", "update"]}),
                json!({"name": "widgets/scale", "singularName": "", "namespaced": true,
                    "group": "autoscaling", "version": "v1", "kind": "Scale",
                    "verbs": ["get", "patch", "update"]}),
            ]
        );
        assert!(api_subresources(&KindInfo::EMPTY).is_empty());
    }

    #[test]
    fn storage_version_hashes_match_kubernetes() {
        let info = |group, version, kind| KindInfo {
            group,
            version,
            kind,
            plural: "",
            singular: "",
            scope: Scope::Namespaced,
            short_names: &[],
            categories: &[],
            printer_columns: &[],
            openapi_name: "",
            ..KindInfo::EMPTY
        };
        assert_eq!(storage_version_hash(&info("", "v1", "Pod")), "xPOwRZ+Yhw8=");
        assert_eq!(
            storage_version_hash(&info("wardle.example.com", "v1alpha1", "Flunder")),
            "UHqNx5H3K7A="
        );
    }
}
