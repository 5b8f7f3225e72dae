//! Bootstrap tokens (`--enable-bootstrap-token-auth`): bearer tokens
//! `<id>.<secret>` (6 and 16 characters of `[a-z0-9]`) backed by Secrets of
//! type `bootstrap.kubernetes.io/token` named `bootstrap-token-<id>` in
//! `kube-system`. A token authenticates as `system:bootstrap:<id>` in
//! `system:bootstrappers` (plus the Secret's `auth-extra-groups`) when the
//! Secret matches, allows authentication
//! (`usage-bootstrap-authentication: "true"`), is not being deleted and has
//! not expired.

use base64::Engine;
use serde_json::Value;

use super::UserInfo;
use crate::registry::Store;

/// The Secret type of bootstrap tokens.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// The group every bootstrap token user is in.
pub const BOOTSTRAPPERS_GROUP: &str = "system:bootstrappers";

/// Splits a bootstrap token into its id and secret; `None` when the token
/// does not have the bootstrap format.
fn parse(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

fn data(secret: &Value, key: &str) -> Option<String> {
    let encoded = secret.get("data")?.get(key)?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// Authenticates `token` against the Secrets in `secrets`; `None` when it
/// is not a valid bootstrap token.
pub(super) async fn authenticate(secrets: &Store, token: &str) -> Option<UserInfo> {
    let (id, token_secret) = parse(token)?;
    let secret = secrets
        .get("kube-system", &format!("bootstrap-token-{id}"), Some(0))
        .await
        .ok()?;
    if secret.get("type").and_then(Value::as_str) != Some(SECRET_TYPE)
        || secret
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null())
    {
        return None;
    }
    if data(&secret, "token-id").as_deref() != Some(id) {
        return None;
    }
    let stored = data(&secret, "token-secret")?;
    if !super::constant_time_eq(stored.as_bytes(), token_secret.as_bytes()) {
        return None;
    }
    if data(&secret, "usage-bootstrap-authentication").as_deref() != Some("true") {
        return None;
    }
    if let Some(expiration) = data(&secret, "expiration") {
        let expires: jiff::Timestamp = expiration.parse().ok()?;
        if expires <= jiff::Timestamp::now() {
            tracing::debug!(token_id = id, "bootstrap token expired");
            return None;
        }
    }
    let mut groups = vec![BOOTSTRAPPERS_GROUP.to_string()];
    for g in data(&secret, "auth-extra-groups")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|g| g.starts_with("system:bootstrappers:"))
    {
        if !groups.iter().any(|x| x == g) {
            groups.push(g.to_string());
        }
    }
    Some(UserInfo {
        name: format!("system:bootstrap:{id}"),
        groups,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_format() {
        assert_eq!(
            parse("abcdef.0123456789abcdef"),
            Some(("abcdef", "0123456789abcdef"))
        );
        assert_eq!(parse("ABCDEF.0123456789abcdef"), None);
        assert_eq!(parse("abcdef0123456789abcdef"), None);
        assert_eq!(parse("abcde.0123456789abcdef"), None);
    }
}
