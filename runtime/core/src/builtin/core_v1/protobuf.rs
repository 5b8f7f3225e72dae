//! `k8s.io.api.core.v1` messages of the built-in core kinds.

use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1::ListMeta;

use super::{ByteString, ConfigMap, Namespace, NamespaceSpec, NamespaceStatus, Secret};
use crate::protobuf::ProtobufKind;
use crate::protobuf::meta::{object_meta_from_pb, object_meta_to_pb};

impl ProtobufKind for Namespace {
    type Message = pb::Namespace;
    type List = pb::NamespaceList;

    fn to_message(&self) -> pb::Namespace {
        pb::Namespace {
            metadata: Some(object_meta_to_pb(&self.metadata)),
            spec: Some(pb::NamespaceSpec {
                finalizers: self.spec.finalizers.clone(),
            }),
            status: Some(pb::NamespaceStatus {
                phase: Some(self.status.phase.clone()),
                conditions: Vec::new(),
            }),
        }
    }

    fn from_message(m: pb::Namespace) -> Result<Self, crate::protobuf::Error> {
        Ok(Namespace {
            metadata: object_meta_from_pb(m.metadata.unwrap_or_default())?,
            spec: NamespaceSpec {
                finalizers: m.spec.unwrap_or_default().finalizers,
            },
            status: NamespaceStatus {
                phase: m.status.unwrap_or_default().phase.unwrap_or_default(),
            },
        })
    }

    fn list_message(metadata: ListMeta, items: Vec<pb::Namespace>) -> pb::NamespaceList {
        pb::NamespaceList {
            metadata: Some(metadata),
            items,
        }
    }
}

impl ProtobufKind for ConfigMap {
    type Message = pb::ConfigMap;
    type List = pb::ConfigMapList;

    fn to_message(&self) -> pb::ConfigMap {
        pb::ConfigMap {
            metadata: Some(object_meta_to_pb(&self.metadata)),
            immutable: self.immutable,
            data: self.data.clone(),
            binary_data: self
                .binary_data
                .iter()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect(),
        }
    }

    fn from_message(m: pb::ConfigMap) -> Result<Self, crate::protobuf::Error> {
        Ok(ConfigMap {
            metadata: object_meta_from_pb(m.metadata.unwrap_or_default())?,
            data: m.data,
            binary_data: m
                .binary_data
                .into_iter()
                .map(|(k, v)| (k, ByteString(v)))
                .collect(),
            immutable: m.immutable,
        })
    }

    fn list_message(metadata: ListMeta, items: Vec<pb::ConfigMap>) -> pb::ConfigMapList {
        pb::ConfigMapList {
            metadata: Some(metadata),
            items,
        }
    }
}

impl ProtobufKind for Secret {
    type Message = pb::Secret;
    type List = pb::SecretList;

    fn to_message(&self) -> pb::Secret {
        pb::Secret {
            metadata: Some(object_meta_to_pb(&self.metadata)),
            immutable: self.immutable,
            data: self
                .data
                .iter()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect(),
            string_data: self.string_data.clone(),
            r#type: Some(self.type_.clone()),
        }
    }

    fn from_message(m: pb::Secret) -> Result<Self, crate::protobuf::Error> {
        Ok(Secret {
            metadata: object_meta_from_pb(m.metadata.unwrap_or_default())?,
            data: m
                .data
                .into_iter()
                .map(|(k, v)| (k, ByteString(v)))
                .collect(),
            string_data: m.string_data,
            type_: m.r#type.unwrap_or_default(),
            immutable: m.immutable,
        })
    }

    fn list_message(metadata: ListMeta, items: Vec<pb::Secret>) -> pb::SecretList {
        pb::SecretList {
            metadata: Some(metadata),
            items,
        }
    }
}
