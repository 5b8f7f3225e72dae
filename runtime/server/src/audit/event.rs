//! The `audit.k8s.io/v1` `Event` and `EventList` as they are written to the
//! backends.

use std::collections::BTreeMap;

use serde::Serialize;

use super::policy::{Level, Stage};
use crate::request::user::UserInfo;

/// The object a resource request is about.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// The resource.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// The namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The object name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The API group.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// The API version.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The subresource.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// The response's status (the bounded fields of a `Status` response, or
/// only the code).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResponseStatus {
    /// Always `{}`.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// `Success` or `Failure` (from a `Status` body).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// The message of a `Status` body.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The reason of a `Status` body.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The details of a `Status` body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
    /// The HTTP status code.
    pub code: u16,
}

/// One audit event.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// `Event`.
    pub kind: &'static str,
    /// `audit.k8s.io/v1`.
    pub api_version: &'static str,
    /// The level the policy chose.
    pub level: Level,
    /// The request's audit ID (the `Audit-Id` response header).
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// The stage.
    pub stage: Stage,
    /// The request URI (path and query).
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// The Kubernetes verb.
    pub verb: String,
    /// The authenticated user.
    pub user: UserInfo,
    /// The user impersonated, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<UserInfo>,
    /// Client and proxy addresses (`X-Forwarded-For`, `X-Real-Ip`, peer).
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    /// The client's `User-Agent`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    /// The object of a resource request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    /// The response status (from `ResponseStarted` on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    /// The request body (level `Request` and up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_object: Option<serde_json::Value>,
    /// The response body (level `RequestResponse`, not for watches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_object: Option<serde_json::Value>,
    /// When the request arrived (microseconds).
    pub request_received_timestamp: String,
    /// When this stage was reached (microseconds).
    pub stage_timestamp: String,
    /// Annotations (`authorization.k8s.io/decision`, ...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A batch of events (what the webhook backend POSTs).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventList<'a> {
    /// `EventList`.
    pub kind: &'static str,
    /// `audit.k8s.io/v1`.
    pub api_version: &'static str,
    /// Always `{}`.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// The events.
    pub items: &'a [Event],
}

impl<'a> EventList<'a> {
    /// A list of `items`.
    pub fn new(items: &'a [Event]) -> Self {
        EventList {
            kind: "EventList",
            api_version: "audit.k8s.io/v1",
            metadata: serde_json::Map::new(),
            items,
        }
    }
}

/// A `metav1.MicroTime` (RFC 3339 with exactly six fractional digits, UTC).
pub fn micro_time(ts: jiff::Timestamp) -> String {
    let secs = jiff::Timestamp::from_second(ts.as_second()).unwrap_or(ts);
    let whole = secs.to_string();
    let base = whole.strip_suffix('Z').unwrap_or(&whole);
    format!("{base}.{:06}Z", ts.subsec_microsecond().max(0))
}

/// Drops `metadata.managedFields` from an object or the items of a list.
pub fn strip_managed_fields(value: &mut serde_json::Value) {
    if let Some(meta) = value
        .get_mut("metadata")
        .and_then(serde_json::Value::as_object_mut)
    {
        meta.remove("managedFields");
    }
    if let Some(items) = value
        .get_mut("items")
        .and_then(serde_json::Value::as_array_mut)
    {
        items.iter_mut().for_each(strip_managed_fields);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micro_time_has_six_digits() {
        let ts: jiff::Timestamp = "2024-01-02T03:04:05.1234567Z".parse().expect("ts");
        assert_eq!(micro_time(ts), "2024-01-02T03:04:05.123456Z");
        let ts: jiff::Timestamp = "2024-01-02T03:04:05Z".parse().expect("ts");
        assert_eq!(micro_time(ts), "2024-01-02T03:04:05.000000Z");
    }
}
