//! The CEL authorizer library of admission expressions (upstream's
//! `k8s.io/apiserver/pkg/cel/library/authz.go`): the `authorizer` variable
//! of match conditions, validating and mutating admission policies, with
//! which an expression asks the server's authorizer about the requesting
//! user (or a service account):
//!
//! ```text
//! authorizer.group('apps').resource('deployments').namespace('ns').name('x')
//!     .subresource('scale').check('update').allowed()
//! authorizer.path('/healthz').check('get').reason()
//! authorizer.serviceAccount('ns', 'sa').group('').resource('pods').check('list').errored()
//! authorizer.requestResource.check('delete').allowed()
//! ```
//!
//! `check` asks the [`Checker`] the server binds ([`bind`]); the answer is
//! a `Decision` with `allowed()`, `reason()`, `errored()` and `error()`.
//! Resource checks are made with `apiVersion: "*"`, as upstream's.
//! `authorizer.requestResource` is the request's own group, resource,
//! subresource, namespace and name.

use std::any::Any;
use std::sync::{Arc, OnceLock};

use cel::common::types::{CelBool, CelString, Kind, Type};
use cel::common::value::{StaticVal, Val};

/// What one authorization check asks (upstream's `AttributesRecord` as the
/// library fills it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckRequest {
    /// The user the check is about.
    pub user: User,
    /// The verb.
    pub verb: String,
    /// A non-resource check's path (`None` for a resource check).
    pub path: Option<String>,
    /// A resource check's API group.
    pub group: String,
    /// A resource check's resource.
    pub resource: String,
    /// A resource check's subresource.
    pub subresource: String,
    /// A resource check's namespace.
    pub namespace: String,
    /// A resource check's object name.
    pub name: String,
}

/// The user a check is about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    /// The user name.
    pub name: String,
    /// The uid.
    pub uid: String,
    /// The groups.
    pub groups: Vec<String>,
    /// The extra attributes.
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl User {
    /// The user of a service account, as upstream's
    /// `serviceaccount.UserInfo(namespace, name, "")`.
    pub fn service_account(namespace: &str, name: &str) -> User {
        User {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            uid: String::new(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
            ],
            extra: Default::default(),
        }
    }
}

/// An authorizer's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// Whether the decision is `Allow` (`Deny` and no opinion are not).
    pub allowed: bool,
    /// The authorizer's reason.
    pub reason: String,
    /// The error of an authorizer that could not decide.
    pub error: Option<String>,
}

/// What `check` asks: the server's authorizer. Called while an expression
/// runs, so it answers synchronously.
pub trait Checker: Send + Sync {
    /// Decides on `request`.
    fn check(&self, request: &CheckRequest) -> Answer;
}

/// The request's own resource, for `authorizer.requestResource`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestResource {
    /// The API group.
    pub group: String,
    /// The resource.
    pub resource: String,
    /// The subresource.
    pub subresource: String,
    /// The namespace.
    pub namespace: String,
    /// The object name.
    pub name: String,
}

/// Binds `authorizer` (for `user`) and `authorizer.requestResource` in `ctx`.
pub fn bind(
    ctx: &mut cel::Context<'_, '_>,
    checker: Arc<dyn Checker>,
    user: User,
    request: RequestResource,
) {
    let authorizer = Authorizer { checker, user };
    let request_resource = ResourceCheck {
        authorizer: authorizer.clone(),
        group: request.group,
        resource: request.resource,
        subresource: request.subresource,
        namespace: request.namespace,
        name: request.name,
    };
    ctx.add_variable_as_val("authorizer", Box::new(authorizer));
    ctx.add_variable_as_val("authorizer.requestResource", Box::new(request_resource));
}

/// The CEL environment of admission expressions: the environment of CRD
/// rules ([`crate::apiextensions::cel_env`]) with the authorizer library.
pub fn admission_env() -> Arc<cel::Env> {
    static ENV: OnceLock<Arc<cel::Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = crate::apiextensions::rules::new_env();
        // Fixed, distinct overloads: registration cannot fail; a failure
        // would only leave a function out (its calls then fail to run).
        let _ = env.add_extension(library);
        Arc::new(env)
    })
    .clone()
}

static AUTHORIZER: Type = Type::simple_type(Kind::Opaque, "kubernetes.authorization.Authorizer");
static PATH_CHECK: Type = Type::simple_type(Kind::Opaque, "kubernetes.authorization.PathCheck");
static GROUP_CHECK: Type = Type::simple_type(Kind::Opaque, "kubernetes.authorization.GroupCheck");
static RESOURCE_CHECK: Type =
    Type::simple_type(Kind::Opaque, "kubernetes.authorization.ResourceCheck");
static DECISION: Type = Type::simple_type(Kind::Opaque, "kubernetes.authorization.Decision");

/// The `authorizer` value: who checks, for which user.
#[derive(Clone)]
struct Authorizer {
    checker: Arc<dyn Checker>,
    user: User,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("user", &self.user.name)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Debug)]
struct PathCheck {
    authorizer: Authorizer,
    path: String,
}

#[derive(Clone, Debug)]
struct GroupCheck {
    authorizer: Authorizer,
    group: String,
}

#[derive(Clone, Debug)]
struct ResourceCheck {
    authorizer: Authorizer,
    group: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Decision(Answer);

/// `Val` for a library type: its CEL type, cloning, downcasting; values
/// compare equal only to themselves (upstream's do not define equality).
macro_rules! library_val {
    ($ty:ty, $cel:expr) => {
        impl Val for $ty {
            fn get_type(&self) -> &Type {
                &$cel
            }
            fn cel_type() -> &'static Type {
                &$cel
            }
            fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
                Box::new(self.clone())
            }
            fn as_any(&self) -> Option<&dyn Any> {
                Some(self)
            }
        }
        impl StaticVal for $ty {}
    };
}

library_val!(Authorizer, AUTHORIZER);
library_val!(PathCheck, PATH_CHECK);
library_val!(GroupCheck, GROUP_CHECK);
library_val!(ResourceCheck, RESOURCE_CHECK);
library_val!(Decision, DECISION);

fn path(a: &Authorizer, path: &CelString<'_>) -> PathCheck {
    PathCheck {
        authorizer: a.clone(),
        path: path.inner().to_string(),
    }
}

fn group(a: &Authorizer, group: &CelString<'_>) -> GroupCheck {
    GroupCheck {
        authorizer: a.clone(),
        group: group.inner().to_string(),
    }
}

fn service_account(a: &Authorizer, namespace: &CelString<'_>, name: &CelString<'_>) -> Authorizer {
    Authorizer {
        checker: a.checker.clone(),
        user: User::service_account(namespace.inner(), name.inner()),
    }
}

fn resource(g: &GroupCheck, resource: &CelString<'_>) -> ResourceCheck {
    ResourceCheck {
        authorizer: g.authorizer.clone(),
        group: g.group.clone(),
        resource: resource.inner().to_string(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
    }
}

fn subresource(r: &ResourceCheck, value: &CelString<'_>) -> ResourceCheck {
    ResourceCheck {
        subresource: value.inner().to_string(),
        ..r.clone()
    }
}

fn namespace(r: &ResourceCheck, value: &CelString<'_>) -> ResourceCheck {
    ResourceCheck {
        namespace: value.inner().to_string(),
        ..r.clone()
    }
}

fn name(r: &ResourceCheck, value: &CelString<'_>) -> ResourceCheck {
    ResourceCheck {
        name: value.inner().to_string(),
        ..r.clone()
    }
}

fn path_check(p: &PathCheck, verb: &CelString<'_>) -> Decision {
    let request = CheckRequest {
        user: p.authorizer.user.clone(),
        verb: verb.inner().to_string(),
        path: Some(p.path.clone()),
        ..Default::default()
    };
    Decision(p.authorizer.checker.check(&request))
}

fn resource_check(r: &ResourceCheck, verb: &CelString<'_>) -> Decision {
    let request = CheckRequest {
        user: r.authorizer.user.clone(),
        verb: verb.inner().to_string(),
        path: None,
        group: r.group.clone(),
        resource: r.resource.clone(),
        subresource: r.subresource.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    };
    Decision(r.authorizer.checker.check(&request))
}

fn allowed(d: &Decision) -> CelBool {
    CelBool::from(d.0.allowed)
}

fn reason(d: &Decision) -> CelString<'static> {
    CelString::from(d.0.reason.clone())
}

fn errored(d: &Decision) -> CelBool {
    CelBool::from(d.0.error.is_some())
}

fn error(d: &Decision) -> CelString<'static> {
    CelString::from(d.0.error.clone().unwrap_or_default())
}

fn library(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    cel::add_member_overload!(env, fn path: (Authorizer, CelString) -> PathCheck)?;
    cel::add_member_overload!(env, fn group: (Authorizer, CelString) -> GroupCheck)?;
    cel::add_member_overload!(env, fn service_account: (Authorizer, CelString, CelString) -> Authorizer)?;
    cel::add_member_overload!(env, fn resource: (GroupCheck, CelString) -> ResourceCheck)?;
    cel::add_member_overload!(env, fn subresource: (ResourceCheck, CelString) -> ResourceCheck)?;
    cel::add_member_overload!(env, fn namespace: (ResourceCheck, CelString) -> ResourceCheck)?;
    cel::add_member_overload!(env, fn name: (ResourceCheck, CelString) -> ResourceCheck)?;
    cel::add_member_overload!(env, fn path_check: (PathCheck, CelString) -> Decision, name = "check")?;
    cel::add_member_overload!(env, fn resource_check: (ResourceCheck, CelString) -> Decision, name = "check")?;
    cel::add_member_overload!(env, fn allowed: (Decision) -> CelBool)?;
    cel::add_member_overload!(env, fn reason: (Decision) -> CelString)?;
    cel::add_member_overload!(env, fn errored: (Decision) -> CelBool)?;
    cel::add_member_overload!(env, fn error: (Decision) -> CelString)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Allows `get` on `/healthz` and `list` of `apps/deployments` in `ns`
    /// for `alice`; fails for `broken`; records every request.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<CheckRequest>>);

    impl Checker for Recorder {
        fn check(&self, request: &CheckRequest) -> Answer {
            self.0.lock().expect("lock").push(request.clone());
            if request.user.name == "broken" {
                return Answer {
                    allowed: false,
                    reason: String::new(),
                    error: Some("webhook unreachable".into()),
                };
            }
            let allowed = request.user.name == "alice"
                && (request.path.as_deref() == Some("/healthz") && request.verb == "get"
                    || request.group == "apps"
                        && request.resource == "deployments"
                        && request.namespace == "ns"
                        && request.verb == "list");
            Answer {
                allowed,
                reason: if allowed {
                    "RBAC: allowed".into()
                } else {
                    String::new()
                },
                error: None,
            }
        }
    }

    fn run(expr: &str, user: &str, checker: Arc<Recorder>) -> Result<cel::Value, String> {
        let program = admission_env().compile(expr).map_err(|e| e.to_string())?;
        let mut ctx = cel::Context::with_env(admission_env());
        bind(
            &mut ctx,
            checker,
            User {
                name: user.into(),
                ..Default::default()
            },
            RequestResource {
                group: "apps".into(),
                resource: "deployments".into(),
                subresource: "scale".into(),
                namespace: "ns".into(),
                name: "web".into(),
            },
        );
        program.execute(&ctx).map_err(|e| e.to_string())
    }

    #[test]
    fn resource_and_path_checks_ask_the_checker() {
        let checker = Arc::new(Recorder::default());
        let allowed = "authorizer.group('apps').resource('deployments').namespace('ns').check('list').allowed()";
        assert_eq!(
            run(allowed, "alice", checker.clone()),
            Ok(cel::Value::Bool(true))
        );
        assert_eq!(
            run(allowed, "bob", checker.clone()),
            Ok(cel::Value::Bool(false))
        );
        assert_eq!(
            run(
                "authorizer.path('/healthz').check('get').reason()",
                "alice",
                checker.clone()
            ),
            Ok(cel::Value::String(Arc::new("RBAC: allowed".into())))
        );
        let seen = checker.0.lock().expect("lock").clone();
        assert_eq!(
            seen[0],
            CheckRequest {
                user: User {
                    name: "alice".into(),
                    ..Default::default()
                },
                verb: "list".into(),
                group: "apps".into(),
                resource: "deployments".into(),
                namespace: "ns".into(),
                ..Default::default()
            }
        );
        assert_eq!(seen[2].path.as_deref(), Some("/healthz"));
    }

    #[test]
    fn subresource_name_service_accounts_and_the_request_resource() {
        let checker = Arc::new(Recorder::default());
        run(
            "authorizer.serviceAccount('kube-system', 'ctl').group('').resource('pods').subresource('log').name('p').check('get').allowed()",
            "alice",
            checker.clone(),
        )
        .expect("runs");
        run(
            "authorizer.requestResource.check('update').allowed()",
            "alice",
            checker.clone(),
        )
        .expect("runs");
        let seen = checker.0.lock().expect("lock").clone();
        assert_eq!(seen[0].user, User::service_account("kube-system", "ctl"));
        assert_eq!(
            seen[0].user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system"
            ]
        );
        assert_eq!(
            (
                seen[0].resource.as_str(),
                seen[0].subresource.as_str(),
                seen[0].name.as_str()
            ),
            ("pods", "log", "p")
        );
        assert_eq!(
            (
                seen[1].group.as_str(),
                seen[1].resource.as_str(),
                seen[1].subresource.as_str(),
                seen[1].namespace.as_str(),
                seen[1].name.as_str(),
                seen[1].verb.as_str(),
            ),
            ("apps", "deployments", "scale", "ns", "web", "update")
        );
    }

    #[test]
    fn errors_are_reported_by_the_decision() {
        let checker = Arc::new(Recorder::default());
        let expr = "authorizer.path('/x').check('get')";
        assert_eq!(
            run(&format!("{expr}.errored()"), "broken", checker.clone()),
            Ok(cel::Value::Bool(true))
        );
        assert_eq!(
            run(&format!("{expr}.error()"), "broken", checker.clone()),
            Ok(cel::Value::String(Arc::new("webhook unreachable".into())))
        );
        assert_eq!(
            run(&format!("{expr}.error()"), "alice", checker.clone()),
            Ok(cel::Value::String(Arc::new(String::new())))
        );
        // The library's functions take only its own types.
        assert!(run("'x'.check('get')", "alice", checker.clone()).is_err());
        assert!(run("authorizer.allowed()", "alice", checker).is_err());
    }
}
