//! kube-apiserver's `EncryptionConfiguration` file
//! (`apiserver.config.k8s.io/v1`, JSON or YAML): decoding (strict:
//! unknown and duplicate fields are errors), validation with upstream's
//! field paths and messages, and the transformers it describes.

use std::collections::HashMap;
use std::path::Path;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::provider::{Kind, NamedKey, Provider, ResourceTransformer};
use super::{Error, GroupResource, Transformers};

const API_VERSION: &str = "apiserver.config.k8s.io/v1";

/// The file's top level.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct EncryptionConfiguration {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    resources: Option<Vec<ResourceConfiguration>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceConfiguration {
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    providers: Vec<ProviderConfiguration>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ProviderConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    aesgcm: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    aescbc: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secretbox: Option<KeysConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    identity: Option<IdentityConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kms: Option<KmsConfiguration>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct KeysConfiguration {
    #[serde(default)]
    keys: Vec<KeyConfiguration>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct KeyConfiguration {
    #[serde(default)]
    name: String,
    #[serde(default)]
    secret: Secret,
}

/// A key's base64 secret; printed (and serialized into messages) as
/// `REDACTED`.
#[derive(Default, Deserialize)]
#[serde(transparent)]
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("REDACTED")
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("REDACTED")
    }
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct IdentityConfiguration {}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct KmsConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    api_version: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cachesize: Option<i32>,
    #[serde(default)]
    endpoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout: Option<String>,
}

/// Reads, validates and builds the configuration in `path`.
pub(super) fn load(path: &Path) -> Result<Transformers, Error> {
    let shown = path.display();
    let data = std::fs::read(path).map_err(|e| {
        Error::Parse(format!(
            "error while loading file: error reading encryption provider configuration file \"{shown}\": {e}"
        ))
    })?;
    if data.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::Parse(format!(
            "error while loading file: encryption provider configuration file \"{shown}\" is empty"
        )));
    }
    let decode_err = |e: String| {
        Error::Parse(format!(
            "error decoding encryption provider configuration file \"{shown}\": {e}"
        ))
    };
    let text = std::str::from_utf8(&data).map_err(|e| decode_err(e.to_string()))?;
    let config = decode(text).map_err(decode_err)?;
    build(&config)
}

/// Parses and builds a configuration from its text (JSON or YAML).
pub(super) fn from_str(text: &str) -> Result<Transformers, Error> {
    let config = decode(text).map_err(|e| {
        Error::Parse(format!(
            "error decoding encryption provider configuration: {e}"
        ))
    })?;
    build(&config)
}

fn decode(text: &str) -> Result<EncryptionConfiguration, String> {
    let config: EncryptionConfiguration = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| format!("strict decoding error: {e}"))?
    } else {
        serde_saphyr::from_str(text).map_err(|e| format!("strict decoding error: {e}"))?
    };
    let api_version = config.api_version.as_deref().unwrap_or_default();
    let kind = config.kind.as_deref().unwrap_or_default();
    match (api_version, kind) {
        (API_VERSION, "EncryptionConfiguration") | ("v1", "EncryptionConfig") => Ok(config),
        ("", _) | (_, "") => Err(format!(
            "Object 'Kind' is missing or apiVersion is not set: expected apiVersion {API_VERSION:?} and kind \"EncryptionConfiguration\""
        )),
        (API_VERSION, kind) | ("v1", kind) => Err(format!(
            "no kind {kind:?} is registered for version {api_version:?}"
        )),
        (version, _) => Err(format!(
            "no kind {kind:?} is registered for version {version:?}"
        )),
    }
}

/// An apimachinery `field.Error`, rendered.
fn required(path: &str, detail: &str) -> String {
    format!("{path}: Required value: {detail}")
}

fn invalid(path: &str, value: &impl Serialize, detail: &str) -> String {
    let value = serde_json::to_string(value).unwrap_or_default();
    format!("{path}: Invalid value: {value}: {detail}")
}

/// Resources that have no REST API and so cannot be encrypted.
const NOT_RESTFUL: [&str; 3] = [
    "apiserveripinfo",
    "serviceipallocations",
    "servicenodeportallocations",
];

/// `ValidateEncryptionConfiguration`: every problem, in upstream's words.
fn validate(config: &EncryptionConfiguration) -> Vec<String> {
    let mut errs = Vec::new();
    let resources = config.resources.as_deref().unwrap_or_default();
    if resources.is_empty() {
        errs.push(required("resources", "at least one resources is required"));
        return errs;
    }
    for (i, entry) in resources.iter().enumerate() {
        let path = format!("resources[{i}].resources");
        if entry.resources.is_empty() {
            errs.push(required(&path, &format!("at least one {path} is required")));
        }
        validate_resources(&path, &entry.resources, &mut errs);
        let providers_path = format!("resources[{i}].providers");
        if entry.providers.is_empty() {
            errs.push(required(
                &providers_path,
                &format!("at least one {providers_path} is required"),
            ));
        }
        for (j, provider) in entry.providers.iter().enumerate() {
            validate_provider(&format!("{providers_path}[{j}]"), provider, &mut errs);
        }
    }
    errs
}

fn validate_resources(path: &str, list: &[String], errs: &mut Vec<String>) {
    let parsed: Vec<GroupResource> = list.iter().map(|r| GroupResource::parse(r)).collect();
    let mut seen = std::collections::HashSet::new();
    if parsed.iter().any(|gr| !seen.insert(gr)) {
        errs.push(invalid(
            path,
            &list,
            "the same resource cannot be specified multiple times",
        ));
    }
    let all = parsed
        .iter()
        .any(|gr| gr.group == "*" && gr.resource == "*");
    let overlapping = (all && parsed.len() > 1)
        || parsed.iter().any(|wild| {
            wild.resource == "*"
                && wild.group != "*"
                && parsed
                    .iter()
                    .any(|gr| gr.group == wild.group && gr.resource != "*")
        });
    if overlapping {
        errs.push(invalid(
            path,
            &list,
            "using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked",
        ));
    }
    for (j, (name, gr)) in list.iter().zip(&parsed).enumerate() {
        let at = format!("{path}[{j}]");
        let detail = if name.chars().any(|c| c.is_ascii_uppercase()) {
            "resource name should not contain capital letters"
        } else if name == "*" {
            "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources"
        } else if NOT_RESTFUL.contains(&gr.resource.as_str()) {
            "resources which do not have REST API/s cannot be encrypted"
        } else if gr.group == "events.k8s.io" {
            "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file"
        } else if gr.group == "extensions" {
            "'extensions' group has been removed and cannot be used for encryption"
        } else if gr.group == "*" && gr.resource != "*" {
            "encrypting the same resource across groups is not supported"
        } else {
            continue;
        };
        errs.push(invalid(&at, name, detail));
    }
}

fn validate_provider(path: &str, provider: &ProviderConfiguration, errs: &mut Vec<String>) {
    let keyed = [
        ("aesgcm", Kind::AesGcm, &provider.aesgcm),
        ("aescbc", Kind::AesCbc, &provider.aescbc),
        ("secretbox", Kind::Secretbox, &provider.secretbox),
    ];
    let count = keyed.iter().filter(|(_, _, c)| c.is_some()).count()
        + usize::from(provider.identity.is_some())
        + usize::from(provider.kms.is_some());
    match count {
        0 => errs.push(invalid(
            path,
            provider,
            "provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity",
        )),
        1 => {}
        _ => errs.push(invalid(
            path,
            provider,
            "more than one provider specified in a single element, should split into different list elements",
        )),
    }
    for (field, kind, config) in keyed {
        let Some(config) = config else { continue };
        let keys_path = format!("{path}.{field}.keys");
        if config.keys.is_empty() {
            errs.push(required(&keys_path, "at least one keys is required"));
        }
        for (k, key) in config.keys.iter().enumerate() {
            let key_path = format!("{keys_path}[{k}]");
            if key.name.is_empty() {
                errs.push(required(
                    &format!("{key_path}.name"),
                    "name is a mandatory field for a key",
                ));
            }
            let secret_path = format!("{key_path}.secret");
            if key.secret.0.is_empty() {
                errs.push(required(
                    &secret_path,
                    "secret is a mandatory field for a key",
                ));
                continue;
            }
            match base64::engine::general_purpose::STANDARD.decode(&key.secret.0) {
                Err(_) => errs.push(invalid(
                    &secret_path,
                    &"REDACTED",
                    "secrets must be base64 encoded",
                )),
                Ok(bytes) if !kind.key_lengths().contains(&bytes.len()) => errs.push(invalid(
                    &secret_path,
                    &"REDACTED",
                    &format!(
                        "secret is not of the expected length, got {}, expected one of [{}]",
                        bytes.len(),
                        kind.key_lengths()
                            .iter()
                            .map(usize::to_string)
                            .collect::<Vec<_>>()
                            .join(" ")
                    ),
                )),
                Ok(_) => {}
            }
        }
    }
    if let Some(kms) = &provider.kms
        && kms.name.is_empty()
    {
        errs.push(required(
            &format!("{path}.kms.name"),
            "name is a mandatory field for a provider",
        ));
    }
}

/// The aggregate of several messages as apimachinery prints it.
fn aggregate(errs: &[String]) -> String {
    match errs {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// `*.` for the core wildcard, `resource` for core, `resource.group`
/// otherwise (upstream's `grYAMLString`).
fn rule_string(gr: &GroupResource) -> String {
    if gr.group.is_empty() && gr.resource == "*" {
        "*.".to_string()
    } else {
        gr.to_string()
    }
}

fn build(config: &EncryptionConfiguration) -> Result<Transformers, Error> {
    let errs = validate(config);
    if !errs.is_empty() {
        return Err(Error::Parse(aggregate(&errs)));
    }
    let mut rules: HashMap<GroupResource, Vec<Provider>> = HashMap::new();
    let mut wildcards: Vec<GroupResource> = Vec::new();
    let mut masked = Vec::new();
    for entry in config.resources.as_deref().unwrap_or_default() {
        let parsed: Vec<GroupResource> = entry
            .resources
            .iter()
            .map(|r| GroupResource::parse(r))
            .collect();
        for gr in &parsed {
            if let Some(wild) = wildcards
                .iter()
                .find(|w| w.resource == "*" && (w.group == "*" || w.group == gr.group))
            {
                masked.push(format!(
                    "resource \"{}\" is masked by earlier rule \"{}\"",
                    rule_string(gr),
                    rule_string(wild)
                ));
            }
        }
        for gr in parsed {
            let providers = build_providers(&entry.providers)?;
            if gr.resource == "*" {
                wildcards.push(gr.clone());
            }
            rules.entry(gr).or_default().extend(providers);
        }
    }
    if !masked.is_empty() {
        return Err(Error::Parse(aggregate(&masked)));
    }
    Ok(Transformers {
        rules: rules
            .into_iter()
            .map(|(gr, providers)| (gr, ResourceTransformer::Providers(providers)))
            .collect(),
    })
}

fn build_providers(configs: &[ProviderConfiguration]) -> Result<Vec<Provider>, Error> {
    configs.iter().map(build_provider).collect()
}

fn build_provider(config: &ProviderConfiguration) -> Result<Provider, Error> {
    if let Some(kms) = &config.kms {
        return Err(Error::Build(format!(
            "KMS provider {:?} is not supported: apiforge implements the aescbc, aesgcm, secretbox and identity providers",
            kms.name
        )));
    }
    if config.identity.is_some() {
        return Ok(Provider::Identity);
    }
    let (kind, keys) = match (&config.aescbc, &config.aesgcm, &config.secretbox) {
        (Some(c), _, _) => (Kind::AesCbc, c),
        (_, Some(c), _) => (Kind::AesGcm, c),
        (_, _, Some(c)) => (Kind::Secretbox, c),
        _ => {
            return Err(Error::Build(
                "provider does not contain any of the expected providers".into(),
            ));
        }
    };
    let keys = keys
        .keys
        .iter()
        .map(|key| {
            let secret = base64::engine::general_purpose::STANDARD
                .decode(&key.secret.0)
                .map_err(|e| {
                    Error::Build(format!(
                        "could not obtain secret for named key {}: {e}",
                        key.name
                    ))
                })?;
            NamedKey::new(kind, &key.name, &secret).ok_or_else(|| {
                Error::Build(format!(
                    "error while creating cipher for named key {}: invalid key size {}",
                    key.name,
                    secret.len()
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Provider::Keyed { kind, keys })
}
