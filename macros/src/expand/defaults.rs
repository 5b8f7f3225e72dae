use proc_macro2::TokenStream;
use quote::quote;

use crate::model::{FieldModel, ValidateModel};

/// The expression building a field's declared default, of the field's type.
pub(crate) fn default_value(f: &FieldModel) -> Option<TokenStream> {
    let expr = &f.attrs.default.as_ref()?.0;
    Some(if f.is_option {
        quote!(::core::option::Option::Some(::core::convert::Into::into(#expr)))
    } else {
        quote!(::core::convert::Into::into(#expr))
    })
}

/// `Validate::default_fields` of a model: unset fields with a `default`
/// get it, then nested types default themselves.
pub(crate) fn method(model: &ValidateModel) -> TokenStream {
    let rt = &model.codegen;
    let fields = model.fields.iter().filter(|f| !f.skip).map(|f| {
        let ident = &f.ident;
        let set = default_value(f).map(|value| {
            quote! {
                if !#rt::IsSet::is_set(&self.#ident) {
                    self.#ident = #value;
                }
            }
        });
        quote! {
            #set
            (&mut #rt::ProbeMut(&mut self.#ident)).__apiforge_default();
        }
    });
    quote! {
        fn default_fields(&mut self) {
            #(#fields)*
        }
    }
}
