use darling::{FromDeriveInput, FromMeta};

#[derive(Debug, Default, FromMeta)]
pub(crate) struct StringList(pub(crate) Vec<syn::LitStr>);

impl StringList {
    pub(crate) fn values(&self) -> Vec<String> {
        self.0.iter().map(syn::LitStr::value).collect()
    }
}

#[derive(Debug, FromDeriveInput)]
#[darling(attributes(resource), supports(struct_named))]
pub(crate) struct ResourceAttrs {
    pub(crate) ident: syn::Ident,
    pub(crate) generics: syn::Generics,
    pub(crate) group: String,
    pub(crate) version: String,
    #[darling(default)]
    pub(crate) kind: Option<String>,
    #[darling(default)]
    pub(crate) plural: Option<String>,
    #[darling(default)]
    pub(crate) singular: Option<String>,
    #[darling(default)]
    pub(crate) namespaced: darling::util::Flag,
    #[darling(default)]
    pub(crate) cluster: darling::util::Flag,
    #[darling(default)]
    pub(crate) short_names: Option<StringList>,
    #[darling(default)]
    pub(crate) categories: Option<StringList>,
    #[darling(default)]
    pub(crate) openapi_name: Option<String>,
    #[darling(default)]
    pub(crate) default_strategy: darling::util::Flag,
    #[darling(default, rename = "crate")]
    pub(crate) krate: Option<syn::Path>,
}
