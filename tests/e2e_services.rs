//! Core `v1` Service and Endpoints and `discovery.k8s.io/v1` EndpointSlice
//! end to end with kube-rs and kubectl: objects are created with
//! upstream's defaults filled in, a bad port protocol gets upstream's 422
//! Status, `kubectl get` prints upstream's columns and discovery lists the
//! kinds with their short names.

mod common;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::api::discovery::v1::{
    Endpoint, EndpointConditions, EndpointPort as SlicePort, EndpointSlice,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, ObjectMeta, PostParams};

fn api_status(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

/// The whitespace-separated cells of the lines of `kubectl get`.
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[tokio::test]
async fn services_endpoints_and_slices() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");

    let created = services
        .create(
            &PostParams::default(),
            &Service {
                metadata: meta("web"),
                spec: Some(ServiceSpec {
                    cluster_ip: Some("10.0.0.10".into()),
                    selector: Some(BTreeMap::from([("app".into(), "web".into())])),
                    ports: Some(vec![ServicePort {
                        port: 443,
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .expect("create service");
    let spec = created.spec.expect("spec");
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
    assert_eq!(spec.session_affinity.as_deref(), Some("None"));
    assert_eq!(spec.internal_traffic_policy.as_deref(), Some("Cluster"));
    assert_eq!(spec.cluster_ips, Some(vec!["10.0.0.10".to_string()]));
    assert_eq!(spec.ip_families, Some(vec!["IPv4".to_string()]));
    assert_eq!(spec.ip_family_policy.as_deref(), Some("SingleStack"));
    assert_eq!(spec.external_traffic_policy, None);
    let port = &spec.ports.expect("ports")[0];
    assert_eq!(port.protocol.as_deref(), Some("TCP"));
    assert_eq!(port.target_port, Some(IntOrString::Int(443)));
    assert_eq!(created.metadata.generation, None);

    // upstream's `validateServicePort` message, in a 422 Status.
    let s = api_status(
        services
            .create(
                &PostParams::default(),
                &Service {
                    metadata: meta("bad"),
                    spec: Some(ServiceSpec {
                        ports: Some(vec![ServicePort {
                            port: 80,
                            protocol: Some("HTTP".into()),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            )
            .await
            .expect_err("bad protocol"),
    );
    assert_eq!(s.code, 422);
    assert_eq!(s.reason, "Invalid");
    assert_eq!(
        s.message,
        "Service \"bad\" is invalid: spec.ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\""
    );

    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    let ep = endpoints
        .create(
            &PostParams::default(),
            &Endpoints {
                metadata: meta("web"),
                subsets: Some(vec![EndpointSubset {
                    addresses: Some(vec![EndpointAddress {
                        ip: "10.1.0.5".into(),
                        ..Default::default()
                    }]),
                    ports: Some(vec![EndpointPort {
                        port: 8443,
                        ..Default::default()
                    }]),
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("create endpoints");
    let subsets = ep.subsets.expect("subsets");
    assert_eq!(
        subsets[0].ports.as_ref().expect("ports")[0]
            .protocol
            .as_deref(),
        Some("TCP")
    );

    let slices: Api<EndpointSlice> = Api::namespaced(client, "default");
    let slice = slices
        .create(
            &PostParams::default(),
            &EndpointSlice {
                metadata: ObjectMeta {
                    name: Some("web-1".into()),
                    labels: Some(BTreeMap::from([(
                        "kubernetes.io/service-name".into(),
                        "web".into(),
                    )])),
                    ..Default::default()
                },
                address_type: "IPv4".into(),
                endpoints: Some(vec![Endpoint {
                    addresses: vec!["10.1.0.5".into()],
                    conditions: Some(EndpointConditions {
                        ready: Some(true),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ports: Some(vec![SlicePort {
                    port: Some(8443),
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("create endpoint slice");
    let slice_port = &slice.ports.expect("ports")[0];
    assert_eq!(slice_port.name.as_deref(), Some(""));
    assert_eq!(slice_port.protocol.as_deref(), Some("TCP"));
    assert_eq!(slice.metadata.generation, Some(1));

    // `kubectl get` prints upstream's columns.
    let k = common::kubectl::Kubectl::new(&server);
    let out = rows(&k.ok(&["get", "svc"]));
    assert_eq!(
        out[0],
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ],
        "{out:?}"
    );
    assert_eq!(
        out[1][..5],
        ["web", "ClusterIP", "10.0.0.10", "<none>", "443/TCP"],
        "{out:?}"
    );
    let out = rows(&k.ok(&["get", "svc", "-o", "wide"]));
    assert_eq!(
        out[0].last().map(String::as_str),
        Some("SELECTOR"),
        "{out:?}"
    );
    assert_eq!(
        out[1].last().map(String::as_str),
        Some("app=web"),
        "{out:?}"
    );
    let out = rows(&k.ok(&["get", "ep"]));
    assert_eq!(out[0], ["NAME", "ENDPOINTS", "AGE"], "{out:?}");
    assert_eq!(out[1][..2], ["web", "10.1.0.5:8443"], "{out:?}");
    let out = rows(&k.ok(&["get", "endpointslices"]));
    assert_eq!(
        out[0],
        ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"],
        "{out:?}"
    );
    assert_eq!(
        out[1][..4],
        ["web-1", "IPv4", "8443", "10.1.0.5"],
        "{out:?}"
    );

    // Discovery: short names, scope, group.
    let out = rows(&k.ok(&["api-resources"]));
    let row = |name: &str| {
        out.iter()
            .find(|r| r.first().map(String::as_str) == Some(name))
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(
        row("services"),
        ["services", "svc", "v1", "true", "Service"]
    );
    assert_eq!(
        row("endpoints"),
        ["endpoints", "ep", "v1", "true", "Endpoints"]
    );
    assert_eq!(
        row("endpointslices"),
        [
            "endpointslices",
            "discovery.k8s.io/v1",
            "true",
            "EndpointSlice"
        ]
    );
}

/// `kubectl apply` (client-side, a strategic merge patch keyed by port)
/// and `kubectl apply --server-side` of a Service.
#[tokio::test]
async fn kubectl_apply_service() {
    let server = common::Server::start().await;
    let k = common::kubectl::Kubectl::new(&server);
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("svc.yaml");
    let manifest = |port: u16| {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: api\nspec:\n  selector:\n    app: api\n  ports:\n  - name: https\n    port: {port}\n    targetPort: 8443\n"
        )
    };
    let path = file.to_string_lossy().into_owned();
    std::fs::write(&file, manifest(443)).expect("write");
    assert_eq!(k.ok(&["apply", "-f", &path]).trim(), "service/api created");
    std::fs::write(&file, manifest(8080)).expect("write");
    assert_eq!(
        k.ok(&["apply", "-f", &path]).trim(),
        "service/api configured"
    );
    let svc = k.json(&["get", "svc", "api"]);
    assert_eq!(
        svc["spec"]["ports"],
        serde_json::json!([{"name": "https", "port": 8080, "protocol": "TCP", "targetPort": 8443}])
    );
    // Server-side apply keys the ports by (port, protocol), the protocol
    // defaulted from the schema as upstream's.
    let ssa = |port: u16| {
        let text = manifest(port).replace("name: api\n", "name: api-ssa\n");
        std::fs::write(&file, text).expect("write");
        k.ok(&["apply", "--server-side", "-f", &path]);
        k.json(&["get", "svc", "api-ssa"])
    };
    ssa(443);
    let svc = ssa(9090);
    assert_eq!(
        svc["spec"]["ports"],
        serde_json::json!([{"name": "https", "port": 9090, "protocol": "TCP", "targetPort": 8443}]),
        "{svc}"
    );
}
