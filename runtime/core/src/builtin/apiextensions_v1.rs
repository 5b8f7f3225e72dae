//! `apiextensions.k8s.io/v1`: CustomResourceDefinition, the kind that
//! declares new resources.
//!
//! This module holds the types (every field of upstream's v1 API, so that
//! objects round-trip), upstream's defaulting (`SetDefaults_*` of the v1
//! package), the registry strategy (status kept out of spec writes,
//! `status.storedVersions` following the storage version) and the static
//! validation of [`validation`] (upstream's
//! `ValidateCustomResourceDefinition` and
//! `ValidateCustomResourceDefinitionUpdate`, with the structural-schema
//! checks).
//!
//! Two pure helpers serve the server's CRD controllers: [`set_condition`]
//! (upstream's `SetCRDCondition`) and [`calculate_names`] /
//! [`accepted_names`] (the naming controller's decision).
//!
//! `spec.versions[*].schema.openAPIV3Schema` stays a [`serde_json::Value`]
//! in Rust, so that every `JSONSchemaProps` field round-trips untouched; its
//! published OpenAPI model is upstream's recursive `JSONSchemaProps`
//! ([`JsonSchemaPropsModel`]), so that `kubectl explain` can walk it.
//!
//! Not covered here: compiling and cost-estimating the CEL rules of
//! `x-kubernetes-validations` (another module's job); only their static
//! shape (rule present, message without line breaks, reason, fieldPath) is
//! checked.

pub mod validation;

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Resource;
use crate::meta::{ObjectMeta, Time};
use crate::resource::Strategy;
use crate::scheme::{Group, KindBuilder, Scheme};
use crate::validation::ErrorList;

/// The group name.
pub const GROUP: &str = "apiextensions.k8s.io";

/// `spec.scope` of a cluster-wide custom resource.
pub const CLUSTER_SCOPED: &str = "Cluster";
/// `spec.scope` of a namespaced custom resource.
pub const NAMESPACE_SCOPED: &str = "Namespaced";
/// `spec.conversion.strategy`: only `apiVersion` changes between versions.
pub const NONE_CONVERTER: &str = "None";
/// `spec.conversion.strategy`: a webhook converts between versions.
pub const WEBHOOK_CONVERTER: &str = "Webhook";

/// Condition type: the API is served.
pub const ESTABLISHED: &str = "Established";
/// Condition type: the names do not conflict with other CRDs of the group.
pub const NAMES_ACCEPTED: &str = "NamesAccepted";
/// Condition type: the schema is not structural.
pub const NON_STRUCTURAL_SCHEMA: &str = "NonStructuralSchema";
/// Condition type: the CRD is being deleted.
pub const TERMINATING: &str = "Terminating";
/// Condition type: the `api-approved.kubernetes.io` annotation is missing
/// or invalid for a protected group.
pub const KUBERNETES_API_APPROVAL_POLICY_CONFORMANT: &str = "KubernetesAPIApprovalPolicyConformant";

/// Condition status `True`.
pub const CONDITION_TRUE: &str = "True";
/// Condition status `False`.
pub const CONDITION_FALSE: &str = "False";
/// Condition status `Unknown`.
pub const CONDITION_UNKNOWN: &str = "Unknown";

/// Installs the group.
pub fn install(scheme: &mut Scheme) {
    scheme.add_group(
        Group::new(GROUP, &["v1"])
            .model_prefix("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions")
            .title("Kubernetes")
            .kind(
                KindBuilder::<CustomResourceDefinition>::new()
                    .version::<CustomResourceDefinition>()
                    .build(),
            ),
    );
}

/// CustomResourceDefinition represents a resource that should be exposed
/// on the API server. Its name MUST be in the format
/// `<.spec.name>.<.spec.group>`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "apiextensions.k8s.io",
    version = "v1",
    cluster,
    short_names = ["crd", "crds"],
    categories = ["api-extensions"],
    subresource_status,
    openapi_name = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"
)]
pub struct CustomResourceDefinition {
    /// Standard object's metadata. More info:
    /// https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// spec describes how the user wants the resources to appear
    #[serde(default)]
    pub spec: CustomResourceDefinitionSpec,
    /// status indicates the actual state of the CustomResourceDefinition
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<CustomResourceDefinitionStatus>,
}

/// CustomResourceDefinitionSpec describes how a user wants their resource
/// to appear.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceDefinitionSpec {
    /// group is the API group of the defined custom resource. The custom
    /// resources are served under `/apis/<group>/...`. Must match the name
    /// of the CustomResourceDefinition (in the form `<names.plural>.<group>`).
    #[serde(default)]
    pub group: String,
    /// names specify the resource and kind names for the custom resource.
    #[serde(default)]
    pub names: CustomResourceDefinitionNames,
    /// scope indicates whether the defined custom resource is cluster- or
    /// namespace-scoped. Allowed values are `Cluster` and `Namespaced`.
    #[serde(default)]
    pub scope: String,
    /// versions is the list of all API versions of the defined custom
    /// resource.
    #[serde(default)]
    pub versions: Vec<CustomResourceDefinitionVersion>,
    /// conversion defines conversion settings for the CRD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion: Option<CustomResourceConversion>,
    /// preserveUnknownFields indicates that object fields which are not
    /// specified in the OpenAPI schema should be preserved when persisting
    /// to storage. Must be false (or unset) in v1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_unknown_fields: Option<bool>,
}

/// CustomResourceDefinitionNames indicates the names to serve this
/// CustomResourceDefinition.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceDefinitionNames {
    /// plural is the plural name of the resource to serve. Must be all
    /// lowercase.
    #[serde(default)]
    pub plural: String,
    /// singular is the singular name of the resource. It must be all
    /// lowercase. Defaults to lowercased `kind`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub singular: String,
    /// shortNames are short names for the resource, exposed in API
    /// discovery documents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,
    /// kind is the serialized kind of the resource. It is normally CamelCase
    /// and singular.
    #[serde(default)]
    pub kind: String,
    /// listKind is the serialized kind of the list for this resource.
    /// Defaults to "`kind`List".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub list_kind: String,
    /// categories is a list of grouped resources this custom resource
    /// belongs to (e.g. 'all').
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
}

/// CustomResourceDefinitionVersion describes a version for CRD.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceDefinitionVersion {
    /// name is the version name, e.g. "v1", "v2beta1", etc.
    #[serde(default)]
    pub name: String,
    /// served is a flag enabling/disabling this version from being served
    /// via REST APIs
    #[serde(default)]
    pub served: bool,
    /// storage indicates this version should be used when persisting custom
    /// resources to storage. There must be exactly one version with
    /// storage=true.
    #[serde(default)]
    pub storage: bool,
    /// deprecated indicates this version of the custom resource API is
    /// deprecated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
    /// deprecationWarning overrides the default warning returned to API
    /// clients. May only be set when `deprecated` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation_warning: Option<String>,
    /// schema describes the schema used for validation, pruning, and
    /// defaulting of this version of the custom resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<CustomResourceValidation>,
    /// subresources specify what subresources this version of the defined
    /// custom resource have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresources: Option<CustomResourceSubresources>,
    /// additionalPrinterColumns specifies additional columns returned in
    /// Table output. If no columns are specified, a single column
    /// displaying the age of the custom resource is used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_printer_columns: Vec<CustomResourceColumnDefinition>,
    /// selectableFields specifies paths to fields that may be used as field
    /// selectors. A maximum of 8 selectable fields are allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selectable_fields: Vec<SelectableField>,
}

impl CustomResourceDefinitionVersion {
    /// The version's `openAPIV3Schema`, if it has one.
    pub fn open_api_v3_schema(&self) -> Option<&Value> {
        self.schema.as_ref()?.open_api_v3_schema.as_ref()
    }

    /// Whether the version declares the status subresource.
    pub fn has_status_subresource(&self) -> bool {
        self.subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some())
    }
}

/// CustomResourceValidation is a list of validation methods for
/// CustomResources.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CustomResourceValidation {
    /// openAPIV3Schema is the OpenAPI v3 schema to use for validation and
    /// pruning. Kept as JSON, so that every field round-trips.
    #[serde(
        default,
        rename = "openAPIV3Schema",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<JsonSchemaPropsModel>")]
    pub open_api_v3_schema: Option<Value>,
}

/// CustomResourceSubresources defines the status and scale subresources
/// for CustomResources.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceSubresources {
    /// status indicates the custom resource should serve a `/status`
    /// subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<CustomResourceSubresourceStatus>,
    /// scale indicates the custom resource should serve a `/scale`
    /// subresource that returns an `autoscaling/v1` Scale object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<CustomResourceSubresourceScale>,
}

/// CustomResourceSubresourceStatus defines how to serve the status
/// subresource for CustomResources (it has no fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CustomResourceSubresourceStatus {}

/// CustomResourceSubresourceScale defines how to serve the scale
/// subresource for CustomResources.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceSubresourceScale {
    /// specReplicasPath defines the JSON path inside of a custom resource
    /// that corresponds to Scale `spec.replicas`. Only JSON paths without
    /// the array notation are allowed. Must be a JSON Path under `.spec`.
    #[serde(default)]
    pub spec_replicas_path: String,
    /// statusReplicasPath defines the JSON path inside of a custom resource
    /// that corresponds to Scale `status.replicas`. Must be a JSON Path
    /// under `.status`.
    #[serde(default)]
    pub status_replicas_path: String,
    /// labelSelectorPath defines the JSON path inside of a custom resource
    /// that corresponds to Scale `status.selector`. Must be a JSON Path
    /// under `.status` or `.spec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector_path: Option<String>,
}

/// CustomResourceColumnDefinition specifies a column for server side
/// printing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceColumnDefinition {
    /// name is a human readable name for the column.
    #[serde(default)]
    pub name: String,
    /// type is an OpenAPI type definition for this column: `integer`,
    /// `number`, `string`, `boolean` or `date`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// format is an optional OpenAPI type definition for this column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// description is a human readable description of this column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// priority is an integer defining the relative importance of this
    /// column compared to others (0 is highest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// jsonPath is a simple JSON path evaluated against each custom
    /// resource to produce the value for this column.
    #[serde(default)]
    pub json_path: String,
}

/// SelectableField specifies the JSON path of a field that may be used
/// with field selectors.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectableField {
    /// jsonPath is a simple JSON path which is evaluated against each
    /// custom resource to produce a field selector value. It must point to
    /// a string, integer or boolean field.
    #[serde(default)]
    pub json_path: String,
}

/// CustomResourceConversion describes how to convert different versions of
/// a CR.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceConversion {
    /// strategy specifies how custom resources are converted between
    /// versions: `None` or `Webhook`.
    #[serde(default)]
    pub strategy: String,
    /// webhook describes how to call the conversion webhook. Required when
    /// `strategy` is set to `Webhook`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookConversion>,
}

/// WebhookConversion describes how to call a conversion webhook.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookConversion {
    /// clientConfig is the instructions for how to call the webhook if
    /// strategy is `Webhook`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_config: Option<WebhookClientConfig>,
    /// conversionReviewVersions is an ordered list of preferred
    /// `ConversionReview` versions the Webhook expects.
    #[serde(default)]
    pub conversion_review_versions: Vec<String>,
}

/// WebhookClientConfig contains the information to make a TLS connection
/// with the webhook.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookClientConfig {
    /// url gives the location of the webhook, in standard URL form
    /// (`scheme://host:port/path`). Exactly one of `url` or `service` must
    /// be specified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// service is a reference to the service for this webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceReference>,
    /// caBundle is a PEM encoded CA bundle which will be used to validate
    /// the webhook's server certificate (base64 in JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub ca_bundle: Option<String>,
}

/// ServiceReference holds a reference to a Service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReference {
    /// namespace is the namespace of the service.
    #[serde(default)]
    pub namespace: String,
    /// name is the name of the service.
    #[serde(default)]
    pub name: String,
    /// path is an optional URL path at which the webhook will be contacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// port is an optional service port at which the webhook will be
    /// contacted. Defaults to 443.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// CustomResourceDefinitionStatus indicates the state of the
/// CustomResourceDefinition.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceDefinitionStatus {
    /// conditions indicate state for particular aspects of a
    /// CustomResourceDefinition
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<CustomResourceDefinitionCondition>,
    /// acceptedNames are the names that are actually being used to serve
    /// discovery. They may be different than the names in spec.
    #[serde(default)]
    pub accepted_names: CustomResourceDefinitionNames,
    /// storedVersions lists all versions of CustomResources that were ever
    /// persisted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stored_versions: Vec<String>,
}

/// CustomResourceDefinitionCondition contains details for the current
/// condition of this pod.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomResourceDefinitionCondition {
    /// type is the type of the condition. Types include Established,
    /// NamesAccepted and Terminating.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// status is the status of the condition. Can be True, False, Unknown.
    #[serde(default)]
    pub status: String,
    /// lastTransitionTime last time the condition transitioned from one
    /// status to another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// reason is a unique, one-word, CamelCase reason for the condition's
    /// last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// message is a human-readable message indicating details about last
    /// transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The published OpenAPI model of `openAPIV3Schema`: upstream's
/// `JSONSchemaProps`, recursive through `$ref`. Only a schema: the values
/// themselves are kept as JSON.
pub struct JsonSchemaPropsModel;

/// `JSON`: any JSON value (the model of `default`, `enum` and `example`).
struct JsonModel;

/// `JSONSchemaPropsOrArray`, `JSONSchemaPropsOrBool` and
/// `JSONSchemaPropsOrStringArray`: models that only describe themselves.
struct OrModel<const N: u8>;

impl JsonSchema for JsonModel {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "JSON".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "JSON represents any valid JSON value. These types are supported: bool, int64, float64, string, []interface{}, map[string]interface{} and nil."
        })
    }
}

impl<const N: u8> JsonSchema for OrModel<N> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        match N {
            0 => "JSONSchemaPropsOrArray".into(),
            1 => "JSONSchemaPropsOrBool".into(),
            _ => "JSONSchemaPropsOrStringArray".into(),
        }
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let description = match N {
            0 => {
                "JSONSchemaPropsOrArray represents a value that can either be a JSONSchemaProps or an array of JSONSchemaProps. Mainly here for serialization purposes."
            }
            1 => {
                "JSONSchemaPropsOrBool represents JSONSchemaProps or a boolean value. Defaults to true for the boolean property."
            }
            _ => "JSONSchemaPropsOrStringArray represents a JSONSchemaProps or a string array.",
        };
        schemars::json_schema!({ "description": description })
    }
}

/// ExternalDocumentation allows referencing an external resource for
/// extended documentation.
#[derive(JsonSchema)]
#[allow(dead_code)]
#[schemars(rename = "ExternalDocumentation")]
struct ExternalDocumentation {
    /// A short description of the target documentation.
    description: Option<String>,
    /// The URL of the target documentation.
    url: Option<String>,
}

/// ValidationRule describes a validation rule written in the CEL expression
/// language.
#[derive(JsonSchema)]
#[allow(dead_code)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ValidationRule")]
struct ValidationRule {
    /// rule represents the expression which will be evaluated by CEL.
    rule: String,
    /// message represents the message displayed when validation fails.
    message: Option<String>,
    /// messageExpression declares a CEL expression that evaluates to the
    /// validation failure message that is returned when this rule fails.
    message_expression: Option<String>,
    /// reason provides a machine-readable validation failure reason:
    /// FieldValueInvalid, FieldValueForbidden, FieldValueRequired or
    /// FieldValueDuplicate.
    reason: Option<String>,
    /// fieldPath represents the field path returned when the validation
    /// fails, relative to the current schema node.
    field_path: Option<String>,
    /// optionalOldSelf is used to opt a transition rule into evaluation
    /// even when the object is first created, or if the old object is
    /// missing the value.
    optional_old_self: Option<bool>,
}

impl JsonSchema for JsonSchemaPropsModel {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "JSONSchemaProps".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let props = generator.subschema_for::<JsonSchemaPropsModel>().to_value();
        let json = generator.subschema_for::<JsonModel>().to_value();
        let or_array = generator.subschema_for::<OrModel<0>>().to_value();
        let or_bool = generator.subschema_for::<OrModel<1>>().to_value();
        let or_strings = generator.subschema_for::<OrModel<2>>().to_value();
        let docs = generator
            .subschema_for::<ExternalDocumentation>()
            .to_value();
        let rule = generator.subschema_for::<ValidationRule>().to_value();
        let string = json!({"type": "string"});
        let strings = json!({"type": "array", "items": {"type": "string"}});
        let number = json!({"type": "number", "format": "double"});
        let int = json!({"type": "integer", "format": "int64"});
        let boolean = json!({"type": "boolean"});
        let props_list = json!({"type": "array", "items": props});
        let props_map = json!({"type": "object", "additionalProperties": props});
        let mut out = serde_json::Map::new();
        out.insert(
            "description".into(),
            json!("JSONSchemaProps is a JSON-Schema following Specification Draft 4 (http://json-schema.org/)."),
        );
        out.insert("type".into(), json!("object"));
        let fields: [(&str, &Value); 44] = [
            ("$ref", &string),
            ("$schema", &string),
            ("additionalItems", &or_bool),
            ("additionalProperties", &or_bool),
            ("allOf", &props_list),
            ("anyOf", &props_list),
            ("default", &json),
            ("definitions", &props_map),
            (
                "dependencies",
                &json!({"type": "object", "additionalProperties": or_strings}),
            ),
            ("description", &string),
            ("enum", &json!({"type": "array", "items": json})),
            ("example", &json),
            ("exclusiveMaximum", &boolean),
            ("exclusiveMinimum", &boolean),
            ("externalDocs", &docs),
            ("format", &string),
            ("id", &string),
            ("items", &or_array),
            ("maxItems", &int),
            ("maxLength", &int),
            ("maxProperties", &int),
            ("maximum", &number),
            ("minItems", &int),
            ("minLength", &int),
            ("minProperties", &int),
            ("minimum", &number),
            ("multipleOf", &number),
            ("not", &props),
            ("nullable", &boolean),
            ("oneOf", &props_list),
            ("pattern", &string),
            ("patternProperties", &props_map),
            ("properties", &props_map),
            ("required", &strings),
            ("title", &string),
            ("type", &string),
            ("uniqueItems", &boolean),
            ("x-kubernetes-embedded-resource", &boolean),
            ("x-kubernetes-int-or-string", &boolean),
            ("x-kubernetes-list-map-keys", &strings),
            ("x-kubernetes-list-type", &string),
            ("x-kubernetes-map-type", &string),
            ("x-kubernetes-preserve-unknown-fields", &boolean),
            (
                "x-kubernetes-validations",
                &json!({"type": "array", "items": rule}),
            ),
        ];
        let mut properties = serde_json::Map::new();
        for (name, schema) in fields {
            properties.insert(name.into(), schema.clone());
        }
        out.insert("properties".into(), Value::Object(properties));
        schemars::Schema::from(out)
    }
}

// ---------------------------------------------------------------------------
// Defaulting, strategy and helpers.
// ---------------------------------------------------------------------------

impl CustomResourceDefinition {
    /// The name of the (first) version marked `storage: true`, if any.
    pub fn storage_version(&self) -> Option<&str> {
        self.spec
            .versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.as_str())
    }

    /// The condition of `type_`, if the status has one.
    pub fn condition(&self, type_: &str) -> Option<&CustomResourceDefinitionCondition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
    }

    /// Whether the condition of `type_` is `True` (upstream's
    /// `IsCRDConditionTrue`).
    pub fn is_condition_true(&self, type_: &str) -> bool {
        self.condition(type_)
            .is_some_and(|c| c.status == CONDITION_TRUE)
    }

    /// Upstream's v1 `SetDefaults_CustomResourceDefinition`: singular is
    /// the lowercased kind, listKind is `<kind>List`, conversion defaults
    /// to `None`, a webhook service port to 443, and an empty
    /// `status.storedVersions` to the storage version.
    pub fn set_defaults(&mut self) {
        let spec = &mut self.spec;
        if spec.names.singular.is_empty() {
            spec.names.singular = spec.names.kind.to_lowercase();
        }
        if spec.names.list_kind.is_empty() && !spec.names.kind.is_empty() {
            spec.names.list_kind = format!("{}List", spec.names.kind);
        }
        let conversion = spec
            .conversion
            .get_or_insert_with(|| CustomResourceConversion {
                strategy: NONE_CONVERTER.into(),
                webhook: None,
            });
        if let Some(service) = conversion
            .webhook
            .as_mut()
            .and_then(|w| w.client_config.as_mut())
            .and_then(|c| c.service.as_mut())
            && service.port.is_none()
        {
            service.port = Some(443);
        }
        if let Some(status) = self.status.as_mut()
            && status.stored_versions.is_empty()
            && let Some(v) = self.spec.versions.iter().find(|v| v.storage)
        {
            status.stored_versions.push(v.name.clone());
        }
    }

    /// Adds the storage version to `status.storedVersions` when it is not
    /// there yet (what upstream's strategy does on create and update).
    fn record_storage_version(&mut self) {
        let Some(storage) = self.storage_version().map(str::to_string) else {
            return;
        };
        let status = self.status.get_or_insert_with(Default::default);
        if !status.stored_versions.contains(&storage) {
            status.stored_versions.push(storage);
        }
    }
}

impl Strategy for CustomResourceDefinition {
    fn default_fields(&mut self) {
        crate::resource::Resource::generated_default_fields(self);
        self.set_defaults();
    }

    /// Upstream's `PrepareForCreate`: the status starts empty but for the
    /// storage version in `storedVersions`. (`metadata.generation` starts
    /// at 1 through [`Strategy::bump_generation_on_spec_change`].)
    fn prepare_for_create(&mut self) {
        self.status = Some(CustomResourceDefinitionStatus::default());
        self.record_storage_version();
    }

    /// Upstream's `PrepareForUpdate`: the status is the old one (it is only
    /// written through `/status`), and a new storage version joins
    /// `storedVersions`. (The generation grows when the spec changes,
    /// through [`Strategy::bump_generation_on_spec_change`].)
    fn prepare_for_update(&mut self, old: &Self) {
        self.status = old.status.clone();
        self.record_storage_version();
    }

    fn validate_create(&self) -> ErrorList {
        validation::validate_create(self)
    }

    fn validate_update(&self, old: &Self) -> ErrorList {
        validation::validate_update(self, old)
    }

    fn bump_generation_on_spec_change() -> bool {
        true
    }

    /// Upstream's REST `Delete`: the first DELETE adds the cleanup
    /// finalizer; the definition stays until its custom resources are gone.
    fn deletion_finalizers() -> &'static [&'static str] {
        &[FINALIZER_CLEANUP]
    }

    /// The `Terminating` condition of upstream's REST `Delete`.
    fn on_deletion_requested(&mut self) {
        set_condition(
            self.status.get_or_insert_with(Default::default),
            TERMINATING,
            CONDITION_TRUE,
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
        );
    }
}

/// The finalizer with which the custom resources of a deleted definition
/// are deleted before it goes (upstream's `CustomResourceCleanupFinalizer`).
pub const FINALIZER_CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Sets the condition `type_` in `status` (upstream's `SetCRDCondition`):
/// a new condition, or a changed status, gets `lastTransitionTime` now; an
/// unchanged status keeps its transition time while reason and message are
/// updated.
pub fn set_condition(
    status: &mut CustomResourceDefinitionStatus,
    type_: &str,
    condition_status: &str,
    reason: &str,
    message: &str,
) {
    set_condition_at(
        status,
        CustomResourceDefinitionCondition {
            type_: type_.into(),
            status: condition_status.into(),
            last_transition_time: None,
            reason: reason.into(),
            message: message.into(),
        },
        Time::now(),
    );
}

/// [`set_condition`] with a whole condition and an explicit clock.
pub fn set_condition_at(
    status: &mut CustomResourceDefinitionStatus,
    mut condition: CustomResourceDefinitionCondition,
    now: Time,
) {
    match status
        .conditions
        .iter_mut()
        .find(|c| c.type_ == condition.type_)
    {
        Some(existing) => {
            if existing.status != condition.status || existing.last_transition_time.is_none() {
                existing.status = condition.status;
                existing.last_transition_time = Some(condition.last_transition_time.unwrap_or(now));
            }
            existing.reason = condition.reason;
            existing.message = condition.message;
        }
        None => {
            condition.last_transition_time.get_or_insert(now);
            status.conditions.push(condition);
        }
    }
}

/// The naming controller's decision for one CRD
/// ([`calculate_names`]).
#[derive(Clone, Debug, PartialEq)]
pub struct NamingDecision {
    /// The names to write to `status.acceptedNames`: every requested name
    /// that is free, and the previously accepted one where it is not.
    pub accepted_names: CustomResourceDefinitionNames,
    /// The `NamesAccepted` condition (without a transition time).
    pub names_accepted: CustomResourceDefinitionCondition,
    /// The `Established` condition to set (without a transition time).
    pub established: CustomResourceDefinitionCondition,
}

fn claim(requested: &str, accepted: &str, used: &BTreeSet<String>) -> Result<(), String> {
    if requested == accepted || !used.contains(requested) {
        Ok(())
    } else {
        Err(format!("{requested:?} is already in use"))
    }
}

fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> CustomResourceDefinitionCondition {
    CustomResourceDefinitionCondition {
        type_: type_.into(),
        status: status.into(),
        last_transition_time: None,
        reason: reason.into(),
        message: message.into(),
    }
}

/// Upstream's naming controller (`calculateNamesAndConditions`): which of
/// `crd`'s requested names it may use, given the accepted names of the
/// other CRDs (those of another group are ignored). Each conflict sets
/// `NamesAccepted=False` with the reason `PluralConflict`,
/// `SingularConflict`, `ShortNamesConflict`, `KindConflict` or
/// `ListKindConflict` and the message `"<name>" is already in use`; with
/// no conflict it is `True`/`NoConflicts`/`no conflicts found`.
/// `Established` becomes `False`/`Installing` once names are accepted on a
/// CRD not yet established (the establishing controller sets it `True`).
pub fn calculate_names(
    crd: &CustomResourceDefinition,
    others: &[&CustomResourceDefinition],
) -> NamingDecision {
    let mut resources = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    let own_accepted = crd
        .status
        .as_ref()
        .map(|s| s.accepted_names.clone())
        .unwrap_or_default();
    let own = std::iter::once(&own_accepted);
    let theirs = others
        .iter()
        .filter(|o| o.spec.group == crd.spec.group && o.metadata.name != crd.metadata.name)
        .filter_map(|o| o.status.as_ref().map(|s| &s.accepted_names));
    for names in own.chain(theirs) {
        resources.insert(names.plural.clone());
        resources.insert(names.singular.clone());
        resources.extend(names.short_names.iter().cloned());
        kinds.insert(names.kind.clone());
        kinds.insert(names.list_kind.clone());
    }

    let requested = &crd.spec.names;
    let mut names = own_accepted.clone();
    let mut names_accepted = condition(NAMES_ACCEPTED, CONDITION_UNKNOWN, "", "");
    let mut conflict = |reason: &str, message: String| {
        names_accepted.status = CONDITION_FALSE.into();
        names_accepted.reason = reason.into();
        names_accepted.message = message;
    };
    match claim(&requested.plural, &own_accepted.plural, &resources) {
        Ok(()) => names.plural = requested.plural.clone(),
        Err(m) => conflict("PluralConflict", m),
    }
    match claim(&requested.singular, &own_accepted.singular, &resources) {
        Ok(()) => names.singular = requested.singular.clone(),
        Err(m) => conflict("SingularConflict", m),
    }
    if requested.short_names != own_accepted.short_names {
        let errs: Vec<String> = requested
            .short_names
            .iter()
            .filter(|s| !own_accepted.short_names.contains(s))
            .filter_map(|s| claim(s, "", &resources).err())
            .collect();
        if errs.is_empty() {
            names.short_names = requested.short_names.clone();
        } else if errs.len() == 1 {
            conflict("ShortNamesConflict", errs.concat());
        } else {
            conflict("ShortNamesConflict", format!("[{}]", errs.join(", ")));
        }
    }
    match claim(&requested.kind, &own_accepted.kind, &kinds) {
        Ok(()) => names.kind = requested.kind.clone(),
        Err(m) => conflict("KindConflict", m),
    }
    match claim(&requested.list_kind, &own_accepted.list_kind, &kinds) {
        Ok(()) => names.list_kind = requested.list_kind.clone(),
        Err(m) => conflict("ListKindConflict", m),
    }
    names.categories = requested.categories.clone();
    if names_accepted.status == CONDITION_UNKNOWN {
        names_accepted = condition(
            NAMES_ACCEPTED,
            CONDITION_TRUE,
            "NoConflicts",
            "no conflicts found",
        );
    }

    let mut established = crd.condition(ESTABLISHED).cloned().unwrap_or_else(|| {
        condition(
            ESTABLISHED,
            CONDITION_FALSE,
            "NotAccepted",
            "not all names are accepted",
        )
    });
    if established.status != CONDITION_TRUE && names_accepted.status == CONDITION_TRUE {
        established = condition(
            ESTABLISHED,
            CONDITION_FALSE,
            "Installing",
            "the initial names have been accepted",
        );
    }
    NamingDecision {
        accepted_names: names,
        names_accepted,
        established,
    }
}

/// The accepted names of `crd` when all its requested names are free, or
/// the `NamesAccepted=False` reason and message of the (last) conflict, as
/// [`calculate_names`] decides.
pub fn accepted_names(
    crd: &CustomResourceDefinition,
    others: &[&CustomResourceDefinition],
) -> Result<CustomResourceDefinitionNames, (String, String)> {
    let decision = calculate_names(crd, others);
    if decision.names_accepted.status == CONDITION_TRUE {
        Ok(decision.accepted_names)
    } else {
        Err((
            decision.names_accepted.reason,
            decision.names_accepted.message,
        ))
    }
}

#[cfg(test)]
mod tests;
