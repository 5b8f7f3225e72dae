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

use super::healthz::Health;
use crate::endpoints::ApiServer;

/// What a hook is given.
#[derive(Clone)]
pub struct HookContext {
    /// The server's handlers and stores.
    pub server: Arc<ApiServer>,
}

/// A hook's body.
pub type HookFn = Box<dyn FnOnce(HookContext) -> BoxFuture<'static, Result<(), String>> + Send>;

/// A named hook.
pub struct Hook {
    /// The hook's name (`poststarthook/<name>` is its check).
    pub name: String,
    run: HookFn,
}

impl Hook {
    /// A hook named `name` running `run`.
    pub fn new<F, Fut>(name: impl Into<String>, run: F) -> Self
    where
        F: FnOnce(HookContext) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
    {
        Hook {
            name: name.into(),
            run: Box::new(move |ctx| Box::pin(run(ctx))),
        }
    }
}

/// Post-start hooks with their readiness flags.
pub struct PostStartHooks(Vec<(Hook, Arc<AtomicBool>)>);

impl PostStartHooks {
    /// Registers `hooks` and their `poststarthook/<name>` checks.
    pub fn register(hooks: Vec<Hook>, health: &mut Health) -> Self {
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
    /// `(name, error)`, or stays pending forever once all succeeded (so it
    /// can sit in a `select!`).
    pub async fn run(self, ctx: HookContext) -> (String, String) {
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
        std::future::pending().await
    }
}

/// Runs pre-shutdown hooks concurrently; failures are logged.
pub async fn run_pre_shutdown(hooks: Vec<Hook>, ctx: HookContext) {
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
