//! In-flight tracking for graceful shutdown (the generic apiserver's
//! `WithWaitGroup`): non-long-running requests are counted while their
//! handler runs; at shutdown the server [closes](InFlight::close) the
//! tracker and [waits](InFlight::drained) for the count to reach zero.
//! Requests that still arrive after the close (on connections that were
//! open) get 503 `apiserver is shutting down` with `Retry-After: 1`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use axum::extract::Request;
use axum::response::Response;
use tokio::sync::Notify;

use crate::request::RequestInfo;
use apiforge_core::meta::StatusDetails;

/// The in-flight counter.
#[derive(Debug, Default)]
pub struct InFlight {
    count: AtomicUsize,
    closed: AtomicBool,
    idle: Notify,
}

impl InFlight {
    /// Non-long-running requests whose handler is running.
    pub fn current(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Turns new non-long-running requests away from now on.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    /// Completes when no tracked request is running.
    pub async fn drained(&self) {
        loop {
            let idle = self.idle.notified();
            if self.current() == 0 {
                return;
            }
            idle.await;
        }
    }

    fn enter(self: &Arc<Self>) -> Guard {
        self.count.fetch_add(1, Ordering::SeqCst);
        Guard(self.clone())
    }
}

struct Guard(Arc<InFlight>);

impl Drop for Guard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// The filter.
pub async fn filter(in_flight: &Arc<InFlight>, req: Request, next: impl super::Next) -> Response {
    let long_running = req
        .extensions()
        .get::<std::sync::Arc<RequestInfo>>()
        .is_some_and(|info| crate::request::info::is_long_running(info));
    if long_running {
        return next.run(req).await;
    }
    if in_flight.closed.load(Ordering::SeqCst) {
        let status = crate::request::response::failure(
            503,
            "ServiceUnavailable",
            "apiserver is shutting down",
        )
        .with_details(StatusDetails {
            retry_after_seconds: Some(1),
            ..Default::default()
        });
        return crate::request::response::status_response(status);
    }
    let _guard = in_flight.enter();
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn drained_waits_for_running_requests() {
        let in_flight = Arc::new(InFlight::default());
        let guard = in_flight.enter();
        let waiter = tokio::spawn({
            let in_flight = in_flight.clone();
            async move { in_flight.drained().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished());
        drop(guard);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("drained after the last request")
            .expect("join");
    }
}
