//! # apiforge-apis
//!
//! Resource groups defined with the apiforge macros. Each group is a module
//! with one file per version and an `install` function that adds the group to
//! a [`Scheme`]:
//!
//! - [`wardle`]: `wardle.example.com`, a faithful peer of the Kubernetes
//!   sample-apiserver's group.
//! - [`showcase`]: `showcase.apiforge.dev`, the living example of every
//!   macro feature (`Database`).

use apiforge_runtime::scheme::Scheme;

pub mod showcase;
pub mod wardle;

/// Installs every group of this crate into `scheme`.
pub fn install(scheme: &mut Scheme) {
    wardle::install(scheme);
    showcase::install(scheme);
}

/// A scheme with every group of this crate.
pub fn scheme() -> Scheme {
    let mut scheme = Scheme::new();
    install(&mut scheme);
    scheme
}
