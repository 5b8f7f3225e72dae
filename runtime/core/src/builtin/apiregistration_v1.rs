//! `apiregistration.k8s.io/v1`: APIService, the aggregator's record of who
//! serves a group version — this server itself (`Local`, no `service`) or a
//! backend reached through a Service. Defaulted as kube-aggregator's
//! `SetDefaults_ServiceReference` (port 443), validated as its
//! `ValidateAPIService`, with the status strategy of its registry (a create
//! starts without status; an update keeps the stored status).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Resource;
use crate::builtin::core_v1::ByteString;
use crate::meta::ObjectMeta;
use crate::resource::Strategy;
use crate::scheme::{Group, KindBuilder, Scheme};
use crate::validation::{
    ErrorList, FieldError, is_dns1035_label, is_dns1123_subdomain, is_valid_path_segment_name,
};

/// The group name.
pub const GROUP: &str = "apiregistration.k8s.io";

/// The condition type the availability controllers keep.
pub const AVAILABLE: &str = "Available";

/// Installs the group.
pub fn install(scheme: &mut Scheme) {
    scheme.add_group(
        Group::new(GROUP, &["v1"])
            .model_prefix("io.k8s.kube-aggregator.pkg.apis.apiregistration")
            .title("Kubernetes")
            .kind(
                KindBuilder::<APIService>::new()
                    .version::<APIService>()
                    .build(),
            ),
    );
}

/// APIService represents a server for a particular GroupVersion. Name must
/// be "version.group".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "apiregistration.k8s.io",
    version = "v1",
    cluster,
    categories = ["api-extensions"],
    subresource_status,
    openapi_name = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService"
)]
pub struct APIService {
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Spec contains information for locating and communicating with a
    /// server.
    #[serde(default)]
    pub spec: APIServiceSpec,
    /// Status contains derived information about an API server.
    #[serde(default)]
    pub status: APIServiceStatus,
}

/// APIServiceSpec contains information for locating and communicating with
/// a server. Only https is supported, though you are able to disable
/// certificate verification.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceSpec")]
pub struct APIServiceSpec {
    /// Service is a reference to the service for this API server. It must
    /// communicate on port 443. If the Service is nil, that means the
    /// handling for the API groupversion is handled locally on this server.
    /// The call will simply delegate to the normal handler chain to be
    /// fulfilled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceReference>,
    /// Group is the API group name this server hosts.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Version is the API version this server hosts. For example, "v1".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// InsecureSkipTLSVerify disables TLS certificate verification when
    /// communicating with this server. This is strongly discouraged. You
    /// should use the CABundle instead.
    #[serde(
        default,
        rename = "insecureSkipTLSVerify",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub insecure_skip_tls_verify: bool,
    /// CABundle is a PEM encoded CA bundle which will be used to validate an
    /// API server's serving certificate. If unspecified, system trust roots
    /// on the apiserver are used.
    #[serde(default, skip_serializing_if = "bytes_empty")]
    pub ca_bundle: ByteString,
    /// GroupPriorityMinimum is the priority this group should have at least.
    /// Higher priority means that the group is preferred by clients over
    /// lower priority ones. Note that other versions of this group might
    /// specify even higher GroupPriorityMinimum values such that the whole
    /// group gets a higher priority.
    #[serde(default)]
    pub group_priority_minimum: i32,
    /// VersionPriority controls the ordering of this API version inside of
    /// its group. Must be greater than zero. The primary sort is based on
    /// VersionPriority, ordered highest to lowest (20 before 10). Since
    /// it's inside of a group, the number can be small, probably in the
    /// 10s. In case of equal version priorities, the version string will be
    /// used to compute the order inside a group.
    #[serde(default)]
    pub version_priority: i32,
}

fn bytes_empty(b: &ByteString) -> bool {
    b.0.is_empty()
}

/// ServiceReference holds a reference to Service.legacy.k8s.io.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.ServiceReference")]
pub struct ServiceReference {
    /// Namespace is the namespace of the service.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name is the name of the service.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// If specified, the port on the service that hosting webhook. Default
    /// to 443 for backward compatibility. `port` should be a valid port
    /// number (1-65535, inclusive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// APIServiceStatus contains derived information about an API server.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceStatus")]
pub struct APIServiceStatus {
    /// Current service state of apiService.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<APIServiceCondition>,
}

/// APIServiceCondition describes the state of an APIService at a particular
/// point.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceCondition")]
pub struct APIServiceCondition {
    /// Type is the type of the condition.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Status is the status of the condition. Can be True, False, Unknown.
    #[serde(default)]
    pub status: String,
    /// Last time the condition transitioned from one status to another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// Unique, one-word, CamelCase reason for the condition's last
    /// transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable message indicating details about last transition.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl APIService {
    /// The `Available` condition, if any.
    pub fn available(&self) -> Option<&APIServiceCondition> {
        self.status.conditions.iter().find(|c| c.type_ == AVAILABLE)
    }

    /// Whether the `Available` condition is `True`.
    pub fn is_available(&self) -> bool {
        self.available().is_some_and(|c| c.status == "True")
    }
}

impl Strategy for APIService {
    /// `SetDefaults_ServiceReference`: port 443.
    fn default_fields(&mut self) {
        if let Some(service) = &mut self.spec.service {
            service.port.get_or_insert(443);
        }
    }

    fn validate_create(&self) -> ErrorList {
        validate_api_service(self)
    }

    fn validate_update(&self, _old: &Self) -> ErrorList {
        let mut errs = validate_api_service(self);
        errs.extend(validate_status(self));
        errs
    }

    /// The registry's strategy keeps the stored status on a spec update.
    fn prepare_for_update(&mut self, old: &Self) {
        self.status = old.status.clone();
    }

    /// Upstream's APIService strategy does not track generations.
    fn bump_generation_on_spec_change() -> bool {
        false
    }

    fn table_printer() -> Option<&'static crate::resource::TablePrinter> {
        Some(&super::printers::API_SERVICE)
    }
}

/// `ValidateAPIService`.
pub fn validate_api_service(api: &APIService) -> ErrorList {
    let mut errs = ErrorList::default();
    let spec = &api.spec;
    let required_name = format!("{}.{}", spec.version, spec.group);
    let name = &api.metadata.name;
    if !name.is_empty() {
        let mut msgs = is_valid_path_segment_name(name);
        if msgs.is_empty() && *name != required_name {
            msgs.push(format!(
                "must be `spec.version+\".\"+spec.group`: {required_name:?}"
            ));
        }
        for msg in msgs {
            errs.push(FieldError::invalid("metadata.name", name.as_str(), msg));
        }
    }
    if spec.group.is_empty() && spec.version != "v1" {
        errs.push(FieldError::required(
            "spec.group",
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !spec.group.is_empty() {
        for msg in is_dns1123_subdomain(&spec.group) {
            errs.push(FieldError::invalid("spec.group", spec.group.as_str(), msg));
        }
    }
    for msg in is_dns1035_label(&spec.version) {
        errs.push(FieldError::invalid(
            "spec.version",
            spec.version.as_str(),
            msg,
        ));
    }
    if spec.group_priority_minimum <= 0 || spec.group_priority_minimum > 20000 {
        errs.push(FieldError::invalid(
            "spec.groupPriorityMinimum",
            spec.group_priority_minimum,
            "must be positive and less than 20000",
        ));
    }
    if spec.version_priority <= 0 || spec.version_priority > 1000 {
        errs.push(FieldError::invalid(
            "spec.versionPriority",
            spec.version_priority,
            "must be positive and less than 1000",
        ));
    }
    let Some(service) = &spec.service else {
        if !spec.ca_bundle.0.is_empty() {
            errs.push(FieldError::invalid(
                "spec.caBundle",
                format!("{} bytes", spec.ca_bundle.0.len()),
                "local APIServices may not have a caBundle",
            ));
        }
        if spec.insecure_skip_tls_verify {
            errs.push(FieldError::invalid(
                "spec.insecureSkipTLSVerify",
                true,
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return errs;
    };
    if service.namespace.is_empty() {
        errs.push(FieldError::required("spec.service.namespace", ""));
    }
    if service.name.is_empty() {
        errs.push(FieldError::required("spec.service.name", ""));
    }
    if spec.insecure_skip_tls_verify && !spec.ca_bundle.0.is_empty() {
        errs.push(FieldError::invalid(
            "spec.insecureSkipTLSVerify",
            true,
            "may not be true if caBundle is present",
        ));
    }
    errs
}

/// `ValidateAPIServiceStatus`: condition statuses are True, False or
/// Unknown.
fn validate_status(api: &APIService) -> ErrorList {
    let mut errs = ErrorList::default();
    for (i, condition) in api.status.conditions.iter().enumerate() {
        if !["True", "False", "Unknown"].contains(&condition.status.as_str()) {
            errs.push(FieldError::not_supported(
                format!("status.conditions[{i}].status"),
                condition.status.as_str(),
                &["True", "False", "Unknown"],
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(name: &str, group: &str, version: &str) -> APIService {
        APIService {
            metadata: ObjectMeta {
                name: name.into(),
                ..Default::default()
            },
            spec: APIServiceSpec {
                group: group.into(),
                version: version.into(),
                group_priority_minimum: 1000,
                version_priority: 15,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn messages(errs: &ErrorList) -> Vec<String> {
        errs.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn the_name_is_version_dot_group() {
        assert!(validate_api_service(&api("v1.example.com", "example.com", "v1")).is_empty());
        assert!(validate_api_service(&api("v1.", "", "v1")).is_empty());
        let errs = validate_api_service(&api("v2.example.com", "example.com", "v1"));
        assert_eq!(
            messages(&errs),
            [
                "metadata.name: Invalid value: \"v2.example.com\": must be `spec.version+\".\"+spec.group`: \"v1.example.com\""
            ]
        );
        let errs = validate_api_service(&api("v1beta1.", "", "v1beta1"));
        assert_eq!(
            messages(&errs),
            [
                "spec.group: Required value: only v1 may have an empty group and it better be legacy kube"
            ]
        );
    }

    #[test]
    fn priorities_and_tls_settings_are_checked() {
        let mut a = api("v1.example.com", "example.com", "v1");
        a.spec.group_priority_minimum = 0;
        a.spec.version_priority = 1001;
        a.spec.insecure_skip_tls_verify = true;
        assert_eq!(
            messages(&validate_api_service(&a)),
            [
                "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
                "spec.versionPriority: Invalid value: 1001: must be positive and less than 1000",
                "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify",
            ]
        );
        let mut a = api("v1.example.com", "example.com", "v1");
        a.spec.service = Some(ServiceReference::default());
        a.spec.insecure_skip_tls_verify = true;
        a.spec.ca_bundle = ByteString(b"pem".to_vec());
        assert_eq!(
            messages(&validate_api_service(&a)),
            [
                "spec.service.namespace: Required value",
                "spec.service.name: Required value",
                "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
            ]
        );
    }

    #[test]
    fn the_service_port_defaults_to_443() {
        let mut a = api("v1.example.com", "example.com", "v1");
        a.spec.service = Some(ServiceReference {
            namespace: "ns".into(),
            name: "svc".into(),
            port: None,
        });
        a.default_fields();
        assert_eq!(a.spec.service.and_then(|s| s.port), Some(443));
    }
}
