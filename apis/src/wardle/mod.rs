//! `wardle.example.com`: the Kubernetes sample-apiserver's group.
//!
//! - [`v1beta1`] (preferred) and [`v1alpha1`] are served; `Fischer` only
//!   in v1alpha1.
//! - [`internal`] is the hub the strategy runs on (v1beta1-shaped), so
//!   validation reports internal field names.
//! - v1alpha1 is the storage version: what it cannot express is lost on
//!   write, as upstream.

use apiforge_runtime::scheme::{Group, KindBuilder, Scheme};

#[cfg(feature = "server")]
pub mod admission;
pub mod internal;
pub mod v1alpha1;
pub mod v1beta1;

#[cfg(test)]
mod tests;

/// The group name.
pub const GROUP: &str = "wardle.example.com";

/// The wardle group.
pub fn group() -> Group {
    Group::new(GROUP, &["v1beta1", "v1alpha1"])
        .model_prefix("io.k8s.sample-apiserver.pkg.apis.wardle")
        .title("Wardle")
        .kind(
            KindBuilder::<internal::Flunder>::new()
                .version::<v1beta1::Flunder>()
                .version::<v1alpha1::Flunder>()
                .storage::<v1alpha1::Flunder>()
                .build(),
        )
        .kind(
            KindBuilder::<v1alpha1::Fischer>::new()
                .version::<v1alpha1::Fischer>()
                .build(),
        )
}

/// Installs the wardle group.
pub fn install(scheme: &mut Scheme) {
    scheme.add_group(group());
}
