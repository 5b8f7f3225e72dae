//! List continue tokens, in kube-apiserver's etcd3 format: base64url
//! (unpadded) of `{"v":"meta.k8s.io/v1","rv":<revision>,"start":<key>}`,
//! the start key relative to the collection's storage prefix, so a token
//! cannot reach outside the collection it was issued for.

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::error::{ApiError, ApiResult};
use apiforge_core::meta::Status;
use apiforge_storage::Revision;

/// A decoded continue token: where the next page starts, and at which
/// revision the list is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContinueToken {
    /// The revision of the first page (-1: read at the latest revision,
    /// the inconsistent continuation of a compacted list).
    pub revision: Revision,
    /// The full storage key the next page starts at (the prefix included).
    pub start: String,
}

/// The token as it travels.
#[derive(Serialize, Deserialize)]
struct Wire {
    v: String,
    rv: Revision,
    start: String,
}

const VERSION: &str = "meta.k8s.io/v1";

/// The token for a list of the collection under `prefix` at `revision`
/// whose next page starts at the storage key `start`.
pub fn encode(revision: Revision, start: &str, prefix: &str) -> String {
    let start = start.strip_prefix(prefix).unwrap_or(start);
    let token = Wire {
        v: VERSION.into(),
        rv: revision,
        start: start.into(),
    };
    let json = serde_json::to_vec(&token).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
}

/// Reads a client's `continue` parameter for the collection under
/// `prefix`: a 400 as kube-apiserver's when it is not a token this server
/// could have issued (another format or version, revision 0 or below -1, a
/// start key that is absolute or climbs with `..`).
pub fn decode(token: &str, prefix: &str) -> ApiResult<ContinueToken> {
    let invalid = || {
        ApiError::from(Status::bad_request(
            "invalid continue token: continue key is not valid",
        ))
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| invalid())?;
    let t: Wire = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    if t.v != VERSION
        || t.rv == 0
        || t.rv < -1
        || t.start.contains("..")
        || t.start.starts_with('/')
    {
        return Err(invalid());
    }
    Ok(ContinueToken {
        revision: t.rv,
        start: format!("{prefix}{}", t.start),
    })
}

/// The 410 for a continue token whose revision was compacted away, as
/// kube-apiserver's etcd3 store answers it: the message offers an
/// inconsistent continuation, and `metadata.continue` carries it (the same
/// start key at resourceVersion -1, i.e. read at the latest revision).
pub(crate) fn expired(start: &str, prefix: &str) -> ApiError {
    let mut status = Status::expired(concat!(
        "The provided continue parameter is too old to display a consistent list result. ",
        "You can start a new list without the continue parameter, or use the continue token ",
        "in this response to retrieve the remainder of the results. Continuing with the ",
        "provided token results in an inconsistent list - objects that were created, ",
        "modified, or deleted between the time the first chunk was returned and now may ",
        "show up in the list."
    ));
    status.metadata.continue_ = encode(-1, start, prefix);
    status.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: &str = "/registry/configmaps/default/";

    #[test]
    fn a_token_reads_back_as_issued() {
        let token = encode(42, "/registry/configmaps/default/b\u{0}", PREFIX);
        assert_eq!(
            decode(&token, PREFIX).unwrap(),
            ContinueToken {
                revision: 42,
                start: "/registry/configmaps/default/b\u{0}".into()
            }
        );
    }

    #[test]
    fn tokens_this_server_could_not_have_issued_are_400() {
        let raw = |json: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
        for token in [
            "not base64!".to_string(),
            raw("[]"),
            raw(r#"{"v":"meta.k8s.io/v2","rv":1,"start":"a"}"#),
            raw(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#),
            raw(r#"{"v":"meta.k8s.io/v1","rv":-2,"start":"a"}"#),
            raw(r#"{"v":"meta.k8s.io/v1","rv":1,"start":"../secrets/x"}"#),
            raw(r#"{"v":"meta.k8s.io/v1","rv":1,"start":"/registry/secrets/x"}"#),
        ] {
            let err = decode(&token, PREFIX).unwrap_err();
            assert_eq!(err.code(), 400, "{token}");
        }
    }
}
