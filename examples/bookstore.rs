//! A complete API server for one small group, `bookstore.example.com`,
//! defined with the apiforge macros and served with the runtime: the
//! companion of `docs/defining-a-group.md`.
//!
//! ```sh
//! cargo run --example bookstore -- serve --secure-port 0 --data-dir /tmp/bookstore
//! kubectl --kubeconfig /tmp/bookstore/admin.kubeconfig get books
//! ```
//!
//! Its `main` is the runtime's command line (`apiforge_runtime::app`): the
//! same flags as `apiforge serve`, plus `openapi`, `crd` and `snapshot`.
//! Unlike the `apiforge` binary, which generates its documents in
//! `build.rs`, this program builds its OpenAPI and discovery documents at
//! start-up.

use apiforge_runtime::meta::ObjectMeta;
use apiforge_runtime::resource::Strategy;
use apiforge_runtime::scheme::{Group, KindBuilder};
use apiforge_runtime::{Resource, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A book in the store's catalogue.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[resource(
    group = "bookstore.example.com",
    version = "v1",
    namespaced,
    short_names = ["bk"],
    categories = ["all"],
    printcolumn(name = "Author", type = "string", json_path = ".spec.author"),
    printcolumn(name = "Pages", type = "integer", json_path = ".spec.pages"),
    printcolumn(name = "Age", type = "date", json_path = ".metadata.creationTimestamp"),
    selectable_fields = [".spec.author"]
)]
pub struct Book {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the book is.
    #[serde(default)]
    pub spec: BookSpec,
}

/// What the book is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Validate)]
#[serde(rename_all = "camelCase")]
pub struct BookSpec {
    /// The title.
    #[serde(default)]
    #[validate(required, max_length = 200)]
    pub title: String,
    /// The author's name.
    #[serde(default)]
    #[validate(required)]
    pub author: String,
    /// The number of pages.
    #[serde(default)]
    #[validate(minimum = 1, maximum = 10000, default = 100)]
    pub pages: i32,
    /// The ISBN-13, digits only; fixed once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[validate(pattern = "^[0-9]{13}$", immutable)]
    pub isbn: Option<String>,
}

/// The hand-written strategy: defaults for everything but a warning.
impl Strategy for Book {
    fn warnings_on_create(&self) -> Vec<String> {
        if self.spec.isbn.is_none() {
            vec!["spec.isbn: books without an ISBN cannot be ordered".into()]
        } else {
            Vec::new()
        }
    }
}

/// The `bookstore.example.com` group.
pub fn group() -> Group {
    Group::new("bookstore.example.com", &["v1"])
        .model_prefix("com.example.bookstore")
        .title("Bookstore")
        .kind(KindBuilder::<Book>::new().version::<Book>().build())
}

/// Every kind served: the bookstore group and the runtime's own core
/// group (namespaces).
/// The bookstore server: `bookstore serve` with every flag of `apiforge
/// serve`, `bookstore openapi --out DIR`, `bookstore crd`, `bookstore
/// snapshot`.
fn main() -> anyhow::Result<()> {
    apiforge_runtime::app::Server::new("bookstore")
        .about("A bookstore API server built with apiforge")
        .version(env!("CARGO_PKG_VERSION"))
        .group(group())
        .run()
}
