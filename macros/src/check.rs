use crate::cel_check;
use crate::ctxt::Ctxt;
use crate::model::{ConvertModel, FieldModel, ResourceModel, ValidateModel};

pub(crate) const FORMATS: &[&str] = &[
    "dns1123_label",
    "dns1123_subdomain",
    "k8s_short_name",
    "uuid",
    "date_time",
    "ip",
    "cidr",
];
const COLUMN_TYPES: &[&str] = &["integer", "number", "string", "boolean", "date"];
const LIST_TYPES: &[&str] = &["atomic", "set", "map"];
const PATCH_STRATEGIES: &[&str] = &[
    "merge",
    "replace",
    "retainKeys",
    "retainKeys,merge",
    "merge,retainKeys",
];

pub(crate) fn check_validate(cx: &Ctxt, model: &ValidateModel) {
    for field in &model.fields {
        check_field(cx, field);
    }
    let this = object_type(&model.fields);
    for rule in &model.cel {
        check_cel(cx, &rule.rule, &this);
    }
}

/// The CEL type of a struct whose fields are `fields`: an object of their
/// JSON names (open when a field is flattened into it).
fn object_type(fields: &[FieldModel]) -> cel_check::Ty {
    let open = fields.iter().any(|f| f.flatten);
    let known = fields
        .iter()
        .filter(|f| !f.flatten && !f.skip)
        .map(|f| (f.json_name.clone(), field_type(f)))
        .collect();
    cel_check::Ty::Object(known, open)
}

fn field_type(f: &FieldModel) -> cel_check::Ty {
    let a = &f.attrs;
    cel_check::ty_of(
        &a.ty,
        a.max_length.as_ref().map(|n| **n as u64),
        a.max_items.as_ref().map(|n| **n as u64),
    )
}

/// A CEL rule must not be empty, must parse, must type-check against the
/// Rust types (`self` being `this`) and must fit kube-apiserver's cost
/// budget.
fn check_cel(cx: &Ctxt, rule: &darling::util::SpannedValue<String>, this: &cel_check::Ty) {
    if rule.trim().is_empty() {
        cx.error(rule.span(), "`cel` rule must not be empty");
        return;
    }
    if let Err(e) = cel_check::check_rule(rule, this) {
        cx.error(
            rule.span(),
            format!("invalid `cel` rule {:?}: {e}", rule.as_str()),
        );
    }
}

fn check_field(cx: &Ctxt, f: &FieldModel) {
    let a = &f.attrs;
    // `required` and `optional` contradict each other.
    if a.required.is_present() && a.optional.is_present() {
        cx.error(
            a.optional.span(),
            "`required` and `optional` are mutually exclusive",
        );
    }
    // Exclusive bounds modify a bound that must be given.
    if a.exclusive_minimum.is_present() && a.minimum.is_none() {
        cx.error(
            a.exclusive_minimum.span(),
            "`exclusive_minimum` needs `minimum`",
        );
    }
    if a.exclusive_maximum.is_present() && a.maximum.is_none() {
        cx.error(
            a.exclusive_maximum.span(),
            "`exclusive_maximum` needs `maximum`",
        );
    }
    // Bounds must leave room for a value.
    if let (Some(min), Some(max)) = (&a.minimum, &a.maximum)
        && min.value > max.value
    {
        cx.error(max.span, "`maximum` must not be less than `minimum`");
    }
    if let (Some(min), Some(max)) = (&a.min_length, &a.max_length)
        && **min > **max
    {
        cx.error(
            max.span(),
            "`max_length` must not be less than `min_length`",
        );
    }
    if let (Some(min), Some(max)) = (&a.min_items, &a.max_items)
        && **min > **max
    {
        cx.error(max.span(), "`max_items` must not be less than `min_items`");
    }
    // Patterns are compiled at build time.
    if let Some(p) = &a.pattern
        && let Err(e) = regex::Regex::new(p)
    {
        cx.error(
            p.span(),
            format!("`pattern` is not a valid regular expression: {e}"),
        );
    }
    // Formats are a closed set.
    if let Some(fmt) = &a.format
        && !FORMATS.contains(&fmt.as_str())
    {
        cx.error(
            fmt.span(),
            format!(
                "unknown `format` {:?}; expected one of: {}",
                fmt.as_str(),
                FORMATS.join(", ")
            ),
        );
    }
    if let Some(values) = &a.enum_values
        && values.0.is_empty()
    {
        cx.error(values.span(), "`enum_values` must not be empty");
    }
    // List types are a closed set; map keys only go with `map` lists.
    if let Some(lt) = &a.list_type {
        if !LIST_TYPES.contains(&lt.as_str()) {
            cx.error(
                lt.span(),
                format!(
                    "unknown `list_type` {:?}; expected \"atomic\", \"set\" or \"map\"",
                    lt.as_str()
                ),
            );
        }
        if lt.as_str() == "map" && a.list_map_keys.as_ref().is_none_or(|k| k.0.is_empty()) {
            cx.error(lt.span(), "`list_type = \"map\"` needs `list_map_keys`");
        }
    }
    if let Some(keys) = &a.list_map_keys
        && a.list_type.as_ref().is_none_or(|lt| lt.as_str() != "map")
    {
        cx.error(keys.span(), "`list_map_keys` needs `list_type = \"map\"`");
    }
    let this = field_type(f);
    for rule in &a.cel {
        check_cel(cx, &rule.rule, &this);
    }
    // A merge key only means something for the merge strategy.
    if let Some(ps) = &a.patch_strategy
        && !PATCH_STRATEGIES.contains(&ps.as_str())
    {
        cx.error(
            ps.span(),
            format!(
                "unknown `patch_strategy` {:?}; expected \"merge\", \"replace\" or \"retainKeys\"",
                ps.as_str()
            ),
        );
    }
    if let Some(key) = &a.patch_merge_key
        && a.patch_strategy
            .as_ref()
            .is_none_or(|s| !s.contains("merge"))
    {
        cx.error(
            key.span(),
            "`patch_merge_key` needs `patch_strategy = \"merge\"`",
        );
    }
    // A flattened or skipped field has no property of its own to carry rules.
    if (f.flatten || f.skip) && has_rules(f) {
        cx.error(
            f.ident.span(),
            "`validate` rules cannot be put on a `#[serde(flatten)]` or `#[serde(skip)]` field",
        );
    }
}

fn has_rules(f: &FieldModel) -> bool {
    let a = &f.attrs;
    a.required.is_present()
        || a.minimum.is_some()
        || a.maximum.is_some()
        || a.min_length.is_some()
        || a.max_length.is_some()
        || a.pattern.is_some()
        || a.format.is_some()
        || a.enum_values.is_some()
        || a.min_items.is_some()
        || a.max_items.is_some()
        || a.list_type.is_some()
        || a.immutable.is_present()
        || !a.cel.is_empty()
        || a.custom.is_some()
        || a.default.is_some()
        || a.patch_strategy.is_some()
}

pub(crate) fn check_resource(cx: &Ctxt, model: &ResourceModel) {
    // Generic kinds cannot have static facts.
    if !model.generics.params.is_empty() {
        cx.push(
            darling::Error::custom("`Resource` cannot be derived for generic structs")
                .with_span(&model.generics),
        );
    }
    // A kind has exactly one scope.
    match (model.namespaced.is_present(), model.cluster.is_present()) {
        (true, true) => cx.error(
            model.cluster.span(),
            "`namespaced` and `cluster` are mutually exclusive",
        ),
        (false, false) => cx.error(
            model.ident.span(),
            "one of `namespaced` or `cluster` is required",
        ),
        _ => {}
    }
    if model.version.is_empty() {
        cx.error(model.version.span(), "`version` must not be empty");
    }
    // Every object has metadata.
    if !model.has_metadata {
        cx.error(
            model.ident.span(),
            "a resource needs a `metadata: ObjectMeta` field",
        );
    }
    // Printer columns: a known type and a JSON path from the root.
    for col in &model.printer_columns {
        if !COLUMN_TYPES.contains(&col.type_.as_str()) {
            cx.error(
                col.type_.span(),
                format!(
                    "unknown `printcolumn` type {:?}; expected one of: {}",
                    col.type_.as_str(),
                    COLUMN_TYPES.join(", ")
                ),
            );
        }
        check_json_path(cx, &col.json_path, "printcolumn");
        if col.priority < 0 {
            cx.error(col.span(), "`printcolumn` priority must not be negative");
        }
    }
    for lit in &model.selectable_fields {
        if !lit.value().starts_with('.') {
            cx.error(lit.span(), "`selectable_fields` paths must start with '.'");
        }
    }
    if let Some(scale) = &model.subresource_scale {
        check_json_path(cx, &scale.spec_replicas_path, "subresource_scale");
        check_json_path(cx, &scale.status_replicas_path, "subresource_scale");
        if let Some(p) = &scale.label_selector_path {
            check_json_path(cx, p, "subresource_scale");
        }
    }
    // A deprecation warning only goes with `deprecated`.
    if let Some(w) = &model.deprecation_warning
        && !model.deprecated.is_present()
    {
        cx.error(w.span(), "`deprecation_warning` needs `deprecated`");
    }
}

pub(crate) fn check_convert(cx: &Ctxt, model: &ConvertModel) {
    for field in &model.fields {
        let a = &field.attrs;
        // `skip` excludes the functions and the rename.
        if a.skip.is_present()
            && (a.rename.is_some() || a.into_hub.is_some() || a.from_hub.is_some())
        {
            cx.error(
                a.skip.span(),
                "`skip` cannot be combined with `rename`, `into_hub` or `from_hub`",
            );
        }
        // The two directions go together.
        if let (Some(p), None) | (None, Some(p)) = (&a.into_hub, &a.from_hub) {
            cx.push(
                darling::Error::custom("`into_hub` and `from_hub` must be given together")
                    .with_span(p),
            );
        }
    }
}

fn check_json_path(cx: &Ctxt, path: &darling::util::SpannedValue<String>, attr: &str) {
    if !path.starts_with('.') {
        cx.error(
            path.span(),
            format!("`{attr}` json paths must start with '.'"),
        );
    }
}
