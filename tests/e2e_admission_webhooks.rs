//! Admission webhooks end to end: webhook configurations written with
//! kube-rs reach real HTTPS webhooks started by the test (their CA in
//! `caBundle`), and the answers come back to the client as upstream's
//! MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins return
//! them. Expected messages follow upstream's `webhook/errors`
//! (`ToStatusErr`, `NewDryRunUnsupportedErr`) and `util/webhook`
//! (`ErrCallingWebhook`) sources.

mod common;

use std::sync::Arc;

use base64::Engine;
use common::webhook::{Handler, Webhook};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use serde_json::{Value, json};

fn api_status(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// An `AdmissionReview` v1 answer to `review` with `response` fields.
fn answer(review: &Value, response: Value) -> (u16, Value) {
    let mut resp = json!({"uid": review["request"]["uid"]});
    if let (Some(r), Some(extra)) = (resp.as_object_mut(), response.as_object()) {
        r.extend(extra.clone());
    }
    (
        200,
        json!({"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": resp}),
    )
}

fn handler(f: impl Fn(&Value) -> (u16, Value) + Send + Sync + 'static) -> Handler {
    Arc::new(f)
}

fn client_config(hook: &Webhook, path: &str) -> WebhookClientConfig {
    WebhookClientConfig {
        url: Some(format!("https://127.0.0.1:{}{path}", hook.port)),
        ca_bundle: Some(ByteString(hook.ca.cert_pem.clone().into_bytes())),
        ..Default::default()
    }
}

fn configmap_rule(ops: &[&str]) -> RuleWithOperations {
    RuleWithOperations {
        operations: Some(ops.iter().map(|s| s.to_string()).collect()),
        api_groups: Some(vec![String::new()]),
        api_versions: Some(vec!["v1".into()]),
        resources: Some(vec!["configmaps".into()]),
        scope: None,
    }
}

fn validating(name: &str, config: WebhookClientConfig) -> ValidatingWebhook {
    ValidatingWebhook {
        name: name.into(),
        client_config: config,
        rules: Some(vec![configmap_rule(&["CREATE", "UPDATE"])]),
        side_effects: "None".into(),
        admission_review_versions: vec!["v1".into()],
        ..Default::default()
    }
}

fn mutating(name: &str, config: WebhookClientConfig) -> MutatingWebhook {
    MutatingWebhook {
        name: name.into(),
        client_config: config,
        rules: Some(vec![configmap_rule(&["CREATE", "UPDATE"])]),
        side_effects: "None".into(),
        admission_review_versions: vec!["v1".into()],
        ..Default::default()
    }
}

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn validating_config(client: &kube::Client, name: &str, hooks: Vec<ValidatingWebhook>) {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let cfg = ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        webhooks: Some(hooks),
    };
    api.create(&PostParams::default(), &cfg)
        .await
        .expect("create validating configuration");
}

async fn mutating_config(client: &kube::Client, name: &str, hooks: Vec<MutatingWebhook>) {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let cfg = MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        webhooks: Some(hooks),
    };
    api.create(&PostParams::default(), &cfg)
        .await
        .expect("create mutating configuration");
}

/// Creates probe config maps until `hook` has been called (a written
/// configuration takes effect within a second, not at once).
async fn wait_active(server: &common::Server, cms: &Api<ConfigMap>, hook: &Webhook) {
    let mut n = 0;
    common::eventually(server, "webhook configuration takes effect", || {
        n += 1;
        let name = format!("probe-{n}");
        async move {
            let _ = cms.create(&PostParams::default(), &cm(&name, &[])).await;
            hook.calls() > 0
        }
    })
    .await;
}

/// Creates probe config maps with `labels` until one is refused (the
/// configuration denying them has taken effect).
async fn wait_refused(server: &common::Server, cms: &Api<ConfigMap>, labels: &[(&str, &str)]) {
    let mut n = 0;
    common::eventually(server, "webhook configuration takes effect", || {
        n += 1;
        let probe = cm(&format!("probe-{n}"), labels);
        async move { cms.create(&PostParams::default(), &probe).await.is_err() }
    })
    .await;
}

#[tokio::test]
async fn validating_webhook_denies_and_allows_with_review_fields_and_warnings() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let hook = Webhook::start(
        handler(|review| {
            let labels = &review["request"]["object"]["metadata"]["labels"];
            if labels["deny"] == "true" {
                answer(
                    review,
                    json!({"allowed": false, "status": {"code": 403, "message": "no denied configmaps"}}),
                )
            } else {
                answer(
                    review,
                    json!({"allowed": true, "warnings": ["checked by the webhook"]}),
                )
            }
        }),
        None,
    )
    .await;
    validating_config(
        &client,
        "check",
        vec![validating(
            "check.example.com",
            client_config(&hook, "/validate"),
        )],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    wait_active(&server, &cms, &hook).await;

    let err = cms
        .create(&PostParams::default(), &cm("bad", &[("deny", "true")]))
        .await
        .expect_err("denied");
    let status = api_status(err);
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        "admission webhook \"check.example.com\" denied the request: no denied configmaps"
    );
    assert!(
        cms.get_opt("bad").await.expect("get").is_none(),
        "a denied create stores nothing"
    );

    // The review the webhook received.
    let (review, _) = hook
        .requests()
        .into_iter()
        .rfind(|(r, _)| r["request"]["name"] == "bad")
        .expect("review of bad");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    let req = &review["request"];
    assert!(!req["uid"].as_str().unwrap_or_default().is_empty());
    assert_eq!(
        req["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        req["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(req["requestKind"], req["kind"]);
    assert_eq!(req["requestResource"], req["resource"]);
    assert_eq!(req["namespace"], "default");
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(req["dryRun"], false);
    assert_eq!(req["userInfo"]["username"], "apiforge-admin");
    assert_eq!(req["object"]["kind"], "ConfigMap");
    assert_eq!(req["object"]["apiVersion"], "v1");
    assert!(req["oldObject"].is_null());
    assert_eq!(req["options"]["kind"], "CreateOptions");

    // Allowed, with the webhook's warning as a Warning header.
    let resp = common::raw::request(
        &server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("Content-Type", "application/json")],
        serde_json::to_vec(
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "good"}}),
        )
        .expect("json")
        .as_slice(),
    )
    .await;
    assert_eq!(resp.status, 201, "{}", resp.text());
    assert_eq!(
        resp.header("warning"),
        Some("299 - \"checked by the webhook\"")
    );

    // An update reaches the webhook with the old object.
    let mut good = cms.get("good").await.expect("get");
    good.data = Some([("k".to_string(), "v".to_string())].into());
    cms.replace("good", &PostParams::default(), &good)
        .await
        .expect("update");
    let (review, _) = hook.requests().pop().expect("update review");
    assert_eq!(review["request"]["operation"], "UPDATE");
    assert_eq!(review["request"]["oldObject"]["metadata"]["name"], "good");
    assert_eq!(review["request"]["options"]["kind"], "UpdateOptions");

    // The webhook metrics.
    let metrics = common::raw::request(&server, "GET", "/metrics", &[], b"").await;
    let text = metrics.text();
    assert!(
        text.contains("apiserver_admission_webhook_admission_duration_seconds_count{name=\"check.example.com\",operation=\"CREATE\",rejected=\"true\",type=\"validating\"}"),
        "{text}"
    );
    assert!(
        text.contains("apiserver_admission_webhook_rejection_count{error_type=\"no_error\",name=\"check.example.com\",operation=\"CREATE\",rejection_code=\"403\",type=\"validating\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn mutating_webhooks_patch_reinvoke_and_annotate() {
    let tmp = tempfile::tempdir().expect("tmp");
    let policy = tmp.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Request\n  resources:\n  - group: \"\"\n    resources: [configmaps]\n",
    )
    .expect("policy");
    let log = tmp.path().join("audit.log");
    let server = common::Server::start_with(&[
        "--audit-policy-file",
        policy.to_str().expect("path"),
        "--audit-log-path",
        log.to_str().expect("path"),
    ])
    .await;
    let client = server.client().await;
    let b64 = |v: Value| base64::engine::general_purpose::STANDARD.encode(v.to_string());
    // "first" (IfNeeded) only looks; "second" adds a label, so "first" is
    // called again.
    let first = Webhook::start(
        handler(|review| {
            answer(
                review,
                json!({"allowed": true, "auditAnnotations": {"seen": "yes"}}),
            )
        }),
        None,
    )
    .await;
    let second = Webhook::start(
        handler(move |review| {
            let labels = &review["request"]["object"]["metadata"]["labels"];
            if labels["mutated"] == "yes" {
                return answer(review, json!({"allowed": true}));
            }
            let patch = if labels.is_object() {
                json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
            };
            answer(
                review,
                json!({"allowed": true, "patchType": "JSONPatch", "patch": b64(patch)}),
            )
        }),
        None,
    )
    .await;
    let mut a = mutating("first.example.com", client_config(&first, "/"));
    a.reinvocation_policy = Some("IfNeeded".into());
    a.rules = Some(vec![configmap_rule(&["CREATE", "UPDATE", "DELETE"])]);
    mutating_config(
        &client,
        "mutate",
        vec![
            a,
            mutating("second.example.com", client_config(&second, "/")),
        ],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    wait_active(&server, &cms, &second).await;

    let before = first.calls();
    let created = cms
        .create(&PostParams::default(), &cm("patched", &[("a", "b")]))
        .await
        .expect("create");
    let labels = created.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("mutated").map(String::as_str),
        Some("yes"),
        "{labels:?}"
    );
    assert_eq!(labels.get("a").map(String::as_str), Some("b"));
    assert_eq!(first.calls() - before, 2, "reinvoked after the later patch");
    // The stored object has the label too.
    let stored = cms.get("patched").await.expect("get");
    assert_eq!(
        stored.metadata.labels.unwrap_or_default().get("mutated"),
        Some(&"yes".to_string())
    );

    // A DELETE reaches the mutating webhook with the stored object as
    // oldObject.
    cms.delete("patched", &DeleteParams::default())
        .await
        .expect("delete");
    let (review, _) = first.requests().pop().expect("delete review");
    assert_eq!(review["request"]["operation"], "DELETE");
    assert_eq!(
        review["request"]["oldObject"]["metadata"]["name"],
        "patched"
    );
    assert!(review["request"]["object"].is_null());
    assert_eq!(review["request"]["options"]["kind"], "DeleteOptions");

    // The audit event of the create has the webhooks' annotations.
    let mut event = Value::Null;
    common::eventually(&server, "audit event of the create", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        event = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| {
                e["verb"] == "create"
                    && e["objectRef"]["name"] == "patched"
                    && e["stage"] == "ResponseComplete"
            })
            .unwrap_or(Value::Null);
        let found = !event.is_null();
        async move { found }
    })
    .await;
    let ann = &event["annotations"];
    assert_eq!(ann["first.example.com/seen"], "yes", "{ann}");
    let mutation: Value = serde_json::from_str(
        ann["mutation.webhook.admission.k8s.io/round_0_index_1"]
            .as_str()
            .expect("mutation annotation"),
    )
    .expect("json");
    assert_eq!(
        mutation,
        json!({"configuration": "mutate", "webhook": "second.example.com", "mutated": true})
    );
    assert!(
        ann["mutation.webhook.admission.k8s.io/round_1_index_0"].is_string(),
        "{ann}"
    );
    let patch: Value = serde_json::from_str(
        ann["patch.webhook.admission.k8s.io/round_0_index_1"]
            .as_str()
            .expect("patch annotation"),
    )
    .expect("json");
    assert_eq!(patch["patchType"], "JSONPatch");
    assert_eq!(patch["patch"][0]["path"], "/metadata/labels/mutated");
}

#[tokio::test]
async fn failure_policy_timeouts_and_dry_run() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // Nothing listens on `down`; `silent` accepts and never answers.
    let (_down_socket, down) = common::refused_port();
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let silent_port = silent.local_addr().expect("addr").port();
    let _hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    });
    let recorder = Webhook::start(
        handler(|review| answer(review, json!({"allowed": true}))),
        None,
    )
    .await;
    let ca = recorder.ca.cert_pem.clone();
    let url_config = |port: u16| WebhookClientConfig {
        url: Some(format!("https://127.0.0.1:{port}/")),
        ca_bundle: Some(ByteString(ca.clone().into_bytes())),
        ..Default::default()
    };
    let selected = |mut w: ValidatingWebhook, key: &str| {
        w.object_selector = Some(LabelSelector {
            match_labels: Some([(key.to_string(), "true".to_string())].into()),
            ..Default::default()
        });
        w
    };
    let mut ignore = selected(validating("ignore.example.com", url_config(down)), "ignore");
    ignore.failure_policy = Some("Ignore".into());
    let fail = selected(validating("fail.example.com", url_config(down)), "fail");
    let mut slow = selected(
        validating("slow.example.com", url_config(silent_port)),
        "slow",
    );
    slow.timeout_seconds = Some(1);
    let mut no_effects = selected(
        validating("record.example.com", client_config(&recorder, "/")),
        "record",
    );
    no_effects.side_effects = "NoneOnDryRun".into();
    validating_config(&client, "failures", vec![ignore, fail, slow, no_effects]).await;
    wait_refused(&server, &cms, &[("fail", "true")]).await;

    // Fail: the call error as a 500.
    let status = api_status(
        cms.create(&PostParams::default(), &cm("f", &[("fail", "true")]))
            .await
            .expect_err("fail closed"),
    );
    assert_eq!(status.code, 500);
    assert_eq!(status.reason, "InternalError");
    let prefix = format!(
        "Internal error occurred: failed calling webhook \"fail.example.com\": failed to call webhook: Post \"https://127.0.0.1:{down}/?timeout=10s\": dial tcp 127.0.0.1:{down}: "
    );
    assert!(status.message.starts_with(&prefix), "{}", status.message);
    // Ignore: created.
    cms.create(&PostParams::default(), &cm("i", &[("ignore", "true")]))
        .await
        .expect("fail open");
    // A webhook that does not answer within timeoutSeconds.
    let status = api_status(
        cms.create(&PostParams::default(), &cm("s", &[("slow", "true")]))
            .await
            .expect_err("timeout"),
    );
    assert_eq!(
        status.message,
        format!(
            "Internal error occurred: failed calling webhook \"slow.example.com\": failed to call webhook: Post \"https://127.0.0.1:{silent_port}/?timeout=1s\": context deadline exceeded"
        )
    );

    // Dry run: a NoneOnDryRun webhook gets it with dryRun true; nothing is
    // stored. (v1 admits only None and NoneOnDryRun, so the refusal of a
    // webhook with side effects, which only a v1beta1 configuration could
    // declare, is left to the unit tests.)
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    cms.create(&dry, &cm("r", &[("record", "true")]))
        .await
        .expect("dry run create");
    let (review, _) = recorder.requests().pop().expect("dry-run review");
    assert_eq!(review["request"]["dryRun"], true);
    assert_eq!(review["request"]["options"]["dryRun"], json!(["All"]));
    assert!(cms.get_opt("r").await.expect("get").is_none());
}

#[tokio::test]
async fn selectors_match_conditions_v1beta1_and_equivalent_versions() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let hook = Webhook::start(
        handler(|review| {
            if review["apiVersion"] == "admission.k8s.io/v1beta1" {
                // v1beta1 answers need no uid or kind.
                (200, json!({"response": {"allowed": false}}))
            } else {
                answer(
                    review,
                    json!({"allowed": false, "status": {"message": "stop"}}),
                )
            }
        }),
        None,
    )
    .await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for (name, team) in [("team-a", "a"), ("team-b", "b")] {
        let ns = k8s_openapi::api::core::v1::Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("team".to_string(), team.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace");
    }
    let mut by_namespace = validating("ns.example.com", client_config(&hook, "/"));
    by_namespace.namespace_selector = Some(LabelSelector {
        match_labels: Some([("team".to_string(), "a".to_string())].into()),
        ..Default::default()
    });
    by_namespace.match_conditions = Some(vec![MatchCondition {
        name: "not-exempt".into(),
        expression: "!has(object.metadata.labels) || !('exempt' in object.metadata.labels)".into(),
    }]);
    by_namespace.admission_review_versions = vec!["v1beta1".into()];
    // Rules for flunders v1alpha1 only: a v1beta1 request reaches it with
    // the default matchPolicy Equivalent, converted to v1alpha1.
    let mut equivalent = validating("equivalent.example.com", client_config(&hook, "/"));
    equivalent.rules = Some(vec![RuleWithOperations {
        operations: Some(vec!["CREATE".into()]),
        api_groups: Some(vec!["wardle.example.com".into()]),
        api_versions: Some(vec!["v1alpha1".into()]),
        resources: Some(vec!["flunders".into()]),
        scope: None,
    }]);
    let mut exact = equivalent.clone();
    exact.name = "exact.example.com".into();
    exact.match_policy = Some("Exact".into());
    validating_config(&client, "selectors", vec![by_namespace, equivalent, exact]).await;

    let in_a: Api<ConfigMap> = Api::namespaced(client.clone(), "team-a");
    let in_b: Api<ConfigMap> = Api::namespaced(client.clone(), "team-b");
    wait_refused(&server, &in_a, &[]).await;
    let status = api_status(
        in_a.create(&PostParams::default(), &cm("x", &[]))
            .await
            .expect_err("team a"),
    );
    assert_eq!(
        status.message,
        "admission webhook \"ns.example.com\" denied the request without explanation"
    );
    assert_eq!(status.code, 500, "a denial without a code answers 500");
    in_b.create(&PostParams::default(), &cm("x", &[]))
        .await
        .expect("other namespace");
    in_a.create(&PostParams::default(), &cm("y", &[("exempt", "1")]))
        .await
        .expect("match condition false");
    let (review, _) = hook
        .requests()
        .into_iter()
        .rfind(|(r, _)| r["request"]["name"] == "x")
        .expect("v1beta1 review");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1beta1");

    let flunders = common::raw::request(
        &server,
        "POST",
        "/apis/wardle.example.com/v1beta1/namespaces/default/flunders",
        &[("Content-Type", "application/json")],
        br#"{"apiVersion":"wardle.example.com/v1beta1","kind":"Flunder","metadata":{"name":"f"}}"#,
    )
    .await;
    assert_eq!(flunders.status, 500, "{}", flunders.text());
    assert_eq!(
        flunders.json()["message"],
        "admission webhook \"equivalent.example.com\" denied the request: stop"
    );
    let (review, _) = hook
        .requests()
        .into_iter()
        .rfind(|(r, _)| r["request"]["resource"]["resource"] == "flunders")
        .expect("flunder review");
    let req = &review["request"];
    assert_eq!(req["kind"]["version"], "v1alpha1");
    assert_eq!(req["object"]["apiVersion"], "wardle.example.com/v1alpha1");
    assert_eq!(req["requestKind"]["version"], "v1beta1");
    assert!(
        hook.requests()
            .iter()
            .all(|(r, _)| r["request"]["kind"]["kind"] != "Flunder"
                || r["request"]["kind"]["version"] == "v1alpha1"),
        "the Exact webhook is not called for v1beta1"
    );

    // The configurations themselves never reach webhooks: deleting works
    // even though every webhook denies.
    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    vwcs.delete("selectors", &DeleteParams::default())
        .await
        .expect("delete configuration");
}

#[tokio::test]
async fn admission_config_file_gives_webhook_credentials_by_host() {
    let tmp = tempfile::tempdir().expect("tmp");
    let hook = Webhook::start(
        handler(|review| answer(review, json!({"allowed": true}))),
        None,
    )
    .await;
    // Users named after the webhook's host:port, as upstream's
    // `--admission-control-config-file` kubeconfig names them.
    let kubeconfig = tmp.path().join("webhooks.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: \"127.0.0.1:{}\"\n  user:\n    token: webhook-token\n- name: \"*\"\n  user:\n    token: fallback\n",
            hook.port
        ),
    )
    .expect("kubeconfig");
    let config = tmp.path().join("admission.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: ValidatingAdmissionWebhook\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n",
            kubeconfig.display()
        ),
    )
    .expect("config");
    let server = common::Server::start_with(&[
        "--admission-control-config-file",
        config.to_str().expect("path"),
    ])
    .await;
    let client = server.client().await;
    validating_config(
        &client,
        "authenticated",
        vec![validating("auth.example.com", client_config(&hook, "/"))],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    wait_active(&server, &cms, &hook).await;
    let (_, auth) = hook.requests().pop().expect("a review");
    assert_eq!(auth.as_deref(), Some("Bearer webhook-token"));
}

#[tokio::test]
async fn webhooks_apply_to_custom_resources() {
    use kube::api::{ApiResource, DynamicObject};
    let server = common::Server::start().await;
    let client = server.client().await;
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource {
            group: "apiextensions.k8s.io".into(),
            version: "v1".into(),
            api_version: "apiextensions.k8s.io/v1".into(),
            kind: "CustomResourceDefinition".into(),
            plural: "customresourcedefinitions".into(),
        },
    );
    let crd: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "string"}}}
                }}}
            }]
        }
    }))
    .expect("crd");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create crd");
    let b64 = |v: Value| base64::engine::general_purpose::STANDARD.encode(v.to_string());
    let hook = Webhook::start(
        handler(move |review| {
            let patch = json!([{"op": "replace", "path": "/spec/size", "value": "large"}]);
            answer(
                review,
                json!({"allowed": true, "patchType": "JSONPatch", "patch": b64(patch)}),
            )
        }),
        None,
    )
    .await;
    let mut w = mutating("gadgets.example.com", client_config(&hook, "/"));
    w.rules = Some(vec![RuleWithOperations {
        operations: Some(vec!["CREATE".into()]),
        api_groups: Some(vec!["example.com".into()]),
        api_versions: Some(vec!["v1".into()]),
        resources: Some(vec!["gadgets".into()]),
        scope: Some("Namespaced".into()),
    }]);
    mutating_config(&client, "gadgets", vec![w]).await;
    let gadgets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource {
            group: "example.com".into(),
            version: "v1".into(),
            api_version: "example.com/v1".into(),
            kind: "Gadget".into(),
            plural: "gadgets".into(),
        },
    );
    let mut n = 0;
    common::eventually(
        &server,
        "the definition is served and the webhook applies",
        || {
            n += 1;
            let gadget: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "example.com/v1", "kind": "Gadget",
                "metadata": {"name": format!("g{n}")}, "spec": {"size": "small"}
            }))
            .expect("gadget");
            let gadgets = gadgets.clone();
            async move {
                gadgets
                    .create(&PostParams::default(), &gadget)
                    .await
                    .is_ok_and(|obj| obj.data["spec"]["size"] == "large")
            }
        },
    )
    .await;
    let (review, _) = hook.requests().pop().expect("review");
    assert_eq!(
        review["request"]["kind"],
        json!({"group": "example.com", "version": "v1", "kind": "Gadget"})
    );
    assert_eq!(review["request"]["object"]["spec"]["size"], "small");
}

#[tokio::test]
async fn service_references_resolve_through_endpoints_and_external_names() {
    use k8s_openapi::api::admissionregistration::v1::ServiceReference;
    use k8s_openapi::api::core::v1::{Endpoints, Service};
    let server = common::Server::start().await;
    let client = server.client().await;
    // One webhook, its certificate naming both services, listening on the
    // machine's own address: Endpoints may not name loopback addresses
    // (`ValidateNonSpecialIP`).
    let host_ip = common::host_address();
    let hook = Webhook::start_on(
        handler(|review| {
            answer(
                review,
                json!({"allowed": false, "status": {"code": 403, "message": format!("via {}", review["request"]["name"])}}),
            )
        }),
        None,
        &["hook.default.svc", "external.default.svc"],
        &host_ip,
    )
    .await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    // A ClusterIP service routed to its Endpoints (127.0.0.1:<webhook>).
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "hook"},
        "spec": {"ports": [{"port": 443, "targetPort": hook.port}]}
    }))
    .expect("service");
    services
        .create(&PostParams::default(), &svc)
        .await
        .expect("service");
    let ep: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "hook"},
        "subsets": [{"addresses": [{"ip": host_ip}], "ports": [{"port": hook.port}]}]
    }))
    .expect("endpoints");
    endpoints
        .create(&PostParams::default(), &ep)
        .await
        .expect("endpoints");
    // An ExternalName service: dialled at <externalName>:<port>.
    let external: Service = serde_json::from_value(json!({
        "metadata": {"name": "external"},
        "spec": {"type": "ExternalName", "externalName": host_ip}
    }))
    .expect("service");
    services
        .create(&PostParams::default(), &external)
        .await
        .expect("external service");

    let by_service = |name: &str, port: Option<i32>, key: &str| {
        let mut w = validating(
            &format!("{name}.example.com"),
            WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: "default".into(),
                    name: name.into(),
                    path: Some("/check".into()),
                    port,
                }),
                ca_bundle: Some(ByteString(hook.ca.cert_pem.clone().into_bytes())),
                ..Default::default()
            },
        );
        w.object_selector = Some(LabelSelector {
            match_labels: Some([(key.to_string(), "true".to_string())].into()),
            ..Default::default()
        });
        w
    };
    let missing = by_service("missing", None, "missing");
    validating_config(
        &client,
        "services",
        vec![
            by_service("hook", None, "endpoints"),
            by_service("external", Some(i32::from(hook.port)), "external"),
            missing,
        ],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    wait_refused(&server, &cms, &[("endpoints", "true")]).await;
    for (name, label, webhook) in [
        ("a", "endpoints", "hook.example.com"),
        ("b", "external", "external.example.com"),
    ] {
        let status = api_status(
            cms.create(&PostParams::default(), &cm(name, &[(label, "true")]))
                .await
                .expect_err("denied by the service's webhook"),
        );
        assert_eq!(
            status.message,
            format!("admission webhook \"{webhook}\" denied the request: via \"{name}\""),
        );
    }
    // A service that does not exist: the call fails (failurePolicy Fail).
    let status = api_status(
        cms.create(&PostParams::default(), &cm("c", &[("missing", "true")]))
            .await
            .expect_err("no such service"),
    );
    assert_eq!(status.code, 500);
    assert_eq!(
        status.message,
        "Internal error occurred: failed calling webhook \"missing.example.com\": failed to call webhook: Post \"https://missing.default.svc:443/check?timeout=10s\": service \"missing\" not found"
    );
}
