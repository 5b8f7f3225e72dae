use darling::{FromDeriveInput, FromField};

use crate::attr::{CelAttr, FieldAttrs, ValidateContainerAttrs, duplicates};
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
    pub(crate) krate: syn::Path,
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
            let dups = duplicates(&field.attrs, "validate");
            let has_duplicates = !dups.is_empty();
            dups.into_iter().for_each(|e| cx.push(e));
            let attrs = match FieldAttrs::from_field(field) {
                Ok(a) => a,
                Err(e) => {
                    if !has_duplicates {
                        cx.push(e);
                    }
                    continue;
                }
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
            krate: krate.or(container.krate).unwrap_or_else(default_krate),
            fields,
            unions,
            cel: container.cel,
        })
    }
}
