//! Impersonation (the generic apiserver's `WithImpersonation`):
//! `Impersonate-User`, `Impersonate-Group` (repeatable),
//! `Impersonate-Uid` and `Impersonate-Extra-<key>` (repeatable) headers let
//! an authenticated user act as another. Each requested attribute is
//! authorized for the real user with the verb `impersonate` (on `users` or
//! `serviceaccounts`, `groups`, `uids` and `userextras/<key>`); any refusal
//! is a 403. The headers are removed once applied.

use std::collections::BTreeMap;

use http::HeaderMap;

use crate::authn::request_header::percent_decode;
use crate::authz::{Attributes, Authorizer, Decision, forbidden};
use crate::error::ApiError;
use crate::request::user::{
    ANONYMOUS_USER, AUTHENTICATED_GROUP, MASTERS_GROUP, SERVICE_ACCOUNT_PREFIX,
    UNAUTHENTICATED_GROUP, UserInfo, user_of,
};
use apiforge_core::meta::Status;

/// `Impersonate-User`.
pub const USER_HEADER: &str = "impersonate-user";
/// `Impersonate-Group`.
pub const GROUP_HEADER: &str = "impersonate-group";
/// `Impersonate-Uid`.
pub const UID_HEADER: &str = "impersonate-uid";
/// Prefix of `Impersonate-Extra-<key>`.
pub const EXTRA_HEADER_PREFIX: &str = "impersonate-extra-";

/// The group of all service accounts.
const SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
/// The API group of the `uids` and `userextras` impersonation resources.
const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";

/// Applies the impersonation headers of a request made by `requestor`:
/// returns the user to act as (the requestor when there are none).
pub async fn impersonate(
    authorizer: &Authorizer,
    requestor: UserInfo,
    headers: &mut HeaderMap,
) -> Result<UserInfo, ApiError> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect()
    };
    let user = values(USER_HEADER).into_iter().next();
    let groups = values(GROUP_HEADER);
    let uid = values(UID_HEADER).into_iter().next();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let extra_headers: Vec<String> = headers
        .keys()
        .map(|k| k.as_str())
        .filter(|k| k.starts_with(EXTRA_HEADER_PREFIX))
        .map(str::to_string)
        .collect();
    for name in &extra_headers {
        let key = percent_decode(&name[EXTRA_HEADER_PREFIX.len()..]).to_lowercase();
        extra.entry(key).or_default().extend(values(name));
    }
    let Some(user) = user else {
        if groups.is_empty() && uid.is_none() && extra.is_empty() {
            return Ok(requestor);
        }
        let mut requested: Vec<String> = groups
            .iter()
            .map(|g| format!("{{Group  {g}    }}"))
            .collect();
        for (k, vs) in &extra {
            for v in vs {
                requested.push(format!(
                    "{{UserExtra  {v}  {AUTHENTICATION_GROUP}/v1  {k}}}"
                ));
            }
        }
        if let Some(u) = &uid {
            requested.push(format!("{{UID  {u}  {AUTHENTICATION_GROUP}/v1  }}"));
        }
        return Err(Status::bad_request(format!(
            "requested [{}] without impersonating a user",
            requested.join(" ")
        ))
        .into());
    };

    let check =
        async |group: &str, resource: &str, subresource: &str, namespace: &str, name: &str| {
            let attrs = Attributes {
                user: requestor.clone(),
                verb: "impersonate".into(),
                resource_request: true,
                namespace: namespace.into(),
                api_group: group.into(),
                resource: resource.into(),
                subresource: subresource.into(),
                name: name.into(),
                ..Default::default()
            };
            match authorizer.authorize(&attrs).await {
                (Decision::Allow, _) => Ok(()),
                (_, reason) => Err(ApiError::from(forbidden(&attrs, &reason))),
            }
        };

    let mut effective_groups = groups.clone();
    match user
        .strip_prefix(SERVICE_ACCOUNT_PREFIX)
        .and_then(|rest| rest.split_once(':'))
    {
        Some((ns, name)) => {
            check("", "serviceaccounts", "", ns, name).await?;
            if groups.is_empty() {
                effective_groups = vec![
                    SERVICE_ACCOUNTS_GROUP.to_string(),
                    format!("{SERVICE_ACCOUNTS_GROUP}:{ns}"),
                ];
            }
        }
        None => check("", "users", "", "", &user).await?,
    }
    for g in &groups {
        check("", "groups", "", "", g).await?;
    }
    for (k, vs) in &extra {
        for v in vs {
            check(AUTHENTICATION_GROUP, "userextras", k, "", v).await?;
        }
    }
    if let Some(u) = &uid {
        check(AUTHENTICATION_GROUP, "uids", "", "", u).await?;
    }

    let marker = if user == ANONYMOUS_USER {
        UNAUTHENTICATED_GROUP
    } else {
        AUTHENTICATED_GROUP
    };
    if !effective_groups.iter().any(|g| g == marker) {
        effective_groups.push(marker.to_string());
    }
    headers.remove(USER_HEADER);
    headers.remove(GROUP_HEADER);
    headers.remove(UID_HEADER);
    for name in &extra_headers {
        headers.remove(name.as_str());
    }
    tracing::debug!(requestor = %requestor.name, user = %user, "impersonating");
    Ok(UserInfo {
        name: user,
        uid: uid.unwrap_or_default(),
        groups: effective_groups,
        extra,
    })
}

/// The impersonation filter: replaces the authenticated [`UserInfo`] in
/// the request's extensions by the impersonated one (403 or 400 when not
/// allowed), and marks `system:masters` requests exempt from the
/// max-in-flight limit.
pub async fn filter(
    authorizer: &Authorizer,
    mut req: axum::extract::Request,
    next: impl super::Next,
) -> axum::response::Response {
    let impersonating = req
        .headers()
        .keys()
        .any(|k| k.as_str().starts_with("impersonate-"));
    if !impersonating {
        // Without `Impersonate-*` headers [`impersonate`] returns the
        // requestor unchanged: keep the authenticated user as it is.
        let masters = match user_of(&req) {
            Some(user) => user.in_group(MASTERS_GROUP),
            None => {
                req.extensions_mut()
                    .insert(std::sync::Arc::new(UserInfo::anonymous()));
                false
            }
        };
        if masters {
            req.extensions_mut().insert(crate::request::LimitExempt);
        }
        return next.run(req).await;
    }
    let requestor = user_of(&req).map_or_else(UserInfo::anonymous, |u| UserInfo::clone(u));
    // Boxed: a large future, on the rare impersonating requests only.
    match Box::pin(impersonate(authorizer, requestor, req.headers_mut())).await {
        Ok(user) => {
            if impersonating {
                crate::audit::record_impersonated_user(&req, &user);
            }
            if user.in_group(MASTERS_GROUP) {
                req.extensions_mut().insert(crate::request::LimitExempt);
            }
            req.extensions_mut().insert(std::sync::Arc::new(user));
            next.run(req).await
        }
        Err(e) => crate::request::response::error_response(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::{Authorize, Decision};
    use std::sync::Arc;

    /// Allows alice to impersonate `bob` and group `dev` only.
    struct OnlyBob;

    #[async_trait::async_trait]
    impl Authorize for OnlyBob {
        async fn authorize(
            &self,
            a: &Attributes,
        ) -> Result<(Decision, String), crate::authz::EvaluationError> {
            let ok = a.verb == "impersonate"
                && ((a.resource == "users" && a.name == "bob")
                    || (a.resource == "groups" && a.name == "dev")
                    || (a.resource == "userextras" && a.subresource == "scopes"));
            Ok(if ok {
                (Decision::Allow, String::new())
            } else {
                (Decision::NoOpinion, String::new())
            })
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            if let (Ok(k), Ok(v)) = (
                http::HeaderName::from_bytes(k.as_bytes()),
                http::HeaderValue::from_str(v),
            ) {
                h.append(k, v);
            }
        }
        h
    }

    #[tokio::test]
    async fn impersonation() {
        let authz = Authorizer::from_parts(vec![Arc::new(OnlyBob)]);
        let alice = UserInfo::new("alice", &[AUTHENTICATED_GROUP]);
        let mut h = headers(&[
            ("Impersonate-User", "bob"),
            ("Impersonate-Group", "dev"),
            ("Impersonate-Extra-Scopes", "view"),
        ]);
        let u = impersonate(&authz, alice.clone(), &mut h)
            .await
            .unwrap_or_default();
        assert_eq!(u.name, "bob");
        assert_eq!(u.groups, ["dev", AUTHENTICATED_GROUP]);
        assert_eq!(u.extra["scopes"], ["view"]);
        assert!(h.is_empty());

        let mut h = headers(&[("Impersonate-User", "carol")]);
        let err = impersonate(&authz, alice.clone(), &mut h).await.err();
        assert_eq!(
            err.map(|e| e.0.message.clone()).unwrap_or_default(),
            "users \"carol\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        );
        let mut h = headers(&[("Impersonate-Group", "dev")]);
        assert_eq!(
            impersonate(&authz, alice.clone(), &mut h)
                .await
                .map_err(|e| e.code())
                .err(),
            Some(400)
        );
        let mut h = HeaderMap::new();
        assert_eq!(
            impersonate(&authz, alice.clone(), &mut h)
                .await
                .unwrap_or_default(),
            alice
        );
    }
}
