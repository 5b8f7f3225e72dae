//! `admissionregistration.k8s.io/v1` webhook configurations as stored API
//! objects, end to end with kube-rs: a valid configuration is created with
//! upstream's defaults filled in, and bad webhook URLs get upstream's 422
//! Status; `kubectl get` shows NAME, WEBHOOKS and AGE.

mod common;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::api::{Api, ObjectMeta, PostParams};

fn api_status(err: kube::Error) -> Box<kube::core::Status> {
    match err {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn validating(name: &str, url: &str) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        webhooks: Some(vec![ValidatingWebhook {
            name: "check.example.com".into(),
            client_config: WebhookClientConfig {
                url: Some(url.into()),
                ..Default::default()
            },
            rules: Some(vec![RuleWithOperations {
                operations: Some(vec!["CREATE".into()]),
                api_groups: Some(vec![String::new()]),
                api_versions: Some(vec!["v1".into()]),
                resources: Some(vec!["configmaps".into()]),
                scope: None,
            }]),
            side_effects: "None".into(),
            admission_review_versions: vec!["v1".into()],
            ..Default::default()
        }]),
    }
}

#[tokio::test]
async fn webhook_configurations_are_stored_defaulted_and_validated() {
    let server = common::Server::start().await;
    let client = server.client().await;
    let vwcs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());

    let created = vwcs
        .create(
            &PostParams::default(),
            &validating("good", "https://hooks.example.com/validate"),
        )
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    let hook = &created.webhooks.as_ref().expect("webhooks")[0];
    assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(hook.match_policy.as_deref(), Some("Equivalent"));
    assert_eq!(hook.timeout_seconds, Some(10));
    assert!(hook.namespace_selector.is_some());
    assert!(hook.object_selector.is_some());
    let rules = hook.rules.as_ref().expect("rules");
    assert_eq!(rules[0].scope.as_deref(), Some("*"));
    let got = vwcs.get("good").await.expect("get");
    assert_eq!(got.webhooks, created.webhooks);

    // `kubectl get` prints upstream's columns: NAME, WEBHOOKS, AGE.
    let out =
        common::kubectl::Kubectl::new(&server).ok(&["get", "validatingwebhookconfigurations"]);
    let mut lines = out.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "WEBHOOKS", "AGE"], "{out}");
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row.get(..2), Some(&["good", "1"][..]), "{out}");

    // `http://`: upstream's ValidateWebhookURL message.
    let s = api_status(
        vwcs.create(
            &PostParams::default(),
            &validating("plain-http", "http://hooks.example.com/validate"),
        )
        .await
        .expect_err("http URL"),
    );
    assert_eq!(s.code, 422);
    assert_eq!(s.reason, "Invalid");
    assert_eq!(
        s.message,
        "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"plain-http\" is invalid: webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]"
    );

    // A fragment.
    let s = api_status(
        vwcs.create(
            &PostParams::default(),
            &validating("fragment", "https://hooks.example.com/validate#part"),
        )
        .await
        .expect_err("fragment"),
    );
    assert_eq!(s.code, 422);
    assert_eq!(
        s.message,
        "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"fragment\" is invalid: webhooks[0].clientConfig.url: Invalid value: \"part\": fragments are not permitted in the URL"
    );

    // A mutating configuration with a service reference gets port 443 and
    // reinvocationPolicy Never.
    let mwcs: Api<MutatingWebhookConfiguration> = Api::all(client);
    let m = MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some("mutate".into()),
            ..Default::default()
        },
        webhooks: Some(vec![MutatingWebhook {
            name: "mutate.example.com".into(),
            client_config: WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: "default".into(),
                    name: "hooks".into(),
                    path: Some("/mutate".into()),
                    port: None,
                }),
                ..Default::default()
            },
            side_effects: "NoneOnDryRun".into(),
            admission_review_versions: vec!["v1".into()],
            ..Default::default()
        }]),
    };
    let created = mwcs
        .create(&PostParams::default(), &m)
        .await
        .expect("create mutating");
    let hook = &created.webhooks.as_ref().expect("webhooks")[0];
    assert_eq!(hook.reinvocation_policy.as_deref(), Some("Never"));
    let service = hook.client_config.service.as_ref().expect("service");
    assert_eq!(service.port, Some(443));
}
