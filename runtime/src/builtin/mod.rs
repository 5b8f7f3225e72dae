//! The runtime's own API groups, declared with the same macros as user
//! groups: today core `v1` Namespace.

pub mod core_v1;

use crate::scheme::Scheme;

/// Installs every built-in group.
pub fn install(scheme: &mut Scheme) {
    core_v1::install(scheme);
}
