//! Parsing a request path into Kubernetes request info (the generic
//! apiserver's `RequestInfoFactory`): resource or non-resource request,
//! group, version, namespace, resource, name, subresource and verb.

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

/// Parses a request. `watch_query` says whether `watch=true` (or a value
/// other than `false`/`0`) was in the query.
pub fn parse(method: &http::Method, path: &str, watch_query: bool) -> RequestInfo {
    let mut info = RequestInfo {
        path: path.to_string(),
        verb: method.as_str().to_lowercase(),
        ..Default::default()
    };
    let trimmed = path.trim_matches('/');
    let mut parts: Vec<&str> = if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed.split('/').collect()
    };
    let Some(prefix) = parts.first().copied() else {
        return info;
    };
    if prefix != "api" && prefix != "apis" {
        return info;
    }
    let min = if prefix == "api" { 3 } else { 4 };
    if parts.len() < min {
        return info;
    }
    info.is_resource_request = true;
    info.api_prefix = prefix.to_string();
    parts.remove(0);
    if prefix == "apis" {
        info.group = parts.remove(0).to_string();
    }
    info.version = parts.remove(0).to_string();

    let mut path_watch = false;
    if parts.first() == Some(&"watch") {
        parts.remove(0);
        path_watch = true;
    }
    if parts.first() == Some(&"namespaces") && parts.len() > 1 {
        info.namespace = parts[1].to_string();
        if parts.len() > 2
            && !(parts.len() == 3 && (parts[2] == "status" || parts[2] == "finalize"))
        {
            parts.drain(0..2);
        } else {
            // `/namespaces/{name}[/status|/finalize]` addresses a namespace object.
            info.resource = "namespaces".into();
            info.name = parts[1].to_string();
            info.namespace.clear();
            if parts.len() == 3 {
                info.subresource = parts[2].to_string();
            }
            parts.clear();
        }
    }
    if !parts.is_empty() {
        info.resource = parts[0].to_string();
        if let Some(n) = parts.get(1) {
            info.name = n.to_string();
        }
        if let Some(s) = parts.get(2) {
            info.subresource = s.to_string();
        }
    }
    let has_name = !info.name.is_empty();
    info.verb = if path_watch {
        "watch".into()
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
        .into()
    };
    info
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
