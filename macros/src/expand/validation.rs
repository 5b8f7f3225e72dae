use proc_macro2::Span;
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};

use crate::model::{FieldModel, ValidateModel};

fn format_variant(name: &str) -> syn::Ident {
    let v = match name {
        "dns1123_label" => "Dns1123Label",
        "dns1123_subdomain" => "Dns1123Subdomain",
        "k8s_short_name" => "K8sShortName",
        "uuid" => "Uuid",
        "date_time" => "DateTime",
        "ip" => "Ip",
        _ => "Cidr",
    };
    format_ident!("{}", v)
}

fn field_path(f: &FieldModel) -> TokenStream {
    let name = &f.json_name;
    if f.flatten {
        quote!(path.clone())
    } else {
        quote!(path.child(#name))
    }
}

/// `AsRef::<str>::as_ref(__v)`, spanned at the rule so that a rule on a
/// non-string field is reported at the attribute.
fn as_str(span: Span) -> TokenStream {
    quote_spanned!(span=> ::core::convert::AsRef::<str>::as_ref(__v))
}

fn validate_field(rt: &syn::Path, f: &FieldModel) -> TokenStream {
    let a = &f.attrs;
    let ident = &f.ident;
    let path = field_path(f);
    let mut present = Vec::new();
    let mut always = Vec::new();
    if a.required.is_present() {
        always.push(quote!(#rt::required(&mut errs, &__path, #rt::IsSet::is_set(__field));));
    }
    if let Some(min) = &a.minimum {
        let v = min.value;
        let ex = a.exclusive_minimum.is_present();
        present.push(quote!(#rt::minimum(&mut errs, &__path, __v, #v, #ex);));
    }
    if let Some(max) = &a.maximum {
        let v = max.value;
        let ex = a.exclusive_maximum.is_present();
        present.push(quote!(#rt::maximum(&mut errs, &__path, __v, #v, #ex);));
    }
    if let Some(n) = &a.min_length {
        let s = as_str(n.span());
        let n = **n;
        present.push(quote!(#rt::min_length(&mut errs, &__path, #s, #n);));
    }
    if let Some(n) = &a.max_length {
        let s = as_str(n.span());
        let n = **n;
        present.push(quote!(#rt::max_length(&mut errs, &__path, #s, #n);));
    }
    if let Some(p) = &a.pattern {
        let s = as_str(p.span());
        let p = p.as_str();
        present.push(quote! {{
            static PATTERN: #rt::Pattern = #rt::Pattern::new(#p);
            PATTERN.check(&mut errs, &__path, #s);
        }});
    }
    if let Some(fmt) = &a.format {
        let s = as_str(fmt.span());
        let v = format_variant(fmt);
        present.push(quote!(#rt::Format::#v.check(&mut errs, &__path, #s);));
    }
    if let Some(values) = &a.enum_values {
        let s = as_str(values.span());
        let values = values.values();
        present.push(quote!(#rt::enum_values(&mut errs, &__path, #s, &[#(#values),*]);));
    }
    if let Some(n) = &a.min_items {
        let n = **n;
        present.push(quote!(#rt::min_items(&mut errs, &__path, __v.len(), #n);));
    }
    if let Some(n) = &a.max_items {
        let n = **n;
        present.push(quote!(#rt::max_items(&mut errs, &__path, __v.len(), #n);));
    }
    match a.list_type.as_deref().map(String::as_str) {
        Some("set") => present.push(quote!(#rt::unique_items(&mut errs, &__path, &__v[..]);)),
        Some("map") => {
            let keys = a
                .list_map_keys
                .as_ref()
                .map(|k| k.values())
                .unwrap_or_default();
            present
                .push(quote!(#rt::unique_map_keys(&mut errs, &__path, &__v[..], &[#(#keys),*]);));
        }
        _ => {}
    }
    for rule in &a.cel {
        let src = rule.rule.as_str();
        let msg = rule.message.clone().unwrap_or_default();
        present.push(quote! {{
            static RULE: #rt::Rule = #rt::Rule::new(#src, #msg);
            RULE.check(&mut errs, &__path, &#rt::to_json(__v));
        }});
    }
    if let Some(custom) = &a.custom {
        always.push(quote!(errs.extend(#custom(__field, &__path));));
    }
    let present = if present.is_empty() {
        quote!()
    } else if let Some(omitted) = f.omitted_if.as_ref().filter(|_| !f.is_option) {
        // A value serde omits on the wire is an absent field: its value
        // rules do not apply (`required` above still does).
        quote! {
            if !#omitted(__field) {
                if let ::core::option::Option::Some(__v) = (&#rt::Probe(__field)).__apiforge_get() {
                    #(#present)*
                }
            }
        }
    } else {
        quote! {
            if let ::core::option::Option::Some(__v) = (&#rt::Probe(__field)).__apiforge_get() {
                #(#present)*
            }
        }
    };
    quote! {{
        let __path = #path;
        let __field = &self.#ident;
        #(#always)*
        #present
        errs.extend((&#rt::Probe(__field)).__apiforge_validate(&__path));
    }}
}

fn validate_update_field(rt: &syn::Path, f: &FieldModel) -> TokenStream {
    let a = &f.attrs;
    let ident = &f.ident;
    let path = field_path(f);
    let immutable = if a.immutable.is_present() {
        quote!(#rt::immutable(&mut errs, &__path, &self.#ident, &old.#ident);)
    } else {
        quote!()
    };
    let transitions: Vec<TokenStream> = a
        .cel
        .iter()
        .filter(|c| c.rule.contains("oldSelf"))
        .map(|rule| {
            let src = rule.rule.as_str();
            let msg = rule.message.clone().unwrap_or_default();
            quote! {
                if let (::core::option::Option::Some(__v), ::core::option::Option::Some(__o)) =
                    ((&#rt::Probe(&self.#ident)).__apiforge_get(), (&#rt::Probe(&old.#ident)).__apiforge_get())
                {
                    static RULE: #rt::Rule = #rt::Rule::new(#src, #msg);
                    RULE.check_update(&mut errs, &__path, &#rt::to_json(__v), &#rt::to_json(__o));
                }
            }
        })
        .collect();
    quote! {{
        let __path = #path;
        #immutable
        #(#transitions)*
        errs.extend((&#rt::ProbePair(&self.#ident, &old.#ident)).__apiforge_validate_update(&__path));
    }}
}

/// `Validate::validate` and `Validate::validate_update` of a model.
pub(crate) fn methods(model: &ValidateModel) -> TokenStream {
    let rt = &model.codegen;
    let fields: Vec<&FieldModel> = model.fields.iter().filter(|f| !f.skip).collect();
    let validate_fields = fields.iter().map(|f| validate_field(rt, f));
    let update_fields = fields.iter().map(|f| validate_update_field(rt, f));
    let unions = model.unions.iter().map(|u| {
        let exactly = u.exactly;
        let members = u
            .members
            .iter()
            .map(|(ident, name)| quote!((#name, #rt::IsSet::is_set(&self.#ident))));
        quote!(#rt::union(&mut errs, path, &[#(#members),*], #exactly);)
    });
    let cel = model
        .cel
        .iter()
        .filter(|c| !c.rule.contains("oldSelf"))
        .map(|rule| {
            let src = rule.rule.as_str();
            let msg = rule.message.clone().unwrap_or_default();
            quote! {{
                static RULE: #rt::Rule = #rt::Rule::new(#src, #msg);
                RULE.check(&mut errs, path, &#rt::to_json(self));
            }}
        });
    let cel_update = model
        .cel
        .iter()
        .filter(|c| c.rule.contains("oldSelf"))
        .map(|rule| {
            let src = rule.rule.as_str();
            let msg = rule.message.clone().unwrap_or_default();
            quote! {{
                static RULE: #rt::Rule = #rt::Rule::new(#src, #msg);
                RULE.check_update(&mut errs, path, &#rt::to_json(self), &#rt::to_json(old));
            }}
        });
    quote! {
        fn validate(&self, path: &#rt::FieldPath) -> #rt::ErrorList {
            let mut errs = #rt::ErrorList::default();
            #(#validate_fields)*
            #(#unions)*
            #(#cel)*
            errs
        }

        fn validate_update(&self, old: &Self, path: &#rt::FieldPath) -> #rt::ErrorList {
            let mut errs = #rt::ErrorList::default();
            #(#update_fields)*
            #(#cel_update)*
            errs
        }
    }
}
