//! `coordination.k8s.io/v1`: Lease, a lightweight lock or heartbeat. The
//! server keeps its own identity lease in `kube-system`
//! (the server's `controllers::identity_lease`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Resource;
use crate::meta::ObjectMeta;
use crate::resource::Strategy;
use crate::scheme::{Group, KindBuilder, Scheme};
use crate::validation::{self, ErrorList, FieldError};

/// The group name.
pub const GROUP: &str = "coordination.k8s.io";

/// Installs the group.
pub fn install(scheme: &mut Scheme) {
    scheme.add_group(
        Group::new(GROUP, &["v1"])
            .model_prefix("io.k8s.api.coordination")
            .title("Kubernetes")
            .kind(KindBuilder::<Lease>::new().version::<Lease>().build()),
    );
}

/// Lease defines a lease concept.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema, Resource)]
#[serde(rename_all = "camelCase")]
#[resource(
    group = "coordination.k8s.io",
    version = "v1",
    namespaced,
    openapi_name = "io.k8s.api.coordination.v1.Lease"
)]
pub struct Lease {
    /// More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// spec contains the specification of the Lease.
    #[serde(default)]
    pub spec: LeaseSpec,
}

/// LeaseSpec is a specification of a Lease.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaseSpec {
    /// holderIdentity contains the identity of the holder of a current lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder_identity: Option<String>,
    /// leaseDurationSeconds is a duration that candidates for a lease need
    /// to wait to force acquire it. This is measured against the time of
    /// last observed renewTime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration_seconds: Option<i32>,
    /// acquireTime is a time when the current lease was acquired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<MicroTime>")]
    pub acquire_time: Option<String>,
    /// renewTime is a time when the current holder of a lease has last
    /// updated the lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<MicroTime>")]
    pub renew_time: Option<String>,
    /// leaseTransitions is the number of transitions of a lease between
    /// holders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_transitions: Option<i32>,
    /// Strategy indicates the strategy for picking the leader for
    /// coordinated leader election.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// PreferredHolder signals to a lease holder that the lease has a more
    /// optimal holder and should be given up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_holder: Option<String>,
}

/// The schema of `metav1.MicroTime` (the fields hold its RFC 3339 text).
struct MicroTime;

impl JsonSchema for MicroTime {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "MicroTime is version of Time with microsecond level precision.",
            "type": "string",
            "format": "date-time",
        })
    }
}

/// Formats a time as a `MicroTime` (RFC 3339, microseconds, UTC).
pub fn micro_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

impl Lease {
    /// `ValidateLease`: name, non-negative numbers, time formats.
    fn validate_fields(&self) -> ErrorList {
        let mut errs = ErrorList::default();
        if !self.metadata.name.is_empty() {
            for msg in validation::is_dns1123_subdomain(&self.metadata.name) {
                errs.push(FieldError::invalid(
                    "metadata.name",
                    self.metadata.name.clone(),
                    msg,
                ));
            }
        }
        if let Some(d) = self.spec.lease_duration_seconds
            && d <= 0
        {
            errs.push(FieldError::invalid(
                "spec.leaseDurationSeconds",
                d.to_string(),
                "must be greater than 0",
            ));
        }
        if let Some(t) = self.spec.lease_transitions
            && t < 0
        {
            errs.push(FieldError::invalid(
                "spec.leaseTransitions",
                t.to_string(),
                "must be greater than or equal to 0",
            ));
        }
        for (field, value) in [
            ("spec.acquireTime", &self.spec.acquire_time),
            ("spec.renewTime", &self.spec.renew_time),
        ] {
            if let Some(v) = value
                && v.parse::<jiff::Timestamp>().is_err()
            {
                errs.push(FieldError::invalid(
                    field,
                    v.clone(),
                    "must be an RFC 3339 time",
                ));
            }
        }
        errs
    }
}

impl Strategy for Lease {
    fn validate_create(&self) -> ErrorList {
        self.validate_fields()
    }

    fn validate_update(&self, _old: &Self) -> ErrorList {
        self.validate_fields()
    }

    fn allow_unconditional_update() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Resource as _;
    use serde_json::json;

    #[test]
    fn facts_and_validation() {
        assert_eq!(Lease::INFO.plural, "leases");
        assert!(Lease::INFO.namespaced());
        let l: Lease = serde_json::from_value(json!({
            "metadata": {"name": "l"},
            "spec": {"leaseDurationSeconds": 0, "renewTime": "nope", "holderIdentity": "x"}
        }))
        .unwrap_or_default();
        let errs = l.validate_create();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.leaseDurationSeconds", "spec.renewTime"]);
        let t = micro_time(jiff::Timestamp::from_second(0).unwrap_or_default());
        assert_eq!(t, "1970-01-01T00:00:00.000000Z");
    }
}
