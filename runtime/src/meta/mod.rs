//! Kubernetes `meta.k8s.io/v1` types shared by every kind: object and list
//! metadata, `Status`, and the helpers to render API errors; and
//! `autoscaling/v1` `Scale`, the body of every `/scale` subresource.

mod object_meta;
pub mod scale;
mod status;

pub use object_meta::{ListMeta, ManagedFieldsEntry, ObjectMeta, OwnerReference, Time};
pub use scale::{Scale, ScaleSpec, ScaleStatus};
pub use status::{Status, StatusCause, StatusDetails};
