//! Core (`""` group) `v1`: Namespace, ConfigMap, Secret, Service and
//! Endpoints. With the `protobuf` feature they also speak Kubernetes
//! protobuf ([`crate::protobuf`]).

mod bytes;
mod config_map;
mod endpoints;
pub mod net;
#[cfg(feature = "protobuf")]
mod protobuf;
mod secret;
mod service;
#[cfg(test)]
mod service_tests;

pub use bytes::{ByteString, MAX_DATA_SIZE, is_config_map_key};
pub use config_map::ConfigMap;
pub use endpoints::{EndpointAddress, EndpointPort, EndpointSubset, Endpoints, validate_endpoints};
pub use net::ObjectReference;
pub use secret::{SECRET_TYPE_OPAQUE, Secret};
pub use service::{
    CLUSTER_IP_NONE, ClientIPConfig, IntOrString, LoadBalancerIngress, LoadBalancerStatus, Service,
    ServicePort, ServiceSpec, ServiceStatus, SessionAffinityConfig, TYPE_CLUSTER_IP,
    TYPE_EXTERNAL_NAME, TYPE_LOAD_BALANCER, TYPE_NODE_PORT, validate_service,
};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Resource;
use crate::meta::ObjectMeta;
use crate::resource::Strategy;
use crate::scheme::{Group, KindBuilder, Scheme};
use crate::validation::{self, ErrorList, FieldError};

/// The namespaces that exist from the first start and cannot be deleted.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// Installs the core group.
pub fn install(scheme: &mut Scheme) {
    scheme.add_group(
        Group::new("", &["v1"])
            .model_prefix("io.k8s.api.core")
            .title("Kubernetes")
            .kind(with_protobuf(KindBuilder::<Namespace>::new().version::<Namespace>()).build())
            .kind(with_protobuf(KindBuilder::<ConfigMap>::new().version::<ConfigMap>()).build())
            .kind(with_protobuf(KindBuilder::<Secret>::new().version::<Secret>()).build())
            .kind(with_protobuf(KindBuilder::<Service>::new().version::<Service>()).build())
            .kind(with_protobuf(KindBuilder::<Endpoints>::new().version::<Endpoints>()).build()),
    );
}

/// Attaches the protobuf codec of `K` (with the `protobuf` feature).
#[cfg(feature = "protobuf")]
fn with_protobuf<K>(builder: KindBuilder<K>) -> KindBuilder<K>
where
    K: Strategy + crate::protobuf::ProtobufKind,
{
    builder.protobuf::<K>(crate::protobuf::ops::<K>())
}

/// Without the `protobuf` feature there is no codec.
#[cfg(not(feature = "protobuf"))]
fn with_protobuf<K: Strategy>(builder: KindBuilder<K>) -> KindBuilder<K> {
    builder
}

/// Namespace provides a scope for Names. Use of multiple namespaces is
/// optional.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[resource(group = "", version = "v1", cluster, short_names = ["ns"], openapi_name = "io.k8s.api.core.v1.Namespace")]
pub struct Namespace {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Spec defines the behavior of the Namespace.
    #[serde(default)]
    pub spec: NamespaceSpec,
    /// Status describes the current status of a Namespace.
    #[serde(default)]
    pub status: NamespaceStatus,
}

/// NamespaceSpec describes the attributes on a Namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NamespaceSpec {
    /// Finalizers is an opaque list of values that must be empty to
    /// permanently remove object from storage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finalizers: Vec<String>,
}

/// NamespaceStatus is information about the current status of a Namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NamespaceStatus {
    /// Phase is the current lifecycle phase of the namespace: `Active` or
    /// `Terminating`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
}

/// The finalizer the namespace controller owns.
pub const FINALIZER_KUBERNETES: &str = "kubernetes";

/// The label every namespace carries with its own name (`v1.LabelMetadataName`).
pub const LABEL_METADATA_NAME: &str = "kubernetes.io/metadata.name";

impl Namespace {
    /// Sets [`LABEL_METADATA_NAME`] to the name (when there is one yet).
    fn label_with_name(&mut self) {
        if !self.metadata.name.is_empty() {
            self.metadata
                .labels
                .insert(LABEL_METADATA_NAME.into(), self.metadata.name.clone());
        }
    }
}

impl Strategy for Namespace {
    /// Upstream's `SetDefaults_Namespace`: the name label, whatever the
    /// body's encoding (every body is defaulted here after decoding).
    fn default_fields(&mut self) {
        crate::resource::Resource::generated_default_fields(self);
        self.label_with_name();
    }

    /// Upstream's namespace `Canonicalize`: the label follows the name on
    /// every create and update.
    fn canonicalize(&mut self) {
        self.label_with_name();
    }

    fn table_printer() -> Option<&'static crate::resource::TablePrinter> {
        Some(&super::printers::NAMESPACE)
    }

    /// The namespace controller's `spec.finalizers` hold a deleted
    /// namespace until its content is gone.
    fn finalizers_pending(&self) -> bool {
        !self.spec.finalizers.is_empty()
    }

    fn on_deletion_requested(&mut self) {
        self.status.phase = "Terminating".into();
    }

    fn prepare_for_create(&mut self) {
        self.status = NamespaceStatus {
            phase: "Active".into(),
        };
        if !self
            .spec
            .finalizers
            .iter()
            .any(|f| f == FINALIZER_KUBERNETES)
        {
            self.spec.finalizers.push(FINALIZER_KUBERNETES.into());
        }
    }

    fn prepare_for_update(&mut self, old: &Self) {
        self.spec.finalizers = old.spec.finalizers.clone();
        self.status = old.status.clone();
    }

    fn validate_create(&self) -> ErrorList {
        let mut errs = ErrorList::default();
        if !self.metadata.name.is_empty() {
            for msg in validation::is_dns1123_label(&self.metadata.name) {
                errs.push(FieldError::invalid(
                    "metadata.name",
                    self.metadata.name.clone(),
                    msg,
                ));
            }
        }
        errs
    }

    fn allow_unconditional_update() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource;

    #[test]
    fn namespace_kind_facts() {
        assert_eq!(Namespace::INFO.api_version(), "v1");
        assert_eq!(Namespace::INFO.plural, "namespaces");
        assert!(!Namespace::INFO.namespaced());
    }

    #[test]
    fn create_sets_phase_and_finalizer() {
        let mut ns = Namespace::default();
        ns.prepare_for_create();
        assert_eq!(ns.status.phase, "Active");
        assert_eq!(ns.spec.finalizers, vec!["kubernetes".to_string()]);
        let v = serde_json::to_value(&ns).unwrap_or_default();
        assert_eq!(v["spec"], serde_json::json!({"finalizers": ["kubernetes"]}));
    }
}
