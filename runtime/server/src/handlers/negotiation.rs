//! Content negotiation: what the client accepts (JSON, YAML, protobuf,
//! Table, PartialObjectMetadata, aggregated discovery) and what it sent.

/// The serializer of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/vnd.kubernetes.protobuf` (only for kinds with a
    /// protobuf codec, see [`Allowed::protobuf`]).
    Protobuf,
}

impl Format {
    /// The media type.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Yaml => "application/yaml",
            Format::Protobuf => "application/vnd.kubernetes.protobuf",
        }
    }
}

/// A conversion target requested with `as=`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The object itself.
    Object,
    /// `meta.k8s.io` Table in `v1` or `v1beta1`.
    Table(String),
    /// `meta.k8s.io` PartialObjectMetadata in `v1` or `v1beta1`.
    PartialObjectMetadata(String),
    /// `meta.k8s.io` PartialObjectMetadataList in `v1` or `v1beta1`.
    PartialObjectMetadataList(String),
    /// `apidiscovery.k8s.io` APIGroupDiscoveryList in `v2` or `v2beta1`.
    Discovery(String),
}

/// One clause of an Accept header.
#[derive(Clone, Debug)]
pub struct Clause {
    /// `type/subtype`.
    pub media: String,
    /// Parameters (lower-cased keys).
    pub params: Vec<(String, String)>,
    /// Quality.
    pub q: f32,
}

impl Clause {
    fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses an Accept header into clauses, best first.
pub fn parse_accept(header: &str) -> Vec<Clause> {
    let mut out: Vec<Clause> = header
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.split(';');
            let media = pieces.next()?.trim().to_ascii_lowercase();
            if media.is_empty() {
                return None;
            }
            let mut params = Vec::new();
            let mut q = 1.0;
            for p in pieces {
                if let Some((k, v)) = p.split_once('=') {
                    let k = k.trim().to_ascii_lowercase();
                    let v = v.trim().trim_matches('"').to_string();
                    if k == "q" {
                        q = v.parse().unwrap_or(0.0);
                    } else {
                        params.push((k, v));
                    }
                }
            }
            Some(Clause { media, params, q })
        })
        .collect();
    // Stable: equal q keeps the client's order.
    out.sort_by(|a, b| b.q.partial_cmp(&a.q).unwrap_or(std::cmp::Ordering::Equal));
    out
}

fn format_of(media: &str) -> Option<Format> {
    match media {
        "application/json" | "application/*" | "*/*" => Some(Format::Json),
        "application/yaml" => Some(Format::Yaml),
        "application/vnd.kubernetes.protobuf" => Some(Format::Protobuf),
        _ => None,
    }
}

/// What an endpoint allows besides the plain object.
#[derive(Clone, Copy, Debug, Default)]
pub struct Allowed {
    /// Tables and PartialObjectMetadata (resource endpoints).
    pub meta_targets: bool,
    /// Aggregated discovery (`/api`, `/apis`).
    pub discovery: bool,
    /// The response is a list (PartialObjectMetadataList instead of PartialObjectMetadata).
    pub list: bool,
    /// The plain object may be written as protobuf (the kind has a
    /// protobuf codec). Tables and PartialObjectMetadata are never protobuf
    /// here; such clauses are skipped.
    pub protobuf: bool,
}

/// Picks the response format and target, or `None` for 406.
pub fn negotiate(accept: Option<&str>, allowed: Allowed) -> Option<(Format, Target)> {
    let accept = accept.map(str::trim).filter(|a| !a.is_empty());
    let Some(accept) = accept else {
        return Some((Format::Json, Target::Object));
    };
    for clause in parse_accept(accept) {
        if clause.q <= 0.0 {
            continue;
        }
        let Some(format) = format_of(&clause.media) else {
            continue;
        };
        if format == Format::Protobuf && (!allowed.protobuf || clause.param("as").is_some()) {
            continue;
        }
        let target = match clause.param("as") {
            None => Target::Object,
            Some(kind) => {
                let g = clause.param("g").unwrap_or_default();
                let v = clause.param("v").unwrap_or_default().to_string();
                match (kind, g) {
                    ("Table", "meta.k8s.io")
                        if allowed.meta_targets && (v == "v1" || v == "v1beta1") =>
                    {
                        if format != Format::Json && format != Format::Yaml {
                            continue;
                        }
                        Target::Table(v)
                    }
                    ("PartialObjectMetadata", "meta.k8s.io")
                        if allowed.meta_targets
                            && !allowed.list
                            && (v == "v1" || v == "v1beta1") =>
                    {
                        Target::PartialObjectMetadata(v)
                    }
                    ("PartialObjectMetadataList", "meta.k8s.io")
                        if allowed.meta_targets
                            && allowed.list
                            && (v == "v1" || v == "v1beta1") =>
                    {
                        Target::PartialObjectMetadataList(v)
                    }
                    ("APIGroupDiscoveryList", "apidiscovery.k8s.io")
                        if allowed.discovery
                            && (v == "v2" || v == "v2beta1")
                            && format == Format::Json =>
                    {
                        Target::Discovery(v)
                    }
                    _ => continue,
                }
            }
        };
        return Some((format, target));
    }
    None
}

/// The decoder of a request body, by Content-Type; `None` means 415 (so
/// does [`Format::Protobuf`] for a kind without a protobuf codec).
pub fn body_format(content_type: Option<&str>) -> Option<Format> {
    let Some(ct) = content_type else {
        return Some(Format::Json);
    };
    let media = ct
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match media.as_str() {
        "" | "application/json" => Some(Format::Json),
        "application/yaml" => Some(Format::Yaml),
        "application/vnd.kubernetes.protobuf" => Some(Format::Protobuf),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESOURCE: Allowed = Allowed {
        meta_targets: true,
        discovery: false,
        list: true,
        protobuf: false,
    };

    #[test]
    fn kubectl_table_accept() {
        let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            negotiate(Some(accept), RESOURCE),
            Some((Format::Json, Target::Table("v1".into())))
        );
    }

    #[test]
    fn discovery_accept() {
        let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        let allowed = Allowed {
            discovery: true,
            ..Default::default()
        };
        assert_eq!(
            negotiate(Some(accept), allowed),
            Some((Format::Json, Target::Discovery("v2".into())))
        );
        assert_eq!(
            negotiate(Some(accept), Allowed::default()),
            Some((Format::Json, Target::Object))
        );
    }

    #[test]
    fn protobuf_only_is_not_acceptable() {
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf"), RESOURCE),
            None
        );
        assert_eq!(
            negotiate(
                Some("application/vnd.kubernetes.protobuf,application/json"),
                RESOURCE
            ),
            Some((Format::Json, Target::Object))
        );
    }

    #[test]
    fn protobuf_for_capable_kinds() {
        let pb = Allowed {
            protobuf: true,
            ..RESOURCE
        };
        let client_go = "application/vnd.kubernetes.protobuf, application/json";
        assert_eq!(
            negotiate(Some(client_go), pb),
            Some((Format::Protobuf, Target::Object))
        );
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf"), pb),
            Some((Format::Protobuf, Target::Object))
        );
        // Tables are never protobuf; metadata-only protobuf falls through.
        let meta = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(
            negotiate(Some(meta), pb),
            Some((Format::Json, Target::PartialObjectMetadataList("v1".into())))
        );
        assert_eq!(
            body_format(Some("application/vnd.kubernetes.protobuf")),
            Some(Format::Protobuf)
        );
    }

    #[test]
    fn body_types() {
        assert_eq!(
            body_format(Some("application/json; charset=utf-8")),
            Some(Format::Json)
        );
        assert_eq!(body_format(Some("application/yaml")), Some(Format::Yaml));
        assert_eq!(body_format(Some("text/plain")), None);
    }
}
