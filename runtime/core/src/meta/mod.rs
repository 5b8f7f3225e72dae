//! Kubernetes `meta.k8s.io/v1` types shared by every kind: object and list
//! metadata, `Status`, and the helpers to render API errors.

mod object_meta;
mod status;

pub use object_meta::{ListMeta, ManagedFieldsEntry, ObjectMeta, OwnerReference, Time};
pub use status::{Status, StatusCause, StatusDetails};
