use darling::{FromDeriveInput, FromField};
use proc_macro2::TokenStream;
use quote::quote;

use crate::attr::{ConvertContainerAttrs, ConvertFieldAttrs, duplicates};
use crate::ctxt::Ctxt;
use crate::model::default_krate;

/// `impl Convert<Hub> for V`: matching fields convert with `Convert`
/// (identity when the types are equal), `rename` maps to another hub
/// field, `into_hub`/`from_hub` functions handle fields that differ, `skip`
/// leaves a field out of the hub (it gets `Default` back).
pub(crate) fn expand(input: &syn::DeriveInput) -> Result<TokenStream, darling::Error> {
    let cx = Ctxt::new();
    for e in duplicates(&input.attrs, "convert") {
        cx.push(e);
    }
    let container = ConvertContainerAttrs::from_derive_input(input)?;
    let syn::Data::Struct(data) = &input.data else {
        return Err(
            darling::Error::custom("`Convert` can only be derived for structs")
                .with_span(&input.ident),
        );
    };
    let mut fields = Vec::new();
    for field in &data.fields {
        let dups = duplicates(&field.attrs, "convert");
        let has_duplicates = !dups.is_empty();
        dups.into_iter().for_each(|e| cx.push(e));
        match ConvertFieldAttrs::from_field(field) {
            Ok(f) => {
                // `skip` excludes the functions and the rename.
                if f.skip.is_present()
                    && (f.rename.is_some() || f.into_hub.is_some() || f.from_hub.is_some())
                {
                    cx.error(
                        f.skip.span(),
                        "`skip` cannot be combined with `rename`, `into_hub` or `from_hub`",
                    );
                }
                // The two directions go together.
                if let (Some(p), None) | (None, Some(p)) = (&f.into_hub, &f.from_hub) {
                    cx.push(
                        darling::Error::custom("`into_hub` and `from_hub` must be given together")
                            .with_span(p),
                    );
                }
                fields.push(f);
            }
            Err(e) => {
                if !has_duplicates {
                    cx.push(e);
                }
            }
        }
    }
    cx.check()?;
    let krate = container.krate.clone().unwrap_or_else(default_krate);
    let ident = &container.ident;
    let hub = &container.hub;
    let mut pre = Vec::new();
    let mut to_hub = Vec::new();
    let mut from_hub = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let Some(name) = &f.ident else { continue };
        let hub_name = f.rename.clone().unwrap_or_else(|| name.clone());
        if f.skip.is_present() {
            from_hub.push(quote!(#name: ::core::default::Default::default()));
            continue;
        }
        if let (Some(into), Some(from)) = (&f.into_hub, &f.from_hub) {
            let tmp = quote::format_ident!("__field{}", i);
            pre.push(quote!(let #tmp = #into(&self);));
            to_hub.push(quote!(#hub_name: #tmp));
            from_hub.push(quote!(#name: #from(hub)));
        } else {
            to_hub.push(quote!(#hub_name: #krate::scheme::Convert::into_hub(self.#name)));
            from_hub.push(quote!(#name: #krate::scheme::Convert::from_hub(&hub.#hub_name)));
        }
    }
    let rest = if container.hub_default.is_present() {
        quote!(..::core::default::Default::default())
    } else {
        quote!()
    };
    Ok(quote! {
        const _: () = {
            #[automatically_derived]
            impl #krate::scheme::Convert<#hub> for #ident {
                fn into_hub(self) -> #hub {
                    #(#pre)*
                    #hub { #(#to_hub,)* #rest }
                }

                fn from_hub(hub: &#hub) -> Self {
                    #ident { #(#from_hub,)* }
                }
            }
        };
    })
}
