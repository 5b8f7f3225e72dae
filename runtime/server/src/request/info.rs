//! Parsing a request path into Kubernetes request info (the generic
//! apiserver's `RequestInfoFactory`): resource or non-resource request,
//! group, version, namespace, resource, name, subresource and verb. The
//! request-info filter puts it into every request as an `Arc<RequestInfo>`
//! ([`of`] reads it).

use std::sync::Arc;

/// What a request addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// True for `/api/...` and `/apis/...` paths that address a resource.
    pub is_resource_request: bool,
    /// The raw path.
    pub path: String,
    /// `api` or `apis` for resource requests.
    pub api_prefix: String,
    /// The API group (`""` for core).
    pub group: String,
    /// The API version.
    pub version: String,
    /// The namespace (from `namespaces/{ns}`), if any.
    pub namespace: String,
    /// The plural resource name.
    pub resource: String,
    /// The object name, if any.
    pub name: String,
    /// The subresource, if any.
    pub subresource: String,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, ...), or the
    /// lower-case HTTP method for non-resource requests.
    pub verb: String,
}

tokio::task_local! {
    static CURRENT: std::sync::Arc<RequestInfo>;
}

/// Runs `fut` as the handling of the resource request `info`, so code
/// below the handlers (admission) can learn the version the client asked
/// for with [`requested_version`].
pub async fn with_info<F: std::future::Future>(
    info: std::sync::Arc<RequestInfo>,
    fut: F,
) -> F::Output {
    CURRENT.scope(info, fut).await
}

/// The version of `group`/`resource` the current request addresses, if it
/// is a request for that resource (internal writes, such as a
/// controller's, have none).
pub fn requested_version(group: &str, resource: &str) -> Option<String> {
    CURRENT
        .try_with(|info| {
            (info.is_resource_request && info.group == group && info.resource == resource)
                .then(|| info.version.clone())
        })
        .ok()
        .flatten()
}

/// Parses a request. `watch_query` says whether `watch=true` (or a value
/// other than `false`/`0`) was in the query.
pub fn parse(method: &http::Method, path: &str, watch_query: bool) -> RequestInfo {
    let mut info = RequestInfo {
        path: path.to_string(),
        ..Default::default()
    };
    let trimmed = path.trim_matches('/');
    let parts: Vec<&str> = if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed.split('/').collect()
    };
    // `api/{version}/...` (at least 3 segments) or
    // `apis/{group}/{version}/...` (at least 4).
    let rest = match parts.as_slice() {
        ["api", version, rest @ ..] if !rest.is_empty() => {
            info.version = version.to_string();
            rest
        }
        ["apis", group, version, rest @ ..] if !rest.is_empty() => {
            info.group = group.to_string();
            info.version = version.to_string();
            rest
        }
        _ => {
            // Not a resource request: the verb is the lower-case method.
            info.verb = method.as_str().to_lowercase();
            return info;
        }
    };
    info.is_resource_request = true;
    info.api_prefix = parts.first().copied().unwrap_or_default().to_string();

    let (path_watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let rest = match rest {
        // `/namespaces/{name}[/status|/finalize]` addresses a namespace
        // object.
        ["namespaces", name] => {
            info.resource = "namespaces".into();
            info.name = name.to_string();
            &[]
        }
        ["namespaces", name, sub @ ("status" | "finalize")] => {
            info.resource = "namespaces".into();
            info.name = name.to_string();
            info.subresource = sub.to_string();
            &[]
        }
        ["namespaces", namespace, rest @ ..] => {
            info.namespace = namespace.to_string();
            rest
        }
        _ => rest,
    };
    if let [resource, more @ ..] = rest {
        info.resource = resource.to_string();
        if let [name, more @ ..] = more {
            info.name = name.to_string();
            if let [subresource, ..] = more {
                info.subresource = subresource.to_string();
            }
        }
    }
    let has_name = !info.name.is_empty();
    info.verb = if path_watch {
        "watch"
    } else {
        match *method {
            http::Method::POST => "create",
            http::Method::GET | http::Method::HEAD if has_name => "get",
            http::Method::GET | http::Method::HEAD if watch_query => "watch",
            http::Method::GET | http::Method::HEAD => "list",
            http::Method::PUT => "update",
            http::Method::PATCH => "patch",
            http::Method::DELETE if has_name => "delete",
            http::Method::DELETE => "deletecollection",
            _ => "",
        }
    }
    .to_string();
    info
}

/// Parses the request's method, path and `watch` query parameter.
pub fn from_request<B>(req: &http::Request<B>) -> RequestInfo {
    let watch = req.uri().query().is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "watch")
            .is_some_and(|(_, v)| v != "false" && v != "0")
    });
    parse(req.method(), req.uri().path(), watch)
}

/// The request's [`RequestInfo`]: the one the filter put into its
/// extensions, or parsed now for a request that did not pass the filter.
pub fn of<B>(req: &http::Request<B>) -> Arc<RequestInfo> {
    req.extensions()
        .get::<Arc<RequestInfo>>()
        .cloned()
        .unwrap_or_else(|| Arc::new(from_request(req)))
}

/// Whether a request is long-running: watches (kube-apiserver also counts
/// `proxy` and the `attach`/`exec`/`log`/`portforward`/`proxy`
/// subresources, none of which apiforge serves yet). Long-running requests
/// have no deadline, are not limited by max-in-flight and are not waited
/// for when draining.
pub fn is_long_running(info: &RequestInfo) -> bool {
    matches!(info.verb.as_str(), "watch" | "proxy")
        || (info.is_resource_request
            && matches!(
                info.subresource.as_str(),
                "attach" | "exec" | "proxy" | "log" | "portforward"
            ))
}

/// Whether a request only reads (`request_kind="readOnly"` in the
/// in-flight and in-queue metrics, and max-in-flight's read-only limit).
pub fn is_read_only(info: &RequestInfo) -> bool {
    matches!(info.verb.as_str(), "get" | "list" | "watch" | "head")
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn resource_paths() {
        let i = parse(
            &Method::GET,
            "/apis/wardle.example.com/v1beta1/namespaces/default/flunders",
            false,
        );
        assert!(i.is_resource_request);
        assert_eq!(
            (
                i.group.as_str(),
                i.version.as_str(),
                i.namespace.as_str(),
                i.resource.as_str(),
                i.verb.as_str()
            ),
            (
                "wardle.example.com",
                "v1beta1",
                "default",
                "flunders",
                "list"
            )
        );
        let i = parse(
            &Method::GET,
            "/apis/wardle.example.com/v1beta1/namespaces/default/flunders",
            true,
        );
        assert_eq!(i.verb, "watch");
        let i = parse(
            &Method::DELETE,
            "/apis/g/v/namespaces/ns/things/x/status",
            false,
        );
        assert_eq!(
            (i.name.as_str(), i.subresource.as_str(), i.verb.as_str()),
            ("x", "status", "delete")
        );
        let i = parse(&Method::GET, "/api/v1/namespaces/default", false);
        assert_eq!(
            (i.resource.as_str(), i.name.as_str(), i.namespace.as_str()),
            ("namespaces", "default", "")
        );
        let i = parse(&Method::GET, "/api/v1/namespaces/x/status", false);
        assert_eq!(
            (i.resource.as_str(), i.name.as_str(), i.subresource.as_str()),
            ("namespaces", "x", "status")
        );
        let i = parse(&Method::GET, "/apis/g/v/watch/namespaces/ns/things", false);
        assert_eq!((i.verb.as_str(), i.resource.as_str()), ("watch", "things"));
        let i = parse(&Method::GET, "/apis/g/v/things", false);
        assert_eq!(
            (i.namespace.as_str(), i.resource.as_str(), i.verb.as_str()),
            ("", "things", "list")
        );
    }

    #[test]
    fn non_resource_paths() {
        for p in [
            "/apis",
            "/apis/g",
            "/apis/g/v",
            "/api",
            "/api/v1",
            "/healthz",
            "/openapi/v3",
        ] {
            assert!(!parse(&Method::GET, p, false).is_resource_request, "{p}");
        }
    }
}
