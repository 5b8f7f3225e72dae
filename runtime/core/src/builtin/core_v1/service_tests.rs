//! Service, Endpoints and EndpointSlice: kind facts, defaults, preparation,
//! validation and printing. Expected messages are upstream's, from the
//! function each test names (`pkg/apis/core/validation/validation.go`,
//! `pkg/apis/discovery/validation/validation.go`,
//! `pkg/apis/core/v1/defaults.go`, `pkg/printers/internalversion/printers.go`).

use serde_json::json;

use super::*;
use crate::builtin::discovery_v1::EndpointSlice;
use crate::builtin::printers;
use crate::resource::{Resource as _, Strategy};

fn service(v: serde_json::Value) -> Service {
    let mut s: Service = serde_json::from_value(v).unwrap_or_default();
    s.default_fields();
    s.prepare_for_create();
    s
}

fn messages(errs: &crate::validation::ErrorList) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

#[test]
fn kind_facts() {
    assert_eq!(Service::INFO.plural, "services");
    assert_eq!(Service::INFO.short_names, &["svc"]);
    assert_eq!(Service::INFO.categories, &["all"]);
    let info = Service::INFO;
    assert!(info.subresources.status);
    assert!(info.namespaced());
    assert_eq!(Endpoints::INFO.kind, "Endpoints");
    assert_eq!(Endpoints::INFO.plural, "endpoints");
    assert_eq!(Endpoints::INFO.short_names, &["ep"]);
    assert_eq!(EndpointSlice::INFO.api_version(), "discovery.k8s.io/v1");
    assert_eq!(EndpointSlice::INFO.plural, "endpointslices");
    assert!(EndpointSlice::INFO.short_names.is_empty());
    assert!(!Service::bump_generation_on_spec_change());
    assert!(EndpointSlice::bump_generation_on_spec_change());
}

/// `SetDefaults_Service`, `normalizeClusterIPs` and the allocator's IP
/// family defaults.
#[test]
fn service_defaults() {
    let s = service(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"clusterIP": "10.0.0.10", "ports": [{"port": 443}]}
    }));
    let v = serde_json::to_value(&s).unwrap_or_default();
    assert_eq!(
        v["spec"],
        json!({
            "ports": [{"protocol": "TCP", "port": 443, "targetPort": 443}],
            "clusterIP": "10.0.0.10",
            "clusterIPs": ["10.0.0.10"],
            "type": "ClusterIP",
            "sessionAffinity": "None",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster"
        })
    );
    assert_eq!(v["status"], json!({"loadBalancer": {}}));
    assert!(s.validate_create().is_empty(), "{:?}", s.validate_create());

    let lb = service(json!({
        "metadata": {"name": "lb"},
        "spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP",
                 "ports": [{"port": 80, "targetPort": "http"}]}
    }));
    assert_eq!(lb.spec.external_traffic_policy, "Cluster");
    assert_eq!(lb.spec.allocate_load_balancer_node_ports, Some(true));
    assert_eq!(
        lb.spec.ports[0].target_port,
        Some(IntOrString::String("http".into()))
    );
    assert_eq!(
        lb.spec
            .session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds),
        Some(10800)
    );
    assert!(
        lb.validate_create().is_empty(),
        "{:?}",
        lb.validate_create()
    );

    let external = service(json!({
        "metadata": {"name": "ext"},
        "spec": {"type": "ExternalName", "externalName": "example.com."}
    }));
    assert_eq!(external.spec.internal_traffic_policy, None);
    assert!(external.spec.ip_families.is_empty());
    assert!(external.validate_create().is_empty());

    let headless = service(json!({
        "metadata": {"name": "h"}, "spec": {"clusterIP": "None"}
    }));
    assert_eq!(headless.spec.cluster_ips, vec!["None"]);
    assert_eq!(
        headless.spec.ip_family_policy.as_deref(),
        Some("RequireDualStack")
    );
    assert!(headless.validate_create().is_empty());
}

/// `ValidateService` and `validateServicePort`.
#[test]
fn service_validation() {
    let s = service(json!({
        "metadata": {"name": "1web"},
        "spec": {"type": "Foo", "ports": [
            {"port": 0, "protocol": "HTTP"},
            {"name": "a", "port": 80},
            {"name": "a", "port": 80, "nodePort": 30000}
        ]}
    }));
    assert_eq!(
        messages(&s.validate_create()),
        vec![
            "metadata.name: Invalid value: \"1web\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            "spec.ports[0].name: Required value",
            "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            "spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.ports[2].name: Duplicate value: \"a\"",
            "spec.type: Unsupported value: \"Foo\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
            "spec.ports[2]: Duplicate value: {\"port\":80,\"protocol\":\"TCP\"}",
        ]
    );

    let no_ports = service(json!({"metadata": {"name": "a"}, "spec": {"clusterIP": "10.0.0.256"}}));
    assert_eq!(
        messages(&no_ports.validate_create()),
        vec![
            "spec.ports: Required value",
            "spec.clusterIPs[0]: Invalid value: \"10.0.0.256\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ]
    );

    let cluster_node_port = service(
        json!({"metadata": {"name": "a"}, "spec": {"ports": [{"port": 80, "nodePort": 30001}]}}),
    );
    assert_eq!(
        messages(&cluster_node_port.validate_create()),
        vec!["spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]
    );

    let external = service(
        json!({"metadata": {"name": "a"}, "spec": {"type": "ExternalName", "clusterIP": "10.0.0.1"}}),
    );
    assert_eq!(
        messages(&external.validate_create()),
        vec![
            "spec.clusterIPs: Forbidden: may not be set for ExternalName services",
            "spec.externalName: Required value",
        ]
    );

    let bad_cname = service(
        json!({"metadata": {"name": "a"}, "spec": {"type": "ExternalName", "externalName": "Foo_bar"}}),
    );
    assert_eq!(
        messages(&bad_cname.validate_create()),
        vec![
            "spec.externalName: Invalid value: \"Foo_bar\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ]
    );

    let headless_lb = service(
        json!({"metadata": {"name": "a"}, "spec": {"type": "NodePort", "clusterIP": "None", "ports": [{"port": 80}]}}),
    );
    assert_eq!(
        messages(&headless_lb.validate_create())[0],
        "spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for NodePort services"
    );

    let mut policy = service(json!({"metadata": {"name": "a"}, "spec": {"ports": [{"port": 80}]}}));
    policy.spec.internal_traffic_policy = Some("Nowhere".into());
    policy.spec.external_traffic_policy = "Local".into();
    policy.spec.session_affinity = "Sticky".into();
    assert_eq!(
        messages(&policy.validate_create()),
        vec![
            "spec.sessionAffinity: Unsupported value: \"Sticky\": supported values: \"ClientIP\", \"None\"",
            "spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for externally-accessible services",
            "spec.internalTrafficPolicy: Unsupported value: \"Nowhere\": supported values: \"Cluster\", \"Local\"",
        ]
    );
}

/// `validateUpgradeDowngradeClusterIPs` and the update preparation: an
/// update that omits the cluster IP keeps it; changing it is refused.
#[test]
fn service_update() {
    let old = service(json!({
        "metadata": {"name": "a"},
        "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 80}]}
    }));
    let mut new: Service = serde_json::from_value(json!({
        "metadata": {"name": "a"}, "spec": {"ports": [{"port": 81}]}
    }))
    .unwrap_or_default();
    new.default_fields();
    new.prepare_for_update(&old);
    assert_eq!(new.spec.cluster_ips, vec!["10.0.0.1"]);
    assert!(new.validate_update(&old).is_empty());

    let mut moved = old.clone();
    moved.spec.cluster_ip = "10.0.0.2".into();
    moved.prepare_for_update(&old);
    assert_eq!(moved.spec.cluster_ips, vec!["10.0.0.2"]);
    let errs = moved.validate_update(&old);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs.0[0].field, "spec.clusterIPs[0]");
    assert_eq!(errs.0[0].detail, "may not change once set");

    // Becoming an ExternalName service drops the unchanged cluster fields.
    let mut external = old.clone();
    external.spec.type_ = "ExternalName".into();
    external.spec.external_name = "example.com".into();
    external.prepare_for_update(&old);
    assert!(external.spec.cluster_ip.is_empty() && external.spec.cluster_ips.is_empty());
    assert!(external.spec.ip_family_policy.is_none());
    assert!(
        external.validate_update(&old).is_empty(),
        "{:?}",
        external.validate_update(&old)
    );
}

fn endpoints(v: serde_json::Value) -> Endpoints {
    let mut e: Endpoints = serde_json::from_value(v).unwrap_or_default();
    e.default_fields();
    e
}

/// `SetDefaults_EndpointPort` and `ValidateEndpoints`.
#[test]
fn endpoints_defaults_and_validation() {
    let ok = endpoints(json!({
        "metadata": {"name": "web"},
        "subsets": [{"addresses": [{"ip": "10.1.0.5"}], "ports": [{"port": 8443}]}]
    }));
    assert_eq!(ok.subsets[0].ports[0].protocol, "TCP");
    assert!(ok.validate_create().is_empty());

    let bad = endpoints(json!({
        "metadata": {"name": "web"},
        "subsets": [
            {"addresses": [{"ip": "foo"}, {"ip": "127.0.0.1"}],
             "ports": [{"port": 70000}, {"name": "b", "port": 1, "protocol": "ICMP"}]},
            {"ports": [{"port": 1}]}
        ]
    }));
    assert_eq!(
        messages(&bad.validate_create()),
        vec![
            "subsets[0].addresses[0].ip: Invalid value: \"foo\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            "subsets[0].addresses[0].ip: Invalid value: \"foo\": must be a valid IP address",
            "subsets[0].addresses[1].ip: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
            "subsets[0].ports[0].name: Required value",
            "subsets[0].ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "subsets[0].ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            "subsets[1]: Required value: must specify `addresses` or `notReadyAddresses`",
        ]
    );
}

fn slice(v: serde_json::Value) -> EndpointSlice {
    let mut s: EndpointSlice = serde_json::from_value(v).unwrap_or_default();
    s.default_fields();
    s
}

/// The discovery `SetDefaults_EndpointPort` and `ValidateEndpointSlice`.
#[test]
fn endpoint_slice_defaults_and_validation() {
    let ok = slice(json!({
        "metadata": {"name": "web-1", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.1.0.5"], "conditions": {"ready": true}}],
        "ports": [{"port": 8443}]
    }));
    let v = serde_json::to_value(&ok).unwrap_or_default();
    assert_eq!(
        v["ports"],
        json!([{"name": "", "protocol": "TCP", "port": 8443}])
    );
    assert!(ok.validate_create().is_empty());

    let bad = slice(json!({
        "metadata": {"name": "web-1"},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["2001:db8::1"]}, {"addresses": []}],
        "ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2, "protocol": "ICMP"}]
    }));
    assert_eq!(
        messages(&bad.validate_create()),
        vec![
            "endpoints[0].addresses[0]: Invalid value: \"2001:db8::1\": must be a valid IPv4 address",
            "endpoints[1].addresses: Required value: must contain at least 1 address",
            "ports[1].name: Duplicate value: \"a\"",
            "ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
        ]
    );

    let kinds = slice(json!({"metadata": {"name": "x"}, "addressType": "IP", "endpoints": []}));
    assert_eq!(
        messages(&kinds.validate_create()),
        vec![
            "addressType: Unsupported value: \"IP\": supported values: \"FQDN\", \"IPv4\", \"IPv6\""
        ]
    );
    assert!(kinds.validate_update(&kinds).is_empty());

    let fqdn = slice(json!({"metadata": {"name": "x"}, "addressType": "FQDN",
        "endpoints": [{"addresses": ["localhost"]}]}));
    assert_eq!(
        messages(&fqdn.validate_create()),
        vec![
            "endpoints[0].addresses[0]: Invalid value: \"localhost\": should be a domain with at least two segments separated by dots"
        ]
    );

    let many = slice(json!({"metadata": {"name": "x"}, "addressType": "IPv4",
        "endpoints": vec![json!({"addresses": ["10.0.0.1"]}); 1001]}));
    assert_eq!(
        messages(&many.validate_create()),
        vec!["endpoints: Too many: 1001: must have at most 1000 items"]
    );

    let mut changed = ok.clone();
    changed.address_type = "IPv6".into();
    changed.endpoints.clear();
    assert_eq!(
        messages(&changed.validate_update(&ok)),
        vec!["addressType: Invalid value: \"IPv6\": field is immutable"]
    );
}

/// `printService`, `printEndpoints` and `printEndpointSlice`.
#[test]
fn printers() {
    let svc = json!({
        "metadata": {"name": "web"},
        "spec": {"type": "NodePort", "clusterIPs": ["10.0.0.10"],
                 "selector": {"app": "web"},
                 "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080},
                           {"port": 53, "protocol": "UDP"}]}
    });
    let cells = (printers::SERVICE.cells)(&svc);
    assert_eq!(
        cells,
        vec![
            json!("web"),
            json!("NodePort"),
            json!("10.0.0.10"),
            json!("<none>"),
            json!("80:30080/TCP,53/UDP"),
            json!("<unknown>"),
            json!("app=web"),
        ]
    );
    let lb = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer"},
        "status": {"loadBalancer": {"ingress": [{"hostname": "b.example"}, {"ip": "1.2.3.4"}]}}});
    let cells = (printers::SERVICE.cells)(&lb);
    assert_eq!(cells[2], "<none>");
    assert_eq!(cells[3], "1.2.3.4,b.example");
    assert_eq!(cells[4], "<none>");
    let pending = json!({"spec": {"type": "LoadBalancer"}});
    assert_eq!((printers::SERVICE.cells)(&pending)[3], "<pending>");
    let ext = json!({"spec": {"type": "ExternalName", "externalName": "example.com"}});
    assert_eq!((printers::SERVICE.cells)(&ext)[3], "example.com");

    let ep = json!({"metadata": {"name": "web"}, "subsets": [
        {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
         "ports": [{"port": 80}, {"port": 443}]},
        {"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}]}
    ]});
    assert_eq!(
        (printers::ENDPOINTS.cells)(&ep)[1],
        "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 2 more..."
    );
    let headless = json!({"subsets": [{"addresses": [{"ip": "fd00::1"}]}]});
    assert_eq!((printers::ENDPOINTS.cells)(&headless)[1], "fd00::1");
    assert_eq!((printers::ENDPOINTS.cells)(&json!({}))[1], "<none>");

    let eps = json!({"metadata": {"name": "web-1"}, "addressType": "IPv4",
        "ports": [{"name": "https", "port": 8443}, {"name": "x"}],
        "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2", "10.0.0.3", "10.0.0.4"]}]});
    let cells = (printers::ENDPOINT_SLICE.cells)(&eps);
    assert_eq!(cells[1], "IPv4");
    assert_eq!(cells[2], "8443,x");
    assert_eq!(cells[3], "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...");
    let empty = (printers::ENDPOINT_SLICE.cells)(&json!({"endpoints": []}));
    assert_eq!(empty[2], "<unset>");
    assert_eq!(empty[3], "<unset>");
}
