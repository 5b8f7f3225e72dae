//! The server's authorizer as CEL's `authorizer` sees it
//! ([`apiforge_core::cel_authorizer::Checker`]): admission expressions ask
//! the same union of authorizers as requests do.

use std::future::Future;

use super::{Attributes, Authorizer, Decision};
use crate::request::user::UserInfo;
use apiforge_core::cel_authorizer::{Answer, CheckRequest, Checker};

/// The union behind CEL's `check(verb)`.
#[derive(Clone, Debug)]
pub struct CelChecker(pub Authorizer);

impl Checker for CelChecker {
    fn check(&self, request: &CheckRequest) -> Answer {
        let attrs = Attributes {
            user: UserInfo {
                name: request.user.name.clone(),
                uid: request.user.uid.clone(),
                groups: request.user.groups.clone(),
                extra: request.user.extra.clone(),
            },
            verb: request.verb.clone(),
            resource_request: request.path.is_none(),
            path: request.path.clone().unwrap_or_default(),
            namespace: request.namespace.clone(),
            api_group: request.group.clone(),
            // Upstream's library asks about every version.
            api_version: if request.path.is_none() {
                "*".into()
            } else {
                String::new()
            },
            resource: request.resource.clone(),
            subresource: request.subresource.clone(),
            name: request.name.clone(),
        };
        match block_on(self.0.evaluate(&attrs)) {
            Some(verdict) => Answer {
                allowed: verdict.decision == Decision::Allow,
                reason: verdict.reason,
                error: verdict.error,
            },
            None => Answer {
                allowed: false,
                reason: String::new(),
                error: Some("the authorizer could not be run".into()),
            },
        }
    }
}

/// Runs an authorizer's future to its end from the synchronous evaluation
/// of an expression: on a multi-threaded runtime the worker hands its
/// other tasks over while it waits (a webhook authorizer does I/O);
/// elsewhere (a single-threaded runtime, as in tests) on a runtime of its
/// own in a thread of its own. `None` when that thread cannot run it.
fn block_on<F: Future + Send>(fut: F) -> Option<F::Output>
where
    F::Output: Send,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            Some(tokio::task::block_in_place(|| handle.block_on(fut)))
        }
        _ => std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .ok()
                    .map(|rt| rt.block_on(fut))
            })
            .join()
            .ok()
            .flatten()
        }),
    }
}
