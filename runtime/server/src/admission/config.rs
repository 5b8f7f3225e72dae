//! `--admission-control-config-file`: kube-apiserver's
//! `AdmissionConfiguration` (`apiserver.config.k8s.io/v1`, also the older
//! `apiserver.k8s.io/v1alpha1`), a list of plugins each with an inline
//! `configuration` or a `path` to one. The webhook plugins read a
//! `WebhookAdmissionConfiguration` from it, whose `kubeConfigFile` gives
//! the credentials they present to webhooks ([`WebhookCredentials`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

pub use crate::webhook::UserCredentials;

/// A bad admission configuration file.
#[derive(Debug, thiserror::Error)]
#[error("admission configuration {path:?}: {message}")]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

/// The plugins' configurations, by plugin name.
#[derive(Clone, Debug, Default)]
pub struct AdmissionConfig {
    plugins: HashMap<String, Value>,
}

impl AdmissionConfig {
    /// Reads the file at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let err = |message: String| ConfigError {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let doc: Value = serde_saphyr::from_str(&text).map_err(|e| err(e.to_string()))?;
        let api_version = doc["apiVersion"].as_str().unwrap_or_default();
        if doc["kind"] != "AdmissionConfiguration"
            || !matches!(
                api_version,
                "apiserver.config.k8s.io/v1"
                    | "apiserver.config.k8s.io/v1alpha1"
                    | "apiserver.k8s.io/v1alpha1"
            )
        {
            return Err(err(format!(
                "expected kind AdmissionConfiguration of apiserver.config.k8s.io/v1, got {} of {api_version}",
                doc["kind"]
            )));
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let mut plugins = HashMap::new();
        for p in doc["plugins"].as_array().into_iter().flatten() {
            let name = p["name"]
                .as_str()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| err("a plugin has no name".into()))?;
            let config = match (p.get("configuration"), p["path"].as_str()) {
                (Some(c), _) if !c.is_null() => c.clone(),
                (_, Some(file)) => {
                    let file = base.join(file);
                    let text = std::fs::read_to_string(&file)
                        .map_err(|e| err(format!("reading {}: {e}", file.display())))?;
                    serde_saphyr::from_str(&text)
                        .map_err(|e| err(format!("{}: {e}", file.display())))?
                }
                _ => continue,
            };
            plugins.insert(name.to_string(), config);
        }
        Ok(AdmissionConfig { plugins })
    }

    /// The configuration of plugin `name`, if the file has one.
    pub fn plugin(&self, name: &str) -> Option<&Value> {
        self.plugins.get(name)
    }

    /// The webhook credentials of webhook plugin `name`: its
    /// `WebhookAdmissionConfiguration`'s `kubeConfigFile` (which upstream
    /// requires to be an absolute path).
    pub fn webhook_credentials(
        &self,
        name: &str,
    ) -> Result<Option<WebhookCredentials>, ConfigError> {
        let Some(config) = self.plugin(name) else {
            return Ok(None);
        };
        let Some(file) = config["kubeConfigFile"].as_str().filter(|f| !f.is_empty()) else {
            return Ok(None);
        };
        let path = PathBuf::from(file);
        if !path.is_absolute() {
            return Err(ConfigError {
                path,
                message: format!("{name}: kubeConfigFile {file:?} must be an absolute file path"),
            });
        }
        WebhookCredentials::load(&path)
            .map(Some)
            .map_err(|message| ConfigError { path, message })
    }
}

/// Webhook client credentials by webhook host, from a kubeconfig whose
/// `users` are named after the hosts they authenticate to
/// (`webhookutil.defaultAuthenticationInfoResolver`).
#[derive(Clone, Debug, Default)]
pub struct WebhookCredentials {
    users: HashMap<String, UserCredentials>,
    current: Option<String>,
}

fn text(v: &Value, key: &str) -> Option<String> {
    v[key]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

impl WebhookCredentials {
    /// Reads the kubeconfig at `path`.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text_of = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let config: Value = serde_saphyr::from_str(&text_of).map_err(|e| e.to_string())?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut users = HashMap::new();
        for u in config["users"].as_array().into_iter().flatten() {
            let Some(name) = text(u, "name") else {
                continue;
            };
            let user = UserCredentials::from_kubeconfig_user(&u["user"], base)
                .map_err(|e| format!("user {name:?}: {e}"))?;
            users.insert(name, user);
        }
        let current = text(&config, "current-context").and_then(|ctx| {
            config["contexts"]
                .as_array()?
                .iter()
                .find(|c| c["name"] == ctx.as_str())
                .and_then(|c| text(&c["context"], "user"))
        });
        Ok(WebhookCredentials { users, current })
    }

    /// The credentials for a webhook at `target` (`host:port`, or `host`
    /// when the URL has no port), looked up as upstream: the exact name,
    /// then `*.`-prefixed parent domains, then both again without a `:443`
    /// port, then `*`, then the current context's user; none is anonymous.
    pub fn for_target(&self, target: &str) -> Option<&UserCredentials> {
        let by_name = |t: &str| {
            self.users.get(t).or_else(|| {
                let steps: Vec<&str> = t.split('.').collect();
                (1..steps.len())
                    .find_map(|i| self.users.get(&format!("*.{}", steps[i..].join("."))))
            })
        };
        by_name(target)
            .or_else(|| target.strip_suffix(":443").and_then(by_name))
            .or_else(|| self.users.get("*"))
            .or_else(|| self.current.as_ref().and_then(|u| self.users.get(u)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_resolve_by_host_as_upstream() {
        let dir = tempfile::tempdir().expect("tmp");
        let kubeconfig = dir.path().join("webhooks.kubeconfig");
        std::fs::write(
            &kubeconfig,
            r#"
apiVersion: v1
kind: Config
users:
- name: "hook.ns.svc:8443"
  user: {token: exact}
- name: "*.example.com"
  user: {token: wildcard}
- name: "plain.test"
  user: {username: u, password: p}
- name: "*"
  user: {token: default}
"#,
        )
        .expect("write");
        let config = dir.path().join("admission.yaml");
        std::fs::write(
            &config,
            format!(
                "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: ValidatingAdmissionWebhook\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n",
                kubeconfig.display()
            ),
        )
        .expect("write");
        let admission = AdmissionConfig::load(&config).expect("config");
        let creds = admission
            .webhook_credentials("ValidatingAdmissionWebhook")
            .expect("credentials")
            .expect("some");
        assert!(
            admission
                .webhook_credentials("MutatingAdmissionWebhook")
                .expect("ok")
                .is_none()
        );
        let token = |t: &str| creds.for_target(t).and_then(|u| u.token.clone());
        assert_eq!(token("hook.ns.svc:8443").as_deref(), Some("exact"));
        assert_eq!(token("a.b.example.com:443").as_deref(), Some("wildcard"));
        assert_eq!(token("other.test:9443").as_deref(), Some("default"));
        assert_eq!(
            creds
                .for_target("plain.test:443")
                .and_then(|u| u.basic.clone()),
            Some(("u".into(), "p".into()))
        );
    }

    #[test]
    fn relative_kubeconfig_and_wrong_kind_are_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let config = dir.path().join("admission.yaml");
        std::fs::write(
            &config,
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: MutatingAdmissionWebhook\n  configuration:\n    kubeConfigFile: relative.kubeconfig\n",
        )
        .expect("write");
        let err = AdmissionConfig::load(&config)
            .expect("loads")
            .webhook_credentials("MutatingAdmissionWebhook")
            .expect_err("relative");
        assert!(
            err.to_string().contains("must be an absolute file path"),
            "{err}"
        );
        std::fs::write(&config, "apiVersion: v1\nkind: Config\n").expect("write");
        assert!(AdmissionConfig::load(&config).is_err());
    }
}
