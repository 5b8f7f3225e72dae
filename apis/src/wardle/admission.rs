//! The wardle group's admission plugin `BanFlunder` (the sample
//! apiserver's `pkg/admission/plugin/banflunder`): a Flunder may not be
//! created with a name that any Fischer lists in `disallowedFlunders`.
//!
//! It is a typed in-process plugin: an asynchronous mutating hook on the
//! internal [`Flunder`] (the sample's `Admit`), which lists Fischers through
//! the admission context's lookup. Register it with
//! `AdmissionRegistry::register(apiforge_apis::wardle::admission::ban_flunder(), true)`.
#![cfg(feature = "server")]

use apiforge_runtime::admission::{
    Attributes, BoxFuture, Context, Denial, Operation, TypedAdmission,
};
use serde_json::Value;

use super::GROUP;
use super::internal::Flunder;

/// The plugin's name, as `--enable-admission-plugins` spells it.
pub const BAN_FLUNDER: &str = "BanFlunder";

/// The version whose Fischers are read (the only one serving them).
const FISCHER_VERSION: &str = "v1alpha1";

/// The `BanFlunder` plugin, ready to register: mutating (like the sample's
/// `Admit`), CREATE only, for `wardle.example.com` Flunders in any version.
/// When Fischers are not served it allows everything.
pub fn ban_flunder() -> TypedAdmission<Flunder> {
    TypedAdmission::<Flunder>::new(BAN_FLUNDER)
        .operations([Operation::Create])
        .mutate_async(ban)
}

fn disallows(fischer: &Value, name: &str) -> bool {
    fischer
        .get("disallowedFlunders")
        .and_then(Value::as_array)
        .is_some_and(|names| names.iter().any(|n| n.as_str() == Some(name)))
}

/// Refuses a Flunder whose name a Fischer disallows.
fn ban<'a>(
    flunder: &'a mut Flunder,
    _attrs: &'a Attributes,
    ctx: &'a Context,
) -> BoxFuture<'a, Result<(), Denial>> {
    Box::pin(async move {
        // A Flunder with only generateName has no name yet: never banned.
        let name = flunder.metadata.name.as_str();
        if name.is_empty() {
            return Ok(());
        }
        let Some(fischers) = ctx
            .lookup()
            .list(GROUP, FISCHER_VERSION, "fischers", None)
            .await?
        else {
            return Ok(());
        };
        if fischers.iter().any(|f| disallows(f, name)) {
            return Err(Denial::forbidden(
                "this name may not be used, please change the resource name",
            ));
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::Arc;

    use apiforge_runtime::admission::{Chain, Lookup, Plugin, Plugins, async_trait};
    use apiforge_runtime::error::ApiResult;
    use serde_json::json;

    use super::*;

    /// Serves `fischers` (or nothing) from memory.
    struct FakeLookup(Option<Vec<Value>>);

    #[async_trait]
    impl Lookup for FakeLookup {
        fn serves(&self, group: &str, version: &str, resource: &str) -> bool {
            self.0.is_some() && (group, version, resource) == (GROUP, "v1alpha1", "fischers")
        }

        async fn get(
            &self,
            _: &str,
            _: &str,
            _: &str,
            _: &str,
            _: &str,
            _: bool,
        ) -> ApiResult<Option<Value>> {
            Ok(None)
        }

        async fn list(
            &self,
            group: &str,
            version: &str,
            resource: &str,
            _: Option<&str>,
        ) -> ApiResult<Option<Vec<Value>>> {
            Ok(if self.serves(group, version, resource) {
                self.0.clone()
            } else {
                None
            })
        }
    }

    /// Polls a future that never waits (everything here is in memory).
    fn ready<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("future did not complete"),
        }
    }

    fn chain(fischers: Option<Vec<Value>>) -> Chain {
        let plugins: Plugins = [Arc::new(ban_flunder()) as Arc<dyn Plugin>]
            .into_iter()
            .collect();
        Chain::new(plugins, Arc::new(FakeLookup(fischers)))
    }

    fn attrs(op: Operation, kind: &str, resource: &str, name: &str) -> Attributes {
        Attributes {
            operation: Some(op),
            group: GROUP.into(),
            version: "v1beta1".into(),
            kind: kind.into(),
            resource: resource.into(),
            namespace: "default".into(),
            name: name.into(),
            object: Some(json!({"metadata": {"name": name, "namespace": "default"}})),
            ..Default::default()
        }
    }

    fn fischers() -> Option<Vec<Value>> {
        Some(vec![
            json!({"apiVersion": "wardle.example.com/v1alpha1", "kind": "Fischer",
                   "metadata": {"name": "a"}, "disallowedFlunders": ["x"]}),
            json!({"apiVersion": "wardle.example.com/v1alpha1", "kind": "Fischer",
                   "metadata": {"name": "b"}, "disallowedFlunders": ["bad-flunder", "y"]}),
        ])
    }

    #[test]
    fn bans_a_disallowed_name_with_the_samples_status() {
        let chain = chain(fischers());
        let mut a = attrs(Operation::Create, "Flunder", "flunders", "bad-flunder");
        let err = ready(chain.admit(&mut a)).unwrap_err();
        assert_eq!(
            serde_json::to_value(&*err.0).unwrap(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                   "message":"flunders.wardle.example.com \"bad-flunder\" is forbidden: this name may not be used, please change the resource name",
                   "reason":"Forbidden",
                   "details":{"name":"bad-flunder","group":"wardle.example.com","kind":"flunders"},
                   "code":403})
        );
    }

    #[test]
    fn allows_everything_else() {
        let chain = chain(fischers());
        for mut a in [
            attrs(Operation::Create, "Flunder", "flunders", "good"),
            // generateName only: no name at admission time.
            attrs(Operation::Create, "Flunder", "flunders", ""),
            // Fischers are never checked.
            attrs(Operation::Create, "Fischer", "fischers", "bad-flunder"),
            // Only CREATE is handled.
            attrs(Operation::Update, "Flunder", "flunders", "bad-flunder"),
            attrs(Operation::Delete, "Flunder", "flunders", "bad-flunder"),
        ] {
            ready(chain.admit(&mut a)).unwrap();
        }
    }

    #[test]
    fn allows_when_fischers_are_not_served() {
        let chain = chain(None);
        let mut a = attrs(Operation::Create, "Flunder", "flunders", "bad-flunder");
        ready(chain.admit(&mut a)).unwrap();
    }
}
