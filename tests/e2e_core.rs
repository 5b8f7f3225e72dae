//! Core `v1` ConfigMap and Secret end to end: typed kube-rs CRUD,
//! `stringData` folding, immutability, and raw Kubernetes protobuf as
//! client-go ≥ 0.32 typed clients send it.

mod common;

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use prost::Message;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        ..Default::default()
    }
}

fn api_status(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn config_map_and_secret_crud() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    let cm = ConfigMap {
        metadata: meta("c1"),
        data: Some([("a".to_string(), "b".to_string())].into()),
        binary_data: Some([("bin".to_string(), ByteString(vec![0, 1, 2]))].into()),
        ..Default::default()
    };
    let created = cms
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    assert_eq!(created.data, cm.data);
    assert_eq!(created.binary_data, cm.binary_data);
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));

    let mut got = cms.get("c1").await.expect("get");
    assert_eq!(got.metadata.uid, created.metadata.uid);
    got.data = Some([("a".to_string(), "changed".to_string())].into());
    let updated = cms
        .replace("c1", &PostParams::default(), &got)
        .await
        .expect("replace");
    assert_eq!(
        updated
            .data
            .as_ref()
            .and_then(|d| d.get("a"))
            .map(String::as_str),
        Some("changed")
    );
    let list = cms.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);

    // A key Kubernetes rejects.
    let bad = ConfigMap {
        metadata: meta("bad"),
        data: Some([("a/b".to_string(), "x".to_string())].into()),
        ..Default::default()
    };
    let s = api_status(
        cms.create(&PostParams::default(), &bad)
            .await
            .expect_err("invalid key"),
    );
    assert_eq!(s.code, 422);
    assert!(s.message.starts_with("ConfigMap \"bad\" is invalid: data[a/b]: Invalid value: \"a/b\": a valid config key must consist of alphanumeric characters"), "{}", s.message);

    // Immutable ConfigMaps keep their data.
    let frozen = ConfigMap {
        metadata: meta("frozen"),
        data: Some([("k".to_string(), "v".to_string())].into()),
        immutable: Some(true),
        ..Default::default()
    };
    let mut frozen = cms
        .create(&PostParams::default(), &frozen)
        .await
        .expect("create immutable");
    frozen.data = Some([("k".to_string(), "other".to_string())].into());
    let s = api_status(
        cms.replace("frozen", &PostParams::default(), &frozen)
            .await
            .expect_err("immutable"),
    );
    assert_eq!(s.code, 422);
    assert_eq!(s.reason, "Invalid");
    assert_eq!(
        s.message,
        "ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    // Metadata may still change.
    let mut frozen = cms.get("frozen").await.expect("get frozen");
    frozen.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    cms.replace("frozen", &PostParams::default(), &frozen)
        .await
        .expect("label update");

    cms.delete("c1", &DeleteParams::default())
        .await
        .expect("delete");
    let s = api_status(cms.get("c1").await.expect_err("gone"));
    assert_eq!(s.code, 404);
    assert_eq!(s.message, "configmaps \"c1\" not found");

    // Secrets: stringData folds into data, type defaults to Opaque.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret = Secret {
        metadata: meta("s1"),
        data: Some([("a".to_string(), ByteString(b"x".to_vec()))].into()),
        string_data: Some([("b".to_string(), "y".to_string())].into()),
        ..Default::default()
    };
    let created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("create secret");
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    assert_eq!(created.string_data, None);
    let want: BTreeMap<String, ByteString> = [
        ("a".to_string(), ByteString(b"x".to_vec())),
        ("b".to_string(), ByteString(b"y".to_vec())),
    ]
    .into();
    assert_eq!(created.data.as_ref(), Some(&want));
    let got = secrets.get("s1").await.expect("get secret");
    assert_eq!(got.data.as_ref(), Some(&want));
    assert_eq!(got.string_data, None);

    let mut immutable = Secret {
        metadata: meta("s2"),
        string_data: Some([("k".to_string(), "v".to_string())].into()),
        immutable: Some(true),
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &immutable)
        .await
        .expect("create immutable secret");
    immutable.string_data = Some([("k".to_string(), "w".to_string())].into());
    let s = api_status(
        secrets
            .replace("s2", &PostParams::default(), &immutable)
            .await
            .expect_err("immutable secret"),
    );
    assert_eq!(
        s.message,
        "Secret \"s2\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    let mut retyped = secrets.get("s1").await.expect("get s1");
    retyped.type_ = Some("kubernetes.io/tls".into());
    let s = api_status(
        secrets
            .replace("s1", &PostParams::default(), &retyped)
            .await
            .expect_err("type change"),
    );
    assert_eq!(s.code, 422);
    assert!(
        s.message
            .contains("type: Invalid value: \"kubernetes.io/tls\": field is immutable"),
        "{}",
        s.message
    );

    // Namespaces still work through the typed client.
    let nss: Api<Namespace> = Api::all(client);
    assert!(nss.get("default").await.is_ok());
}

async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    accept: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, String, Vec<u8>) {
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::ACCEPT, accept);
    if let Some(ct) = content_type {
        req = req.header(http::header::CONTENT_TYPE, ct);
    }
    let req = req.body(kube::client::Body::from(body)).expect("request");
    let resp = client.send(req).await.expect("send");
    let code = resp.status().as_u16();
    let ct = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let bytes = resp.into_body().collect_bytes().await.expect("body");
    (code, ct, bytes.to_vec())
}

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown.encode_to_vec());
    out
}

fn open(body: &[u8]) -> k8s_pb::apimachinery::pkg::runtime::Unknown {
    assert_eq!(&body[..4], b"k8s\0", "protobuf magic");
    k8s_pb::apimachinery::pkg::runtime::Unknown::decode(&body[4..]).expect("Unknown")
}

#[tokio::test]
async fn protobuf_like_client_go() {
    use k8s_pb::api::core::v1 as pb;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbmeta;

    let server = common::Server::start().await;
    let client = server.client().await;
    let client_go_accept = "application/vnd.kubernetes.protobuf, application/json";

    let cm = pb::ConfigMap {
        metadata: Some(pbmeta::ObjectMeta {
            name: Some("pb".into()),
            ..Default::default()
        }),
        data: [("a".to_string(), "b".to_string())].into(),
        binary_data: [("bin".to_string(), vec![0u8, 255])].into(),
        ..Default::default()
    };
    let body = envelope("v1", "ConfigMap", cm.encode_to_vec());
    let path = "/api/v1/namespaces/default/configmaps";
    let (code, ct, resp) = raw(
        &client,
        "POST",
        path,
        client_go_accept,
        Some(PROTOBUF),
        body.clone(),
    )
    .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&resp));
    assert_eq!(ct, PROTOBUF);
    let u = open(&resp);
    let tm = u.type_meta.clone().unwrap_or_default();
    assert_eq!(
        (tm.api_version.as_deref(), tm.kind.as_deref()),
        (Some("v1"), Some("ConfigMap"))
    );
    let created = pb::ConfigMap::decode(u.raw.unwrap_or_default().as_slice()).expect("ConfigMap");
    let m = created.metadata.clone().unwrap_or_default();
    assert_eq!(m.namespace.as_deref(), Some("default"));
    assert!(m.uid.is_some_and(|u| !u.is_empty()));
    assert!(
        m.creation_timestamp
            .and_then(|t| t.seconds)
            .is_some_and(|s| s > 0)
    );
    assert_eq!(created.data, cm.data);
    assert_eq!(created.binary_data, cm.binary_data);

    // The JSON view agrees.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let json = cms.get("pb").await.expect("get pb");
    assert_eq!(
        json.binary_data.and_then(|b| b.get("bin").cloned()),
        Some(ByteString(vec![0, 255]))
    );

    // Lists in protobuf.
    let (code, ct, resp) = raw(&client, "GET", path, client_go_accept, None, Vec::new()).await;
    assert_eq!((code, ct.as_str()), (200, PROTOBUF));
    let u = open(&resp);
    assert_eq!(
        u.type_meta.and_then(|t| t.kind).as_deref(),
        Some("ConfigMapList")
    );
    let list = pb::ConfigMapList::decode(u.raw.unwrap_or_default().as_slice()).expect("list");
    assert_eq!(list.items.len(), 1);
    assert!(
        list.metadata
            .and_then(|m| m.resource_version)
            .is_some_and(|rv| !rv.is_empty())
    );

    // Errors come back as a protobuf Status when protobuf was preferred.
    let (code, ct, resp) = raw(
        &client,
        "POST",
        path,
        client_go_accept,
        Some(PROTOBUF),
        body,
    )
    .await;
    assert_eq!((code, ct.as_str()), (409, PROTOBUF));
    let u = open(&resp);
    assert_eq!(u.type_meta.and_then(|t| t.kind).as_deref(), Some("Status"));
    let status = pbmeta::Status::decode(u.raw.unwrap_or_default().as_slice()).expect("Status");
    assert_eq!(status.reason.as_deref(), Some("AlreadyExists"));
    assert_eq!(
        status.message.as_deref(),
        Some("configmaps \"pb\" already exists")
    );
    assert_eq!(status.code, Some(409));

    // Secrets: stringData in protobuf is folded too.
    let secret = pb::Secret {
        metadata: Some(pbmeta::ObjectMeta {
            name: Some("pbs".into()),
            ..Default::default()
        }),
        string_data: [("k".to_string(), "v".to_string())].into(),
        ..Default::default()
    };
    let (code, _, resp) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/secrets",
        client_go_accept,
        Some(PROTOBUF),
        envelope("v1", "Secret", secret.encode_to_vec()),
    )
    .await;
    assert_eq!(code, 201);
    let created =
        pb::Secret::decode(open(&resp).raw.unwrap_or_default().as_slice()).expect("Secret");
    assert_eq!(created.data.get("k").map(Vec::as_slice), Some(&b"v"[..]));
    assert!(created.string_data.is_empty());
    assert_eq!(created.r#type.as_deref(), Some("Opaque"));

    // Namespaces (cluster scope) in protobuf.
    let ns = pb::Namespace {
        metadata: Some(pbmeta::ObjectMeta {
            name: Some("pbns".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let (code, _, resp) = raw(
        &client,
        "POST",
        "/api/v1/namespaces",
        PROTOBUF,
        Some(PROTOBUF),
        envelope("v1", "Namespace", ns.encode_to_vec()),
    )
    .await;
    assert_eq!(code, 201);
    let created =
        pb::Namespace::decode(open(&resp).raw.unwrap_or_default().as_slice()).expect("Namespace");
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Active")
    );

    // A kind without protobuf: JSON for the client-go Accept, 406 for
    // protobuf alone, 415 for a protobuf body.
    let flunders = "/apis/wardle.example.com/v1beta1/namespaces/default/flunders";
    let (code, ct, _) = raw(&client, "GET", flunders, client_go_accept, None, Vec::new()).await;
    assert_eq!((code, ct.as_str()), (200, "application/json"));
    let (code, ct, resp) = raw(&client, "GET", flunders, PROTOBUF, None, Vec::new()).await;
    assert_eq!((code, ct.as_str()), (406, "application/json"));
    let status: serde_json::Value = serde_json::from_slice(&resp).expect("json status");
    assert_eq!(status["reason"], "NotAcceptable");
    let (code, ct, resp) = raw(
        &client,
        "POST",
        flunders,
        client_go_accept,
        Some(PROTOBUF),
        envelope("wardle.example.com/v1beta1", "Flunder", Vec::new()),
    )
    .await;
    assert_eq!((code, ct.as_str()), (415, "application/json"));
    let status: serde_json::Value = serde_json::from_slice(&resp).expect("json status");
    assert_eq!(status["reason"], "UnsupportedMediaType");
    assert_eq!(
        status["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
    );

    // Garbage protobuf is a 400, not a panic.
    let (code, _, _) = raw(
        &client,
        "POST",
        path,
        "application/json",
        Some(PROTOBUF),
        b"k8s\0\x0a\xff".to_vec(),
    )
    .await;
    assert_eq!(code, 400);
}
