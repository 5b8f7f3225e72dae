//! `discovery.k8s.io/v1`: EndpointSlice, written by hand here (there is no
//! endpoint slice controller), defaulted as upstream's
//! `SetDefaults_EndpointPort` (name `""`, protocol TCP; endpoint
//! conditions have no defaults: an unset `ready` reads as ready) and
//! validated as `pkg/apis/discovery/validation`.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Resource;
use crate::builtin::core_v1::net::{
    ObjectReference, PROTOCOL_TCP, PROTOCOLS, validate_dns1123_label, validate_ip_of_family,
    validate_non_special_ip,
};
use crate::meta::ObjectMeta;
use crate::resource::Strategy;
use crate::scheme::{Group, KindBuilder, Scheme};
use crate::validation::{
    ErrorList, FieldError, FieldPath, is_dns1123_label, is_dns1123_subdomain, is_qualified_name,
    validate_labels,
};

/// The group name.
pub const GROUP: &str = "discovery.k8s.io";

/// The label naming the Service an EndpointSlice belongs to.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";

/// The address types a new slice may have (sorted).
const ADDRESS_TYPES: [&str; 3] = ["FQDN", "IPv4", "IPv6"];
/// What an update still accepts: the deprecated `IP` too.
const ADDRESS_TYPES_ON_UPDATE: [&str; 4] = ["FQDN", "IP", "IPv4", "IPv6"];
const MAX_ADDRESSES: usize = 100;
const MAX_PORTS: usize = 100;
const MAX_ENDPOINTS: usize = 1000;

/// Installs the group.
pub fn install(scheme: &mut Scheme) {
    scheme.add_group(
        Group::new(GROUP, &["v1"])
            .model_prefix("io.k8s.api.discovery")
            .title("Kubernetes")
            .kind(
                KindBuilder::<EndpointSlice>::new()
                    .version::<EndpointSlice>()
                    .build(),
            ),
    );
}

/// EndpointSlice represents a set of service endpoints. Most
/// EndpointSlices are created by the EndpointSlice controller to represent
/// the Pods selected by Service objects; here they are written by hand. The
/// `kubernetes.io/service-name` label names the Service.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "discovery.k8s.io",
    version = "v1",
    namespaced,
    openapi_name = "io.k8s.api.discovery.v1.EndpointSlice"
)]
pub struct EndpointSlice {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// addressType specifies the type of address carried by this
    /// EndpointSlice: IPv4, IPv6 or FQDN. Immutable.
    #[serde(default)]
    pub address_type: String,
    /// endpoints is a list of unique endpoints in this slice. Each slice
    /// may include a maximum of 1000 endpoints.
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
    /// ports specifies the list of network ports exposed by each endpoint
    /// in this slice. Each port must have a unique name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<EndpointPort>,
}

/// Endpoint represents a single logical "backend" implementing a service.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.api.discovery.v1.Endpoint")]
pub struct Endpoint {
    /// addresses of this endpoint, interpreted according to the slice's
    /// addressType. Must contain at least one address but no more than
    /// 100.
    #[serde(default)]
    pub addresses: Vec<String>,
    /// conditions contains information about the current status of the
    /// endpoint.
    #[serde(default)]
    pub conditions: EndpointConditions,
    /// hostname of this endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// targetRef is a reference to a Kubernetes object that represents
    /// this endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<ObjectReference>,
    /// nodeName represents the name of the Node hosting this endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// zone is the name of the Zone this endpoint exists in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// deprecatedTopology contains topology information part of the v1beta1
    /// API.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deprecated_topology: BTreeMap<String, String>,
}

/// EndpointConditions represents the current condition of an endpoint.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.api.discovery.v1.EndpointConditions")]
pub struct EndpointConditions {
    /// ready indicates that this endpoint is ready to receive traffic. A
    /// nil value should be interpreted as "true".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// serving indicates that this endpoint is able to receive traffic. A
    /// nil value should be interpreted as "true".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<bool>,
    /// terminating indicates that this endpoint is terminating. A nil value
    /// should be interpreted as "false".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating: Option<bool>,
}

/// EndpointPort represents a Port used by an EndpointSlice.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.api.discovery.v1.EndpointPort")]
pub struct EndpointPort {
    /// name represents the name of this port. All ports in an EndpointSlice
    /// must have a unique name. Defaults to "".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// protocol represents the IP protocol for this port. Must be UDP, TCP,
    /// or SCTP. Default is TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// port represents the port number of the endpoint. If the EndpointSlice
    /// is derived from a Kubernetes service, this must be set to the
    /// service's target port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// The application protocol for this port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
}

impl Strategy for EndpointSlice {
    /// `SetDefaults_EndpointPort`.
    fn default_fields(&mut self) {
        for port in &mut self.ports {
            port.name.get_or_insert_with(String::new);
            port.protocol.get_or_insert_with(|| PROTOCOL_TCP.into());
        }
    }

    fn validate_create(&self) -> ErrorList {
        validate_endpoint_slice(self, &ADDRESS_TYPES)
    }

    fn validate_update(&self, old: &Self) -> ErrorList {
        let mut errs = validate_endpoint_slice(self, &ADDRESS_TYPES_ON_UPDATE);
        if self.address_type != old.address_type {
            errs.push(FieldError::invalid(
                "addressType",
                self.address_type.as_str(),
                "field is immutable",
            ));
        }
        errs
    }

    fn allow_unconditional_update() -> bool {
        true
    }

    /// Upstream's strategy sets `generation` 1 on create and bumps it on
    /// every change.
    fn bump_generation_on_spec_change() -> bool {
        true
    }

    fn table_printer() -> Option<&'static crate::resource::TablePrinter> {
        Some(&super::printers::ENDPOINT_SLICE)
    }
}

/// `ValidateEndpointSlice`.
pub fn validate_endpoint_slice(slice: &EndpointSlice, address_types: &[&str]) -> ErrorList {
    let mut errs = ErrorList::default();
    let name = &slice.metadata.name;
    if !name.is_empty() {
        // `ValidateEndpointSliceName` is `NameIsDNSSubdomain`.
        for msg in is_dns1123_subdomain(name) {
            errs.push(FieldError::invalid("metadata.name", name.as_str(), msg));
        }
    }
    if slice.address_type.is_empty() {
        errs.push(FieldError::required("addressType", ""));
    } else if !address_types.contains(&slice.address_type.as_str()) {
        errs.push(FieldError::not_supported(
            "addressType",
            slice.address_type.as_str(),
            address_types,
        ));
    }
    validate_endpoints(&mut errs, &slice.endpoints, &slice.address_type);
    validate_ports(&mut errs, &slice.ports);
    errs
}

fn validate_endpoints(errs: &mut ErrorList, endpoints: &[Endpoint], address_type: &str) {
    let path = FieldPath::new("endpoints");
    if endpoints.len() > MAX_ENDPOINTS {
        errs.push(FieldError::too_many(
            path.as_str(),
            endpoints.len(),
            MAX_ENDPOINTS,
        ));
        return;
    }
    for (i, endpoint) in endpoints.iter().enumerate() {
        let idx = path.index(i);
        let addresses = idx.child("addresses");
        if endpoint.addresses.is_empty() {
            errs.push(FieldError::required(
                addresses.as_str(),
                "must contain at least 1 address",
            ));
        } else if endpoint.addresses.len() > MAX_ADDRESSES {
            errs.push(FieldError::too_many(
                addresses.as_str(),
                endpoint.addresses.len(),
                MAX_ADDRESSES,
            ));
        }
        for (j, address) in endpoint.addresses.iter().enumerate() {
            let at = addresses.index(j);
            match address_type {
                "IP" => super::core_v1::net::validate_ip(errs, &at, address),
                "IPv4" | "IPv6" => {
                    validate_ip_of_family(errs, &at, address, address_type == "IPv6");
                    validate_non_special_ip(errs, &at, address);
                }
                "FQDN" => validate_fqdn(errs, &at, address),
                _ => {}
            }
        }
        let topology = idx.child("deprecatedTopology");
        if endpoint.deprecated_topology.len() > 16 {
            errs.push(FieldError::too_many(
                topology.as_str(),
                endpoint.deprecated_topology.len(),
                16,
            ));
        }
        validate_labels(&endpoint.deprecated_topology, &topology, errs);
        if let Some(hostname) = &endpoint.hostname {
            validate_dns1123_label(errs, &idx.child("hostname"), hostname);
        }
    }
}

/// `IsFullyQualifiedDomainName`.
fn validate_fqdn(errs: &mut ErrorList, path: &FieldPath, value: &str) {
    if value.is_empty() {
        errs.push(FieldError::required(path.as_str(), ""));
        return;
    }
    let name = value.strip_suffix('.').unwrap_or(value);
    let msgs = is_dns1123_subdomain(name);
    if !msgs.is_empty() {
        errs.push(FieldError::invalid(path.as_str(), name, msgs.join(",")));
        return;
    }
    if name.split('.').count() < 2 {
        errs.push(FieldError::invalid(
            path.as_str(),
            name,
            "should be a domain with at least two segments separated by dots",
        ));
        return;
    }
    for label in name.split('.') {
        let msgs = is_dns1123_label(label);
        if !msgs.is_empty() {
            errs.push(FieldError::invalid(path.as_str(), label, msgs.join(",")));
            return;
        }
    }
}

fn validate_ports(errs: &mut ErrorList, ports: &[EndpointPort]) {
    let path = FieldPath::new("ports");
    if ports.len() > MAX_PORTS {
        errs.push(FieldError::too_many(path.as_str(), ports.len(), MAX_PORTS));
        return;
    }
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let idx = path.index(i);
        let name = port.name.as_deref().unwrap_or_default();
        if !name.is_empty() {
            validate_dns1123_label(errs, &idx.child("name"), name);
        }
        if !names.insert(name) {
            errs.push(FieldError::duplicate(idx.child("name").as_str(), name));
        }
        match &port.protocol {
            None => errs.push(FieldError::required(idx.child("protocol").as_str(), "")),
            Some(p) if !PROTOCOLS.contains(&p.as_str()) => {
                errs.push(FieldError::not_supported(
                    idx.child("protocol").as_str(),
                    p.as_str(),
                    &PROTOCOLS,
                ));
            }
            Some(_) => {}
        }
        if let Some(app) = &port.app_protocol {
            for msg in is_qualified_name(app) {
                errs.push(FieldError::invalid(
                    idx.child("appProtocol").as_str(),
                    app.as_str(),
                    msg,
                ));
            }
        }
    }
}
