pub(crate) mod convert;
pub(crate) mod defaults;
pub(crate) mod resource;
pub(crate) mod schema;
pub(crate) mod validation;

use darling::FromDeriveInput;
use proc_macro2::TokenStream;
use quote::quote;

use crate::attr::ResourceAttrs;
use crate::ctxt::Ctxt;
use crate::model::{ValidateModel, default_krate};
use crate::{check, fallback};

fn debug(name: &str, tokens: &TokenStream) {
    if std::env::var_os("APIFORGE_MACROS_DEBUG").is_some() {
        eprintln!("// derive({name})\n{tokens}");
    }
}

fn imports(krate: &syn::Path) -> TokenStream {
    quote! {
        #[allow(unused_imports)]
        use #krate::validation::rules::{
            ViaDefault as _, ViaNothing as _, ViaNothingDefault as _, ViaNothingPublish as _,
            ViaNothingUpdate as _, ViaOption as _, ViaPublish as _, ViaValidate as _, ViaValidateUpdate as _,
            ViaValue as _,
        };
    }
}

/// The `Validate` impl of a model.
pub(crate) fn validate_impl(model: &ValidateModel) -> TokenStream {
    let krate = &model.krate;
    let ident = &model.ident;
    let validation = validation::methods(model);
    let defaults = defaults::method(model);
    let schema = schema::method(model);
    quote! {
        #[automatically_derived]
        impl #krate::validation::Validate for #ident {
            #validation
            #defaults
            #schema
        }
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
            let imports = imports(&model.krate);
            let body = validate_impl(&model);
            quote! {
                const _: () = {
                    #imports
                    #body
                };
            }
        }
        (Err(e), _) => {
            let stub = fallback::validate(&input.ident, &default_krate());
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
    let duplicates = crate::attr::duplicates(&input.attrs, "resource");
    let has_duplicates = !duplicates.is_empty();
    for e in duplicates {
        cx.push(e);
    }
    let attrs = match ResourceAttrs::from_derive_input(input) {
        Ok(a) => Some(a),
        Err(e) => {
            // A duplicate key is already reported as such.
            if !has_duplicates {
                cx.push(e);
            }
            None
        }
    };
    let krate = attrs.as_ref().and_then(|a| a.krate.clone());
    let model = ValidateModel::from_ast(&cx, input, krate.clone());
    if let Some(attrs) = &attrs {
        check::check_resource(&cx, attrs, input);
    }
    if let Some(model) = &model {
        check::check_validate(&cx, model);
    }
    let tokens = match (cx.check(), attrs, model) {
        (Ok(()), Some(attrs), Some(model)) => {
            let imports = imports(&model.krate);
            let resource = resource::expand(&attrs, &model);
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
            let stub = fallback::resource(&input.ident, &krate.unwrap_or_else(default_krate));
            quote!(#err #stub)
        }
        _ => quote!(),
    };
    debug("Resource", &tokens);
    tokens
}

/// `#[derive(Convert)]`.
pub(crate) fn derive_convert(input: &syn::DeriveInput) -> TokenStream {
    let tokens = match convert::expand(input) {
        Ok(t) => t,
        Err(e) => e.write_errors(),
    };
    debug("Convert", &tokens);
    tokens
}
