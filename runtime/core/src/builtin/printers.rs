//! Table printers of the built-in core kinds, as kube-apiserver's
//! hand-written printers (`pkg/printers/internalversion/printers.go`) render
//! them: columns whose cells are computed from the object (a key count, a
//! relative age) rather than read at a JSONPath, which is all a
//! `printcolumn` can do.

use serde_json::{Value, json};

use crate::resource::PrinterColumn;
pub use crate::resource::TablePrinter;

const NAME: PrinterColumn = PrinterColumn {
    name: "Name",
    type_: "string",
    json_path: "",
    priority: 0,
    description: "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    format: "name",
};

const AGE: PrinterColumn = PrinterColumn {
    name: "Age",
    type_: "string",
    json_path: "",
    priority: 0,
    description: "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    format: "",
};

const fn column(name: &'static str, description: &'static str) -> PrinterColumn {
    PrinterColumn {
        name,
        type_: "string",
        json_path: "",
        priority: 0,
        description,
        format: "",
    }
}

/// ConfigMap: NAME, DATA (the key count), AGE.
pub static CONFIG_MAP: TablePrinter = TablePrinter {
    columns: &[
        NAME,
        column(
            "Data",
            "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
        ),
        AGE,
    ],
    cells: |obj| {
        let data = key_count(obj, "data") + key_count(obj, "binaryData");
        vec![name(obj), json!(data), age(obj)]
    },
};

/// Secret: NAME, TYPE, DATA (the key count), AGE.
pub static SECRET: TablePrinter = TablePrinter {
    columns: &[
        NAME,
        column(
            "Type",
            "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
        ),
        column(
            "Data",
            "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
        ),
        AGE,
    ],
    cells: |obj| {
        vec![
            name(obj),
            json!(string_at(obj, &["type"])),
            json!(key_count(obj, "data")),
            age(obj),
        ]
    },
};

/// Namespace: NAME, STATUS (the phase), AGE.
pub static NAMESPACE: TablePrinter = TablePrinter {
    columns: &[NAME, column("Status", "The status of the namespace"), AGE],
    cells: |obj| {
        vec![
            name(obj),
            json!(string_at(obj, &["status", "phase"])),
            age(obj),
        ]
    },
};

/// MutatingWebhookConfiguration and ValidatingWebhookConfiguration: NAME,
/// WEBHOOKS (how many), AGE.
pub static WEBHOOK_CONFIGURATION: TablePrinter = TablePrinter {
    columns: &[
        NAME,
        PrinterColumn {
            name: "Webhooks",
            type_: "integer",
            json_path: "",
            priority: 0,
            description: "Webhooks indicates the number of webhooks registered in this configuration",
            format: "",
        },
        AGE,
    ],
    cells: |obj| {
        let count = obj
            .get("webhooks")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        vec![name(obj), json!(count), age(obj)]
    },
};

/// ValidatingAdmissionPolicy: NAME, VALIDATIONS (how many), PARAMKIND
/// (`<apiVersion>/<kind>` or `<unset>`), AGE.
pub static VALIDATING_ADMISSION_POLICY: TablePrinter = TablePrinter {
    columns: &[
        NAME,
        PrinterColumn {
            name: "Validations",
            type_: "integer",
            json_path: "",
            priority: 0,
            description: "Validations indicates the number of validation rules defined in this configuration",
            format: "",
        },
        column(
            "ParamKind",
            "ParamKind specifies the kind of resources used to parameterize this policy",
        ),
        AGE,
    ],
    cells: |obj| {
        let count = obj
            .pointer("/spec/validations")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        vec![name(obj), json!(count), json!(param_kind(obj)), age(obj)]
    },
};

/// MutatingAdmissionPolicy: NAME, MUTATIONS (how many), PARAMKIND, AGE.
pub static MUTATING_ADMISSION_POLICY: TablePrinter = TablePrinter {
    columns: &[
        NAME,
        PrinterColumn {
            name: "Mutations",
            type_: "integer",
            json_path: "",
            priority: 0,
            description: "Mutation indicates the number of mutations rules defined in this configuration",
            format: "",
        },
        column(
            "ParamKind",
            "ParamKind specifies the kind of resources used to parameterize this policy",
        ),
        AGE,
    ],
    cells: |obj| {
        let count = obj
            .pointer("/spec/mutations")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        vec![name(obj), json!(count), json!(param_kind(obj)), age(obj)]
    },
};

/// A policy's `paramKind` as `<apiVersion>/<kind>`, or `<unset>`.
fn param_kind(obj: &Value) -> String {
    match obj.pointer("/spec/paramKind") {
        Some(pk) if !pk.is_null() => format!(
            "{}/{}",
            string_at(pk, &["apiVersion"]),
            string_at(pk, &["kind"])
        ),
        _ => "<unset>".to_string(),
    }
}

/// ValidatingAdmissionPolicyBinding: NAME, POLICYNAME, PARAMREF
/// (`<namespace>/<name>`, `*/<name>` without a namespace, the selector, or
/// `<unset>`), AGE.
pub static VALIDATING_ADMISSION_POLICY_BINDING: TablePrinter = TablePrinter {
    columns: BINDING_COLUMNS,
    cells: binding_cells,
};

/// The columns of both policy bindings.
const BINDING_COLUMNS: &[PrinterColumn] = &[
    NAME,
    column(
        "PolicyName",
        "PolicyName indicates the policy definition which the policy binding binded to",
    ),
    column(
        "ParamRef",
        "ParamRef indicates the param resource which sets the configration param",
    ),
    AGE,
];

/// MutatingAdmissionPolicyBinding: the columns of
/// [`VALIDATING_ADMISSION_POLICY_BINDING`].
pub static MUTATING_ADMISSION_POLICY_BINDING: TablePrinter = TablePrinter {
    columns: BINDING_COLUMNS,
    cells: binding_cells,
};

/// NAME, POLICYNAME, PARAMREF, AGE of a policy binding.
fn binding_cells(obj: &Value) -> Vec<Value> {
    {
        let param = match obj.pointer("/spec/paramRef") {
            Some(pr) if !pr.is_null() => {
                let name = string_at(pr, &["name"]);
                let namespace = string_at(pr, &["namespace"]);
                match pr.get("selector") {
                    _ if !name.is_empty() && !namespace.is_empty() => format!("{namespace}/{name}"),
                    _ if !name.is_empty() => format!("*/{name}"),
                    Some(s) if !s.is_null() => selector_string(s),
                    _ => "<unset>".to_string(),
                }
            }
            _ => "<unset>".to_string(),
        };
        vec![
            name(obj),
            json!(string_at(obj, &["spec", "policyName"])),
            json!(param),
            age(obj),
        ]
    }
}

/// `labels.Selector.String()` of a LabelSelector: `k=v`, `k in (a,b)`,
/// `k notin (a,b)`, `k`, `!k`, sorted by key and comma separated.
fn selector_string(s: &Value) -> String {
    let mut parts: Vec<(String, String)> = Vec::new();
    if let Some(labels) = s.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in labels {
            parts.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
        }
    }
    if let Some(exprs) = s.get("matchExpressions").and_then(Value::as_array) {
        for e in exprs {
            let key = string_at(e, &["key"]).to_string();
            let mut values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            values.sort_unstable();
            let text = match string_at(e, &["operator"]) {
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" => key.clone(),
                "DoesNotExist" => format!("!{key}"),
                _ => continue,
            };
            parts.push((key, text));
        }
    }
    parts.sort();
    let joined: Vec<String> = parts.into_iter().map(|(_, t)| t).collect();
    if joined.is_empty() {
        "<none>".to_string()
    } else {
        joined.join(",")
    }
}

/// Service: NAME, TYPE, CLUSTER-IP, EXTERNAL-IP, PORT(S), AGE and (wide)
/// SELECTOR, as upstream's `printService`.
pub static SERVICE: TablePrinter = TablePrinter {
    columns: &[
        NAME,
        column(
            "Type",
            "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer.",
        ),
        column(
            "Cluster-IP",
            "clusterIP is the IP address of the service and is usually assigned randomly.",
        ),
        column(
            "External-IP",
            "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
        ),
        column(
            "Port(s)",
            "The list of ports that are exposed by this service.",
        ),
        AGE,
        PrinterColumn {
            name: "Selector",
            type_: "string",
            json_path: "",
            priority: 1,
            description: "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify.",
            format: "",
        },
    ],
    cells: |obj| {
        let spec = obj.get("spec").unwrap_or(&Value::Null);
        let type_ = string_at(spec, &["type"]);
        let cluster_ip = spec
            .get("clusterIPs")
            .and_then(Value::as_array)
            .and_then(|ips| ips.first())
            .and_then(Value::as_str)
            .unwrap_or("<none>");
        let ports: Vec<String> = spec
            .get("ports")
            .and_then(Value::as_array)
            .map(|ports| {
                ports
                    .iter()
                    .map(|p| {
                        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                        let protocol = string_at(p, &["protocol"]);
                        match p.get("nodePort").and_then(Value::as_i64) {
                            Some(node) if node > 0 => format!("{port}:{node}/{protocol}"),
                            _ => format!("{port}/{protocol}"),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let ports = if ports.is_empty() {
            "<none>".to_string()
        } else {
            ports.join(",")
        };
        let selector = spec
            .get("selector")
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
            .map_or_else(
                || "<none>".to_string(),
                |m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(",")
                },
            );
        vec![
            name(obj),
            json!(type_),
            json!(cluster_ip),
            json!(service_external_ip(obj, type_)),
            json!(ports),
            age(obj),
            json!(selector),
        ]
    },
};

/// `getServiceExternalIP` (there are no `externalIPs` here): the load
/// balancer's ingress points, `<pending>` without one, the external name.
fn service_external_ip(obj: &Value, type_: &str) -> String {
    match type_ {
        "ClusterIP" | "NodePort" => "<none>".into(),
        "LoadBalancer" => {
            // `loadBalancerStatusStringer`, wide (the server prints every
            // column): the sorted, distinct IPs or hostnames.
            let ingress: std::collections::BTreeSet<&str> = obj
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|i| {
                    let ip = string_at(i, &["ip"]);
                    let host = string_at(i, &["hostname"]);
                    if !ip.is_empty() {
                        Some(ip)
                    } else if !host.is_empty() {
                        Some(host)
                    } else {
                        None
                    }
                })
                .collect();
            if ingress.is_empty() {
                "<pending>".into()
            } else {
                ingress.into_iter().collect::<Vec<_>>().join(",")
            }
        }
        "ExternalName" => string_at(obj, &["spec", "externalName"]).into(),
        _ => "<unknown>".into(),
    }
}

/// Endpoints: NAME, ENDPOINTS (up to three `ip:port`, then `+ N more...`),
/// AGE, as upstream's `printEndpoints` / `formatEndpoints`.
pub static ENDPOINTS: TablePrinter = TablePrinter {
    columns: &[
        NAME,
        column(
            "Endpoints",
            "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.",
        ),
        AGE,
    ],
    cells: |obj| vec![name(obj), json!(format_endpoints(obj)), age(obj)],
};

fn format_endpoints(obj: &Value) -> String {
    const MAX: usize = 3;
    let subsets = obj
        .get("subsets")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if subsets.is_empty() {
        return "<none>".into();
    }
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0;
    let array = |v: &Value, key: &str| -> Vec<Value> {
        v.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for subset in subsets {
        let addresses = array(subset, "addresses");
        let ports = array(subset, "ports");
        if ports.is_empty() {
            // Headless services may have no ports.
            count += addresses.len();
            for a in &addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(string_at(a, &["ip"]).to_string());
            }
            continue;
        }
        for port in &ports {
            count += addresses.len();
            let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
            for a in &addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                let ip = string_at(a, &["ip"]);
                list.push(if ip.contains(':') {
                    format!("[{ip}]:{number}")
                } else {
                    format!("{ip}:{number}")
                });
            }
        }
    }
    let joined = list.join(",");
    if more {
        format!("{joined} + {} more...", count - MAX)
    } else {
        joined
    }
}

/// EndpointSlice: NAME, ADDRESSTYPE, PORTS, ENDPOINTS, AGE, as upstream's
/// `printEndpointSlice`.
pub static ENDPOINT_SLICE: TablePrinter = TablePrinter {
    columns: &[
        NAME,
        column(
            "AddressType",
            "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.",
        ),
        column(
            "Ports",
            "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports.",
        ),
        column(
            "Endpoints",
            "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.",
        ),
        AGE,
    ],
    cells: |obj| {
        let ports: Vec<String> = obj
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|p| match p.get("port").and_then(Value::as_i64) {
                Some(n) => n.to_string(),
                None => match p.get("name").and_then(Value::as_str) {
                    Some(name) => name.to_string(),
                    None => "<unset>".to_string(),
                },
            })
            .collect();
        let addresses: Vec<String> = obj
            .get("endpoints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .flat_map(|e| {
                e.get("addresses")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .map(|a| a.as_str().unwrap_or_default().to_string())
            .collect();
        vec![
            name(obj),
            json!(string_at(obj, &["addressType"])),
            json!(list_with_more(&ports)),
            json!(list_with_more(&addresses)),
            age(obj),
        ]
    },
};

/// `listWithMoreString` over the whole list: the first three, `+ N
/// more...`, `<unset>` when empty.
fn list_with_more(items: &[String]) -> String {
    const MAX: usize = 3;
    let joined = items
        .iter()
        .take(MAX)
        .cloned()
        .collect::<Vec<_>>()
        .join(",");
    if items.len() > MAX {
        format!("{joined} + {} more...", items.len() - MAX)
    } else if joined.is_empty() {
        "<unset>".into()
    } else {
        joined
    }
}

/// APIService: NAME, SERVICE (`<namespace>/<name>` or `Local`), AVAILABLE
/// (the `Available` condition's status, with its reason when not `True`),
/// AGE, as kube-aggregator's table convertor renders them.
pub static API_SERVICE: TablePrinter = TablePrinter {
    columns: &[
        NAME,
        column(
            "Service",
            "The reference to the service that hosts this API endpoint.",
        ),
        column("Available", "Whether this service is available."),
        AGE,
    ],
    cells: |obj| {
        let service = match obj.pointer("/spec/service") {
            Some(s) if s.is_object() => format!(
                "{}/{}",
                string_at(s, &["namespace"]),
                string_at(s, &["name"])
            ),
            _ => "Local".to_string(),
        };
        let available = obj
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| string_at(c, &["type"]) == "Available")
            .map_or_else(
                || "Unknown".to_string(),
                |c| {
                    let status = string_at(c, &["status"]);
                    let reason = string_at(c, &["reason"]);
                    if status == "True" || reason.is_empty() {
                        status.to_string()
                    } else {
                        format!("{status} ({reason})")
                    }
                },
            );
        vec![name(obj), json!(service), json!(available), age(obj)]
    },
};

fn string_at<'a>(obj: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(obj, |v, k| v.get(k))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn name(obj: &Value) -> Value {
    json!(string_at(obj, &["metadata", "name"]))
}

fn key_count(obj: &Value, field: &str) -> usize {
    obj.get(field)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len())
}

/// `translateTimestampSince`: the object's age, `<unknown>` without a
/// creation timestamp.
fn age(obj: &Value) -> Value {
    let created = string_at(obj, &["metadata", "creationTimestamp"]);
    let Ok(created) = created.parse::<jiff::Timestamp>() else {
        return json!("<unknown>");
    };
    let seconds = jiff::Timestamp::now().as_second() - created.as_second();
    json!(human_duration(seconds))
}

/// apimachinery's `duration.HumanDuration` of a whole number of seconds:
/// two units of precision while the larger one is small, one afterwards.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        let cases = [
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (49 * 3600, "2d1h"),
            (8 * 86400, "8d"),
            (2 * 365 * 86400, "2y"),
            (2 * 365 * 86400 + 86400, "2y1d"),
            (8 * 365 * 86400, "8y"),
        ];
        for (seconds, want) in cases {
            assert_eq!(human_duration(seconds), want, "{seconds}s");
        }
    }

    #[test]
    fn config_map_counts_data_and_binary_data() {
        let obj = json!({
            "metadata": {"name": "c", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "data": {"a": "1", "b": "2"},
            "binaryData": {"c": "AA=="},
        });
        let cells = (CONFIG_MAP.cells)(&obj);
        assert_eq!(cells[0], "c");
        assert_eq!(cells[1], 3);
        assert!(
            cells[2]
                .as_str()
                .is_some_and(|s| s.ends_with('y') || s.contains('y'))
        );
        assert_eq!((CONFIG_MAP.cells)(&json!({}))[2], "<unknown>");
    }
}
