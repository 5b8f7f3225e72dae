//! The runtime's own API groups, declared with the same macros as user
//! groups: core `v1` (Namespace, ConfigMap, Secret, Service, Endpoints),
//! `discovery.k8s.io/v1` (EndpointSlice),
//! `rbac.authorization.k8s.io/v1`, `coordination.k8s.io/v1` (Lease),
//! `flowcontrol.apiserver.k8s.io/v1`, `apiextensions.k8s.io/v1`
//! (CustomResourceDefinition) and `admissionregistration.k8s.io/v1`
//! (the webhook configurations and admission policies) and
//! `apiregistration.k8s.io/v1` (APIService).

pub mod admissionregistration_v1;
pub mod apiextensions_v1;
pub mod apiregistration_v1;
pub mod coordination_v1;
pub mod core_v1;
pub mod discovery_v1;
pub mod flowcontrol_v1;
pub mod printers;
pub mod rbac_v1;

use crate::scheme::Scheme;

/// Installs every built-in group.
pub fn install(scheme: &mut Scheme) {
    core_v1::install(scheme);
    discovery_v1::install(scheme);
    rbac_v1::install(scheme);
    coordination_v1::install(scheme);
    flowcontrol_v1::install(scheme);
    apiextensions_v1::install(scheme);
    admissionregistration_v1::install(scheme);
    apiregistration_v1::install(scheme);
}
