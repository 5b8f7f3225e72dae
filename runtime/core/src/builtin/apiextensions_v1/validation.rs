//! The static validation of CustomResourceDefinitions, as upstream's
//! `ValidateCustomResourceDefinition` and
//! `ValidateCustomResourceDefinitionUpdate`
//! (`apiextensions-apiserver/pkg/apis/apiextensions/validation`), with the
//! structural-schema checks of `pkg/apiserver/schema` (`ValidateStructural`
//! and its completeness check) and the default-value checks of
//! `pkg/apiserver/schema/defaulting` (`ValidateDefaults`).
//!
//! Field paths and messages are upstream's. Upstream validates the internal
//! version of a CRD, into which the v1 conversion folds per-version
//! `schema`, `subresources`, `additionalPrinterColumns` (and
//! `selectableFields`) that are identical in every version up to the spec;
//! errors about such folded fields are therefore reported under
//! `spec.validation`, `spec.subresources`, `spec.additionalPrinterColumns`
//! and `spec.selectableFields`, as kube-apiserver reports them, and
//! `spec.conversion.webhook.clientConfig` is `spec.conversion.webhookClientConfig`.
//!
//! CEL rules are parsed at write time (`validate_rule_program`, which also
//! refuses `oldSelf` below lists that are not `map` lists, and
//! `optionalOldSelf` on rules that do not read `oldSelf`), and
//! their costs are estimated as upstream's `CELSchemaContext` does
//! (`rule_costs`): each rule's worst-case cost
//! (`apiextensions/cost.rs`: cel-go's cost model with sizes from the
//! schema) times how many times it may run must stay within
//! `StaticEstimatedCostLimit` (10,000,000), a `messageExpression`'s cost
//! too, and all of a schema's within `StaticEstimatedCRDCostLimit`
//! (100,000,000), with upstream's messages (`estimated rule cost exceeds
//! budget by factor of 6.3x (...)`, `more than 100x`, `contributed to
//! estimated rule cost total exceeding cost limit for entire OpenAPIv3
//! schema`). Costs are estimated only for schemas without other errors; on
//! update, a version whose schema is unchanged is not refused for a rule
//! over the per-rule limit (its costs still count towards the total).
//!
//! Not done here:
//! - type checking rules against the schema (a rule reading a field the
//!   schema does not declare compiles here; its cost is then estimated
//!   with an unknown size), the rule's result type (`cel expression must
//!   evaluate to a bool`), and running default values through CEL rules;
//! - the estimator is this server's (see its docs): it matches upstream's
//!   figures on upstream's cost test cases and on ordinary rules, but a
//!   rule whose types CEL's checker would infer differently may be
//!   estimated differently;
//! - the `caBundle` PEM check of conversion webhooks on updates of
//!   established CRDs (upstream skips it on create and for CRDs that are not
//!   established);
//! - default values are checked against their schema by a compact value
//!   validator whose messages approximate kube-openapi's, and defaults
//!   inside `metadata` of embedded resources are not coerced as ObjectMeta.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use super::{
    CLUSTER_SCOPED, CustomResourceColumnDefinition, CustomResourceConversion,
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceSubresources, CustomResourceValidation,
    ESTABLISHED, NAMESPACE_SCOPED, NONE_CONVERTER, SelectableField, WEBHOOK_CONVERTER,
};
use crate::apiextensions::cost::{
    self, STATIC_ESTIMATED_COST_LIMIT, STATIC_ESTIMATED_CRD_COST_LIMIT, SchemaView,
};
use crate::validation::{
    ErrorList, ErrorType, FieldError, FieldPath, is_dns1035_label, is_dns1123_subdomain,
};

/// The most selectable fields a version may have.
pub const MAX_SELECTABLE_FIELDS: usize = 8;

/// The annotation that protected groups (`*.k8s.io`, `*.kubernetes.io`)
/// must carry: a URL of the API review, or a reason starting with
/// `unapproved`.
pub const KUBE_API_APPROVED_ANNOTATION: &str = "api-approved.kubernetes.io";

const PRINTER_COLUMN_TYPES: [&str; 5] = ["boolean", "date", "integer", "number", "string"];
const PRINTER_COLUMN_FORMATS: [&str; 8] = [
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];
const OPENAPI_V3_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];
const CONVERSION_REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];
const ROOT_FIELDS: &str = "[Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations]";

// ---------------------------------------------------------------------------
// JSONSchemaProps, read from the JSON kept in the object.
// ---------------------------------------------------------------------------

/// `JSONSchemaProps`, decoded for validation only (the object keeps the
/// JSON). Options tell "unset" from "set to the zero value".
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Props {
    id: Option<String>,
    #[serde(rename = "$ref")]
    reference: Option<String>,
    #[serde(rename = "$schema")]
    schema: Option<String>,
    description: Option<String>,
    #[serde(rename = "type")]
    type_: Option<String>,
    format: Option<String>,
    title: Option<String>,
    default: Option<Value>,
    maximum: Option<f64>,
    exclusive_maximum: Option<bool>,
    minimum: Option<f64>,
    exclusive_minimum: Option<bool>,
    max_length: Option<i64>,
    min_length: Option<i64>,
    pattern: Option<String>,
    max_items: Option<i64>,
    min_items: Option<i64>,
    unique_items: Option<bool>,
    multiple_of: Option<f64>,
    #[serde(rename = "enum")]
    enum_: Option<Vec<Value>>,
    max_properties: Option<i64>,
    min_properties: Option<i64>,
    required: Option<Vec<String>>,
    items: Option<Items>,
    all_of: Option<Vec<Props>>,
    one_of: Option<Vec<Props>>,
    any_of: Option<Vec<Props>>,
    not: Option<Box<Props>>,
    properties: Option<BTreeMap<String, Props>>,
    additional_properties: Option<BoolOrProps>,
    pattern_properties: Option<BTreeMap<String, Props>>,
    dependencies: Option<BTreeMap<String, PropsOrStrings>>,
    additional_items: Option<BoolOrProps>,
    definitions: Option<BTreeMap<String, Props>>,
    external_docs: Option<Value>,
    example: Option<Value>,
    nullable: Option<bool>,
    #[serde(rename = "x-kubernetes-preserve-unknown-fields")]
    x_preserve_unknown_fields: Option<bool>,
    #[serde(rename = "x-kubernetes-embedded-resource")]
    x_embedded_resource: Option<bool>,
    #[serde(rename = "x-kubernetes-int-or-string")]
    x_int_or_string: Option<bool>,
    #[serde(rename = "x-kubernetes-list-map-keys")]
    x_list_map_keys: Option<Vec<String>>,
    #[serde(rename = "x-kubernetes-list-type")]
    x_list_type: Option<String>,
    #[serde(rename = "x-kubernetes-map-type")]
    x_map_type: Option<String>,
    #[serde(rename = "x-kubernetes-validations")]
    x_validations: Option<Vec<Rule>>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
enum Items {
    Many(Vec<Props>),
    One(Box<Props>),
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
enum BoolOrProps {
    Bool(bool),
    Props(Box<Props>),
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
enum PropsOrStrings {
    Strings(Vec<String>),
    Props(Box<Props>),
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct Rule {
    #[serde(default)]
    rule: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    message_expression: String,
    reason: Option<String>,
    #[serde(default)]
    field_path: String,
    optional_old_self: Option<bool>,
}

fn flag(b: Option<bool>) -> bool {
    b.unwrap_or(false)
}

fn text(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("")
}

impl SchemaView for Props {
    fn type_name(&self) -> &str {
        self.type_str()
    }

    fn format_name(&self) -> Option<&str> {
        self.format.as_deref()
    }

    fn is_int_or_string(&self) -> bool {
        self.int_or_string()
    }

    fn is_embedded(&self) -> bool {
        self.embedded()
    }

    fn max_length(&self) -> Option<i64> {
        self.max_length
    }

    fn max_items(&self) -> Option<i64> {
        self.max_items
    }

    fn max_properties(&self) -> Option<i64> {
        self.max_properties
    }

    fn enum_max_len(&self) -> Option<u64> {
        cost::enum_max_len(self.enum_.as_deref())
    }

    fn is_required(&self, name: &str) -> bool {
        self.required.iter().flatten().any(|r| r == name)
    }

    fn has_default(&self) -> bool {
        self.default.is_some()
    }

    fn property_list(&self) -> Vec<(&str, &Self)> {
        self.props().map(|(k, v)| (k.as_str(), v)).collect()
    }

    fn additional_schema(&self) -> Option<&Self> {
        Props::additional_schema(self)
    }

    fn has_additional(&self) -> bool {
        self.additional_properties.is_some()
    }

    fn item_schema(&self) -> Option<&Self> {
        self.item()
    }
}

impl Props {
    fn type_str(&self) -> &str {
        text(&self.type_)
    }

    fn item(&self) -> Option<&Props> {
        match &self.items {
            Some(Items::One(p)) => Some(p),
            _ => None,
        }
    }

    fn props(&self) -> impl Iterator<Item = (&String, &Props)> {
        self.properties.iter().flatten()
    }

    fn property(&self, name: &str) -> Option<&Props> {
        self.properties.as_ref()?.get(name)
    }

    fn has_properties(&self) -> bool {
        self.properties.as_ref().is_some_and(|p| !p.is_empty())
    }

    fn additional_schema(&self) -> Option<&Props> {
        match &self.additional_properties {
            Some(BoolOrProps::Props(p)) => Some(p),
            _ => None,
        }
    }

    fn preserve(&self) -> bool {
        flag(self.x_preserve_unknown_fields)
    }

    fn embedded(&self) -> bool {
        flag(self.x_embedded_resource)
    }

    fn int_or_string(&self) -> bool {
        flag(self.x_int_or_string)
    }

    /// The names (upstream's Go field names) of the fields that are not
    /// their zero value.
    fn set_fields(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut add = |set: bool, name: &'static str| {
            if set {
                out.push(name);
            }
        };
        add(!text(&self.id).is_empty(), "ID");
        add(!text(&self.schema).is_empty(), "Schema");
        add(self.reference.is_some(), "Ref");
        add(!text(&self.description).is_empty(), "Description");
        add(!text(&self.type_).is_empty(), "Type");
        add(!text(&self.format).is_empty(), "Format");
        add(!text(&self.title).is_empty(), "Title");
        add(self.default.is_some(), "Default");
        add(self.maximum.is_some(), "Maximum");
        add(flag(self.exclusive_maximum), "ExclusiveMaximum");
        add(self.minimum.is_some(), "Minimum");
        add(flag(self.exclusive_minimum), "ExclusiveMinimum");
        add(self.max_length.is_some(), "MaxLength");
        add(self.min_length.is_some(), "MinLength");
        add(!text(&self.pattern).is_empty(), "Pattern");
        add(self.max_items.is_some(), "MaxItems");
        add(self.min_items.is_some(), "MinItems");
        add(flag(self.unique_items), "UniqueItems");
        add(self.multiple_of.is_some(), "MultipleOf");
        add(self.enum_.is_some(), "Enum");
        add(self.max_properties.is_some(), "MaxProperties");
        add(self.min_properties.is_some(), "MinProperties");
        add(self.required.is_some(), "Required");
        add(self.items.is_some(), "Items");
        add(self.all_of.is_some(), "AllOf");
        add(self.one_of.is_some(), "OneOf");
        add(self.any_of.is_some(), "AnyOf");
        add(self.not.is_some(), "Not");
        add(self.properties.is_some(), "Properties");
        add(self.additional_properties.is_some(), "AdditionalProperties");
        add(self.pattern_properties.is_some(), "PatternProperties");
        add(self.dependencies.is_some(), "Dependencies");
        add(self.additional_items.is_some(), "AdditionalItems");
        add(self.definitions.is_some(), "Definitions");
        add(self.external_docs.is_some(), "ExternalDocs");
        add(self.example.is_some(), "Example");
        add(flag(self.nullable), "Nullable");
        add(
            self.x_preserve_unknown_fields.is_some(),
            "XPreserveUnknownFields",
        );
        add(self.embedded(), "XEmbeddedResource");
        add(self.int_or_string(), "XIntOrString");
        add(self.x_list_map_keys.is_some(), "XListMapKeys");
        add(self.x_list_type.is_some(), "XListType");
        add(self.x_map_type.is_some(), "XMapType");
        add(self.x_validations.is_some(), "XValidations");
        out
    }

    /// Every sub-schema, for whole-tree predicates (upstream's `SchemaHas`).
    fn any(&self, pred: &dyn Fn(&Props) -> bool) -> bool {
        if pred(self) {
            return true;
        }
        let lists = [&self.all_of, &self.one_of, &self.any_of];
        let maps = [
            &self.properties,
            &self.pattern_properties,
            &self.definitions,
        ];
        match &self.items {
            Some(Items::One(p)) if p.any(pred) => return true,
            Some(Items::Many(ps)) if ps.iter().any(|p| p.any(pred)) => return true,
            _ => {}
        }
        lists
            .iter()
            .any(|l| l.iter().flatten().any(|p| p.any(pred)))
            || maps
                .iter()
                .any(|m| m.iter().flatten().any(|(_, p)| p.any(pred)))
            || self.not.as_ref().is_some_and(|p| p.any(pred))
            || [&self.additional_properties, &self.additional_items]
                .iter()
                .any(|a| matches!(a, Some(BoolOrProps::Props(p)) if p.any(pred)))
            || self
                .dependencies
                .iter()
                .flatten()
                .any(|(_, d)| matches!(d, PropsOrStrings::Props(p) if p.any(pred)))
    }
}

/// Decodes an `openAPIV3Schema`.
pub(crate) fn decode(schema: &Value) -> Result<Props, String> {
    Props::deserialize(schema).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------
// Options (upstream's validationOptions).
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
struct Opts {
    require_recognized_conversion_review_version: bool,
    require_immutable_names: bool,
    require_open_api_schema: bool,
    require_valid_property_type: bool,
    require_structural_schema: bool,
    require_pruned_defaults: bool,
    require_atomic_set_type: bool,
    require_map_list_keys_map_set_validation: bool,
    /// On update, the versions (bit `i` for `spec.versions[i]`) whose
    /// schema is the old one of the same name.
    unchanged_schemas: u64,
    /// Whether the schema being validated is unchanged: its rules' costs
    /// still count towards the schema's total, but a rule over the
    /// per-rule limit is not refused (upstream's
    /// `suppressPerExpressionCost`).
    suppress_per_expression_cost: bool,
}

impl Opts {
    fn create() -> Self {
        Opts {
            require_recognized_conversion_review_version: true,
            require_immutable_names: false,
            require_open_api_schema: true,
            require_valid_property_type: true,
            require_structural_schema: true,
            require_pruned_defaults: true,
            require_atomic_set_type: true,
            require_map_list_keys_map_set_validation: true,
            unchanged_schemas: 0,
            suppress_per_expression_cost: false,
        }
    }

    /// On update, rules that the stored object already breaks are not
    /// tightened (upstream's ratcheting of persisted CRDs).
    fn update(old: &CustomResourceDefinition) -> Self {
        let schemas: Vec<Props> = old
            .spec
            .versions
            .iter()
            .filter_map(CustomResourceDefinitionVersion::open_api_v3_schema)
            .filter_map(|s| decode(s).ok())
            .collect();
        let any = |pred: &dyn Fn(&Props) -> bool| schemas.iter().any(|s| s.any(pred));
        let non_structural = schemas
            .iter()
            .any(|s| !validate_structural_props(s, &FieldPath::root()).is_empty());
        let all_have_schema = old
            .spec
            .versions
            .iter()
            .all(|v| v.open_api_v3_schema().is_some());
        let old_conversion_ok = old
            .spec
            .conversion
            .as_ref()
            .and_then(|c| c.webhook.as_ref())
            .map(|w| {
                w.conversion_review_versions.is_empty()
                    || w.conversion_review_versions
                        .iter()
                        .any(|v| CONVERSION_REVIEW_VERSIONS.contains(&v.as_str()))
            })
            .unwrap_or(true);
        let unpruned_defaults = !non_structural
            && schemas.iter().any(|s| {
                let mut errs = ErrorList::default();
                validate_defaults(s, &FieldPath::root(), true, true, &mut errs);
                errs.iter()
                    .any(|e| e.detail == "must not have unknown fields")
            });
        Opts {
            require_recognized_conversion_review_version: old_conversion_ok,
            require_immutable_names: old.is_condition_true(ESTABLISHED),
            require_open_api_schema: all_have_schema,
            require_valid_property_type: !any(&|s| {
                !s.type_str().is_empty() && !OPENAPI_V3_TYPES.contains(&s.type_str())
            }),
            require_structural_schema: !non_structural,
            require_pruned_defaults: !unpruned_defaults,
            require_atomic_set_type: !any(&has_non_atomic_set_type),
            require_map_list_keys_map_set_validation: !any(&|s| {
                let mut errs = ErrorList::default();
                map_list_keys_map_set(s, &FieldPath::root(), &mut errs);
                !errs.is_empty()
            }),
            unchanged_schemas: 0,
            suppress_per_expression_cost: false,
        }
    }
}

fn has_non_atomic_set_type(s: &Props) -> bool {
    if s.x_list_type.as_deref() != Some("set") {
        return false;
    }
    match s.item() {
        Some(item) if item.type_str() == "array" => {
            item.x_list_type.as_deref().is_some_and(|t| t != "atomic")
        }
        Some(item) if item.type_str() == "object" => item.x_map_type.as_deref() != Some("atomic"),
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// The internal view: identical per-version fields folded up to the spec.
// ---------------------------------------------------------------------------

struct Folded<'a> {
    validation: Option<&'a CustomResourceValidation>,
    subresources: Option<&'a CustomResourceSubresources>,
    columns: &'a [CustomResourceColumnDefinition],
    selectable: &'a [SelectableField],
    versions: Vec<FoldedVersion<'a>>,
}

struct FoldedVersion<'a> {
    version: &'a CustomResourceDefinitionVersion,
    schema: Option<&'a CustomResourceValidation>,
    subresources: Option<&'a CustomResourceSubresources>,
    columns: &'a [CustomResourceColumnDefinition],
    selectable: &'a [SelectableField],
}

fn fold(spec: &CustomResourceDefinitionSpec) -> Folded<'_> {
    let vs = &spec.versions;
    let same =
        |f: &dyn Fn(&CustomResourceDefinitionVersion, &CustomResourceDefinitionVersion) -> bool| {
            vs.first()
                .is_some_and(|first| vs.iter().all(|v| f(v, first)))
        };
    let schema_same = same(&|a, b| a.schema == b.schema);
    let sub_same = same(&|a, b| a.subresources == b.subresources);
    let cols_same = same(&|a, b| a.additional_printer_columns == b.additional_printer_columns);
    let sel_same = same(&|a, b| a.selectable_fields == b.selectable_fields);
    let first = vs.first();
    Folded {
        validation: first
            .filter(|_| schema_same)
            .and_then(|v| v.schema.as_ref()),
        subresources: first
            .filter(|_| sub_same)
            .and_then(|v| v.subresources.as_ref()),
        columns: first
            .filter(|_| cols_same)
            .map(|v| v.additional_printer_columns.as_slice())
            .unwrap_or(&[]),
        selectable: first
            .filter(|_| sel_same)
            .map(|v| v.selectable_fields.as_slice())
            .unwrap_or(&[]),
        versions: vs
            .iter()
            .map(|v| FoldedVersion {
                version: v,
                schema: if schema_same { None } else { v.schema.as_ref() },
                subresources: if sub_same {
                    None
                } else {
                    v.subresources.as_ref()
                },
                columns: if cols_same {
                    &[]
                } else {
                    &v.additional_printer_columns
                },
                selectable: if sel_same { &[] } else { &v.selectable_fields },
            })
            .collect(),
    }
}

fn status_enabled(s: Option<&CustomResourceSubresources>) -> bool {
    s.is_some_and(|s| s.status.is_some())
}

// ---------------------------------------------------------------------------
// Entry points.
// ---------------------------------------------------------------------------

/// `ValidateCustomResourceDefinition`: a new CRD.
pub fn validate_create(crd: &CustomResourceDefinition) -> ErrorList {
    let mut errs = ErrorList::default();
    validate_name(crd, &mut errs);
    validate_spec(&crd.spec, Opts::create(), &mut errs);
    validate_status(crd, &mut errs);
    validate_stored_versions(crd, &mut errs);
    validate_api_approval(crd, None, &mut errs);
    validate_preserve_unknown_fields(crd, None, &mut errs);
    errs
}

/// The versions of `crd` (bit `i` for `spec.versions[i]`, up to 64) whose
/// schema is that of the version of the same name in `old` (upstream's
/// `findVersionsWithUnchangedSchemas`).
fn unchanged_schemas(crd: &CustomResourceDefinition, old: &CustomResourceDefinition) -> u64 {
    let mut mask = 0u64;
    for (i, v) in crd.spec.versions.iter().enumerate().take(64) {
        let same = old
            .spec
            .versions
            .iter()
            .any(|o| o.name == v.name && o.schema == v.schema);
        if same {
            mask |= 1 << i;
        }
    }
    mask
}

impl Opts {
    /// These options for the schema of `spec.versions[index]`.
    fn for_version(mut self, index: usize) -> Opts {
        self.suppress_per_expression_cost =
            index < 64 && self.unchanged_schemas & (1 << index) != 0;
        self
    }
}

/// `ValidateCustomResourceDefinitionUpdate`: an update of `old` to `crd`.
pub fn validate_update(
    crd: &CustomResourceDefinition,
    old: &CustomResourceDefinition,
) -> ErrorList {
    let mut errs = ErrorList::default();
    let mut opts = Opts::update(old);
    opts.unchanged_schemas = unchanged_schemas(crd, old);
    validate_spec(&crd.spec, opts, &mut errs);
    let spec = FieldPath::new("spec");
    if opts.require_immutable_names {
        immutable(
            &mut errs,
            spec.child("scope"),
            &crd.spec.scope,
            &old.spec.scope,
        );
        immutable(
            &mut errs,
            spec.child("names").child("kind"),
            &crd.spec.names.kind,
            &old.spec.names.kind,
        );
    }
    immutable(
        &mut errs,
        spec.child("group"),
        &crd.spec.group,
        &old.spec.group,
    );
    immutable(
        &mut errs,
        spec.child("names").child("plural"),
        &crd.spec.names.plural,
        &old.spec.names.plural,
    );
    validate_status(crd, &mut errs);
    validate_stored_versions(crd, &mut errs);
    validate_api_approval(crd, Some(old), &mut errs);
    validate_preserve_unknown_fields(crd, Some(old), &mut errs);
    errs
}

/// `ValidateUpdateCustomResourceDefinitionStatus`: a write to `/status`
/// (the accepted names).
pub fn validate_status_update(crd: &CustomResourceDefinition) -> ErrorList {
    let mut errs = ErrorList::default();
    validate_status(crd, &mut errs);
    errs
}

/// The structural-schema violations of an `openAPIV3Schema` at `path`
/// (upstream's `ValidateStructural`, sorted by message as upstream sorts
/// them), as the `NonStructuralSchema` condition reports them. A schema
/// that does not decode as `JSONSchemaProps` is one violation at `path`.
pub fn validate_structural(schema: &Value, path: &FieldPath) -> ErrorList {
    match decode(schema) {
        Ok(props) => validate_structural_props(&props, path),
        Err(e) => {
            let mut errs = ErrorList::default();
            errs.push(FieldError::invalid(path, "", e));
            errs
        }
    }
}

fn immutable(errs: &mut ErrorList, path: FieldPath, new: &str, old: &str) {
    if new != old {
        errs.push(FieldError::invalid(path, new, "field is immutable"));
    }
}

fn validate_name(crd: &CustomResourceDefinition, errs: &mut ErrorList) {
    let name = &crd.metadata.name;
    if name.is_empty() {
        return;
    }
    for msg in is_dns1123_subdomain(name) {
        errs.push(FieldError::invalid("metadata.name", name.as_str(), msg));
    }
    if *name != format!("{}.{}", crd.spec.names.plural, crd.spec.group) {
        errs.push(FieldError::invalid(
            "metadata.name",
            name.as_str(),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
}

fn validate_status(crd: &CustomResourceDefinition, errs: &mut ErrorList) {
    if let Some(status) = &crd.status {
        validate_names(
            &status.accepted_names,
            &FieldPath::new("status").child("acceptedNames"),
            errs,
        );
    }
}

fn validate_stored_versions(crd: &CustomResourceDefinition, errs: &mut ErrorList) {
    let path = FieldPath::new("status").child("storedVersions");
    let stored: &[String] = crd
        .status
        .as_ref()
        .map(|s| s.stored_versions.as_slice())
        .unwrap_or(&[]);
    if stored.is_empty() {
        errs.push(FieldError::invalid(
            path,
            Value::Array(Vec::new()),
            "must have at least one stored version",
        ));
        return;
    }
    let mut remaining: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, v) in stored.iter().enumerate() {
        remaining.insert(v, i);
    }
    for v in &crd.spec.versions {
        let present = remaining.remove(v.name.as_str()).is_some();
        if v.storage && !present && !stored.contains(&v.name) {
            errs.push(FieldError::invalid(
                &path,
                stored.to_vec(),
                format!("must have the storage version {}", v.name),
            ));
        }
    }
    let mut missing: Vec<(usize, &str)> = remaining.into_iter().map(|(v, i)| (i, v)).collect();
    missing.sort();
    for (i, v) in missing {
        errs.push(FieldError::invalid(
            path.index(i),
            v,
            format!(
                "missing from spec.versions; {v} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {v} and removes {v} from status.storedVersions"
            ),
        ));
    }
}

/// Whether `group` is reserved for Kubernetes community APIs.
pub fn is_protected_community_group(group: &str) -> bool {
    group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Approval {
    Invalid,
    Missing,
    Approved,
    Bypassed,
}

fn approval_state(crd: &CustomResourceDefinition) -> (Approval, String) {
    let Some(value) = crd.metadata.annotations.get(KUBE_API_APPROVED_ANNOTATION) else {
        return (
            Approval::Missing,
            format!(
                "protected groups must have approval annotation {KUBE_API_APPROVED_ANNOTATION:?}, see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        );
    };
    if value.starts_with("unapproved") {
        return (Approval::Bypassed, "approval bypassed".into());
    }
    if !is_request_uri(value) {
        return (
            Approval::Invalid,
            format!(
                "protected groups must have approval annotation {KUBE_API_APPROVED_ANNOTATION:?} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        );
    }
    (Approval::Approved, format!("approved in {value}"))
}

/// Go's `url.ParseRequestURI` acceptance, roughly: an absolute path or a
/// URI with a scheme.
fn is_request_uri(v: &str) -> bool {
    if v.starts_with('/') {
        return true;
    }
    let Some((scheme, _)) = v.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !v.contains(' ')
}

fn validate_api_approval(
    crd: &CustomResourceDefinition,
    old: Option<&CustomResourceDefinition>,
    errs: &mut ErrorList,
) {
    if !is_protected_community_group(&crd.spec.group) {
        return;
    }
    let (state, reason) = approval_state(crd);
    if let Some(old) = old
        && approval_state(old).0 == state
    {
        return;
    }
    let path = FieldPath::new("metadata")
        .child("annotations")
        .key(KUBE_API_APPROVED_ANNOTATION);
    let value = crd
        .metadata
        .annotations
        .get(KUBE_API_APPROVED_ANNOTATION)
        .cloned()
        .unwrap_or_default();
    match state {
        Approval::Approved | Approval::Bypassed => {}
        Approval::Missing => errs.push(FieldError::required(path, reason)),
        Approval::Invalid => errs.push(FieldError::invalid(path, value, reason)),
    }
}

fn validate_preserve_unknown_fields(
    crd: &CustomResourceDefinition,
    old: Option<&CustomResourceDefinition>,
    errs: &mut ErrorList,
) {
    if old.is_some_and(|o| o.spec.preserve_unknown_fields == Some(true)) {
        return;
    }
    if crd.spec.preserve_unknown_fields == Some(true) {
        errs.push(FieldError::invalid(
            "spec.preserveUnknownFields",
            true,
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
}

// ---------------------------------------------------------------------------
// The spec.
// ---------------------------------------------------------------------------

fn validate_spec(spec: &CustomResourceDefinitionSpec, mut opts: Opts, errs: &mut ErrorList) {
    let path = FieldPath::new("spec");
    if spec.group.is_empty() {
        errs.push(FieldError::required(path.child("group"), ""));
    } else {
        let dns = is_dns1123_subdomain(&spec.group);
        if !dns.is_empty() {
            errs.push(FieldError::invalid(
                path.child("group"),
                spec.group.as_str(),
                dns.join(","),
            ));
        } else if !spec.group.contains('.') {
            errs.push(FieldError::invalid(
                path.child("group"),
                spec.group.as_str(),
                "should be a domain with at least one dot",
            ));
        }
    }
    enum_string(
        errs,
        path.child("scope"),
        &spec.scope,
        &[CLUSTER_SCOPED, NAMESPACE_SCOPED],
    );

    let preserve = spec.preserve_unknown_fields == Some(true);
    if !preserve {
        opts.require_structural_schema = true;
    }
    let folded = fold(spec);
    let top_schema = folded
        .validation
        .and_then(|v| v.open_api_v3_schema.as_ref());
    let versions_path = path.child("versions");
    if top_schema.is_none() {
        for (i, v) in folded.versions.iter().enumerate() {
            let missing = v
                .schema
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .is_none();
            let schema_path = versions_path
                .index(i)
                .child("schema")
                .child("openAPIV3Schema");
            if opts.require_open_api_schema {
                if missing {
                    errs.push(FieldError::required(schema_path, "schemas are required"));
                }
            } else if !preserve && v.version.served && missing {
                errs.push(FieldError::required(
                    schema_path,
                    "because otherwise all fields are pruned",
                ));
            }
        }
    }
    let schemas: Vec<Props> = spec
        .versions
        .iter()
        .filter_map(CustomResourceDefinitionVersion::open_api_v3_schema)
        .filter_map(|s| decode(s).ok())
        .collect();
    if schemas.iter().any(|s| s.any(&|p| p.default.is_some())) {
        opts.require_structural_schema = true;
        if preserve {
            errs.push(FieldError::invalid(
                path.child("preserveUnknownFields"),
                true,
                "must be false in order to use defaults in the schema",
            ));
        }
    }
    if schemas.iter().any(|s| {
        s.any(&|p| {
            p.embedded()
                || p.x_preserve_unknown_fields.is_some()
                || p.int_or_string()
                || p.x_list_map_keys.as_ref().is_some_and(|k| !k.is_empty())
                || p.x_list_type.is_some()
                || p.x_validations.as_ref().is_some_and(|v| !v.is_empty())
        })
    }) {
        opts.require_structural_schema = true;
    }

    let mut storage = 0;
    let mut seen = BTreeSet::new();
    let mut unique = true;
    let any_status = status_enabled(folded.subresources)
        || folded
            .versions
            .iter()
            .any(|v| status_enabled(v.subresources));
    let per_version_subresources = folded.versions.iter().any(|v| v.subresources.is_some());
    for (i, v) in folded.versions.iter().enumerate() {
        if v.version.storage {
            storage += 1;
        }
        if !seen.insert(v.version.name.as_str()) {
            unique = false;
        }
        let dns = is_dns1035_label(&v.version.name);
        if !dns.is_empty() {
            errs.push(FieldError::invalid(
                versions_path.index(i).child("name"),
                v.version.name.as_str(),
                dns.join(","),
            ));
        }
        let subresources = if per_version_subresources {
            v.subresources
        } else {
            folded.subresources
        };
        let effective_schema = v.schema.or(folded.validation);
        validate_version(
            v,
            effective_schema,
            &versions_path.index(i),
            status_enabled(subresources),
            opts.for_version(i),
            errs,
        );
    }
    let versions_value = || serde_json::to_value(&spec.versions).unwrap_or(Value::Null);
    if !unique {
        errs.push(FieldError::invalid(
            &versions_path,
            versions_value(),
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        errs.push(FieldError::invalid(
            &versions_path,
            versions_value(),
            "must have exactly one version marked as storage version",
        ));
    }
    // The internal `spec.version` is the first version's name.
    if let Some(first) = spec.versions.first() {
        let dns = is_dns1035_label(&first.name);
        if !dns.is_empty() {
            errs.push(FieldError::invalid(
                path.child("version"),
                first.name.as_str(),
                dns.join(","),
            ));
        }
    }

    let names = path.child("names");
    for (field, value) in [
        ("plural", &spec.names.plural),
        ("singular", &spec.names.singular),
        ("kind", &spec.names.kind),
        ("listKind", &spec.names.list_kind),
    ] {
        if value.is_empty() {
            errs.push(FieldError::required(names.child(field), ""));
        }
    }
    validate_names(&spec.names, &names, errs);

    if let Some(validation) = folded.validation {
        // The shared schema is the first version's (upstream validates it
        // with the options of `spec.version`).
        validate_validation(
            validation,
            any_status,
            opts.for_version(0),
            &path.child("validation"),
            errs,
        );
    }
    if let Some(sub) = folded.subresources {
        validate_subresources(sub, &path.child("subresources"), errs);
    }
    for (i, col) in folded.columns.iter().enumerate() {
        validate_column(col, &path.child("additionalPrinterColumns").index(i), errs);
    }
    if !folded.selectable.is_empty() {
        match folded
            .validation
            .and_then(|v| v.open_api_v3_schema.as_ref())
        {
            None => errs.push(FieldError::invalid(
                path.child("selectableFields"),
                "",
                "selectableFields may only be set when validations.schema is included",
            )),
            Some(schema) => validate_selectable_fields(
                folded.selectable,
                schema,
                &path.child("selectableFields"),
                errs,
            ),
        }
    }

    if let Some(conversion) = &spec.conversion {
        if conversion.strategy != NONE_CONVERTER && preserve {
            errs.push(FieldError::invalid(
                path.child("conversion").child("strategy"),
                conversion.strategy.as_str(),
                "must be None if spec.preserveUnknownFields is true",
            ));
        }
        validate_conversion(conversion, opts, &path.child("conversion"), errs);
    }
}

fn enum_string(errs: &mut ErrorList, path: FieldPath, value: &str, accepted: &[&str]) {
    if value.is_empty() {
        errs.push(FieldError::required(path, ""));
    } else if !accepted.contains(&value) {
        errs.push(FieldError::not_supported(path, value, accepted));
    }
}

/// `ValidateCustomResourceDefinitionNames`.
fn validate_names(names: &CustomResourceDefinitionNames, path: &FieldPath, errs: &mut ErrorList) {
    for (field, value) in [("plural", &names.plural), ("singular", &names.singular)] {
        let dns = is_dns1035_label(value);
        if !value.is_empty() && !dns.is_empty() {
            errs.push(FieldError::invalid(
                path.child(field),
                value.as_str(),
                dns.join(","),
            ));
        }
    }
    for (field, value) in [("kind", &names.kind), ("listKind", &names.list_kind)] {
        let dns = is_dns1035_label(&value.to_lowercase());
        if !value.is_empty() && !dns.is_empty() {
            errs.push(FieldError::invalid(
                path.child(field),
                value.as_str(),
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    dns.join(",")
                ),
            ));
        }
    }
    for (i, short) in names.short_names.iter().enumerate() {
        let dns = is_dns1035_label(short);
        if !dns.is_empty() {
            errs.push(FieldError::invalid(
                path.child("shortNames").index(i),
                short.as_str(),
                dns.join(","),
            ));
        }
    }
    if !names.kind.is_empty() && names.kind == names.list_kind {
        errs.push(FieldError::invalid(
            path.child("listKind"),
            names.list_kind.as_str(),
            "kind and listKind may not be the same",
        ));
    }
    for (i, category) in names.categories.iter().enumerate() {
        let dns = is_dns1035_label(category);
        if !dns.is_empty() {
            errs.push(FieldError::invalid(
                path.child("categories").index(i),
                category.as_str(),
                dns.join(","),
            ));
        }
    }
}

fn validate_version(
    v: &FoldedVersion<'_>,
    effective_schema: Option<&CustomResourceValidation>,
    path: &FieldPath,
    status: bool,
    opts: Opts,
    errs: &mut ErrorList,
) {
    let version = v.version;
    for msg in deprecation_warning_errors(flag(version.deprecated), &version.deprecation_warning) {
        errs.push(FieldError::invalid(
            path.child("deprecationWarning"),
            version.deprecation_warning.clone().unwrap_or_default(),
            msg,
        ));
    }
    if let Some(schema) = v.schema {
        validate_validation(schema, status, opts, &path.child("schema"), errs);
    }
    if let Some(sub) = v.subresources {
        validate_subresources(sub, &path.child("subresources"), errs);
    }
    for (i, col) in v.columns.iter().enumerate() {
        validate_column(col, &path.child("additionalPrinterColumns").index(i), errs);
    }
    if !v.selectable.is_empty() {
        match effective_schema.and_then(|s| s.open_api_v3_schema.as_ref()) {
            None => errs.push(FieldError::invalid(
                path.child("selectableFields"),
                "",
                "selectableFields may only be set when version.schema.openAPIV3Schema is not included",
            )),
            Some(schema) => {
                validate_selectable_fields(v.selectable, schema, &path.child("selectableFields"), errs)
            }
        }
    }
}

fn deprecation_warning_errors(deprecated: bool, warning: &Option<String>) -> Vec<String> {
    let Some(w) = warning else {
        return Vec::new();
    };
    if !deprecated {
        return vec!["can only be set for deprecated versions".into()];
    }
    let mut out = Vec::new();
    if w.len() > 256 {
        out.push("must be <= 256 characters long".into());
    }
    if w.is_empty() {
        out.push("must not be an empty string".into());
    }
    for (i, c) in w.char_indices() {
        if c.is_control() {
            out.push(format!(
                "must only contain printable UTF-8 characters; control character found at index {i}"
            ));
            break;
        }
        if c != ' ' && c.is_whitespace() {
            out.push(format!(
                "must only contain printable UTF-8 characters; non-printable character found at index {i}"
            ));
            break;
        }
    }
    out
}

/// `ValidateCustomResourceDefinitionSubresources`.
fn validate_subresources(sub: &CustomResourceSubresources, path: &FieldPath, errs: &mut ErrorList) {
    let Some(scale) = &sub.scale else {
        return;
    };
    for (field, value, prefix, under) in [
        (
            "scale.specReplicasPath",
            &scale.spec_replicas_path,
            ".spec.",
            "should be a json path under .spec",
        ),
        (
            "scale.statusReplicasPath",
            &scale.status_replicas_path,
            ".status.",
            "should be a json path under .status",
        ),
    ] {
        let p = path.child(field);
        if value.is_empty() {
            errs.push(FieldError::required(p, ""));
            continue;
        }
        let before = errs.len();
        simple_json_path(value, &p, errs);
        if errs.len() == before && !value.starts_with(prefix) {
            errs.push(FieldError::invalid(p, value.as_str(), under));
        }
    }
    if let Some(selector) = scale
        .label_selector_path
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        let p = path.child("scale.labelSelectorPath");
        let before = errs.len();
        simple_json_path(selector, &p, errs);
        if errs.len() == before
            && !selector.starts_with(".spec.")
            && !selector.starts_with(".status.")
        {
            errs.push(FieldError::invalid(
                p,
                selector,
                "should be a json path under either .spec or .status",
            ));
        }
    }
}

fn simple_json_path(s: &str, path: &FieldPath, errs: &mut ErrorList) {
    if s.is_empty() {
        errs.push(FieldError::invalid(path, s, "must not be empty"));
    } else if !s.starts_with('.') {
        errs.push(FieldError::invalid(
            path,
            s,
            "must be a simple json path starting with .",
        ));
    }
}

/// `ValidateCustomResourceColumnDefinition`.
fn validate_column(col: &CustomResourceColumnDefinition, path: &FieldPath, errs: &mut ErrorList) {
    if col.name.is_empty() {
        errs.push(FieldError::required(path.child("name"), ""));
    }
    let types = format!("must be one of {}", PRINTER_COLUMN_TYPES.join(","));
    if col.type_.is_empty() {
        errs.push(FieldError::required(path.child("type"), types));
    } else if !PRINTER_COLUMN_TYPES.contains(&col.type_.as_str()) {
        errs.push(FieldError::invalid(
            path.child("type"),
            col.type_.as_str(),
            types,
        ));
    }
    let format = text(&col.format);
    if !format.is_empty() && !PRINTER_COLUMN_FORMATS.contains(&format) {
        errs.push(FieldError::invalid(
            path.child("format"),
            format,
            format!("must be one of {}", PRINTER_COLUMN_FORMATS.join(",")),
        ));
    }
    if col.json_path.is_empty() {
        errs.push(FieldError::required(path.child("JSONPath"), ""));
    } else {
        simple_json_path(&col.json_path, &path.child("JSONPath"), errs);
    }
}

/// `ValidateCustomResourceSelectableFields`.
fn validate_selectable_fields(
    fields: &[SelectableField],
    schema: &Value,
    path: &FieldPath,
    errs: &mut ErrorList,
) {
    let props = match decode(schema) {
        Ok(p) => p,
        Err(e) => {
            errs.push(FieldError::invalid(
                FieldPath::new("spec").child("schema.openAPIV3Schema"),
                "",
                e,
            ));
            return;
        }
    };
    let mut unique = BTreeSet::new();
    for (i, f) in fields.iter().enumerate() {
        let p = path.index(i).child("jsonPath");
        if f.json_path.is_empty() {
            errs.push(FieldError::required(p, ""));
            continue;
        }
        let (segments, found) = match resolve_field_path(&f.json_path, &props, false) {
            Ok(r) => r,
            Err(e) => {
                errs.push(FieldError::invalid(
                    p,
                    f.json_path.as_str(),
                    format!("is an invalid path: {e}"),
                ));
                continue;
            }
        };
        if segments.first().map(String::as_str) == Some("metadata") {
            errs.push(FieldError::invalid(
                &p,
                f.json_path.as_str(),
                "must not point to fields in metadata",
            ));
        }
        if !matches!(found.type_str(), "string" | "boolean" | "integer") {
            errs.push(FieldError::invalid(
                &p,
                f.json_path.as_str(),
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        if !unique.insert(segments.join(".")) {
            errs.push(FieldError::duplicate(p, f.json_path.as_str()));
        }
    }
    if unique.len() > MAX_SELECTABLE_FIELDS {
        errs.push(FieldError::too_many(
            path,
            unique.len(),
            MAX_SELECTABLE_FIELDS,
        ));
    }
}

/// Resolves a field path (`.a.b`, `.a['b']`, and with `arrays` also
/// `.a[0]`) in a schema (upstream's `cel.ValidFieldPath`), returning the
/// path's field names and the schema found.
fn resolve_field_path<'p>(
    path: &str,
    schema: &'p Props,
    arrays: bool,
) -> Result<(Vec<String>, &'p Props), String> {
    let mut current = schema;
    let mut names = Vec::new();
    let mut rest = path;
    if rest.is_empty() {
        return Err("must not be empty".into());
    }
    while !rest.is_empty() {
        let (name, index) = if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let (name, tail) = r.split_at(end);
            rest = tail;
            (name.to_string(), false)
        } else if let Some(r) = rest.strip_prefix("['") {
            let end = r
                .find("']")
                .ok_or_else(|| format!("unexpected end of JSON path: {path}"))?;
            let (name, tail) = r.split_at(end);
            rest = tail.get(2..).unwrap_or("");
            (name.to_string(), false)
        } else if let Some(r) = rest.strip_prefix('[') {
            if !arrays {
                return Err(format!("array notation is not allowed: {path}"));
            }
            let end = r
                .find(']')
                .ok_or_else(|| format!("unexpected end of JSON path: {path}"))?;
            let (index, tail) = r.split_at(end);
            rest = tail.get(1..).unwrap_or("");
            (index.to_string(), true)
        } else {
            return Err(format!("expected [ or . at the start of {rest:?}"));
        };
        if name.is_empty() {
            return Err(format!("empty field name in {path}"));
        }
        if index {
            if name.parse::<usize>().is_err() || current.type_str() != "array" {
                return Err(format!("index {name} does not refer to an array item"));
            }
            current = current
                .item()
                .ok_or_else(|| "does not refer to a valid field".to_string())?;
            continue;
        }
        current = match current.property(&name) {
            Some(p) => p,
            None => current.additional_schema().ok_or_else(|| {
                format!("does not refer to a valid field: {name:?} is not a known field")
            })?,
        };
        names.push(name);
    }
    Ok((names, current))
}

/// `validateConversionReviewVersions` and `validateCustomResourceConversion`.
fn validate_conversion(
    conversion: &CustomResourceConversion,
    opts: Opts,
    path: &FieldPath,
    errs: &mut ErrorList,
) {
    enum_string(
        errs,
        path.child("strategy"),
        &conversion.strategy,
        &[NONE_CONVERTER, WEBHOOK_CONVERTER],
    );
    let client_config = conversion
        .webhook
        .as_ref()
        .and_then(|w| w.client_config.as_ref());
    let review_versions: &[String] = conversion
        .webhook
        .as_ref()
        .map(|w| w.conversion_review_versions.as_slice())
        .unwrap_or(&[]);
    let cc_path = path.child("webhookClientConfig");
    if conversion.strategy != WEBHOOK_CONVERTER {
        if client_config.is_some() {
            errs.push(FieldError::forbidden(
                cc_path,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if !review_versions.is_empty() {
            errs.push(FieldError::forbidden(
                path.child("conversionReviewVersions"),
                "should not be set when strategy is not set to Webhook",
            ));
        }
        return;
    }
    match client_config {
        None => errs.push(FieldError::required(
            &cc_path,
            "required when strategy is set to Webhook",
        )),
        Some(cc) => match (&cc.url, &cc.service) {
            (Some(url), None) => validate_webhook_url(url, &cc_path.child("url"), errs),
            (None, Some(svc)) => {
                let p = cc_path.child("service");
                if svc.name.is_empty() {
                    errs.push(FieldError::required(
                        p.child("name"),
                        "service name is required",
                    ));
                }
                if svc.namespace.is_empty() {
                    errs.push(FieldError::required(
                        p.child("namespace"),
                        "service namespace is required",
                    ));
                }
                let port = svc.port.unwrap_or(443);
                if !(1..=65535).contains(&port) {
                    errs.push(FieldError::invalid(
                        p.child("port"),
                        port,
                        "port is not valid: must be between 1 and 65535, inclusive",
                    ));
                }
                if let Some(sp) = &svc.path {
                    validate_service_path(sp, &p.child("path"), errs);
                }
            }
            _ => errs.push(FieldError::required(
                &cc_path,
                "exactly one of url or service is required",
            )),
        },
    }
    let rv_path = path.child("conversionReviewVersions");
    if review_versions.is_empty() {
        errs.push(FieldError::required(rv_path, ""));
        return;
    }
    let mut seen = BTreeSet::new();
    let mut recognized = false;
    for (i, v) in review_versions.iter().enumerate() {
        if !seen.insert(v.as_str()) {
            errs.push(FieldError::invalid(
                rv_path.index(i),
                v.as_str(),
                "duplicate version",
            ));
            continue;
        }
        for msg in is_dns1035_label(v) {
            errs.push(FieldError::invalid(rv_path.index(i), v.as_str(), msg));
        }
        recognized |= CONVERSION_REVIEW_VERSIONS.contains(&v.as_str());
    }
    if opts.require_recognized_conversion_review_version && !recognized {
        errs.push(FieldError::invalid(
            rv_path,
            review_versions.to_vec(),
            format!(
                "must include at least one of {}",
                CONVERSION_REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
}

/// `webhook.ValidateWebhookURL` with https required.
fn validate_webhook_url(url: &str, path: &FieldPath, errs: &mut ErrorList) {
    const FORM: &str = "; desired format: https://host[/path]";
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    if scheme != "https" {
        errs.push(FieldError::invalid(
            path,
            scheme,
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    let (before_fragment, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (before_query, query) = before_fragment
        .split_once('?')
        .unwrap_or((before_fragment, ""));
    let authority = before_query.split('/').next().unwrap_or("");
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    if url.split_once("://").is_none() || host.is_empty() {
        errs.push(FieldError::invalid(
            path,
            host,
            format!("host must be specified{FORM}"),
        ));
    }
    if let Some(user) = user {
        errs.push(FieldError::invalid(
            path,
            user,
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        errs.push(FieldError::invalid(
            path,
            fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        errs.push(FieldError::invalid(
            path,
            query,
            "query parameters are not permitted in the URL",
        ));
    }
}

/// The path check of `webhook.ValidateWebhookService`.
fn validate_service_path(p: &str, path: &FieldPath, errs: &mut ErrorList) {
    if p.is_empty() || p == "/" {
        return;
    }
    if p == "//" {
        errs.push(FieldError::invalid(path, p, "segment[0] may not be empty"));
        return;
    }
    if !p.starts_with('/') {
        errs.push(FieldError::invalid(path, p, "must start with a '/'"));
    }
    let inner = p.get(1..).unwrap_or("");
    let inner = inner.strip_suffix('/').unwrap_or(inner);
    for (i, step) in inner.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                path,
                p,
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for msg in is_dns1123_subdomain(step) {
            errs.push(FieldError::invalid(path, p, format!("segment[{i}]: {msg}")));
        }
    }
}

// ---------------------------------------------------------------------------
// The schema (validateCustomResourceDefinitionValidation).
// ---------------------------------------------------------------------------

fn validate_validation(
    validation: &CustomResourceValidation,
    status: bool,
    opts: Opts,
    path: &FieldPath,
    errs: &mut ErrorList,
) {
    let Some(raw) = &validation.open_api_v3_schema else {
        return;
    };
    let schema_path = path.child("openAPIV3Schema");
    let schema = match decode(raw) {
        Ok(s) => s,
        Err(e) => {
            errs.push(FieldError::invalid(schema_path, "", e));
            return;
        }
    };
    let mut local = ErrorList::default();
    if status {
        for field in schema.set_fields() {
            if field == "Type" {
                if schema.type_str() != "object" {
                    local.push(FieldError::invalid(
                        path.child("openAPIV3Schema.type"),
                        schema.type_str(),
                        "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
                    ));
                    break;
                }
                continue;
            }
            if !ROOT_FIELDS.contains(&format!(" {field} "))
                && !ROOT_FIELDS.contains(&format!("[{field} "))
                && !ROOT_FIELDS.contains(&format!(" {field}]"))
            {
                local.push(FieldError::invalid(
                    &schema_path,
                    raw.clone(),
                    format!("only {ROOT_FIELDS} fields are allowed at the root of the schema if the status subresource is enabled"),
                ));
                break;
            }
        }
    }
    if flag(schema.nullable) {
        local.push(FieldError::forbidden(
            path.child("openAPIV3Schema.nullable"),
            "nullable cannot be true at the root",
        ));
    }
    if opts.require_structural_schema {
        let structural = validate_structural_props(&schema, &schema_path);
        if structural.is_empty() {
            validate_defaults(
                &schema,
                &schema_path,
                true,
                opts.require_pruned_defaults,
                &mut local,
            );
        } else {
            local.extend(structural);
        }
    }
    let ssv = Ssv {
        allow_defaults: true,
        disallow_reason: String::new(),
        inside_meta: false,
        require_valid_type: opts.require_valid_property_type,
        uncorrelatable: None,
    };
    openapi_schema(&schema, &schema_path, &ssv, true, opts, &mut local);
    // Costs are estimated on schemas without other errors (upstream
    // estimates only where the schema converts to CEL declarations).
    let schema_errors = local
        .iter()
        .any(|e| !e.field.contains("x-kubernetes-validations["));
    if !schema_errors {
        let mut total = TotalCost::default();
        let mut costs = ErrorList::default();
        rule_costs(&schema, &schema_path, true, Some(1), &mut total, &mut costs);
        if !opts.suppress_per_expression_cost {
            local.extend(costs);
        }
        total_cost_errors(&total, &schema_path, &mut local);
    }
    errs.extend(local);
}

/// Upstream's `specStandardValidatorV3`.
#[derive(Clone)]
struct Ssv {
    allow_defaults: bool,
    disallow_reason: String,
    inside_meta: bool,
    require_valid_type: bool,
    /// The highest list whose items cannot be correlated with their old
    /// values (its type is not `map`), when below one: `oldSelf` means
    /// nothing there.
    uncorrelatable: Option<FieldPath>,
}

impl Ssv {
    fn forbid_defaults(&self, reason: &str) -> Ssv {
        Ssv {
            allow_defaults: false,
            disallow_reason: reason.into(),
            ..self.clone()
        }
    }

    fn validate(&self, s: &Props, path: &FieldPath, errs: &mut ErrorList) {
        let t = s.type_str();
        if self.require_valid_type && !t.is_empty() && !OPENAPI_V3_TYPES.contains(&t) {
            errs.push(FieldError::not_supported(
                path.child("type"),
                t,
                &OPENAPI_V3_TYPES,
            ));
        }
        if s.default.is_some() && !self.allow_defaults {
            let mut detail = "must not be set".to_string();
            if !self.disallow_reason.is_empty() {
                detail.push(' ');
                detail.push_str(&self.disallow_reason);
            }
            errs.push(FieldError::forbidden(path.child("default"), detail));
        }
        if !text(&s.id).is_empty() {
            errs.push(FieldError::forbidden(
                path.child("id"),
                "id is not supported",
            ));
        }
        if s.additional_items.is_some() {
            errs.push(FieldError::forbidden(
                path.child("additionalItems"),
                "additionalItems is not supported",
            ));
        }
        if s.pattern_properties.as_ref().is_some_and(|p| !p.is_empty()) {
            errs.push(FieldError::forbidden(
                path.child("patternProperties"),
                "patternProperties is not supported",
            ));
        }
        if s.definitions.as_ref().is_some_and(|p| !p.is_empty()) {
            errs.push(FieldError::forbidden(
                path.child("definitions"),
                "definitions is not supported",
            ));
        }
        if s.dependencies.is_some() {
            errs.push(FieldError::forbidden(
                path.child("dependencies"),
                "dependencies is not supported",
            ));
        }
        if s.reference.is_some() {
            errs.push(FieldError::forbidden(
                path.child("$ref"),
                "$ref is not supported",
            ));
        }
        if t == "null" {
            errs.push(FieldError::forbidden(
                path.child("type"),
                "type cannot be set to null, use nullable as an alternative",
            ));
        }
        if matches!(&s.items, Some(Items::Many(list)) if !list.is_empty()) {
            errs.push(FieldError::forbidden(
                path.child("items"),
                "items must be a schema object and not an array",
            ));
        }
        if self.inside_meta && s.embedded() {
            errs.push(FieldError::forbidden(
                path.child("x-kubernetes-embedded-resource"),
                "must not be used inside of resource meta",
            ));
        }
    }
}

/// `ValidateCustomResourceDefinitionOpenAPISchema` (without CEL
/// compilation).
fn openapi_schema(
    s: &Props,
    path: &FieldPath,
    ssv: &Ssv,
    is_root: bool,
    opts: Opts,
    errs: &mut ErrorList,
) {
    ssv.validate(s, path, errs);
    if flag(s.unique_items) {
        errs.push(FieldError::forbidden(
            path.child("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(additional) = &s.additional_properties {
        let restrictive = match additional {
            BoolOrProps::Bool(allows) => !allows,
            BoolOrProps::Props(_) => true,
        };
        if s.has_properties() && restrictive {
            errs.push(FieldError::forbidden(
                path.child("additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let BoolOrProps::Props(sub) = additional {
            let sub_ssv = if ssv.inside_meta {
                ssv.forbid_defaults("inside additionalProperties applying to object metadata")
            } else {
                ssv.clone()
            };
            openapi_schema(
                sub,
                &path.child("additionalProperties"),
                &sub_ssv,
                false,
                opts,
                errs,
            );
        }
    }
    for (name, sub) in s.props() {
        let mut sub_ssv = ssv.clone();
        if (is_root || s.embedded()) && matches!(name.as_str(), "metadata" | "kind" | "apiVersion")
        {
            sub_ssv.inside_meta = true;
            if is_root {
                sub_ssv = sub_ssv.forbid_defaults(&format!("in top-level {name}"));
            }
        }
        openapi_schema(
            sub,
            &path.child("properties").key(name),
            &sub_ssv,
            false,
            opts,
            errs,
        );
    }
    if let Some(not) = &s.not {
        openapi_schema(not, &path.child("not"), ssv, false, opts, errs);
    }
    for (field, list) in [
        ("allOf", &s.all_of),
        ("oneOf", &s.one_of),
        ("anyOf", &s.any_of),
    ] {
        for (i, sub) in list.iter().flatten().enumerate() {
            openapi_schema(sub, &path.child(field).index(i), ssv, false, opts, errs);
        }
    }
    for (name, sub) in s.definitions.iter().flatten() {
        openapi_schema(
            sub,
            &path.child("definitions").key(name),
            ssv,
            false,
            opts,
            errs,
        );
    }
    // Only the items of `map` lists are correlated with old items (sets
    // are not, for rules).
    let mut items_ssv = ssv.clone();
    if s.x_list_type.as_deref() != Some("map") && items_ssv.uncorrelatable.is_none() {
        items_ssv.uncorrelatable = Some(path.clone());
    }
    match &s.items {
        Some(Items::One(item)) => {
            openapi_schema(item, &path.child("items"), &items_ssv, false, opts, errs)
        }
        Some(Items::Many(list)) => {
            for (i, item) in list.iter().enumerate() {
                openapi_schema(
                    item,
                    &path.child("items").index(i),
                    &items_ssv,
                    false,
                    opts,
                    errs,
                );
            }
        }
        None => {}
    }
    for (name, dep) in s.dependencies.iter().flatten() {
        if let PropsOrStrings::Props(sub) = dep {
            openapi_schema(
                sub,
                &path.child("dependencies").key(name),
                ssv,
                false,
                opts,
                errs,
            );
        }
    }

    if s.x_preserve_unknown_fields == Some(false) {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-preserve-unknown-fields"),
            false,
            "must be true or undefined",
        ));
    }
    let t = s.type_str();
    if let Some(map_type) = &s.x_map_type {
        if t != "object" {
            let msg = "must be object if x-kubernetes-map-type is specified";
            if t.is_empty() {
                errs.push(FieldError::required(path.child("type"), msg));
            } else {
                errs.push(FieldError::invalid(path.child("type"), t, msg));
            }
        }
        if map_type != "atomic" && map_type != "granular" {
            errs.push(FieldError::not_supported(
                path.child("x-kubernetes-map-type"),
                map_type.as_str(),
                &["atomic", "granular"],
            ));
        }
    }
    if let Some(list_type) = &s.x_list_type {
        if t != "array" {
            let msg = "must be array if x-kubernetes-list-type is specified";
            if t.is_empty() {
                errs.push(FieldError::required(path.child("type"), msg));
            } else {
                errs.push(FieldError::invalid(path.child("type"), t, msg));
            }
        } else if opts.require_atomic_set_type
            && list_type == "set"
            && let Some(item) = s.item()
        {
            let msg = "must be atomic as item of a list with x-kubernetes-list-type=set";
            match item.type_str() {
                "array" if item.x_list_type.as_deref().is_some_and(|t| t != "atomic") => {
                    errs.push(FieldError::invalid(
                        path.child("items").child("x-kubernetes-list-type"),
                        item.x_list_type.clone().unwrap_or_default(),
                        msg,
                    ));
                }
                "object" if item.x_map_type.as_deref() != Some("atomic") => {
                    errs.push(FieldError::invalid(
                        path.child("items").child("x-kubernetes-map-type"),
                        item.x_list_type
                            .clone()
                            .map(Value::from)
                            .unwrap_or(Value::Null),
                        msg,
                    ));
                }
                _ => {}
            }
        }
        if !matches!(list_type.as_str(), "atomic" | "set" | "map") {
            errs.push(FieldError::not_supported(
                path.child("x-kubernetes-list-type"),
                list_type.as_str(),
                &["atomic", "set", "map"],
            ));
        }
    }
    let keys: &[String] = s.x_list_map_keys.as_deref().unwrap_or(&[]);
    if !keys.is_empty() {
        let msg = "must be map if x-kubernetes-list-map-keys is non-empty";
        match s.x_list_type.as_deref() {
            None => errs.push(FieldError::required(
                path.child("x-kubernetes-list-type"),
                msg,
            )),
            Some("map") => {}
            Some(other) => errs.push(FieldError::invalid(
                path.child("x-kubernetes-list-type"),
                other,
                msg,
            )),
        }
    }
    if s.x_list_type.as_deref() == Some("map") {
        if keys.is_empty() {
            errs.push(FieldError::required(
                path.child("x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match &s.items {
            None => errs.push(FieldError::required(
                path.child("items"),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(Items::Many(list)) => errs.push(FieldError::invalid(
                path.child("items"),
                serde_json::to_value(list.len()).unwrap_or(Value::Null),
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            Some(Items::One(item)) if item.type_str() != "object" => {
                errs.push(FieldError::invalid(
                    path.child("items").child("type"),
                    item.type_str(),
                    "must be object if parent array's x-kubernetes-list-type is map",
                ));
            }
            Some(Items::One(item)) => {
                let mut seen = BTreeSet::new();
                for k in keys {
                    match item.property(k) {
                        Some(p) if matches!(p.type_str(), "array" | "object") => {
                            errs.push(FieldError::invalid(
                                path.child("items").child("properties").key(k).child("type"),
                                item.type_str(),
                                "must be a scalar type if parent array's x-kubernetes-list-type is map",
                            ));
                        }
                        Some(_) => {}
                        None => errs.push(FieldError::invalid(
                            path.child("x-kubernetes-list-map-keys"),
                            keys.to_vec(),
                            "entries must all be names of item properties",
                        )),
                    }
                    if !seen.insert(k.as_str()) {
                        errs.push(FieldError::invalid(
                            path.child("x-kubernetes-list-map-keys"),
                            keys.to_vec(),
                            "must not contain duplicate entries",
                        ));
                    }
                }
            }
        }
    }
    if opts.require_map_list_keys_map_set_validation {
        map_list_keys_map_set(s, path, errs);
    }
    for (i, rule) in s.x_validations.iter().flatten().enumerate() {
        let at = path.child("x-kubernetes-validations").index(i);
        validate_rule_shape(rule, s, &at, errs);
        validate_rule_program(rule, ssv.uncorrelatable.as_ref(), &at, errs);
    }
}

/// The CEL checks of a rule at definition write time that do not need the
/// schema's sizes: it must parse; a rule reading `oldSelf` may not be
/// below a list that is not a `map` list (`uncorrelatable`), and only such
/// a rule may set `optionalOldSelf`. Costs are estimated by [`rule_costs`].
fn validate_rule_program(
    rule: &Rule,
    uncorrelatable: Option<&FieldPath>,
    path: &FieldPath,
    errs: &mut ErrorList,
) {
    let text = rule.rule.trim();
    if text.is_empty() {
        return;
    }
    let program = match cel::Program::compile(text) {
        Ok(p) => p,
        Err(e) => {
            errs.push(FieldError::invalid(
                path.child("rule"),
                rule.rule.as_str(),
                format!("compilation failed: {e}"),
            ));
            return;
        }
    };
    if program.references().has_variable("oldSelf") {
        if let Some(list) = uncorrelatable {
            errs.push(FieldError::invalid(
                path.child("rule"),
                rule.rule.as_str(),
                format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"),
            ));
        }
    } else if let Some(optional) = rule.optional_old_self {
        // `optionalOldSelf` only means something for transition rules.
        errs.push(FieldError::invalid(
            path.child("optionalOldSelf"),
            optional,
            "may not be set if oldSelf is not used in rule",
        ));
    }
}

/// Upstream's `TotalCost`: the sum of the estimated costs of a schema's
/// rules and message expressions, and the (at most 4) costliest of them
/// that weigh at least 1% of the schema's limit.
#[derive(Default)]
struct TotalCost {
    total: u64,
    most_expensive: Vec<(FieldPath, u64)>,
    /// How many rules were estimated.
    rules: usize,
}

impl TotalCost {
    fn observe(&mut self, path: FieldPath, cost: u64) {
        self.total = self.total.saturating_add(cost);
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT / 100 {
            return;
        }
        self.most_expensive.push((path, cost));
        self.most_expensive.sort_by_key(|e| std::cmp::Reverse(e.1));
        self.most_expensive.truncate(4);
    }
}

/// The static cost checks of the rules of `s` and below, as upstream's
/// `ValidateCustomResourceDefinitionOpenAPISchema` makes them with its
/// `CELSchemaContext`: each rule's estimated cost (see
/// `apiextensions/cost.rs`), times how many times the rule may run
/// (`cardinality`: the product of the `maxItems` / `maxProperties` of the
/// lists and maps above, or, under an unbounded one, how many values of the
/// node's smallest size fit in a request), must stay within
/// `StaticEstimatedCostLimit`; a message expression's estimate too (not
/// multiplied). All of them add up to `total`. Like upstream, the walk
/// follows `properties`, `additionalProperties` and `items` (not the
/// junctors), children before their parent.
fn rule_costs(
    s: &Props,
    path: &FieldPath,
    is_root: bool,
    cardinality: Option<u64>,
    total: &mut TotalCost,
    errs: &mut ErrorList,
) {
    let child_cardinality =
        cardinality.and_then(|c| cost::max_elements_factor(s).map(|m| cost::mul_guard(c, m)));
    if let Some(sub) = s.additional_schema() {
        rule_costs(
            sub,
            &path.child("additionalProperties"),
            false,
            child_cardinality,
            total,
            errs,
        );
    }
    for (name, sub) in s.props() {
        rule_costs(
            sub,
            &path.child("properties").key(name),
            false,
            child_cardinality,
            total,
            errs,
        );
    }
    if let Some(item) = s.item() {
        rule_costs(
            item,
            &path.child("items"),
            false,
            child_cardinality,
            total,
            errs,
        );
    }
    let Some(rules) = s.x_validations.as_deref().filter(|r| !r.is_empty()) else {
        return;
    };
    let Some(decl) = cost::Decl::from_schema(s, is_root || s.embedded()) else {
        return;
    };
    let sizes = cost::SchemaSizes(&decl);
    let cardinality = cardinality.unwrap_or_else(|| decl.max_cardinality());
    let env = crate::apiextensions::rules::env();
    for (i, rule) in rules.iter().enumerate() {
        let at = path.child("x-kubernetes-validations").index(i);
        let text = rule.rule.trim();
        if text.is_empty() {
            continue;
        }
        let Ok(program) = env.compile(text) else {
            continue;
        };
        let rule_cost = cost::mul_guard(
            cost::estimate(program.expression(), &sizes).max,
            cardinality,
        );
        if rule_cost > STATIC_ESTIMATED_COST_LIMIT {
            errs.push(FieldError::forbidden(
                at.child("rule"),
                cost::cost_error_message(
                    "estimated rule cost",
                    rule_cost,
                    STATIC_ESTIMATED_COST_LIMIT,
                ),
            ));
        }
        total.observe(at.child("rule"), rule_cost);
        total.rules += 1;
        let message = rule.message_expression.trim();
        if message.is_empty() {
            continue;
        }
        let Ok(message) = env.compile(message) else {
            continue;
        };
        let message_cost = cost::estimate(message.expression(), &sizes).max;
        if message_cost > STATIC_ESTIMATED_COST_LIMIT {
            errs.push(FieldError::forbidden(
                at.child("messageExpression"),
                cost::cost_error_message(
                    "estimated messageExpression cost",
                    message_cost,
                    STATIC_ESTIMATED_COST_LIMIT,
                ),
            ));
        }
        total.observe(at.child("messageExpression"), message_cost);
    }
}

/// The cost errors of the rules of a decoded `openAPIV3Schema`, how many
/// rules were estimated, and their total (for tests over real CRDs).
#[cfg(test)]
pub(crate) fn schema_rule_costs(raw: &Value) -> (ErrorList, usize, u64) {
    let schema = decode(raw).expect("schema");
    let path = FieldPath::root().child("openAPIV3Schema");
    let mut total = TotalCost::default();
    let mut errs = ErrorList::default();
    rule_costs(&schema, &path, true, Some(1), &mut total, &mut errs);
    total_cost_errors(&total, &path, &mut errs);
    (errs, total.rules, total.total)
}

/// The errors of a schema whose rules together cost more than
/// `StaticEstimatedCRDCostLimit`: one on each of the costliest rules, then
/// the total on the schema.
fn total_cost_errors(total: &TotalCost, schema_path: &FieldPath, errs: &mut ErrorList) {
    if total.total <= STATIC_ESTIMATED_CRD_COST_LIMIT {
        return;
    }
    for (path, _) in &total.most_expensive {
        errs.push(FieldError::forbidden(
            path,
            "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
        ));
    }
    errs.push(FieldError::forbidden(
        schema_path,
        cost::cost_error_message(
            "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
            total.total,
            STATIC_ESTIMATED_CRD_COST_LIMIT,
        ),
    ));
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// The static checks of one `x-kubernetes-validations` rule (its CEL
/// compilation is done elsewhere).
fn validate_rule_shape(rule: &Rule, schema: &Props, path: &FieldPath, errs: &mut ErrorList) {
    let trimmed_rule = rule.rule.trim();
    let trimmed_msg = rule.message.trim();
    if trimmed_rule.is_empty() {
        errs.push(FieldError::required(
            path.child("rule"),
            "rule is not specified",
        ));
    } else if !rule.message.is_empty() && trimmed_msg.is_empty() {
        errs.push(FieldError::invalid(
            path.child("message"),
            rule.message.as_str(),
            "message must be non-empty if specified",
        ));
    } else if has_newlines(trimmed_msg) {
        errs.push(FieldError::invalid(
            path.child("message"),
            rule.message.as_str(),
            "message must not contain line breaks",
        ));
    } else if has_newlines(trimmed_rule) && trimmed_msg.is_empty() {
        errs.push(FieldError::required(
            path.child("message"),
            "message must be specified if rule contains line breaks",
        ));
    }
    if !rule.message_expression.is_empty() && rule.message_expression.trim().is_empty() {
        errs.push(FieldError::required(
            path.child("messageExpression"),
            "messageExpression must be non-empty if specified",
        ));
    }
    if let Some(reason) = &rule.reason {
        let supported = [
            "FieldValueDuplicate",
            "FieldValueForbidden",
            "FieldValueInvalid",
            "FieldValueRequired",
        ];
        if !supported.contains(&reason.as_str()) {
            errs.push(FieldError::not_supported(
                path.child("reason"),
                reason.as_str(),
                &supported,
            ));
        }
    }
    if !rule.field_path.is_empty() && rule.field_path.trim().is_empty() {
        errs.push(FieldError::invalid(
            path.child("fieldPath"),
            rule.field_path.as_str(),
            "fieldPath must be non-empty if specified",
        ));
    }
    if has_newlines(&rule.field_path) {
        errs.push(FieldError::invalid(
            path.child("fieldPath"),
            rule.field_path.as_str(),
            "fieldPath must not contain line breaks",
        ));
    }
    if !rule.field_path.is_empty()
        && validate_structural_props(schema, &FieldPath::root()).is_empty()
        && resolve_field_path(&rule.field_path, schema, true).is_err()
    {
        errs.push(FieldError::invalid(
            path.child("fieldPath"),
            rule.field_path.as_str(),
            "fieldPath must be a valid path",
        ));
    }
}

/// `validateMapListKeysMapSet`.
fn map_list_keys_map_set(s: &Props, path: &FieldPath, errs: &mut ErrorList) {
    let (Some(item), Some(list_type)) = (s.item(), s.x_list_type.as_deref()) else {
        return;
    };
    if list_type != "set" && list_type != "map" {
        return;
    }
    if flag(item.nullable) {
        errs.push(FieldError::forbidden(
            path.child("items").child("nullable"),
            format!("cannot be nullable when x-kubernetes-list-type is {list_type}"),
        ));
    }
    if list_type == "map" {
        let required: &[String] = item.required.as_deref().unwrap_or(&[]);
        for k in s.x_list_map_keys.iter().flatten() {
            let Some(p) = item.property(k) else {
                continue;
            };
            let kp = path.child("items").child("properties").key(k);
            if !required.contains(k) && p.default.is_none() {
                errs.push(FieldError::required(
                    kp.child("default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                ));
            }
            if flag(p.nullable) {
                errs.push(FieldError::forbidden(
                    kp.child("nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                ));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Structural schemas (schema/validation.go and completeness.go).
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

fn validate_structural_props(s: &Props, path: &FieldPath) -> ErrorList {
    let mut errs = ErrorList::default();
    invariants(s, Level::Root, path, &mut errs);
    completeness(s, path, &mut errs);
    errs.0.sort_by_key(|e| e.to_string());
    errs
}

fn is_int_or_string_any_of(list: Option<&Vec<Props>>) -> bool {
    let Some(list) = list else {
        return false;
    };
    let only_type = |p: &Props, t: &str| {
        *p == Props {
            type_: Some(t.into()),
            ..Props::default()
        }
    };
    list.len() == 2 && only_type(&list[0], "integer") && only_type(&list[1], "string")
}

fn invariants(s: &Props, lvl: Level, path: &FieldPath, errs: &mut ErrorList) {
    let t = s.type_str();
    if t == "array" && s.items.is_none() {
        errs.push(FieldError::required(
            path.child("items"),
            "must be specified",
        ));
    }
    if let Some(item) = s.item() {
        invariants(item, Level::Item, &path.child("items"), errs);
    }
    for (name, sub) in s.props() {
        invariants(sub, Level::Field, &path.child("properties").key(name), errs);
    }
    if s.additional_properties.is_some() {
        if lvl == Level::Root {
            errs.push(FieldError::forbidden(
                path.child("additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Some(sub) = s.additional_schema() {
            invariants(sub, Level::Field, &path.child("additionalProperties"), errs);
        }
    }
    if s.int_or_string() && s.preserve() {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-preserve-unknown-fields"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.int_or_string() && s.embedded() {
        errs.push(FieldError::invalid(
            path.child("x-kubernetes-embedded-resource"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }

    let skip_any_of = is_int_or_string_any_of(s.any_of.as_ref());
    let skip_first_all_of_any_of = s
        .all_of
        .as_ref()
        .and_then(|l| l.first())
        .is_some_and(|first| is_int_or_string_any_of(first.any_of.as_ref()));
    value_validation(s, skip_any_of, skip_first_all_of_any_of, lvl, path, errs);

    let check_metadata = lvl == Level::Root || s.embedded();
    if s.embedded() && t != "object" {
        let msg = "must be object if x-kubernetes-embedded-resource is true";
        if t.is_empty() {
            errs.push(FieldError::required(path.child("type"), msg));
        } else {
            errs.push(FieldError::invalid(path.child("type"), t, msg));
        }
    } else if t.is_empty() && !s.int_or_string() && !s.preserve() {
        let msg = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(path.child("type"), msg));
    }
    if s.embedded() && s.additional_properties.is_some() {
        errs.push(FieldError::forbidden(
            path.child("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !t.is_empty() && t != "object" {
        errs.push(FieldError::invalid(
            path.child("type"),
            t,
            "must be object at the root",
        ));
    }
    if check_metadata {
        for (name, want) in [
            ("kind", "string"),
            ("apiVersion", "string"),
            ("metadata", "object"),
        ] {
            if let Some(p) = s.property(name)
                && p.type_str() != want
            {
                errs.push(FieldError::invalid(
                    path.child("properties").key(name).child("type"),
                    p.type_str(),
                    format!("must be {want}"),
                ));
            }
        }
    }
    if lvl == Level::Root
        && let Some(metadata) = s.property("metadata")
    {
        let mut rest = metadata.clone();
        let names: BTreeSet<&str> = rest.props().map(|(k, _)| k.as_str()).collect();
        let only_names =
            !names.is_empty() && names.iter().all(|k| matches!(*k, "name" | "generateName"));
        if only_names {
            rest.properties = None;
        }
        rest.type_ = None;
        rest.default = None;
        if rest != Props::default() {
            errs.push(FieldError::forbidden(
                path.child("properties").key("metadata"),
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    if s.embedded() && !s.preserve() && !s.has_properties() {
        errs.push(FieldError::required(
            path.child("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// The value validations of a structural node or of a nested one: the
/// junctors and the pattern.
fn value_validation(
    s: &Props,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    lvl: Level,
    path: &FieldPath,
    errs: &mut ErrorList,
) {
    if !skip_any_of {
        for (i, sub) in s.any_of.iter().flatten().enumerate() {
            nested(sub, false, lvl, &path.child("anyOf").index(i), errs);
        }
    }
    for (i, sub) in s.all_of.iter().flatten().enumerate() {
        nested(
            sub,
            skip_first_all_of_any_of && i == 0,
            lvl,
            &path.child("allOf").index(i),
            errs,
        );
    }
    for (i, sub) in s.one_of.iter().flatten().enumerate() {
        nested(sub, false, lvl, &path.child("oneOf").index(i), errs);
    }
    if let Some(not) = &s.not {
        nested(not, false, lvl, &path.child("not"), errs);
    }
    if let Some(pattern) = s.pattern.as_deref().filter(|p| !p.is_empty())
        && let Err(e) = regex::Regex::new(pattern)
    {
        errs.push(FieldError::invalid(
            path.child("pattern"),
            pattern,
            format!("must be a valid regular expression, but isn't: {e}"),
        ));
    }
}

/// A value validation under a junctor (`validateNestedValueValidation`):
/// no type, no defaults, no extensions there.
fn nested(v: &Props, skip_any_of: bool, lvl: Level, path: &FieldPath, errs: &mut ErrorList) {
    value_validation(v, skip_any_of, false, lvl, path, errs);
    if let Some(item) = v.item() {
        nested(item, false, lvl, &path.child("items"), errs);
    }
    for (name, sub) in v.props() {
        nested(
            sub,
            false,
            Level::Field,
            &path.child("properties").key(name),
            errs,
        );
    }
    let forbid = |errs: &mut ErrorList, set: bool, field: &str, msg: &str| {
        if set {
            errs.push(FieldError::forbidden(path.child(field), msg));
        }
    };
    forbid(
        errs,
        !v.type_str().is_empty(),
        "type",
        "must be empty to be structural",
    );
    forbid(
        errs,
        v.additional_properties.is_some(),
        "additionalProperties",
        "must be undefined to be structural",
    );
    forbid(
        errs,
        v.default.is_some(),
        "default",
        "must be undefined to be structural",
    );
    forbid(
        errs,
        !text(&v.title).is_empty(),
        "title",
        "must be empty to be structural",
    );
    forbid(
        errs,
        !text(&v.description).is_empty(),
        "description",
        "must be empty to be structural",
    );
    forbid(
        errs,
        flag(v.nullable),
        "nullable",
        "must be false to be structural",
    );
    forbid(
        errs,
        v.preserve(),
        "x-kubernetes-preserve-unknown-fields",
        "must be false to be structural",
    );
    forbid(
        errs,
        v.embedded(),
        "x-kubernetes-embedded-resource",
        "must be false to be structural",
    );
    forbid(
        errs,
        v.int_or_string(),
        "x-kubernetes-int-or-string",
        "must be false to be structural",
    );
    forbid(
        errs,
        v.x_list_map_keys.as_ref().is_some_and(|k| !k.is_empty()),
        "x-kubernetes-list-map-keys",
        "must be empty to be structural",
    );
    forbid(
        errs,
        v.x_list_type.is_some(),
        "x-kubernetes-list-type",
        "must be undefined to be structural",
    );
    if v.property("metadata").is_some() {
        errs.push(FieldError::forbidden(
            path.child("properties").key("metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// `validateStructuralCompleteness`: every field a junctor of the root
/// speaks about is also specified structurally.
fn completeness(s: &Props, path: &FieldPath, errs: &mut ErrorList) {
    value_completeness(s, Some(s), path, path, errs);
}

fn value_completeness(
    v: &Props,
    s: Option<&Props>,
    s_path: &FieldPath,
    v_path: &FieldPath,
    errs: &mut ErrorList,
) {
    let Some(s) = s else {
        errs.push(FieldError::required(
            s_path,
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    if let Some(not) = &v.not {
        nested_completeness(not, Some(s), s_path, &v_path.child("not"), errs);
    }
    for (field, list) in [
        ("allOf", &v.all_of),
        ("anyOf", &v.any_of),
        ("oneOf", &v.one_of),
    ] {
        for (i, sub) in list.iter().flatten().enumerate() {
            nested_completeness(sub, Some(s), s_path, &v_path.child(field).index(i), errs);
        }
    }
}

fn nested_completeness(
    v: &Props,
    s: Option<&Props>,
    s_path: &FieldPath,
    v_path: &FieldPath,
    errs: &mut ErrorList,
) {
    let Some(s) = s else {
        errs.push(FieldError::required(
            s_path,
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    value_completeness(v, Some(s), s_path, v_path, errs);
    if let Some(item) = v.item() {
        nested_completeness(
            item,
            s.item(),
            &s_path.child("items"),
            &v_path.child("items"),
            errs,
        );
    }
    for (name, sub) in v.props() {
        match s.property(name) {
            Some(field) => nested_completeness(
                sub,
                Some(field),
                &s_path.child("properties").key(name),
                &v_path.child("properties").key(name),
                errs,
            ),
            None => errs.push(FieldError::required(
                s_path.child("properties").key(name),
                format!(
                    "because it is defined in {}",
                    v_path.child("properties").key(name)
                ),
            )),
        }
    }
}

// ---------------------------------------------------------------------------
// Defaults (schema/defaulting/validation.go).
// ---------------------------------------------------------------------------

/// Checks that each `default` of the structural part is pruned and valid
/// against its schema. `resource_root` marks the schema of a whole object
/// (whose `apiVersion`, `kind` and `metadata` survive pruning).
fn validate_defaults(
    s: &Props,
    path: &FieldPath,
    resource_root: bool,
    require_pruned: bool,
    errs: &mut ErrorList,
) {
    defaults_walk(
        s,
        path,
        resource_root || s.embedded(),
        false,
        require_pruned,
        errs,
    );
}

fn defaults_walk(
    s: &Props,
    path: &FieldPath,
    resource_root: bool,
    inside_meta: bool,
    require_pruned: bool,
    errs: &mut ErrorList,
) {
    let inside_meta = inside_meta && !s.embedded();
    if let Some(default) = &s.default {
        if !inside_meta && require_pruned {
            let mut pruned = default.clone();
            prune(&mut pruned, s, resource_root || s.embedded());
            if pruned != *default {
                errs.push(FieldError::invalid(
                    path.child("default"),
                    default.clone(),
                    "must not have unknown fields",
                ));
            }
        }
        check_value(default, s, &path.child("default"), errs);
    }
    if let Some(item) = s.item() {
        defaults_walk(
            item,
            &path.child("items"),
            item.embedded(),
            inside_meta,
            require_pruned,
            errs,
        );
    }
    let is_resource = resource_root || s.embedded();
    for (name, sub) in s.props() {
        let meta = is_resource && matches!(name.as_str(), "metadata" | "apiVersion" | "kind");
        defaults_walk(
            sub,
            &path.child("properties").key(name),
            sub.embedded(),
            inside_meta || meta,
            require_pruned,
            errs,
        );
    }
}

/// Removes the fields a structural schema does not specify (upstream's
/// `pruning.Prune`).
fn prune(value: &mut Value, s: &Props, resource_root: bool) {
    match value {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if resource_root && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(sub) = s.property(&key) {
                    if let Some(v) = map.get_mut(&key) {
                        prune(v, sub, sub.embedded());
                    }
                } else if let Some(sub) = s.additional_schema() {
                    if let Some(v) = map.get_mut(&key) {
                        prune(v, sub, sub.embedded());
                    }
                } else if !s.preserve()
                    && !matches!(s.additional_properties, Some(BoolOrProps::Bool(true)))
                {
                    map.shift_remove(&key);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = s.item() {
                for v in items {
                    prune(v, item, item.embedded());
                }
            }
        }
        _ => {}
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A compact validator of a value against its schema (types, enum,
/// bounds, lengths, pattern, required), for default values. Messages
/// follow kube-openapi's `<path> in body ...` form.
fn check_value(v: &Value, s: &Props, path: &FieldPath, errs: &mut ErrorList) {
    let at = path.as_str();
    if v.is_null() {
        if !flag(s.nullable) && !s.type_str().is_empty() {
            errs.push(FieldError {
                type_: ErrorType::TypeInvalid,
                field: at.into(),
                bad_value: Some(Value::Null),
                detail: format!("{at} in body must be of type {}: \"null\"", s.type_str()),
            });
        }
        return;
    }
    let actual = json_type(v);
    let t = s.type_str();
    let int_or_string_ok = s.int_or_string() && matches!(actual, "integer" | "string");
    let type_ok =
        t.is_empty() || int_or_string_ok || t == actual || (t == "number" && actual == "integer");
    if !type_ok {
        errs.push(FieldError {
            type_: ErrorType::TypeInvalid,
            field: at.into(),
            bad_value: Some(Value::from(actual)),
            detail: format!("{at} in body must be of type {t}: \"{actual}\""),
        });
        return;
    }
    if let Some(allowed) = &s.enum_
        && !allowed.contains(v)
    {
        let quoted: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
        errs.push(FieldError {
            type_: ErrorType::NotSupported,
            field: at.into(),
            bad_value: Some(v.clone()),
            detail: format!("supported values: {}", quoted.join(", ")),
        });
    }
    match v {
        Value::String(text_value) => {
            let len = text_value.chars().count() as i64;
            if let Some(max) = s.max_length
                && len > max
            {
                errs.push(FieldError::too_long(at, usize::try_from(max).unwrap_or(0)));
            }
            if let Some(min) = s.min_length
                && len < min
            {
                errs.push(FieldError::invalid(
                    at,
                    text_value.as_str(),
                    format!("{at} in body should be at least {min} chars long"),
                ));
            }
            if let Some(pattern) = s.pattern.as_deref()
                && let Ok(re) = regex::Regex::new(pattern)
                && !re.is_match(text_value)
            {
                errs.push(FieldError::invalid(
                    at,
                    text_value.as_str(),
                    format!("{at} in body should match '{pattern}'"),
                ));
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if let Some(max) = s.maximum
                && (x > max || (flag(s.exclusive_maximum) && x >= max))
            {
                let op = if flag(s.exclusive_maximum) {
                    "less than"
                } else {
                    "less than or equal to"
                };
                errs.push(FieldError::invalid(
                    at,
                    v.clone(),
                    format!("{at} in body should be {op} {max}"),
                ));
            }
            if let Some(min) = s.minimum
                && (x < min || (flag(s.exclusive_minimum) && x <= min))
            {
                let op = if flag(s.exclusive_minimum) {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                errs.push(FieldError::invalid(
                    at,
                    v.clone(),
                    format!("{at} in body should be {op} {min}"),
                ));
            }
        }
        Value::Array(items) => {
            if let Some(max) = s.max_items
                && items.len() as i64 > max
            {
                errs.push(FieldError::too_many(
                    at,
                    items.len(),
                    usize::try_from(max).unwrap_or(0),
                ));
            }
            if let Some(min) = s.min_items
                && (items.len() as i64) < min
            {
                errs.push(FieldError::invalid(
                    at,
                    v.clone(),
                    format!("{at} in body should have at least {min} items"),
                ));
            }
            if let Some(item) = s.item() {
                for (i, x) in items.iter().enumerate() {
                    check_value(x, item, &path.index(i), errs);
                }
            }
        }
        Value::Object(map) => {
            for req in s.required.iter().flatten() {
                if !map.contains_key(req) {
                    errs.push(FieldError::required(path.child(req), ""));
                }
            }
            for (k, x) in map {
                if let Some(sub) = s.property(k).or_else(|| s.additional_schema()) {
                    check_value(x, sub, &path.child(k), errs);
                }
            }
        }
        Value::Bool(_) | Value::Null => {}
    }
}
