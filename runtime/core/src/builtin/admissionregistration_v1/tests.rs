//! Tests of the webhook configuration kinds. Expected messages are
//! upstream's: each test names the upstream test function (in
//! `pkg/apis/admissionregistration/validation/validation_test.go` unless
//! said otherwise) and the `name` of the cases it mirrors.

use serde_json::{Value, json};

use super::*;
use crate::resource::Resource as _;
use crate::validation::ErrorList;

fn lines(errs: &ErrorList) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

#[track_caller]
fn assert_has(errs: &ErrorList, line: &str) {
    assert!(
        lines(errs).iter().any(|l| l.contains(line)),
        "missing {line:?} in {:#?}",
        lines(errs)
    );
}

/// A validating configuration `config` of the given webhooks (JSON), with
/// `admissionReviewVersions: [v1beta1]` where a hook has none (upstream's
/// `newValidatingWebhookConfiguration(hooks, true)`); not defaulted.
fn validating(hooks: Value) -> ValidatingWebhookConfiguration {
    let mut c: ValidatingWebhookConfiguration =
        serde_json::from_value(json!({"metadata": {"name": "config"}, "webhooks": hooks}))
            .expect("configuration");
    for h in &mut c.webhooks {
        if h.admission_review_versions.is_empty() {
            h.admission_review_versions = vec!["v1beta1".into()];
        }
    }
    c
}

fn mutating(hooks: Value) -> MutatingWebhookConfiguration {
    let mut c: MutatingWebhookConfiguration =
        serde_json::from_value(json!({"metadata": {"name": "config"}, "webhooks": hooks}))
            .expect("configuration");
    for h in &mut c.webhooks {
        if h.admission_review_versions.is_empty() {
            h.admission_review_versions = vec!["v1beta1".into()];
        }
    }
    c
}

/// A hook named `webhook.k8s.io` with `https://example.com`, `None` side
/// effects and the given extra fields.
fn hook(extra: Value) -> Value {
    let mut h = json!({
        "name": "webhook.k8s.io",
        "clientConfig": {"url": "https://example.com"},
        "sideEffects": "None",
    });
    if let (Some(h), Some(extra)) = (h.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            h.insert(k.clone(), v.clone());
        }
    }
    h
}

fn create(hooks: Value) -> ErrorList {
    validating(hooks).validate_create()
}

#[test]
fn kind_facts() {
    let m = MutatingWebhookConfiguration::INFO;
    assert_eq!(m.api_version(), "admissionregistration.k8s.io/v1");
    assert_eq!(m.plural, "mutatingwebhookconfigurations");
    assert!(!m.namespaced());
    let v = ValidatingWebhookConfiguration::INFO;
    assert_eq!(v.plural, "validatingwebhookconfigurations");
    assert_eq!(v.kind, "ValidatingWebhookConfiguration");
    assert!(!v.namespaced());
    assert!(ValidatingWebhookConfiguration::bump_generation_on_spec_change());
    assert!(MutatingWebhookConfiguration::bump_generation_on_spec_change());
}

/// `pkg/printers/internalversion/printers.go`'s webhook configuration
/// columns: NAME, WEBHOOKS, AGE.
#[test]
fn printer_counts_webhooks() {
    let printer = ValidatingWebhookConfiguration::table_printer().expect("printer");
    let names: Vec<&str> = printer.columns.iter().map(|c| c.name).collect();
    assert_eq!(names, ["Name", "Webhooks", "Age"]);
    assert_eq!(printer.columns[1].type_, "integer");
    let obj = json!({
        "metadata": {"name": "c", "creationTimestamp": "2020-01-01T00:00:00Z"},
        "webhooks": [{"name": "a.b.c"}, {"name": "d.e.f"}],
    });
    let cells = (printer.cells)(&obj);
    assert_eq!(cells[0], "c");
    assert_eq!(cells[1], 2);
    assert_eq!((printer.cells)(&json!({"metadata": {"name": "x"}}))[1], 0);
    assert!(MutatingWebhookConfiguration::table_printer().is_some());
}

/// `pkg/apis/admissionregistration/v1/defaults.go`: failurePolicy Fail,
/// matchPolicy Equivalent, empty selectors, timeoutSeconds 10, rule scope
/// `*`, service port 443 and (mutating) reinvocationPolicy Never; set
/// values are kept.
#[test]
fn defaults() {
    let mut m: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": "m"},
        "webhooks": [{
            "name": "a.b.c",
            "clientConfig": {"service": {"namespace": "ns", "name": "svc"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }, {
            "name": "d.e.f",
            "clientConfig": {"url": "https://x.example"},
            "failurePolicy": "Ignore",
            "matchPolicy": "Exact",
            "timeoutSeconds": 5,
            "reinvocationPolicy": "IfNeeded",
            "rules": [{"scope": "Cluster"}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }]
    }))
    .expect("decode");
    m.default_fields();
    let got = serde_json::to_value(&m).expect("encode");
    let h = &got["webhooks"][0];
    assert_eq!(h["failurePolicy"], "Fail");
    assert_eq!(h["matchPolicy"], "Equivalent");
    assert_eq!(h["namespaceSelector"], json!({}));
    assert_eq!(h["objectSelector"], json!({}));
    assert_eq!(h["timeoutSeconds"], 10);
    assert_eq!(h["reinvocationPolicy"], "Never");
    assert_eq!(h["rules"][0]["scope"], "*");
    assert_eq!(h["clientConfig"]["service"]["port"], 443);
    assert!(h.get("sideEffects").is_some());
    let h = &got["webhooks"][1];
    assert_eq!(h["failurePolicy"], "Ignore");
    assert_eq!(h["matchPolicy"], "Exact");
    assert_eq!(h["timeoutSeconds"], 5);
    assert_eq!(h["reinvocationPolicy"], "IfNeeded");
    assert_eq!(h["rules"][0]["scope"], "Cluster");

    let mut v: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "webhooks": [{"name": "a.b.c", "clientConfig": {"url": "https://x.example"}}]
    }))
    .expect("decode");
    v.default_fields();
    let got = serde_json::to_value(&v).expect("encode");
    assert_eq!(got["webhooks"][0]["timeoutSeconds"], 10);
    assert!(got["webhooks"][0].get("reinvocationPolicy").is_none());
    // v1 defaults neither sideEffects nor admissionReviewVersions.
    assert!(got["webhooks"][0].get("sideEffects").is_none());
    assert_eq!(got["webhooks"][0]["admissionReviewVersions"], json!([]));
}

/// A defaulted valid configuration passes, and so does its update.
#[test]
fn valid_configuration() {
    let mut v = validating(json!([hook(json!({
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments", "deployments/scale"], "scope": "Namespaced"}],
        "namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]},
        "objectSelector": {"matchLabels": {"app": "web"}},
        "matchConditions": [{"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"}],
        "admissionReviewVersions": ["v1", "v1beta1"],
    }))]));
    v.default_fields();
    assert!(
        v.validate_create().is_empty(),
        "{:#?}",
        lines(&v.validate_create())
    );
    assert!(v.validate_update(&v.clone()).is_empty());
}

/// `TestValidateValidatingWebhookConfiguration`: "AdmissionReviewVersions
/// are required", "should fail on bad AdmissionReviewVersion value",
/// "should pass on mix of accepted and unaccepted AdmissionReviewVersion",
/// "should fail on invalid AdmissionReviewVersion", "should fail on
/// duplicate AdmissionReviewVersion".
#[test]
fn admission_review_versions() {
    let mut c = validating(json!([hook(json!({}))]));
    c.webhooks[0].admission_review_versions.clear();
    assert_has(
        &c.validate_create(),
        "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
    );
    assert_has(
        &create(json!([hook(json!({"admissionReviewVersions": ["0v"]}))])),
        "Invalid value: \"0v\": a DNS-1035 label",
    );
    assert!(
        create(json!([hook(
            json!({"admissionReviewVersions": ["v1beta1", "invalid-version"]})
        )]))
        .is_empty()
    );
    let errs = create(json!([hook(
        json!({"admissionReviewVersions": ["invalidVersion"]})
    )]));
    assert_has(
        &errs,
        "webhooks[0].admissionReviewVersions: Invalid value: ",
    );
    assert_has(&errs, "must include at least one of v1, v1beta1");
    assert_has(
        &create(json!([hook(
            json!({"admissionReviewVersions": ["v1beta1", "v1beta1"]})
        )])),
        "webhooks[0].admissionReviewVersions[1]: Invalid value: \"v1beta1\": duplicate version",
    );
}

/// "all Webhooks must have a fully qualified name", "Webhooks must have
/// unique names when created".
#[test]
fn webhook_names() {
    let errs = create(json!([
        hook(json!({})),
        hook(json!({"name": "k8s.io"})),
        hook(json!({"name": ""})),
    ]));
    assert_eq!(
        lines(&errs),
        [
            "webhooks[1].name: Invalid value: \"k8s.io\": should be a domain with at least three segments separated by dots",
            "webhooks[2].name: Required value",
        ]
    );
    let errs = create(json!([hook(json!({})), hook(json!({}))]));
    assert_eq!(
        lines(&errs),
        ["webhooks[1].name: Duplicate value: \"webhook.k8s.io\""]
    );
}

fn rule(ops: Value, resources: Value) -> Value {
    json!({"operations": ops, "apiGroups": ["a"], "apiVersions": ["a"], "resources": resources})
}

/// "Operations must not be empty or nil", "\"\" is NOT a valid operation",
/// "operation must be either create/update/delete/connect", "wildcard
/// operation cannot be mixed with other strings" and the resource cases
/// (`resource "*" can co-exist with resources that have subresources`,
/// `resource "*" cannot mix with resources that don't have subresources`,
/// "resource a/* cannot mix with a/x", "resource a/* can mix with a",
/// "resource */a cannot mix with x/a", "resource */* cannot mix with other
/// resources").
#[test]
fn rules() {
    // Go's nil operations: the field left out.
    let nil_ops = json!({"apiGroups": ["a"], "apiVersions": ["a"], "resources": ["a"]});
    let errs = create(json!([hook(
        json!({"rules": [rule(json!([]), json!(["a"])), nil_ops]})
    )]));
    assert_eq!(
        lines(&errs),
        [
            "webhooks[0].rules[0].operations: Required value",
            "webhooks[0].rules[1].operations: Required value",
        ]
    );
    assert_has(
        &create(json!([hook(
            json!({"rules": [rule(json!(["CREATE", ""]), json!(["a"]))]})
        )])),
        "webhooks[0].rules[0].operations[1]: Unsupported value: \"\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
    );
    assert_has(
        &create(json!([hook(
            json!({"rules": [rule(json!(["PATCH"]), json!(["a"]))]})
        )])),
        "Unsupported value: \"PATCH\"",
    );
    assert_has(
        &create(json!([hook(
            json!({"rules": [rule(json!(["CREATE", "*"]), json!(["a"]))]})
        )])),
        "if '*' is present, must not specify other operations",
    );
    let res = |r: Value| {
        create(json!([hook(
            json!({"rules": [rule(json!(["CREATE"]), r)]})
        )]))
    };
    assert!(res(json!(["*", "a/b", "a/*", "*/b"])).is_empty());
    assert_has(
        &res(json!(["*", "a"])),
        "if '*' is present, must not specify other resources without subresources",
    );
    assert_eq!(
        lines(&res(json!(["a/*", "a/x"]))),
        [
            "webhooks[0].rules[0].resources[1]: Invalid value: \"a/x\": if 'a/*' is present, must not specify a/x"
        ]
    );
    assert!(res(json!(["a/*", "a"])).is_empty());
    assert_eq!(
        lines(&res(json!(["*/a", "x/a"]))),
        [
            "webhooks[0].rules[0].resources[1]: Invalid value: \"x/a\": if '*/a' is present, must not specify x/a"
        ]
    );
    let errs = res(json!(["*/*", "a"]));
    assert_has(&errs, "webhooks[0].rules[0].resources: Invalid value: ");
    assert_has(
        &errs,
        "if '*/*' is present, must not specify other resources",
    );
    // validateRule: groups, versions and scope.
    let errs = create(json!([hook(json!({"rules": [{
        "operations": ["*"], "apiGroups": ["*", "apps"], "apiVersions": ["v1", ""],
        "resources": [""], "scope": "Global",
    }]}))]));
    assert_has(&errs, "webhooks[0].rules[0].apiGroups: Invalid value: ");
    assert_has(
        &errs,
        "if '*' is present, must not specify other API groups",
    );
    assert_has(&errs, "webhooks[0].rules[0].apiVersions[1]: Required value");
    assert_has(&errs, "webhooks[0].rules[0].resources[0]: Required value");
    assert_has(
        &errs,
        "webhooks[0].rules[0].scope: Unsupported value: \"Global\": supported values: \"*\", \"Cluster\", \"Namespaced\"",
    );
    let errs = create(json!([hook(json!({"rules": [{"operations": ["*"]}]}))]));
    assert_eq!(
        lines(&errs),
        [
            "webhooks[0].rules[0].apiGroups: Required value",
            "webhooks[0].rules[0].apiVersions: Required value",
            "webhooks[0].rules[0].resources: Required value",
        ]
    );
}

/// "FailurePolicy can only be \"Ignore\" or \"Fail\"", "SideEffects are
/// required", "SideEffects can only be \"None\" or \"NoneOnDryRun\" when
/// created", the timeout cases; `TestValidateMutatingWebhookConfiguration`'s
/// "ReinvocationPolicy can only be \"Never\" or \"IfNeeded\"" and the
/// matchPolicy check.
#[test]
fn policies_side_effects_and_timeouts() {
    assert_has(
        &create(json!([hook(json!({"failurePolicy": "other"}))])),
        "webhooks[0].failurePolicy: Unsupported value: \"other\": supported values: \"Fail\", \"Ignore\"",
    );
    assert_has(
        &create(json!([hook(json!({"matchPolicy": "other"}))])),
        "webhooks[0].matchPolicy: Unsupported value: \"other\": supported values: \"Equivalent\", \"Exact\"",
    );
    assert_has(
        &create(json!([hook(json!({"sideEffects": null}))])),
        "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
    );
    assert_has(
        &create(json!([hook(json!({"sideEffects": "other"}))])),
        "webhooks[0].sideEffects: Unsupported value: \"other\": supported values: \"None\", \"NoneOnDryRun\"",
    );
    for t in [31, 0, -1] {
        assert_eq!(
            lines(&create(json!([hook(json!({"timeoutSeconds": t}))]))),
            [format!(
                "webhooks[0].timeoutSeconds: Invalid value: {t}: the timeout value must be between 1 and 30 seconds"
            )]
        );
    }
    assert!(
        create(json!([
            hook(json!({"timeoutSeconds": 1})),
            hook(json!({"name": "webhook2.k8s.io", "timeoutSeconds": 15})),
            hook(json!({"name": "webhook3.k8s.io", "timeoutSeconds": 30})),
        ]))
        .is_empty()
    );
    let m = mutating(json!([hook(json!({"reinvocationPolicy": "other"}))]));
    assert_has(
        &m.validate_create(),
        "webhooks[0].reinvocationPolicy: Unsupported value: \"other\": supported values: \"IfNeeded\", \"Never\"",
    );
}

/// "both service and URL missing", "both service and URL provided",
/// "blank URL", "wrong scheme", "missing host", "fragment", "query",
/// "user", "just totally wrong" (the messages of
/// `staging/src/k8s.io/apiserver/pkg/util/webhook/validation.go`).
#[test]
fn client_config_url() {
    let url = |u: &str| create(json!([hook(json!({"clientConfig": {"url": u}}))]));
    assert_eq!(
        lines(&create(json!([hook(json!({"clientConfig": {}}))]))),
        ["webhooks[0].clientConfig: Required value: exactly one of url or service is required"]
    );
    assert_has(
        &create(json!([hook(json!({"clientConfig": {
            "url": "example.com/k8s/webhook",
            "service": {"namespace": "ns", "name": "n", "port": 443},
        }}))])),
        "[0].clientConfig: Required value: exactly one of url or service is required",
    );
    assert_has(
        &url(""),
        "webhooks[0].clientConfig.url: Invalid value: \"\": host must be specified; desired format: https://host[/path]",
    );
    assert_eq!(
        lines(&url("http://example.com")),
        [
            "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]"
        ]
    );
    assert_eq!(
        lines(&url("https:///fancy/webhook")),
        [
            "webhooks[0].clientConfig.url: Invalid value: \"\": host must be specified; desired format: https://host[/path]"
        ]
    );
    assert_eq!(
        lines(&url("https://example.com/#bookmark")),
        [
            "webhooks[0].clientConfig.url: Invalid value: \"bookmark\": fragments are not permitted in the URL"
        ]
    );
    assert_eq!(
        lines(&url("https://example.com?arg=value")),
        [
            "webhooks[0].clientConfig.url: Invalid value: \"arg=value\": query parameters are not permitted in the URL"
        ]
    );
    assert_eq!(
        lines(&url("https://harry.potter@example.com/")),
        [
            "webhooks[0].clientConfig.url: Invalid value: \"harry.potter\": user information is not permitted in the URL"
        ]
    );
    assert_has(
        &url("arg#backwards=thisis?html.index/port:host//:https"),
        "host must be specified",
    );
    assert!(url("https://example.com:8443/hook/path").is_empty());
    assert!(url("https://example.com/?").is_empty());
    assert_has(
        &url("https://example.com:x/"),
        "webhooks[0].clientConfig.url: Required value: url must be a valid URL: parse \"https://example.com:x/\": invalid port \":x\" after host; desired format: https://host[/path]",
    );
    assert_has(&url("://x"), "missing protocol scheme");
}

/// "path must start with slash", "path accepts slash", "path accepts no
/// trailing slash", "path fails //", "path no empty step", "path no empty
/// step 2", "path no non-subdomain", "invalid port 0", "invalid port
/// >65535".
#[test]
fn client_config_service() {
    let svc = |path: Option<&str>, port: i32| {
        let mut s = json!({"namespace": "ns", "name": "n", "port": port});
        if let Some(p) = path {
            s["path"] = json!(p);
        }
        create(json!([hook(json!({"clientConfig": {"service": s}}))]))
    };
    assert_eq!(
        lines(&svc(Some("foo/"), 443)),
        ["webhooks[0].clientConfig.service.path: Invalid value: \"foo/\": must start with a '/'"]
    );
    assert!(svc(Some("/"), 443).is_empty());
    assert!(svc(Some("/foo"), 443).is_empty());
    assert!(svc(None, 443).is_empty());
    assert_eq!(
        lines(&svc(Some("//"), 443)),
        [
            "webhooks[0].clientConfig.service.path: Invalid value: \"//\": segment[0] may not be empty"
        ]
    );
    assert_eq!(
        lines(&svc(Some("/foo//bar/"), 443)),
        [
            "webhooks[0].clientConfig.service.path: Invalid value: \"/foo//bar/\": segment[1] may not be empty"
        ]
    );
    assert_eq!(
        lines(&svc(Some("/foo/bar//"), 443)),
        [
            "webhooks[0].clientConfig.service.path: Invalid value: \"/foo/bar//\": segment[2] may not be empty"
        ]
    );
    assert_has(
        &svc(Some("/apis/foo.bar/v1alpha1/--bad"), 443),
        "webhooks[0].clientConfig.service.path: Invalid value: \"/apis/foo.bar/v1alpha1/--bad\": segment[3]: a lowercase RFC 1123 subdomain",
    );
    assert_has(
        &svc(Some("https://apis/foo.bar"), 0),
        "webhooks[0].clientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
    );
    assert_has(
        &svc(Some("https://apis/foo.bar"), 65536),
        "Invalid value: 65536: port is not valid: must be between 1 and 65535, inclusive",
    );
    let errs = create(json!([hook(
        json!({"clientConfig": {"service": {"port": 443}}})
    )]));
    assert_eq!(
        lines(&errs),
        [
            "webhooks[0].clientConfig.service.name: Required value: service name is required",
            "webhooks[0].clientConfig.service.namespace: Required value: service namespace is required",
        ]
    );
}

/// "single match condition must have a name", "all match conditions must
/// have a name", "single match condition must have a qualified name",
/// "expression is required", "expression is required to have some value",
/// "invalid expression" (our CEL parser words the error its own way),
/// "unique names same hook", "repeat names allowed across different
/// hooks", "max of 64 match conditions".
#[test]
fn match_conditions() {
    let mc = |conds: Value| create(json!([hook(json!({"matchConditions": conds}))]));
    assert_eq!(
        lines(&mc(json!([{"expression": "true"}]))),
        ["webhooks[0].matchConditions[0].name: Required value"]
    );
    assert_eq!(
        lines(&mc(json!([{"name": "-hello", "expression": "true"}]))),
        [
            "webhooks[0].matchConditions[0].name: Invalid value: \"-hello\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        ]
    );
    assert_eq!(
        lines(&mc(json!([{"name": "webhook.k8s.io"}]))),
        ["webhooks[0].matchConditions[0].expression: Required value"]
    );
    assert_eq!(
        lines(&mc(json!([{"name": "webhook.k8s.io", "expression": "  "}]))),
        ["webhooks[0].matchConditions[0].expression: Required value"]
    );
    let errs = mc(json!([{"name": "webhook.k8s.io", "expression": "object.x in [1, 2, "}]));
    assert_has(
        &errs,
        "webhooks[0].matchConditions[0].expression: Invalid value: \"object.x in [1, 2, \": compilation failed: ",
    );
    assert_eq!(
        lines(&mc(json!([
            {"name": "webhook.k8s.io", "expression": "true"},
            {"name": "webhook.k8s.io", "expression": "true"},
        ]))),
        ["webhooks[0].matchConditions[1].name: Duplicate value: \"webhook.k8s.io\""]
    );
    assert!(create(json!([
        hook(json!({"matchConditions": [{"name": "webhook.k8s.io", "expression": "true"}]})),
        hook(json!({"name": "webhook2.k8s.io", "matchConditions": [{"name": "webhook.k8s.io", "expression": "true"}]})),
    ]))
    .is_empty());
    let many: Vec<Value> = (0..65)
        .map(|i| json!({"name": format!("c{i}"), "expression": "true"}))
        .collect();
    assert_eq!(
        lines(&mc(json!(many))),
        ["webhooks[0].matchConditions: Too many: 65: must have at most 64 items"]
    );
}

/// metav1 `ValidateLabelSelector` on `namespaceSelector` and
/// `objectSelector` (upstream's `TestValidateLabelSelector` messages).
#[test]
fn selectors() {
    let errs = create(json!([hook(json!({
        "namespaceSelector": {"matchExpressions": [
            {"key": "a", "operator": "In"},
            {"key": "b", "operator": "Exists", "values": ["x"]},
            {"key": "c", "operator": "Near", "values": ["x"]},
            {"key": "-d", "operator": "NotIn", "values": ["-bad-"]},
        ]},
        "objectSelector": {"matchLabels": {"ok": "-no-"}},
    }))]));
    let p = "webhooks[0].namespaceSelector.matchExpressions";
    assert_has(
        &errs,
        &format!(
            "{p}[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{p}[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        ),
    );
    assert_has(
        &errs,
        &format!("{p}[2].operator: Invalid value: \"Near\": not a valid selector operator"),
    );
    assert_has(
        &errs,
        &format!("{p}[3].key: Invalid value: \"-d\": name part must consist of"),
    );
    assert_has(
        &errs,
        &format!("{p}[3].values[0]: Invalid value: \"-bad-\": a valid label must be"),
    );
    assert_has(
        &errs,
        "webhooks[0].objectSelector.matchLabels: Invalid value: \"-no-\": a valid label must be",
    );
}

/// `TestValidateValidatingWebhookConfigurationUpdate`: "should pass on
/// invalid AdmissionReviewVersion with invalid previous versions", "should
/// fail on invalid AdmissionReviewVersion with valid previous versions",
/// "Webhooks can have duplicate names when old config has duplicate
/// names", "Webhooks must compile CEL expressions with
/// StoredExpression environment if unchanged" (unchanged match conditions
/// are not checked again) and the side effects an old object already had.
#[test]
fn update_keeps_what_the_old_object_had() {
    let bad = |c: &mut ValidatingWebhookConfiguration| {
        c.webhooks[0].admission_review_versions = vec!["invalid-v1".into(), "invalid-v2".into()];
    };
    let mut old = validating(json!([hook(json!({"sideEffects": "Unknown"}))]));
    bad(&mut old);
    let mut new = old.clone();
    new.webhooks[0].timeout_seconds = Some(5);
    assert!(
        new.validate_update(&old).is_empty(),
        "{:#?}",
        lines(&new.validate_update(&old))
    );
    let valid_old = validating(json!([hook(json!({}))]));
    assert_has(
        &new.validate_update(&valid_old),
        "must include at least one of v1, v1beta1",
    );
    assert_has(
        &new.validate_update(&valid_old),
        "webhooks[0].sideEffects: Unsupported value: \"Unknown\"",
    );

    let dup = validating(json!([hook(json!({})), hook(json!({}))]));
    assert!(dup.validate_update(&dup.clone()).is_empty());
    assert_has(&dup.validate_update(&valid_old), "Duplicate value");

    let stored = validating(json!([hook(
        json!({"matchConditions": [{"name": "c", "expression": "a ||"}]})
    )]));
    assert!(stored.validate_update(&stored.clone()).is_empty());
    assert_has(&stored.validate_update(&valid_old), "compilation failed");
}

/// The configuration's own name is a DNS-1123 subdomain.
#[test]
fn configuration_name() {
    let mut c = validating(json!([]));
    c.metadata.name = "Bad_Name".into();
    assert_has(
        &c.validate_create(),
        "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain",
    );
}

/// `caBundle` is base64 on the wire and omitted when empty.
#[test]
fn ca_bundle_round_trip() {
    let c: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "webhooks": [
            {"name": "a.b.c", "clientConfig": {"url": "https://x", "caBundle": "Zm9v"}},
            {"name": "d.e.f", "clientConfig": {"url": "https://x"}},
        ]
    }))
    .expect("decode");
    assert_eq!(c.webhooks[0].client_config.ca_bundle.0, b"foo");
    let back = serde_json::to_value(&c).expect("encode");
    assert_eq!(back["webhooks"][0]["clientConfig"]["caBundle"], "Zm9v");
    assert!(
        back["webhooks"][1]["clientConfig"]
            .get("caBundle")
            .is_none()
    );
}
