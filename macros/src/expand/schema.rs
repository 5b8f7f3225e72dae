use proc_macro2::TokenStream;
use quote::quote;

use crate::expand::defaults::default_value;
use crate::model::{FieldModel, ValidateModel};

fn format_name(name: &str) -> &'static str {
    match name {
        "dns1123_label" | "k8s_short_name" => "k8s-short-name",
        "dns1123_subdomain" => "k8s-long-name",
        "uuid" => "uuid",
        "date_time" => "date-time",
        "ip" => "k8s-ip",
        _ => "cidr",
    }
}

fn cel_entries(rules: &[crate::attr::CelAttr]) -> Vec<TokenStream> {
    rules
        .iter()
        .map(|c| {
            let rule = c.rule.as_str();
            match &c.message {
                Some(m) => quote!({ "rule": #rule, "message": #m }),
                None => quote!({ "rule": #rule }),
            }
        })
        .collect()
}

/// The JSON rules a field publishes into its property.
fn field_rules(rt: &syn::Path, f: &FieldModel) -> Vec<TokenStream> {
    let a = &f.attrs;
    let json = quote!(#rt::serde_json);
    let mut entries: Vec<TokenStream> = Vec::new();
    let mut push = |k: &str, v: TokenStream| {
        entries.push(quote!(__rules.insert(#k.into(), #json::json!(#v));))
    };
    if let Some(min) = &a.minimum {
        let v = lit_num(min.value);
        push("minimum", v);
        if a.exclusive_minimum.is_present() {
            push("exclusiveMinimum", quote!(true));
        }
    }
    if let Some(max) = &a.maximum {
        let v = lit_num(max.value);
        push("maximum", v);
        if a.exclusive_maximum.is_present() {
            push("exclusiveMaximum", quote!(true));
        }
    }
    if let Some(n) = &a.min_length {
        let n = **n;
        push("minLength", quote!(#n));
    }
    if let Some(n) = &a.max_length {
        let n = **n;
        push("maxLength", quote!(#n));
    }
    if let Some(p) = &a.pattern {
        let p = p.as_str();
        push("pattern", quote!(#p));
    }
    if let Some(fmt) = &a.format {
        let name = format_name(fmt);
        push("format", quote!(#name));
    }
    if let Some(values) = &a.enum_values {
        let values = values.values();
        push("enum", quote!([#(#values),*]));
    }
    if let Some(n) = &a.min_items {
        let n = **n;
        push("minItems", quote!(#n));
    }
    if let Some(n) = &a.max_items {
        let n = **n;
        push("maxItems", quote!(#n));
    }
    if let Some(lt) = &a.list_type {
        let lt = lt.as_str();
        push("x-kubernetes-list-type", quote!(#lt));
    }
    if let Some(keys) = &a.list_map_keys {
        let keys = keys.values();
        push("x-kubernetes-list-map-keys", quote!([#(#keys),*]));
    }
    let mut cel = cel_entries(&a.cel);
    if a.immutable.is_present() {
        cel.push(quote!({ "rule": "self == oldSelf", "message": "field is immutable" }));
    }
    if !cel.is_empty() {
        push("x-kubernetes-validations", quote!([#(#cel),*]));
    }
    if let Some(ps) = &a.patch_strategy {
        let ps = ps.as_str();
        push("x-kubernetes-patch-strategy", quote!(#ps));
    }
    if let Some(key) = &a.patch_merge_key {
        let key = key.as_str();
        push("x-kubernetes-patch-merge-key", quote!(#key));
    }
    entries
}

fn lit_num(v: f64) -> TokenStream {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        #[allow(clippy::cast_possible_truncation)]
        let i = v as i64;
        quote!(#i)
    } else {
        quote!(#v)
    }
}

/// `Validate::publish_schema` of a model.
pub(crate) fn method(model: &ValidateModel) -> TokenStream {
    let rt = &model.codegen;
    let json = quote!(#rt::serde_json);
    let mut patches = Vec::new();
    let mut nested = Vec::new();
    for f in model.fields.iter().filter(|f| !f.skip) {
        let name = &f.json_name;
        let ty = &f.attrs.ty;
        nested.push(quote!((&#rt::ProbeType::<#ty>(::core::marker::PhantomData)).__apiforge_publish(generator);));
        if f.flatten {
            continue;
        }
        let rules = field_rules(rt, f);
        let default = default_value(f).map(|value| {
            quote! {
                let __default: #ty = #value;
                __rules.insert("default".into(), #rt::to_json(&__default));
            }
        });
        if !rules.is_empty() || default.is_some() {
            patches.push(quote! {{
                let mut __rules = #json::Map::new();
                #(#rules)*
                #default
                #rt::merge_field(__def, #name, #json::Value::Object(__rules));
            }});
        }
        if f.attrs.required.is_present() {
            patches.push(quote!(#rt::set_required(__def, #name, true);));
        } else if f.attrs.optional.is_present() {
            patches.push(quote!(#rt::set_required(__def, #name, false);));
        }
    }
    // Unions as CEL rules (before the container's own rules, in the order
    // the compiled validation checks them), so a CRD made from the kind
    // refuses what the kind refuses.
    for u in &model.unions {
        let exactly = u.exactly;
        let members = u.members.iter().filter_map(|(ident, name)| {
            let field = model.fields.iter().find(|f| &f.ident == ident)?;
            let ty = &field.attrs.ty;
            Some(quote!((#name, <#ty as #rt::IsSet>::cel_is_set(#name))))
        });
        patches.push(quote!(#rt::merge_object(__def, #json::json!({ "x-kubernetes-validations": #rt::union_rules(&[#(#members),*], #exactly) }));));
    }
    let cel = cel_entries(&model.cel);
    if !cel.is_empty() {
        patches.push(quote!(#rt::merge_object(__def, #json::json!({ "x-kubernetes-validations": [#(#cel),*] }));));
    }
    quote! {
        fn publish_schema(generator: &mut #rt::schemars::SchemaGenerator) {
            let __schema = generator.subschema_for::<Self>();
            if let ::core::option::Option::Some(__publishing) = #rt::begin(&__schema) {
                if let ::core::option::Option::Some(__def) = #rt::definition(generator, &__publishing) {
                    let _ = &__def;
                    #(#patches)*
                }
                #(#nested)*
            }
        }
    }
}
