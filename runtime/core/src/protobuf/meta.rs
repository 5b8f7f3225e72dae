//! `meta.k8s.io/v1` messages: ObjectMeta, ListMeta, Time, Status.

use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb;

use super::Error;
use crate::meta::{ListMeta, ManagedFieldsEntry, ObjectMeta, OwnerReference, Status, Time};

/// `metav1.Time` as Go marshals it: `seconds` and `nanos` (always 0; the
/// JSON form has second precision) both written.
fn time_to_pb(t: &Time) -> pb::Time {
    pb::Time {
        seconds: Some(t.0.as_second()),
        nanos: Some(0),
    }
}

fn time_from_pb(t: &pb::Time) -> Result<Option<Time>, Error> {
    // An empty message is Go's zero time, i.e. unset. Nanoseconds are
    // dropped: the JSON form has second precision.
    let Some(seconds) = t.seconds else {
        return Ok(None);
    };
    jiff::Timestamp::from_second(seconds)
        .map(|ts| Some(Time(ts)))
        .map_err(Error::Time)
}

fn some(s: &str) -> Option<String> {
    Some(s.to_string())
}

/// ObjectMeta → message. The creation timestamp is written even when unset
/// (an empty `Time`), as Go writes its zero value.
pub fn object_meta_to_pb(m: &ObjectMeta) -> pb::ObjectMeta {
    pb::ObjectMeta {
        name: some(&m.name),
        generate_name: some(&m.generate_name),
        namespace: some(&m.namespace),
        self_link: some(&m.self_link),
        uid: some(&m.uid),
        resource_version: some(&m.resource_version),
        generation: Some(m.generation),
        creation_timestamp: Some(
            m.creation_timestamp
                .as_ref()
                .map(time_to_pb)
                .unwrap_or_default(),
        ),
        deletion_timestamp: m.deletion_timestamp.as_ref().map(time_to_pb),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: m.labels.clone(),
        annotations: m.annotations.clone(),
        owner_references: m.owner_references.iter().map(owner_to_pb).collect(),
        finalizers: m.finalizers.clone(),
        managed_fields: m.managed_fields.iter().map(managed_to_pb).collect(),
    }
}

/// Message → ObjectMeta.
pub fn object_meta_from_pb(m: pb::ObjectMeta) -> Result<ObjectMeta, Error> {
    Ok(ObjectMeta {
        name: m.name.unwrap_or_default(),
        generate_name: m.generate_name.unwrap_or_default(),
        namespace: m.namespace.unwrap_or_default(),
        self_link: m.self_link.unwrap_or_default(),
        uid: m.uid.unwrap_or_default(),
        resource_version: m.resource_version.unwrap_or_default(),
        generation: m.generation.unwrap_or_default(),
        creation_timestamp: m
            .creation_timestamp
            .as_ref()
            .map(time_from_pb)
            .transpose()?
            .flatten(),
        deletion_timestamp: m
            .deletion_timestamp
            .as_ref()
            .map(time_from_pb)
            .transpose()?
            .flatten(),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: m.labels,
        annotations: m.annotations,
        owner_references: m.owner_references.into_iter().map(owner_from_pb).collect(),
        finalizers: m.finalizers,
        managed_fields: m
            .managed_fields
            .into_iter()
            .map(managed_from_pb)
            .collect::<Result<_, _>>()?,
    })
}

fn owner_to_pb(o: &OwnerReference) -> pb::OwnerReference {
    pb::OwnerReference {
        api_version: some(&o.api_version),
        kind: some(&o.kind),
        name: some(&o.name),
        uid: some(&o.uid),
        controller: o.controller,
        block_owner_deletion: o.block_owner_deletion,
    }
}

fn owner_from_pb(o: pb::OwnerReference) -> OwnerReference {
    OwnerReference {
        api_version: o.api_version.unwrap_or_default(),
        kind: o.kind.unwrap_or_default(),
        name: o.name.unwrap_or_default(),
        uid: o.uid.unwrap_or_default(),
        controller: o.controller,
        block_owner_deletion: o.block_owner_deletion,
    }
}

fn managed_to_pb(e: &ManagedFieldsEntry) -> pb::ManagedFieldsEntry {
    pb::ManagedFieldsEntry {
        manager: some(&e.manager),
        operation: some(&e.operation),
        api_version: some(&e.api_version),
        time: e.time.as_ref().map(time_to_pb),
        fields_type: some(&e.fields_type),
        fields_v1: e.fields_v1.as_ref().map(|v| pb::FieldsV1 {
            raw: Some(serde_json::to_vec(v).unwrap_or_default()),
        }),
        subresource: some(&e.subresource),
    }
}

fn managed_from_pb(e: pb::ManagedFieldsEntry) -> Result<ManagedFieldsEntry, Error> {
    let fields_v1 = match e.fields_v1.and_then(|f| f.raw) {
        Some(raw) if !raw.is_empty() => {
            Some(serde_json::from_slice(&raw).map_err(Error::FieldsV1)?)
        }
        _ => None,
    };
    Ok(ManagedFieldsEntry {
        manager: e.manager.unwrap_or_default(),
        operation: e.operation.unwrap_or_default(),
        api_version: e.api_version.unwrap_or_default(),
        time: e.time.as_ref().map(time_from_pb).transpose()?.flatten(),
        fields_type: e.fields_type.unwrap_or_default(),
        fields_v1,
        subresource: e.subresource.unwrap_or_default(),
    })
}

/// ListMeta → message.
pub fn list_meta_to_pb(m: &ListMeta) -> pb::ListMeta {
    pb::ListMeta {
        self_link: Some(String::new()),
        resource_version: some(&m.resource_version),
        r#continue: some(&m.continue_),
        remaining_item_count: m.remaining_item_count,
    }
}

/// Status → message.
pub fn status_to_pb(s: &Status) -> pb::Status {
    pb::Status {
        metadata: Some(list_meta_to_pb(&s.metadata)),
        status: some(&s.status),
        message: some(&s.message),
        reason: some(&s.reason),
        details: s.details.as_ref().map(|d| pb::StatusDetails {
            name: some(&d.name),
            group: some(&d.group),
            kind: some(&d.kind),
            uid: some(&d.uid),
            causes: d
                .causes
                .iter()
                .map(|c| pb::StatusCause {
                    reason: some(&c.reason),
                    message: some(&c.message),
                    field: some(&c.field),
                })
                .collect(),
            retry_after_seconds: Some(d.retry_after_seconds.unwrap_or_default()),
        }),
        code: Some(i32::from(s.code)),
    }
}
