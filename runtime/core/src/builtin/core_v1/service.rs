//! Core `v1` Service: upstream's fields that matter without a proxy
//! (ports, selector, cluster IPs, type, external name, session affinity,
//! IP families, traffic policies), defaulted as `SetDefaults_Service`,
//! prepared as the Service strategy and REST storage prepare it, and
//! validated as `ValidateService` / `ValidateServiceUpdate`.
//!
//! There is no IP or node-port allocator: `clusterIP` stays what the user
//! gave (empty, `None` or an address; `clusterIPs` follows it) and node
//! ports stay what the user gave (0 = none). See [`Service`].

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::net::{
    PROTOCOL_TCP, PROTOCOLS, parse_ip, port_name_errors, port_num_errors, validate_dns1123_label,
    validate_ip, validate_qualified_name,
};
use crate::meta::ObjectMeta;
use crate::resource::Strategy;
use crate::validation::{
    ErrorList, FieldError, FieldPath, is_dns1035_label, is_dns1123_subdomain, validate_labels,
};
use crate::{Resource, Validate};

/// `type: ClusterIP`.
pub const TYPE_CLUSTER_IP: &str = "ClusterIP";
/// `type: NodePort`.
pub const TYPE_NODE_PORT: &str = "NodePort";
/// `type: LoadBalancer`.
pub const TYPE_LOAD_BALANCER: &str = "LoadBalancer";
/// `type: ExternalName`.
pub const TYPE_EXTERNAL_NAME: &str = "ExternalName";
/// The `clusterIP` of a headless service.
pub const CLUSTER_IP_NONE: &str = "None";

const TYPES: [&str; 4] = [
    TYPE_CLUSTER_IP,
    TYPE_EXTERNAL_NAME,
    TYPE_LOAD_BALANCER,
    TYPE_NODE_PORT,
];
const SESSION_AFFINITIES: [&str; 2] = ["ClientIP", "None"];
const TRAFFIC_POLICIES: [&str; 2] = ["Cluster", "Local"];
const IP_FAMILIES: [&str; 2] = ["IPv4", "IPv6"];
const IP_FAMILY_POLICIES: [&str; 3] = ["PreferDualStack", "RequireDualStack", "SingleStack"];
/// `DefaultClientIPServiceAffinitySeconds`.
const DEFAULT_AFFINITY_SECONDS: i32 = 10800;
/// `MaxClientIPServiceAffinitySeconds`.
const MAX_AFFINITY_SECONDS: i32 = 86400;

/// Service is a named abstraction of software service (for example, mysql)
/// consisting of local port (for example 3306) that the proxy listens on,
/// and the selector that determines which pods will answer requests sent
/// through the proxy.
///
/// This server has no IP allocator and no proxy: `spec.clusterIP` is kept
/// as the client sent it (an address, `None`, or empty) and never
/// allocated; node ports are never allocated either.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "",
    version = "v1",
    namespaced,
    short_names = ["svc"],
    categories = ["all"],
    subresource_status,
    openapi_name = "io.k8s.api.core.v1.Service"
)]
pub struct Service {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Spec defines the behavior of a service.
    #[serde(default)]
    pub spec: ServiceSpec,
    /// Most recently observed status of the service. Populated by the
    /// system. Read-only.
    #[serde(default)]
    pub status: ServiceStatus,
}

/// ServiceSpec describes the attributes that a user creates on a service.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// The list of ports that are exposed by this service.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[validate(
        list_type = "map",
        list_map_keys = ["port", "protocol"],
        patch_strategy = "merge",
        patch_merge_key = "port"
    )]
    pub ports: Vec<ServicePort>,
    /// Route service traffic to pods with label keys and values matching
    /// this selector. If empty or not present, the service is assumed to
    /// have an external process managing its endpoints.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub selector: BTreeMap<String, String>,
    /// clusterIP is the IP address of the service. `None` makes a headless
    /// service. This server does not allocate addresses: the value is
    /// kept as given.
    #[serde(
        default,
        rename = "clusterIP",
        skip_serializing_if = "String::is_empty"
    )]
    pub cluster_ip: String,
    /// ClusterIPs is a list of IP addresses assigned to this service; its
    /// first value is `clusterIP`.
    #[serde(default, rename = "clusterIPs", skip_serializing_if = "Vec::is_empty")]
    pub cluster_ips: Vec<String>,
    /// type determines how the Service is exposed. Defaults to ClusterIP.
    /// Valid options are ExternalName, ClusterIP, NodePort, and
    /// LoadBalancer.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// externalName is the external reference that discovery mechanisms
    /// will return as an alias for this service (e.g. a DNS CNAME record).
    /// Must be a lowercase RFC-1123 hostname and requires `type` to be
    /// "ExternalName".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub external_name: String,
    /// Supports "ClientIP" and "None". Used to maintain session affinity.
    /// Defaults to None.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session_affinity: String,
    /// sessionAffinityConfig contains the configurations of session
    /// affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity_config: Option<SessionAffinityConfig>,
    /// IPFamilies is a list of IP families (e.g. IPv4, IPv6) assigned to
    /// this service.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_families: Vec<String>,
    /// IPFamilyPolicy represents the dual-stack-ness requested or required
    /// by this Service: SingleStack, PreferDualStack or RequireDualStack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_family_policy: Option<String>,
    /// InternalTrafficPolicy describes how nodes distribute service
    /// traffic they receive on the ClusterIP: Cluster or Local.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_traffic_policy: Option<String>,
    /// externalTrafficPolicy describes how nodes distribute service traffic
    /// they receive on one of the Service's "externally-facing" addresses
    /// (NodePorts, ExternalIPs, and LoadBalancer IPs): Cluster or Local.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub external_traffic_policy: String,
    /// publishNotReadyAddresses indicates that any agent which deals with
    /// endpoints for this Service should disregard any indications of
    /// ready/not-ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish_not_ready_addresses: Option<bool>,
    /// allocateLoadBalancerNodePorts defines if NodePorts will be
    /// automatically allocated for services with type LoadBalancer.
    /// Default is "true".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocate_load_balancer_node_ports: Option<bool>,
}

/// ServicePort contains information on service's port.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    /// The name of this port within the service. This must be a DNS_LABEL.
    /// All ports within a ServiceSpec must have unique names. Optional if
    /// only one ServicePort is defined on this service.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The IP protocol for this port. Supports "TCP", "UDP", and "SCTP".
    /// Default is TCP.
    // The published default lets server-side apply key the ports list by
    // port and protocol, as upstream's schema does.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[validate(default = "TCP")]
    pub protocol: String,
    /// The application protocol for this port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
    /// The port that will be exposed by this service.
    #[serde(default)]
    pub port: i32,
    /// Number or name of the port to access on the pods targeted by the
    /// service. Defaults to the value of the 'port' field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<IntOrString>,
    /// The port on each node on which this service is exposed when type is
    /// NodePort or LoadBalancer. Never allocated by this server.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub node_port: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// IntOrString is a type that can hold an int32 or a string.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IntOrString {
    /// A number.
    Int(i32),
    /// A string.
    String(String),
}

impl Default for IntOrString {
    fn default() -> Self {
        IntOrString::Int(0)
    }
}

impl JsonSchema for IntOrString {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "IntOrString is a type that can hold an int32 or a string.  When used in JSON or YAML marshalling and unmarshalling, it produces or consumes the inner type.  This allows you to have, for example, a JSON field that can accept a name or number.",
            "type": "string",
            "format": "int-or-string"
        })
    }
}

/// SessionAffinityConfig represents the configurations of session
/// affinity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionAffinityConfig {
    /// clientIP contains the configurations of Client IP based session
    /// affinity.
    #[serde(default, rename = "clientIP", skip_serializing_if = "Option::is_none")]
    pub client_ip: Option<ClientIPConfig>,
}

/// ClientIPConfig represents the configurations of Client IP based session
/// affinity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientIPConfig {
    /// timeoutSeconds specifies the seconds of ClientIP type session sticky
    /// time: 0 < value <= 86400 (1 day). Default value is 10800 (3 hours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
}

/// ServiceStatus represents the current status of a service.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    /// LoadBalancer contains the current status of the load-balancer, if
    /// one is present.
    #[serde(default)]
    pub load_balancer: LoadBalancerStatus,
}

/// LoadBalancerStatus represents the status of a load-balancer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerStatus {
    /// Ingress is a list containing ingress points for the load-balancer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ingress: Vec<LoadBalancerIngress>,
}

/// LoadBalancerIngress represents the status of a load-balancer ingress
/// point: traffic intended for the service should be sent to an ingress
/// point.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerIngress {
    /// IP is set for load-balancer ingress points that are IP based.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ip: String,
    /// Hostname is set for load-balancer ingress points that are DNS based.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    /// IPMode specifies how the load-balancer IP behaves: VIP or Proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_mode: Option<String>,
}

impl ServiceSpec {
    /// `ExternallyAccessible` (there are no `externalIPs` here).
    fn externally_accessible(&self) -> bool {
        self.type_ == TYPE_LOAD_BALANCER || self.type_ == TYPE_NODE_PORT
    }

    /// `isHeadlessService`.
    pub fn is_headless(&self) -> bool {
        self.cluster_ips.len() == 1 && self.cluster_ips[0] == CLUSTER_IP_NONE
    }

    /// The types that have a cluster IP.
    fn is_cluster_ip_like(&self) -> bool {
        [TYPE_CLUSTER_IP, TYPE_NODE_PORT, TYPE_LOAD_BALANCER].contains(&self.type_.as_str())
    }
}

/// `SetDefaults_Service` on a spec.
fn set_defaults(spec: &mut ServiceSpec) {
    if spec.session_affinity.is_empty() {
        spec.session_affinity = "None".into();
    }
    if spec.session_affinity == "None" {
        spec.session_affinity_config = None;
    }
    if spec.session_affinity == "ClientIP"
        && spec
            .session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .is_none()
    {
        spec.session_affinity_config = Some(SessionAffinityConfig {
            client_ip: Some(ClientIPConfig {
                timeout_seconds: Some(DEFAULT_AFFINITY_SECONDS),
            }),
        });
    }
    if spec.type_.is_empty() {
        spec.type_ = TYPE_CLUSTER_IP.into();
    }
    for port in &mut spec.ports {
        if port.protocol.is_empty() {
            port.protocol = PROTOCOL_TCP.into();
        }
        let unset = match &port.target_port {
            None => true,
            Some(IntOrString::Int(0)) => true,
            Some(IntOrString::String(s)) => s.is_empty(),
            Some(IntOrString::Int(_)) => false,
        };
        if unset {
            port.target_port = Some(IntOrString::Int(port.port));
        }
    }
    if spec.externally_accessible() && spec.external_traffic_policy.is_empty() {
        spec.external_traffic_policy = "Cluster".into();
    }
    if spec.internal_traffic_policy.is_none() && spec.is_cluster_ip_like() {
        spec.internal_traffic_policy = Some("Cluster".into());
    }
    if spec.type_ == TYPE_LOAD_BALANCER && spec.allocate_load_balancer_node_ports.is_none() {
        spec.allocate_load_balancer_node_ports = Some(true);
    }
}

/// The IP family of an address.
fn family_of(ip: &str) -> Option<&'static str> {
    match parse_ip(ip)? {
        std::net::IpAddr::V4(_) => Some("IPv4"),
        std::net::IpAddr::V6(_) => Some("IPv6"),
    }
}

impl ServiceSpec {
    /// The create half of `normalizeClusterIPs`: a client that set only
    /// `clusterIP` gets `clusterIPs` from it (never the other way round).
    fn normalize_cluster_ips_on_create(&mut self) {
        if !self.cluster_ip.is_empty() && self.cluster_ips.is_empty() {
            self.cluster_ips = vec![self.cluster_ip.clone()];
        }
    }

    /// The update half of `normalizeClusterIPs`: when only the singular
    /// field changed, the plural follows it.
    fn normalize_cluster_ips_on_update(&mut self, old: &ServiceSpec) {
        let same_plural = self.cluster_ips == old.cluster_ips;
        if !old.cluster_ip.is_empty() && self.cluster_ip.is_empty() {
            if same_plural {
                self.cluster_ips.clear();
            }
            return;
        }
        if self.cluster_ip != old.cluster_ip && same_plural {
            self.cluster_ips = vec![self.cluster_ip.clone()];
        }
    }

    /// What the IP allocator's `initIPFamilyFields` settles without
    /// allocating: the policy (SingleStack unless two addresses or
    /// families were asked for; RequireDualStack for a headless service
    /// without selector, as upstream) and the families of the given
    /// addresses (IPv4, the primary family of a single-stack cluster, when
    /// no address tells).
    fn init_ip_families(&mut self) {
        if !self.is_cluster_ip_like() {
            return;
        }
        let headless = self.is_headless();
        if headless && self.selector.is_empty() && self.ip_family_policy.is_none() {
            self.ip_family_policy = Some("RequireDualStack".into());
            if self.ip_families.is_empty() {
                self.ip_families = vec!["IPv4".into(), "IPv6".into()];
            }
            return;
        }
        if self.ip_families.is_empty() {
            self.ip_families = self
                .cluster_ips
                .iter()
                .filter_map(|ip| family_of(ip))
                .map(str::to_string)
                .collect();
            if self.ip_families.is_empty() {
                self.ip_families = vec!["IPv4".into()];
            }
        }
        if self.ip_family_policy.is_none()
            && self.cluster_ips.len() < 2
            && self.ip_families.len() < 2
        {
            self.ip_family_policy = Some("SingleStack".into());
        }
    }

    /// `patchAllocatedValues`: an update that omits what the old object
    /// had settled (cluster IPs, IP families and policy) keeps the old
    /// values while the type still uses them.
    fn keep_settled_values(&mut self, old: &ServiceSpec) {
        if !(self.is_cluster_ip_like() && old.is_cluster_ip_like()) {
            return;
        }
        if self.cluster_ip.is_empty() {
            self.cluster_ip = old.cluster_ip.clone();
        }
        if self.cluster_ips.is_empty() && self.cluster_ip == old.cluster_ip {
            self.cluster_ips = old.cluster_ips.clone();
        }
        if self.ip_family_policy.is_none() {
            self.ip_family_policy = old.ip_family_policy.clone();
        }
        if self.ip_families.is_empty() {
            self.ip_families = old.ip_families.clone();
        }
    }

    /// `dropTypeDependentFields`: fields the new type does not use are
    /// cleared when the client left them as they were.
    fn drop_type_dependent_fields(&mut self, old: &ServiceSpec) {
        if self.type_ == old.type_ {
            return;
        }
        if self.type_ == TYPE_EXTERNAL_NAME {
            if self.cluster_ip == old.cluster_ip {
                self.cluster_ip.clear();
            }
            if self.cluster_ips == old.cluster_ips {
                self.cluster_ips.clear();
            }
            if self.ip_families == old.ip_families {
                self.ip_families.clear();
            }
            if self.ip_family_policy == old.ip_family_policy {
                self.ip_family_policy = None;
            }
        }
        if self.type_ == TYPE_CLUSTER_IP || self.type_ == TYPE_EXTERNAL_NAME {
            for (i, port) in self.ports.iter_mut().enumerate() {
                if old
                    .ports
                    .get(i)
                    .is_some_and(|o| o.node_port == port.node_port)
                {
                    port.node_port = 0;
                }
            }
        }
        if !self.externally_accessible()
            && self.external_traffic_policy == old.external_traffic_policy
        {
            self.external_traffic_policy.clear();
        }
        if self.type_ != TYPE_LOAD_BALANCER
            && self.allocate_load_balancer_node_ports == old.allocate_load_balancer_node_ports
        {
            self.allocate_load_balancer_node_ports = None;
        }
    }
}

impl Strategy for Service {
    fn default_fields(&mut self) {
        set_defaults(&mut self.spec);
    }

    fn prepare_for_create(&mut self) {
        self.spec.normalize_cluster_ips_on_create();
        self.spec.init_ip_families();
    }

    fn prepare_for_update(&mut self, old: &Self) {
        self.spec.keep_settled_values(&old.spec);
        self.spec.normalize_cluster_ips_on_update(&old.spec);
        self.spec.drop_type_dependent_fields(&old.spec);
        self.spec.init_ip_families();
    }

    fn validate_create(&self) -> ErrorList {
        validate_service(self)
    }

    fn validate_update(&self, old: &Self) -> ErrorList {
        let mut errs = validate_upgrade_downgrade_cluster_ips(&old.spec, &self.spec);
        errs.extend(validate_upgrade_downgrade_ip_families(
            &old.spec, &self.spec,
        ));
        errs.extend(validate_service(self));
        errs
    }

    fn allow_unconditional_update() -> bool {
        true
    }

    /// Services carry no `metadata.generation` upstream.
    fn bump_generation_on_spec_change() -> bool {
        false
    }

    fn table_printer() -> Option<&'static crate::resource::TablePrinter> {
        Some(&crate::builtin::printers::SERVICE)
    }
}

/// `ValidateService` (upstream's checks of the fields this type has).
pub fn validate_service(service: &Service) -> ErrorList {
    let mut errs = ErrorList::default();
    let name = &service.metadata.name;
    if !name.is_empty() {
        // `ValidateServiceName` is `NameIsDNS1035Label`.
        for msg in is_dns1035_label(name) {
            errs.push(FieldError::invalid("metadata.name", name.as_str(), msg));
        }
    }
    let spec_path = FieldPath::new("spec");
    let spec = &service.spec;
    let ports_path = spec_path.child("ports");
    if spec.ports.is_empty() && !spec.is_headless() && spec.type_ != TYPE_EXTERNAL_NAME {
        errs.push(FieldError::required(ports_path.as_str(), ""));
    }
    let cluster_ips_path = spec_path.child("clusterIPs");
    match spec.type_.as_str() {
        TYPE_LOAD_BALANCER | TYPE_NODE_PORT if spec.is_headless() => {
            errs.push(FieldError::invalid(
                cluster_ips_path.index(0).as_str(),
                spec.cluster_ips[0].as_str(),
                format!("may not be set to 'None' for {} services", spec.type_),
            ));
        }
        TYPE_EXTERNAL_NAME => {
            let forbidden = "may not be set for ExternalName services";
            if !spec.cluster_ips.is_empty() {
                errs.push(FieldError::forbidden(cluster_ips_path.as_str(), forbidden));
            }
            if !spec.ip_families.is_empty() {
                errs.push(FieldError::forbidden(
                    spec_path.child("ipFamilies").as_str(),
                    forbidden,
                ));
            }
            if spec.ip_family_policy.is_some() {
                errs.push(FieldError::forbidden(
                    spec_path.child("ipFamilyPolicy").as_str(),
                    forbidden,
                ));
            }
            // A CNAME may end with a dot (fully qualified).
            let cname = spec
                .external_name
                .strip_suffix('.')
                .unwrap_or(&spec.external_name);
            let path = spec_path.child("externalName");
            if cname.is_empty() {
                errs.push(FieldError::required(path.as_str(), ""));
            } else {
                for msg in is_dns1123_subdomain(cname) {
                    errs.push(FieldError::invalid(path.as_str(), cname, msg));
                }
            }
        }
        _ => {}
    }

    let mut names = BTreeSet::new();
    for (i, port) in spec.ports.iter().enumerate() {
        validate_service_port(
            &mut errs,
            port,
            spec.ports.len() > 1,
            &mut names,
            &ports_path.index(i),
        );
    }

    if !spec.selector.is_empty() {
        validate_labels(&spec.selector, &spec_path.child("selector"), &mut errs);
    }

    let affinity_path = spec_path.child("sessionAffinity");
    if spec.session_affinity.is_empty() {
        errs.push(FieldError::required(affinity_path.as_str(), ""));
    } else if !SESSION_AFFINITIES.contains(&spec.session_affinity.as_str()) {
        errs.push(FieldError::not_supported(
            affinity_path.as_str(),
            spec.session_affinity.as_str(),
            &SESSION_AFFINITIES,
        ));
    }
    let config_path = spec_path.child("sessionAffinityConfig");
    if spec.session_affinity == "ClientIP" {
        validate_client_ip_affinity(
            &mut errs,
            spec.session_affinity_config.as_ref(),
            &config_path,
        );
    } else if spec.session_affinity == "None" && spec.session_affinity_config.is_some() {
        errs.push(FieldError::forbidden(
            config_path.as_str(),
            "must not be set when session affinity is None",
        ));
    }

    errs.extend(validate_cluster_ips_related_fields(spec));

    let type_path = spec_path.child("type");
    if spec.type_.is_empty() {
        errs.push(FieldError::required(type_path.as_str(), ""));
    } else if !TYPES.contains(&spec.type_.as_str()) {
        errs.push(FieldError::not_supported(
            type_path.as_str(),
            spec.type_.as_str(),
            &TYPES,
        ));
    }

    if spec.type_ == TYPE_CLUSTER_IP {
        for (i, port) in spec.ports.iter().enumerate() {
            if port.node_port != 0 {
                errs.push(FieldError::forbidden(
                    ports_path.index(i).child("nodePort").as_str(),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            }
        }
    }

    // Duplicate node ports and ports, by (protocol, number).
    let mut node_ports = BTreeSet::new();
    for (i, port) in spec.ports.iter().enumerate() {
        if port.node_port != 0 && !node_ports.insert((port.protocol.as_str(), port.node_port)) {
            errs.push(FieldError::duplicate(
                ports_path.index(i).child("nodePort").as_str(),
                port.node_port,
            ));
        }
    }
    let mut ports = BTreeSet::new();
    for (i, port) in spec.ports.iter().enumerate() {
        if !ports.insert((port.protocol.as_str(), port.port)) {
            // Upstream prints the `ServicePort` key with Go syntax; the
            // key's two fields are shown here as JSON.
            errs.push(FieldError::duplicate(
                ports_path.index(i).as_str(),
                serde_json::json!({"port": port.port, "protocol": port.protocol}),
            ));
        }
    }

    if spec.allocate_load_balancer_node_ports.is_some() && spec.type_ != TYPE_LOAD_BALANCER {
        errs.push(FieldError::forbidden(
            spec_path.child("allocateLoadBalancerNodePorts").as_str(),
            "may only be used when `type` is 'LoadBalancer'",
        ));
    }
    if spec.type_ == TYPE_LOAD_BALANCER && spec.allocate_load_balancer_node_ports.is_none() {
        // Upstream reports this one at the root (`allocateLoadBalancerNodePorts`).
        errs.push(FieldError::required("allocateLoadBalancerNodePorts", ""));
    }

    // `validateServiceExternalTrafficPolicy` (no health check node port:
    // it is never allocated here).
    let etp_path = spec_path.child("externalTrafficPolicy");
    if !spec.externally_accessible() {
        if !spec.external_traffic_policy.is_empty() {
            errs.push(FieldError::invalid(
                etp_path.as_str(),
                spec.external_traffic_policy.as_str(),
                "may only be set for externally-accessible services",
            ));
        }
    } else if spec.external_traffic_policy.is_empty() {
        errs.push(FieldError::required(etp_path.as_str(), ""));
    } else if !TRAFFIC_POLICIES.contains(&spec.external_traffic_policy.as_str()) {
        errs.push(FieldError::not_supported(
            etp_path.as_str(),
            spec.external_traffic_policy.as_str(),
            &TRAFFIC_POLICIES,
        ));
    }

    // `validateServiceInternalTrafficFieldsValue`.
    let itp_path = spec_path.child("internalTrafficPolicy");
    match &spec.internal_traffic_policy {
        None if spec.is_cluster_ip_like() => {
            errs.push(FieldError::required(itp_path.as_str(), ""));
        }
        Some(p) if !TRAFFIC_POLICIES.contains(&p.as_str()) => {
            errs.push(FieldError::not_supported(
                itp_path.as_str(),
                p.as_str(),
                &TRAFFIC_POLICIES,
            ));
        }
        _ => {}
    }
    errs
}

/// `validateServicePort`.
fn validate_service_port<'a>(
    errs: &mut ErrorList,
    port: &'a ServicePort,
    require_name: bool,
    names: &mut BTreeSet<&'a str>,
    path: &FieldPath,
) {
    let name_path = path.child("name");
    if require_name && port.name.is_empty() {
        errs.push(FieldError::required(name_path.as_str(), ""));
    } else if !port.name.is_empty() {
        validate_dns1123_label(errs, &name_path, &port.name);
        if !names.insert(&port.name) {
            errs.push(FieldError::duplicate(
                name_path.as_str(),
                port.name.as_str(),
            ));
        }
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
    // `ValidatePortNumOrName`.
    let target_path = path.child("targetPort");
    match &port.target_port {
        Some(IntOrString::Int(n)) => {
            for msg in port_num_errors((*n).into()) {
                errs.push(FieldError::invalid(target_path.as_str(), *n, msg));
            }
        }
        Some(IntOrString::String(s)) => {
            for msg in port_name_errors(s) {
                errs.push(FieldError::invalid(target_path.as_str(), s.as_str(), msg));
            }
        }
        None => {
            for msg in port_num_errors(0) {
                errs.push(FieldError::invalid(target_path.as_str(), 0, msg));
            }
        }
    }
    if let Some(app) = &port.app_protocol {
        validate_qualified_name(errs, &path.child("appProtocol"), app);
    }
}

/// `validateClientIPAffinityConfig`.
fn validate_client_ip_affinity(
    errs: &mut ErrorList,
    config: Option<&SessionAffinityConfig>,
    path: &FieldPath,
) {
    let when = "when session affinity type is ClientIP";
    let Some(config) = config else {
        errs.push(FieldError::required(path.as_str(), when));
        return;
    };
    let Some(client_ip) = &config.client_ip else {
        errs.push(FieldError::required(path.child("clientIP").as_str(), when));
        return;
    };
    let timeout_path = path.child("clientIP").child("timeoutSeconds");
    match client_ip.timeout_seconds {
        None => errs.push(FieldError::required(timeout_path.as_str(), when)),
        Some(t) if t <= 0 || t > MAX_AFFINITY_SECONDS => errs.push(FieldError::invalid(
            timeout_path.as_str(),
            t,
            format!("must be greater than 0 and less than {MAX_AFFINITY_SECONDS}"),
        )),
        Some(_) => {}
    }
}

/// `ValidateServiceClusterIPsRelatedFields`.
fn validate_cluster_ips_related_fields(spec: &ServiceSpec) -> ErrorList {
    let mut errs = ErrorList::default();
    if spec.type_ == TYPE_EXTERNAL_NAME {
        return errs;
    }
    let spec_path = FieldPath::new("spec");
    let ips_path = spec_path.child("clusterIPs");
    let families_path = spec_path.child("ipFamilies");
    let ips_value = || serde_json::json!(spec.cluster_ips);
    if !spec.cluster_ip.is_empty() {
        if spec.cluster_ips.is_empty() {
            errs.push(FieldError::required(ips_path.as_str(), ""));
        } else if spec.cluster_ips[0] != spec.cluster_ip {
            errs.push(FieldError::invalid(
                ips_path.as_str(),
                ips_value(),
                "first value must match `clusterIP`",
            ));
        }
    } else if !spec.cluster_ips.is_empty() {
        errs.push(FieldError::invalid(
            ips_path.as_str(),
            ips_value(),
            "must be empty when `clusterIP` is not specified",
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, family) in spec.ip_families.iter().enumerate() {
        if !IP_FAMILIES.contains(&family.as_str()) {
            errs.push(FieldError::not_supported(
                families_path.index(i).as_str(),
                family.as_str(),
                &IP_FAMILIES,
            ));
        }
        if !seen.insert(family.as_str()) {
            errs.push(FieldError::duplicate(
                families_path.index(i).as_str(),
                family.as_str(),
            ));
        }
    }
    if let Some(policy) = &spec.ip_family_policy
        && !IP_FAMILY_POLICIES.contains(&policy.as_str())
    {
        errs.push(FieldError::not_supported(
            spec_path.child("ipFamilyPolicy").as_str(),
            policy.as_str(),
            &IP_FAMILY_POLICIES,
        ));
    }
    let mut invalid_ips = false;
    for (i, ip) in spec.cluster_ips.iter().enumerate() {
        if i == 0 && ip == CLUSTER_IP_NONE {
            if spec.cluster_ips.len() > 1 {
                invalid_ips = true;
                errs.push(FieldError::invalid(
                    ips_path.as_str(),
                    ips_value(),
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        let before = errs.len();
        validate_ip(&mut errs, &ips_path.index(i), ip);
        invalid_ips |= errs.len() != before;
    }
    if spec.cluster_ips.len() > 2 {
        errs.push(FieldError::invalid(
            ips_path.as_str(),
            ips_value(),
            "may only hold up to 2 values",
        ));
    }
    if invalid_ips {
        return errs;
    }
    if spec.cluster_ips.len() > 1 {
        let families: BTreeSet<_> = spec.cluster_ips.iter().map(|ip| family_of(ip)).collect();
        if families.len() != spec.cluster_ips.len() {
            errs.push(FieldError::invalid(
                ips_path.as_str(),
                ips_value(),
                "may specify no more than one IP for each IP family",
            ));
        }
    }
    if !spec.is_headless() {
        for (i, (ip, family)) in spec.cluster_ips.iter().zip(&spec.ip_families).enumerate() {
            let actual = family_of(ip);
            if family == "IPv4" && actual == Some("IPv6") {
                errs.push(FieldError::invalid(
                    ips_path.index(i).as_str(),
                    ip.as_str(),
                    format!("expected an IPv4 value as indicated by `ipFamilies[{i}]`"),
                ));
            }
            if family == "IPv6" && actual != Some("IPv6") {
                errs.push(FieldError::invalid(
                    ips_path.index(i).as_str(),
                    ip.as_str(),
                    format!("expected an IPv6 value as indicated by `ipFamilies[{i}]`"),
                ));
            }
        }
    }
    errs
}

/// `validateUpgradeDowngradeClusterIPs`.
fn validate_upgrade_downgrade_cluster_ips(old: &ServiceSpec, new: &ServiceSpec) -> ErrorList {
    let mut errs = ErrorList::default();
    if new.type_ == TYPE_EXTERNAL_NAME || old.type_ == TYPE_EXTERNAL_NAME {
        return errs;
    }
    if old.is_headless() && new.is_headless() {
        return errs;
    }
    let path = FieldPath::new("spec").child("clusterIPs");
    let value = || serde_json::json!(new.cluster_ips);
    let changed = "may not change once set";
    use std::cmp::Ordering;
    match old.cluster_ips.len().cmp(&new.cluster_ips.len()) {
        Ordering::Equal => {
            for (i, ip) in old.cluster_ips.iter().enumerate() {
                if *ip != new.cluster_ips[i] {
                    errs.push(FieldError::invalid(
                        path.index(i).as_str(),
                        value(),
                        changed,
                    ));
                }
            }
        }
        Ordering::Greater => {
            if new.cluster_ips.is_empty() {
                errs.push(FieldError::invalid(
                    path.index(0).as_str(),
                    value(),
                    "primary clusterIP can not be unset",
                ));
            }
            if !new.cluster_ips.is_empty() && new.cluster_ips[0] != old.cluster_ips[0] {
                errs.push(FieldError::invalid(
                    path.index(0).as_str(),
                    value(),
                    changed,
                ));
            }
            if new.cluster_ips.len() == 1 && new.ip_family_policy.as_deref() != Some("SingleStack")
            {
                errs.push(FieldError::invalid(
                    "spec.ipFamilyPolicy",
                    serde_json::json!(new.ip_family_policy),
                    "must be set to 'SingleStack' when releasing the secondary clusterIP",
                ));
            }
        }
        Ordering::Less => {
            if !old.cluster_ips.is_empty() && new.cluster_ips[0] != old.cluster_ips[0] {
                errs.push(FieldError::invalid(
                    path.index(0).as_str(),
                    value(),
                    changed,
                ));
            }
        }
    }
    errs
}

/// `validateUpgradeDowngradeIPFamilies` (the primary family may not
/// change).
fn validate_upgrade_downgrade_ip_families(old: &ServiceSpec, new: &ServiceSpec) -> ErrorList {
    let mut errs = ErrorList::default();
    if new.type_ == TYPE_EXTERNAL_NAME || old.type_ == TYPE_EXTERNAL_NAME {
        return errs;
    }
    if new.is_headless() || old.is_headless() {
        return errs;
    }
    let path = FieldPath::new("spec").child("ipFamilies").index(0);
    let value = || serde_json::json!(new.ip_families);
    let changed = "may not change once set";
    if old.ip_families.len() == new.ip_families.len() {
        for (i, family) in old.ip_families.iter().enumerate() {
            if *family != new.ip_families[i] {
                errs.push(FieldError::invalid(path.as_str(), value(), changed));
            }
        }
    } else if !old.ip_families.is_empty()
        && !new.ip_families.is_empty()
        && old.ip_families[0] != new.ip_families[0]
    {
        errs.push(FieldError::invalid(path.as_str(), value(), changed));
    }
    errs
}
