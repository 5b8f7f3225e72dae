//! `/metrics` serves what kube-apiserver's operators watch: every metric
//! the kubernetes-mixin apiserver alert and recording rules read (and the
//! families its apiserver dashboard and issue #24 name), with the labels
//! and buckets their expressions select on, after some traffic.
//!
//! The metric names below are data taken from kubernetes-mixin
//! (kubernetes-monitoring/kubernetes-mixin @ aa38e2bf, the commit
//! kube-prometheus pins): `alerts/kube_apiserver.libsonnet`,
//! `alerts/system_alerts.libsonnet` (KubeVersionMismatch, KubeClientErrors),
//! `rules/kube_apiserver-availability.libsonnet`,
//! `rules/kube_apiserver-burnrate.libsonnet`,
//! `rules/kube_apiserver-histogram.libsonnet` and
//! `dashboards/apiserver.libsonnet`.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::Server;
use common::auth::{Credential, TestCa, client_with, get, send};
use common::raw;
use serde_json::json;

/// Raw metrics the mixin's alert rules read. (`up` is Prometheus' own.)
const ALERT_RULE_METRICS: &[&str] = &[
    // KubeClientCertificateExpiration: histogram_quantile(0.01, ..._bucket) and _count.
    "apiserver_client_certificate_expiration_seconds_bucket",
    "apiserver_client_certificate_expiration_seconds_count",
    // KubeAggregatedAPIErrors, KubeAggregatedAPIDown.
    "aggregator_unavailable_apiservice_total",
    "aggregator_unavailable_apiservice",
    // KubeAPITerminatedRequests.
    "apiserver_request_terminations_total",
    "apiserver_request_total",
    // KubeVersionMismatch (by its git_version label).
    "kubernetes_build_info",
    // KubeClientErrors.
    "rest_client_requests_total",
];

/// Raw metrics the mixin's recording rules read (availability, burn rates,
/// the p99 histogram).
const RECORDING_RULE_METRICS: &[&str] = &[
    "apiserver_request_total",
    "apiserver_request_sli_duration_seconds_bucket",
    "apiserver_request_sli_duration_seconds_count",
];

/// Raw metrics the mixin's apiserver dashboard reads (`go_goroutines` and
/// `up` aside: there are no goroutines here, and `up` is Prometheus').
const DASHBOARD_METRICS: &[&str] = &[
    "workqueue_adds_total",
    "workqueue_depth",
    "workqueue_queue_duration_seconds_bucket",
    "process_resident_memory_bytes",
    "process_cpu_seconds_total",
];

/// The families issue #24 names (with upstream's names), beyond those above.
/// (`apiserver_flowcontrol_rejected_requests_total` appears with the first
/// rejection, as upstream's: `e2e_flowcontrol` floods a level and checks it.)
const OPERATOR_FAMILIES: &[&str] = &[
    "apiserver_request_duration_seconds_bucket",
    "apiserver_longrunning_requests",
    "apiserver_response_sizes_bucket",
    "apiserver_current_inflight_requests",
    "apiserver_current_inqueue_requests",
    "apiserver_flowcontrol_current_inqueue_requests",
    "apiserver_flowcontrol_current_inqueue_seats",
    "apiserver_flowcontrol_current_executing_requests",
    "apiserver_flowcontrol_current_executing_seats",
    "apiserver_flowcontrol_nominal_limit_seats",
    "apiserver_flowcontrol_request_wait_duration_seconds_bucket",
    "apiserver_flowcontrol_dispatched_requests_total",
    "apiserver_watch_events_total",
    "apiserver_watch_events_sizes_bucket",
    "apiserver_watch_cache_events_received_total",
    "apiserver_watch_cache_events_dispatched_total",
    "apiserver_watch_cache_initializations_total",
    "apiserver_watch_cache_resource_version",
    "watch_cache_capacity",
    "apiserver_cache_list_total",
    "apiserver_cache_list_fetched_objects_total",
    "apiserver_cache_list_returned_objects_total",
    "apiserver_storage_objects",
    "apiserver_resource_objects",
    "apiserver_storage_size_bytes",
    "apiserver_admission_controller_admission_duration_seconds_bucket",
    "apiserver_admission_step_admission_duration_seconds_bucket",
    "apiserver_audit_event_total",
    "authentication_attempts",
    "authentication_duration_seconds_bucket",
    "apiserver_authorization_decisions_total",
    "apiserver_tls_handshake_errors_total",
    "workqueue_work_duration_seconds_bucket",
];

/// The series of a Prometheus text exposition: (name, labels) per sample.
fn samples(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let end = l.find(['{', ' '])?;
            let labels = match l[end..].strip_prefix('{') {
                Some(rest) => rest.split('}').next().unwrap_or_default().to_string(),
                None => String::new(),
            };
            Some((l[..end].to_string(), labels))
        })
        .collect()
}

fn has_series(samples: &[(String, String)], name: &str, labels: &[&str]) -> bool {
    samples
        .iter()
        .any(|(n, l)| n == name && labels.iter().all(|want| l.contains(want)))
}

#[tokio::test]
async fn every_metric_the_kubernetes_mixin_reads_is_served() {
    let tmp = tempfile::tempdir().expect("tmp");
    let ca = TestCa::new("metrics-client-ca");
    let ca_file = ca.write(tmp.path(), "client-ca.crt");
    let server = Server::start_in(
        &tmp.path().join("data"),
        common::free_port(),
        &["--client-ca-file", ca_file.to_str().expect("path")],
    )
    .await;
    let admin = server.client().await;

    // Reads, writes, a watch that sees an event, a paged list from the
    // watch cache.
    let (code, body) = send(
        &admin,
        http::Method::POST,
        "/api/v1/namespaces/default/configmaps",
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "first"}})),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let rv = serde_json::from_str::<serde_json::Value>(&body).expect("json")["metadata"]
        ["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .to_string();
    let watch_path = format!(
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=2"
    );
    let watch = raw::request(&server, "GET", &watch_path, &[], b"");
    let (watched, _) = tokio::join!(watch, async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (code, body) = send(
            &admin,
            http::Method::POST,
            "/api/v1/namespaces/default/configmaps",
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "second"}})),
        )
        .await;
        assert_eq!(code, 200, "{body}");
    });
    assert!(watched.text().contains("\"second\""), "{}", watched.text());
    assert_eq!(
        get(&admin, "/api/v1/namespaces/default/configmaps/first")
            .await
            .0,
        200
    );
    assert_eq!(get(&admin, "/api/v1/configmaps?limit=1").await.0, 200);

    // A user with a client certificate (not system:masters): x509,
    // authorization decisions, a Limited priority level.
    let viewer = client_with(
        &server,
        &Credential::cert(ca.client_cert(tmp.path(), "metrics-viewer", Some("team"))),
    )
    .await;
    assert_eq!(get(&viewer, "/apis").await.0, 200);
    assert_eq!(
        get(&viewer, "/api/v1/namespaces/default/configmaps")
            .await
            .0,
        403
    );

    // A dependent whose owner does not exist: the garbage collector's
    // queue takes it (and deletes it).
    let (code, body) = send(
        &admin,
        http::Method::POST,
        "/api/v1/namespaces/default/configmaps",
        Some(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                "name": "orphan",
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone",
                                     "uid": "00000000-0000-0000-0000-000000000001"}],
            }}),
        ),
    )
    .await;
    assert_eq!(code, 200, "{body}");

    // An admission webhook that refuses connections, ignored on failure:
    // the server's own failed client request.
    let (_listener, refused) = common::refused_port();
    let (code, body) = send(
        &admin,
        http::Method::POST,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        Some(json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "metrics-unreachable"},
            "webhooks": [{"name": "unreachable.metrics.example.com",
                "clientConfig": {"url": format!("https://127.0.0.1:{refused}/validate")},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                           "resources": ["configmaps"]}],
                "failurePolicy": "Ignore", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "timeoutSeconds": 2}]})),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // Configurations take effect within a second; the webhook is called
    // (and fails) once one of these creates sees it.
    for i in 0..20 {
        let (code, body) = send(
            &admin,
            http::Method::POST,
            "/api/v1/namespaces/default/configmaps",
            Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("webhooked-{i}")}})),
        )
        .await;
        assert_eq!(code, 200, "{body}");
        let metrics = raw::request(&server, "GET", "/metrics", &[], b"")
            .await
            .text();
        if metrics.contains("rest_client_requests_total{code=\"<error>\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // An APIService whose backend refuses connections: unavailable.
    let (code, body) = send(
        &admin,
        http::Method::POST,
        "/api/v1/namespaces/default/services",
        Some(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "metrics-backend"},
            "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}})),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = send(
        &admin,
        http::Method::POST,
        "/apis/apiregistration.k8s.io/v1/apiservices",
        Some(json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1.metrics.example.com"},
            "spec": {"group": "metrics.example.com", "version": "v1",
                     "groupPriorityMinimum": 100, "versionPriority": 10,
                     "insecureSkipTLSVerify": true,
                     "service": {"namespace": "default", "name": "metrics-backend", "port": refused}}})),
    )
    .await;
    assert_eq!(code, 200, "{body}");

    // A request the server ends itself: a deadline it cannot meet (504).
    let mut timed_out = false;
    for i in 0..50 {
        let resp = raw::request(
            &server,
            "POST",
            "/api/v1/namespaces/default/configmaps?timeout=1ns",
            &[("Content-Type", "application/json")],
            format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"late-{i}"}}}}"#)
                .as_bytes(),
        )
        .await;
        if resp.status == 504 {
            timed_out = true;
            break;
        }
    }
    assert!(timed_out, "no request timed out");

    // Everything named is served once the asynchronous parts (garbage
    // collection, the availability check) have run.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let (text, missing) = loop {
        let text = raw::request(&server, "GET", "/metrics", &[], b"")
            .await
            .text();
        let served: BTreeSet<String> = samples(&text).into_iter().map(|(n, _)| n).collect();
        let missing: Vec<&str> = ALERT_RULE_METRICS
            .iter()
            .chain(RECORDING_RULE_METRICS)
            .chain(DASHBOARD_METRICS)
            .chain(OPERATOR_FAMILIES)
            .copied()
            .filter(|m| !served.contains(*m))
            .collect();
        if missing.is_empty() || std::time::Instant::now() > deadline {
            break (text, missing);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(missing.is_empty(), "not served: {missing:?}");

    // The labels and buckets the rules select on.
    let s = samples(&text);
    // The SLO rules' latency thresholds: 1 s (writes; single-object reads),
    // 5 s (namespace reads), 30 s (cluster reads).
    for le in ["le=\"1\"", "le=\"5\"", "le=\"30\"", "le=\"+Inf\""] {
        assert!(
            has_series(&s, "apiserver_request_sli_duration_seconds_bucket", &[le]),
            "no SLI bucket {le}"
        );
    }
    // Reads and writes, by verb and scope, as the rules' selectors spell them.
    for (verb, scope) in [
        ("POST", "resource"),
        ("GET", "resource"),
        ("LIST", "namespace"),
        ("LIST", "cluster"),
    ] {
        assert!(
            has_series(
                &s,
                "apiserver_request_sli_duration_seconds_bucket",
                &[
                    &format!("verb=\"{verb}\""),
                    &format!("scope=\"{scope}\""),
                    "component=\"apiserver\""
                ]
            ),
            "no SLI series for {verb} {scope}"
        );
    }
    assert!(has_series(
        &s,
        "apiserver_request_total",
        &["verb=\"POST\"", "code=\"201\"", "resource=\"configmaps\""]
    ));
    assert!(has_series(&s, "apiserver_request_total", &["code=\"403\""]));
    assert!(has_series(
        &s,
        "apiserver_request_terminations_total",
        &["code=\"504\"", "verb=\"POST\""]
    ));
    // KubeVersionMismatch reads `git_version` as v<major>.<minor>...
    assert!(
        s.iter().any(|(n, l)| n == "kubernetes_build_info"
            && l.split(',').any(|kv| kv.starts_with("git_version=\"v1."))),
        "kubernetes_build_info without a v1.x git_version"
    );
    assert!(has_series(
        &s,
        "aggregator_unavailable_apiservice",
        &["name=\"v1.metrics.example.com\""]
    ));
    assert!(text.contains("aggregator_unavailable_apiservice{name=\"v1.metrics.example.com\"} 1"));
    assert!(has_series(
        &s,
        "aggregator_unavailable_apiservice_total",
        &["name=\"v1.metrics.example.com\"", "reason=\""]
    ));
    assert!(has_series(
        &s,
        "rest_client_requests_total",
        &["code=\"<error>\""]
    ));
    // The mixin's certificate alerts compare with 1 and 7 days: buckets there.
    for le in ["le=\"86400\"", "le=\"604800\""] {
        assert!(
            has_series(
                &s,
                "apiserver_client_certificate_expiration_seconds_bucket",
                &[le]
            ),
            "{le}"
        );
    }
    assert!(has_series(
        &s,
        "apiserver_authorization_decisions_total",
        &["type=\"RBAC\"", "name=\"rbac\"", "decision=\"allowed\""]
    ));
    assert!(has_series(
        &s,
        "authentication_attempts",
        &["result=\"success\""]
    ));
    assert!(has_series(
        &s,
        "workqueue_adds_total",
        &["name=\"garbage_collector_attempt_to_delete\""]
    ));
    assert!(has_series(
        &s,
        "apiserver_watch_events_total",
        &["resource=\"configmaps\"", "version=\"v1\""]
    ));
    assert!(has_series(
        &s,
        "apiserver_resource_objects",
        &["group=\"\"", "resource=\"configmaps\""]
    ));
    assert!(has_series(
        &s,
        "apiserver_admission_controller_admission_duration_seconds_bucket",
        &["type=\"validate\"", "operation=\"CREATE\""]
    ));
    assert!(has_series(
        &s,
        "apiserver_response_sizes_bucket",
        &["verb=\"LIST\""]
    ));
    // Priority levels a non-exempt user's requests went through.
    assert!(has_series(
        &s,
        "apiserver_flowcontrol_request_wait_duration_seconds_bucket",
        &["execute=\"true\""]
    ));

    let served: BTreeSet<String> = s.iter().map(|(n, _)| family(n)).collect();
    eprintln!("metric families served: {}", served.len());
}

/// The family of a sample name (histogram suffixes removed).
fn family(sample: &str) -> String {
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| sample.strip_suffix(suffix))
        .unwrap_or(sample)
        .to_string()
}
