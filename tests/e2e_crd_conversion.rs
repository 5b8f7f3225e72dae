//! A CustomResourceDefinition with `conversion.strategy: Webhook`: a real
//! HTTPS webhook (its own CA, given as `caBundle`) converts between two
//! versions whose fields differ; the ConversionReview carries upstream's
//! fields; a webhook that fails makes reads in the other version answer
//! upstream's 500.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use base64::Engine;
use common::Server;
use common::kubectl::Kubectl;
use common::webhook::{Handler, Webhook};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

fn resource(version: &str) -> ApiResource {
    ApiResource {
        group: "example.com".into(),
        version: version.into(),
        api_version: format!("example.com/{version}"),
        kind: "Gauge".into(),
        plural: "gauges".into(),
    }
}

/// v1 says `spec.size`, v2 says `spec.amount`.
fn convert(object: &Value, desired: &str) -> Value {
    let mut out = object.clone();
    out["apiVersion"] = json!(desired);
    let spec = out["spec"]
        .as_object_mut()
        .map(std::mem::take)
        .unwrap_or_default();
    let value = spec.get("size").or_else(|| spec.get("amount")).cloned();
    let field = if desired.ends_with("/v2") {
        "amount"
    } else {
        "size"
    };
    out["spec"] = json!({ field: value });
    out
}

#[tokio::test]
async fn a_conversion_webhook_converts_between_versions() {
    let failing = Arc::new(AtomicBool::new(false));
    let fail = failing.clone();
    let handler: Handler = Arc::new(move |review: &Value| {
        let request = &review["request"];
        let uid = request["uid"].clone();
        if fail.load(Ordering::Relaxed) {
            return (
                200,
                json!({"apiVersion": review["apiVersion"], "kind": "ConversionReview",
                    "response": {"uid": uid, "result": {"status": "Failure", "message": "the converter is down"}}}),
            );
        }
        let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
        let converted: Vec<Value> = request["objects"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| convert(o, desired))
            .collect();
        (
            200,
            json!({"apiVersion": review["apiVersion"], "kind": "ConversionReview",
                "response": {"uid": uid, "convertedObjects": converted, "result": {"status": "Success"}}}),
        )
    });
    let webhook = Webhook::start(handler, None).await;
    let ca = base64::engine::general_purpose::STANDARD.encode(&webhook.ca.cert_pem);
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {field: {"type": "integer"}}}}}})
    };
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gauges.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gauges", "singular": "gauge", "kind": "Gauge"},
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("https://127.0.0.1:{}/convert", webhook.port), "caBundle": ca}
            }},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("size")},
                {"name": "v2", "served": true, "storage": false, "schema": schema("amount")}
            ]
        }
    });
    let server = Server::start().await;
    let k = Kubectl::new(&server);
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("crd.json");
    std::fs::write(&file, crd.to_string()).expect("write");
    k.ok(&["apply", "-f", &file.display().to_string()]);
    k.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=10s",
        "crd/gauges.example.com",
    ]);

    let client = server.client().await;
    let v1: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource("v1"));
    let v2: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource("v2"));
    let gauge: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v2", "kind": "Gauge",
        "metadata": {"name": "g"}, "spec": {"amount": 5}
    }))
    .expect("gauge");
    let created = v2
        .create(&PostParams::default(), &gauge)
        .await
        .expect("create in v2");
    assert_eq!(created.data["spec"], json!({"amount": 5}));
    // Stored in v1: read there through the webhook.
    let as_v1 = v1.get("g").await.expect("get v1");
    assert_eq!(as_v1.data["spec"], json!({"size": 5}));
    assert_eq!(as_v1.metadata.uid, created.metadata.uid);
    let as_v2 = v2.get("g").await.expect("get v2");
    assert_eq!(as_v2.data["spec"], json!({"amount": 5}));

    // The reviews were upstream's: v1, a uid, the desired version, objects.
    let requests = webhook.requests();
    assert!(!requests.is_empty());
    let (review, _) = &requests[0];
    assert_eq!(review["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(review["kind"], "ConversionReview");
    assert!(
        review["request"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    assert!(
        review["request"]["objects"]
            .as_array()
            .is_some_and(|o| o.len() == 1)
    );

    // A failing webhook: reads in the other version answer upstream's 500.
    failing.store(true, Ordering::Relaxed);
    let fresh: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Gauge",
        "metadata": {"name": "h"}, "spec": {"size": 1}
    }))
    .expect("gauge");
    v1.create(&PostParams::default(), &fresh)
        .await
        .expect("no conversion needed");
    let err = v2.get("h").await.expect_err("conversion fails");
    match err {
        kube::Error::Api(status) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (500, "InternalError")
            );
            assert_eq!(
                status.message,
                "Internal error occurred: conversion webhook for example.com/v1, Kind=Gauge failed: the converter is down"
            );
        }
        other => panic!("{other:?}"),
    }
}
