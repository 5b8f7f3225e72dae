//! Delegated authentication, as k8s.io/apiserver's
//! `DelegatingAuthenticationOptions` (an aggregated API server's): bearer
//! tokens are checked by TokenReviews against the main ("core") API server
//! named by `--authentication-kubeconfig` (cached for
//! `--authentication-token-webhook-cache-ttl`, 10s), and, unless
//! `--authentication-skip-lookup`, the client CA and the request-header
//! settings missing from the flags are looked up in the main server's
//! ConfigMap `kube-system/extension-apiserver-authentication`:
//!
//! - `client-ca-file` when `--client-ca-file` is not given;
//! - `requestheader-client-ca-file`, `requestheader-username-headers`,
//!   `requestheader-uid-headers`, `requestheader-group-headers`,
//!   `requestheader-extra-headers-prefix` and `requestheader-allowed-names`
//!   (JSON string arrays) when `--requestheader-client-ca-file` is not
//!   given (then every `--requestheader-*` flag is ignored, as upstream).
//!
//! The ConfigMap is read once at start-up (a failure is fatal only with
//! `--authentication-tolerate-lookup-failure=false`; a missing ConfigMap
//! is no failure), then re-read every [`RESYNC_INTERVAL`] (upstream watches
//! it with an informer). The CA bundles are written into files under the
//! data directory that the TLS layer and the authenticators re-read when
//! they change ([`super::client_ca::RELOAD_INTERVAL`]); the header names
//! change in place. A re-read that fails keeps the last settings.
//!
//! [`Info`] is also the main server's side: the ConfigMap's contents,
//! written by `controllers::authentication_trust`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::request_header::{self, SharedHeaders};
use crate::webhook::Client;

/// The namespace of the authentication ConfigMap.
pub const CONFIGMAP_NAMESPACE: &str = "kube-system";
/// The name of the authentication ConfigMap.
pub const CONFIGMAP_NAME: &str = "extension-apiserver-authentication";
/// How often a delegating server re-reads the ConfigMap.
pub const RESYNC_INTERVAL: Duration = Duration::from_secs(5);
/// The TokenReview path on the main server.
pub const TOKEN_REVIEWS_PATH: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

/// The delegated authentication flags.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--authentication-kubeconfig` (else `--kubeconfig`): the main
    /// server and a user allowed to create TokenReviews and read the
    /// ConfigMap.
    pub kubeconfig: PathBuf,
    /// `--authentication-token-webhook-cache-ttl` (10s when delegating).
    pub cache_ttl: Duration,
    /// `--authentication-skip-lookup`.
    pub skip_lookup: bool,
    /// `--authentication-tolerate-lookup-failure` (true).
    pub tolerate_lookup_failure: bool,
    /// Where the looked-up CA bundles are written (`<data-dir>/delegated-authentication`).
    pub dir: PathBuf,
}

/// What the lookup manages, for the authenticators and the TLS layer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LookedUp {
    /// The file holding the ConfigMap's `client-ca-file` (when
    /// `--client-ca-file` is not given); absent or empty when it has none.
    pub client_ca_file: Option<PathBuf>,
    /// The file holding `requestheader-client-ca-file` and the header
    /// settings (when `--requestheader-client-ca-file` is not given).
    pub request_header: Option<(PathBuf, SharedHeaders)>,
}

impl LookedUp {
    /// The CA files the lookup writes.
    pub fn ca_files(&self) -> Vec<PathBuf> {
        self.client_ca_file
            .iter()
            .cloned()
            .chain(self.request_header.iter().map(|(p, _)| p.clone()))
            .collect()
    }
}

/// The authentication settings of the ConfigMap (upstream's
/// `ClusterAuthenticationInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Info {
    /// `client-ca-file` (PEM).
    pub client_ca: String,
    /// `requestheader-client-ca-file` (PEM).
    pub request_header_ca: String,
    /// `requestheader-username-headers`.
    pub username_headers: Vec<String>,
    /// `requestheader-uid-headers`.
    pub uid_headers: Vec<String>,
    /// `requestheader-group-headers`.
    pub group_headers: Vec<String>,
    /// `requestheader-extra-headers-prefix`.
    pub extra_headers_prefix: Vec<String>,
    /// `requestheader-allowed-names`.
    pub allowed_names: Vec<String>,
}

impl Info {
    /// Reads a ConfigMap's `data`; a key that is not a JSON string array
    /// is an error (as upstream's `deserializeStrings`).
    pub fn from_data(data: &Value) -> Result<Self, String> {
        let text = |key: &str| {
            data.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let list = |key: &str| -> Result<Vec<String>, String> {
            let raw = text(key);
            if raw.is_empty() {
                return Ok(Vec::new());
            }
            let parsed: Option<Vec<String>> =
                serde_json::from_str(&raw).map_err(|e| format!("{key}: {e}"))?;
            Ok(parsed.unwrap_or_default())
        };
        Ok(Info {
            client_ca: text("client-ca-file"),
            request_header_ca: text("requestheader-client-ca-file"),
            username_headers: list("requestheader-username-headers")?,
            uid_headers: list("requestheader-uid-headers")?,
            group_headers: list("requestheader-group-headers")?,
            extra_headers_prefix: list("requestheader-extra-headers-prefix")?,
            allowed_names: list("requestheader-allowed-names")?,
        })
    }

    /// The ConfigMap `data` upstream writes: `client-ca-file` when there
    /// is a client CA; the `requestheader-*` keys only with a
    /// request-header CA, lists as JSON arrays.
    pub fn to_data(&self) -> BTreeMap<String, String> {
        let mut data = BTreeMap::new();
        if !self.client_ca.is_empty() {
            data.insert("client-ca-file".into(), self.client_ca.clone());
        }
        if self.request_header_ca.is_empty() {
            return data;
        }
        let json = |v: &Vec<String>| serde_json::to_string(v).unwrap_or_else(|_| "[]".into());
        data.insert(
            "requestheader-username-headers".into(),
            json(&self.username_headers),
        );
        data.insert("requestheader-uid-headers".into(), json(&self.uid_headers));
        data.insert(
            "requestheader-group-headers".into(),
            json(&self.group_headers),
        );
        data.insert(
            "requestheader-extra-headers-prefix".into(),
            json(&self.extra_headers_prefix),
        );
        data.insert(
            "requestheader-client-ca-file".into(),
            self.request_header_ca.clone(),
        );
        data.insert(
            "requestheader-allowed-names".into(),
            json(&self.allowed_names),
        );
        data
    }

    /// The union of two servers' settings, as upstream's
    /// `combinedClusterAuthenticationInfo`: lists keep their first
    /// occurrence of each value; CA bundles keep each certificate once
    /// (`self`'s first).
    pub fn combined(&self, other: &Info) -> Info {
        let union = |a: &Vec<String>, b: &Vec<String>| {
            let mut out: Vec<String> = Vec::new();
            for v in a.iter().chain(b) {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            out
        };
        Info {
            client_ca: combine_pem(&self.client_ca, &other.client_ca),
            request_header_ca: combine_pem(&self.request_header_ca, &other.request_header_ca),
            username_headers: union(&self.username_headers, &other.username_headers),
            uid_headers: union(&self.uid_headers, &other.uid_headers),
            group_headers: union(&self.group_headers, &other.group_headers),
            extra_headers_prefix: union(&self.extra_headers_prefix, &other.extra_headers_prefix),
            allowed_names: union(&self.allowed_names, &other.allowed_names),
        }
    }

    /// The request-header settings (with the CA file `ca_file`).
    fn request_header(&self, ca_file: PathBuf) -> request_header::Options {
        request_header::Options {
            client_ca_file: Some(ca_file),
            allowed_names: self.allowed_names.clone(),
            username_headers: self.username_headers.clone(),
            uid_headers: self.uid_headers.clone(),
            group_headers: self.group_headers.clone(),
            extra_headers_prefix: self.extra_headers_prefix.clone(),
        }
    }
}

/// The PEM blocks of `a` then those of `b` not in `a`, each ending in a
/// newline.
fn combine_pem(a: &str, b: &str) -> String {
    let mut blocks: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    for line in a.lines().chain(b.lines()).map(str::trim) {
        if line.starts_with("-----BEGIN ") {
            current = Some(String::new());
        }
        if let Some(block) = current.as_mut() {
            block.push_str(line);
            block.push('\n');
        }
        if line.starts_with("-----END ")
            && let Some(block) = current.take()
            && !blocks.contains(&block)
        {
            blocks.push(block);
        }
    }
    blocks.concat()
}

/// Writes `contents` to `path` through a temporary file and a rename, so
/// that readers never see half a file.
fn write_atomically(path: &std::path::Path, contents: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents)?;
    std::fs::rename(&tmp, path)
}

/// The looked-up settings kept current.
#[derive(Debug)]
pub struct Lookup {
    client: Client,
    looked_up: LookedUp,
    last: Option<Info>,
}

impl Lookup {
    /// Reads the ConfigMap once (unless the flags give everything or
    /// `--authentication-skip-lookup`), writes its CA bundles and records
    /// what it manages in `options.looked_up`. `None` when there is
    /// nothing to keep current.
    pub async fn start(options: &mut super::Options) -> Result<Option<Lookup>, super::Error> {
        let Some(delegated) = options.delegated.clone() else {
            return Ok(None);
        };
        let manage_client_ca = options.client_ca_file.is_none();
        let manage_request_header = options.request_header.client_ca_file.is_none();
        if delegated.skip_lookup || (!manage_client_ca && !manage_request_header) {
            return Ok(None);
        }
        let client = Client::from_kubeconfig(&delegated.kubeconfig)
            .map_err(|e| e.to_string())
            .and_then(|c| {
                c.at_path(&format!(
                    "/api/v1/namespaces/{CONFIGMAP_NAMESPACE}/configmaps/{CONFIGMAP_NAME}"
                ))
            })
            .map_err(|e| super::Error::Webhook(format!("authentication-kubeconfig: {e}")))?;
        std::fs::create_dir_all(&delegated.dir)
            .map_err(|e| super::Error::Io(delegated.dir.clone(), e))?;
        let mut looked_up = LookedUp::default();
        if manage_client_ca {
            looked_up.client_ca_file = Some(delegated.dir.join("client-ca.crt"));
        }
        if manage_request_header {
            let path = delegated.dir.join("requestheader-client-ca.crt");
            let shared = SharedHeaders::new(&Info::default().request_header(path.clone()));
            looked_up.request_header = Some((path, shared));
        }
        let mut lookup = Lookup {
            client,
            looked_up: looked_up.clone(),
            last: None,
        };
        // Start from empty files: nothing from an earlier run is trusted.
        lookup.apply(&Info::default());
        lookup.last = None;
        match lookup.fetch().await {
            Ok(info) => lookup.apply(&info),
            Err(e) if delegated.tolerate_lookup_failure => {
                tracing::error!(error = %e, "Error looking up in-cluster authentication configuration");
                tracing::error!(
                    "Continuing without authentication configuration. This may treat all requests as anonymous."
                );
                tracing::error!(
                    "To require authentication configuration lookup to succeed, set --authentication-tolerate-lookup-failure=false"
                );
            }
            Err(e) => {
                return Err(super::Error::Webhook(format!(
                    "unable to load configmap based request-header-client-ca-file: {e}"
                )));
            }
        }
        options.looked_up = Some(looked_up);
        Ok(Some(lookup))
    }

    /// Reads the ConfigMap: its settings, the empty settings when it does
    /// not exist, or why it could not be read.
    async fn fetch(&self) -> Result<Info, String> {
        let (code, body) = self.client.get().await.map_err(|e| e.to_string())?;
        match code.as_u16() {
            200 => {
                let cm: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
                Info::from_data(cm.get("data").unwrap_or(&Value::Null))
            }
            404 => Ok(Info::default()),
            403 => {
                tracing::warn!(
                    "Unable to get configmap/{CONFIGMAP_NAME} in {CONFIGMAP_NAMESPACE}.  Usually fixed by 'kubectl create rolebinding -n {CONFIGMAP_NAMESPACE} ROLEBINDING_NAME --role=extension-apiserver-authentication-reader --serviceaccount=YOUR_NS:YOUR_SA'"
                );
                Err(message_of(&body, 403))
            }
            other => Err(message_of(&body, other)),
        }
    }

    /// Writes the CA files and the header settings of `info` (only what
    /// changed).
    fn apply(&mut self, info: &Info) {
        if self.last.as_ref() == Some(info) {
            return;
        }
        let write = |path: &PathBuf, pem: &str| {
            if std::fs::read(path).ok().as_deref() == Some(pem.as_bytes()) {
                return;
            }
            if let Err(e) = write_atomically(path, pem.as_bytes()) {
                tracing::error!(file = %path.display(), error = %e, "writing a looked-up client CA failed");
            }
        };
        if let Some(path) = &self.looked_up.client_ca_file {
            write(path, &info.client_ca);
        }
        if let Some((path, shared)) = &self.looked_up.request_header {
            write(path, &info.request_header_ca);
            shared.set(&info.request_header(path.clone()));
        }
        if self.last.is_some() {
            tracing::info!(
                "{CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} changed; authentication settings updated"
            );
        }
        self.last = Some(info.clone());
    }

    /// Re-reads the ConfigMap every [`RESYNC_INTERVAL`] until `stop` turns
    /// true.
    pub async fn keep_current(mut self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(RESYNC_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => match self.fetch().await {
                    Ok(info) => self.apply(&info),
                    Err(e) => tracing::warn!(error = %e, "re-reading {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} failed; keeping the last settings"),
                },
                r = stop.changed() => if r.is_err() || *stop.borrow() { return },
            }
        }
    }
}

/// The `message` of a Status body, or the code.
fn message_of(body: &[u8], code: u16) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| format!("the server responded with the status code {code}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    const B: &str = "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n";

    #[test]
    fn configmap_data_round_trips_in_upstream_format() {
        let info = Info {
            client_ca: A.into(),
            request_header_ca: B.into(),
            username_headers: vec!["X-Remote-User".into()],
            uid_headers: vec![],
            group_headers: vec!["X-Remote-Group".into()],
            extra_headers_prefix: vec!["X-Remote-Extra-".into()],
            allowed_names: vec![],
        };
        let data = info.to_data();
        assert_eq!(
            data["requestheader-username-headers"],
            r#"["X-Remote-User"]"#
        );
        assert_eq!(data["requestheader-allowed-names"], "[]");
        assert_eq!(data["client-ca-file"], A);
        let back = Info::from_data(&json!(data)).unwrap_or_default();
        assert_eq!(back, info);
        // Without a request-header CA there are no requestheader keys.
        let only_ca = Info {
            client_ca: A.into(),
            ..Default::default()
        };
        assert_eq!(only_ca.to_data().len(), 1);
        assert!(Info::from_data(&json!({"requestheader-group-headers": "x"})).is_err());
        assert_eq!(
            Info::from_data(&json!({"requestheader-allowed-names": "null"}))
                .map(|i| i.allowed_names),
            Ok(vec![])
        );
    }

    #[test]
    fn combining_unions_lists_and_bundles() {
        let mine = Info {
            client_ca: A.into(),
            username_headers: vec!["X-Remote-User".into()],
            ..Default::default()
        };
        let stored = Info {
            client_ca: format!("{B}{A}"),
            username_headers: vec!["X-Other".into(), "X-Remote-User".into()],
            ..Default::default()
        };
        let both = stored.combined(&mine);
        assert_eq!(both.client_ca, format!("{B}{A}"));
        assert_eq!(both.username_headers, ["X-Other", "X-Remote-User"]);
        assert_eq!(Info::default().combined(&mine), mine);
    }
}
