//! Post-start and pre-shutdown hooks (the generic apiserver's
//! `AddPostStartHook` / `AddPreShutdownHook`).
//!
//! Post-start hooks run once the listener is up, concurrently; each has a
//! `poststarthook/<name>` health check that fails until the hook finished.
//! A hook that fails stops the server with an error. Pre-shutdown hooks run
//! when shutdown starts, concurrently with the shutdown delay; the listener
//! closes once both are over.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;

use crate::endpoints::ApiServer;
use crate::endpoints::healthz::Health;

/// What a hook is given.
#[derive(Clone)]
pub struct HookContext {
    /// The server's handlers and stores.
    pub server: Arc<ApiServer>,
}

/// A hook's body.
pub type HookFn<C> = Box<dyn FnOnce(C) -> BoxFuture<'static, Result<(), String>> + Send>;

/// A named hook, given a `C` (the server's [`HookContext`]) when it runs.
pub struct Hook<C = HookContext> {
    /// The hook's name (`poststarthook/<name>` is its check).
    pub name: String,
    run: HookFn<C>,
}

impl<C> Hook<C> {
    /// A hook named `name` running `run`.
    pub fn new<F, Fut>(name: impl Into<String>, run: F) -> Self
    where
        F: FnOnce(C) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
    {
        Hook {
            name: name.into(),
            run: Box::new(move |ctx| Box::pin(run(ctx))),
        }
    }
}

/// Post-start hooks with their readiness flags.
pub struct PostStartHooks<C = HookContext>(Vec<(Hook<C>, Arc<AtomicBool>)>);

impl<C: Clone + Send + 'static> PostStartHooks<C> {
    /// Registers `hooks` and their `poststarthook/<name>` checks.
    pub fn register(hooks: Vec<Hook<C>>, health: &mut Health) -> Self {
        PostStartHooks(
            hooks
                .into_iter()
                .map(|h| {
                    let flag = health.add_flag(format!("poststarthook/{}", h.name), "not finished");
                    (h, flag)
                })
                .collect(),
        )
    }

    /// Runs every hook concurrently. Completes with the first failure as
    /// `(name, error)`, or calls `all_finished` once all succeeded and
    /// then stays pending forever (so it can sit in a `select!`).
    pub async fn run(self, ctx: C, all_finished: impl FnOnce()) -> (String, String) {
        let mut tasks = tokio::task::JoinSet::new();
        for (hook, flag) in self.0 {
            let ctx = ctx.clone();
            tasks.spawn(async move {
                let name = hook.name;
                tracing::debug!(hook = name, "running post-start hook");
                match (hook.run)(ctx).await {
                    Ok(()) => {
                        flag.store(true, Ordering::SeqCst);
                        tracing::info!(hook = name, "post-start hook finished");
                        Ok(())
                    }
                    Err(e) => Err((name, e)),
                }
            });
        }
        while let Some(done) = tasks.join_next().await {
            match done {
                Ok(Ok(())) => {}
                Ok(Err(failure)) => return failure,
                Err(e) => return ("<unknown>".into(), format!("hook panicked: {e}")),
            }
        }
        all_finished();
        std::future::pending().await
    }
}

/// Runs pre-shutdown hooks concurrently; failures are logged.
pub async fn run_pre_shutdown<C: Clone + Send + 'static>(hooks: Vec<Hook<C>>, ctx: C) {
    let mut tasks = tokio::task::JoinSet::new();
    for hook in hooks {
        let ctx = ctx.clone();
        tasks.spawn(async move {
            let name = hook.name;
            if let Err(e) = (hook.run)(ctx).await {
                tracing::error!(hook = name, error = %e, "pre-shutdown hook failed");
            } else {
                tracing::info!(hook = name, "pre-shutdown hook finished");
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::endpoints::healthz::Endpoint;
    use crate::request::Query;

    async fn readyz(health: &Health, check: Option<&str>) -> u16 {
        health
            .serve(Endpoint::Readyz, check, &Query::default())
            .await
            .status()
            .as_u16()
    }

    #[tokio::test]
    async fn checks_pass_once_hooks_finish_and_a_failure_is_reported() {
        let mut health = Health::default();
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let hooks = PostStartHooks::register(
            vec![
                Hook::new("slow", |(): ()| async move {
                    released.await.map_err(|e| e.to_string())
                }),
                Hook::new("fast", |(): ()| async { Ok(()) }),
            ],
            &mut health,
        );
        let health = Arc::new(health);
        assert_eq!(readyz(&health, None).await, 500);
        let running = tokio::spawn(hooks.run((), || {}));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(readyz(&health, Some("poststarthook/fast")).await, 200);
        assert_eq!(readyz(&health, Some("poststarthook/slow")).await, 500);
        let _ = release.send(());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(readyz(&health, None).await, 200);
        assert!(!running.is_finished(), "success keeps the runner pending");
        running.abort();

        let mut health = Health::default();
        let hooks = PostStartHooks::register(
            vec![Hook::new("broken", |(): ()| async {
                Err("cannot start".to_string())
            })],
            &mut health,
        );
        let failure = tokio::time::timeout(Duration::from_secs(5), hooks.run((), || {}))
            .await
            .expect("a failure ends the runner");
        assert_eq!(failure, ("broken".to_string(), "cannot start".to_string()));
        assert_eq!(readyz(&health, Some("poststarthook/broken")).await, 500);
    }
}
