use darling::FromDeriveInput;
use darling::util::{Flag, SpannedValue};

use crate::attr::{
    CelAttr, ConvertContainerAttrs, ConvertFieldAttrs, FieldAttrs, PrintColumnAttr, ResourceAttrs,
    ValidateContainerAttrs, duplicates,
};
use crate::ctxt::Ctxt;

/// How serde names and treats a field.
#[derive(Debug, Default)]
pub(crate) struct SerdeField {
    pub(crate) rename: Option<String>,
    pub(crate) flatten: bool,
    pub(crate) skip: bool,
    /// `skip_serializing_if = "..."`: the predicate under which the field is
    /// absent from the wire form.
    pub(crate) skip_serializing_if: Option<syn::ExprPath>,
}

/// A struct whose fields carry `#[validate(...)]` rules.
pub(crate) struct ValidateModel {
    pub(crate) ident: syn::Ident,
    /// `<crate>::codegen::v1`: the one path generated code names.
    pub(crate) codegen: syn::Path,
    pub(crate) fields: Vec<FieldModel>,
    pub(crate) unions: Vec<Union>,
    pub(crate) cel: Vec<CelAttr>,
}

pub(crate) struct Union {
    pub(crate) exactly: bool,
    pub(crate) members: Vec<(syn::Ident, String)>,
}

pub(crate) struct FieldModel {
    pub(crate) ident: syn::Ident,
    pub(crate) json_name: String,
    pub(crate) flatten: bool,
    pub(crate) skip: bool,
    pub(crate) is_option: bool,
    /// The serde predicate under which the field is omitted on the wire: the
    /// value rules (enum, pattern, lengths, ...) do not apply then, as an
    /// absent field of a CRD schema is not checked.
    pub(crate) omitted_if: Option<syn::ExprPath>,
    pub(crate) attrs: FieldAttrs,
}

pub(crate) fn default_krate() -> syn::Path {
    syn::parse_quote!(::apiforge_runtime)
}

/// The module of the runtime that generated code names, and the only one:
/// `<crate>::codegen::v1`.
pub(crate) fn codegen(krate: &syn::Path) -> syn::Path {
    syn::parse_quote!(#krate::codegen::v1)
}

/// The name of a path type's last segment and its type arguments.
pub(crate) fn generic_args(ty: &syn::Type) -> Option<(String, Vec<&syn::Type>)> {
    let syn::Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    let args = match &last.arguments {
        syn::PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|a| match a {
                syn::GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Some((last.ident.to_string(), args))
}

pub(crate) fn is_option(ty: &syn::Type) -> bool {
    match ty {
        syn::Type::Path(p) => {
            p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "Option")
        }
        _ => false,
    }
}

fn skip_value(meta: &syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        let _: syn::Expr = meta.value()?.parse()?;
    } else if meta.input.peek(syn::token::Paren) {
        let _ = meta.parse_nested_meta(|inner| skip_value(&inner));
    }
    Ok(())
}

/// `#[serde(rename_all = "...")]` of a container.
pub(crate) fn serde_rename_all(attrs: &[syn::Attribute]) -> Option<String> {
    let mut out = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename_all") && meta.input.peek(syn::Token![=]) {
                let lit: syn::LitStr = meta.value()?.parse()?;
                out = Some(lit.value());
                Ok(())
            } else {
                skip_value(&meta)
            }
        });
    }
    out
}

/// `#[serde(rename, flatten, skip)]` of a field.
pub(crate) fn serde_field(attrs: &[syn::Attribute]) -> SerdeField {
    let mut out = SerdeField::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("rename") && meta.input.peek(syn::Token![=]) {
                let lit: syn::LitStr = meta.value()?.parse()?;
                out.rename = Some(lit.value());
                Ok(())
            } else if meta.path.is_ident("flatten") {
                out.flatten = true;
                Ok(())
            } else if meta.path.is_ident("skip") {
                out.skip = true;
                Ok(())
            } else if meta.path.is_ident("skip_serializing_if") && meta.input.peek(syn::Token![=]) {
                let lit: syn::LitStr = meta.value()?.parse()?;
                out.skip_serializing_if = lit.parse().ok();
                Ok(())
            } else {
                skip_value(&meta)
            }
        });
    }
    out
}

/// Applies a serde `rename_all` rule to a snake_case field name.
pub(crate) fn rename(field: &str, rule: Option<&str>) -> String {
    let field = field.strip_prefix("r#").unwrap_or(field);
    let words: Vec<&str> = field.split('_').filter(|w| !w.is_empty()).collect();
    let cap = |w: &str| {
        let mut c = w.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect::<String>())
            .unwrap_or_default()
    };
    match rule {
        Some("camelCase") => words
            .iter()
            .enumerate()
            .map(|(i, w)| if i == 0 { (*w).to_string() } else { cap(w) })
            .collect(),
        Some("PascalCase") => words.iter().map(|w| cap(w)).collect(),
        Some("lowercase") => field.to_lowercase(),
        Some("UPPERCASE") => field.to_uppercase(),
        Some("SCREAMING_SNAKE_CASE") => field.to_uppercase(),
        Some("kebab-case") => field.replace('_', "-"),
        Some("SCREAMING-KEBAB-CASE") => field.replace('_', "-").to_uppercase(),
        _ => field.to_string(),
    }
}

impl ValidateModel {
    /// Builds the model of a struct's `#[validate]` attributes; errors go
    /// into `cx`.
    pub(crate) fn from_ast(
        cx: &Ctxt,
        input: &syn::DeriveInput,
        krate: Option<syn::Path>,
    ) -> Option<ValidateModel> {
        let dups = duplicates(&input.attrs, "validate");
        let has_duplicates = !dups.is_empty();
        dups.into_iter().for_each(|e| cx.push(e));
        let container = match ValidateContainerAttrs::from_derive_input(input) {
            Ok(c) => c,
            Err(e) => {
                if !has_duplicates {
                    cx.push(e);
                }
                ValidateContainerAttrs::default()
            }
        };
        let syn::Data::Struct(data) = &input.data else {
            cx.push(
                darling::Error::custom("only structs with named fields are supported")
                    .with_span(&input.ident),
            );
            return None;
        };
        let rename_all = serde_rename_all(&input.attrs);
        let mut fields = Vec::new();
        for field in &data.fields {
            let Some(attrs) = field_attrs::<FieldAttrs>(cx, field, "validate") else {
                continue;
            };
            let Some(ident) = attrs.ident.clone() else {
                cx.push(
                    darling::Error::custom("only structs with named fields are supported")
                        .with_span(field),
                );
                continue;
            };
            let serde = serde_field(&field.attrs);
            let json_name = serde
                .rename
                .clone()
                .unwrap_or_else(|| rename(&ident.to_string(), rename_all.as_deref()));
            fields.push(FieldModel {
                ident,
                json_name,
                flatten: serde.flatten,
                skip: serde.skip,
                is_option: is_option(&field.ty),
                omitted_if: serde.skip_serializing_if.clone(),
                attrs,
            });
        }
        let mut unions = Vec::new();
        let union_list = container
            .one_of
            .iter()
            .map(|u| (true, u))
            .chain(container.at_most_one_of.iter().map(|u| (false, u)));
        for (exactly, list) in union_list {
            let mut members = Vec::new();
            for path in list.iter() {
                let Some(ident) = path.get_ident() else {
                    cx.push(
                        darling::Error::custom("union members must be field names").with_span(path),
                    );
                    continue;
                };
                match fields.iter().find(|f| &f.ident == ident) {
                    Some(f) => members.push((ident.clone(), f.json_name.clone())),
                    None => cx.push(
                        darling::Error::custom(format!(
                            "`{}` names no field of this struct",
                            if exactly { "one_of" } else { "at_most_one_of" }
                        ))
                        .with_span(ident),
                    ),
                }
            }
            if list.len() < 2 {
                cx.push(
                    darling::Error::custom(format!(
                        "`{}` needs at least two fields",
                        if exactly { "one_of" } else { "at_most_one_of" }
                    ))
                    .with_span(&list.span()),
                );
            }
            unions.push(Union { exactly, members });
        }
        Some(ValidateModel {
            ident: input.ident.clone(),
            codegen: codegen(&krate.or(container.krate).unwrap_or_else(default_krate)),
            fields,
            unions,
            cel: container.cel,
        })
    }
}

/// A kind's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Namespaced,
    Cluster,
}

/// The `scale` subresource of a kind.
pub(crate) struct Scale {
    pub(crate) spec_replicas_path: SpannedValue<String>,
    pub(crate) status_replicas_path: SpannedValue<String>,
    /// The label selector path as written (checked when given).
    pub(crate) label_selector_path: Option<SpannedValue<String>>,
    /// The published label selector path: `""` when none is given.
    pub(crate) label_selector: String,
}

/// A kind: the `#[resource(...)]` facts with every name and default
/// resolved. The field rules are a separate [`ValidateModel`].
pub(crate) struct ResourceModel {
    pub(crate) ident: syn::Ident,
    pub(crate) generics: syn::Generics,
    /// `crate = path` of `#[resource]`, as written; the [`ValidateModel`]
    /// resolves it with `#[validate(crate = path)]` and the default.
    pub(crate) krate: Option<syn::Path>,
    /// Whether the struct has a `metadata` field.
    pub(crate) has_metadata: bool,
    pub(crate) group: String,
    pub(crate) version: SpannedValue<String>,
    /// `kind`, or the struct's name.
    pub(crate) kind: String,
    /// `plural`, or the lower-case kind + `s`.
    pub(crate) plural: String,
    /// `singular`, or the lower-case kind.
    pub(crate) singular: String,
    /// Namespaced when `namespaced` is given, cluster otherwise; the check
    /// requires exactly one of the two flags.
    pub(crate) scope: Scope,
    pub(crate) namespaced: Flag,
    pub(crate) cluster: Flag,
    pub(crate) short_names: Vec<String>,
    pub(crate) categories: Vec<String>,
    /// `openapi_name`, or `<reversed group>.<version>.<Kind>`.
    pub(crate) openapi_name: String,
    pub(crate) printer_columns: Vec<SpannedValue<PrintColumnAttr>>,
    pub(crate) selectable_fields: Vec<syn::LitStr>,
    pub(crate) subresource_status: bool,
    pub(crate) subresource_scale: Option<Scale>,
    pub(crate) deprecated: Flag,
    pub(crate) deprecation_warning: Option<SpannedValue<String>>,
    pub(crate) default_strategy: bool,
}

/// The default OpenAPI model name: `<reversed group>.<version>.<Kind>`
/// (`io.k8s.api.core.<version>.<Kind>` for the core group).
pub(crate) fn openapi_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').filter(|p| !p.is_empty()).collect();
    parts.reverse();
    if parts.is_empty() {
        format!("io.k8s.api.core.{version}.{kind}")
    } else {
        format!("{}.{version}.{kind}", parts.join("."))
    }
}

impl ResourceModel {
    /// Builds the model of a struct's `#[resource]` attributes, resolving
    /// the names and defaults; errors go into `cx`.
    pub(crate) fn from_ast(cx: &Ctxt, input: &syn::DeriveInput) -> Option<ResourceModel> {
        let dups = duplicates(&input.attrs, "resource");
        let has_duplicates = !dups.is_empty();
        dups.into_iter().for_each(|e| cx.push(e));
        let attrs = match ResourceAttrs::from_derive_input(input) {
            Ok(a) => a,
            Err(e) => {
                // A duplicate key is already reported as such.
                if !has_duplicates {
                    cx.push(e);
                }
                return None;
            }
        };
        let has_metadata = match &input.data {
            syn::Data::Struct(s) => s
                .fields
                .iter()
                .any(|f| f.ident.as_ref().is_some_and(|i| i == "metadata")),
            _ => false,
        };
        let kind = attrs.kind.unwrap_or_else(|| attrs.ident.to_string());
        let lower = kind.to_lowercase();
        let plural = attrs.plural.unwrap_or_else(|| format!("{lower}s"));
        let singular = attrs.singular.unwrap_or(lower);
        let openapi_name = attrs
            .openapi_name
            .unwrap_or_else(|| openapi_name(&attrs.group, &attrs.version, &kind));
        let scope = if attrs.namespaced.is_present() {
            Scope::Namespaced
        } else {
            Scope::Cluster
        };
        let subresource_scale = attrs.subresource_scale.map(|s| {
            let s = s.into_inner();
            let label_selector = s
                .label_selector_path
                .as_ref()
                .map(|p| p.as_str().to_string())
                .unwrap_or_default();
            Scale {
                spec_replicas_path: s.spec_replicas_path,
                status_replicas_path: s.status_replicas_path,
                label_selector_path: s.label_selector_path,
                label_selector,
            }
        });
        Some(ResourceModel {
            ident: attrs.ident,
            generics: attrs.generics,
            krate: attrs.krate,
            has_metadata,
            group: attrs.group,
            version: attrs.version,
            kind,
            plural,
            singular,
            scope,
            namespaced: attrs.namespaced,
            cluster: attrs.cluster,
            short_names: attrs.short_names.map(|s| s.values()).unwrap_or_default(),
            categories: attrs.categories.map(|s| s.values()).unwrap_or_default(),
            openapi_name,
            printer_columns: attrs.printcolumn,
            selectable_fields: attrs
                .selectable_fields
                .map(|s| s.into_inner().0)
                .unwrap_or_default(),
            subresource_status: attrs.subresource_status.is_present(),
            subresource_scale,
            deprecated: attrs.deprecated,
            deprecation_warning: attrs.deprecation_warning,
            default_strategy: attrs.default_strategy.is_present(),
        })
    }
}

/// A version type that converts to and from its hub.
pub(crate) struct ConvertModel {
    pub(crate) ident: syn::Ident,
    /// `<crate>::codegen::v1`: the one path generated code names.
    pub(crate) codegen: syn::Path,
    pub(crate) hub: syn::Path,
    pub(crate) hub_default: bool,
    pub(crate) fields: Vec<ConvertField>,
}

pub(crate) struct ConvertField {
    pub(crate) ident: syn::Ident,
    /// The hub field it corresponds to: `rename`, or the same name.
    pub(crate) hub_ident: syn::Ident,
    pub(crate) attrs: ConvertFieldAttrs,
}

impl ConvertModel {
    /// Builds the model of a struct's `#[convert]` attributes; errors go
    /// into `cx`. Without a usable container attribute there is no model,
    /// but the fields' errors are still collected.
    pub(crate) fn from_ast(cx: &Ctxt, input: &syn::DeriveInput) -> Option<ConvertModel> {
        let dups = duplicates(&input.attrs, "convert");
        let has_duplicates = !dups.is_empty();
        dups.into_iter().for_each(|e| cx.push(e));
        let container = match ConvertContainerAttrs::from_derive_input(input) {
            Ok(c) => Some(c),
            Err(e) => {
                // A duplicate key is already reported as such.
                if !has_duplicates {
                    cx.push(e);
                }
                None
            }
        };
        let syn::Data::Struct(data) = &input.data else {
            // darling reports the shape when it reads the container.
            if container.is_some() {
                cx.push(
                    darling::Error::custom("`Convert` can only be derived for structs")
                        .with_span(&input.ident),
                );
            }
            return None;
        };
        let mut fields = Vec::new();
        for field in &data.fields {
            let Some(attrs) = field_attrs::<ConvertFieldAttrs>(cx, field, "convert") else {
                continue;
            };
            // Unnamed fields are the container's shape error.
            let Some(ident) = attrs.ident.clone() else {
                continue;
            };
            let hub_ident = attrs.rename.clone().unwrap_or_else(|| ident.clone());
            fields.push(ConvertField {
                ident,
                hub_ident,
                attrs,
            });
        }
        let container = container?;
        Some(ConvertModel {
            ident: container.ident,
            codegen: codegen(&container.krate.unwrap_or_else(default_krate)),
            hub: container.hub,
            hub_default: container.hub_default.is_present(),
            fields,
        })
    }
}

/// Parses one field's `#[name(...)]` attributes. Errors go into `cx`; a
/// repeated key is reported once, as "specified more than once", rather
/// than again by darling.
fn field_attrs<A: darling::FromField>(cx: &Ctxt, field: &syn::Field, name: &str) -> Option<A> {
    let dups = duplicates(&field.attrs, name);
    let has_duplicates = !dups.is_empty();
    dups.into_iter().for_each(|e| cx.push(e));
    match A::from_field(field) {
        Ok(a) => Some(a),
        Err(e) => {
            if !has_duplicates {
                cx.push(e);
            }
            None
        }
    }
}
