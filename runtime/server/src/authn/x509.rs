//! The subject of an X.509 certificate, read from its DER encoding: the
//! common name is the user name and the organizations are the groups.
//! The certificate itself was verified by the TLS layer.

/// `2.5.4.3` commonName.
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
/// `2.5.4.10` organizationName.
const OID_ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const EXPLICIT_0: u8 = 0xa0;

/// The parts of a certificate subject authentication uses.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Subject {
    /// The (last) CN.
    pub(super) common_name: String,
    /// Every O, in order.
    pub(super) organizations: Vec<String>,
}

/// One DER element: its tag and content.
pub(super) struct Tlv<'a> {
    pub(super) tag: u8,
    pub(super) content: &'a [u8],
}

/// Reads the element at the start of `input`; returns it and the rest.
pub(super) fn read(input: &[u8]) -> Option<(Tlv<'_>, &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, tail) = rest.split_at(n);
        rest = tail;
        bytes
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b))
    };
    if rest.len() < len {
        return None;
    }
    let (content, rest) = rest.split_at(len);
    Some((Tlv { tag, content }, rest))
}

/// Reads the element at the start of `input`, which must have `tag`.
pub(super) fn expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (tlv, rest) = read(input)?;
    (tlv.tag == tag).then_some((tlv.content, rest))
}

/// Parses the subject of a DER certificate; `None` when malformed.
pub(super) fn subject(der: &[u8]) -> Option<Subject> {
    let (cert, _) = expect(der, SEQUENCE)?;
    let (tbs, _) = expect(cert, SEQUENCE)?;
    let mut rest = tbs;
    let (first, after) = read(rest)?;
    if first.tag == EXPLICIT_0 {
        rest = after;
    }
    // serialNumber, signature, issuer, validity.
    for _ in 0..4 {
        rest = read(rest)?.1;
    }
    let (name, _) = expect(rest, SEQUENCE)?;
    let mut subject = Subject::default();
    let mut rdns = name;
    while !rdns.is_empty() {
        let (set, next) = expect(rdns, SET)?;
        rdns = next;
        let mut attrs = set;
        while !attrs.is_empty() {
            let (attr, next) = expect(attrs, SEQUENCE)?;
            attrs = next;
            let (oid, value) = expect(attr, OID)?;
            let (value, _) = read(value)?;
            let text = String::from_utf8_lossy(value.content).into_owned();
            if oid == OID_COMMON_NAME {
                subject.common_name = text;
            } else if oid == OID_ORGANIZATION {
                subject.organizations.push(text);
            }
        }
    }
    Some(subject)
}

/// `2.5.29.17` subjectAltName.
const OID_SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
const OCTET_STRING: u8 = 0x04;
const BOOLEAN: u8 = 0x01;
const EXPLICIT_3: u8 = 0xa3;
/// GeneralName `[2] dNSName` and `[7] iPAddress` (implicit, primitive).
const SAN_DNS: u8 = 0x82;
const SAN_IP: u8 = 0x87;

/// The names a serving certificate is for: its DNS and IP subject
/// alternative names, or its CN when it has none (kube-apiserver's default
/// names of `--tls-sni-cert-key`). Empty when malformed.
pub(crate) fn serving_names(der: &[u8]) -> Vec<String> {
    let sans = subject_alt_names(der).unwrap_or_default();
    if !sans.is_empty() {
        return sans;
    }
    subject(der)
        .map(|s| s.common_name)
        .filter(|cn| !cn.is_empty())
        .into_iter()
        .collect()
}

/// The DNS and IP subject alternative names of a DER certificate.
fn subject_alt_names(der: &[u8]) -> Option<Vec<String>> {
    let (cert, _) = expect(der, SEQUENCE)?;
    let (tbs, _) = expect(cert, SEQUENCE)?;
    let mut rest = tbs;
    let (first, after) = read(rest)?;
    if first.tag == EXPLICIT_0 {
        rest = after;
    }
    // serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo.
    for _ in 0..6 {
        rest = read(rest)?.1;
    }
    let mut names = Vec::new();
    while !rest.is_empty() {
        let (tlv, next) = read(rest)?;
        rest = next;
        if tlv.tag != EXPLICIT_3 {
            continue;
        }
        let (mut exts, _) = expect(tlv.content, SEQUENCE)?;
        while !exts.is_empty() {
            let (ext, next) = expect(exts, SEQUENCE)?;
            exts = next;
            let (oid, mut value) = expect(ext, OID)?;
            if oid != OID_SUBJECT_ALT_NAME {
                continue;
            }
            if let Some((_, after)) = expect(value, BOOLEAN) {
                value = after;
            }
            let (octets, _) = expect(value, OCTET_STRING)?;
            let (mut general, _) = expect(octets, SEQUENCE)?;
            while !general.is_empty() {
                let (name, next) = read(general)?;
                general = next;
                match (name.tag, name.content.len()) {
                    (SAN_DNS, _) => {
                        names.push(String::from_utf8_lossy(name.content).to_ascii_lowercase());
                    }
                    (SAN_IP, 4) => {
                        let b: [u8; 4] = name.content.try_into().ok()?;
                        names.push(std::net::Ipv4Addr::from(b).to_string());
                    }
                    (SAN_IP, 16) => {
                        let b: [u8; 16] = name.content.try_into().ok()?;
                        names.push(std::net::Ipv6Addr::from(b).to_string());
                    }
                    _ => {}
                }
            }
        }
    }
    Some(names)
}

/// The end of a DER certificate's validity (`notAfter`), in Unix seconds;
/// `None` when it does not parse as an X.509 certificate.
pub(crate) fn not_after(der: &[u8]) -> Option<i64> {
    use yasna::tags::{TAG_GENERALIZEDTIME, TAG_UTCTIME};
    let read_time = |r: yasna::BERReader<'_, '_>| -> yasna::ASN1Result<i64> {
        if r.lookahead_tag()? == TAG_UTCTIME {
            Ok(r.read_utctime()?.datetime().unix_timestamp())
        } else if r.lookahead_tag()? == TAG_GENERALIZEDTIME {
            Ok(r.read_generalized_time()?.datetime().unix_timestamp())
        } else {
            Err(yasna::ASN1Error::new(yasna::ASN1ErrorKind::Invalid))
        }
    };
    yasna::parse_der(der, |r| {
        r.read_sequence(|r| {
            let end = r.next().read_sequence(|tbs| {
                // version [0] (optional), serialNumber, signature, issuer
                tbs.read_optional(|r| r.read_tagged(yasna::Tag::context(0), |r| r.read_der()))?;
                tbs.next().read_der()?;
                tbs.next().read_der()?;
                tbs.next().read_der()?;
                let end = tbs.next().read_sequence(|v| {
                    v.next().read_der()?;
                    read_time(v.next())
                })?;
                // subject, subjectPublicKeyInfo, then the optional rest
                tbs.next().read_der()?;
                tbs.next().read_der()?;
                while tbs.read_optional(|r| r.read_der())?.is_some() {}
                Ok(end)
            })?;
            r.next().read_der()?; // signatureAlgorithm
            r.next().read_der()?; // signatureValue
            Ok(end)
        })
    })
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cn_and_organizations() {
        let Ok(key) = rcgen::KeyPair::generate() else {
            panic!("key")
        };
        let Ok(mut params) = rcgen::CertificateParams::new(Vec::<String>::new()) else {
            panic!("params")
        };
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "dev");
        let Ok(cert) = params.self_signed(&key) else {
            panic!("cert")
        };
        let s = subject(cert.der()).unwrap_or_default();
        assert_eq!(s.common_name, "alice");
        assert_eq!(s.organizations, ["dev"]);
        assert!(subject(&[0x30, 0x05, 1]).is_none());
    }

    #[test]
    fn serving_names_are_sans_then_cn() {
        let Ok(key) = rcgen::KeyPair::generate() else {
            panic!("key")
        };
        let Ok(mut params) =
            rcgen::CertificateParams::new(vec!["Foo.Example.com".into(), "10.0.0.1".into()])
        else {
            panic!("params")
        };
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "cn");
        let Ok(cert) = params.self_signed(&key) else {
            panic!("cert")
        };
        assert_eq!(serving_names(cert.der()), ["foo.example.com", "10.0.0.1"]);
        let Ok(mut params) = rcgen::CertificateParams::new(Vec::<String>::new()) else {
            panic!("params")
        };
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "only-cn");
        let Ok(cert) = params.self_signed(&key) else {
            panic!("cert")
        };
        assert_eq!(serving_names(cert.der()), ["only-cn"]);
    }
}
