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

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::response::Response;

use super::ApiServer;
use super::request_info::RequestInfo;
use crate::admission::async_trait;
use crate::meta::Status;

/// What a link did with a request.
pub enum Outcome {
    /// The link answered.
    Handled(Response),
    /// Not this link's: the next one gets the request.
    Delegated(Request),
}

/// One server of the chain.
#[async_trait]
pub trait Link: Send + Sync {
    /// The server's name (kube-apiserver's: `kube-aggregator`,
    /// `kube-apiserver`, `apiextensions-apiserver`).
    fn name(&self) -> &'static str;

    /// Answers `req`, or hands it on.
    async fn serve(&self, req: Request) -> Outcome;
}

/// A link that serves nothing (yet) and hands every request on.
pub struct PassThrough(pub &'static str);

#[async_trait]
impl Link for PassThrough {
    fn name(&self) -> &'static str {
        self.0
    }

    async fn serve(&self, req: Request) -> Outcome {
        Outcome::Delegated(req)
    }
}

/// The core API server: the compiled-in groups and the server's own
/// endpoints.
pub struct Core(pub Arc<ApiServer>);

impl Core {
    /// Whether the request is for a path this server serves.
    fn owns(&self, req: &Request) -> bool {
        let server = &self.0;
        let info = match req.extensions().get::<RequestInfo>() {
            Some(info) => info.clone(),
            None => crate::filters::request_info::from_request(req),
        };
        if info.is_resource_request {
            let list = if info.group.is_empty() {
                format!("api/{}", info.version)
            } else {
                format!("apis/{}/{}", info.group, info.version)
            };
            return server.docs.resource_lists.contains_key(&list)
                || crate::authz::reviews::is_review(&info);
        }
        let path = req.uri().path().trim_end_matches('/');
        let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
        if crate::server::healthz::Endpoint::from_name(first).is_some() {
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
}

#[async_trait]
impl Link for Core {
    fn name(&self) -> &'static str {
        "kube-apiserver"
    }

    async fn serve(&self, req: Request) -> Outcome {
        if self.owns(&req) {
            Outcome::Handled(super::director(State(self.0.clone()), req).await)
        } else {
            Outcome::Delegated(req)
        }
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

    /// Passes `req` along the chain.
    pub async fn serve(&self, mut req: Request) -> Response {
        for link in &self.links {
            match link.serve(req).await {
                Outcome::Handled(resp) => return resp,
                Outcome::Delegated(r) => req = r,
            }
        }
        not_found()
    }
}

/// kube-apiserver's NotFound handler: a 404 Status.
pub fn not_found() -> Response {
    super::error_response(&Status::path_not_found().into())
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

        async fn serve(&self, req: Request) -> Outcome {
            if req.uri().path().starts_with(self.0) {
                let mut resp = Response::new(Body::empty());
                *resp.status_mut() = http::StatusCode::from_u16(self.1).expect("code");
                Outcome::Handled(resp)
            } else {
                Outcome::Delegated(req)
            }
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
