//! gzip response compression over raw HTTP: a LIST larger than 128 KiB
//! comes back gzip-compressed and decodes to the same JSON, a small GET and
//! a watch are never compressed, `/openapi/v2` is compressed above 1400
//! bytes, and nothing is compressed without `Accept-Encoding: gzip`.

mod common;

use std::io::Read;
use std::time::Duration;

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::Value;

fn get(path: &str, accept_encoding: Option<&str>) -> http::Request<kube::client::Body> {
    let mut req = http::Request::get(path).header("Accept", "application/json");
    if let Some(enc) = accept_encoding {
        req = req.header("Accept-Encoding", enc);
    }
    req.body(Vec::new()).expect("request").map(Into::into)
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("valid gzip");
    out
}

fn header<'a>(resp: &'a http::Response<kube::client::Body>, name: &str) -> Vec<&'a str> {
    resp.headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect()
}

/// Creates ConfigMap `name` holding `blob` under the key `blob`.
async fn create_blob(cms: &Api<ConfigMap>, name: &str, blob: String) {
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "data": {"blob": blob},
    }))
    .expect("configmap");
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");
}

#[tokio::test]
async fn gzip_large_lists_only_never_watches() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // 40 ConfigMaps of ~4 KiB each: a LIST of ~170 KiB.
    for i in 0..40 {
        create_blob(&cms, &format!("cm-{i:02}"), format!("{i:02}-").repeat(1400)).await;
    }
    let list_path = "/api/v1/namespaces/default/configmaps";

    // Without Accept-Encoding: plain JSON.
    let resp = client.send(get(list_path, None)).await.expect("LIST");
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "content-encoding").is_empty());
    let plain = resp.into_body().collect_bytes().await.expect("body");
    assert!(plain.len() > 128 * 1024, "list is {} bytes", plain.len());
    let plain: Value = serde_json::from_slice(&plain).expect("JSON list");
    assert_eq!(plain["items"].as_array().map(Vec::len), Some(40));

    // With it: gzip, and the same JSON once decoded.
    let resp = client
        .send(get(list_path, Some("gzip")))
        .await
        .expect("gzip LIST");
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-encoding"), ["gzip"]);
    assert!(
        header(&resp, "vary").contains(&"Accept-Encoding"),
        "{:?}",
        resp.headers()
    );
    assert_eq!(header(&resp, "content-type"), ["application/json"]);
    let body = resp.into_body().collect_bytes().await.expect("body");
    assert!(body.len() < 64 * 1024, "compressed to {} bytes", body.len());
    let decoded: Value = serde_json::from_slice(&gunzip(&body)).expect("JSON list");
    assert_eq!(decoded, plain);

    // Other spellings kube-apiserver accepts; a q-valued one it does not.
    for (enc, gzipped) in [
        ("deflate, gzip", true),
        ("gzip;q=0.8", false),
        ("br", false),
    ] {
        let resp = client.send(get(list_path, Some(enc))).await.expect("LIST");
        let got = header(&resp, "content-encoding") == ["gzip"];
        assert_eq!(got, gzipped, "Accept-Encoding: {enc}");
    }

    // A small GET is not compressed (and does not vary on the encoding).
    let resp = client
        .send(get(&format!("{list_path}/cm-00"), Some("gzip")))
        .await
        .expect("GET");
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "content-encoding").is_empty());
    assert!(!header(&resp, "vary").contains(&"Accept-Encoding"));
    let body = resp.into_body().collect_bytes().await.expect("body");
    let obj: Value = serde_json::from_slice(&body).expect("JSON object");
    assert_eq!(obj["metadata"]["name"], "cm-00");

    // A watch is never compressed, though its initial events alone are
    // larger than the threshold.
    for path in [
        format!("{list_path}?watch=true"),
        "/api/v1/watch/namespaces/default/configmaps".to_string(),
    ] {
        let resp = client.send(get(&path, Some("gzip"))).await.expect("watch");
        assert_eq!(resp.status(), 200);
        assert!(
            header(&resp, "content-encoding").is_empty(),
            "{path}: {:?}",
            resp.headers()
        );
        let mut body = resp.into_body();
        let mut seen = Vec::new();
        while !seen.contains(&b'\n') {
            let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
                .await
                .expect("first watch event in time")
                .expect("stream open")
                .expect("frame");
            if let Ok(data) = frame.into_data() {
                seen.extend_from_slice(&data);
            }
        }
        let line = seen.split(|b| *b == b'\n').next().unwrap_or_default();
        let event: Value = serde_json::from_slice(line).expect("plain JSON watch event");
        assert_eq!(event["type"], "ADDED", "{path}");
    }

    // `/openapi/v2` follows kube-openapi's gzip handler: compressed from
    // 1400 bytes, in both forms.
    for accept in [
        "application/json",
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    ] {
        let req = http::Request::get("/openapi/v2")
            .header("Accept", accept)
            .header("Accept-Encoding", "gzip")
            .body(Vec::new())
            .expect("request")
            .map(Into::into);
        let resp = client.send(req).await.expect("openapi");
        assert_eq!(resp.status(), 200);
        assert_eq!(header(&resp, "content-encoding"), ["gzip"], "{accept}");
        assert!(header(&resp, "vary").contains(&"Accept-Encoding"));
        let body = resp.into_body().collect_bytes().await.expect("body");
        let raw = gunzip(&body);
        if accept == "application/json" {
            let doc: Value = serde_json::from_slice(&raw).expect("swagger JSON");
            assert_eq!(doc["swagger"], "2.0");
        } else {
            assert_eq!(&raw[..5], b"\x0a\x032.0");
        }
    }
}

/// A LIST larger than 1 MiB is sent in parts; it arrives whole, with its
/// Content-Length, plain and gzip-compressed, as the same JSON.
#[tokio::test]
async fn lists_larger_than_a_mebibyte_arrive_whole() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // 3 ConfigMaps of ~450 KiB: a LIST of ~1.35 MiB.
    for i in 0..3 {
        create_blob(&cms, &format!("big-{i}"), format!("{i}-").repeat(230_000)).await;
    }
    let list_path = "/api/v1/namespaces/default/configmaps";
    let resp = client.send(get(list_path, None)).await.expect("LIST");
    assert_eq!(resp.status(), 200);
    let length: usize = header(&resp, "content-length")
        .first()
        .and_then(|v| v.parse().ok())
        .expect("Content-Length");
    let plain = resp.into_body().collect_bytes().await.expect("body");
    assert_eq!(plain.len(), length);
    assert!(plain.len() > 1 << 20, "list is {} bytes", plain.len());
    let plain: Value = serde_json::from_slice(&plain).expect("JSON list");
    let names: Vec<&str> = plain["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["big-0", "big-1", "big-2"]);
    assert_eq!(
        plain["items"][2]["data"]["blob"],
        Value::String("2-".repeat(230_000))
    );

    let resp = client
        .send(get(list_path, Some("gzip")))
        .await
        .expect("gzip LIST");
    assert_eq!(header(&resp, "content-encoding"), ["gzip"]);
    let body = resp.into_body().collect_bytes().await.expect("body");
    let decoded: Value = serde_json::from_slice(&gunzip(&body)).expect("JSON list");
    assert_eq!(decoded, plain);
}
