use proc_macro2::TokenStream;
use quote::quote;

use crate::attr::ResourceAttrs;
use crate::model::ValidateModel;

/// The default OpenAPI model name: `<reversed group>.<version>.<Kind>`.
pub(crate) fn openapi_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').filter(|p| !p.is_empty()).collect();
    parts.reverse();
    if parts.is_empty() {
        format!("io.k8s.api.core.{version}.{kind}")
    } else {
        format!("{}.{version}.{kind}", parts.join("."))
    }
}

/// The `Resource` impl (and `Strategy` with `default_strategy`).
pub(crate) fn expand(attrs: &ResourceAttrs, model: &ValidateModel) -> TokenStream {
    let krate = &model.krate;
    let ident = &attrs.ident;
    let kind = attrs.kind.clone().unwrap_or_else(|| ident.to_string());
    let lower = kind.to_lowercase();
    let plural = attrs.plural.clone().unwrap_or_else(|| format!("{lower}s"));
    let singular = attrs.singular.clone().unwrap_or(lower);
    let group = &attrs.group;
    let version = attrs.version.as_str();
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
    let openapi_name = attrs
        .openapi_name
        .clone()
        .unwrap_or_else(|| openapi_name(group, version, &kind));
    let columns = attrs.printcolumn.iter().map(|c| {
        let (name, type_, json_path, priority, description, format) = (
            &c.name,
            c.type_.as_str(),
            c.json_path.as_str(),
            c.priority,
            &c.description,
            &c.format,
        );
        quote! {
            #krate::resource::PrinterColumn {
                name: #name,
                type_: #type_,
                json_path: #json_path,
                priority: #priority,
                description: #description,
                format: #format,
            }
        }
    });
    let selectable = attrs
        .selectable_fields
        .as_ref()
        .map(|s| s.values())
        .unwrap_or_default();
    let status = attrs.subresource_status.is_present();
    let scale = match &attrs.subresource_scale {
        Some(s) => {
            let spec = s.spec_replicas_path.as_str();
            let st = s.status_replicas_path.as_str();
            let sel = s
                .label_selector_path
                .as_ref()
                .map(|p| p.as_str().to_string())
                .unwrap_or_default();
            quote! {
                ::core::option::Option::Some(#krate::resource::ScaleSubresource {
                    spec_replicas_path: #spec,
                    status_replicas_path: #st,
                    label_selector_path: #sel,
                })
            }
        }
        None => quote!(::core::option::Option::None),
    };
    let deprecated = attrs.deprecated.is_present();
    let warning = match &attrs.deprecation_warning {
        Some(w) => {
            let w = w.as_str();
            quote!(::core::option::Option::Some(#w))
        }
        None => quote!(::core::option::Option::None),
    };
    let strategy = if attrs.default_strategy.is_present() {
        quote! {
            #[automatically_derived]
            impl #krate::resource::Strategy for #ident {}
        }
    } else {
        quote!()
    };
    quote! {
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
                printer_columns: &[#(#columns),*],
                openapi_name: #openapi_name,
                selectable_fields: &[#(#selectable),*],
                subresources: #krate::resource::Subresources { status: #status, scale: #scale },
                deprecated: #deprecated,
                deprecation_warning: #warning,
            };

            fn metadata(&self) -> &#krate::meta::ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut #krate::meta::ObjectMeta {
                &mut self.metadata
            }

            fn generated_validate(&self) -> #krate::validation::ErrorList {
                #krate::resource::validate_root(self)
            }

            fn generated_validate_update(&self, old: &Self) -> #krate::validation::ErrorList {
                #krate::resource::validate_update_root(self, old)
            }

            fn generated_default_fields(&mut self) {
                #krate::validation::Validate::default_fields(self)
            }

            fn publish_schema(generator: &mut #krate::__private::schemars::SchemaGenerator) {
                <Self as #krate::validation::Validate>::publish_schema(generator)
            }
        }
        #strategy
    }
}
