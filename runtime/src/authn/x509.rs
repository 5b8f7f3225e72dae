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
struct Tlv<'a> {
    tag: u8,
    content: &'a [u8],
}

/// Reads the element at the start of `input`; returns it and the rest.
fn read(input: &[u8]) -> Option<(Tlv<'_>, &[u8])> {
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
fn expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
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
}
