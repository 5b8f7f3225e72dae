//! The request body a connection hands to the filter chain: hyper's body,
//! read to its end in the background when a handler answers without it.
//!
//! A request rejected before its body is read (401 or 403 from the filter
//! chain, 415 for a content type no handler decodes, 413 past the body
//! limit, 504 when it timed out) is answered before its body arrives.
//! hyper then cannot reuse the connection and closes it, while an HTTP/1.1
//! client that writes the whole body before it reads the answer is still
//! writing: it never reads the answer, and sees a broken connection
//! instead (Python's clients: `SSLEOFError: EOF occurred in violation of
//! protocol`). Go's server, and so kube-apiserver, reads and discards what
//! is left of a small body for the same reason; this goes further, up to
//! `DRAIN_LIMIT` bytes within `DRAIN_TIME` from a client that keeps
//! sending, so that every body the server would accept ends in its answer
//! and a connection kept for the next request.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};

use crate::request::MAX_REQUEST_BODY_BYTES;

/// The most bytes read and discarded after a handler dropped a body: the
/// request body limit, so whatever the server would have read is read.
/// A body with more left than this ends its connection, as before.
const DRAIN_LIMIT: u64 = MAX_REQUEST_BODY_BYTES as u64;

/// How long the rest of a body may take to arrive.
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// How long the client may send nothing while its body is drained: one
/// that stopped sending (a stalled upload whose request timed out) has its
/// connection closed after this, not after [`DRAIN_TIME`].
const DRAIN_IDLE: Duration = Duration::from_secs(1);

/// hyper's request body, drained when dropped before its end (see the
/// module documentation).
pub struct RequestBody {
    inner: Option<Incoming>,
    /// Whether a body dropped early is left alone: over HTTP/2, where
    /// hyper resets the stream and the connection goes on, and when the
    /// client waits for `100 Continue` before it sends the body (reading it
    /// would ask for what nobody will use; hyper closes the connection).
    leave_undrained: bool,
}

impl RequestBody {
    /// Wraps the body of `req`.
    pub fn new(req: http::Request<Incoming>) -> http::Request<RequestBody> {
        let leave_undrained = req.version() >= http::Version::HTTP_2
            || req
                .headers()
                .get(http::header::EXPECT)
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        req.map(|inner| RequestBody {
            inner: Some(inner),
            leave_undrained,
        })
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl Drop for RequestBody {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        if inner.is_end_stream() || self.leave_undrained {
            return;
        }
        // A declared length past the limit is not worth reading.
        if inner.size_hint().lower() > DRAIN_LIMIT {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(drain(inner));
        }
    }
}

/// Reads and discards `body` up to [`DRAIN_LIMIT`] bytes within
/// [`DRAIN_TIME`], each part within [`DRAIN_IDLE`] of the last; a body
/// that ends in time leaves the connection usable.
async fn drain(mut body: Incoming) {
    let read_all = async {
        let mut read = 0u64;
        while let Ok(Some(frame)) = tokio::time::timeout(DRAIN_IDLE, body.frame()).await {
            let Ok(frame) = frame else { return };
            if let Some(data) = frame.data_ref() {
                read += data.len() as u64;
                if read > DRAIN_LIMIT {
                    return;
                }
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, read_all).await;
}
