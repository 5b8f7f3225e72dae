//! `k8s.io.api.core.v1` messages of the built-in core kinds.

use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1::ListMeta;

use k8s_pb::apimachinery::pkg::util::intstr::IntOrString as PbIntOrString;

use super::{
    ByteString, ClientIPConfig, ConfigMap, EndpointAddress, EndpointPort, EndpointSubset,
    Endpoints, IntOrString, LoadBalancerIngress, LoadBalancerStatus, Namespace, NamespaceSpec,
    NamespaceStatus, ObjectReference, Secret, Service, ServicePort, ServiceSpec, ServiceStatus,
    SessionAffinityConfig,
};
use crate::protobuf::ProtobufKind;
use crate::protobuf::meta::{object_meta_from_pb, object_meta_to_pb};
use crate::scheme::DecodeError;

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

/// A string Go always writes (a non-pointer field).
fn text(s: &str) -> Option<String> {
    Some(s.to_string())
}

/// A field of the upstream message this server does not model: refused
/// rather than dropped, so nothing a client sent is silently lost.
fn unsupported(set: bool, field: &str) -> Result<(), crate::protobuf::Error> {
    if set {
        return Err(DecodeError::Invalid(format!("{field}: not supported by this server")).into());
    }
    Ok(())
}

fn int_or_string_to_pb(v: &IntOrString) -> PbIntOrString {
    match v {
        IntOrString::Int(i) => PbIntOrString {
            r#type: Some(0),
            int_val: Some(*i),
            str_val: Some(String::new()),
        },
        IntOrString::String(s) => PbIntOrString {
            r#type: Some(1),
            int_val: Some(0),
            str_val: Some(s.clone()),
        },
    }
}

fn int_or_string_from_pb(v: PbIntOrString) -> IntOrString {
    match v.r#type {
        Some(1) => IntOrString::String(v.str_val.unwrap_or_default()),
        _ => IntOrString::Int(v.int_val.unwrap_or_default()),
    }
}

impl ProtobufKind for Service {
    type Message = pb::Service;
    type List = pb::ServiceList;

    fn to_message(&self) -> pb::Service {
        let spec = &self.spec;
        pb::Service {
            metadata: Some(object_meta_to_pb(&self.metadata)),
            spec: Some(pb::ServiceSpec {
                ports: spec
                    .ports
                    .iter()
                    .map(|p| pb::ServicePort {
                        name: text(&p.name),
                        protocol: text(&p.protocol),
                        app_protocol: p.app_protocol.clone(),
                        port: Some(p.port),
                        target_port: p.target_port.as_ref().map(int_or_string_to_pb),
                        node_port: Some(p.node_port),
                    })
                    .collect(),
                selector: spec.selector.clone(),
                cluster_ip: text(&spec.cluster_ip),
                cluster_ips: spec.cluster_ips.clone(),
                r#type: text(&spec.type_),
                external_name: text(&spec.external_name),
                session_affinity: text(&spec.session_affinity),
                session_affinity_config: spec.session_affinity_config.as_ref().map(|c| {
                    pb::SessionAffinityConfig {
                        client_ip: c.client_ip.as_ref().map(|ip| pb::ClientIpConfig {
                            timeout_seconds: ip.timeout_seconds,
                        }),
                    }
                }),
                ip_families: spec.ip_families.clone(),
                ip_family_policy: spec.ip_family_policy.clone(),
                internal_traffic_policy: spec.internal_traffic_policy.clone(),
                external_traffic_policy: text(&spec.external_traffic_policy),
                publish_not_ready_addresses: spec.publish_not_ready_addresses,
                allocate_load_balancer_node_ports: spec.allocate_load_balancer_node_ports,
                health_check_node_port: Some(0),
                load_balancer_ip: text(""),
                ..Default::default()
            }),
            status: Some(pb::ServiceStatus {
                load_balancer: Some(pb::LoadBalancerStatus {
                    ingress: self
                        .status
                        .load_balancer
                        .ingress
                        .iter()
                        .map(|i| pb::LoadBalancerIngress {
                            ip: text(&i.ip),
                            hostname: text(&i.hostname),
                            ip_mode: i.ip_mode.clone(),
                            ports: Vec::new(),
                        })
                        .collect(),
                }),
                conditions: Vec::new(),
            }),
        }
    }

    fn from_message(m: pb::Service) -> Result<Self, crate::protobuf::Error> {
        let spec = m.spec.unwrap_or_default();
        unsupported(!spec.external_ips.is_empty(), "spec.externalIPs")?;
        unsupported(
            spec.load_balancer_ip
                .as_deref()
                .is_some_and(|s| !s.is_empty()),
            "spec.loadBalancerIP",
        )?;
        unsupported(
            !spec.load_balancer_source_ranges.is_empty(),
            "spec.loadBalancerSourceRanges",
        )?;
        unsupported(
            spec.health_check_node_port.is_some_and(|p| p != 0),
            "spec.healthCheckNodePort",
        )?;
        unsupported(spec.load_balancer_class.is_some(), "spec.loadBalancerClass")?;
        unsupported(
            spec.traffic_distribution.is_some(),
            "spec.trafficDistribution",
        )?;
        let status = m.status.unwrap_or_default();
        unsupported(!status.conditions.is_empty(), "status.conditions")?;
        let ingress = status.load_balancer.unwrap_or_default().ingress;
        unsupported(
            ingress.iter().any(|i| !i.ports.is_empty()),
            "status.loadBalancer.ingress.ports",
        )?;
        Ok(Service {
            metadata: object_meta_from_pb(m.metadata.unwrap_or_default())?,
            spec: ServiceSpec {
                ports: spec
                    .ports
                    .into_iter()
                    .map(|p| ServicePort {
                        name: p.name.unwrap_or_default(),
                        protocol: p.protocol.unwrap_or_default(),
                        app_protocol: p.app_protocol,
                        port: p.port.unwrap_or_default(),
                        target_port: p.target_port.map(int_or_string_from_pb),
                        node_port: p.node_port.unwrap_or_default(),
                    })
                    .collect(),
                selector: spec.selector,
                cluster_ip: spec.cluster_ip.unwrap_or_default(),
                cluster_ips: spec.cluster_ips,
                type_: spec.r#type.unwrap_or_default(),
                external_name: spec.external_name.unwrap_or_default(),
                session_affinity: spec.session_affinity.unwrap_or_default(),
                session_affinity_config: spec.session_affinity_config.map(|c| {
                    SessionAffinityConfig {
                        client_ip: c.client_ip.map(|ip| ClientIPConfig {
                            timeout_seconds: ip.timeout_seconds,
                        }),
                    }
                }),
                ip_families: spec.ip_families,
                ip_family_policy: spec.ip_family_policy,
                internal_traffic_policy: spec.internal_traffic_policy,
                external_traffic_policy: spec.external_traffic_policy.unwrap_or_default(),
                publish_not_ready_addresses: spec.publish_not_ready_addresses,
                allocate_load_balancer_node_ports: spec.allocate_load_balancer_node_ports,
            },
            status: ServiceStatus {
                load_balancer: LoadBalancerStatus {
                    ingress: ingress
                        .into_iter()
                        .map(|i| LoadBalancerIngress {
                            ip: i.ip.unwrap_or_default(),
                            hostname: i.hostname.unwrap_or_default(),
                            ip_mode: i.ip_mode,
                        })
                        .collect(),
                },
            },
        })
    }

    fn list_message(metadata: ListMeta, items: Vec<pb::Service>) -> pb::ServiceList {
        pb::ServiceList {
            metadata: Some(metadata),
            items,
        }
    }
}

fn address_to_pb(a: &EndpointAddress) -> pb::EndpointAddress {
    pb::EndpointAddress {
        ip: text(&a.ip),
        hostname: text(&a.hostname),
        node_name: a.node_name.clone(),
        target_ref: a.target_ref.as_ref().map(|r| pb::ObjectReference {
            kind: text(&r.kind),
            namespace: text(&r.namespace),
            name: text(&r.name),
            uid: text(&r.uid),
            api_version: text(&r.api_version),
            resource_version: text(&r.resource_version),
            field_path: text(&r.field_path),
        }),
    }
}

fn address_from_pb(a: pb::EndpointAddress) -> EndpointAddress {
    EndpointAddress {
        ip: a.ip.unwrap_or_default(),
        hostname: a.hostname.unwrap_or_default(),
        node_name: a.node_name,
        target_ref: a.target_ref.map(|r| ObjectReference {
            kind: r.kind.unwrap_or_default(),
            namespace: r.namespace.unwrap_or_default(),
            name: r.name.unwrap_or_default(),
            uid: r.uid.unwrap_or_default(),
            api_version: r.api_version.unwrap_or_default(),
            resource_version: r.resource_version.unwrap_or_default(),
            field_path: r.field_path.unwrap_or_default(),
        }),
    }
}

impl ProtobufKind for Endpoints {
    type Message = pb::Endpoints;
    type List = pb::EndpointsList;

    fn to_message(&self) -> pb::Endpoints {
        pb::Endpoints {
            metadata: Some(object_meta_to_pb(&self.metadata)),
            subsets: self
                .subsets
                .iter()
                .map(|s| pb::EndpointSubset {
                    addresses: s.addresses.iter().map(address_to_pb).collect(),
                    not_ready_addresses: s.not_ready_addresses.iter().map(address_to_pb).collect(),
                    ports: s
                        .ports
                        .iter()
                        .map(|p| pb::EndpointPort {
                            name: text(&p.name),
                            port: Some(p.port),
                            protocol: text(&p.protocol),
                            app_protocol: p.app_protocol.clone(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    fn from_message(m: pb::Endpoints) -> Result<Self, crate::protobuf::Error> {
        Ok(Endpoints {
            metadata: object_meta_from_pb(m.metadata.unwrap_or_default())?,
            subsets: m
                .subsets
                .into_iter()
                .map(|s| EndpointSubset {
                    addresses: s.addresses.into_iter().map(address_from_pb).collect(),
                    not_ready_addresses: s
                        .not_ready_addresses
                        .into_iter()
                        .map(address_from_pb)
                        .collect(),
                    ports: s
                        .ports
                        .into_iter()
                        .map(|p| EndpointPort {
                            name: p.name.unwrap_or_default(),
                            port: p.port.unwrap_or_default(),
                            protocol: p.protocol.unwrap_or_default(),
                            app_protocol: p.app_protocol,
                        })
                        .collect(),
                })
                .collect(),
        })
    }

    fn list_message(metadata: ListMeta, items: Vec<pb::Endpoints>) -> pb::EndpointsList {
        pb::EndpointsList {
            metadata: Some(metadata),
            items,
        }
    }
}
