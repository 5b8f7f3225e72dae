//! The delegation chain of kube-apiserver's servers: a request goes to the
//! aggregator (APIService proxies), which hands what it does not serve to
//! the core API server (the compiled-in groups), which hands what it does
//! not serve to the extensions server (CustomResourceDefinitions), and
//! what nobody serves ends at the NotFound handler.
//!
//! The aggregator and extensions links pass every request on until their
//! features exist ([`PassThrough`]); the core link ([`Core`]) serves the
//! paths of the compiled-in groups, discovery, OpenAPI, health, metrics
//! and version; [`not_found`] answers kube-apiserver's 404 Status.
//!
//! A link first says whether it [owns](Link::owns) a request (a cheap,
//! synchronous check), and only the owner [serves](Link::serve) it, so a
//! request costs one boxed future however many links it passes.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;

use super::ApiServer;
use crate::admission::async_trait;
use crate::request::RequestInfo;
use apiforge_core::meta::Status;

/// One server of the chain.
#[async_trait]
pub trait Link: Send + Sync {
    /// The server's name (kube-apiserver's: `kube-aggregator`,
    /// `kube-apiserver`, `apiextensions-apiserver`).
    fn name(&self) -> &'static str;

    /// Whether this link answers `req` (else the next link gets it).
    fn owns(&self, req: &Request) -> bool;

    /// Answers a request the link [owns](Link::owns).
    async fn serve(&self, req: Request) -> Response;
}

/// A link that serves nothing (yet) and hands every request on.
pub struct PassThrough(pub &'static str);

#[async_trait]
impl Link for PassThrough {
    fn name(&self) -> &'static str {
        self.0
    }

    fn owns(&self, _: &Request) -> bool {
        false
    }

    async fn serve(&self, _: Request) -> Response {
        not_found()
    }
}

/// The core API server: the compiled-in groups and the server's own
/// endpoints.
pub struct Core(pub Arc<ApiServer>);

#[async_trait]
impl Link for Core {
    fn name(&self) -> &'static str {
        "kube-apiserver"
    }

    /// Whether the request is for a path this server serves (a resource
    /// of a served group version, or one of the server's own paths).
    fn owns(&self, req: &Request) -> bool {
        let server = &self.0;
        let parsed;
        let info: &RequestInfo = match req.extensions().get::<Arc<RequestInfo>>() {
            Some(info) => info,
            None => {
                parsed = crate::request::info::from_request(req);
                &parsed
            }
        };
        if info.is_resource_request {
            return server.serves_version(&info.group, &info.version)
                || crate::authz::reviews::is_review(info);
        }
        let path = req.uri().path().trim_end_matches('/');
        let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
        if super::healthz::Endpoint::from_name(first).is_some() {
            return true;
        }
        match path {
            "/api" | "/apis" | "/version" | "/metrics" | "/openapi/v2" | "/openapi/v3" => true,
            _ if path.starts_with("/openapi/v3/") => true,
            _ => {
                let trimmed = path.trim_start_matches('/');
                match trimmed.split('/').collect::<Vec<_>>().as_slice() {
                    ["apis", group] => server.docs.groups.contains_key(*group),
                    ["apis", _, _] | ["api", _] => server.docs.resource_lists.contains_key(trimmed),
                    _ => false,
                }
            }
        }
    }

    async fn serve(&self, req: Request) -> Response {
        super::director(&self.0, req).await
    }
}

/// The links in order; what none answers gets [`not_found`].
pub struct Chain {
    links: Vec<Arc<dyn Link>>,
}

impl Chain {
    /// kube-apiserver's chain around `core`: aggregator, core, extensions.
    pub fn standard(core: Arc<ApiServer>) -> Chain {
        Chain::new(vec![
            Arc::new(PassThrough("kube-aggregator")),
            Arc::new(Core(core)),
            Arc::new(PassThrough("apiextensions-apiserver")),
        ])
    }

    /// A chain of `links`.
    pub fn new(links: Vec<Arc<dyn Link>>) -> Chain {
        Chain { links }
    }

    /// The links' names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.links.iter().map(|l| l.name()).collect()
    }

    /// Passes `req` along the chain: the first link that owns it serves
    /// it.
    pub async fn serve(&self, req: Request) -> Response {
        match self.links.iter().find(|link| link.owns(&req)) {
            Some(link) => link.serve(req).await,
            None => not_found(),
        }
    }
}

/// kube-apiserver's NotFound handler: a 404 Status.
pub fn not_found() -> Response {
    crate::request::response::error_response(&Status::path_not_found().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    /// Answers requests whose path starts with its prefix.
    struct Prefix(&'static str, u16);

    #[async_trait]
    impl Link for Prefix {
        fn name(&self) -> &'static str {
            self.0
        }

        fn owns(&self, req: &Request) -> bool {
            req.uri().path().starts_with(self.0)
        }

        async fn serve(&self, _: Request) -> Response {
            let mut resp = Response::new(Body::empty());
            *resp.status_mut() = http::StatusCode::from_u16(self.1).expect("code");
            resp
        }
    }

    fn get(path: &str) -> Request {
        http::Request::get(path)
            .body(Body::empty())
            .expect("request")
    }

    #[tokio::test]
    async fn requests_go_down_the_chain_until_a_link_answers() {
        let chain = Chain::new(vec![
            Arc::new(PassThrough("kube-aggregator")),
            Arc::new(Prefix("/a", 201)),
            Arc::new(Prefix("/ab", 202)),
            Arc::new(Prefix("/b", 203)),
        ]);
        assert_eq!(chain.names(), ["kube-aggregator", "/a", "/ab", "/b"]);
        // The first link that answers wins, even if a later one would too.
        assert_eq!(chain.serve(get("/ab")).await.status(), 201);
        assert_eq!(chain.serve(get("/b/c")).await.status(), 203);
        let resp = chain.serve(get("/elsewhere")).await;
        assert_eq!(resp.status(), 404);
        let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .expect("body");
        let status: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(
            status["message"],
            "the server could not find the requested resource"
        );
        assert_eq!(status["reason"], "NotFound");
    }
}
