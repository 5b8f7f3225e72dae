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
    /// Print the CustomResourceDefinitions of the compiled-in kinds (for
    /// `kubectl apply -f -` into any cluster).
    Crd(CrdOptions),
    /// Save or restore a snapshot of the embedded store (what etcdctl
    /// snapshot save and etcdutl snapshot restore are for etcd).
    #[command(subcommand)]
    Snapshot(super::snapshot::SnapshotCommand),
}

#[derive(Debug, Args)]
pub(crate) struct CrdOptions {
    /// Only this group's kinds (all groups declared with the macros when unset).
    pub(crate) group: Option<String>,
    /// Serve the definitions under this group name instead of their own
    /// (to install them beside the compiled-in group).
    #[arg(long)]
    pub(crate) as_group: Option<String>,
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
    tls_sni_cert_key: Vec<crate::server::tls::SniCertKey>,
    /// The duration of the server's identity lease (kube-system/apiserver-<id>) in seconds; expired identity leases of other instances are collected this often.
    #[arg(long, default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Generic")]
    identity_lease_duration_seconds: u64,
    /// How often, in seconds, the server renews its identity lease.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Generic")]
    identity_lease_renew_interval_seconds: u64,
    /// Start a leader election client and gain leadership before executing the main loop of the singleton controllers (namespace deletion, garbage collection, identity lease collection, custom resource definition finalization, APIService availability). Enable this when running replicated components for high availability.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", help_heading = "Leader election")]
    leader_elect: bool,
    /// The duration that non-leader candidates will wait after observing a leadership renewal until attempting to acquire leadership of a led but unrenewed leader slot. This is effectively the maximum duration that a leader can be stopped before it is replaced by another candidate. This is only applicable if leader election is enabled.
    #[arg(long, default_value = "15s", value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Leader election")]
    leader_elect_lease_duration: SignedDuration,
    /// The interval between attempts by the acting master to renew a leadership slot before it stops leading. This must be less than the lease duration. This is only applicable if leader election is enabled.
    #[arg(long, default_value = "10s", value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Leader election")]
    leader_elect_renew_deadline: SignedDuration,
    /// The duration the clients should wait between attempting acquisition and renewal of a leadership. This is only applicable if leader election is enabled.
    #[arg(long, default_value = "2s", value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Leader election")]
    leader_elect_retry_period: SignedDuration,
    /// kubeconfig file pointing at the 'core' kubernetes server: the default of --authentication-kubeconfig and --authorization-kubeconfig (an aggregated API server's main server), and where the NamespaceLifecycle admission plugin looks namespaces up.
    #[arg(long, help_heading = "Generic")]
    kubeconfig: Option<PathBuf>,
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
    /// The file containing configuration for encryption providers to be used for storing secrets in etcd
    #[arg(long, help_heading = "Storage")]
    encryption_provider_config: Option<PathBuf>,
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
    /// File with webhook configuration for token authentication in kubeconfig format. The API server will query the remote service to determine authentication for bearer tokens.
    #[arg(long, help_heading = "Authentication")]
    authentication_token_webhook_config_file: Option<PathBuf>,
    /// The duration to cache responses from the webhook token authenticator. [default: 2m0s; 10s with --authentication-kubeconfig]
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Authentication")]
    authentication_token_webhook_cache_ttl: Option<SignedDuration>,
    /// The API version of the authentication.k8s.io TokenReview to send to and expect from the webhook.
    #[arg(long, default_value = "v1", help_heading = "Authentication")]
    authentication_token_webhook_version: String,
    /// Identifiers of the API. The service account token authenticator will validate that tokens used against the API are bound to at least one of these audiences. If unset, the --service-account-issuer values are used.
    #[arg(long, value_delimiter = ',', help_heading = "Authentication")]
    api_audiences: Vec<String>,
    /// Identifier of the service account token issuer. The issuer will assert this identifier in "iss" claim of issued tokens. When this flag is specified multiple times, the first is used to generate tokens and all are used to determine which issuers are accepted.
    #[arg(long, help_heading = "Authentication")]
    service_account_issuer: Vec<String>,
    /// File containing PEM-encoded x509 RSA or ECDSA private or public keys, used to verify ServiceAccount tokens. The specified file can contain multiple keys, and the flag can be specified multiple times with different files. If unspecified, --service-account-signing-key-file is used.
    #[arg(long, help_heading = "Authentication")]
    service_account_key_file: Vec<PathBuf>,
    /// Path to the file that contains the current private key of the service account token issuer. (Tokens are not issued yet: the key only serves as the default verification key.)
    #[arg(long, help_heading = "Authentication")]
    service_account_signing_key_file: Option<PathBuf>,
    /// The URL of the OpenID issuer, only HTTPS scheme will be accepted. If set, it will be used to verify the OIDC JSON Web Token (JWT).
    #[arg(long, help_heading = "Authentication")]
    oidc_issuer_url: Option<String>,
    /// The client ID for the OpenID Connect client, must be set if oidc-issuer-url is set.
    #[arg(long, default_value = "", help_heading = "Authentication")]
    oidc_client_id: String,
    /// The OpenID claim to use as the user name. Note that claims other than the default ('sub') is not guaranteed to be unique and immutable.
    #[arg(long, default_value = "sub", help_heading = "Authentication")]
    oidc_username_claim: String,
    /// If provided, all usernames will be prefixed with this value. If not provided, username claims other than 'email' are prefixed by the issuer URL to avoid clashes. To skip any prefixing, provide the value '-'.
    #[arg(long, help_heading = "Authentication")]
    oidc_username_prefix: Option<String>,
    /// If provided, the name of a custom OpenID Connect claim for specifying user groups. The claim value is expected to be a string or array of strings.
    #[arg(long, help_heading = "Authentication")]
    oidc_groups_claim: Option<String>,
    /// If provided, all groups will be prefixed with this value to prevent conflicts with other authentication strategies.
    #[arg(long, default_value = "", help_heading = "Authentication")]
    oidc_groups_prefix: String,
    /// If set, the OpenID server's certificate will be verified by one of the authorities in the oidc-ca-file, otherwise the host's root CA set will be used.
    #[arg(long, help_heading = "Authentication")]
    oidc_ca_file: Option<PathBuf>,
    /// A key=value pair that describes a required claim in the ID Token. If set, the claim is verified to be present in the ID Token with a matching value. Repeat this flag to specify multiple claims.
    #[arg(long, help_heading = "Authentication")]
    oidc_required_claim: Vec<String>,
    /// Comma-separated list of allowed JOSE asymmetric signing algorithms. JWTs with a supported 'alg' header values are: RS256, RS384, RS512, ES256, ES384, PS256, PS384, PS512.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "RS256",
        help_heading = "Authentication"
    )]
    oidc_signing_algs: Vec<String>,
    /// Enables anonymous requests to the secure port of the API server. Requests that are not rejected by another authentication method are treated as anonymous requests (user system:anonymous, group system:unauthenticated). Turned off with AlwaysAllow authorization.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, help_heading = "Authentication")]
    anonymous_auth: bool,
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create tokenreviews.authentication.k8s.io and to read the ConfigMap kube-system/extension-apiserver-authentication. Bearer tokens are then reviewed by that server (an aggregated API server's delegated authentication). Defaults to --kubeconfig.
    #[arg(long, help_heading = "Authentication")]
    authentication_kubeconfig: Option<PathBuf>,
    /// If false, the authentication-kubeconfig will be used to lookup missing authentication configuration from the cluster.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", help_heading = "Authentication")]
    authentication_skip_lookup: bool,
    /// If true, failures to look up missing authentication configuration from the cluster are not considered fatal. Note that this can result in authentication that treats all requests as anonymous.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", help_heading = "Authentication")]
    authentication_tolerate_lookup_failure: bool,
    /// Ordered list of plug-ins to do authorization on secure port. Comma-delimited list of: AlwaysAllow,AlwaysDeny,ABAC,Webhook,RBAC. [default: RBAC; not used with --authorization-kubeconfig]
    #[arg(long, value_delimiter = ',', help_heading = "Authorization")]
    authorization_mode: Option<Vec<String>>,
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create subjectaccessreviews.authorization.k8s.io. Requests are then authorized by that server (an aggregated API server's delegated authorization) instead of --authorization-mode. Defaults to --kubeconfig.
    #[arg(long, help_heading = "Authorization")]
    authorization_kubeconfig: Option<PathBuf>,
    /// A list of HTTP paths to skip during authorization, i.e. these are authorized without contacting the 'core' kubernetes server. Used with --authorization-kubeconfig.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez",
        help_heading = "Authorization"
    )]
    authorization_always_allow_paths: Vec<String>,
    /// File with authorization policy in JSON lines format, used with --authorization-mode=ABAC, on the secure port.
    #[arg(long, help_heading = "Authorization")]
    authorization_policy_file: Option<PathBuf>,
    /// File with webhook configuration in kubeconfig format, used with --authorization-mode=Webhook. The API server will query the remote service to determine access on the API server's secure port.
    #[arg(long, help_heading = "Authorization")]
    authorization_webhook_config_file: Option<PathBuf>,
    /// The duration to cache 'authorized' responses from the webhook authorizer. [default: 5m0s; 10s with --authorization-kubeconfig]
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Authorization")]
    authorization_webhook_cache_authorized_ttl: Option<SignedDuration>,
    /// The duration to cache 'unauthorized' responses from the webhook authorizer. [default: 30s; 10s with --authorization-kubeconfig]
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, help_heading = "Authorization")]
    authorization_webhook_cache_unauthorized_ttl: Option<SignedDuration>,
    /// The API version of the authorization.k8s.io SubjectAccessReview to send to and expect from the webhook.
    #[arg(long, default_value = "v1", help_heading = "Authorization")]
    authorization_webhook_version: String,
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
    /// Sets the log format. Permitted formats: "json", "text".
    #[arg(long = "logging-format", default_value = "text", value_parser = ["text", "json"], help_heading = "Logs")]
    logging_format: String,
    /// Client certificate used to prove the identity of the aggregator or kube-apiserver when it must call out during a request. This includes proxying requests to a user api-server and calling out to webhook admission plugins. It is expected that this cert includes a signature from the CA in the --requestheader-client-ca-file flag. That CA is published in the 'extension-apiserver-authentication' configmap in the kube-system namespace. Components receiving calls from kube-aggregator should use that CA to perform their half of the mutual TLS verification.
    #[arg(long, help_heading = "Aggregator")]
    proxy_client_cert_file: Option<PathBuf>,
    /// Private key for the client certificate used to prove the identity of the aggregator or kube-apiserver when it must call out during a request. This includes proxying requests to a user api-server and calling out to webhook admission plugins.
    #[arg(long, help_heading = "Aggregator")]
    proxy_client_key_file: Option<PathBuf>,
    /// Turns on aggregator routing requests to endpoints IP rather than cluster IP.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", help_heading = "Aggregator")]
    enable_aggregator_routing: bool,
    /// A set of key=value pairs that enable or disable built-in APIs. Supported options are: v1=true|false for the core API group; <group>/<version>=true|false for a specific API group and version (e.g. apps/v1=true); api/all=true|false controls all API versions; api/ga=true|false controls all API versions of the form v[0-9]+; api/beta=true|false controls all API versions of the form v[0-9]+beta[0-9]+; api/alpha=true|false controls all API versions of the form v[0-9]+alpha[0-9]+; api/legacy is deprecated, and will be removed in a future version.
    #[arg(long, value_delimiter = ',', help_heading = "API enablement")]
    runtime_config: Vec<String>,
    #[command(flatten)]
    pub(crate) admission: super::admission::AdmissionFlags,
}

/// Options after defaults were filled in and everything was validated.
pub(crate) struct CompletedOptions {
    pub(crate) server: crate::server::Config,
    /// `Some` when objects live in etcd; `None` for the embedded store.
    pub(crate) etcd: Option<apiforge_storage::etcd3::Etcd3Options>,
    /// `--etcd-compaction-interval`; zero turns compaction off.
    pub(crate) compaction_interval: Duration,
    /// `--runtime-config` entries.
    pub(crate) runtime_config: Vec<String>,
}

impl ServeOptions {
    /// `--kubeconfig`: the main server of an aggregated server.
    pub(crate) fn core_kubeconfig(&self) -> Option<&std::path::Path> {
        self.kubeconfig.as_deref()
    }

    /// Whether log lines are JSON objects (`--logging-format=json`).
    pub(crate) fn json_logs(&self) -> bool {
        self.logging_format == "json"
    }

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
        if self.proxy_client_cert_file.is_some() != self.proxy_client_key_file.is_some() {
            errors.push(
                "--proxy-client-cert-file and --proxy-client-key-file must be given together"
                    .to_string(),
            );
        }
        if self.etcd_certfile.is_some() != self.etcd_keyfile.is_some() {
            errors.push("--etcd-certfile and --etcd-keyfile must be given together".to_string());
        }
        // component-base's ValidateLeaderElectionConfiguration.
        if self.leader_elect {
            for (name, d) in [
                (
                    "leader-elect-lease-duration",
                    &self.leader_elect_lease_duration,
                ),
                (
                    "leader-elect-renew-deadline",
                    &self.leader_elect_renew_deadline,
                ),
                ("leader-elect-retry-period", &self.leader_elect_retry_period),
            ] {
                if d.negative || d.duration.is_zero() {
                    errors.push(format!("--{name} must be greater than zero"));
                }
            }
            if self.leader_elect_lease_duration.duration
                <= self.leader_elect_renew_deadline.duration
            {
                errors.push(
                    "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"
                        .to_string(),
                );
            }
            if self.leader_elect_renew_deadline.duration
                <= self.leader_elect_retry_period.duration.mul_f64(1.2)
            {
                errors.push(
                    "--leader-elect-renew-deadline must be greater than --leader-elect-retry-period * 1.2"
                        .to_string(),
                );
            }
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
            match crate::filters::cors::compile_origins(&patterns) {
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
        errors.extend(crate::filters::hsts::validate_directives(&hsts));
        if !self.etcd_prefix.starts_with('/') {
            errors.push(format!(
                "--etcd-prefix {:?} must start with '/'",
                self.etcd_prefix
            ));
        }
        let authentication_kubeconfig = self
            .authentication_kubeconfig
            .clone()
            .or_else(|| self.kubeconfig.clone());
        let authorization_kubeconfig = self
            .authorization_kubeconfig
            .clone()
            .or_else(|| self.kubeconfig.clone());
        let delegated_authz = authorization_kubeconfig.is_some();
        let delegated_dir = self.data_dir.join("delegated-authentication");
        if delegated_authz && self.authorization_mode.is_some() {
            errors.push(
                "--authorization-mode cannot be combined with --authorization-kubeconfig (or --kubeconfig): the delegated authorizer is the server's"
                    .to_string(),
            );
        }
        if authentication_kubeconfig.is_some()
            && self.authentication_token_webhook_config_file.is_some()
        {
            errors.push(
                "--authentication-token-webhook-config-file cannot be combined with --authentication-kubeconfig (or --kubeconfig)"
                    .to_string(),
            );
        }
        for p in &self.authorization_always_allow_paths {
            if p.contains('*') && !p.trim().ends_with('*') || p.matches('*').count() > 1 {
                errors.push(format!(
                    "--authorization-always-allow-paths: only trailing * allowed in {:?}",
                    p.trim_start_matches('/')
                ));
            }
        }
        let mode_names = match &self.authorization_mode {
            Some(names) => names.clone(),
            None if delegated_authz => Vec::new(),
            None => vec!["RBAC".to_string()],
        };
        let mut modes: Vec<crate::authz::Mode> = Vec::new();
        for name in mode_names
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
        if modes.is_empty() && !delegated_authz {
            errors.push("at least one authorization-mode must be passed".to_string());
        }
        let abac = modes.contains(&crate::authz::Mode::Abac);
        if abac && self.authorization_policy_file.is_none() {
            errors
                .push("authorization-mode ABAC's authorization policy file not passed".to_string());
        }
        if !abac && self.authorization_policy_file.is_some() {
            errors.push("cannot specify --authorization-policy-file without mode ABAC".to_string());
        }
        let webhook = modes.contains(&crate::authz::Mode::Webhook);
        if webhook && self.authorization_webhook_config_file.is_none() {
            errors.push(
                "authorization-mode Webhook's authorization config file not passed".to_string(),
            );
        }
        if !webhook && self.authorization_webhook_config_file.is_some() {
            errors.push(
                "cannot specify --authorization-webhook-config-file without mode Webhook"
                    .to_string(),
            );
        }
        for (flag, version) in [
            (
                "--authentication-token-webhook-version",
                &self.authentication_token_webhook_version,
            ),
            (
                "--authorization-webhook-version",
                &self.authorization_webhook_version,
            ),
        ] {
            if !matches!(version.as_str(), "v1" | "v1beta1") {
                errors.push(format!(
                    "{flag} {version:?} is not supported, must be one of: v1,v1beta1"
                ));
            }
        }
        // The delegating options' defaults are 10s (k8s.io/apiserver's
        // NewDelegatingAuthenticationOptions and
        // NewDelegatingAuthorizationOptions); kube-apiserver's are longer.
        let ttl_or = |ttl: Option<SignedDuration>, delegated: bool, default: u64| {
            ttl.unwrap_or(SignedDuration {
                negative: false,
                duration: Duration::from_secs(if delegated { 10 } else { default }),
            })
        };
        let token_cache_ttl = ttl_or(
            self.authentication_token_webhook_cache_ttl,
            authentication_kubeconfig.is_some(),
            120,
        );
        let authorized_ttl = ttl_or(
            self.authorization_webhook_cache_authorized_ttl,
            delegated_authz,
            300,
        );
        let unauthorized_ttl = ttl_or(
            self.authorization_webhook_cache_unauthorized_ttl,
            delegated_authz,
            30,
        );
        for (flag, ttl) in [
            ("--authentication-token-webhook-cache-ttl", token_cache_ttl),
            (
                "--authorization-webhook-cache-authorized-ttl",
                authorized_ttl,
            ),
            (
                "--authorization-webhook-cache-unauthorized-ttl",
                unauthorized_ttl,
            ),
        ] {
            if ttl.negative {
                errors.push(format!("{flag} must not be negative"));
            }
        }
        let issuers: Vec<String> = self
            .service_account_issuer
            .iter()
            .map(|i| i.trim().to_string())
            .filter(|i| !i.is_empty())
            .collect();
        let mut service_account_keys = self.service_account_key_file.clone();
        if service_account_keys.is_empty()
            && let Some(signing) = &self.service_account_signing_key_file
        {
            service_account_keys.push(signing.clone());
        }
        if !issuers.is_empty() && service_account_keys.is_empty() {
            errors.push(
                "--service-account-issuer requires --service-account-key-file or --service-account-signing-key-file"
                    .to_string(),
            );
        }
        if issuers.is_empty()
            && (self.service_account_signing_key_file.is_some()
                || !self.service_account_key_file.is_empty())
        {
            errors.push(
                "--service-account-key-file and --service-account-signing-key-file need --service-account-issuer"
                    .to_string(),
            );
        }
        let mut api_audiences: Vec<String> = self
            .api_audiences
            .iter()
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .collect();
        if api_audiences.is_empty() {
            api_audiences = issuers.clone();
        }
        let mut oidc_required_claims = Vec::new();
        for claim in &self.oidc_required_claim {
            match claim.split_once('=') {
                Some((k, v)) if !k.is_empty() => {
                    oidc_required_claims.push((k.to_string(), v.to_string()));
                }
                _ => errors.push(format!(
                    "--oidc-required-claim: {claim:?} is not a key=value pair"
                )),
            }
        }
        let oidc = crate::authn::oidc::Options {
            issuer_url: self.oidc_issuer_url.clone().filter(|u| !u.is_empty()),
            client_id: self.oidc_client_id.clone(),
            username_claim: self.oidc_username_claim.clone(),
            username_prefix: self.oidc_username_prefix.clone(),
            groups_claim: self.oidc_groups_claim.clone().filter(|c| !c.is_empty()),
            groups_prefix: self.oidc_groups_prefix.clone(),
            ca_file: self.oidc_ca_file.clone(),
            required_claims: oidc_required_claims,
            signing_algs: self.oidc_signing_algs.clone(),
        };
        errors.extend(crate::authn::oidc::validate(&oidc));
        let mut anonymous = self.anonymous_auth;
        if anonymous && modes.contains(&crate::authz::Mode::AlwaysAllow) {
            tracing::warn!(
                "AnonymousAuth is not allowed with the AlwaysAllow authorizer. Resetting AnonymousAuth to false. You should use a different authorizer"
            );
            anonymous = false;
        }
        let log_format = match self.audit_log_format.as_str() {
            "json" => crate::audit::backend::log::LogFormat::Json,
            "legacy" => crate::audit::backend::log::LogFormat::Legacy,
            other => {
                errors.push(format!(
                    "--audit-log-format {other:?} invalid, must be one of: legacy,json"
                ));
                Default::default()
            }
        };
        let webhook_mode = match self.audit_webhook_mode.as_str() {
            "batch" => crate::audit::backend::webhook::WebhookMode::Batch,
            "blocking" => crate::audit::backend::webhook::WebhookMode::Blocking,
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
        let audit = crate::audit::Options {
            policy_file: self.audit_policy_file.clone(),
            log: self
                .audit_log_path
                .clone()
                .map(|path| crate::audit::backend::log::LogOptions {
                    path,
                    max_age_days: self.audit_log_maxage,
                    max_backups: self.audit_log_maxbackup,
                    max_size_mib: self.audit_log_maxsize,
                    format: log_format,
                }),
            webhook: self.audit_webhook_config_file.clone().map(|config_file| {
                crate::audit::backend::webhook::WebhookOptions {
                    config_file,
                    mode: webhook_mode,
                    buffer_size: self.audit_webhook_batch_buffer_size,
                    batch_max_size: self.audit_webhook_batch_max_size,
                    batch_max_wait: self.audit_webhook_batch_max_wait.duration,
                }
            }),
        };
        let encryption = match &self.encryption_provider_config {
            Some(path) => match apiforge_storage::encryption::Transformers::load(path) {
                Ok(transformers) => Some(std::sync::Arc::new(transformers)),
                Err(e) => {
                    errors.push(format!(
                        "--encryption-provider-config {}: {e}",
                        path.display()
                    ));
                    None
                }
            },
            None => None,
        };
        if !errors.is_empty() {
            bail!("invalid options:\n  {}", errors.join("\n  "));
        }
        let storage_prefix = self.etcd_prefix.trim_end_matches('/').to_string();
        let etcd = (!servers.is_empty()).then(|| apiforge_storage::etcd3::Etcd3Options {
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
            runtime_config: self.runtime_config,
            server: crate::server::Config {
                bind_address: self.bind_address,
                secure_port: self.secure_port,
                data_dir: self.data_dir,
                tls_cert_file: self.tls_cert_file,
                tls_private_key_file: self.tls_private_key_file,
                tls_sni_cert_keys: self.tls_sni_cert_key,
                identity_lease: crate::controllers::identity_lease::Options {
                    duration: Duration::from_secs(self.identity_lease_duration_seconds),
                    renew_interval: Duration::from_secs(self.identity_lease_renew_interval_seconds),
                },
                clock: crate::clock::Clock::system(),
                controllers: crate::controllers::Options {
                    leader_elect: self.leader_elect,
                    leader_election: crate::controllers::leader_election::Options {
                        lease_duration: self.leader_elect_lease_duration.duration,
                        renew_deadline: self.leader_elect_renew_deadline.duration,
                        retry_period: self.leader_elect_retry_period.duration,
                    },
                },
                advertise_address: self.advertise_address,
                shutdown_delay: self.shutdown_delay_duration.duration,
                storage_prefix,
                encryption,
                watch_cache: self.watch_cache.then(|| crate::registry::CacheOptions {
                    window: self.default_watch_cache_size,
                    sizes,
                    ..Default::default()
                }),
                admission: Default::default(),
                authentication: crate::authn::Options {
                    client_ca_file: self.client_ca_file,
                    token_auth_file: self.token_auth_file,
                    anonymous,
                    bootstrap_tokens: self.enable_bootstrap_token_auth,
                    request_header: crate::authn::request_header::Options {
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
                    webhook: self.authentication_token_webhook_config_file.map(|file| {
                        crate::authn::webhook::Options {
                            config_file: file,
                            cache_ttl: token_cache_ttl.duration,
                            version: self.authentication_token_webhook_version,
                        }
                    }),
                    api_audiences,
                    service_accounts: crate::authn::service_account::Options {
                        issuers,
                        key_files: service_account_keys,
                    },
                    oidc,
                    delegated: authentication_kubeconfig.map(|kubeconfig| {
                        crate::authn::delegated::Options {
                            kubeconfig,
                            cache_ttl: token_cache_ttl.duration,
                            skip_lookup: self.authentication_skip_lookup,
                            tolerate_lookup_failure: self.authentication_tolerate_lookup_failure,
                            dir: delegated_dir,
                        }
                    }),
                    looked_up: None,
                },
                authorization: crate::authz::Options {
                    modes,
                    policy_file: self.authorization_policy_file,
                    webhook: crate::authz::webhook::Options {
                        config_file: self.authorization_webhook_config_file,
                        authorized_ttl: authorized_ttl.duration,
                        unauthorized_ttl: unauthorized_ttl.duration,
                        version: self.authorization_webhook_version,
                    },
                    delegated: authorization_kubeconfig.map(|kubeconfig| {
                        crate::authz::delegated::Options {
                            kubeconfig,
                            authorized_ttl: authorized_ttl.duration,
                            unauthorized_ttl: unauthorized_ttl.duration,
                            always_allow_paths: self
                                .authorization_always_allow_paths
                                .iter()
                                .map(|p| p.trim().to_string())
                                .filter(|p| !p.is_empty())
                                .collect(),
                            always_allow_groups: vec![crate::authn::MASTERS_GROUP.to_string()],
                        }
                    }),
                },
                filters: crate::filters::ChainConfig {
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
                aggregator: crate::aggregator::Options {
                    proxy_client_cert: self.proxy_client_cert_file.zip(self.proxy_client_key_file),
                    enable_aggregator_routing: self.enable_aggregator_routing,
                },
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
    let duration = crate::filters::timeout::parse_go_duration(magnitude)?;
    Ok(SignedDuration {
        negative: negative && !duration.is_zero(),
        duration,
    })
}

/// Parses one `--tls-sni-cert-key` value.
fn parse_sni_cert_key(value: &str) -> Result<crate::server::tls::SniCertKey, String> {
    value.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(args: &[&str]) -> anyhow::Result<CompletedOptions> {
        let cli = Cli::try_parse_from(["apiforge", "serve"].iter().chain(args))?;
        match cli.command {
            Command::Serve(opts) => opts.complete(),
            _ => anyhow::bail!("not serve"),
        }
    }

    #[test]
    fn delegating_defaults_follow_the_delegating_options() {
        let ten = Duration::from_secs(10);
        let c = serve(&["--kubeconfig", "main.kubeconfig"]).expect("options");
        let authn = &c.server.authentication;
        let delegated = authn.delegated.as_ref().expect("delegated authn");
        assert_eq!(delegated.kubeconfig, PathBuf::from("main.kubeconfig"));
        assert_eq!(delegated.cache_ttl, ten);
        assert!(!delegated.skip_lookup);
        assert!(delegated.tolerate_lookup_failure);
        let authz = c.server.authorization.delegated.as_ref().expect("authz");
        assert_eq!((authz.authorized_ttl, authz.unauthorized_ttl), (ten, ten));
        assert_eq!(authz.always_allow_paths, ["/healthz", "/readyz", "/livez"]);
        assert_eq!(authz.always_allow_groups, ["system:masters"]);
        assert!(c.server.authorization.modes.is_empty());

        // Explicit kubeconfigs win over --kubeconfig; explicit TTLs count.
        let c = serve(&[
            "--kubeconfig",
            "main",
            "--authentication-kubeconfig",
            "authn",
            "--authentication-token-webhook-cache-ttl",
            "1m",
            "--authentication-skip-lookup",
            "--authentication-tolerate-lookup-failure=false",
            "--authorization-always-allow-paths",
            "/healthz,/metrics*",
        ])
        .expect("options");
        let delegated = c.server.authentication.delegated.expect("delegated");
        assert_eq!(delegated.kubeconfig, PathBuf::from("authn"));
        assert_eq!(delegated.cache_ttl, Duration::from_secs(60));
        assert!(delegated.skip_lookup && !delegated.tolerate_lookup_failure);
        let authz = c.server.authorization.delegated.expect("authz");
        assert_eq!(authz.kubeconfig, PathBuf::from("main"));
        assert_eq!(authz.always_allow_paths, ["/healthz", "/metrics*"]);

        // Without a kubeconfig: kube-apiserver's modes and TTLs.
        let c = serve(&[]).expect("options");
        assert!(c.server.authentication.delegated.is_none());
        assert!(c.server.authorization.delegated.is_none());
        assert_eq!(c.server.authorization.modes, [crate::authz::Mode::Rbac]);
        assert_eq!(
            c.server.authorization.webhook.authorized_ttl,
            Duration::from_secs(300)
        );
        assert!(serve(&["--authorization-mode="]).is_err());
        let err = serve(&[
            "--kubeconfig",
            "k",
            "--authorization-always-allow-paths",
            "/a*b",
        ])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(err.contains("only trailing * allowed in \"a*b\""), "{err}");
    }

    #[test]
    fn leader_election_flags() {
        let c = serve(&[]).expect("defaults");
        let le = &c.server.controllers;
        assert!(le.leader_elect);
        assert_eq!(le.leader_election.lease_duration, Duration::from_secs(15));
        assert_eq!(le.leader_election.renew_deadline, Duration::from_secs(10));
        assert_eq!(le.leader_election.retry_period, Duration::from_secs(2));
        let c = serve(&[
            "--leader-elect-lease-duration=3s",
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=500ms",
        ])
        .expect("short timings");
        let le = &c.server.controllers.leader_election;
        assert_eq!(le.retry_period, Duration::from_millis(500));
        let c = serve(&["--leader-elect=false"]).expect("off");
        assert!(!c.server.controllers.leader_elect);
        let err = |args: &[&str]| serve(args).err().map(|e| e.to_string()).unwrap_or_default();
        let e = err(&["--leader-elect-lease-duration=10s"]);
        assert!(
            e.contains(
                "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"
            ),
            "{e}"
        );
        let e = err(&["--leader-elect-retry-period=0s"]);
        assert!(
            e.contains("--leader-elect-retry-period must be greater than zero"),
            "{e}"
        );
        let e = err(&["--leader-elect-retry-period=9s"]);
        assert!(
            e.contains(
                "--leader-elect-renew-deadline must be greater than --leader-elect-retry-period * 1.2"
            ),
            "{e}"
        );
        // Not validated when off, as kube-controller-manager.
        assert!(serve(&["--leader-elect=false", "--leader-elect-retry-period=0s"]).is_ok());
    }

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
