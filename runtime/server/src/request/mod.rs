//! The request: everything request-scoped that the filters put into a
//! request or that code below them reads, and the response writers. A
//! leaf: it imports nothing else of the server, and everything else may
//! import it.
//!
//! - [`info`]: the parsed [`RequestInfo`] (`Arc<RequestInfo>` in the
//!   extensions, read with [`info::of`]) and [`info::is_long_running`];
//! - [`user`]: the authenticated [`user::UserInfo`] (in the extensions,
//!   and the task-local the handlers run under) and the client
//!   certificate;
//! - the extensions the filters set: [`PeerAddr`], [`AuditId`],
//!   [`ReceivedAt`], [`Deadline`], [`LimitExempt`];
//! - [`warning`]: the `Warning: 299` recorder;
//! - [`query`]: decoded query parameters;
//! - [`response`]: Status error responses and raw byte responses, and the
//!   request body limit [`MAX_REQUEST_BODY_BYTES`].

pub mod info;
pub mod query;
pub mod response;
pub mod user;
pub mod warning;

pub use info::RequestInfo;
pub use query::Query;

use std::time::Instant;

/// Maximum request body size (kube-apiserver's 3 MiB default).
pub const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The peer address of a request's connection, in its extensions (set by
/// the server for every request; audit events list it in `sourceIPs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// The audit ID of a request, in its extensions (the `Audit-ID` filter
/// sets it; audit events, logs and the `Audit-Id` response header use it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditId(pub String);

/// When the request arrived (deadlines count from here).
#[derive(Clone, Copy, Debug)]
pub struct ReceivedAt(pub Instant);

/// The deadline of a non-long-running request, in its extensions for the
/// filters below (API Priority and Fairness bounds queue waits with it).
#[derive(Clone, Copy, Debug)]
pub struct Deadline(pub tokio::time::Instant);

/// Inserted into a request's extensions by authentication for users the
/// limiter lets through regardless (kube-apiserver: group `system:masters`).
#[derive(Clone, Copy, Debug)]
pub struct LimitExempt;
