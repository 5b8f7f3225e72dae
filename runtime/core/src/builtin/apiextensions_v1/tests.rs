//! Tests of the CRD kind. Expected messages are upstream's; each test names
//! the upstream test or function it mirrors (in
//! `staging/src/k8s.io/apiextensions-apiserver`).

use serde_json::{Value, json};

use super::*;
use crate::resource::Resource as _;
use crate::validation::ErrorList;

/// A valid CRD `foos.example.com` with one version of the given schema.
fn crd_with(schema: Value) -> CustomResourceDefinition {
    let mut crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "foos.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"plural": "foos", "kind": "Foo"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema}
            }]
        }
    }))
    .expect("crd");
    crd.default_fields();
    crd.prepare_for_create();
    crd
}

fn crd() -> CustomResourceDefinition {
    crd_with(json!({"type": "object", "properties": {"spec": {"type": "object"}}}))
}

fn lines(errs: &ErrorList) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

fn has(errs: &ErrorList, line: &str) -> bool {
    lines(errs).iter().any(|l| l == line)
}

#[track_caller]
fn assert_has(errs: &ErrorList, line: &str) {
    assert!(has(errs, line), "missing {line:?} in {:#?}", lines(errs));
}

/// The schema path of the only version, as upstream reports it (the v1
/// conversion folds a schema shared by every version into
/// `spec.validation`).
const S: &str = "spec.validation.openAPIV3Schema";

#[test]
fn kind_facts() {
    let info = CustomResourceDefinition::INFO;
    assert_eq!(info.api_version(), "apiextensions.k8s.io/v1");
    assert_eq!(info.plural, "customresourcedefinitions");
    assert_eq!(info.singular, "customresourcedefinition");
    assert_eq!(info.short_names, ["crd", "crds"]);
    assert_eq!(info.categories, ["api-extensions"]);
    assert!(!info.namespaced());
    assert!(info.subresources.status);
    assert!(
        info.printer_columns.is_empty(),
        "default table: NAME, CREATED AT"
    );
    assert!(CustomResourceDefinition::table_printer().is_none());
    assert!(CustomResourceDefinition::bump_generation_on_spec_change());
}

/// `v1/defaults_test.go` (`TestDefaults`).
#[test]
fn defaults() {
    let mut crd: CustomResourceDefinition = serde_json::from_value(json!({
        "spec": {
            "names": {"plural": "foos", "kind": "Foo"},
            "versions": [{"name": "v1", "storage": true}],
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": {"service": {"namespace": "ns", "name": "svc"}},
                "conversionReviewVersions": ["v1"]
            }}
        },
        "status": {}
    }))
    .expect("crd");
    crd.default_fields();
    assert_eq!(crd.spec.names.singular, "foo");
    assert_eq!(crd.spec.names.list_kind, "FooList");
    let port = crd
        .spec
        .conversion
        .as_ref()
        .and_then(|c| c.webhook.as_ref())
        .and_then(|w| w.client_config.as_ref())
        .and_then(|c| c.service.as_ref())
        .and_then(|s| s.port);
    assert_eq!(port, Some(443));
    assert_eq!(
        crd.status.as_ref().map(|s| s.stored_versions.clone()),
        Some(vec!["v1".to_string()])
    );

    let mut plain = CustomResourceDefinition::default();
    plain.default_fields();
    assert_eq!(
        plain.spec.conversion.as_ref().map(|c| c.strategy.as_str()),
        Some("None")
    );
    assert_eq!(plain.spec.names.list_kind, "", "no kind, no listKind");
}

/// `registry/customresourcedefinition/strategy.go` (`PrepareForCreate`,
/// `PrepareForUpdate`), as `strategy_test.go` checks storedVersions.
#[test]
fn strategy_keeps_status_and_records_storage_versions() {
    let mut created = crd();
    created.status = Some(CustomResourceDefinitionStatus {
        conditions: vec![condition(ESTABLISHED, CONDITION_TRUE, "", "")],
        ..Default::default()
    });
    created.prepare_for_create();
    let status = created.status.clone().unwrap_or_default();
    assert!(status.conditions.is_empty(), "status cleared on create");
    assert_eq!(status.stored_versions, ["v1"]);
    let out = serde_json::to_value(&created).expect("encode");
    assert_eq!(
        out["status"],
        json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": ["v1"]})
    );

    let mut old = created.clone();
    if let Some(s) = old.status.as_mut() {
        s.accepted_names = old.spec.names.clone();
    }
    let mut new = old.clone();
    new.status = None;
    new.spec.versions[0].storage = false;
    new.spec.versions.push(CustomResourceDefinitionVersion {
        name: "v2".into(),
        served: true,
        storage: true,
        ..new.spec.versions[0].clone()
    });
    new.prepare_for_update(&old);
    let status = new.status.clone().unwrap_or_default();
    assert_eq!(status.stored_versions, ["v1", "v2"]);
    assert_eq!(status.accepted_names.kind, "Foo", "status comes from old");
    assert!(
        new.validate_update(&old).is_empty(),
        "{:#?}",
        lines(&new.validate_update(&old))
    );
}

#[test]
fn a_valid_crd_validates() {
    let errs = crd().validate_create();
    assert!(errs.is_empty(), "{:#?}", lines(&errs));
}

/// `TestValidateCustomResourceDefinition`: "must be spec.names.plural+..."
/// and "should be a domain with at least one dot".
#[test]
fn name_and_group() {
    let mut c = crd();
    c.metadata.name = "bars.example.com".into();
    assert_has(
        &c.validate_create(),
        "metadata.name: Invalid value: \"bars.example.com\": must be spec.names.plural+\".\"+spec.group",
    );
    let mut c = crd();
    c.spec.group = "example".into();
    c.metadata.name = "foos.example".into();
    assert_has(
        &c.validate_create(),
        "spec.group: Invalid value: \"example\": should be a domain with at least one dot",
    );
    c.spec.group = String::new();
    assert_has(&c.validate_create(), "spec.group: Required value");
}

/// `TestValidateCustomResourceDefinition`: names as DNS-1035 labels,
/// mixed-case kinds, kind and listKind distinct, scope.
#[test]
fn names_and_scope() {
    let mut c = crd();
    c.spec.names.short_names = vec!["Foo".into()];
    c.spec.names.categories = vec!["all".into(), "1x".into()];
    c.spec.names.list_kind = "Foo".into();
    c.spec.scope = "Global".into();
    let errs = c.validate_create();
    let dns = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    assert_has(
        &errs,
        &format!("spec.names.shortNames[0]: Invalid value: \"Foo\": {dns}"),
    );
    assert_has(
        &errs,
        &format!("spec.names.categories[1]: Invalid value: \"1x\": {dns}"),
    );
    assert_has(
        &errs,
        "spec.names.listKind: Invalid value: \"Foo\": kind and listKind may not be the same",
    );
    assert_has(
        &errs,
        "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"",
    );
    let mut c = crd();
    c.spec.names.kind = "Foo_Bar".into();
    c.spec.names.list_kind = "Foo_BarList".into();
    assert_has(
        &c.validate_create(),
        &format!(
            "spec.names.kind: Invalid value: \"Foo_Bar\": may have mixed case, but should otherwise match: {dns}"
        ),
    );
    let mut c = crd();
    c.spec.names.singular = String::new();
    c.spec.scope = String::new();
    let errs = c.validate_create();
    assert_has(&errs, "spec.names.singular: Required value");
    assert_has(&errs, "spec.scope: Required value");
}

/// `TestValidateCustomResourceDefinition`: versions.
#[test]
fn versions() {
    let mut c = crd();
    let mut v2 = c.spec.versions[0].clone();
    v2.name = "v1".into();
    c.spec.versions.push(v2);
    let errs = c.validate_create();
    assert!(
        lines(&errs)
            .iter()
            .any(|l| l.starts_with("spec.versions: Invalid value: ")
                && l.ends_with(": must contain unique version names"))
    );
    assert!(
        lines(&errs)
            .iter()
            .any(|l| l.ends_with(": must have exactly one version marked as storage version"))
    );
    let mut c = crd();
    c.spec.versions[0].name = "1".into();
    let errs = c.validate_create();
    assert!(lines(&errs).iter().any(|l| l.starts_with("spec.versions[0].name: Invalid value: \"1\": a DNS-1035 label")));
    let mut c = crd();
    c.spec.versions[0].schema = None;
    assert_has(
        &c.validate_create(),
        "spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required",
    );
    let mut c = crd();
    c.spec.versions[0].deprecation_warning = Some("old".into());
    assert_has(
        &c.validate_create(),
        "spec.versions[0].deprecationWarning: Invalid value: \"old\": can only be set for deprecated versions",
    );
}

/// `validatePreserveUnknownFields` and `ValidateCustomResourceDefinitionStoredVersions`.
#[test]
fn preserve_unknown_fields_and_stored_versions() {
    let mut c = crd();
    c.spec.preserve_unknown_fields = Some(true);
    assert_has(
        &c.validate_create(),
        "spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
    );
    let mut c = crd();
    c.status = None;
    assert_has(
        &c.validate_create(),
        "status.storedVersions: Invalid value: []: must have at least one stored version",
    );
    let old = crd();
    let mut c = old.clone();
    if let Some(s) = c.status.as_mut() {
        s.stored_versions = vec!["v0".into()];
    }
    let errs = c.validate_update(&old);
    assert_has(
        &errs,
        "status.storedVersions: Invalid value: [\"v0\"]: must have the storage version v1",
    );
    assert_has(
        &errs,
        "status.storedVersions[0]: Invalid value: \"v0\": missing from spec.versions; v0 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v0 and removes v0 from status.storedVersions",
    );
}

/// `ValidateCustomResourceDefinitionSpecUpdate`: group and plural always
/// immutable, scope and kind once established.
#[test]
fn immutable_fields() {
    let mut old = crd();
    let mut new = old.clone();
    new.spec.group = "other.example.com".into();
    new.spec.scope = "Cluster".into();
    let errs = new.validate_update(&old);
    assert_has(
        &errs,
        "spec.group: Invalid value: \"other.example.com\": field is immutable",
    );
    assert!(!has(
        &errs,
        "spec.scope: Invalid value: \"Cluster\": field is immutable"
    ));
    if let Some(s) = old.status.as_mut() {
        set_condition(s, ESTABLISHED, CONDITION_TRUE, "InitialNamesAccepted", "ok");
    }
    assert_has(
        &new.validate_update(&old),
        "spec.scope: Invalid value: \"Cluster\": field is immutable",
    );
}

/// `validateCustomResourceConversion` and `validateConversionReviewVersions`.
#[test]
fn conversion() {
    let mut c = crd();
    c.spec.conversion = Some(CustomResourceConversion {
        strategy: "None".into(),
        webhook: Some(WebhookConversion {
            client_config: Some(WebhookClientConfig {
                url: Some("https://x".into()),
                ..Default::default()
            }),
            conversion_review_versions: vec!["v1".into()],
        }),
    });
    let errs = c.validate_create();
    assert_has(
        &errs,
        "spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook",
    );
    assert_has(
        &errs,
        "spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook",
    );

    c.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            client_config: None,
            conversion_review_versions: vec!["v3".into()],
        }),
    });
    let errs = c.validate_create();
    assert_has(
        &errs,
        "spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook",
    );
    assert_has(
        &errs,
        "spec.conversion.conversionReviewVersions: Invalid value: [\"v3\"]: must include at least one of v1, v1beta1",
    );

    c.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            client_config: Some(WebhookClientConfig {
                url: Some("http://x/y?a=b".into()),
                ..Default::default()
            }),
            conversion_review_versions: vec!["v1".into()],
        }),
    });
    let errs = c.validate_create();
    assert_has(
        &errs,
        "spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
    );
    assert_has(
        &errs,
        "spec.conversion.webhookClientConfig.url: Invalid value: \"a=b\": query parameters are not permitted in the URL",
    );
}

/// `schema/validation_test.go` (`TestValidateStructural`) and
/// `TestValidateCustomResourceDefinition` "must not be empty for
/// specified object fields" / "array items".
#[test]
fn structural_types_required() {
    let c = crd_with(json!({
        "type": "object",
        "properties": {"a": {}, "b": {"type": "array", "items": {}}, "c": {"type": "array"}}
    }));
    let errs = c.validate_create();
    assert_has(
        &errs,
        &format!(
            "{S}.properties[a].type: Required value: must not be empty for specified object fields"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[b].items.type: Required value: must not be empty for specified array items"
        ),
    );
    assert_has(
        &errs,
        &format!("{S}.properties[c].items: Required value: must be specified"),
    );
    let c = crd_with(json!({"properties": {}}));
    assert_has(
        &c.validate_create(),
        &format!("{S}.type: Required value: must not be empty at the root"),
    );
    let c = crd_with(json!({"type": "string"}));
    assert_has(
        &c.validate_create(),
        &format!("{S}.type: Invalid value: \"string\": must be object at the root"),
    );
}

/// Two versions with different schemas are validated where they are.
#[test]
fn per_version_schema_paths() {
    let mut c = crd_with(json!({"type": "object", "properties": {"a": {}}}));
    let mut v2 = c.spec.versions[0].clone();
    v2.name = "v2".into();
    v2.storage = false;
    v2.schema = Some(CustomResourceValidation {
        open_api_v3_schema: Some(json!({"type": "object"})),
    });
    c.spec.versions.push(v2);
    assert_has(
        &c.validate_create(),
        "spec.versions[0].schema.openAPIV3Schema.properties[a].type: Required value: must not be empty for specified object fields",
    );
}

/// `TestValidateStructural`: junctors may not carry types, defaults,
/// descriptions or extensions; metadata may not appear under them; every
/// field they name must be specified.
#[test]
fn structural_junctors() {
    let c = crd_with(json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "properties": {"x": {"type": "string"}},
            "anyOf": [{"type": "object", "description": "d", "properties": {"metadata": {}}}],
            "not": {"x-kubernetes-preserve-unknown-fields": true}
        }},
        "oneOf": [{"properties": {"missing": {}}}]
    }));
    let errs = c.validate_create();
    assert_has(
        &errs,
        &format!("{S}.properties[spec].anyOf[0].type: Forbidden: must be empty to be structural"),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[spec].anyOf[0].description: Forbidden: must be empty to be structural"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[spec].anyOf[0].properties[metadata]: Forbidden: must not be specified in a nested context"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[spec].not.x-kubernetes-preserve-unknown-fields: Forbidden: must be false to be structural"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[missing]: Required value: because it is defined in {S}.oneOf[0].properties[missing]"
        ),
    );
}

/// `TestValidateStructural`: the two int-or-string patterns are allowed.
#[test]
fn int_or_string_patterns() {
    let c = crd_with(json!({
        "type": "object",
        "properties": {
            "a": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "b": {"x-kubernetes-int-or-string": true, "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^x"}]},
            "c": {"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}
        }
    }));
    let errs = c.validate_create();
    assert_eq!(
        lines(&errs),
        [format!(
            "{S}.properties[c].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"
        )]
    );
}

/// `TestValidateStructural`: metadata at the root restricts name and
/// generateName only; embedded resources need type object.
#[test]
fn metadata_and_embedded_resources() {
    let ok = crd_with(json!({
        "type": "object",
        "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}}}
    }));
    assert!(
        ok.validate_create().is_empty(),
        "{:#?}",
        lines(&ok.validate_create())
    );
    let c = crd_with(json!({
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
            "e": {"x-kubernetes-embedded-resource": true},
            "f": {"type": "object", "x-kubernetes-embedded-resource": true}
        }
    }));
    let errs = c.validate_create();
    assert_has(
        &errs,
        &format!(
            "{S}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[e].type: Required value: must be object if x-kubernetes-embedded-resource is true"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[f].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"
        ),
    );
}

/// `TestValidateCustomResourceDefinition`: uniqueItems, additionalProperties
/// with properties, unsupported keywords, x-kubernetes-preserve-unknown-fields
/// false.
#[test]
fn forbidden_keywords() {
    let c = crd_with(json!({
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "b": {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": false},
            "c": {"type": "string", "$ref": "#/x"},
            "d": {"type": "object", "x-kubernetes-preserve-unknown-fields": false},
            "e": {"type": "null"},
            "f": {"type": "foo"}
        }
    }));
    let errs = c.validate_create();
    assert_has(
        &errs,
        &format!(
            "{S}.properties[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[b].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        ),
    );
    assert_has(
        &errs,
        &format!("{S}.properties[c].$ref: Forbidden: $ref is not supported"),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[d].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[e].type: Forbidden: type cannot be set to null, use nullable as an alternative"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[f].type: Unsupported value: \"foo\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""
        ),
    );
    let c = crd_with(json!({"type": "object", "additionalProperties": {"type": "string"}}));
    assert_has(
        &c.validate_create(),
        &format!("{S}.additionalProperties: Forbidden: must not be used at the root"),
    );
}

/// `TestValidateCustomResourceDefinition` with the status subresource:
/// only some fields at the root; nullable never at the root.
#[test]
fn root_with_status_subresource() {
    let mut c = crd_with(json!({"type": "object", "nullable": true, "minProperties": 1}));
    c.spec.versions[0].subresources = Some(CustomResourceSubresources {
        status: Some(CustomResourceSubresourceStatus {}),
        scale: None,
    });
    let errs = c.validate_create();
    assert!(
        lines(&errs).iter().any(|l| l.starts_with(&format!("{S}: Invalid value: "))
            && l.ends_with("fields are allowed at the root of the schema if the status subresource is enabled")),
        "{:#?}",
        lines(&errs)
    );
    assert_has(
        &errs,
        &format!("{S}.nullable: Forbidden: nullable cannot be true at the root"),
    );
}

/// `TestValidateCustomResourceDefinition`: list types and map keys.
#[test]
fn list_types() {
    let c = crd_with(json!({
        "type": "object",
        "properties": {
            "a": {"type": "object", "x-kubernetes-list-type": "set"},
            "b": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}, "x-kubernetes-list-type": "map"},
            "c": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k", "z"]},
            "d": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-map-keys": ["k"]},
            "e": {"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "set"}
        }
    }));
    let errs = c.validate_create();
    assert_has(
        &errs,
        &format!(
            "{S}.properties[a].type: Invalid value: \"object\": must be array if x-kubernetes-list-type is specified"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[b].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[c].x-kubernetes-list-map-keys: Invalid value: [\"k\",\"z\"]: entries must all be names of item properties"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[c].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[d].x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[e].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set"
        ),
    );
}

/// `defaulting/validation.go` (`ValidateDefaults`) and the top-level
/// metadata rule of `specStandardValidatorV3`.
#[test]
fn defaults_in_schemas() {
    let c = crd_with(json!({
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "default": {"name": "x"}},
            "spec": {
                "type": "object",
                "default": {"a": 1, "unknown": true},
                "properties": {"a": {"type": "integer"}, "s": {"type": "string", "default": 3}}
            }
        }
    }));
    let errs = c.validate_create();
    assert_has(
        &errs,
        &format!(
            "{S}.properties[metadata].default: Forbidden: must not be set in top-level metadata"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}.properties[spec].default: Invalid value: {{\"a\":1,\"unknown\":true}}: must not have unknown fields"
        ),
    );
    assert!(
        lines(&errs).iter().any(|l| l.starts_with(&format!(
            "{S}.properties[spec].properties[s].default: Invalid value: \"integer\""
        ))),
        "{:#?}",
        lines(&errs)
    );
}

/// `ValidateCustomResourceDefinitionSubresources` and
/// `ValidateCustomResourceColumnDefinition`.
#[test]
fn subresources_and_columns() {
    let mut c = crd();
    c.spec.versions[0].subresources = Some(CustomResourceSubresources {
        status: None,
        scale: Some(CustomResourceSubresourceScale {
            spec_replicas_path: ".status.replicas".into(),
            status_replicas_path: "status.replicas".into(),
            label_selector_path: Some(".metadata.labels".into()),
        }),
    });
    c.spec.versions[0].additional_printer_columns = vec![CustomResourceColumnDefinition {
        name: "X".into(),
        type_: "time".into(),
        format: Some("uuid".into()),
        json_path: String::new(),
        ..Default::default()
    }];
    let errs = c.validate_create();
    assert_has(
        &errs,
        "spec.subresources.scale.specReplicasPath: Invalid value: \".status.replicas\": should be a json path under .spec",
    );
    assert_has(
        &errs,
        "spec.subresources.scale.statusReplicasPath: Invalid value: \"status.replicas\": must be a simple json path starting with .",
    );
    assert_has(
        &errs,
        "spec.subresources.scale.labelSelectorPath: Invalid value: \".metadata.labels\": should be a json path under either .spec or .status",
    );
    assert_has(
        &errs,
        "spec.additionalPrinterColumns[0].type: Invalid value: \"time\": must be one of boolean,date,integer,number,string",
    );
    assert_has(
        &errs,
        "spec.additionalPrinterColumns[0].format: Invalid value: \"uuid\": must be one of byte,date,date-time,double,float,int32,int64,password",
    );
    assert_has(
        &errs,
        "spec.additionalPrinterColumns[0].JSONPath: Required value",
    );
}

/// `ValidateCustomResourceSelectableFields`.
#[test]
fn selectable_fields() {
    let mut c = crd_with(json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "color": {"type": "string"}, "list": {"type": "array", "items": {"type": "string"}}
        }}}
    }));
    c.spec.versions[0].selectable_fields =
        [".spec.color", ".spec.list", ".spec.nope", ".spec.color"]
            .into_iter()
            .map(|p| SelectableField {
                json_path: p.into(),
            })
            .collect();
    let errs = c.validate_create();
    assert_has(
        &errs,
        "spec.selectableFields[1].jsonPath: Invalid value: \".spec.list\": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
    );
    assert!(lines(&errs).iter().any(|l| l.starts_with(
        "spec.selectableFields[2].jsonPath: Invalid value: \".spec.nope\": is an invalid path: "
    )));
    assert_has(
        &errs,
        "spec.selectableFields[3].jsonPath: Duplicate value: \".spec.color\"",
    );
}

/// `validateAPIApproval`.
#[test]
fn api_approval_for_protected_groups() {
    let mut c = crd();
    c.spec.group = "things.k8s.io".into();
    c.metadata.name = "foos.things.k8s.io".into();
    assert_has(
        &c.validate_create(),
        "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111",
    );
    c.metadata.annotations.insert(
        "api-approved.kubernetes.io".into(),
        "https://github.com/kubernetes/kubernetes/pull/1".into(),
    );
    assert!(c.validate_create().is_empty());
}

/// The static shape of `x-kubernetes-validations` rules (the CEL checks are
/// elsewhere).
#[test]
fn validation_rule_shape() {
    let c = crd_with(json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": " "},
            {"rule": "self.a\n|| true"},
            {"rule": "true", "reason": "Bad"},
            {"rule": "true", "fieldPath": ".nope"}
        ],
        "properties": {"a": {"type": "string"}}
    }));
    let errs = c.validate_create();
    let p = format!("{S}.x-kubernetes-validations");
    assert_has(
        &errs,
        &format!("{p}[0].rule: Required value: rule is not specified"),
    );
    assert_has(
        &errs,
        &format!(
            "{p}[1].message: Required value: message must be specified if rule contains line breaks"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{p}[2].reason: Unsupported value: \"Bad\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\""
        ),
    );
    assert_has(
        &errs,
        &format!("{p}[3].fieldPath: Invalid value: \".nope\": fieldPath must be a valid path"),
    );
}

/// `validation.go` (`ValidateCustomResourceDefinitionOpenAPISchema`):
/// `optionalOldSelf`, even `false`, may only be set on rules that read
/// `oldSelf`.
#[test]
fn optional_old_self_needs_old_self() {
    let c = crd_with(json!({
        "type": "object",
        "properties": {"spec": {"type": "object",
            "properties": {"a": {"type": "string"}},
            "x-kubernetes-validations": [
                {"rule": "has(self.a)", "optionalOldSelf": true},
                {"rule": "has(self.a)", "optionalOldSelf": false},
                {"rule": "!oldSelf.hasValue() || self == oldSelf.value()", "optionalOldSelf": true},
            ]}}
    }));
    let p = format!("{S}.properties[spec].x-kubernetes-validations");
    assert_eq!(
        lines(&c.validate_create()),
        [
            format!(
                "{p}[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
            ),
            format!(
                "{p}[1].optionalOldSelf: Invalid value: false: may not be set if oldSelf is not used in rule"
            ),
        ]
    );
}

/// `validation.go` (`withForbidOldSelfValidations`): below a list that is
/// not a `map` list, items have no old value, and a rule reading `oldSelf`
/// is refused (naming the highest such list).
#[test]
fn old_self_below_uncorrelatable_lists() {
    let rule = json!([{"rule": "self == oldSelf"}]);
    let c = crd_with(
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "atomic": {"type": "array", "items": {"type": "object",
                "properties": {"inner": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["k"],
                    "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}},
                              "x-kubernetes-validations": rule}}}}},
            "set": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 10,
                    "items": {"type": "string", "maxLength": 10, "x-kubernetes-validations": rule}},
            "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                    "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}},
                              "x-kubernetes-validations": rule}},
        }}}}),
    );
    let p = format!("{S}.properties[spec].properties");
    assert_eq!(
        lines(&c.validate_create()),
        [
            format!(
                "{p}[atomic].items.properties[inner].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within {p}[atomic]"
            ),
            format!(
                "{p}[set].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within {p}[set]"
            ),
        ]
    );
}

/// `helpers.go` (`SetCRDCondition`): the transition time changes with the
/// status only.
#[test]
fn set_condition_keeps_transition_time() {
    let mut status = CustomResourceDefinitionStatus::default();
    let t0 = Time(jiff::Timestamp::from_second(100).unwrap_or_default());
    let t1 = Time(jiff::Timestamp::from_second(200).unwrap_or_default());
    let cond = |status: &str, reason: &str| condition(ESTABLISHED, status, reason, "m");
    set_condition_at(&mut status, cond(CONDITION_FALSE, "Installing"), t0);
    set_condition_at(&mut status, cond(CONDITION_FALSE, "StillInstalling"), t1);
    assert_eq!(status.conditions.len(), 1);
    assert_eq!(status.conditions[0].last_transition_time, Some(t0));
    assert_eq!(status.conditions[0].reason, "StillInstalling");
    set_condition_at(
        &mut status,
        cond(CONDITION_TRUE, "InitialNamesAccepted"),
        t1,
    );
    assert_eq!(status.conditions[0].last_transition_time, Some(t1));
    set_condition(
        &mut status,
        NAMES_ACCEPTED,
        CONDITION_TRUE,
        "NoConflicts",
        "no conflicts found",
    );
    assert_eq!(status.conditions.len(), 2);
    assert!(status.conditions[1].last_transition_time.is_some());
}

fn named(
    name: &str,
    plural: &str,
    kind: &str,
    short: &[&str],
    accepted: bool,
) -> CustomResourceDefinition {
    let mut c = crd();
    c.metadata.name = format!("{name}-{plural}.example.com");
    c.spec.names = CustomResourceDefinitionNames {
        plural: plural.into(),
        singular: name.into(),
        short_names: short.iter().map(|s| s.to_string()).collect(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        categories: Vec::new(),
    };
    if accepted && let Some(s) = c.status.as_mut() {
        s.accepted_names = c.spec.names.clone();
    }
    c
}

/// `naming_controller_test.go` (`TestSync`): conflicts with the accepted
/// names of the group, reasons and messages.
#[test]
fn naming_conflicts() {
    let existing = named("bar", "bars", "Bar", &["b"], true);
    let fresh = named("baz", "bazs", "Baz", &["z"], false);
    let decision = calculate_names(&fresh, &[&existing]);
    assert_eq!(decision.accepted_names, fresh.spec.names);
    assert_eq!(
        (
            decision.names_accepted.status.as_str(),
            decision.names_accepted.reason.as_str(),
            decision.names_accepted.message.as_str()
        ),
        ("True", "NoConflicts", "no conflicts found")
    );
    assert_eq!(
        (
            decision.established.status.as_str(),
            decision.established.reason.as_str()
        ),
        ("False", "Installing")
    );

    let plural = named("other", "bars", "Other", &[], false);
    assert_eq!(
        accepted_names(&plural, &[&existing]),
        Err((
            "PluralConflict".to_string(),
            "\"bars\" is already in use".to_string()
        ))
    );
    let short = named("other", "others", "Other", &["b"], false);
    assert_eq!(
        accepted_names(&short, &[&existing]),
        Err((
            "ShortNamesConflict".to_string(),
            "\"b\" is already in use".to_string()
        ))
    );
    let kind = named("other", "others", "Bar", &[], false);
    let decision = calculate_names(&kind, &[&existing]);
    // Kind and listKind both conflict: the last check's reason stays.
    assert_eq!(decision.names_accepted.reason, "ListKindConflict");
    assert_eq!(
        decision.accepted_names.plural, "others",
        "free names are accepted"
    );
    assert_eq!(
        decision.accepted_names.kind, "",
        "the conflicting one is not"
    );
    assert_eq!(
        (
            decision.established.status.as_str(),
            decision.established.reason.as_str()
        ),
        ("False", "NotAccepted")
    );
    let list_kind = named("other", "others", "BarList", &[], false);
    assert_eq!(
        accepted_names(&list_kind, &[&existing]).map_err(|e| e.0),
        Err("KindConflict".to_string())
    );
    // Another group does not conflict; nor does the CRD with itself.
    let mut elsewhere = existing.clone();
    elsewhere.spec.group = "other.com".into();
    assert!(accepted_names(&plural, &[&elsewhere]).is_ok());
    assert!(accepted_names(&existing, &[&existing]).is_ok());
}

/// The published model: upstream's recursive `JSONSchemaProps`.
#[test]
fn openapi_model_of_the_schema() {
    let mut scheme = crate::scheme::Scheme::new();
    install(&mut scheme);
    let group = scheme
        .groups()
        .iter()
        .find(|g| g.name == GROUP)
        .expect("group");
    let doc = crate::openapi::group_version_document(group, "v1");
    let schemas = &doc["components"]["schemas"];
    let prefix = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.";
    let props = &schemas[format!("{prefix}JSONSchemaProps")];
    assert_eq!(
        props["properties"]["properties"]["additionalProperties"]["$ref"],
        json!(format!("#/components/schemas/{prefix}JSONSchemaProps"))
    );
    assert_eq!(
        props["properties"]["x-kubernetes-list-type"]["type"],
        "string"
    );
    let validation = &schemas[format!("{prefix}CustomResourceValidation")];
    assert!(
        validation["properties"]["openAPIV3Schema"]
            .to_string()
            .contains("JSONSchemaProps"),
        "{validation}"
    );
    for model in [
        "CustomResourceDefinition",
        "CustomResourceDefinitionSpec",
        "CustomResourceDefinitionVersion",
        "CustomResourceColumnDefinition",
        "WebhookClientConfig",
        "ValidationRule",
        "JSON",
    ] {
        assert!(schemas.get(format!("{prefix}{model}")).is_some(), "{model}");
    }
}

/// Every CRD of the Gateway API bundle decodes, re-encodes to the same
/// JSON, and is valid.
#[test]
fn gateway_api_crds_round_trip_and_validate() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/gateway-api/crds");
    let dir = if dir.exists() {
        dir
    } else {
        std::path::PathBuf::from("/work/shared/data/gateway-api/crds")
    };
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("gateway-api CRDs (/work/shared/data/gateway-api/crds)")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    entries.sort();
    let mut checked = 0;
    for path in entries {
        let text = std::fs::read_to_string(&path).expect("read");
        let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).expect("yaml");
        for value in docs {
            if value["kind"] != "CustomResourceDefinition" {
                continue;
            }
            let mut original = value.clone();
            if let Some(map) = original.as_object_mut() {
                map.remove("apiVersion");
                map.remove("kind");
            }
            let crd: CustomResourceDefinition = serde_json::from_value(value).expect("decode");
            let encoded = serde_json::to_value(&crd).expect("encode");
            assert_eq!(encoded, original, "{} round-trips", path.display());
            let mut created = crd.clone();
            created.default_fields();
            created.prepare_for_create();
            let errs = created.validate_create();
            assert!(errs.is_empty(), "{}: {:#?}", path.display(), lines(&errs));
            let errs = created.validate_update(&created);
            assert!(errs.is_empty(), "{}: {:#?}", path.display(), lines(&errs));
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} CRDs checked");
}

/// `validation.go` (`validateCustomResourceDefinitionCEL` and
/// `getCostErrorMessage`): a rule over an unbounded list of unbounded
/// strings is refused at write time, for the rule and for the schema's
/// total; bounds make it acceptable. A rule that does not parse is
/// refused too.
#[test]
fn cel_rules_are_compiled_and_their_cost_bounded() {
    let schema = |hosts: Value| {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "hosts": hosts}}}})
    };
    let rule = json!([{"rule": "self.all(h, h.matches('^[a-z.]+$'))"}]);
    let unbounded = crd_with(schema(json!({
        "type": "array", "items": {"type": "string"}, "x-kubernetes-validations": rule
    })));
    let errs = unbounded.validate_create();
    let hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    assert_has(
        &errs,
        &format!(
            "{S}.properties[spec].properties[hosts].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {hint}"
        ),
    );
    assert_has(
        &errs,
        &format!(
            "{S}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {hint}"
        ),
    );
    let bounded = crd_with(schema(json!({
        "type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 253},
        "x-kubernetes-validations": rule
    })));
    assert!(
        bounded.validate_create().is_empty(),
        "{:?}",
        lines(&bounded.validate_create())
    );
    let broken = crd_with(schema(json!({
        "type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 253},
        "x-kubernetes-validations": [{"rule": "self.all(h, "}]
    })));
    let errs = broken.validate_create();
    assert!(
        lines(&errs).iter().any(|l| l.starts_with(&format!(
            "{S}.properties[spec].properties[hosts].x-kubernetes-validations[0].rule: Invalid value: \"self.all(h, \": compilation failed: "
        ))),
        "{:?}",
        lines(&errs)
    );
}

/// `validation.go` (`getCostErrorMessage`): under 100 times the per-rule
/// limit the factor is printed, `%.1fx`, or `%fx` under 1.5. The costs are
/// cel-go's: per item, `@not_strictly_false` 2, `&&` 1, the item 1 and
/// `matches` ceil((3145726 + 1) * 0.1) * ceil(8 * 0.25) = 629146; plus 2.
#[test]
fn cel_rule_cost_factors() {
    let list = |max: i64| {
        crd_with(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "hosts": {"type": "array", "maxItems": max, "items": {"type": "string"},
                      "x-kubernetes-validations": [{"rule": "self.all(x, x.matches('^[a-z]+$'))"}]}}}}}),
        )
    };
    let hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    let at = format!("{S}.properties[spec].properties[hosts].x-kubernetes-validations[0].rule");
    // 10 items: 6291502, within the limit.
    assert!(list(10).validate_create().is_empty());
    // 100 items: 62915002.
    assert_eq!(
        lines(&list(100).validate_create()),
        [format!(
            "{at}: Forbidden: estimated rule cost exceeds budget by factor of 6.3x {hint}"
        )]
    );
    // 20 items: 12583002.
    assert_eq!(
        lines(&list(20).validate_create()),
        [format!(
            "{at}: Forbidden: estimated rule cost exceeds budget by factor of 1.258300x {hint}"
        )]
    );
}

/// `validation.go` (`getExpressionCost`, `CELSchemaContext`): a rule under
/// an unbounded list runs as many times as items of the smallest size fit
/// in a request (3 MiB / (2 + 1) for `{}`); bounding the list bounds it.
#[test]
fn cel_rule_cost_cardinality() {
    let crd = |max_items: Option<i64>| {
        let mut list = json!({"type": "array", "items": {"type": "object",
            "properties": {"name": {"type": "string", "maxLength": 253}},
            "x-kubernetes-validations": [{"rule": "self.name.matches('^[a-z]+$')"}]}});
        if let Some(m) = max_items {
            list["maxItems"] = m.into();
        }
        crd_with(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"items": list}}}}),
        )
    };
    let hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    // 206 per run, times 1048576 runs: over the rule's limit, and over
    // the schema's.
    let at =
        format!("{S}.properties[spec].properties[items].items.x-kubernetes-validations[0].rule");
    assert_eq!(
        lines(&crd(None).validate_create()),
        [
            format!(
                "{at}: Forbidden: estimated rule cost exceeds budget by factor of 21.6x {hint}"
            ),
            format!(
                "{at}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            ),
            format!(
                "{S}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of 2.2x {hint}"
            ),
        ]
    );
    assert!(crd(Some(16)).validate_create().is_empty());
}

/// `validation.go` (`TotalCost`, `StaticEstimatedCRDCostLimit`): rules
/// each within the limit may together exceed the schema's; the (at most 4)
/// costliest are named, and the total is reported on the schema.
#[test]
fn cel_rule_cost_total() {
    // Each rule costs 14 * 629150 + 2 = 8808102; 12 of them 105697224.
    let rules: Vec<Value> = (0..12)
        .map(|i| json!({"rule": format!("self.all(x, x.matches('^[a-z]+$')) || {i} == 0")}))
        .collect();
    let c = crd_with(
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "hosts": {"type": "array", "maxItems": 14, "items": {"type": "string"},
                  "x-kubernetes-validations": rules}}}}}),
    );
    let errs = lines(&c.validate_create());
    let at = format!("{S}.properties[spec].properties[hosts].x-kubernetes-validations");
    let hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    assert_eq!(
        errs,
        [
            format!(
                "{at}[0].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            ),
            format!(
                "{at}[1].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            ),
            format!(
                "{at}[2].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            ),
            format!(
                "{at}[3].rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            ),
            format!(
                "{S}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of 1.056972x {hint}"
            ),
        ]
    );
}

/// Every rule of every Gateway API CRD goes through the cost estimator,
/// and none is refused (upstream serves these CRDs).
#[test]
fn gateway_api_rules_are_within_cost_limits() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/gateway-api/crds");
    let dir = if dir.exists() {
        dir
    } else {
        std::path::PathBuf::from("/work/shared/data/gateway-api/crds")
    };
    let mut estimated = 0;
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("gateway-api CRDs")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("read");
        let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).expect("yaml");
        for doc in docs
            .iter()
            .filter(|d| d["kind"] == "CustomResourceDefinition")
        {
            for version in doc["spec"]["versions"].as_array().into_iter().flatten() {
                let schema = &version["schema"]["openAPIV3Schema"];
                let (errs, rules, total) = validation::schema_rule_costs(schema);
                assert!(
                    errs.is_empty(),
                    "{} {}: {:#?}",
                    path.display(),
                    version["name"],
                    lines(&errs)
                );
                assert!(total <= crate::apiextensions::cost::STATIC_ESTIMATED_CRD_COST_LIMIT);
                estimated += rules;
            }
        }
    }
    assert!(estimated >= 100, "only {estimated} rules estimated");
}

/// `validation.go` (`suppressExpressionCostForUnchangedSchema`): on update,
/// a version whose schema did not change keeps its rules even over the
/// per-rule limit (the schema's total still applies); a changed schema is
/// checked again.
#[test]
fn unchanged_schemas_keep_costly_rules() {
    let list = |max: i64| {
        crd_with(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "hosts": {"type": "array", "maxItems": max, "items": {"type": "string"},
                      "x-kubernetes-validations": [{"rule": "self.all(x, x.matches('^[a-z]+$'))"}]}}}}}),
        )
    };
    let old = list(100);
    assert_eq!(old.validate_create().len(), 1);
    let mut relabeled = old.clone();
    relabeled
        .metadata
        .labels
        .insert("team".into(), "net".into());
    assert!(relabeled.validate_update(&old).is_empty());
    let hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    assert_eq!(
        lines(&list(120).validate_update(&old)),
        [format!(
            "{S}.properties[spec].properties[hosts].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of 7.5x {hint}"
        )]
    );
}
