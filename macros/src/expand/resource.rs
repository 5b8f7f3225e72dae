use proc_macro2::TokenStream;
use quote::quote;

use crate::model::{ResourceModel, Scope, ValidateModel};

/// The `Resource` impl (and `Strategy` with `default_strategy`).
pub(crate) fn expand(resource: &ResourceModel, model: &ValidateModel) -> TokenStream {
    let rt = &model.codegen;
    let ident = &resource.ident;
    let (group, version, kind, plural, singular) = (
        &resource.group,
        resource.version.as_str(),
        &resource.kind,
        &resource.plural,
        &resource.singular,
    );
    let (scope, kube_scope) = match resource.scope {
        Scope::Namespaced => (quote!(#rt::Scope::Namespaced), quote!(namespaced)),
        Scope::Cluster => (quote!(#rt::Scope::Cluster), quote!(cluster)),
    };
    let short_names = &resource.short_names;
    let categories = &resource.categories;
    let openapi_name = &resource.openapi_name;
    let columns = resource.printer_columns.iter().map(|c| {
        let (name, type_, json_path, priority, description, format) = (
            &c.name,
            c.type_.as_str(),
            c.json_path.as_str(),
            c.priority,
            &c.description,
            &c.format,
        );
        quote! {
            #rt::PrinterColumn {
                name: #name,
                type_: #type_,
                json_path: #json_path,
                priority: #priority,
                description: #description,
                format: #format,
            }
        }
    });
    let selectable = resource.selectable_fields.iter().map(syn::LitStr::value);
    let status = resource.subresource_status;
    let scale = match &resource.subresource_scale {
        Some(s) => {
            let spec = s.spec_replicas_path.as_str();
            let st = s.status_replicas_path.as_str();
            let sel = &s.label_selector;
            quote! {
                ::core::option::Option::Some(#rt::ScaleSubresource {
                    spec_replicas_path: #spec,
                    status_replicas_path: #st,
                    label_selector_path: #sel,
                })
            }
        }
        None => quote!(::core::option::Option::None),
    };
    let deprecated = resource.deprecated.is_present();
    let warning = match &resource.deprecation_warning {
        Some(w) => {
            let w = w.as_str();
            quote!(::core::option::Option::Some(#w))
        }
        None => quote!(::core::option::Option::None),
    };
    let strategy = if resource.default_strategy {
        quote! {
            #[automatically_derived]
            impl #rt::Strategy for #ident {}
        }
    } else {
        quote!()
    };
    quote! {
        #[automatically_derived]
        impl #rt::Resource for #ident {
            const INFO: #rt::KindInfo = #rt::KindInfo {
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
                subresources: #rt::Subresources { status: #status, scale: #scale },
                deprecated: #deprecated,
                deprecation_warning: #warning,
            };

            fn metadata(&self) -> &#rt::ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut #rt::ObjectMeta {
                &mut self.metadata
            }

            fn generated_validate(&self) -> #rt::ErrorList {
                #rt::validate_root(self)
            }

            fn generated_validate_update(&self, old: &Self) -> #rt::ErrorList {
                #rt::validate_update_root(self, old)
            }

            fn generated_default_fields(&mut self) {
                #rt::Validate::default_fields(self)
            }

            fn publish_schema(generator: &mut #rt::schemars::SchemaGenerator) {
                <Self as #rt::Validate>::publish_schema(generator)
            }
        }
        #strategy
        // The kube-rs scope type, for `KubeObject<Self>`: expands to nothing
        // unless the runtime was built with its `kube` feature.
        #rt::kube_scope!(#ident, #kube_scope);
    }
}
