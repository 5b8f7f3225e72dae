//! ObjectMeta validation on creation, as upstream's
//! `k8s.io/apimachinery/pkg/api/validation` `ValidateObjectMetaAccessor`
//! words it (and the label, annotation, owner reference, finalizer and
//! managed fields validators it calls).
//!
//! The server validates the metadata of the objects it stores with its own
//! narrower checks (scope, name, annotation size); this is the full set,
//! used where upstream validates a metadata that is not the stored object's
//! (the embedded resources of custom resources).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{
    ErrorList, ErrorType, FieldError, FieldPath, is_dns1123_label, is_qualified_name,
    is_valid_label_value,
};
use crate::meta::{ManagedFieldsEntry, ObjectMeta, OwnerReference};

/// The total size of an object's annotations (keys and values), in bytes.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// `ValidateFieldManager`'s bound on a manager's length.
const FIELD_MANAGER_MAX: usize = 128;
/// `MaxSubresourceNameLength`.
const SUBRESOURCE_MAX: usize = 256;

/// Validates `meta` at `path` as upstream's `ValidateObjectMeta` on
/// creation: `generateName` and `name` with `name_fn` (its second argument
/// is true for a prefix), the namespace (required and a DNS-1123 label when
/// `requires_namespace`, else forbidden), `generation`, labels,
/// annotations, owner references, finalizers and managed fields.
pub fn validate_object_meta(
    meta: &ObjectMeta,
    requires_namespace: bool,
    name_fn: fn(&str, bool) -> Vec<String>,
    path: &FieldPath,
) -> ErrorList {
    let mut errs = ErrorList::default();
    if !meta.generate_name.is_empty() {
        for msg in name_fn(&meta.generate_name, true) {
            errs.push(FieldError::invalid(
                path.child("generateName"),
                meta.generate_name.clone(),
                msg,
            ));
        }
    }
    if meta.name.is_empty() {
        errs.push(FieldError::required(
            path.child("name"),
            "name or generateName is required",
        ));
    } else {
        for msg in name_fn(&meta.name, false) {
            errs.push(FieldError::invalid(
                path.child("name"),
                meta.name.clone(),
                msg,
            ));
        }
    }
    if requires_namespace {
        if meta.namespace.is_empty() {
            errs.push(FieldError::required(path.child("namespace"), ""));
        } else {
            // `ValidateNamespaceName` is `NameIsDNSLabel`.
            for msg in is_dns1123_label(&meta.namespace) {
                errs.push(FieldError::invalid(
                    path.child("namespace"),
                    meta.namespace.clone(),
                    msg,
                ));
            }
        }
    } else if !meta.namespace.is_empty() {
        errs.push(FieldError::forbidden(
            path.child("namespace"),
            "not allowed on this type",
        ));
    }
    if meta.generation < 0 {
        errs.push(FieldError::invalid(
            path.child("generation"),
            meta.generation,
            "must be greater than or equal to 0",
        ));
    }
    validate_labels(&meta.labels, &path.child("labels"), &mut errs);
    validate_annotations(&meta.annotations, &path.child("annotations"), &mut errs);
    validate_owner_references(
        &meta.owner_references,
        &path.child("ownerReferences"),
        &mut errs,
    );
    validate_finalizers(&meta.finalizers, &path.child("finalizers"), &mut errs);
    validate_managed_fields(
        &meta.managed_fields,
        &path.child("managedFields"),
        &mut errs,
    );
    errs
}

/// `ValidateLabels`: every key a qualified name, every value a label
/// value; errors at the labels' path (not the key's).
pub fn validate_labels(labels: &BTreeMap<String, String>, path: &FieldPath, errs: &mut ErrorList) {
    for (k, v) in labels {
        for msg in is_qualified_name(k) {
            errs.push(FieldError::invalid(path, k.clone(), msg));
        }
        for msg in is_valid_label_value(v) {
            errs.push(FieldError::invalid(path, v.clone(), msg));
        }
    }
}

/// `ValidateAnnotations`: keys are qualified names but for case; the total
/// size is bounded.
fn validate_annotations(
    annotations: &BTreeMap<String, String>,
    path: &FieldPath,
    errs: &mut ErrorList,
) {
    for k in annotations.keys() {
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(path, k.clone(), msg));
        }
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(FieldError::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
}

/// The version of an `apiVersion` as `schema.FromAPIVersionAndKind` reads
/// it: empty when the group-version does not parse (more than one `/`).
fn version_of(api_version: &str) -> &str {
    if api_version.is_empty() || api_version == "/" {
        return "";
    }
    match api_version.matches('/').count() {
        0 => api_version,
        1 => api_version.split_once('/').map_or("", |(_, v)| v),
        _ => "",
    }
}

/// `ValidateOwnerReferences`: errors at the list's path (upstream does not
/// index them).
fn validate_owner_references(refs: &[OwnerReference], path: &FieldPath, errs: &mut ErrorList) {
    let mut first_controller: Option<String> = None;
    for r in refs {
        let version = version_of(&r.api_version);
        if version.is_empty() {
            errs.push(FieldError::invalid(
                path.child("apiVersion"),
                r.api_version.clone(),
                "version must not be empty",
            ));
        }
        if r.kind.is_empty() {
            errs.push(FieldError::invalid(
                path.child("kind"),
                r.kind.clone(),
                "kind must not be empty",
            ));
        }
        if r.name.is_empty() {
            errs.push(FieldError::invalid(
                path.child("name"),
                r.name.clone(),
                "name must not be empty",
            ));
        }
        if r.uid.is_empty() {
            errs.push(FieldError::invalid(
                path.child("uid"),
                r.uid.clone(),
                "uid must not be empty",
            ));
        }
        // `BannedOwners`: core/v1 Event.
        let group_is_core = !r.api_version.contains('/')
            || r.api_version
                .split_once('/')
                .is_some_and(|(g, _)| g.is_empty());
        if group_is_core && version == "v1" && r.kind == "Event" {
            errs.push(FieldError::invalid(
                path,
                to_value(r),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.controller == Some(true) {
            let current = format!("{}/{}", r.kind, r.name);
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid(
                    path,
                    to_value(refs),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
}

fn to_value<T: serde::Serialize + ?Sized>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// `ValidateFinalizers`: qualified names, and not both `orphan` and
/// `foregroundDeletion`.
fn validate_finalizers(finalizers: &[String], path: &FieldPath, errs: &mut ErrorList) {
    for f in finalizers {
        for msg in is_qualified_name(f) {
            errs.push(FieldError::invalid(path, f.clone(), msg));
        }
    }
    let has = |name: &str| finalizers.iter().any(|f| f == name);
    if has("orphan") && has("foregroundDeletion") {
        // the list shown as Go's `%#v` of a `[]string`
        let quoted: Vec<String> = finalizers.iter().map(|f| format!("{f:?}")).collect();
        errs.push(FieldError {
            type_: ErrorType::Invalid,
            field: path.into(),
            bad_value: None,
            detail: format!(
                "[]string{{{}}}: finalizer orphan and foregroundDeletion cannot be both set",
                quoted.join(", ")
            ),
        });
    }
}

/// Go's `unicode.IsPrint`, approximated: no control character and no
/// space other than U+0020.
fn is_print(c: char) -> bool {
    !c.is_control() && (c == ' ' || !c.is_whitespace())
}

/// `ValidateManagedFields`.
fn validate_managed_fields(entries: &[ManagedFieldsEntry], path: &FieldPath, errs: &mut ErrorList) {
    for (i, e) in entries.iter().enumerate() {
        let p = path.index(i);
        if e.operation != "Apply" && e.operation != "Update" {
            errs.push(FieldError::invalid(
                p.child("operation"),
                e.operation.clone(),
                "must be `Apply` or `Update`",
            ));
        }
        if !e.fields_type.is_empty() && e.fields_type != "FieldsV1" {
            errs.push(FieldError::invalid(
                p.child("fieldsType"),
                e.fields_type.clone(),
                "must be `FieldsV1`",
            ));
        }
        if e.manager.len() > FIELD_MANAGER_MAX {
            errs.push(FieldError::too_long(p.child("manager"), FIELD_MANAGER_MAX));
        }
        for (at, c) in e.manager.char_indices() {
            if !is_print(c) {
                errs.push(FieldError::invalid(
                    p.child("manager"),
                    e.manager.clone(),
                    format!("invalid character U+{:04X} (at position {at})", c as u32),
                ));
            }
        }
        if e.subresource.len() > SUBRESOURCE_MAX {
            errs.push(FieldError::too_long(
                p.child("subresource"),
                SUBRESOURCE_MAX,
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::is_valid_path_segment_name;

    fn path_segment(name: &str, prefix: bool) -> Vec<String> {
        if prefix {
            crate::validation::is_valid_path_segment_prefix(name)
        } else {
            is_valid_path_segment_name(name)
        }
    }

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    // apimachinery pkg/api/validation/objectmeta.go ValidateObjectMetaAccessor:
    // name required, namespace forbidden without requiresNamespace, and
    // validateOwnerReference / ValidateOwnerReferences (errors at the
    // list's path, BannedOwners core/v1 Event, one controller). Upstream
    // shows the reference as Go's `%#v` of the struct (with pointer
    // addresses); here it is its JSON.
    #[test]
    fn owner_references_and_scope() {
        let meta = ObjectMeta {
            namespace: "ns".into(),
            owner_references: vec![
                OwnerReference {
                    api_version: "apps/".into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                },
                OwnerReference {
                    api_version: "v1".into(),
                    kind: "Event".into(),
                    name: "e".into(),
                    uid: "u".into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                },
            ],
            ..ObjectMeta::default()
        };
        let errs = validate_object_meta(&meta, false, path_segment, &FieldPath::new("metadata"));
        let m = messages(&errs);
        assert_eq!(
            m[..7],
            [
                "metadata.name: Required value: name or generateName is required",
                "metadata.namespace: Forbidden: not allowed on this type",
                "metadata.ownerReferences.apiVersion: Invalid value: \"apps/\": version must not be empty",
                "metadata.ownerReferences.kind: Invalid value: \"\": kind must not be empty",
                "metadata.ownerReferences.name: Invalid value: \"\": name must not be empty",
                "metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty",
                "metadata.ownerReferences: Invalid value: {\"apiVersion\":\"v1\",\"kind\":\"Event\",\"name\":\"e\",\"uid\":\"u\",\"controller\":true}: /v1, Kind=Event is disallowed from being an owner",
            ]
        );
        assert!(
            m[7].ends_with(
                "Only one reference can have Controller set to true. Found \"true\" in references for / and Event/e"
            ),
            "{}",
            m[7]
        );
        assert_eq!(m.len(), 8);
    }

    // pkg/apis/meta/v1/validation ValidateManagedFields / ValidateFieldManager.
    #[test]
    fn managed_fields() {
        let meta = ObjectMeta {
            name: "a".into(),
            managed_fields: vec![
                ManagedFieldsEntry {
                    manager: "ok".into(),
                    operation: "Apply".into(),
                    fields_type: "FieldsV1".into(),
                    ..ManagedFieldsEntry::default()
                },
                ManagedFieldsEntry {
                    manager: format!("{}\u{7}", "m".repeat(128)),
                    operation: "Patch".into(),
                    fields_type: "FieldsV2".into(),
                    subresource: "s".repeat(257),
                    ..ManagedFieldsEntry::default()
                },
            ],
            ..ObjectMeta::default()
        };
        let errs = validate_object_meta(&meta, false, path_segment, &FieldPath::new("metadata"));
        let manager = format!("{}\u{7}", "m".repeat(128));
        assert_eq!(
            messages(&errs),
            [
                "metadata.managedFields[1].operation: Invalid value: \"Patch\": must be `Apply` or `Update`".to_string(),
                "metadata.managedFields[1].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`".to_string(),
                "metadata.managedFields[1].manager: Too long: may not be more than 128 bytes".to_string(),
                format!(
                    "metadata.managedFields[1].manager: Invalid value: {manager:?}: invalid character U+0007 (at position 128)"
                ),
                "metadata.managedFields[1].subresource: Too long: may not be more than 256 bytes".to_string(),
            ]
        );
    }

    // ValidateAnnotations: the total size of keys and values is bounded
    // (TotalAnnotationSizeLimitB, field.TooLong with the value omitted).
    #[test]
    fn annotation_size() {
        let mut meta = ObjectMeta {
            name: "a".into(),
            ..ObjectMeta::default()
        };
        meta.annotations
            .insert("k".into(), "v".repeat(TOTAL_ANNOTATION_SIZE_LIMIT));
        let errs = validate_object_meta(&meta, false, path_segment, &FieldPath::new("metadata"));
        assert_eq!(
            messages(&errs),
            ["metadata.annotations: Too long: may not be more than 262144 bytes"]
        );
    }
}
