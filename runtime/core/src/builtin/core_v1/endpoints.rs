//! Core `v1` Endpoints: the addresses behind a Service, written by hand
//! here (there is no endpoints controller), defaulted as
//! `SetDefaults_EndpointPort` and validated as `ValidateEndpoints`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::net::{
    ObjectReference, PROTOCOL_TCP, PROTOCOLS, port_num_errors, validate_dns1123_label, validate_ip,
    validate_non_special_ip, validate_qualified_name,
};
use crate::Resource;
use crate::meta::ObjectMeta;
use crate::resource::Strategy;
use crate::validation::{ErrorList, FieldError, FieldPath, is_dns1123_subdomain};

/// Endpoints is a collection of endpoints that implement the actual
/// service.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "",
    version = "v1",
    namespaced,
    kind = "Endpoints",
    plural = "endpoints",
    singular = "endpoints",
    short_names = ["ep"],
    openapi_name = "io.k8s.api.core.v1.Endpoints"
)]
pub struct Endpoints {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The set of all endpoints is the union of all subsets. Addresses are
    /// placed into subsets according to the IPs they share.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subsets: Vec<EndpointSubset>,
}

/// EndpointSubset is a group of addresses with a common set of ports. The
/// expanded set of endpoints is the Cartesian product of Addresses x Ports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSubset {
    /// IP addresses which offer the related ports that are marked as ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<EndpointAddress>,
    /// IP addresses which offer the related ports but are not currently
    /// marked as ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_ready_addresses: Vec<EndpointAddress>,
    /// Port numbers available on the related IP addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<EndpointPort>,
}

/// EndpointAddress is a tuple that describes single IP address.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointAddress {
    /// The IP of this endpoint.
    #[serde(default)]
    pub ip: String,
    /// The Hostname of this endpoint.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    /// Optional: Node hosting this endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Reference to object providing the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<ObjectReference>,
}

/// EndpointPort is a tuple that describes a single port.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPort {
    /// The name of this port. This must match the 'name' field in the
    /// corresponding ServicePort. Optional only if one port is defined.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The port number of the endpoint.
    #[serde(default)]
    pub port: i32,
    /// The IP protocol for this port. Must be UDP, TCP, or SCTP. Default is
    /// TCP.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// The application protocol for this port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
}

impl Strategy for Endpoints {
    /// `SetDefaults_EndpointPort`: protocol TCP.
    fn default_fields(&mut self) {
        for subset in &mut self.subsets {
            for port in &mut subset.ports {
                if port.protocol.is_empty() {
                    port.protocol = PROTOCOL_TCP.into();
                }
            }
        }
    }

    fn validate_create(&self) -> ErrorList {
        validate_endpoints(self)
    }

    fn validate_update(&self, _old: &Self) -> ErrorList {
        validate_endpoints(self)
    }

    fn allow_unconditional_update() -> bool {
        true
    }

    fn table_printer() -> Option<&'static crate::resource::TablePrinter> {
        Some(&crate::builtin::printers::ENDPOINTS)
    }
}

/// `ValidateEndpoints`.
pub fn validate_endpoints(endpoints: &Endpoints) -> ErrorList {
    let mut errs = ErrorList::default();
    let name = &endpoints.metadata.name;
    if !name.is_empty() {
        // `ValidateEndpointsName` is `NameIsDNSSubdomain`.
        for msg in is_dns1123_subdomain(name) {
            errs.push(FieldError::invalid("metadata.name", name.as_str(), msg));
        }
    }
    let subsets = FieldPath::new("subsets");
    for (i, subset) in endpoints.subsets.iter().enumerate() {
        let path = subsets.index(i);
        if subset.addresses.is_empty() && subset.not_ready_addresses.is_empty() {
            errs.push(FieldError::required(
                path.as_str(),
                "must specify `addresses` or `notReadyAddresses`",
            ));
        }
        for (j, address) in subset.addresses.iter().enumerate() {
            validate_address(&mut errs, address, &path.child("addresses").index(j));
        }
        for (j, address) in subset.not_ready_addresses.iter().enumerate() {
            validate_address(
                &mut errs,
                address,
                &path.child("notReadyAddresses").index(j),
            );
        }
        for (j, port) in subset.ports.iter().enumerate() {
            validate_port(
                &mut errs,
                port,
                subset.ports.len() > 1,
                &path.child("ports").index(j),
            );
        }
    }
    errs
}

/// `validateEndpointAddress`.
fn validate_address(errs: &mut ErrorList, address: &EndpointAddress, path: &FieldPath) {
    let ip_path = path.child("ip");
    validate_ip(errs, &ip_path, &address.ip);
    if !address.hostname.is_empty() {
        validate_dns1123_label(errs, &path.child("hostname"), &address.hostname);
    }
    if let Some(node) = &address.node_name {
        for msg in is_dns1123_subdomain(node) {
            errs.push(FieldError::invalid(
                path.child("nodeName").as_str(),
                node.as_str(),
                msg,
            ));
        }
    }
    validate_non_special_ip(errs, &ip_path, &address.ip);
}

/// `validateEndpointPort`.
fn validate_port(errs: &mut ErrorList, port: &EndpointPort, require_name: bool, path: &FieldPath) {
    let name_path = path.child("name");
    if require_name && port.name.is_empty() {
        errs.push(FieldError::required(name_path.as_str(), ""));
    } else if !port.name.is_empty() {
        validate_dns1123_label(errs, &name_path, &port.name);
    }
    for msg in port_num_errors(port.port.into()) {
        errs.push(FieldError::invalid(
            path.child("port").as_str(),
            port.port,
            msg,
        ));
    }
    let protocol_path = path.child("protocol");
    if port.protocol.is_empty() {
        errs.push(FieldError::required(protocol_path.as_str(), ""));
    } else if !PROTOCOLS.contains(&port.protocol.as_str()) {
        errs.push(FieldError::not_supported(
            protocol_path.as_str(),
            port.protocol.as_str(),
            &PROTOCOLS,
        ));
    }
    if let Some(app) = &port.app_protocol {
        validate_qualified_name(errs, &path.child("appProtocol"), app);
    }
}
