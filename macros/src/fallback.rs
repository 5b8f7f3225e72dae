use proc_macro2::TokenStream;
use quote::quote;

/// After an error: an empty `Validate` impl, so that uses of the type do
/// not add a cascade of errors to the real one.
pub(crate) fn validate(ident: &syn::Ident, krate: &syn::Path) -> TokenStream {
    quote! {
        impl #krate::validation::Validate for #ident {}
    }
}

/// After an error: a `Resource` stub with placeholder facts.
pub(crate) fn resource(ident: &syn::Ident, krate: &syn::Path) -> TokenStream {
    quote! {
        impl #krate::resource::Resource for #ident {
            const INFO: #krate::resource::KindInfo = #krate::resource::KindInfo::EMPTY;
            fn metadata(&self) -> &#krate::meta::ObjectMeta {
                ::core::unimplemented!()
            }
            fn metadata_mut(&mut self) -> &mut #krate::meta::ObjectMeta {
                ::core::unimplemented!()
            }
        }
        impl #krate::validation::Validate for #ident {}
    }
}
