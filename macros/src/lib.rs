//! Derive macros of apiforge.
//!
//! `#[derive(Resource)]` turns a struct with a `metadata: ObjectMeta` field
//! into a Kubernetes-style resource: it implements
//! `apiforge_runtime::resource::Resource` with the kind's static facts
//! (group, version, kind, plural, scope, ...).
//!
//! ```text
//! #[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema, Resource)]
//! #[resource(group = "wardle.example.com", version = "v1beta1", namespaced, default_strategy)]
//! pub struct Flunder {
//!     pub metadata: ObjectMeta,
//!     pub spec: FlunderSpec,
//!     pub status: FlunderStatus,
//! }
//! ```
//!
//! Attributes of `#[resource(...)]`:
//! - `group = "..."` (required; `""` is the core group), `version = "..."` (required);
//! - `kind = "..."` (default: the struct name), `plural` (default: lower-case kind + `s`),
//!   `singular` (default: lower-case kind);
//! - `namespaced` or `cluster` (one is required);
//! - `short_names = ["..."]`, `categories = ["..."]`;
//! - `openapi_name = "..."` (default: `<reversed group>.<version>.<Kind>`);
//! - `default_strategy`: also implement `Strategy` with every default hook;
//! - `crate = "path"`: the path of the runtime crate (default `::apiforge_runtime`).

mod attr;
mod expand;

use proc_macro::TokenStream;

/// Derives `Resource` for a struct; see the crate docs for the attributes.
#[proc_macro_derive(Resource, attributes(resource))]
pub fn derive_resource(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    expand::derive(&input).into()
}
