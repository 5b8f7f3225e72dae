use proc_macro2::TokenStream;
use quote::quote;

use crate::model::ConvertModel;

/// `impl Convert<Hub> for V`: matching fields convert with `Convert`
/// (identity when the types are equal), `rename` maps to another hub
/// field, `into_hub`/`from_hub` functions handle fields that differ, `skip`
/// leaves a field out of the hub (it gets `Default` back).
pub(crate) fn expand(model: &ConvertModel) -> TokenStream {
    let rt = &model.codegen;
    let ident = &model.ident;
    let hub = &model.hub;
    let mut pre = Vec::new();
    let mut to_hub = Vec::new();
    let mut from_hub = Vec::new();
    for (i, f) in model.fields.iter().enumerate() {
        let name = &f.ident;
        let hub_name = &f.hub_ident;
        if f.attrs.skip.is_present() {
            from_hub.push(quote!(#name: ::core::default::Default::default()));
            continue;
        }
        if let (Some(into), Some(from)) = (&f.attrs.into_hub, &f.attrs.from_hub) {
            let tmp = quote::format_ident!("__field{}", i);
            pre.push(quote!(let #tmp = #into(&self);));
            to_hub.push(quote!(#hub_name: #tmp));
            from_hub.push(quote!(#name: #from(hub)));
        } else {
            to_hub.push(quote!(#hub_name: #rt::Convert::into_hub(self.#name)));
            from_hub.push(quote!(#name: #rt::Convert::from_hub(&hub.#hub_name)));
        }
    }
    let rest = if model.hub_default {
        quote!(..::core::default::Default::default())
    } else {
        quote!()
    };
    quote! {
        #[automatically_derived]
        impl #rt::Convert<#hub> for #ident {
            fn into_hub(self) -> #hub {
                #(#pre)*
                #hub { #(#to_hub,)* #rest }
            }

            fn from_hub(hub: &#hub) -> Self {
                #ident { #(#from_hub,)* }
            }
        }
    }
}
