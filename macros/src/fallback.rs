use proc_macro2::TokenStream;
use quote::quote;

/// After an error: an empty `Validate` impl, so that uses of the type do
/// not add a cascade of errors to the real one.
pub(crate) fn validate(ident: &syn::Ident, rt: &syn::Path) -> TokenStream {
    quote! {
        impl #rt::Validate for #ident {}
    }
}

/// After an error: a `Resource` stub with placeholder facts.
pub(crate) fn resource(ident: &syn::Ident, rt: &syn::Path) -> TokenStream {
    quote! {
        impl #rt::Resource for #ident {
            const INFO: #rt::KindInfo = #rt::KindInfo::EMPTY;
            fn metadata(&self) -> &#rt::ObjectMeta {
                ::core::unimplemented!()
            }
            fn metadata_mut(&mut self) -> &mut #rt::ObjectMeta {
                ::core::unimplemented!()
            }
        }
        impl #rt::Validate for #ident {}
    }
}

/// After an error: a `Convert` stub for the named hub.
pub(crate) fn convert(ident: &syn::Ident, hub: &syn::Path, rt: &syn::Path) -> TokenStream {
    quote! {
        impl #rt::Convert<#hub> for #ident {
            fn into_hub(self) -> #hub {
                ::core::unimplemented!()
            }
            fn from_hub(_: &#hub) -> Self {
                ::core::unimplemented!()
            }
        }
    }
}
