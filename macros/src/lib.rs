//! Derive macros of apiforge.
//!
//! - [`Resource`](derive@Resource) turns a struct with a `metadata: ObjectMeta`
//!   field into a Kubernetes-style kind: the kind's static facts
//!   (`KindInfo`: group, version, scope, printer columns, subresources, ...)
//!   plus the declarative validation, defaulting and schema rules of its
//!   fields.
//! - [`Validate`](derive@Validate) gives a nested struct (a spec, a status,
//!   a list item) the same declarative rules.
//! - [`Convert`](derive@Convert) converts a version to and from its hub,
//!   field by field.
//!
//! One declaration has two uses: every `#[validate(...)]` rule is checked
//! by the generated `validate` *and* published in the OpenAPI schema
//! (`minimum`, `maxLength`, `x-kubernetes-validations`, ...).
//!
//! # The codegen contract
//!
//! Generated code names runtime items only through one versioned module,
//! `::apiforge_runtime::codegen::v1` (`<path>::codegen::v1` with
//! `crate = path`), which re-exports exactly the items expansions use;
//! never the runtime's public modules. The runtime can reorganise those
//! freely; an incompatible change to a re-exported item goes into a new
//! `codegen::v2` that the macros then switch to. A crate that declares
//! kinds with these macros from inside the runtime (the runtime's built-in
//! groups) makes the default path resolve with
//! `extern crate self as apiforge_runtime;`.
//!
//! # Pipeline
//!
//! Each derive reads its attributes (darling), builds a model in which every
//! name and default is resolved (kind, plural, singular, OpenAPI name, JSON
//! field names, the hub field of each converted field, ...), checks the
//! model, and only then expands it; expansion reads the model and cannot
//! fail. All errors of one derive are reported together, at the offending
//! attribute, as `compile_error!`s followed by a stub impl so that uses of
//! the type do not add a cascade of errors. Generated code is wrapped in
//! `const _: () = { ... };`. Set `APIFORGE_MACROS_DEBUG=1` to print every
//! expansion.

mod attr;
mod cel_check;
mod check;
mod ctxt;
mod expand;
mod fallback;
mod model;

#[cfg(test)]
mod tests;

use proc_macro::TokenStream;

/// Derives `apiforge_runtime::resource::Resource` (and
/// `apiforge_runtime::validation::Validate`) for a kind.
///
/// ```no_run
/// use apiforge_runtime::Resource;
/// use apiforge_runtime::meta::ObjectMeta;
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, Resource)]
/// #[resource(
///     group = "showcase.example.com",
///     version = "v1",
///     namespaced,
///     short_names = ["db"],
///     categories = ["all"],
///     printcolumn(name = "Replicas", type = "integer", json_path = ".spec.replicas"),
///     printcolumn(name = "Age", type = "date", json_path = ".metadata.creationTimestamp", priority = 1),
///     selectable_fields = [".spec.engine"],
///     subresource_status,
///     subresource_scale(spec_replicas_path = ".spec.replicas", status_replicas_path = ".status.replicas"),
///     default_strategy,
/// )]
/// pub struct Database {
///     #[serde(default)]
///     pub metadata: ObjectMeta,
///     #[serde(default)]
///     pub spec: DatabaseSpec,
/// }
///
/// #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, apiforge_runtime::Validate)]
/// pub struct DatabaseSpec {
///     #[validate(minimum = 1, maximum = 5, default = 1)]
///     pub replicas: Option<i32>,
///     #[validate(enum_values = ["postgres", "mysql"])]
///     pub engine: String,
/// }
/// # fn main() {}
/// ```
///
/// Container attributes, `#[resource(...)]`:
/// - `group = "..."` (required; `""` is the core group), `version = "..."` (required);
/// - `kind = "..."` (default: the struct name), `plural` (default: lower-case
///   kind + `s`), `singular` (default: lower-case kind);
/// - `namespaced` or `cluster` (exactly one);
/// - `short_names = ["..."]`, `categories = ["..."]`;
/// - `openapi_name = "..."` (default: `<reversed group>.<version>.<Kind>`);
/// - `printcolumn(name = "...", type = "integer"|"number"|"string"|"boolean"|"date",
///   json_path = ".spec.x", priority = 0, description = "...", format = "...")`,
///   repeatable: the `kubectl get` columns (`KindInfo::printer_columns`);
/// - `selectable_fields = [".spec.x"]`: extra field-selector paths;
/// - `subresource_status`; `subresource_scale(spec_replicas_path = ".spec.replicas",
///   status_replicas_path = ".status.replicas", label_selector_path = ".status.selector")`;
/// - `deprecated`, `deprecation_warning = "..."` (needs `deprecated`);
/// - `default_strategy`: also implement `Strategy` with every default hook
///   (which run the generated validation and defaulting);
/// - `crate = path`: the path of the runtime crate (default `::apiforge_runtime`).
///
/// The struct may also carry the container and field `#[validate(...)]`
/// attributes of [`Validate`](derive@Validate); do not derive `Validate`
/// on a resource as well.
///
/// Each key may be given once (`printcolumn` is repeatable):
///
/// ```compile_fail
/// #[derive(Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema, apiforge_runtime::Resource)]
/// #[resource(group = "g.example.com", version = "v1", namespaced, namespaced)]
/// pub struct Thing {
///     pub metadata: apiforge_runtime::meta::ObjectMeta,
/// }
/// ```
#[proc_macro_derive(Resource, attributes(resource, validate))]
pub fn derive_resource(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    expand::derive_resource(&input).into()
}

/// Derives `apiforge_runtime::validation::Validate` for a nested struct
/// from `#[validate(...)]` attributes: validation with Kubernetes field
/// paths and reasons, update validation, defaulting, and publication of
/// the rules into the type's schema. Fields whose types implement
/// `Validate` (also through `Option`, `Vec`, `Box`, string-keyed maps) are
/// validated recursively; the type must also derive `JsonSchema`,
/// `Serialize` (for CEL, sets and list maps) and, for `immutable`,
/// `PartialEq`. JSON names follow `#[serde(rename, rename_all)]`.
///
/// ```no_run
/// use apiforge_runtime::Validate;
/// use apiforge_runtime::validation::{ErrorList, FieldPath, Validate as _};
/// use schemars::JsonSchema;
/// use serde::{Deserialize, Serialize};
///
/// fn even(v: &i32, path: &FieldPath) -> ErrorList {
///     let mut errs = ErrorList::default();
///     if v % 2 != 0 {
///         errs.push(apiforge_runtime::validation::FieldError::invalid(path, *v, "must be even"));
///     }
///     errs
/// }
///
/// #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
/// #[serde(rename_all = "camelCase")]
/// #[validate(one_of(url, secret_ref), cel(rule = "self.minSize <= self.maxSize", message = "minSize must not exceed maxSize"))]
/// pub struct Storage {
///     #[validate(required, min_length = 1, max_length = 63, format = "dns1123_label", immutable)]
///     pub class_name: String,
///     #[validate(minimum = 1, maximum = 1024, exclusive_maximum, default = 10)]
///     pub min_size: i64,
///     #[validate(minimum = 1)]
///     pub max_size: i64,
///     #[validate(pattern = "^https://")]
///     pub url: Option<String>,
///     pub secret_ref: Option<String>,
///     #[validate(list_type = "set", max_items = 8, cel(rule = "self.all(t, t.size() < 20)"))]
///     pub tags: Vec<String>,
///     #[validate(list_type = "map", list_map_keys = ["name"], patch_strategy = "merge", patch_merge_key = "name")]
///     pub mounts: Vec<Mount>,
///     #[validate(custom = even, optional)]
///     pub stripes: i32,
/// }
///
/// #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
/// pub struct Mount {
///     #[validate(required)]
///     pub name: String,
///     #[validate(format = "uuid")]
///     pub volume: Option<String>,
/// }
///
/// let errs = Storage::default().validate(&FieldPath::new("spec"));
/// assert!(!errs.is_empty());
/// ```
///
/// Field attributes, `#[validate(...)]` (each key once; `cel` repeatable):
/// - `required` (`Required value` when unset: `None`, `""`, empty list or
///   map, zero, `false`) / `optional` (only drops the field from the
///   schema's `required`);
/// - `minimum = n`, `maximum = n`, with `exclusive_minimum` / `exclusive_maximum`
///   flags (OpenAPI 3.0 booleans);
/// - `min_length = n`, `max_length = n` (bytes), `pattern = "regex"` (checked
///   at compile time), `format = "dns1123_label" | "dns1123_subdomain" |
///   "k8s_short_name" | "uuid" | "date_time" | "ip" | "cidr"`,
///   `enum_values = ["a", "b"]`;
/// - `min_items = n`, `max_items = n`, `list_type = "atomic" | "set" | "map"`
///   (sets: items unique; maps: `list_map_keys = ["name"]` unique);
/// - `immutable`: `field is immutable` on update (and published as the
///   CEL rule `self == oldSelf`);
/// - `cel(rule = "...", message = "...")`: `x-kubernetes-validations`; rules
///   reading `oldSelf` run on update only. Rules are checked at compile
///   time (see *CEL rules at compile time* below);
/// - `custom = path::to::fn`, a `fn(&FieldType, &FieldPath) -> ErrorList`;
/// - `default = expr` (converted with `Into`, wrapped in `Some` for
///   `Option` fields), applied to unset fields and published as `default`;
/// - `patch_strategy = "merge" | "replace" | "retainKeys"`,
///   `patch_merge_key = "name"`: strategic-merge-patch metadata
///   (`x-kubernetes-patch-strategy` / `-merge-key`).
///
/// Rules other than `required` and `custom` apply to the value inside an
/// `Option` and are skipped for `None`.
///
/// CEL rules at compile time: each rule is parsed (a syntax error is a
/// compile error), type-checked against the Rust types of what it reads
/// (`self` is the field's type, or for a container rule the struct with its
/// JSON field names; a field of another struct's type is dynamic): an
/// unknown field (`undefined field 'replicaz'`), operands of the wrong
/// types (`found no matching overload for '_>_' applied to '(int,
/// string)'`) or a result that is not a bool fail at the rule. Its cost is
/// estimated as kube-apiserver does when it installs a CRD, from
/// `max_length` and `max_items` (unbounded lists and strings get the
/// largest sizes a 3 MiB request allows), and a rule over the 10,000,000
/// budget fails with upstream's `estimated rule cost exceeds budget by
/// factor of ...`. A rule reading `oldSelf`, or an `immutable` field, in
/// the items of a list that is not `list_type = "map"` (or below them)
/// fails where the list is declared, with upstream's `oldSelf cannot be
/// used on the uncorrelatable portion of the schema within ...`.
///
/// Container attributes: `one_of(a, b)` (exactly one set),
/// `at_most_one_of(a, b)`, `cel(rule = "...", message = "...")` (with
/// `self` the whole struct), `crate = path`. Unions are also published as
/// `x-kubernetes-validations` rules with the same messages, so a CRD made
/// from the kind refuses what the kind refuses.
///
/// ```compile_fail
/// #[derive(serde::Serialize, schemars::JsonSchema, apiforge_runtime::Validate)]
/// pub struct Bad {
///     #[validate(format = "email")]
///     pub contact: String,
/// }
/// ```
#[proc_macro_derive(Validate, attributes(validate))]
pub fn derive_validate(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    expand::derive_validate(&input).into()
}

/// Derives `apiforge_runtime::scheme::Convert<Hub>` for a version type:
/// fields with the same name convert with `Convert` (the identity when the
/// types are equal, a derived or hand-written `Convert` for nested
/// versioned types). You write functions only for the fields that differ.
///
/// ```no_run
/// use apiforge_runtime::Convert;
///
/// #[derive(Clone, Default)]
/// pub struct HubSpec { pub storage_size: String, pub engine: String, pub tier: String }
///
/// fn engine_into_hub(v: &OldSpec) -> String { v.engine.to_lowercase() }
/// fn engine_from_hub(hub: &HubSpec) -> String { hub.engine.to_uppercase() }
///
/// #[derive(Clone, Default, Convert)]
/// #[convert(hub = HubSpec, hub_default)]
/// pub struct OldSpec {
///     #[convert(rename = storage_size)]
///     pub size: String,
///     #[convert(into_hub = engine_into_hub, from_hub = engine_from_hub)]
///     pub engine: String,
///     #[convert(skip)]
///     pub legacy_flag: bool,
/// }
/// # fn main() {}
/// ```
///
/// Container: `hub = path::Hub` (required), `hub_default` (hub fields
/// without a counterpart get `Default::default()`), `crate = path`.
/// Fields: `rename = hub_field`, `into_hub = fn(&Self) -> HubField` with
/// `from_hub = fn(&Hub) -> Field`, `skip` (not in the hub; `Default` on
/// the way back).
#[proc_macro_derive(Convert, attributes(convert))]
pub fn derive_convert(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    expand::derive_convert(&input).into()
}
