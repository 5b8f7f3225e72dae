//! The review kinds as resources: create-only, nothing stored, answered by
//! [`crate::authz::reviews`] from the authenticator's and authorizer's view
//! of the request.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;

use super::{Rest, Served};
use crate::authn::Authenticator;
use crate::authz::Authorizer;
use crate::request::response::error_response;
use crate::request::{Query, RequestInfo};
use apiforge_core::meta::Status;

/// Every review resource (SubjectAccessReview, TokenReview, ...), each
/// answered with the same authenticator and authorizer.
#[derive(Clone)]
pub struct Reviews {
    authenticator: Arc<Authenticator>,
    authorizer: Arc<Authorizer>,
}

impl Reviews {
    /// The review resources answered by `authenticator` and `authorizer`.
    pub fn new(authenticator: Arc<Authenticator>, authorizer: Arc<Authorizer>) -> Self {
        Reviews {
            authenticator,
            authorizer,
        }
    }

    /// The group, version and resource of each review kind.
    pub fn resources() -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
        crate::authz::reviews::RESOURCES
            .iter()
            .map(|(group, version, plural, _)| (*group, *version, *plural))
    }
}

#[crate::admission::async_trait]
impl Rest for Reviews {
    /// A review is created at its collection; a named review path is not
    /// served.
    async fn serve(&self, _: &Served, ri: Arc<RequestInfo>, _: Query, req: Request) -> Response {
        if !crate::authz::reviews::is_review(&ri) {
            return error_response(&Status::path_not_found().into());
        }
        let user = crate::request::user::user_of(&req)
            .cloned()
            .unwrap_or_default();
        crate::authz::reviews::handle(&self.authenticator, &self.authorizer, &user, &ri, req).await
    }
}
