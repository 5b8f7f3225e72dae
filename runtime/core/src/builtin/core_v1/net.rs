//! The network checks Service, Endpoints and EndpointSlice share, worded
//! as upstream's `k8s.io/apimachinery/pkg/util/validation` (`IsValidIP`,
//! `IsValidPortNum`, `IsValidPortName`) and
//! `pkg/apis/core/validation` (`ValidateNonSpecialIP`) word them.

use std::net::IpAddr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{ErrorList, FieldError, FieldPath};

/// The protocols a port may name (`supportedPortProtocols`, sorted).
pub const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

/// The default port protocol.
pub const PROTOCOL_TCP: &str = "TCP";

/// `IsValidPortNum`: the detail of a port outside 1-65535.
pub fn port_num_errors(port: i64) -> Vec<String> {
    if (1..=65535).contains(&port) {
        Vec::new()
    } else {
        vec!["must be between 1 and 65535, inclusive".into()]
    }
}

/// `IsValidPortName`: an IANA service name (at most 15 characters of
/// `a-z`, `0-9` and `-`, with a letter, no `--`, no hyphen at either end).
pub fn port_name_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push("must be no more than 15 characters".into());
    }
    let b = name.as_bytes();
    if b.is_empty()
        || !b
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !b.iter().any(u8::is_ascii_lowercase) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if b.first() == Some(&b'-') || b.last() == Some(&b'-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

/// Parses an IP address as Go's `net.ParseIP` accepts it (dotted quads
/// and IPv6 text).
pub fn parse_ip(value: &str) -> Option<IpAddr> {
    value.parse::<IpAddr>().ok()
}

/// `IsValidIP(fldPath, value)`.
pub fn validate_ip(errs: &mut ErrorList, path: &FieldPath, value: &str) {
    if parse_ip(value).is_none() {
        errs.push(FieldError::invalid(
            path.as_str(),
            value,
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ));
    }
}

/// `ValidateNonSpecialIP`: not unspecified, loopback or link-local (the
/// addresses that make no sense as an endpoint).
pub fn validate_non_special_ip(errs: &mut ErrorList, path: &FieldPath, value: &str) {
    let Some(ip) = parse_ip(value) else {
        errs.push(FieldError::invalid(
            path.as_str(),
            value,
            "must be a valid IP address",
        ));
        return;
    };
    let (unspecified, loopback, link_local, link_local_multicast) = match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            (
                v4.is_unspecified(),
                v4.is_loopback(),
                v4.is_link_local(),
                o[0] == 224 && o[1] == 0 && o[2] == 0,
            )
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            // An IPv4-mapped address is judged as the IPv4 address (Go's
            // `net.IP` holds both forms alike).
            if let Some(v4) = v6.to_ipv4_mapped() {
                let o = v4.octets();
                (
                    v4.is_unspecified(),
                    v4.is_loopback(),
                    v4.is_link_local(),
                    o[0] == 224 && o[1] == 0 && o[2] == 0,
                )
            } else {
                (
                    v6.is_unspecified(),
                    v6.is_loopback(),
                    s[0] & 0xffc0 == 0xfe80,
                    s[0] & 0xff0f == 0xff02,
                )
            }
        }
    };
    if unspecified {
        errs.push(FieldError::invalid(
            path.as_str(),
            value,
            format!("may not be unspecified ({value})"),
        ));
    }
    if loopback {
        errs.push(FieldError::invalid(
            path.as_str(),
            value,
            "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        ));
    }
    if link_local {
        errs.push(FieldError::invalid(
            path.as_str(),
            value,
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ));
    }
    if link_local_multicast {
        errs.push(FieldError::invalid(
            path.as_str(),
            value,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
}

/// `ValidateDNS1123Label`: one `Invalid value` per failed check.
pub fn validate_dns1123_label(errs: &mut ErrorList, path: &FieldPath, value: &str) {
    for msg in crate::validation::is_dns1123_label(value) {
        errs.push(FieldError::invalid(path.as_str(), value, msg));
    }
}

/// `ValidateQualifiedName` (an `appProtocol`).
pub fn validate_qualified_name(errs: &mut ErrorList, path: &FieldPath, value: &str) {
    for msg in crate::validation::is_qualified_name(value) {
        errs.push(FieldError::invalid(path.as_str(), value, msg));
    }
}

/// `IsValidIPv4Address` / `IsValidIPv6Address`.
pub fn validate_ip_of_family(errs: &mut ErrorList, path: &FieldPath, value: &str, v6: bool) {
    let ok = match parse_ip(value) {
        Some(IpAddr::V4(_)) => !v6,
        Some(IpAddr::V6(a)) => v6 && a.to_ipv4_mapped().is_none(),
        None => false,
    };
    if !ok {
        let detail = if v6 {
            "must be a valid IPv6 address"
        } else {
            "must be a valid IPv4 address"
        };
        errs.push(FieldError::invalid(path.as_str(), value, detail));
    }
}

/// ObjectReference contains enough information to let you inspect or
/// modify the referred object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "io.k8s.api.core.v1.ObjectReference")]
pub struct ObjectReference {
    /// Kind of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Namespace of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// UID of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// API version of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Specific resourceVersion to which this reference is made, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// If referring to a piece of an object instead of an entire object,
    /// this string should contain a valid JSON/Go field access statement,
    /// such as desiredState.manifest.containers[2].
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field_path: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected details from apimachinery's `IsValidPortName` and
    /// `IsValidPortNum` (`pkg/util/validation/validation.go`).
    #[test]
    fn ports() {
        assert!(port_name_errors("http").is_empty());
        assert_eq!(
            port_name_errors("-a--"),
            vec![
                "must not contain consecutive hyphens",
                "must not begin or end with a hyphen"
            ]
        );
        assert_eq!(
            port_name_errors("123"),
            vec!["must contain at least one letter (a-z)"]
        );
        assert_eq!(
            port_num_errors(0),
            vec!["must be between 1 and 65535, inclusive"]
        );
        assert!(port_num_errors(65535).is_empty());
    }

    /// `ValidateNonSpecialIP` in `pkg/apis/core/validation/validation.go`.
    #[test]
    fn special_ips() {
        let p = FieldPath::new("ip");
        let msgs = |ip: &str| {
            let mut errs = ErrorList::default();
            validate_non_special_ip(&mut errs, &p, ip);
            errs.iter().map(|e| e.detail.clone()).collect::<Vec<_>>()
        };
        assert!(msgs("10.1.2.3").is_empty());
        assert_eq!(msgs("0.0.0.0"), vec!["may not be unspecified (0.0.0.0)"]);
        assert_eq!(
            msgs("127.0.0.1"),
            vec!["may not be in the loopback range (127.0.0.0/8, ::1/128)"]
        );
        assert_eq!(
            msgs("fe80::1"),
            vec!["may not be in the link-local range (169.254.0.0/16, fe80::/10)"]
        );
        assert_eq!(
            msgs("224.0.0.1"),
            vec!["may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"]
        );
    }
}
