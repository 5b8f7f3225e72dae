//! The delegation chain of kube-apiserver's servers: a request goes to the
//! aggregator (APIService proxies), which hands what it does not serve to
//! the core API server (the compiled-in groups), which hands what it does
//! not serve to the extensions server (CustomResourceDefinitions), and
//! what nobody serves ends at the NotFound handler.
//!
//! The aggregator link ([`Aggregator`]) proxies the group versions of
//! remote APIServices and passes the rest on; the extensions link ([`Extensions`]) serves the
//! custom resources; the core link ([`Core`]) serves the
//! paths of the compiled-in groups, discovery, OpenAPI, health, metrics
//! and version along its route table ([`super::routes`]); [`not_found`]
//! answers kube-apiserver's 404 Status.
//!
//! A link [routes](Link::route) a request synchronously, once: it either
//! returns the future that answers it or hands the request back for the
//! next link, so a request costs one boxed future however many links it
//! passes, and no link decides twice.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;

use super::ApiServer;
use apiforge_core::meta::Status;

/// The answer a link gives to a request it serves.
pub type Serving<'a> = Pin<Box<dyn Future<Output = Response> + Send + 'a>>;

/// What a link does with a request.
#[expect(
    clippy::large_enum_variant,
    reason = "the request moves from link to link either way; boxing it would allocate per link"
)]
pub enum Routed<'a> {
    /// It serves it: the future answering it.
    Serve(Serving<'a>),
    /// It does not: the request, for the next link.
    Pass(Request),
}

/// One server of the chain.
pub trait Link: Send + Sync {
    /// The server's name (kube-apiserver's: `kube-aggregator`,
    /// `kube-apiserver`, `apiextensions-apiserver`).
    fn name(&self) -> &'static str;

    /// The future answering `req` if this link serves it; otherwise the
    /// request back, for the next link.
    fn route(&self, req: Request) -> Routed<'_>;
}

/// A link that serves nothing (yet) and hands every request on.
pub struct PassThrough(pub &'static str);

impl Link for PassThrough {
    fn name(&self) -> &'static str {
        self.0
    }

    fn route(&self, req: Request) -> Routed<'_> {
        Routed::Pass(req)
    }
}

/// kube-aggregator: passes the requests of a remote APIService's group
/// version to its backend ([`crate::aggregator`]), everything else on.
pub struct Aggregator(pub Arc<ApiServer>);

impl Link for Aggregator {
    fn name(&self) -> &'static str {
        "kube-aggregator"
    }

    fn route(&self, req: Request) -> Routed<'_> {
        match self.0.aggregator().route(req.uri().path()) {
            Some(backend) => Routed::Serve(Box::pin(self.0.aggregator().serve(backend, req))),
            None => Routed::Pass(req),
        }
    }
}

/// The core API server: the compiled-in groups and the server's own
/// endpoints.
pub struct Core(pub Arc<ApiServer>);

impl Link for Core {
    fn name(&self) -> &'static str {
        "kube-apiserver"
    }

    /// Serves the request if its route is in the server's table (a
    /// resource of a served group version, or one of the server's own
    /// paths).
    fn route(&self, req: Request) -> Routed<'_> {
        match self.0.route(&req) {
            Some(route) => Routed::Serve(Box::pin(self.0.serve(route, req))),
            None => Routed::Pass(req),
        }
    }
}

/// The extensions server: the custom resources of the
/// CustomResourceDefinitions served now (their stores come and go in the
/// core server's [`crate::registry::Stores`]), through the same handlers as
/// the compiled-in kinds.
pub struct Extensions(pub Arc<ApiServer>);

impl Link for Extensions {
    fn name(&self) -> &'static str {
        "apiextensions-apiserver"
    }

    fn route(&self, req: Request) -> Routed<'_> {
        let info = crate::request::info::of(&req);
        if !info.is_resource_request {
            return Routed::Pass(req);
        }
        let Some(rest) = self.0.custom_store(&info) else {
            return Routed::Pass(req);
        };
        if info.verb != "create" {
            return Routed::Serve(Box::pin(
                self.0
                    .serve(super::routes::Route::Resource(rest, info), req),
            ));
        }
        Routed::Serve(Box::pin(async move {
            if self
                .0
                .definition_terminating(&info.group, &info.resource)
                .await
            {
                // Upstream's crdHandler: a terminating definition takes no
                // new objects.
                let mut status = Status::method_not_allowed("create", &info.group, &info.resource);
                status.message =
                    "create not allowed while custom resource definition is terminating".into();
                status.details = Some(apiforge_core::meta::StatusDetails {
                    group: info.group.clone(),
                    kind: info.resource.clone(),
                    ..Default::default()
                });
                return crate::request::response::error_response(&status.into());
            }
            self.0
                .serve(super::routes::Route::Resource(rest, info), req)
                .await
        }))
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
            Arc::new(Aggregator(core.clone())),
            Arc::new(Core(core.clone())),
            Arc::new(Extensions(core)),
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

    /// Passes `req` along the chain: the first link that routes it serves
    /// it.
    pub async fn serve(&self, mut req: Request) -> Response {
        for link in &self.links {
            match link.route(req) {
                Routed::Serve(serving) => return serving.await,
                Routed::Pass(back) => req = back,
            }
        }
        not_found()
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

    impl Link for Prefix {
        fn name(&self) -> &'static str {
            self.0
        }

        fn route(&self, req: Request) -> Routed<'_> {
            if !req.uri().path().starts_with(self.0) {
                return Routed::Pass(req);
            }
            let code = self.1;
            Routed::Serve(Box::pin(async move {
                let mut resp = Response::new(Body::empty());
                *resp.status_mut() = http::StatusCode::from_u16(code).expect("code");
                resp
            }))
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
