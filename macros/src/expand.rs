use darling::FromDeriveInput;
use proc_macro2::TokenStream;
use quote::quote;

use crate::attr::ResourceAttrs;

pub(crate) fn derive(input: &syn::DeriveInput) -> TokenStream {
    match expand(input) {
        Ok(tokens) => tokens,
        Err(err) => err.write_errors(),
    }
}

fn expand(input: &syn::DeriveInput) -> Result<TokenStream, darling::Error> {
    let attrs = ResourceAttrs::from_derive_input(input)?;
    let mut errors = darling::Error::accumulator();

    if !attrs.generics.params.is_empty() {
        errors.push(
            darling::Error::custom("`Resource` cannot be derived for generic structs")
                .with_span(&attrs.generics),
        );
    }
    match (attrs.namespaced.is_present(), attrs.cluster.is_present()) {
        (true, true) => errors.push(
            darling::Error::custom("`namespaced` and `cluster` are mutually exclusive")
                .with_span(&attrs.cluster.span()),
        ),
        (false, false) => errors.push(
            darling::Error::custom("one of `namespaced` or `cluster` is required")
                .with_span(&attrs.ident),
        ),
        _ => {}
    }
    if attrs.version.is_empty() {
        errors.push(darling::Error::custom("`version` must not be empty").with_span(&attrs.ident));
    }
    let has_metadata = match &input.data {
        syn::Data::Struct(s) => s
            .fields
            .iter()
            .any(|f| f.ident.as_ref().is_some_and(|i| i == "metadata")),
        _ => false,
    };
    if !has_metadata {
        errors.push(
            darling::Error::custom("a resource needs a `metadata: ObjectMeta` field")
                .with_span(&attrs.ident),
        );
    }
    errors.finish()?;

    let krate = attrs
        .krate
        .clone()
        .unwrap_or_else(|| syn::parse_quote!(::apiforge_runtime));
    let ident = &attrs.ident;
    let kind = attrs.kind.clone().unwrap_or_else(|| ident.to_string());
    let lower = kind.to_lowercase();
    let plural = attrs.plural.clone().unwrap_or_else(|| format!("{lower}s"));
    let singular = attrs.singular.clone().unwrap_or(lower);
    let group = &attrs.group;
    let version = &attrs.version;
    let scope = if attrs.namespaced.is_present() {
        quote!(#krate::resource::Scope::Namespaced)
    } else {
        quote!(#krate::resource::Scope::Cluster)
    };
    let short_names = attrs
        .short_names
        .as_ref()
        .map(|s| s.values())
        .unwrap_or_default();
    let categories = attrs
        .categories
        .as_ref()
        .map(|s| s.values())
        .unwrap_or_default();
    let openapi_name = attrs.openapi_name.clone().unwrap_or_else(|| {
        let mut parts: Vec<&str> = group.split('.').filter(|p| !p.is_empty()).collect();
        parts.reverse();
        if parts.is_empty() {
            format!("io.k8s.api.core.{version}.{kind}")
        } else {
            format!("{}.{version}.{kind}", parts.join("."))
        }
    });
    let strategy = if attrs.default_strategy.is_present() {
        quote! {
            #[automatically_derived]
            impl #krate::resource::Strategy for #ident {}
        }
    } else {
        quote!()
    };

    Ok(quote! {
        const _: () = {
            #[automatically_derived]
            impl #krate::resource::Resource for #ident {
                const INFO: #krate::resource::KindInfo = #krate::resource::KindInfo {
                    group: #group,
                    version: #version,
                    kind: #kind,
                    plural: #plural,
                    singular: #singular,
                    scope: #scope,
                    short_names: &[#(#short_names),*],
                    categories: &[#(#categories),*],
                    printer_columns: &[],
                    openapi_name: #openapi_name,
                };

                fn metadata(&self) -> &#krate::meta::ObjectMeta {
                    &self.metadata
                }

                fn metadata_mut(&mut self) -> &mut #krate::meta::ObjectMeta {
                    &mut self.metadata
                }
            }
            #strategy
        };
    })
}
