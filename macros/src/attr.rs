use darling::util::{Flag, PathList, SpannedValue};
use darling::{FromDeriveInput, FromField, FromMeta};
use proc_macro2::Span;

#[derive(Debug, Default, FromMeta)]
pub(crate) struct StringList(pub(crate) Vec<syn::LitStr>);

impl StringList {
    pub(crate) fn values(&self) -> Vec<String> {
        self.0.iter().map(syn::LitStr::value).collect()
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Num {
    pub(crate) value: f64,
    pub(crate) span: Span,
}

impl FromMeta for Num {
    fn from_expr(expr: &syn::Expr) -> darling::Result<Self> {
        let (neg, lit) = match expr {
            syn::Expr::Unary(syn::ExprUnary {
                op: syn::UnOp::Neg(_),
                expr,
                ..
            }) => (true, &**expr),
            other => (false, other),
        };
        let syn::Expr::Lit(syn::ExprLit { lit, .. }) = lit else {
            return Err(darling::Error::custom("expected a number").with_span(expr));
        };
        let value = match lit {
            syn::Lit::Int(i) => i.base10_parse::<f64>()?,
            syn::Lit::Float(f) => f.base10_parse::<f64>()?,
            _ => return Err(darling::Error::custom("expected a number").with_span(lit)),
        };
        Ok(Num {
            value: if neg { -value } else { value },
            span: syn::spanned::Spanned::span(expr),
        })
    }
}

/// A `default = ...` value, kept as written (a string literal stays a
/// string, unlike darling's `syn::Expr`).
#[derive(Debug, Clone)]
pub(crate) struct DefaultExpr(pub(crate) syn::Expr);

impl FromMeta for DefaultExpr {
    fn from_expr(expr: &syn::Expr) -> darling::Result<Self> {
        Ok(DefaultExpr(expr.clone()))
    }
}

#[derive(Debug, Clone, FromMeta)]
pub(crate) struct CelAttr {
    pub(crate) rule: SpannedValue<String>,
    #[darling(default)]
    pub(crate) message: Option<String>,
}

#[derive(Debug, Clone, FromMeta)]
pub(crate) struct PrintColumnAttr {
    pub(crate) name: String,
    #[darling(rename = "type")]
    pub(crate) type_: SpannedValue<String>,
    pub(crate) json_path: SpannedValue<String>,
    #[darling(default)]
    pub(crate) priority: i32,
    #[darling(default)]
    pub(crate) description: String,
    #[darling(default)]
    pub(crate) format: String,
}

#[derive(Debug, Clone, FromMeta)]
pub(crate) struct ScaleAttr {
    pub(crate) spec_replicas_path: SpannedValue<String>,
    pub(crate) status_replicas_path: SpannedValue<String>,
    #[darling(default)]
    pub(crate) label_selector_path: Option<SpannedValue<String>>,
}

#[derive(Debug, FromDeriveInput)]
#[darling(attributes(resource), supports(struct_named))]
pub(crate) struct ResourceAttrs {
    pub(crate) ident: syn::Ident,
    pub(crate) generics: syn::Generics,
    pub(crate) group: String,
    pub(crate) version: SpannedValue<String>,
    #[darling(default)]
    pub(crate) kind: Option<String>,
    #[darling(default)]
    pub(crate) plural: Option<String>,
    #[darling(default)]
    pub(crate) singular: Option<String>,
    #[darling(default)]
    pub(crate) namespaced: Flag,
    #[darling(default)]
    pub(crate) cluster: Flag,
    #[darling(default)]
    pub(crate) short_names: Option<StringList>,
    #[darling(default)]
    pub(crate) categories: Option<StringList>,
    #[darling(default)]
    pub(crate) openapi_name: Option<String>,
    #[darling(default)]
    pub(crate) default_strategy: Flag,
    #[darling(default, rename = "crate")]
    pub(crate) krate: Option<syn::Path>,
    #[darling(multiple)]
    pub(crate) printcolumn: Vec<SpannedValue<PrintColumnAttr>>,
    #[darling(default)]
    pub(crate) selectable_fields: Option<SpannedValue<StringList>>,
    #[darling(default)]
    pub(crate) subresource_status: Flag,
    #[darling(default)]
    pub(crate) subresource_scale: Option<SpannedValue<ScaleAttr>>,
    #[darling(default)]
    pub(crate) deprecated: Flag,
    #[darling(default)]
    pub(crate) deprecation_warning: Option<SpannedValue<String>>,
}

/// Struct-level `#[validate(...)]`.
#[derive(Debug, Default, FromDeriveInput)]
#[darling(attributes(validate), supports(struct_named))]
pub(crate) struct ValidateContainerAttrs {
    #[darling(multiple)]
    pub(crate) one_of: Vec<SpannedValue<PathList>>,
    #[darling(multiple)]
    pub(crate) at_most_one_of: Vec<SpannedValue<PathList>>,
    #[darling(multiple)]
    pub(crate) cel: Vec<CelAttr>,
    #[darling(default, rename = "crate")]
    pub(crate) krate: Option<syn::Path>,
}

/// Field-level `#[validate(...)]`.
#[derive(Debug, FromField)]
#[darling(attributes(validate))]
pub(crate) struct FieldAttrs {
    pub(crate) ident: Option<syn::Ident>,
    pub(crate) ty: syn::Type,
    #[darling(default)]
    pub(crate) required: Flag,
    #[darling(default)]
    pub(crate) optional: Flag,
    #[darling(default)]
    pub(crate) minimum: Option<Num>,
    #[darling(default)]
    pub(crate) maximum: Option<Num>,
    #[darling(default)]
    pub(crate) exclusive_minimum: Flag,
    #[darling(default)]
    pub(crate) exclusive_maximum: Flag,
    #[darling(default)]
    pub(crate) min_length: Option<SpannedValue<usize>>,
    #[darling(default)]
    pub(crate) max_length: Option<SpannedValue<usize>>,
    #[darling(default)]
    pub(crate) pattern: Option<SpannedValue<String>>,
    #[darling(default)]
    pub(crate) format: Option<SpannedValue<String>>,
    #[darling(default)]
    pub(crate) enum_values: Option<SpannedValue<StringList>>,
    #[darling(default)]
    pub(crate) min_items: Option<SpannedValue<usize>>,
    #[darling(default)]
    pub(crate) max_items: Option<SpannedValue<usize>>,
    #[darling(default)]
    pub(crate) list_type: Option<SpannedValue<String>>,
    #[darling(default)]
    pub(crate) list_map_keys: Option<SpannedValue<StringList>>,
    #[darling(default)]
    pub(crate) immutable: Flag,
    #[darling(multiple)]
    pub(crate) cel: Vec<CelAttr>,
    #[darling(default)]
    pub(crate) custom: Option<syn::Path>,
    #[darling(default)]
    pub(crate) default: Option<DefaultExpr>,
    #[darling(default)]
    pub(crate) patch_strategy: Option<SpannedValue<String>>,
    #[darling(default)]
    pub(crate) patch_merge_key: Option<SpannedValue<String>>,
}

/// Struct-level `#[convert(...)]`.
#[derive(Debug, FromDeriveInput)]
#[darling(attributes(convert), supports(struct_named))]
pub(crate) struct ConvertContainerAttrs {
    pub(crate) ident: syn::Ident,
    pub(crate) hub: syn::Path,
    #[darling(default)]
    pub(crate) hub_default: Flag,
    #[darling(default, rename = "crate")]
    pub(crate) krate: Option<syn::Path>,
}

/// Field-level `#[convert(...)]`.
#[derive(Debug, FromField)]
#[darling(attributes(convert))]
pub(crate) struct ConvertFieldAttrs {
    pub(crate) ident: Option<syn::Ident>,
    #[darling(default)]
    pub(crate) rename: Option<syn::Ident>,
    #[darling(default)]
    pub(crate) skip: Flag,
    #[darling(default)]
    pub(crate) into_hub: Option<syn::Path>,
    #[darling(default)]
    pub(crate) from_hub: Option<syn::Path>,
}

/// Keys that may be given more than once.
const REPEATABLE: &[&str] = &["printcolumn", "cel", "one_of", "at_most_one_of"];

/// Reports a key given twice in the `name` attributes as "specified more
/// than once", at the second occurrence.
pub(crate) fn duplicates(attrs: &[syn::Attribute], name: &str) -> Vec<darling::Error> {
    let mut seen: Vec<String> = Vec::new();
    let mut errors = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident(name)) {
        let Ok(list) = attr.parse_args_with(
            syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
        ) else {
            continue;
        };
        for meta in list {
            let key = meta
                .path()
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect::<Vec<_>>()
                .join("::");
            if REPEATABLE.contains(&key.as_str()) {
                continue;
            }
            if seen.contains(&key) {
                errors.push(
                    darling::Error::custom(format!("`{key}` specified more than once"))
                        .with_span(meta.path()),
                );
            } else {
                seen.push(key);
            }
        }
    }
    errors
}
