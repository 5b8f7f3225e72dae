use proc_macro2::Span;
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};

use crate::model::{FieldModel, ValidateModel, generic_args};

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

/// The type inside `Option`, `Box`, `Arc` and `Rc`.
fn unwrap_wrappers(ty: &syn::Type) -> &syn::Type {
    if let syn::Type::Path(p) = ty
        && let Some(last) = p.path.segments.last()
        && matches!(
            last.ident.to_string().as_str(),
            "Option" | "Box" | "Arc" | "Rc"
        )
        && let syn::PathArguments::AngleBracketed(a) = &last.arguments
        && let Some(syn::GenericArgument::Type(inner)) = a.args.first()
    {
        return unwrap_wrappers(inner);
    }
    ty
}

/// The inherent `__APIFORGE_TRANSITION_RULES` constant of the type (see
/// the codegen module's `NoTransitionRules`): whether the type's own rules
/// or those of its correlatable parts (object fields, map values, the
/// items of `list_type = "map"` lists) read `oldSelf`; and a compile-time
/// check that the items of its other lists have none.
pub(crate) fn transition_rules(model: &ValidateModel) -> TokenStream {
    let rt = &model.codegen;
    let ident = &model.ident;
    let is_self = |ty: &syn::Type| matches!(ty, syn::Type::Path(p) if p.path.is_ident(ident) || p.path.is_ident("Self"));
    let own = model.cel.iter().any(|c| c.rule.contains("oldSelf"))
        || model.fields.iter().any(|f| {
            f.attrs.immutable.is_present() || f.attrs.cel.iter().any(|c| c.rule.contains("oldSelf"))
        });
    let mut children = Vec::new();
    let mut checks = Vec::new();
    for f in model.fields.iter().filter(|f| !f.skip) {
        let ty = unwrap_wrappers(&f.attrs.ty);
        match generic_args(ty) {
            Some((name, args))
                if matches!(name.as_str(), "Vec" | "VecDeque" | "BTreeSet" | "HashSet")
                    && args.len() == 1 =>
            {
                let item = unwrap_wrappers(args[0]);
                if is_self(item) {
                    continue;
                }
                let map_list = f
                    .attrs
                    .list_type
                    .as_ref()
                    .is_some_and(|t| t.as_str() == "map");
                if map_list {
                    children.push(quote!(<#item>::__APIFORGE_TRANSITION_RULES));
                } else {
                    let msg = format!(
                        "oldSelf cannot be used on the uncorrelatable portion of the schema within {}: the items of a list that is not `list_type = \"map\"` cannot be correlated with the old object, so `{}` (its items' type) and the types below it must have no `cel` rule reading `oldSelf` and no `immutable` field",
                        f.json_name,
                        quote!(#item).to_string().replace(' ', "")
                    );
                    let span = syn::spanned::Spanned::span(&f.attrs.ty);
                    checks.push(quote_spanned! {span=>
                        ::core::assert!(!<#item>::__APIFORGE_TRANSITION_RULES, #msg);
                    });
                }
            }
            Some((name, args))
                if matches!(name.as_str(), "BTreeMap" | "HashMap" | "IndexMap")
                    && args.len() >= 2 =>
            {
                let value = unwrap_wrappers(args[1]);
                if !is_self(value) {
                    children.push(quote!(<#value>::__APIFORGE_TRANSITION_RULES));
                }
            }
            _ if is_self(ty) => {}
            _ => children.push(quote!(<#ty>::__APIFORGE_TRANSITION_RULES)),
        }
    }
    quote! {
        #[automatically_derived]
        impl #ident {
            #[doc(hidden)]
            pub const __APIFORGE_TRANSITION_RULES: bool = {
                #[allow(unused_imports)]
                use #rt::NoTransitionRules as _;
                #own #(|| #children)*
            };
        }
        const _: () = {
            #[allow(unused_imports)]
            use #rt::NoTransitionRules as _;
            #(#checks)*
        };
    }
}
