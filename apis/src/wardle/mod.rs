//! `wardle.example.com`: the Kubernetes sample-apiserver's group.
//!
//! `v1beta1` is the preferred version. (The sample server's `v1alpha1` with
//! `Fischer` and its conversion follow with the complete macros.)

use apiforge_runtime::scheme::{Group, KindBuilder, Scheme};

pub mod v1beta1;

/// The group name.
pub const GROUP: &str = "wardle.example.com";

/// Installs the wardle group.
pub fn install(scheme: &mut Scheme) {
    scheme.add_group(
        Group::new(GROUP, &["v1beta1"])
            .model_prefix("io.k8s.sample-apiserver.pkg.apis.wardle")
            .title("Wardle")
            .kind(
                KindBuilder::<v1beta1::Flunder>::new()
                    .version::<v1beta1::Flunder>()
                    .build(),
            ),
    );
}
