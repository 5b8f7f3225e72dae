//! `showcase.apiforge.dev`: the living example of every macro feature.
//!
//! `Database` is served in [`v1`] (hub, storage, preferred) and
//! [`v1alpha1`] (deprecated, converted by derive with a rename and one
//! function pair). See the types for printer columns, selectable fields,
//! the status and scale subresources, enums, bounds, patterns, formats,
//! list maps and sets, an immutable field, unions, CEL rules (one a
//! transition rule), defaults and strategic-merge-patch keys.

use apiforge_runtime::scheme::{Group, KindBuilder, Scheme};

pub mod v1;
pub mod v1alpha1;

#[cfg(test)]
mod tests;

/// The group name.
pub const GROUP: &str = "showcase.apiforge.dev";

/// The showcase group.
pub fn group() -> Group {
    Group::new(GROUP, &["v1", "v1alpha1"])
        .model_prefix("dev.apiforge.showcase")
        .title("Showcase")
        .kind(
            KindBuilder::<v1::Database>::new()
                .version::<v1::Database>()
                .version::<v1alpha1::Database>()
                .storage::<v1::Database>()
                .build(),
        )
}

/// Installs the showcase group.
pub fn install(scheme: &mut Scheme) {
    scheme.add_group(group());
}
