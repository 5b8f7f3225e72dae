//! String formats (`format:`), as apiextensions-apiserver validates them:
//! the formats it supports are checked, others are accepted.

use std::net::IpAddr;

use base64::Engine;

/// Whether `value` is valid for `format`; unknown formats accept anything.
pub(crate) fn check(format: &str, value: &str) -> bool {
    match format {
        "ipv4" => value.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv4()) && value.contains('.'),
        "ipv6" => value.parse::<IpAddr>().is_ok() && value.contains(':'),
        "cidr" => super::rules::parse_cidr(value),
        "mac" => is_mac(value),
        "uuid" => is_uuid(value, None),
        "uuid3" => is_uuid(value, Some('3')),
        "uuid4" => is_uuid(value, Some('4')),
        "uuid5" => is_uuid(value, Some('5')),
        "hostname" => is_hostname(value),
        "uri" => is_request_uri(value),
        "email" => is_email(value),
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(value)
            .is_ok(),
        "date" => jiff::civil::Date::strptime("%Y-%m-%d", value).is_ok(),
        "date-time" | "datetime" => is_date_time(value),
        "duration" => is_duration(value),
        "bsonobjectid" => value.len() == 24 && value.bytes().all(|b| b.is_ascii_hexdigit()),
        "hexcolor" => {
            let h = value.strip_prefix('#').unwrap_or("");
            (h.len() == 3 || h.len() == 6) && h.bytes().all(|b| b.is_ascii_hexdigit())
        }
        "rgbcolor" => is_rgb(value),
        "k8s-short-name" => crate::validation::is_dns1123_label(value).is_empty(),
        "k8s-long-name" => crate::validation::is_dns1123_subdomain(value).is_empty(),
        _ => true,
    }
}

fn is_mac(v: &str) -> bool {
    // Go's net.ParseMAC: 6, 8 or 20 octets as `xx:xx`, `xx-xx` or `xxxx.xxxx`.
    let groups_ok = |sep: char, width: usize| {
        let parts: Vec<&str> = v.split(sep).collect();
        let n = parts.len() * width / 2;
        matches!(n, 6 | 8 | 20)
            && parts
                .iter()
                .all(|p| p.len() == width && p.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    if v.contains(':') {
        groups_ok(':', 2)
    } else if v.contains('-') {
        groups_ok('-', 2)
    } else if v.contains('.') {
        groups_ok('.', 4)
    } else {
        false
    }
}

fn is_uuid(v: &str, version: Option<char>) -> bool {
    let hex: String = v.chars().filter(|c| *c != '-').collect();
    let dashes_ok = if v.contains('-') {
        let lens: Vec<usize> = v.split('-').map(str::len).collect();
        lens == [8, 4, 4, 4, 12]
    } else {
        true
    };
    if hex.len() != 32 || !dashes_ok || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return false;
    }
    match version {
        None => true,
        Some(ver) => {
            let b = hex.as_bytes();
            b[12] as char == ver
                && (ver == '3' || matches!(b[16], b'8' | b'9' | b'a' | b'b' | b'A' | b'B'))
        }
    }
}

fn is_hostname(v: &str) -> bool {
    if v.is_empty() || v.len() > 255 {
        return false;
    }
    let labels: Vec<&str> = v.split('.').collect();
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.chars().count() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_alphanumeric() || c == '-')
    };
    if !labels.iter().all(|l| label_ok(l)) {
        return false;
    }
    match labels.last() {
        Some(tld) if labels.len() > 1 => {
            tld.chars().count() >= 2 && tld.chars().all(char::is_alphabetic)
        }
        _ => true,
    }
}

/// Go's `url.ParseRequestURI`: an absolute URI or an absolute path.
pub(crate) fn is_request_uri(v: &str) -> bool {
    if v.is_empty() || v.chars().any(|c| c.is_control() || c == ' ') {
        return false;
    }
    if v.starts_with('/') {
        return true;
    }
    match v.split_once(':') {
        Some((scheme, _)) => {
            let mut c = scheme.chars();
            c.next().is_some_and(|f| f.is_ascii_alphabetic())
                && c.all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '+' | '-' | '.'))
        }
        None => false,
    }
}

fn is_email(v: &str) -> bool {
    let addr = match (v.find('<'), v.strip_suffix('>')) {
        (Some(i), Some(rest)) => &rest[i + 1..],
        _ => v,
    };
    match addr.rsplit_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !addr.chars().any(char::is_whitespace)
                && !domain.starts_with('.')
                && !domain.ends_with('.')
        }
        None => false,
    }
}

fn is_date_time(v: &str) -> bool {
    v.parse::<jiff::Timestamp>().is_ok()
        || jiff::civil::DateTime::strptime("%Y-%m-%dT%H:%M:%S", v).is_ok()
}

/// strfmt's durations: Go durations (`1h30m`, `1.5s`) and `<n> <unit>`
/// words (`3 days`, `2 weeks`).
fn is_duration(v: &str) -> bool {
    static RE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(
            r"^(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h))+$|^[-+]?\d+\s*(?:ns|us|µs|ms|s|m|h|d|w|y|nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?|years?|sec|min|hr)$|^0$",
        )
        .ok()
    })
    .as_ref()
    .is_some_and(|re| re.is_match(v.trim()))
}

fn is_rgb(v: &str) -> bool {
    let Some(inner) = v.strip_prefix("rgb(").and_then(|r| r.strip_suffix(')')) else {
        return false;
    };
    let parts: Vec<&str> = inner.split(',').map(str::trim).collect();
    parts.len() == 3 && parts.iter().all(|p| p.parse::<u8>().is_ok())
}
