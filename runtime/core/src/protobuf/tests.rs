use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message;
use serde_json::json;

use super::*;
use crate::builtin::core_v1::{ConfigMap, Namespace, Secret};

fn unknown(body: &[u8]) -> Unknown {
    assert_eq!(&body[..4], b"k8s\0");
    Unknown::decode(&body[4..]).unwrap_or_default()
}

/// What kube-apiserver writes for a small ConfigMap, built by hand from
/// the Go marshaller's rules (every non-pointer field written, in field
/// order).
#[test]
fn config_map_bytes_match_upstream() {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default"}, "data": {"a": "b"}});
    let body = encode_body(&ops::<ConfigMap>(), &object).unwrap_or_default();
    let mut meta = vec![0x0a, 0x01, b'c', 0x12, 0x00, 0x1a, 0x07];
    meta.extend_from_slice(b"default");
    meta.extend_from_slice(&[0x22, 0x00, 0x2a, 0x00, 0x32, 0x00, 0x38, 0x00, 0x42, 0x00]);
    let mut raw = vec![0x0a, meta.len() as u8];
    raw.extend(meta);
    raw.extend_from_slice(&[0x12, 0x06, 0x0a, 0x01, b'a', 0x12, 0x01, b'b']);
    let mut expected = b"k8s\0".to_vec();
    expected.extend_from_slice(&[0x0a, 0x0f, 0x0a, 0x02, b'v', b'1', 0x12, 0x09]);
    expected.extend_from_slice(b"ConfigMap");
    expected.extend_from_slice(&[0x12, raw.len() as u8]);
    expected.extend(raw);
    expected.extend_from_slice(&[0x1a, 0x00, 0x22, 0x00]);
    assert_eq!(body, expected);

    // And k8s-pb reads it back.
    let u = unknown(&body);
    assert_eq!(
        u.type_meta.and_then(|t| t.kind).as_deref(),
        Some("ConfigMap")
    );
    let cm = core::ConfigMap::decode(u.raw.unwrap_or_default().as_slice()).unwrap_or_default();
    assert_eq!(cm.data.get("a").map(String::as_str), Some("b"));
    assert_eq!(
        cm.metadata.and_then(|m| m.namespace).as_deref(),
        Some("default")
    );
}

#[test]
fn timestamps_are_seconds_and_zero_nanos() {
    let object = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "n", "creationTimestamp": "2025-01-01T10:00:00Z", "uid": "u", "resourceVersion": "7"},
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
    let body = encode_body(&ops::<Namespace>(), &object).unwrap_or_default();
    let raw = unknown(&body).raw.unwrap_or_default();
    let ns = core::Namespace::decode(raw.as_slice()).unwrap_or_default();
    let m = ns.metadata.clone().unwrap_or_default();
    assert_eq!(
        m.creation_timestamp,
        Some(meta::Time {
            seconds: Some(1_735_725_600),
            nanos: Some(0)
        })
    );
    // `42 08 08 <5-byte varint> 10 00`, as in etcd dumps of Go objects.
    let ts = [0x42, 0x08, 0x08];
    assert!(raw.windows(3).any(|w| w == ts));
    // Round trip back to JSON.
    let back = decode_body(&ops::<Namespace>(), &body).unwrap_or_default();
    assert_eq!(back, object);
}

#[test]
fn secret_string_data_survives_decoding_until_folded() {
    let msg = core::Secret {
        metadata: Some(meta::ObjectMeta {
            name: Some("s".into()),
            ..Default::default()
        }),
        data: [("a".to_string(), b"x".to_vec())].into(),
        string_data: [("b".to_string(), "y".to_string())].into(),
        ..Default::default()
    };
    let body = wrap("v1", "Secret", msg.encode_to_vec());
    let value = decode_body(&ops::<Secret>(), &body).unwrap_or_default();
    assert_eq!(
        value,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"a": "eA=="}, "stringData": {"b": "y"}})
    );
    let mut scheme = crate::scheme::Scheme::new();
    crate::builtin::install(&mut scheme);
    let (kind, _) = scheme
        .resource("", "v1", "secrets")
        .expect("secrets are served");
    let hub = kind.decode("v1", value).unwrap_or_default();
    assert_eq!(hub["data"], json!({"a": "eA==", "b": "eQ=="}));
    assert!(hub.get("stringData").is_none());
    assert_eq!(hub["type"], "Opaque");
}

#[test]
fn lists_and_status() {
    let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
        "metadata": {"resourceVersion": "12", "continue": "abc", "remainingItemCount": 3},
        "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "binaryData": {"k": "AAE="}}]});
    let body = encode_list_body(&ops::<ConfigMap>(), &list).unwrap_or_default();
    let u = unknown(&body);
    assert_eq!(
        u.type_meta.and_then(|t| t.kind).as_deref(),
        Some("ConfigMapList")
    );
    let l = core::ConfigMapList::decode(u.raw.unwrap_or_default().as_slice()).unwrap_or_default();
    let lm = l.metadata.unwrap_or_default();
    assert_eq!(lm.resource_version.as_deref(), Some("12"));
    assert_eq!(lm.r#continue.as_deref(), Some("abc"));
    assert_eq!(lm.remaining_item_count, Some(3));
    assert_eq!(l.items.len(), 1);
    assert_eq!(l.items[0].binary_data.get("k"), Some(&vec![0u8, 1]));

    let status = crate::meta::Status::not_found("", "configmaps", "x");
    let body = status_body(&status);
    let u = unknown(&body);
    let s = meta::Status::decode(u.raw.unwrap_or_default().as_slice()).unwrap_or_default();
    assert_eq!(s.code, Some(404));
    assert_eq!(s.reason.as_deref(), Some("NotFound"));
    assert_eq!(s.message.as_deref(), Some("configmaps \"x\" not found"));
    assert_eq!(
        s.details.and_then(|d| d.kind).as_deref(),
        Some("configmaps")
    );
}

#[test]
fn bad_bodies() {
    assert!(unwrap(b"{}").is_err());
    assert!(decode_body(&ops::<ConfigMap>(), b"k8s\0\x0a\xff").is_err());
    assert!(is_protobuf(
        "application/vnd.kubernetes.protobuf; charset=x"
    ));
    assert!(!is_protobuf("application/json"));
}

/// What `kubectl create service` sends (a typed client: protobuf) decodes
/// to the JSON object, and encodes back to the same message; a named
/// target port stays a string.
#[test]
fn services_and_endpoints_round_trip() {
    use crate::builtin::core_v1::{Endpoints, Service};
    let object = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"type": "ClusterIP", "selector": {"app": "web"},
            "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080},
                      {"name": "https", "protocol": "TCP", "port": 443, "targetPort": "https"}],
            "sessionAffinity": "None"}});
    let body = encode_body(&ops::<Service>(), &object).unwrap_or_default();
    let u = unknown(&body);
    let svc = core::Service::decode(u.raw.unwrap_or_default().as_slice()).unwrap_or_default();
    let ports = svc.spec.clone().unwrap_or_default().ports;
    assert_eq!(ports.len(), 2);
    assert_eq!(
        ports[0].target_port.clone().unwrap_or_default().int_val,
        Some(8080)
    );
    assert_eq!(
        ports[1]
            .target_port
            .clone()
            .unwrap_or_default()
            .str_val
            .as_deref(),
        Some("https")
    );
    let hub = decode_body(&ops::<Service>(), &body).expect("decode");
    assert_eq!(hub["spec"]["ports"], object["spec"]["ports"]);
    assert_eq!(hub["spec"]["selector"], object["spec"]["selector"]);
    assert_eq!(hub["spec"]["type"], "ClusterIP");

    // A field this server does not model is refused, not dropped.
    let mut with_external_ips = svc;
    if let Some(spec) = with_external_ips.spec.as_mut() {
        spec.external_ips = vec!["10.0.0.1".into()];
    }
    let mut unknown_body = Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("Service".into()),
        }),
        raw: Some(with_external_ips.encode_to_vec()),
        ..Default::default()
    }
    .encode_to_vec();
    let mut refused = b"k8s\0".to_vec();
    refused.append(&mut unknown_body);
    let err = decode_body(&ops::<Service>(), &refused).expect_err("externalIPs refused");
    assert!(err.to_string().contains("spec.externalIPs"), "{err}");

    let endpoints = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "web", "namespace": "default"},
        "subsets": [{"addresses": [{"ip": "10.0.0.5", "targetRef": {"kind": "Pod", "name": "p"}}],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]});
    let body = encode_body(&ops::<Endpoints>(), &endpoints).unwrap_or_default();
    let hub = decode_body(&ops::<Endpoints>(), &body).expect("decode");
    assert_eq!(hub["subsets"], endpoints["subsets"]);
}
