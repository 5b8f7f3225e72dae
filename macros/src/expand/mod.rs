pub(crate) mod convert;
pub(crate) mod defaults;
pub(crate) mod resource;
pub(crate) mod schema;
pub(crate) mod validation;

use proc_macro2::TokenStream;
use quote::quote;

use crate::ctxt::Ctxt;
use crate::model::{ConvertModel, ResourceModel, ValidateModel, codegen, default_krate};
use crate::{check, fallback};

fn debug(name: &str, tokens: &TokenStream) {
    if std::env::var_os("APIFORGE_MACROS_DEBUG").is_some() {
        eprintln!("// derive({name})\n{tokens}");
    }
}

/// The traits whose methods the generated code calls on probes.
fn imports(rt: &syn::Path) -> TokenStream {
    quote! {
        #[allow(unused_imports)]
        use #rt::{
            ViaDefault as _, ViaNothing as _, ViaNothingDefault as _, ViaNothingPublish as _,
            ViaNothingUpdate as _, ViaOption as _, ViaPublish as _, ViaValidate as _, ViaValidateUpdate as _,
            ViaValue as _,
        };
    }
}

/// The `Validate` impl of a model.
pub(crate) fn validate_impl(model: &ValidateModel) -> TokenStream {
    let rt = &model.codegen;
    let ident = &model.ident;
    let validation = validation::methods(model);
    let defaults = defaults::method(model);
    let schema = schema::method(model);
    let transitions = validation::transition_rules(model);
    quote! {
        #[automatically_derived]
        impl #rt::Validate for #ident {
            #validation
            #defaults
            #schema
        }
        #transitions
    }
}

/// `#[derive(Validate)]`.
pub(crate) fn derive_validate(input: &syn::DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let model = ValidateModel::from_ast(&cx, input, None);
    if let Some(model) = &model {
        check::check_validate(&cx, model);
    }
    let tokens = match (cx.check(), model) {
        (Ok(()), Some(model)) => {
            let imports = imports(&model.codegen);
            let body = validate_impl(&model);
            quote! {
                const _: () = {
                    #imports
                    #body
                };
            }
        }
        (Err(e), _) => {
            let stub = fallback::validate(&input.ident, &codegen(&default_krate()));
            let err = e.write_errors();
            quote!(#err #stub)
        }
        (Ok(()), None) => quote!(),
    };
    debug("Validate", &tokens);
    tokens
}

/// `#[derive(Resource)]`.
pub(crate) fn derive_resource(input: &syn::DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let resource = ResourceModel::from_ast(&cx, input);
    let krate = resource.as_ref().and_then(|r| r.krate.clone());
    let model = ValidateModel::from_ast(&cx, input, krate.clone());
    if let Some(resource) = &resource {
        check::check_resource(&cx, resource);
    }
    if let Some(model) = &model {
        check::check_validate(&cx, model);
    }
    let tokens = match (cx.check(), resource, model) {
        (Ok(()), Some(resource), Some(model)) => {
            let imports = imports(&model.codegen);
            let resource = resource::expand(&resource, &model);
            let validate = validate_impl(&model);
            quote! {
                const _: () = {
                    #imports
                    #resource
                    #validate
                };
            }
        }
        (Err(e), _, _) => {
            let err = e.write_errors();
            let stub =
                fallback::resource(&input.ident, &codegen(&krate.unwrap_or_else(default_krate)));
            quote!(#err #stub)
        }
        _ => quote!(),
    };
    debug("Resource", &tokens);
    tokens
}

/// `#[derive(Convert)]`.
pub(crate) fn derive_convert(input: &syn::DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let model = ConvertModel::from_ast(&cx, input);
    if let Some(model) = &model {
        check::check_convert(&cx, model);
    }
    let tokens = match (cx.check(), model) {
        (Ok(()), Some(model)) => {
            let body = convert::expand(&model);
            quote! {
                const _: () = {
                    #body
                };
            }
        }
        (Err(e), model) => {
            let err = e.write_errors();
            // Without a hub there is nothing to stand in for.
            let stub = model.map(|m| fallback::convert(&m.ident, &m.hub, &m.codegen));
            quote!(#err #stub)
        }
        (Ok(()), None) => quote!(),
    };
    debug("Convert", &tokens);
    tokens
}
