//! The user guide's Rust samples (`docs/`, an mdBook), compiled as
//! doctests of this crate so that a sample that stops compiling fails the
//! test run. Only built for `cargo test -p apiforge-runtime --features
//! testing --doc` (the samples use the in-process server and kube-rs
//! types), which `scripts/test.sh` runs.

/// `docs/defining-a-group.md`.
#[doc = include_str!("../../docs/defining-a-group.md")]
pub struct DefiningAGroup;

/// `docs/guide/attributes.md`: the macros' own samples, generated.
#[doc = include_str!("../../docs/guide/attributes.md")]
pub struct Attributes;

/// `docs/guide/tutorial.md`.
#[doc = include_str!("../../docs/guide/tutorial.md")]
pub struct Tutorial;
