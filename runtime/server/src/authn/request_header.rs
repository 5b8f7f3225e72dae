//! Request-header authentication (`--requestheader-*`): an authenticating
//! front proxy presents a client certificate signed by
//! `--requestheader-client-ca-file` (with a CN in
//! `--requestheader-allowed-names`, any when empty) and names the user in
//! headers — `X-Remote-User`, every `X-Remote-Group`, `X-Remote-Uid` and
//! `X-Remote-Extra-<key>` by default. The headers are removed once read.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use http::HeaderMap;

use super::{ClientCertificate, UserInfo, Verifier, x509};

/// The `--requestheader-*` flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// `--requestheader-client-ca-file`: the CA of front-proxy client
    /// certificates; request-header authentication is off without it.
    pub client_ca_file: Option<PathBuf>,
    /// `--requestheader-allowed-names`: the CNs allowed (empty: any).
    pub allowed_names: Vec<String>,
    /// `--requestheader-username-headers`: the first non-empty one names
    /// the user.
    pub username_headers: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub uid_headers: Vec<String>,
    /// `--requestheader-group-headers`: every value is a group.
    pub group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`: `<prefix><key>` values are
    /// extra (key percent-decoded and lower-cased).
    pub extra_headers_prefix: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            client_ca_file: None,
            allowed_names: Vec::new(),
            username_headers: vec!["X-Remote-User".into()],
            uid_headers: vec!["X-Remote-Uid".into()],
            group_headers: vec!["X-Remote-Group".into()],
            extra_headers_prefix: vec!["X-Remote-Extra-".into()],
        }
    }
}

/// Request-header settings that change while the server runs (a
/// delegating server's, looked up in the
/// `kube-system/extension-apiserver-authentication` ConfigMap): header
/// names and allowed names, shared between the authenticator and whatever
/// keeps them current. Its CA file is given separately.
#[derive(Clone, Debug, Default)]
pub struct SharedHeaders(Arc<RwLock<Arc<Options>>>);

impl PartialEq for SharedHeaders {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl SharedHeaders {
    /// Settings holding `options` (header names are compared lower-cased).
    pub fn new(options: &Options) -> Self {
        SharedHeaders(Arc::new(RwLock::new(Arc::new(normalized(options)))))
    }

    /// Replaces the settings; returns whether they changed.
    pub fn set(&self, options: &Options) -> bool {
        let next = normalized(options);
        let mut current = self.0.write().unwrap_or_else(|p| p.into_inner());
        if **current == next {
            return false;
        }
        *current = Arc::new(next);
        true
    }

    /// The settings now.
    pub fn get(&self) -> Arc<Options> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The configured authenticator.
#[derive(Clone)]
pub(super) struct RequestHeader {
    options: SharedHeaders,
    verifier: Verifier,
}

fn lower(names: &[String]) -> Vec<String> {
    names
        .iter()
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .collect()
}

fn normalized(options: &Options) -> Options {
    Options {
        username_headers: lower(&options.username_headers),
        uid_headers: lower(&options.uid_headers),
        group_headers: lower(&options.group_headers),
        extra_headers_prefix: lower(&options.extra_headers_prefix),
        allowed_names: options
            .allowed_names
            .iter()
            .filter(|n| !n.trim().is_empty())
            .cloned()
            .collect(),
        ..options.clone()
    }
}

impl RequestHeader {
    /// The authenticator of fixed `options`, or of `shared` ones that
    /// change while the server runs.
    pub(super) fn new(
        options: &Options,
        shared: Option<&SharedHeaders>,
        verifier: Verifier,
    ) -> Self {
        let options = match shared {
            Some(shared) => shared.clone(),
            None => SharedHeaders::new(options),
        };
        RequestHeader { options, verifier }
    }

    /// `Ok(Some)` for a front-proxy request naming a user, `Ok(None)` when
    /// the certificate is not a front proxy's or no user is named, `Err`
    /// for a front-proxy certificate whose CN is not allowed.
    pub(super) fn authenticate(
        &self,
        cert: &ClientCertificate,
        headers: &mut HeaderMap,
    ) -> Result<Option<UserInfo>, ()> {
        if !cert.verified_by(self.verifier.as_ref()) {
            return Ok(None);
        }
        let options = self.options.get();
        let cn = x509::subject(cert.leaf())
            .map(|s| s.common_name)
            .unwrap_or_default();
        if !options.allowed_names.is_empty() && !options.allowed_names.contains(&cn) {
            tracing::debug!(%cn, "request-header client certificate CN not allowed");
            return Err(());
        }
        let values = |headers: &HeaderMap, name: &str| -> Vec<String> {
            headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_string)
                .collect()
        };
        let Some(name) = options
            .username_headers
            .iter()
            .flat_map(|h| values(headers, h))
            .find(|v| !v.is_empty())
        else {
            return Ok(None);
        };
        let uid = options
            .uid_headers
            .iter()
            .flat_map(|h| values(headers, h))
            .find(|v| !v.is_empty())
            .unwrap_or_default();
        let groups: Vec<String> = options
            .group_headers
            .iter()
            .flat_map(|h| values(headers, h))
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut extra_names = Vec::new();
        for name in headers.keys().map(|k| k.as_str().to_string()) {
            if let Some(prefix) = options
                .extra_headers_prefix
                .iter()
                .find(|p| !p.is_empty() && name.starts_with(p.as_str()))
            {
                let key = percent_decode(&name[prefix.len()..]).to_lowercase();
                extra.entry(key).or_default().extend(values(headers, &name));
                extra_names.push(name);
            }
        }
        for h in options
            .username_headers
            .iter()
            .chain(&options.uid_headers)
            .chain(&options.group_headers)
            .chain(&extra_names)
        {
            headers.remove(h.as_str());
        }
        Ok(Some(UserInfo {
            name,
            uid,
            groups,
            extra,
        }))
    }
}

/// Decodes `%XX` escapes (invalid escapes are kept as they are).
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
