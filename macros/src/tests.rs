use darling::{FromDeriveInput, FromField};
use quote::quote;

use crate::attr::{FieldAttrs, ResourceAttrs, duplicates};
use crate::ctxt::Ctxt;
use crate::model::{ValidateModel, rename};

fn input(tokens: proc_macro2::TokenStream) -> syn::DeriveInput {
    syn::parse2(tokens).unwrap_or_else(|e| panic!("test input does not parse: {e}"))
}

fn pretty(tokens: proc_macro2::TokenStream) -> String {
    let file: syn::File =
        syn::parse2(tokens).unwrap_or_else(|e| panic!("expansion does not parse: {e}"));
    prettyplease::unparse(&file)
}

/// Compares with `src/snapshots/<name>.rs`; `APIFORGE_BLESS=1` rewrites it.
fn snapshot(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/snapshots")
        .join(format!("{name}.rs"));
    if std::env::var_os("APIFORGE_BLESS").is_some() {
        std::fs::write(&path, actual)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "expansion of {name} changed (APIFORGE_BLESS=1 to accept):\n{actual}"
    );
}

#[test]
fn field_attributes_parse() {
    let field: syn::Field = syn::parse_quote! {
        #[validate(minimum = -1, maximum = 2.5, exclusive_maximum, max_length = 3, enum_values = ["a", "b"], default = "a", cel(rule = "self != 'b'", message = "no b"), cel(rule = "true"))]
        pub x: Option<String>
    };
    let attrs = FieldAttrs::from_field(&field).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(attrs.minimum.as_ref().map(|n| n.value), Some(-1.0));
    assert_eq!(attrs.maximum.as_ref().map(|n| n.value), Some(2.5));
    assert!(attrs.exclusive_maximum.is_present());
    assert_eq!(attrs.max_length.as_deref().copied(), Some(3));
    assert_eq!(
        attrs.enum_values.as_ref().map(|v| v.values()),
        Some(vec!["a".to_string(), "b".to_string()])
    );
    let default = attrs.default.as_ref().map(|d| &d.0);
    assert!(
        matches!(default, Some(syn::Expr::Lit(_))),
        "a string default stays a string literal"
    );
    assert_eq!(attrs.cel.len(), 2);
    assert_eq!(attrs.cel[0].message.as_deref(), Some("no b"));
}

#[test]
fn resource_attributes_parse() {
    let input = input(quote! {
        #[resource(group = "g.example.com", version = "v1", namespaced,
            printcolumn(name = "Replicas", type = "integer", json_path = ".spec.replicas", priority = 1),
            printcolumn(name = "Phase", type = "string", json_path = ".status.phase"),
            selectable_fields = [".spec.engine"], subresource_status,
            subresource_scale(spec_replicas_path = ".spec.replicas", status_replicas_path = ".status.replicas"),
            deprecated, deprecation_warning = "use v2")]
        pub struct Db { metadata: ObjectMeta }
    });
    let attrs = ResourceAttrs::from_derive_input(&input).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(attrs.printcolumn.len(), 2);
    assert_eq!(attrs.printcolumn[0].priority, 1);
    assert_eq!(attrs.printcolumn[1].type_.as_str(), "string");
    assert!(attrs.subresource_status.is_present());
    assert_eq!(
        attrs
            .subresource_scale
            .as_ref()
            .map(|s| s.spec_replicas_path.as_str().to_string()),
        Some(".spec.replicas".into())
    );
    assert!(attrs.deprecated.is_present());
}

#[test]
fn duplicates_are_reported() {
    let input = input(quote! {
        #[resource(group = "a", version = "v1", namespaced, namespaced, printcolumn(name = "a", type = "string", json_path = ".a"), printcolumn(name = "b", type = "string", json_path = ".b"))]
        pub struct X { metadata: ObjectMeta }
    });
    let errs = duplicates(&input.attrs, "resource");
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].to_string(), "`namespaced` specified more than once");
}

#[test]
fn json_names_follow_serde() {
    assert_eq!(rename("reference_type", Some("camelCase")), "referenceType");
    assert_eq!(
        rename("reference_type", Some("PascalCase")),
        "ReferenceType"
    );
    assert_eq!(
        rename("reference_type", Some("kebab-case")),
        "reference-type"
    );
    assert_eq!(rename("r#type", None), "type");
    let input = input(quote! {
        #[serde(rename_all = "camelCase")]
        pub struct S {
            pub storage_size: String,
            #[serde(rename = "kind_")]
            pub kind: String,
            #[serde(flatten)]
            pub rest: Other,
        }
    });
    let cx = Ctxt::new();
    let model = ValidateModel::from_ast(&cx, &input, None);
    assert!(cx.check().is_ok());
    let names: Vec<(String, bool)> = model
        .map(|m| {
            m.fields
                .into_iter()
                .map(|f| (f.json_name, f.flatten))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        names,
        vec![
            ("storageSize".into(), false),
            ("kind_".into(), false),
            ("rest".into(), true)
        ]
    );
}

#[test]
fn checks_collect_every_error() {
    let input = input(quote! {
        pub struct S {
            #[validate(required, optional, exclusive_minimum, pattern = "(", format = "email", list_map_keys = ["a"])]
            pub x: String,
        }
    });
    let cx = Ctxt::new();
    if let Some(model) = ValidateModel::from_ast(&cx, &input, None) {
        crate::check::check_validate(&cx, &model);
    }
    let err = cx
        .check()
        .err()
        .map(|e| e.into_iter().map(|e| e.to_string()).collect::<Vec<_>>())
        .unwrap_or_default();
    assert_eq!(err.len(), 5, "{err:#?}");
    assert!(err[0].contains("`required` and `optional` are mutually exclusive"));
    assert!(err[1].contains("`exclusive_minimum` needs `minimum`"));
    assert!(err[2].contains("`pattern` is not a valid regular expression"));
    assert!(err[3].contains("unknown `format` \"email\""));
    assert!(err[4].contains("`list_map_keys` needs `list_type = \"map\"`"));
}

#[test]
fn validate_expansion() {
    let tokens = crate::expand::derive_validate(&input(quote! {
        #[serde(rename_all = "camelCase")]
        #[validate(one_of(url, secret_ref), cel(rule = "self.minSize <= self.maxSize", message = "min over max"))]
        pub struct Spec {
            #[validate(required, minimum = 1, maximum = 5, default = 1, immutable)]
            pub min_size: Option<i32>,
            #[validate(max_length = 10, pattern = "^[a-z]+$", cel(rule = "self != oldSelf"))]
            pub url: Option<String>,
            pub secret_ref: Option<String>,
            #[validate(list_type = "map", list_map_keys = ["name"], patch_strategy = "merge", patch_merge_key = "name")]
            pub ports: Vec<Port>,
            pub max_size: Option<i32>,
        }
    }));
    snapshot("validate", &pretty(tokens));
}

#[test]
fn resource_expansion() {
    let tokens = crate::expand::derive_resource(&input(quote! {
        #[resource(group = "showcase.example.com", version = "v1", namespaced, short_names = ["db"],
            printcolumn(name = "Replicas", type = "integer", json_path = ".spec.replicas"),
            selectable_fields = [".spec.engine"], subresource_status,
            subresource_scale(spec_replicas_path = ".spec.replicas", status_replicas_path = ".status.replicas", label_selector_path = ".status.selector"),
            default_strategy)]
        pub struct Database {
            pub metadata: ObjectMeta,
            pub spec: DatabaseSpec,
        }
    }));
    snapshot("resource", &pretty(tokens));
}

#[test]
fn convert_expansion() {
    let tokens = crate::expand::derive_convert(&input(quote! {
        #[convert(hub = super::v1::Spec, hub_default)]
        pub struct Spec {
            pub engine: Engine,
            #[convert(rename = storage_size)]
            pub size: String,
            #[convert(into_hub = tier_into_hub, from_hub = tier_from_hub)]
            pub tier: String,
            #[convert(skip)]
            pub legacy: bool,
        }
    }));
    snapshot("convert", &pretty(tokens));
}

#[test]
fn errors_expand_to_compile_error_and_stubs() {
    let tokens = crate::expand::derive_resource(&input(quote! {
        #[resource(group = "g", version = "v1", namespaced, cluster)]
        pub struct X { pub metadata: ObjectMeta }
    }));
    let text = tokens.to_string();
    assert!(text.contains("compile_error"));
    assert!(text.contains("`namespaced` and `cluster` are mutually exclusive"));
    assert!(text.contains("KindInfo :: EMPTY"));
}

/// The paths in `tokens` that start at the crate `root` (`root::...` or
/// `::root::...`) and do not continue with `codegen::v1::`, and the number
/// of paths that do.
fn paths_from(tokens: proc_macro2::TokenStream, root: &str) -> (Vec<String>, usize) {
    use proc_macro2::TokenTree;
    fn walk(tokens: proc_macro2::TokenStream, root: &str, bad: &mut Vec<String>, good: &mut usize) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let is_sep = |i: usize| {
            matches!(
                (tts.get(i), tts.get(i + 1)),
                (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                    if a.as_char() == ':' && b.as_char() == ':'
            )
        };
        let is_ident =
            |i: usize, name: &str| matches!(tts.get(i), Some(TokenTree::Ident(id)) if id == name);
        for (i, tt) in tts.iter().enumerate() {
            match tt {
                TokenTree::Group(g) => walk(g.stream(), root, bad, good),
                TokenTree::Ident(id) if id == root => {
                    if is_sep(i + 1)
                        && is_ident(i + 3, "codegen")
                        && is_sep(i + 4)
                        && is_ident(i + 6, "v1")
                        && is_sep(i + 7)
                    {
                        *good += 1;
                    } else {
                        let rest: proc_macro2::TokenStream =
                            tts[i..tts.len().min(i + 8)].iter().cloned().collect();
                        bad.push(rest.to_string());
                    }
                }
                _ => {}
            }
        }
    }
    let (mut bad, mut good) = (Vec::new(), 0);
    walk(tokens, root, &mut bad, &mut good);
    (bad, good)
}

/// Generated code names the runtime only through `codegen::v1`.
fn assert_only_codegen(name: &str, tokens: proc_macro2::TokenStream, root: &str) {
    let (bad, good) = paths_from(tokens, root);
    assert!(
        bad.is_empty(),
        "{name}: paths outside `{root}::codegen::v1`: {bad:#?}"
    );
    assert!(good > 0, "{name}: no path through `{root}::codegen::v1`");
}

#[test]
fn generated_code_names_only_the_codegen_module() {
    let validate = input(quote! {
        #[serde(rename_all = "camelCase")]
        #[validate(one_of(url, secret_ref), at_most_one_of(a, b),
            cel(rule = "self.minSize <= self.maxSize", message = "min over max"),
            cel(rule = "self == oldSelf"))]
        pub struct Spec {
            #[validate(required, minimum = 1, maximum = 5, exclusive_maximum, default = 1, immutable)]
            pub min_size: Option<i32>,
            #[validate(optional, minimum = 0.5, exclusive_minimum)]
            pub max_size: f64,
            #[validate(min_length = 1, max_length = 10, pattern = "^[a-z]+$", format = "dns1123_label", cel(rule = "self != oldSelf"))]
            pub url: Option<String>,
            #[validate(enum_values = ["a", "b"], default = "a")]
            pub secret_ref: Option<String>,
            pub a: Option<String>,
            pub b: Option<String>,
            #[validate(list_type = "map", list_map_keys = ["name"], patch_strategy = "merge", patch_merge_key = "name", min_items = 1, max_items = 3)]
            pub ports: Vec<Port>,
            #[validate(list_type = "set")]
            #[serde(skip_serializing_if = "Vec::is_empty")]
            pub tags: Vec<String>,
            #[validate(custom = check_even)]
            pub stripes: i32,
            #[serde(flatten)]
            pub rest: Rest,
            #[serde(skip)]
            pub cache: Cache,
        }
    });
    let resource = input(quote! {
        #[resource(group = "showcase.example.com", version = "v1", namespaced, short_names = ["db"],
            categories = ["all"], kind = "Db", plural = "dbs", singular = "db", openapi_name = "x.v1.Db",
            printcolumn(name = "Replicas", type = "integer", json_path = ".spec.replicas", priority = 1, description = "r", format = "int32"),
            selectable_fields = [".spec.engine"], subresource_status,
            subresource_scale(spec_replicas_path = ".spec.replicas", status_replicas_path = ".status.replicas", label_selector_path = ".status.selector"),
            deprecated, deprecation_warning = "use v2", default_strategy)]
        #[validate(cel(rule = "has(self.spec)"))]
        pub struct Database {
            pub metadata: ObjectMeta,
            #[validate(required)]
            pub spec: DatabaseSpec,
            pub status: Option<DatabaseStatus>,
        }
    });
    let cluster = input(quote! {
        #[resource(group = "", version = "v1", cluster)]
        pub struct Node { pub metadata: ObjectMeta }
    });
    let convert = input(quote! {
        #[convert(hub = super::v1::Spec, hub_default)]
        pub struct Spec {
            pub engine: Engine,
            #[convert(rename = storage_size)]
            pub size: String,
            #[convert(into_hub = tier_into_hub, from_hub = tier_from_hub)]
            pub tier: String,
            #[convert(skip)]
            pub legacy: bool,
        }
    });
    let expansions = [
        ("Validate", crate::expand::derive_validate(&validate)),
        ("Resource", crate::expand::derive_resource(&resource)),
        (
            "Resource (cluster)",
            crate::expand::derive_resource(&cluster),
        ),
        ("Convert", crate::expand::derive_convert(&convert)),
    ];
    for (name, tokens) in expansions {
        assert!(
            !tokens.to_string().contains("compile_error"),
            "{name}: {tokens}"
        );
        assert_only_codegen(name, tokens, "apiforge_runtime");
    }

    // The stubs that stand in after an error, too.
    let bad_validate = input(quote! {
        pub struct Spec {
            #[validate(format = "email")]
            pub contact: String,
        }
    });
    let bad_resource = input(quote! {
        #[resource(group = "g", version = "v1", namespaced, cluster)]
        pub struct X { pub metadata: ObjectMeta }
    });
    let bad_convert = input(quote! {
        #[convert(hub = Hub)]
        pub struct V {
            #[convert(into_hub = a_into_hub)]
            pub a: String,
        }
    });
    let stubs = [
        (
            "Validate stub",
            crate::expand::derive_validate(&bad_validate),
        ),
        (
            "Resource stub",
            crate::expand::derive_resource(&bad_resource),
        ),
        ("Convert stub", crate::expand::derive_convert(&bad_convert)),
    ];
    for (name, tokens) in stubs {
        assert!(
            tokens.to_string().contains("compile_error"),
            "{name}: {tokens}"
        );
        assert_only_codegen(name, tokens, "apiforge_runtime");
    }

    // `crate = path` moves the whole contract.
    let renamed = [
        crate::expand::derive_resource(&input(quote! {
            #[resource(group = "g.example.com", version = "v1", namespaced, crate = ::my_runtime)]
            pub struct X { pub metadata: ObjectMeta }
        })),
        crate::expand::derive_validate(&input(quote! {
            #[validate(crate = my_runtime)]
            pub struct Y { #[validate(minimum = 1)] pub n: i32 }
        })),
        crate::expand::derive_convert(&input(quote! {
            #[convert(hub = Hub, crate = my_runtime)]
            pub struct Z { pub n: i32 }
        })),
    ];
    for tokens in renamed {
        let (bad, _) = paths_from(tokens.clone(), "apiforge_runtime");
        assert!(bad.is_empty(), "{bad:#?}");
        assert!(!tokens.to_string().contains("apiforge_runtime"), "{tokens}");
        assert_only_codegen("crate = my_runtime", tokens, "my_runtime");
    }
}

#[test]
fn the_resource_model_resolves_names_and_defaults() {
    let cx = Ctxt::new();
    let model = crate::model::ResourceModel::from_ast(
        &cx,
        &input(quote! {
            #[resource(group = "showcase.example.com", version = "v1", cluster,
                subresource_scale(spec_replicas_path = ".spec.replicas", status_replicas_path = ".status.replicas"))]
            pub struct DataBase { pub metadata: ObjectMeta }
        }),
    );
    assert!(cx.check().is_ok());
    let Some(m) = model else { panic!("no model") };
    assert_eq!(m.kind, "DataBase");
    assert_eq!(m.plural, "databases");
    assert_eq!(m.singular, "database");
    assert_eq!(m.openapi_name, "com.example.showcase.v1.DataBase");
    assert_eq!(m.scope, crate::model::Scope::Cluster);
    assert!(m.short_names.is_empty() && m.categories.is_empty());
    assert_eq!(
        m.subresource_scale.map(|s| s.label_selector),
        Some(String::new())
    );
    assert_eq!(
        crate::model::openapi_name("", "v1", "ConfigMap"),
        "io.k8s.api.core.v1.ConfigMap"
    );

    let cx = Ctxt::new();
    let model = crate::model::ResourceModel::from_ast(
        &cx,
        &input(quote! {
            #[resource(group = "g.example.com", version = "v2", namespaced, kind = "Thing", plural = "thingies", singular = "thingy", openapi_name = "custom.Thing")]
            pub struct ThingV2 { pub metadata: ObjectMeta }
        }),
    );
    assert!(cx.check().is_ok());
    let Some(m) = model else { panic!("no model") };
    assert_eq!(
        (
            m.kind.as_str(),
            m.plural.as_str(),
            m.singular.as_str(),
            m.openapi_name.as_str()
        ),
        ("Thing", "thingies", "thingy", "custom.Thing")
    );
    assert_eq!(m.scope, crate::model::Scope::Namespaced);
}

#[test]
fn convert_checks_collect_every_error() {
    let cx = Ctxt::new();
    let model = crate::model::ConvertModel::from_ast(
        &cx,
        &input(quote! {
            #[convert(hub = Hub)]
            pub struct V {
                #[convert(skip, rename = b)]
                pub a: String,
                #[convert(from_hub = c_from_hub)]
                pub c: String,
                #[convert(rename = x, rename = y)]
                pub d: String,
            }
        }),
    );
    if let Some(model) = &model {
        crate::check::check_convert(&cx, model);
    }
    let err = cx
        .check()
        .err()
        .map(|e| e.into_iter().map(|e| e.to_string()).collect::<Vec<_>>())
        .unwrap_or_default();
    assert_eq!(err.len(), 3, "{err:#?}");
    assert!(err[0].contains("`rename` specified more than once"));
    assert!(err[1].contains("`skip` cannot be combined"));
    assert!(err[2].contains("`into_hub` and `from_hub` must be given together"));
}
