//! Deadlines of non-long-running requests (the generic apiserver's
//! `WithRequestDeadline` and `WithTimeoutForNonLongRunningRequests`): a
//! request must complete within `--request-timeout` (shortened, never
//! lengthened, by a positive `?timeout=` Go duration), counted from its
//! arrival; otherwise it gets 504 `Timeout`. The handler is dropped at the
//! deadline. A malformed `?timeout=` is a 400.

use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::response::Response;

use crate::request::info::is_long_running;
use crate::request::{Deadline, ReceivedAt, RequestInfo};

/// The message of the 504 Status (`apierrors.NewTimeoutError`).
pub const TIMEOUT_MESSAGE: &str = "Timeout: request did not complete within the allotted timeout";

/// The filter; its state is `--request-timeout`.
pub async fn filter(default: Duration, mut req: Request, next: impl super::Next) -> Response {
    let long_running = req
        .extensions()
        .get::<std::sync::Arc<RequestInfo>>()
        .is_some_and(|info| is_long_running(info));
    if long_running || default.is_zero() {
        return next.run(req).await;
    }
    let requested = req.uri().query().and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "timeout")
            .map(|(_, v)| v.into_owned())
    });
    let timeout = match requested.as_deref() {
        None | Some("") => default,
        Some(v) => match parse_go_duration(v) {
            Ok(t) if !t.is_zero() && t < default => t,
            Ok(_) => default,
            Err(e) => {
                return crate::request::response::status_response(
                    crate::request::response::failure(
                        400,
                        "BadRequest",
                        format!("invalid timeout specified in the request URL - {e}"),
                    ),
                );
            }
        },
    };
    let started = req
        .extensions()
        .get::<ReceivedAt>()
        .map_or_else(Instant::now, |r| r.0);
    let deadline = tokio::time::Instant::from_std(started + timeout);
    req.extensions_mut().insert(Deadline(deadline));
    // Pinned here, so `Timeout` holds a pointer rather than a copy of the
    // rest of the chain's future.
    let handler = std::pin::pin!(next.run(req));
    match tokio::time::timeout_at(deadline, handler).await {
        Ok(resp) => resp,
        Err(_) => crate::metrics::terminated(crate::request::response::status_response(
            crate::request::response::failure(504, "Timeout", TIMEOUT_MESSAGE),
        )),
    }
}

/// Parses a Go duration (`time.ParseDuration`): a sequence of decimal
/// numbers with units `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`, or `0`.
/// Negative durations parse as zero. Errors read like Go's
/// (`time: invalid duration "x"`).
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let invalid = || format!("time: invalid duration \"{s}\"");
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        if num.is_empty() || num == "." {
            return Err(invalid());
        }
        let value: f64 = num.parse().map_err(|_| invalid())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(format!("time: missing unit in duration \"{s}\"")),
            other => {
                return Err(format!(
                    "time: unknown unit \"{other}\" in duration \"{s}\""
                ));
            }
        };
        total += value * scale;
        rest = next;
    }
    if negative || !total.is_finite() {
        return Ok(Duration::ZERO);
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_go_duration("32s"), Ok(Duration::from_secs(32)));
        assert_eq!(parse_go_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("1m0s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_go_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_go_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("-1s"), Ok(Duration::ZERO));
        assert_eq!(
            parse_go_duration("abc"),
            Err("time: invalid duration \"abc\"".to_string())
        );
        assert_eq!(
            parse_go_duration("5"),
            Err("time: missing unit in duration \"5\"".to_string())
        );
        assert_eq!(
            parse_go_duration("5x"),
            Err("time: unknown unit \"x\" in duration \"5x\"".to_string())
        );
    }
}
