//! Command-line options. Flag names and defaults follow kube-apiserver's
//! where an equivalent exists.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::{Args, Parser, Subcommand};

/// apiforge: a Kubernetes-style API server generated from Rust types.
#[derive(Debug, Parser)]
#[command(name = "apiforge", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the API server.
    Serve(Box<ServeOptions>),
    /// Write the OpenAPI v2 and v3 documents of the compiled-in groups.
    Openapi(OpenapiOptions),
}

#[derive(Debug, Args)]
pub(crate) struct OpenapiOptions {
    /// Directory to write into (`<out>/swagger.json`, `<out>/v3/apis__<group>__<version>_openapi.json`).
    #[arg(long, default_value = "openapi")]
    pub(crate) out: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct ServeOptions {
    /// The IP address on which to listen for the --secure-port port.
    #[arg(long, default_value = "127.0.0.1", help_heading = "Secure serving")]
    bind_address: IpAddr,
    /// The port on which to serve HTTPS with authentication and authorization (0 picks a free port).
    #[arg(long, default_value_t = 6443, help_heading = "Secure serving")]
    secure_port: u16,
    /// File containing the default x509 certificate for HTTPS; generated into --data-dir when unset.
    #[arg(long, help_heading = "Secure serving")]
    tls_cert_file: Option<PathBuf>,
    /// File containing the default x509 private key matching --tls-cert-file.
    #[arg(long, help_heading = "Secure serving")]
    tls_private_key_file: Option<PathBuf>,
    /// The IP address on which to advertise the apiserver to clients (kubeconfig server URL).
    #[arg(long, help_heading = "Generic")]
    advertise_address: Option<IpAddr>,
    /// Time to delay the termination: /readyz fails during this time while requests are still served (e.g. 5s).
    #[arg(long, default_value = "0s", value_parser = parse_duration, help_heading = "Generic")]
    shutdown_delay_duration: Duration,
    /// Directory for the embedded store, certificates, credentials and admin.kubeconfig.
    #[arg(long, default_value = ".apiforge", help_heading = "Storage")]
    data_dir: PathBuf,
    /// List of etcd servers to connect with (scheme://ip:port), comma separated. When set, objects are stored in etcd instead of the embedded store.
    #[arg(long, value_delimiter = ',', help_heading = "Storage")]
    etcd_servers: Vec<String>,
    /// SSL Certificate Authority file used to secure etcd communication.
    #[arg(long, help_heading = "Storage")]
    etcd_cafile: Option<PathBuf>,
    /// SSL certification file used to secure etcd communication.
    #[arg(long, help_heading = "Storage")]
    etcd_certfile: Option<PathBuf>,
    /// SSL key file used to secure etcd communication.
    #[arg(long, help_heading = "Storage")]
    etcd_keyfile: Option<PathBuf>,
    /// The prefix to prepend to all resource paths in storage.
    #[arg(long, default_value = "/registry", help_heading = "Storage")]
    etcd_prefix: String,
    /// Enable the watch cache (reads and watches served from memory).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, help_heading = "Storage")]
    watch_cache: bool,
    /// Default number of recent events the watch cache keeps per resource.
    #[arg(long, default_value_t = 20_000, help_heading = "Storage")]
    default_watch_cache_size: usize,
    /// Watch cache size settings for some resources, a list of `resource[.group]#size` (e.g. `flunders.wardle.example.com#1000`); size 0 turns the watch cache off for that resource.
    #[arg(long, value_delimiter = ',', help_heading = "Storage")]
    watch_cache_sizes: Vec<String>,
    /// If set, any request presenting a client certificate signed by one of the authorities in the client-ca-file is authenticated with an identity corresponding to the CommonName of the client certificate (groups: its Organizations).
    #[arg(long, help_heading = "Authentication")]
    client_ca_file: Option<PathBuf>,
    /// If set, the file that will be used to secure the secure port of the API server via token authentication (CSV: token,user,uid,"group1,group2").
    #[arg(long, help_heading = "Authentication")]
    token_auth_file: Option<PathBuf>,
    /// Enable to allow secrets of type 'bootstrap.kubernetes.io/token' in the 'kube-system' namespace to be used for TLS bootstrapping authentication.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", help_heading = "Authentication")]
    enable_bootstrap_token_auth: bool,
    /// Root certificate bundle to use to verify client certificates on incoming requests before trusting usernames in headers specified by --requestheader-username-headers.
    #[arg(long, help_heading = "Authentication")]
    requestheader_client_ca_file: Option<PathBuf>,
    /// List of client certificate common names to allow to provide usernames in headers specified by --requestheader-username-headers. If empty, any client certificate validated by the authorities in --requestheader-client-ca-file is allowed.
    #[arg(long, value_delimiter = ',', help_heading = "Authentication")]
    requestheader_allowed_names: Vec<String>,
    /// List of request headers to inspect for usernames.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "X-Remote-User",
        help_heading = "Authentication"
    )]
    requestheader_username_headers: Vec<String>,
    /// List of request headers to inspect for UIDs.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "X-Remote-Uid",
        help_heading = "Authentication"
    )]
    requestheader_uid_headers: Vec<String>,
    /// List of request headers to inspect for groups.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "X-Remote-Group",
        help_heading = "Authentication"
    )]
    requestheader_group_headers: Vec<String>,
    /// List of request header prefixes to inspect.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "X-Remote-Extra-",
        help_heading = "Authentication"
    )]
    requestheader_extra_headers_prefix: Vec<String>,
    /// Enables anonymous requests to the secure port of the API server. Requests that are not rejected by another authentication method are treated as anonymous requests (user system:anonymous, group system:unauthenticated). Turned off with AlwaysAllow authorization.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, help_heading = "Authentication")]
    anonymous_auth: bool,
    /// Ordered list of plug-ins to do authorization on secure port. Comma-delimited list of: AlwaysAllow,AlwaysDeny,ABAC,RBAC.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "RBAC",
        help_heading = "Authorization"
    )]
    authorization_mode: Vec<String>,
    /// File with authorization policy in JSON lines format, used with --authorization-mode=ABAC, on the secure port.
    #[arg(long, help_heading = "Authorization")]
    authorization_policy_file: Option<PathBuf>,
    /// Path to the file that defines the audit policy configuration.
    #[arg(long, help_heading = "Auditing")]
    audit_policy_file: Option<PathBuf>,
    /// If set, all requests coming to the apiserver will be logged to this file.  '-' means standard out.
    #[arg(long, help_heading = "Auditing")]
    audit_log_path: Option<PathBuf>,
    /// The maximum number of days to retain old audit log files based on the timestamp encoded in their filename.
    #[arg(long, default_value_t = 0, help_heading = "Auditing")]
    audit_log_maxage: u64,
    /// The maximum number of old audit log files to retain. Setting a value of 0 will mean there's no restriction on the number of files.
    #[arg(long, default_value_t = 0, help_heading = "Auditing")]
    audit_log_maxbackup: usize,
    /// The maximum size in megabytes of the audit log file before it gets rotated.
    #[arg(long, default_value_t = 0, help_heading = "Auditing")]
    audit_log_maxsize: u64,
    /// Format of saved audits. "legacy" indicates 1-line text format for each event. "json" indicates structured json format. Known formats are legacy,json.
    #[arg(long, default_value = "json", help_heading = "Auditing")]
    audit_log_format: String,
    /// Path to a kubeconfig formatted file that defines the audit webhook configuration.
    #[arg(long, help_heading = "Auditing")]
    audit_webhook_config_file: Option<PathBuf>,
    /// Strategy for sending audit events. Blocking indicates sending events should block server responses. Batch causes the backend to buffer and write events asynchronously. Known modes are batch,blocking.
    #[arg(long, default_value = "batch", help_heading = "Auditing")]
    audit_webhook_mode: String,
    /// The size of the buffer to store events before batching and writing. Only used in batch mode.
    #[arg(long, default_value_t = 10000, help_heading = "Auditing")]
    audit_webhook_batch_buffer_size: usize,
    /// The maximum size of a batch. Only used in batch mode.
    #[arg(long, default_value_t = 400, help_heading = "Auditing")]
    audit_webhook_batch_max_size: usize,
    /// The amount of time to wait before force writing the batch that hadn't reached the max size. Only used in batch mode.
    #[arg(long, default_value = "30s", value_parser = parse_duration, help_heading = "Auditing")]
    audit_webhook_batch_max_wait: Duration,
    /// Log verbosity (0 = info, 2+ = debug, 5+ = trace); RUST_LOG overrides it.
    #[arg(short = 'v', long = "v", default_value_t = 0, help_heading = "Logs")]
    verbosity: u8,
    #[command(flatten)]
    pub(crate) admission: crate::admission::AdmissionFlags,
}

/// Options after defaults were filled in and everything was validated.
pub(crate) struct CompletedOptions {
    pub(crate) server: apiforge_runtime::server::Config,
    /// `Some` when objects live in etcd; `None` for the embedded store.
    pub(crate) etcd: Option<apiforge_runtime::storage::etcd3::Etcd3Options>,
}

impl ServeOptions {
    pub(crate) fn log_filter(&self) -> &'static str {
        match self.verbosity {
            0 | 1 => "info",
            2..=4 => "debug",
            _ => "trace",
        }
    }

    /// Fills defaults and validates; reports every problem at once.
    pub(crate) fn complete(self) -> anyhow::Result<CompletedOptions> {
        let mut errors = Vec::new();
        if self.tls_cert_file.is_some() != self.tls_private_key_file.is_some() {
            errors.push(
                "--tls-cert-file and --tls-private-key-file must be given together".to_string(),
            );
        }
        let mut sizes = std::collections::HashMap::new();
        for entry in self
            .watch_cache_sizes
            .iter()
            .map(|e| e.trim())
            .filter(|e| !e.is_empty())
        {
            match entry.split_once('#').map(|(r, n)| (r, n.parse::<usize>())) {
                Some((resource, Ok(size))) if !resource.is_empty() => {
                    sizes.insert(resource.to_string(), size);
                }
                _ => errors.push(format!(
                    "--watch-cache-sizes: invalid entry {entry:?}: expected resource[.group]#size"
                )),
            }
        }
        if self.watch_cache && self.default_watch_cache_size == 0 {
            errors.push(
                "--default-watch-cache-size must be positive when the watch cache is on"
                    .to_string(),
            );
        }
        let servers: Vec<String> = self
            .etcd_servers
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if servers.is_empty()
            && (self.etcd_cafile.is_some()
                || self.etcd_certfile.is_some()
                || self.etcd_keyfile.is_some())
        {
            errors.push(
                "--etcd-cafile, --etcd-certfile and --etcd-keyfile need --etcd-servers".to_string(),
            );
        }
        if self.etcd_certfile.is_some() != self.etcd_keyfile.is_some() {
            errors.push("--etcd-certfile and --etcd-keyfile must be given together".to_string());
        }
        if !self.etcd_prefix.starts_with('/') {
            errors.push(format!(
                "--etcd-prefix {:?} must start with '/'",
                self.etcd_prefix
            ));
        }
        let mut modes: Vec<apiforge_runtime::authz::Mode> = Vec::new();
        for name in self
            .authorization_mode
            .iter()
            .map(|m| m.trim())
            .filter(|m| !m.is_empty())
        {
            match name.parse() {
                Ok(mode) if modes.contains(&mode) => errors.push(format!(
                    "authorization-mode {name:?} has mode specified more than once"
                )),
                Ok(mode) => modes.push(mode),
                Err(e) => errors.push(e),
            }
        }
        if modes.is_empty() {
            errors.push("at least one authorization-mode must be passed".to_string());
        }
        let abac = modes.contains(&apiforge_runtime::authz::Mode::Abac);
        if abac && self.authorization_policy_file.is_none() {
            errors
                .push("authorization-mode ABAC's authorization policy file not passed".to_string());
        }
        if !abac && self.authorization_policy_file.is_some() {
            errors.push("cannot specify --authorization-policy-file without mode ABAC".to_string());
        }
        let mut anonymous = self.anonymous_auth;
        if anonymous && modes.contains(&apiforge_runtime::authz::Mode::AlwaysAllow) {
            tracing::warn!(
                "AnonymousAuth is not allowed with the AlwaysAllow authorizer. Resetting AnonymousAuth to false. You should use a different authorizer"
            );
            anonymous = false;
        }
        let log_format = match self.audit_log_format.as_str() {
            "json" => apiforge_runtime::audit::backend::log::LogFormat::Json,
            "legacy" => apiforge_runtime::audit::backend::log::LogFormat::Legacy,
            other => {
                errors.push(format!(
                    "--audit-log-format {other:?} invalid, must be one of: legacy,json"
                ));
                Default::default()
            }
        };
        let webhook_mode = match self.audit_webhook_mode.as_str() {
            "batch" => apiforge_runtime::audit::backend::webhook::WebhookMode::Batch,
            "blocking" => apiforge_runtime::audit::backend::webhook::WebhookMode::Blocking,
            other => {
                errors.push(format!(
                    "--audit-webhook-mode {other:?} invalid, must be one of: batch,blocking"
                ));
                Default::default()
            }
        };
        if self.audit_webhook_batch_max_size == 0 {
            errors.push("--audit-webhook-batch-max-size must be positive".to_string());
        }
        let audit = apiforge_runtime::audit::Options {
            policy_file: self.audit_policy_file.clone(),
            log: self.audit_log_path.clone().map(|path| {
                apiforge_runtime::audit::backend::log::LogOptions {
                    path,
                    max_age_days: self.audit_log_maxage,
                    max_backups: self.audit_log_maxbackup,
                    max_size_mib: self.audit_log_maxsize,
                    format: log_format,
                }
            }),
            webhook: self.audit_webhook_config_file.clone().map(|config_file| {
                apiforge_runtime::audit::backend::webhook::WebhookOptions {
                    config_file,
                    mode: webhook_mode,
                    buffer_size: self.audit_webhook_batch_buffer_size,
                    batch_max_size: self.audit_webhook_batch_max_size,
                    batch_max_wait: self.audit_webhook_batch_max_wait,
                }
            }),
        };
        if !errors.is_empty() {
            bail!("invalid options:\n  {}", errors.join("\n  "));
        }
        let storage_prefix = self.etcd_prefix.trim_end_matches('/').to_string();
        let etcd = (!servers.is_empty()).then(|| apiforge_runtime::storage::etcd3::Etcd3Options {
            endpoints: servers,
            prefix: storage_prefix.clone(),
            ca_file: self.etcd_cafile.clone(),
            cert_file: self.etcd_certfile.clone(),
            key_file: self.etcd_keyfile.clone(),
            ..Default::default()
        });
        Ok(CompletedOptions {
            etcd,
            server: apiforge_runtime::server::Config {
                bind_address: self.bind_address,
                secure_port: self.secure_port,
                data_dir: self.data_dir,
                tls_cert_file: self.tls_cert_file,
                tls_private_key_file: self.tls_private_key_file,
                advertise_address: self.advertise_address,
                shutdown_delay: self.shutdown_delay_duration,
                storage_prefix,
                watch_cache: self
                    .watch_cache
                    .then(|| apiforge_runtime::registry::CacheOptions {
                        window: self.default_watch_cache_size,
                        ..Default::default()
                    }),
                admission: Default::default(),
                authentication: apiforge_runtime::authn::Options {
                    client_ca_file: self.client_ca_file,
                    token_auth_file: self.token_auth_file,
                    anonymous,
                    bootstrap_tokens: self.enable_bootstrap_token_auth,
                    request_header: apiforge_runtime::authn::request_header::Options {
                        client_ca_file: self.requestheader_client_ca_file,
                        allowed_names: self
                            .requestheader_allowed_names
                            .into_iter()
                            .filter(|n| !n.trim().is_empty())
                            .collect(),
                        username_headers: self.requestheader_username_headers,
                        uid_headers: self.requestheader_uid_headers,
                        group_headers: self.requestheader_group_headers,
                        extra_headers_prefix: self.requestheader_extra_headers_prefix,
                    },
                },
                authorization: apiforge_runtime::authz::Options {
                    modes,
                    policy_file: self.authorization_policy_file,
                },
                audit,
            },
        })
    }
}

/// Parses a Go-style duration: `0`, `500ms`, `5s`, `1m30s`, `2h`.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(digits);
        let value: f64 = num.parse().map_err(|_| format!("invalid duration {s:?}"))?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let secs = match unit {
            "ms" => value / 1000.0,
            "s" => value,
            "m" => value * 60.0,
            "h" => value * 3600.0,
            _ => return Err(format!("invalid duration {s:?}: unknown unit {unit:?}")),
        };
        total += Duration::from_secs_f64(secs);
        rest = next;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("5x").is_err());
    }
}
