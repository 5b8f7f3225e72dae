//! Member health for a store with several etcd endpoints.
//!
//! `etcd-client` balances requests over every endpoint it was given. A
//! killed member then fails the requests sent to it (`tcp connect error`)
//! and a stopped one (SIGSTOP, a partition that keeps TCP up) leaves them
//! hanging, while etcd's own client balances only over members that are up.
//! The health task asks each member for its status every
//! [`Etcd3Options::health_check_interval`](super::Etcd3Options), takes the
//! members that do not answer out of the balancer and puts them back once
//! they answer again. It never takes out the last member: when none
//! answers (an election, etcd down) requests keep going to all of them and
//! fail or wait as before.

use std::sync::Weak;
use std::time::Duration;

use etcd_client as etcd;

use super::Inner;

/// One endpoint: the URL the balancer knows it by and a client of its own
/// to probe it with.
struct Member {
    /// As given in the options.
    endpoint: String,
    url: String,
    probe: etcd::Client,
    serving: bool,
}

/// The URL the balancer keys `endpoint` by (`etcd-client` adds the scheme
/// to a bare `host:port`: `https://` with TLS options, `http://` without).
pub(super) fn balancer_url(endpoint: &str, tls: bool) -> String {
    if endpoint.starts_with("http://") || endpoint.starts_with("https://") {
        endpoint.to_owned()
    } else if tls {
        format!("https://{endpoint}")
    } else {
        format!("http://{endpoint}")
    }
}

/// Starts the health task of a store with several endpoints; it ends when
/// the store (`inner`) is dropped.
pub(super) async fn spawn(
    inner: Weak<Inner>,
    client: etcd::Client,
    endpoints: &[String],
    options: etcd::ConnectOptions,
    tls: bool,
    interval: Duration,
    timeout: Duration,
) -> super::Result<()> {
    let mut members = Vec::with_capacity(endpoints.len());
    for endpoint in endpoints {
        // Building a client does not touch the network.
        let probe = etcd::Client::connect([endpoint], Some(options.clone()))
            .await
            .map_err(super::map_err)?;
        members.push(Member {
            endpoint: endpoint.clone(),
            url: balancer_url(endpoint, tls),
            probe,
            serving: true,
        });
    }
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if inner.strong_count() == 0 {
                return;
            }
            let up = futures::future::join_all(members.iter().map(|m| {
                let mut maintenance = m.probe.maintenance_client();
                async move {
                    matches!(
                        tokio::time::timeout(timeout, maintenance.status()).await,
                        Ok(Ok(_))
                    )
                }
            }))
            .await;
            if !up.contains(&true) {
                continue;
            }
            for (member, up) in members.iter_mut().zip(up) {
                if member.serving == up {
                    continue;
                }
                let changed = if up {
                    client.add_endpoint(&member.url).await
                } else {
                    client.remove_endpoint(&member.url).await
                };
                match changed {
                    Ok(()) => {
                        member.serving = up;
                        if up {
                            tracing::info!(endpoint = %member.url, "etcd member answers again; sending it requests");
                        } else {
                            tracing::warn!(endpoint = %member.url, "etcd member does not answer; sending it no requests");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(endpoint = %member.url, error = %super::describe(&e), "cannot change the etcd endpoints");
                    }
                }
            }
            if let Some(inner) = inner.upgrade()
                && let Ok(mut serving) = inner.serving.lock()
            {
                *serving = members
                    .iter()
                    .filter(|m| m.serving)
                    .map(|m| m.endpoint.clone())
                    .collect();
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::balancer_url;

    #[test]
    fn bare_endpoints_get_the_scheme_the_client_gives_them() {
        assert_eq!(balancer_url("127.0.0.1:1", false), "http://127.0.0.1:1");
        assert_eq!(balancer_url("127.0.0.1:1", true), "https://127.0.0.1:1");
        assert_eq!(
            balancer_url("https://127.0.0.1:1", true),
            "https://127.0.0.1:1"
        );
    }
}
