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
    /// A pair of x509 certificate and private key file paths, optionally suffixed with a list of domain patterns which are fully qualified domain names, possibly with prefixed wildcard segments ("cert,key" or "cert,key:*.example.com,foo.com"). Without patterns, the names are taken from the certificate's SANs (or its CN). The domain patterns also allow IP addresses. A client asking (by SNI) for a matching name gets this certificate; others get the default. May be repeated.
    #[arg(long, help_heading = "Secure serving", value_parser = parse_sni_cert_key)]
    tls_sni_cert_key: Vec<apiforge_runtime::server::tls::SniCertKey>,
    /// The duration of the server's identity lease (kube-system/apiserver-<id>) in seconds; expired identity leases of other instances are collected this often.
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Generic")]
    identity_lease_duration_seconds: u64,
    /// How often, in seconds, the server renews its identity lease.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Generic")]
    identity_lease_renew_interval_seconds: u64,
    /// The IP address on which to advertise the apiserver to clients (kubeconfig server URL).
    #[arg(long, help_heading = "Generic")]
    advertise_address: Option<IpAddr>,
    /// Time to delay the termination: /readyz fails during this time while requests are still served (e.g. 5s).
    #[arg(long, default_value = "0s", value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Generic")]
    shutdown_delay_duration: SignedDuration,
    /// An optional field indicating the duration a handler must keep a request open before timing it out. This is the default request timeout for requests but may be overridden by flags such as --min-request-timeout for specific types of requests.
    #[arg(long, default_value = "1m0s", value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Generic")]
    request_timeout: SignedDuration,
    /// An optional field indicating the minimum number of seconds a handler must keep a request open before timing it out. Currently only honored by the watch request handler, which picks a randomized value above this number as the connection timeout, to spread out load.
    #[arg(
        long,
        default_value_t = 1800,
        allow_negative_numbers = true,
        help_heading = "Generic"
    )]
    min_request_timeout: i64,
    /// This and --max-mutating-requests-inflight are summed to determine the server's total concurrency limit (which must be positive). The maximum number of non-mutating requests in flight at a given time. When the server exceeds this, it rejects requests. Zero for no limit.
    #[arg(
        long,
        default_value_t = 400,
        allow_negative_numbers = true,
        help_heading = "Generic"
    )]
    max_requests_inflight: i64,
    /// This and --max-requests-inflight are summed to determine the server's total concurrency limit (which must be positive). The maximum number of mutating requests in flight at a given time. When the server exceeds this, it rejects requests. Zero for no limit.
    #[arg(
        long,
        default_value_t = 200,
        allow_negative_numbers = true,
        help_heading = "Generic"
    )]
    max_mutating_requests_inflight: i64,
    /// If true, replace the max-in-flight handler with an enhanced one that queues and dispatches with priority and fairness
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", help_heading = "Generic")]
    enable_priority_and_fairness: bool,
    /// List of allowed origins for CORS, comma separated. An allowed origin can be a regular expression to support subdomain matching. If this list is empty CORS will not be enabled. Please ensure each expression matches the entire hostname by anchoring to the start with '^' or including the '//' prefix, and by anchoring to the end with '$' or including the ':' port separator suffix. Examples of valid expressions are '//example\.com(:|$)' and '^https://example\.com(:|$)'
    #[arg(long, value_delimiter = ',', help_heading = "Generic")]
    cors_allowed_origins: Vec<String>,
    /// List of directives for HSTS, comma separated. If this list is empty, then HSTS directives will not be added. Example: 'max-age=31536000,includeSubDomains,preload'
    #[arg(long, value_delimiter = ',', help_heading = "Generic")]
    strict_transport_security_directives: Vec<String>,
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
    /// The interval of compaction requests. If 0, the compaction request from apiserver is disabled.
    #[arg(long, default_value = "5m0s", value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Storage")]
    etcd_compaction_interval: SignedDuration,
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
    #[arg(long, default_value = "30s", value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Auditing")]
    audit_webhook_batch_max_wait: SignedDuration,
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
    /// `--etcd-compaction-interval`; zero turns compaction off.
    pub(crate) compaction_interval: Duration,
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
        let non_negative = |name: &str, negative: bool, errors: &mut Vec<String>| {
            if negative {
                errors.push(format!("--{name} can not be negative value"));
            }
        };
        non_negative(
            "max-requests-inflight",
            self.max_requests_inflight < 0,
            &mut errors,
        );
        non_negative(
            "max-mutating-requests-inflight",
            self.max_mutating_requests_inflight < 0,
            &mut errors,
        );
        non_negative(
            "request-timeout",
            self.request_timeout.negative,
            &mut errors,
        );
        non_negative(
            "min-request-timeout",
            self.min_request_timeout < 0,
            &mut errors,
        );
        non_negative(
            "etcd-compaction-interval",
            self.etcd_compaction_interval.negative,
            &mut errors,
        );
        non_negative(
            "shutdown-delay-duration",
            self.shutdown_delay_duration.negative,
            &mut errors,
        );
        let cors_allowed_origins = {
            let patterns: Vec<String> = self
                .cors_allowed_origins
                .iter()
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect();
            match apiforge_runtime::filters::cors::compile_origins(&patterns) {
                Ok(res) => res,
                Err(errs) => {
                    errors.extend(errs);
                    Vec::new()
                }
            }
        };
        let hsts: Vec<String> = self
            .strict_transport_security_directives
            .iter()
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty())
            .collect();
        errors.extend(apiforge_runtime::filters::hsts::validate_directives(&hsts));
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
        if self.audit_webhook_batch_max_wait.negative
            || self.audit_webhook_batch_max_wait.duration.is_zero()
        {
            errors.push("--audit-webhook-batch-max-wait must be positive".to_string());
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
                    batch_max_wait: self.audit_webhook_batch_max_wait.duration,
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
            compaction_interval: self.etcd_compaction_interval.duration,
            server: apiforge_runtime::server::Config {
                bind_address: self.bind_address,
                secure_port: self.secure_port,
                data_dir: self.data_dir,
                tls_cert_file: self.tls_cert_file,
                tls_private_key_file: self.tls_private_key_file,
                tls_sni_cert_keys: self.tls_sni_cert_key,
                identity_lease: apiforge_runtime::controllers::identity_lease::Options {
                    duration: Duration::from_secs(self.identity_lease_duration_seconds),
                    renew_interval: Duration::from_secs(self.identity_lease_renew_interval_seconds),
                },
                advertise_address: self.advertise_address,
                shutdown_delay: self.shutdown_delay_duration.duration,
                storage_prefix,
                watch_cache: self
                    .watch_cache
                    .then(|| apiforge_runtime::registry::CacheOptions {
                        window: self.default_watch_cache_size,
                        sizes,
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
                filters: apiforge_runtime::filters::ChainConfig {
                    request_timeout: self.request_timeout.duration,
                    min_request_timeout: Duration::from_secs(
                        self.min_request_timeout.max(0).unsigned_abs(),
                    ),
                    max_requests_inflight: usize::try_from(self.max_requests_inflight)
                        .unwrap_or_default(),
                    max_mutating_requests_inflight: usize::try_from(
                        self.max_mutating_requests_inflight,
                    )
                    .unwrap_or_default(),
                    enable_priority_and_fairness: self.enable_priority_and_fairness,
                    cors_allowed_origins,
                    hsts_directives: hsts,
                },
                audit,
            },
        })
    }
}

/// A Go duration flag value; negative values are kept so that validation
/// can name the flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SignedDuration {
    pub(crate) negative: bool,
    pub(crate) duration: Duration,
}

/// Parses a Go duration (`0`, `500ms`, `5s`, `1m30s`, `2h`, `-1s`).
pub(crate) fn parse_duration(s: &str) -> Result<SignedDuration, String> {
    let (negative, magnitude) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let duration = apiforge_runtime::filters::timeout::parse_go_duration(magnitude)?;
    Ok(SignedDuration {
        negative: negative && !duration.is_zero(),
        duration,
    })
}

/// Parses one `--tls-sni-cert-key` value.
fn parse_sni_cert_key(value: &str) -> Result<apiforge_runtime::server::tls::SniCertKey, String> {
    value.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let d = |s: &str| parse_duration(s).map(|d| (d.negative, d.duration));
        assert_eq!(d("0"), Ok((false, Duration::ZERO)));
        assert_eq!(d("5s"), Ok((false, Duration::from_secs(5))));
        assert_eq!(d("1m30s"), Ok((false, Duration::from_secs(90))));
        assert_eq!(d("500ms"), Ok((false, Duration::from_millis(500))));
        assert_eq!(d("-1s"), Ok((true, Duration::from_secs(1))));
        assert!(d("5x").is_err());
    }
}
