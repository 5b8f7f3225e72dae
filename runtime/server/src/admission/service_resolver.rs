//! Where to dial a Service reference (`{namespace, name, port}` of a
//! webhook's `clientConfig.service`, later an APIService's), as
//! kube-apiserver's webhook service resolver does with endpoint routing
//! (`--enable-aggregator-routing`; `k8s.io/apiserver/pkg/util/proxy`
//! `ResolveEndpoint` and `ResolveCluster`), reading through the admission
//! [`Lookup`] (the watch cache):
//!
//! - `type: ExternalName`: `<externalName>:<port>`;
//! - otherwise the Service port whose `port` is the requested one, then a
//!   ready address of the Service's Endpoints (or, without an Endpoints
//!   object, of its EndpointSlices, labelled `kubernetes.io/service-name`)
//!   on the endpoint port of the same name, picked at random;
//! - with neither Endpoints nor EndpointSlices, the cluster IP and the
//!   Service port (there is no proxy here, so that address only answers
//!   when something outside routes it).
//!
//! The TLS server name is always `<name>.<namespace>.svc`, whatever
//! address is dialled.

use std::fmt;

use apiforge_core::builtin::core_v1::{
    CLUSTER_IP_NONE, Endpoints, Service, ServicePort, TYPE_CLUSTER_IP, TYPE_EXTERNAL_NAME,
    TYPE_LOAD_BALANCER, TYPE_NODE_PORT,
};
use apiforge_core::builtin::discovery_v1::{EndpointSlice, LABEL_SERVICE_NAME};
use apiforge_core::meta::Status;
use rand::Rng;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Lookup;
use crate::error::ApiError;

/// Where a Service reference leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedService {
    /// `host:port` to dial (IPv6 hosts in brackets).
    pub host_port: String,
    /// The name the serving certificate must carry:
    /// `<name>.<namespace>.svc`.
    pub server_name: String,
}

/// Why a Service reference resolves to nothing. `code` is the HTTP status
/// of upstream's error (404 for a missing Service or Endpoints, 503 for a
/// missing port or no ready endpoint, 500 for the plain errors);
/// `message` is upstream's wording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolveError {
    /// The HTTP status of the error.
    pub code: u16,
    /// The message, e.g. `service "x" not found`.
    pub message: String,
}

impl ResolveError {
    fn not_found(resource: &str, name: &str) -> Self {
        ResolveError {
            code: 404,
            message: format!("{resource} \"{name}\" not found"),
        }
    }

    fn unavailable(message: String) -> Self {
        ResolveError { code: 503, message }
    }

    fn plain(message: String) -> Self {
        ResolveError { code: 500, message }
    }

    fn no_endpoints(name: &str) -> Self {
        Self::unavailable(format!("no endpoints available for service \"{name}\""))
    }
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ResolveError {}

impl From<ResolveError> for ApiError {
    fn from(e: ResolveError) -> Self {
        let status = match e.code {
            404 => Status::failure(404, "NotFound", e.message),
            503 => Status::unavailable(e.message),
            _ => Status::internal(e.message),
        };
        ApiError::from(status)
    }
}

impl From<ApiError> for ResolveError {
    fn from(e: ApiError) -> Self {
        ResolveError {
            code: e.code(),
            message: e.0.message,
        }
    }
}

/// The TLS server name of a Service: `<name>.<namespace>.svc`.
pub fn service_server_name(namespace: &str, name: &str) -> String {
    format!("{name}.{namespace}.svc")
}

/// Resolves the Service `namespace`/`name` on `port` to the address to
/// dial and the name to verify (see the module documentation).
pub async fn resolve_service(
    lookup: &dyn Lookup,
    namespace: &str,
    name: &str,
    port: i32,
) -> Result<ResolvedService, ResolveError> {
    let server_name = service_server_name(namespace, name);
    let service: Service = get(lookup, "", "v1", "services", namespace, name)
        .await?
        .ok_or_else(|| ResolveError::not_found("service", name))?;
    let spec = &service.spec;
    if spec.type_ == TYPE_EXTERNAL_NAME {
        return Ok(ResolvedService {
            host_port: join_host_port(&spec.external_name, port),
            server_name,
        });
    }
    if ![TYPE_CLUSTER_IP, TYPE_LOAD_BALANCER, TYPE_NODE_PORT].contains(&spec.type_.as_str()) {
        return Err(ResolveError::plain(format!(
            "unsupported service type \"{}\"",
            spec.type_
        )));
    }
    // `findServicePort`.
    let service_port = spec.ports.iter().find(|p| p.port == port).ok_or_else(|| {
        ResolveError::unavailable(format!(
            "no service port {port} found for service \"{name}\""
        ))
    })?;

    let candidates = match get::<Endpoints>(lookup, "", "v1", "endpoints", namespace, name).await? {
        Some(endpoints) => {
            if endpoints.subsets.is_empty() {
                return Err(ResolveError::no_endpoints(name));
            }
            from_endpoints(&endpoints, service_port)
        }
        None => match slices_of(lookup, namespace, name).await? {
            Some(slices) if !slices.is_empty() => from_slices(&slices, service_port),
            _ => {
                // `ResolveCluster`: no endpoints objects at all.
                return match spec.cluster_ip.as_str() {
                    CLUSTER_IP_NONE => Err(ResolveError::plain(
                        "cannot route to service with ClusterIP \"None\"".into(),
                    )),
                    "" => Err(ResolveError::no_endpoints(name)),
                    ip => Ok(ResolvedService {
                        host_port: join_host_port(ip, service_port.port),
                        server_name,
                    }),
                };
            }
        },
    };
    if candidates.is_empty() {
        return Err(ResolveError::no_endpoints(name));
    }
    let pick = rand::rng().random_range(0..candidates.len());
    Ok(ResolvedService {
        host_port: candidates[pick].clone(),
        server_name,
    })
}

/// Resolves the Service `namespace`/`name` on `port` as upstream's
/// `ResolveCluster` does (kube-aggregator without
/// `--enable-aggregator-routing`): `type: ExternalName` to
/// `<externalName>:<port>`, any other type to its cluster IP and the
/// Service port.
pub async fn resolve_cluster(
    lookup: &dyn Lookup,
    namespace: &str,
    name: &str,
    port: i32,
) -> Result<ResolvedService, ResolveError> {
    let server_name = service_server_name(namespace, name);
    let service: Service = get(lookup, "", "v1", "services", namespace, name)
        .await?
        .ok_or_else(|| ResolveError::not_found("service", name))?;
    let spec = &service.spec;
    if spec.type_ == TYPE_EXTERNAL_NAME {
        return Ok(ResolvedService {
            host_port: join_host_port(&spec.external_name, port),
            server_name,
        });
    }
    if ![TYPE_CLUSTER_IP, TYPE_LOAD_BALANCER, TYPE_NODE_PORT].contains(&spec.type_.as_str()) {
        return Err(ResolveError::plain(format!(
            "unsupported service type \"{}\"",
            spec.type_
        )));
    }
    if spec.cluster_ip.is_empty() || spec.cluster_ip == CLUSTER_IP_NONE {
        return Err(ResolveError::plain(format!(
            "cannot route to service with ClusterIP \"{}\"",
            spec.cluster_ip
        )));
    }
    let service_port = spec.ports.iter().find(|p| p.port == port).ok_or_else(|| {
        ResolveError::unavailable(format!(
            "no service port {port} found for service \"{name}\""
        ))
    })?;
    Ok(ResolvedService {
        host_port: join_host_port(&spec.cluster_ip, service_port.port),
        server_name,
    })
}

/// The ready addresses of the subsets that carry the Service port's name,
/// on that endpoint port.
fn from_endpoints(endpoints: &Endpoints, service_port: &ServicePort) -> Vec<String> {
    let mut out = Vec::new();
    for subset in &endpoints.subsets {
        for port in subset.ports.iter().filter(|p| p.name == service_port.name) {
            out.extend(
                subset
                    .addresses
                    .iter()
                    .map(|a| join_host_port(&a.ip, port.port)),
            );
        }
    }
    out
}

/// The ready endpoints (an unset `ready` reads as ready) of the slices,
/// on the slice port named as the Service port.
fn from_slices(slices: &[EndpointSlice], service_port: &ServicePort) -> Vec<String> {
    let mut out = Vec::new();
    for slice in slices {
        let ports = slice.ports.iter().filter(|p| {
            p.name.as_deref().unwrap_or_default() == service_port.name
                && p.protocol.as_deref().unwrap_or("TCP") == service_port.protocol
        });
        for port in ports {
            let Some(number) = port.port else {
                continue;
            };
            for endpoint in &slice.endpoints {
                if endpoint.conditions.ready == Some(false) {
                    continue;
                }
                if let Some(address) = endpoint.addresses.first() {
                    out.push(join_host_port(address, number));
                }
            }
        }
    }
    out
}

/// The EndpointSlices labelled with the Service's name (`None` when the
/// resource is not served).
/// The EndpointSlices labelled as the Service `namespace`/`name`'s
/// (`None` when EndpointSlices are not served).
pub(crate) async fn slices_of(
    lookup: &dyn Lookup,
    namespace: &str,
    name: &str,
) -> Result<Option<Vec<EndpointSlice>>, ResolveError> {
    let Some(items) = lookup
        .list("discovery.k8s.io", "v1", "endpointslices", Some(namespace))
        .await?
    else {
        return Ok(None);
    };
    let labelled = items.into_iter().filter(|item| {
        item.pointer("/metadata/labels")
            .and_then(|l| l.get(LABEL_SERVICE_NAME))
            .and_then(Value::as_str)
            == Some(name)
    });
    labelled
        .map(decode::<EndpointSlice>)
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// One object, typed (`None` when it does not exist).
pub(crate) async fn get<T: DeserializeOwned>(
    lookup: &dyn Lookup,
    group: &str,
    version: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<T>, ResolveError> {
    match lookup
        .get(group, version, resource, namespace, name, false)
        .await?
    {
        Some(value) => decode(value).map(Some),
        None => Ok(None),
    }
}

fn decode<T: DeserializeOwned>(value: Value) -> Result<T, ResolveError> {
    serde_json::from_value(value).map_err(|e| ResolveError::plain(e.to_string()))
}

/// Go's `net.JoinHostPort`: IPv6 hosts in brackets.
fn join_host_port(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use super::*;
    use crate::admission::async_trait;
    use crate::error::ApiResult;

    /// Objects by `(resource, namespace, name)`.
    #[derive(Default)]
    struct Objects(HashMap<(String, String, String), Value>);

    impl Objects {
        fn with(mut self, resource: &str, obj: Value) -> Self {
            let ns = obj["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
            self.0.insert((resource.into(), ns, name), obj);
            self
        }
    }

    #[async_trait]
    impl Lookup for Objects {
        fn serves(&self, _: &str, _: &str, _: &str) -> bool {
            true
        }

        async fn get(
            &self,
            _: &str,
            _: &str,
            resource: &str,
            namespace: &str,
            name: &str,
            _: bool,
        ) -> ApiResult<Option<Value>> {
            Ok(self
                .0
                .get(&(resource.into(), namespace.into(), name.into()))
                .cloned())
        }

        async fn list(
            &self,
            _: &str,
            _: &str,
            resource: &str,
            namespace: Option<&str>,
        ) -> ApiResult<Option<Vec<Value>>> {
            Ok(Some(
                self.0
                    .iter()
                    .filter(|((r, ns, _), _)| r == resource && namespace.is_none_or(|n| n == ns))
                    .map(|(_, v)| v.clone())
                    .collect(),
            ))
        }
    }

    fn svc(spec: Value) -> Value {
        json!({"metadata": {"name": "hook", "namespace": "sys"}, "spec": spec})
    }

    fn https_port() -> Value {
        json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8443}])
    }

    async fn resolve(objects: &Objects, port: i32) -> Result<ResolvedService, ResolveError> {
        resolve_service(objects, "sys", "hook", port).await
    }

    #[tokio::test]
    async fn missing_service_and_port() {
        let err = resolve(&Objects::default(), 443).await.unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (404, "service \"hook\" not found")
        );
        let objects = Objects::default().with(
            "services",
            svc(json!({"type": "ClusterIP", "clusterIP": "10.0.0.9", "ports": https_port()})),
        );
        let err = resolve(&objects, 8443).await.unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (503, "no service port 8443 found for service \"hook\"")
        );
    }

    #[tokio::test]
    async fn external_name_and_cluster_ip() {
        let objects = Objects::default().with(
            "services",
            svc(json!({"type": "ExternalName", "externalName": "hooks.example.com"})),
        );
        let got = resolve(&objects, 8443).await.unwrap();
        assert_eq!(got.host_port, "hooks.example.com:8443");
        assert_eq!(got.server_name, "hook.sys.svc");

        // No Endpoints or EndpointSlices: the cluster IP and service port.
        let objects = Objects::default().with(
            "services",
            svc(json!({"type": "ClusterIP", "clusterIP": "fd00::9", "ports": https_port()})),
        );
        assert_eq!(
            resolve(&objects, 443).await.unwrap().host_port,
            "[fd00::9]:443"
        );

        let headless = Objects::default().with(
            "services",
            svc(json!({"type": "ClusterIP", "clusterIP": "None", "ports": https_port()})),
        );
        assert_eq!(
            resolve(&headless, 443).await.unwrap_err().message,
            "cannot route to service with ClusterIP \"None\""
        );
        let no_ip = Objects::default().with(
            "services",
            svc(json!({"type": "ClusterIP", "ports": https_port()})),
        );
        let err = resolve(&no_ip, 443).await.unwrap_err();
        assert_eq!(
            (err.code, err.message.as_str()),
            (503, "no endpoints available for service \"hook\"")
        );
    }

    #[tokio::test]
    async fn endpoints_routing() {
        let base = || {
            Objects::default().with(
                "services",
                svc(json!({"type": "ClusterIP", "clusterIP": "10.0.0.9", "ports": https_port()})),
            )
        };
        let objects = base().with(
            "endpoints",
            json!({"metadata": {"name": "hook", "namespace": "sys"}, "subsets": [
                {"addresses": [{"ip": "10.1.0.1"}], "ports": [{"name": "metrics", "port": 9090}]},
                {"addresses": [{"ip": "10.1.0.2"}], "notReadyAddresses": [{"ip": "10.1.0.3"}],
                 "ports": [{"name": "https", "port": 8443}]}
            ]}),
        );
        for _ in 0..8 {
            assert_eq!(
                resolve(&objects, 443).await.unwrap().host_port,
                "10.1.0.2:8443"
            );
        }
        let empty = base().with(
            "endpoints",
            json!({"metadata": {"name": "hook", "namespace": "sys"}}),
        );
        assert_eq!(
            resolve(&empty, 443).await.unwrap_err().message,
            "no endpoints available for service \"hook\""
        );
        let not_ready = base().with(
            "endpoints",
            json!({"metadata": {"name": "hook", "namespace": "sys"}, "subsets": [
                {"notReadyAddresses": [{"ip": "10.1.0.3"}], "ports": [{"name": "https", "port": 8443}]}
            ]}),
        );
        assert_eq!(resolve(&not_ready, 443).await.unwrap_err().code, 503);
    }

    #[tokio::test]
    async fn endpoint_slices_routing() {
        let objects = Objects::default()
            .with(
                "services",
                svc(json!({"type": "ClusterIP", "clusterIP": "10.0.0.9", "ports": https_port()})),
            )
            .with(
                "endpointslices",
                json!({"metadata": {"name": "hook-a", "namespace": "sys",
                                    "labels": {"kubernetes.io/service-name": "hook"}},
                       "addressType": "IPv6",
                       "endpoints": [{"addresses": ["fd00::1"], "conditions": {"ready": false}},
                                     {"addresses": ["fd00::2"]}],
                       "ports": [{"name": "https", "port": 8443, "protocol": "TCP"}]}),
            )
            .with(
                "endpointslices",
                json!({"metadata": {"name": "other", "namespace": "sys",
                                    "labels": {"kubernetes.io/service-name": "other"}},
                       "addressType": "IPv4",
                       "endpoints": [{"addresses": ["10.9.9.9"]}],
                       "ports": [{"name": "https", "port": 1, "protocol": "TCP"}]}),
            );
        for _ in 0..8 {
            let got = resolve(&objects, 443).await.unwrap();
            assert_eq!(got.host_port, "[fd00::2]:8443");
            assert_eq!(got.server_name, "hook.sys.svc");
        }
    }
}
