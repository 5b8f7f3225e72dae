use std::sync::Arc;

use aes_gcm::aead::{Aead, Payload};
use base64::Engine as _;
use bytes::Bytes;
use futures::StreamExt;

use super::*;
use crate::embedded::{EmbeddedOptions, EmbeddedStore};
use crate::{EventType, WatchItem};

/// The key upstream's integration tests use ("secret is secure", AES-128).
const KEY1: &str = "c2VjcmV0IGlzIHNlY3VyZQ==";
/// Another 32-byte key.
const KEY2: &str = "e0/+tts8FS254BZimFZWtUsOCOUDSkvzB72PyimMlkY=";
const SECRET_KEY: &str = "/registry/secrets/default/test-secret";

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("base64")
}

fn config(providers: &str) -> String {
    format!(
        r#"{{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration",
            "resources":[{{"resources":["secrets"],"providers":{providers}}}]}}"#
    )
}

fn secrets(t: &Transformers) -> &ResourceTransformer {
    t.for_resource(&GroupResource::parse("secrets"))
}

fn transformers(providers: &str) -> Transformers {
    Transformers::parse(&config(providers)).expect("valid configuration")
}

fn aescbc(keys: &[(&str, &str)]) -> String {
    keyed("aescbc", keys)
}

fn keyed(kind: &str, keys: &[(&str, &str)]) -> String {
    let keys: Vec<String> = keys
        .iter()
        .map(|(n, s)| format!(r#"{{"name":"{n}","secret":"{s}"}}"#))
        .collect();
    format!(r#"{{"{kind}":{{"keys":[{}]}}}}"#, keys.join(","))
}

const PLAIN: &[u8] = br#"{"kind":"Secret","apiVersion":"v1","data":{"api_key":"MDg2YTdmZmMtMDIyNS0xMWU4LWJhODktMGVkNWY4OWY3MThi"}}"#;

#[test]
fn every_provider_and_key_size_round_trips() {
    let k16 = KEY1;
    let k24 = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3";
    let k32 = KEY2;
    for (kind, key) in [
        ("aescbc", k16),
        ("aescbc", k24),
        ("aescbc", k32),
        ("aesgcm", k16),
        ("aesgcm", k24),
        ("aesgcm", k32),
        ("secretbox", k32),
    ] {
        let t = transformers(&format!("[{}]", keyed(kind, &[("key1", key)])));
        for plain in [&b""[..], b"x", &[7u8; 16], &[9u8; 31], PLAIN] {
            let plain = Bytes::copy_from_slice(plain);
            let (stored, prefix) = secrets(&t)
                .write(&plain, SECRET_KEY.as_bytes())
                .expect("write");
            assert_eq!(prefix, format!("k8s:enc:{kind}:v1:"));
            assert!(stored.starts_with(format!("k8s:enc:{kind}:v1:key1:").as_bytes()));
            if plain.len() > 4 {
                assert!(
                    !stored.windows(plain.len()).any(|w| w == &plain[..]),
                    "{kind}: plaintext in the stored bytes"
                );
            }
            let read = secrets(&t)
                .read(&stored, SECRET_KEY.as_bytes())
                .expect("read");
            assert_eq!(read.value, plain, "{kind} {}", key.len());
            assert!(!read.stale);
            // A fresh IV or nonce every time.
            let (again, _) = secrets(&t).write(&plain, SECRET_KEY.as_bytes()).unwrap();
            assert_ne!(stored, again);
        }
    }
}

/// Values produced by Python's `cryptography` (OpenSSL) from the documented
/// layout: `k8s:enc:aescbc:v1:key1:` + IV 00..0f + AES-128-CBC(PKCS#7), and
/// `k8s:enc:aesgcm:v1:key1:` + nonce 100..111 + AES-128-GCM with the
/// storage key as AAD.
#[test]
fn values_written_by_another_implementation_are_read() {
    let cbc = b64(
        "azhzOmVuYzphZXNjYmM6djE6a2V5MToAAQIDBAUGBwgJCgsMDQ4PbinTXL0aDXWjKIYB3nSLd8tEnolXknZMsCyRhUqWyU7X7AP4mtax1P30gnZph9jYpMrD2rwJjNYCplWXF1b5ZxhlAKmULpeJ3W64Ubf1hOaMGXOwlnwjqTiv/dO4R8Iu/cdhzjDyP4o/k4mAKOPhmw==",
    );
    let gcm = b64(
        "azhzOmVuYzphZXNnY206djE6a2V5MTpkZWZnaGlqa2xtbm9xqFXEaBX135396QGalWWq9c1DMVfhhtHhLpKV3M+fkzPiR0IHuRb5YRsWX3wL03631AKYgskqK477qtejcqqaJcm+HNO+97doNRhoWwRBALshFmAkRXqVLvmTyXv9oay+Lv74YCTOeZLVp+44+mkt/a7TerDHPWxl",
    );
    let t = transformers(&format!("[{}]", aescbc(&[("key1", KEY1)])));
    let read = secrets(&t)
        .read(&Bytes::from(cbc), SECRET_KEY.as_bytes())
        .expect("aescbc");
    assert_eq!(read.value, PLAIN);
    let t = transformers(&format!("[{}]", keyed("aesgcm", &[("key1", KEY1)])));
    let gcm = Bytes::from(gcm);
    let read = secrets(&t)
        .read(&gcm, SECRET_KEY.as_bytes())
        .expect("aesgcm");
    assert_eq!(read.value, PLAIN);
    // The storage key is authenticated: the same value under another key
    // does not decrypt.
    let moved = secrets(&t)
        .read(&gcm, b"/registry/secrets/default/other")
        .unwrap_err();
    assert_eq!(
        moved.error.to_string(),
        "cipher: message authentication failed"
    );
}

/// What we write, another implementation reads: AES-CBC decrypted block by
/// block with the bare AES block cipher, AES-GCM and secretbox with the
/// crates' own APIs.
#[test]
fn values_written_are_read_by_another_implementation() {
    use aes::cipher::{BlockDecrypt, KeyInit as _};
    let key = b64(KEY1);
    let t = transformers(&format!("[{}]", aescbc(&[("key1", KEY1)])));
    let (stored, _) = secrets(&t).write(&Bytes::from_static(PLAIN), b"").unwrap();
    let payload = &stored[b"k8s:enc:aescbc:v1:key1:".len()..];
    let aes = aes::Aes128::new_from_slice(&key).unwrap();
    let mut prev = payload[..16].to_vec();
    let mut plain = Vec::new();
    for block in payload[16..].chunks(16) {
        let mut b = aes::Block::clone_from_slice(block);
        aes.decrypt_block(&mut b);
        plain.extend(b.iter().zip(&prev).map(|(x, y)| x ^ y));
        prev = block.to_vec();
    }
    let pad = usize::from(*plain.last().unwrap());
    assert!((1..=16).contains(&pad));
    plain.truncate(plain.len() - pad);
    assert_eq!(plain, PLAIN);

    let t = transformers(&format!("[{}]", keyed("aesgcm", &[("key1", KEY1)])));
    let (stored, _) = secrets(&t)
        .write(&Bytes::from_static(PLAIN), SECRET_KEY.as_bytes())
        .unwrap();
    let payload = &stored[b"k8s:enc:aesgcm:v1:key1:".len()..];
    let gcm = aes_gcm::Aes128Gcm::new_from_slice(&key).unwrap();
    let plain = gcm
        .decrypt(
            aes_gcm::Nonce::from_slice(&payload[..12]),
            Payload {
                msg: &payload[12..],
                aad: SECRET_KEY.as_bytes(),
            },
        )
        .expect("aesgcm with the storage key as AAD");
    assert_eq!(plain, PLAIN);

    let key = b64(KEY2);
    let t = transformers(&format!("[{}]", keyed("secretbox", &[("key1", KEY2)])));
    let (stored, _) = secrets(&t).write(&Bytes::from_static(PLAIN), b"").unwrap();
    let payload = &stored[b"k8s:enc:secretbox:v1:key1:".len()..];
    assert_eq!(payload.len(), 24 + 16 + PLAIN.len());
    let sb = crypto_secretbox::XSalsa20Poly1305::new_from_slice(&key).unwrap();
    let plain = sb
        .decrypt(
            crypto_secretbox::Nonce::from_slice(&payload[..24]),
            &payload[24..],
        )
        .expect("secretbox");
    assert_eq!(plain, PLAIN);
}

#[test]
fn a_wrong_key_fails_with_upstreams_messages() {
    let other = "MTIzNDU2Nzg5MDEyMzQ1Ng==";
    for (kind, key, wrong, message) in [
        (
            "aesgcm",
            KEY1,
            other,
            "cipher: message authentication failed",
        ),
        (
            "secretbox",
            KEY2,
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
            "output array was not large enough for encryption",
        ),
    ] {
        let writer = transformers(&format!("[{}]", keyed(kind, &[("key1", key)])));
        let reader = transformers(&format!("[{}]", keyed(kind, &[("key1", wrong)])));
        let (stored, _) = secrets(&writer)
            .write(&Bytes::from_static(PLAIN), SECRET_KEY.as_bytes())
            .unwrap();
        let err = secrets(&reader)
            .read(&stored, SECRET_KEY.as_bytes())
            .unwrap_err();
        assert_eq!(err.error.to_string(), message);
        assert_eq!(err.prefix, format!("k8s:enc:{kind}:v1:"));
    }
    // CBC has no MAC: a wrong key shows up as bad padding (almost always).
    let writer = transformers(&format!("[{}]", aescbc(&[("key1", KEY1)])));
    let reader = transformers(&format!("[{}]", aescbc(&[("key1", other)])));
    let mut padding_errors = 0;
    for _ in 0..20 {
        let (stored, _) = secrets(&writer)
            .write(&Bytes::from_static(PLAIN), b"")
            .unwrap();
        if let Err(e) = secrets(&reader).read(&stored, b"") {
            let m = e.error.to_string();
            assert!(
                m == "invalid padding on input" || m == "invalid PKCS7 data (empty or not padded)",
                "{m}"
            );
            padding_errors += 1;
        }
    }
    assert!(padding_errors >= 15, "{padding_errors}");
    // Short and misaligned data.
    let short = Bytes::from_static(b"k8s:enc:aescbc:v1:key1:0123");
    assert_eq!(
        secrets(&reader)
            .read(&short, b"")
            .unwrap_err()
            .error
            .to_string(),
        "the stored data was shorter than the required size"
    );
    let misaligned = Bytes::from_static(b"k8s:enc:aescbc:v1:key1:0123456789abcdef0123");
    assert_eq!(
        secrets(&reader)
            .read(&misaligned, b"")
            .unwrap_err()
            .error
            .to_string(),
        "the stored data is not a multiple of the block size"
    );
    let iv_only = Bytes::from_static(b"k8s:enc:aescbc:v1:key1:0123456789abcdef");
    assert_eq!(
        secrets(&reader)
            .read(&iv_only, b"")
            .unwrap_err()
            .error
            .to_string(),
        "invalid PKCS7 data (empty or not padded)"
    );
}

#[test]
fn reads_try_providers_in_order_and_report_stale_values() {
    let plain = Bytes::from_static(PLAIN);
    let old = transformers(&format!("[{}]", aescbc(&[("key1", KEY1)])));
    let (by_key1, _) = secrets(&old).write(&plain, b"").unwrap();

    // Rotation: key2 first, key1 second: readable and stale.
    let rotated = transformers(&format!("[{}]", aescbc(&[("key2", KEY2), ("key1", KEY1)])));
    let read = secrets(&rotated).read(&by_key1, b"").unwrap();
    assert_eq!((read.value.clone(), read.stale), (plain.clone(), true));
    let (by_key2, _) = secrets(&rotated).write(&plain, b"").unwrap();
    assert!(by_key2.starts_with(b"k8s:enc:aescbc:v1:key2:"));
    assert!(!secrets(&rotated).read(&by_key2, b"").unwrap().stale);

    // Only the new key: the old value cannot be read.
    let only_new = transformers(&format!("[{}]", aescbc(&[("key2", KEY2)])));
    assert_eq!(
        secrets(&only_new)
            .read(&by_key1, b"")
            .unwrap_err()
            .error
            .to_string(),
        "no matching key was found for the provided AES transformer"
    );
    let only_gcm = transformers(&format!("[{}]", keyed("aesgcm", &[("key1", KEY1)])));
    let err = secrets(&only_gcm).read(&by_key1, b"").unwrap_err();
    assert_eq!(err.error.to_string(), "no matching prefix found");
    assert_eq!(err.prefix, "unknown");

    // Plain data needs identity in the list, and is stale unless identity
    // writes.
    assert_eq!(
        secrets(&old)
            .read(&plain, b"")
            .unwrap_err()
            .error
            .to_string(),
        "no matching prefix found"
    );
    let start = transformers(&format!(
        "[{}, {{\"identity\":{{}}}}]",
        aescbc(&[("key1", KEY1)])
    ));
    let read = secrets(&start).read(&plain, b"").unwrap();
    assert_eq!(
        (read.value.clone(), read.stale, read.prefix),
        (plain.clone(), true, "identity")
    );
    // Identity first: encrypted data is still read (stale), plain data is
    // current, and writes are plain.
    let decrypt = transformers(&format!(
        "[{{\"identity\":{{}}}}, {}]",
        aescbc(&[("key1", KEY1)])
    ));
    let read = secrets(&decrypt).read(&by_key1, b"").unwrap();
    assert_eq!((read.value.clone(), read.stale), (plain.clone(), true));
    assert!(!secrets(&decrypt).read(&plain, b"").unwrap().stale);
    assert_eq!(secrets(&decrypt).write(&plain, b"").unwrap().0, plain);
    // Identity alone does not read encrypted data.
    let identity = transformers("[{\"identity\":{}}]");
    assert_eq!(
        secrets(&identity)
            .read(&by_key1, b"")
            .unwrap_err()
            .error
            .to_string(),
        "no matching prefix found"
    );
    // A resource no rule names: plain bytes, and encrypted data is refused.
    let configmaps = old.for_resource(&GroupResource::parse("configmaps"));
    assert_eq!(configmaps.write(&plain, b"").unwrap().0, plain);
    assert_eq!(
        configmaps
            .read(&by_key1, b"")
            .unwrap_err()
            .error
            .to_string(),
        "identity transformer tried to read encrypted data"
    );
    // Two failing providers of the same prefix: both errors.
    let twice = transformers(&format!(
        "[{}, {}]",
        aescbc(&[("key1", "MTIzNDU2Nzg5MDEyMzQ1Ng==")]),
        aescbc(&[("key1", "MTIzNDU2Nzg5MDEyMzQ1Nw==")])
    ));
    let mut saw_aggregate = false;
    for _ in 0..10 {
        let (v, _) = secrets(&old).write(&plain, b"").unwrap();
        if let Err(e) = secrets(&twice).read(&v, b"") {
            let m = e.error.to_string();
            saw_aggregate |= m.starts_with('[') && m.contains(", ");
        }
    }
    assert!(saw_aggregate);
}

#[test]
fn rules_match_exact_then_group_wildcard_then_everything() {
    let t = Transformers::parse(&format!(
        r#"
apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [events]
    providers: [{{identity: {{}}}}]
  - resources: ["*.wardle.example.com"]
    providers: [{}]
  - resources: ["*.*"]
    providers: [{}]
"#,
        keyed("aesgcm", &[("g", KEY1)]),
        keyed("secretbox", &[("s", KEY2)])
    ))
    .expect("valid");
    let prefix_of = |gr: &str| {
        t.for_resource(&GroupResource::parse(gr))
            .write(&Bytes::from_static(b"{}"), b"")
            .unwrap()
            .1
    };
    assert_eq!(prefix_of("events"), "");
    assert_eq!(
        prefix_of("flunders.wardle.example.com"),
        "k8s:enc:aesgcm:v1:"
    );
    assert_eq!(prefix_of("secrets"), "k8s:enc:secretbox:v1:");
    assert_eq!(prefix_of("foos.cr.bar.com"), "k8s:enc:secretbox:v1:");

    let core = Transformers::parse(&config_for(r#"["*."]"#, &aescbc(&[("k", KEY1)]))).unwrap();
    assert!(matches!(
        core.for_resource(&GroupResource::parse("configmaps")),
        ResourceTransformer::Providers(_)
    ));
    assert!(matches!(
        core.for_resource(&GroupResource::parse("flunders.wardle.example.com")),
        ResourceTransformer::Unconfigured
    ));
}

fn config_for(resources: &str, provider: &str) -> String {
    format!(
        r#"{{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration",
            "resources":[{{"resources":{resources},"providers":[{provider}]}}]}}"#
    )
}

fn parse_err(text: &str) -> String {
    Transformers::parse(text).unwrap_err().to_string()
}

#[test]
fn invalid_configurations_fail_with_upstreams_messages() {
    let cbc = aescbc(&[("key1", KEY1)]);
    let cases = [
        (
            r#"{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration","resources":[]}"#.to_string(),
            "error while parsing file: resources: Required value: at least one resources is required",
        ),
        (
            config_for("[]", &cbc),
            "error while parsing file: resources[0].resources: Required value: at least one resources[0].resources is required",
        ),
        (
            config_for(r#"["secrets","secrets"]"#, &cbc),
            r#"error while parsing file: resources[0].resources: Invalid value: ["secrets","secrets"]: the same resource cannot be specified multiple times"#,
        ),
        (
            config_for(r#"["*.*","secrets"]"#, &cbc),
            r#"error while parsing file: resources[0].resources: Invalid value: ["*.*","secrets"]: using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked"#,
        ),
        (
            config_for(r#"["Secrets"]"#, &cbc),
            r#"error while parsing file: resources[0].resources[0]: Invalid value: "Secrets": resource name should not contain capital letters"#,
        ),
        (
            config_for(r#"["*"]"#, &cbc),
            r#"error while parsing file: resources[0].resources[0]: Invalid value: "*": use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources"#,
        ),
        (
            config_for(r#"["serviceipallocations"]"#, &cbc),
            r#"error while parsing file: resources[0].resources[0]: Invalid value: "serviceipallocations": resources which do not have REST API/s cannot be encrypted"#,
        ),
        (
            config_for(r#"["secrets.*"]"#, &cbc),
            r#"error while parsing file: resources[0].resources[0]: Invalid value: "secrets.*": encrypting the same resource across groups is not supported"#,
        ),
        (
            config_for(r#"["secrets"]"#, "{}"),
            "error while parsing file: resources[0].providers[0]: Invalid value: {}: provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity",
        ),
        (
            config_for(r#"["secrets"]"#, r#"{"aescbc":{"keys":[{"name":"k","secret":"c2VjcmV0IGlzIHNlY3VyZQ=="}]},"identity":{}}"#),
            r#"error while parsing file: resources[0].providers[0]: Invalid value: {"aescbc":{"keys":[{"name":"k","secret":"REDACTED"}]},"identity":{}}: more than one provider specified in a single element, should split into different list elements"#,
        ),
        (
            config_for(r#"["secrets"]"#, r#"{"aescbc":{"keys":[]}}"#),
            "error while parsing file: resources[0].providers[0].aescbc.keys: Required value: at least one keys is required",
        ),
        (
            config_for(r#"["secrets"]"#, r#"{"aesgcm":{"keys":[{"name":"","secret":""}]}}"#),
            "error while parsing file: [resources[0].providers[0].aesgcm.keys[0].name: Required value: name is a mandatory field for a key, resources[0].providers[0].aesgcm.keys[0].secret: Required value: secret is a mandatory field for a key]",
        ),
        (
            config_for(r#"["secrets"]"#, r#"{"aescbc":{"keys":[{"name":"k","secret":"not base64!"}]}}"#),
            r#"error while parsing file: resources[0].providers[0].aescbc.keys[0].secret: Invalid value: "REDACTED": secrets must be base64 encoded"#,
        ),
        (
            config_for(r#"["secrets"]"#, r#"{"aescbc":{"keys":[{"name":"k","secret":"MTIzNDU2Nzg="}]}}"#),
            r#"error while parsing file: resources[0].providers[0].aescbc.keys[0].secret: Invalid value: "REDACTED": secret is not of the expected length, got 8, expected one of [16 24 32]"#,
        ),
        (
            config_for(r#"["secrets"]"#, &keyed("secretbox", &[("k", KEY1)])),
            r#"error while parsing file: resources[0].providers[0].secretbox.keys[0].secret: Invalid value: "REDACTED": secret is not of the expected length, got 16, expected one of [32]"#,
        ),
        (
            format!(
                r#"{{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration",
                "resources":[{{"resources":["*.*"],"providers":[{cbc}]}},{{"resources":["secrets"],"providers":[{cbc}]}}]}}"#
            ),
            r#"error while parsing file: resource "secrets" is masked by earlier rule "*.*""#,
        ),
        (
            format!(
                r#"{{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration",
                "resources":[{{"resources":["*."],"providers":[{cbc}]}},{{"resources":["configmaps"],"providers":[{cbc}]}}]}}"#
            ),
            r#"error while parsing file: resource "configmaps" is masked by earlier rule "*.""#,
        ),
        (
            config_for(r#"["secrets"]"#, r#"{"kms":{"name":"vault","endpoint":"unix:///tmp/kms.sock"}}"#),
            r#"error while building transformers: KMS provider "vault" is not supported: apiforge implements the aescbc, aesgcm, secretbox and identity providers"#,
        ),
    ];
    for (text, want) in cases {
        assert_eq!(parse_err(&text), want, "{text}");
    }
    // Strict decoding and the kind.
    let unknown = parse_err(
        r#"{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration","resources":[{"resources":["secrets"],"providers":[{"aescbc":{"keys":[],"pandas":1}}]}]}"#,
    );
    assert!(
        unknown.contains("strict decoding error") && unknown.contains("pandas"),
        "{unknown}"
    );
    assert!(
        parse_err(r#"{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfigurations","resources":[]}"#)
            .ends_with(r#"no kind "EncryptionConfigurations" is registered for version "apiserver.config.k8s.io/v1""#)
    );
    // Events first and then everything is fine; the legacy kind too.
    Transformers::parse(&format!(
        "apiVersion: v1\nkind: EncryptionConfig\nresources:\n- resources: [events]\n  providers: [{{identity: {{}}}}]\n- resources: ['*.*']\n  providers: [{cbc}]\n"
    ))
    .expect("events, then everything");
}

#[test]
fn files_that_cannot_be_used_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    let err = Transformers::load(&missing).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "error while parsing file: error while loading file: error reading encryption provider configuration file \"{}\": ",
            missing.display()
        )),
        "{err}"
    );
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "\n").unwrap();
    assert_eq!(
        Transformers::load(&empty).unwrap_err().to_string(),
        format!(
            "error while parsing file: error while loading file: encryption provider configuration file \"{}\" is empty",
            empty.display()
        )
    );
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresource: []\n",
    )
    .unwrap();
    let err = Transformers::load(&bad).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "error while parsing file: error decoding encryption provider configuration file \"{}\": strict decoding error",
            bad.display()
        )),
        "{err}"
    );
}

#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<(String, String, String, bool)>>);

impl Observer for Recorder {
    fn observe(&self, resource: &str, what: &str, prefix: &str, ok: bool, _seconds: f64) {
        self.0
            .lock()
            .unwrap()
            .push((resource.into(), what.into(), prefix.into(), ok));
    }
}

/// The decorator over the embedded store: stored bytes are encrypted,
/// every read path gives the plain bytes.
#[tokio::test]
async fn the_decorator_encrypts_writes_and_decrypts_every_read() {
    let dir = tempfile::tempdir().unwrap();
    let raw: Arc<dyn Storage> =
        Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap());
    let t = Arc::new(transformers(&format!("[{}]", aescbc(&[("key1", KEY1)]))));
    let recorder = Arc::new(Recorder::default());
    let store = Encrypted::new(raw.clone(), "/registry", t, ["example".to_string()])
        .with_observer(recorder.clone());
    let key = "/registry/secrets/default/s1";
    let mut watch = store.watch("/registry/secrets/", 0, false).await.unwrap();

    let created = store.create(key, Bytes::from_static(b"one")).await.unwrap();
    assert_eq!(created.value, "one");
    let stored = raw.get(key, 0).await.unwrap().unwrap();
    assert!(stored.value.starts_with(b"k8s:enc:aescbc:v1:key1:"));
    let got = store.get(key, 0).await.unwrap().unwrap();
    assert_eq!(
        (got.value.clone(), got.stale),
        (Bytes::from_static(b"one"), false)
    );

    let updated = store
        .update(key, got.mod_revision, Bytes::from_static(b"two"))
        .await
        .unwrap();
    let WriteOutcome::Done(updated) = updated else {
        panic!("conflict")
    };
    assert_eq!(updated.value, "two");
    // A failed compare-and-swap returns the current state, decrypted.
    let WriteOutcome::Conflict(Some(current)) = store
        .update(key, got.mod_revision, Bytes::from_static(b"three"))
        .await
        .unwrap()
    else {
        panic!("no conflict")
    };
    assert_eq!(current.value, "two");
    let list = store
        .list("/registry/secrets/", ListOptions::default())
        .await
        .unwrap();
    assert_eq!(list.items[0].value, "two");
    let WriteOutcome::Done(deleted) = store.delete(key, None).await.unwrap() else {
        panic!("conflict")
    };
    assert_eq!(deleted.value, "two");

    let mut seen = Vec::new();
    while seen.len() < 3 {
        match watch.next().await.unwrap().unwrap() {
            WatchItem::Event(e) => seen.push((e.kind, e.kv.value.clone(), e.prev.map(|p| p.value))),
            WatchItem::Progress(_) => {}
        }
    }
    assert_eq!(
        seen,
        vec![
            (EventType::Created, Bytes::from_static(b"one"), None),
            (
                EventType::Modified,
                Bytes::from_static(b"two"),
                Some(Bytes::from_static(b"one"))
            ),
            (
                EventType::Deleted,
                Bytes::from_static(b"two"),
                Some(Bytes::from_static(b"two"))
            ),
        ]
    );

    // Other resources are not configured: plain bytes; dotless known
    // groups are recognised.
    store
        .create(
            "/registry/configmaps/default/c",
            Bytes::from_static(b"plain"),
        )
        .await
        .unwrap();
    let raw_cm = raw
        .get("/registry/configmaps/default/c", 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(raw_cm.value, "plain");
    store
        .create(
            "/registry/example/secrets/default/x",
            Bytes::from_static(b"plain"),
        )
        .await
        .unwrap();
    let raw_x = raw
        .get("/registry/example/secrets/default/x", 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(raw_x.value, "plain");

    // Undecryptable data: 500 messages as upstream's.
    raw.create(
        "/registry/secrets/default/bad",
        Bytes::from_static(b"k8s:enc:aesgcm:v1:key1:xxxxxxxxxxxxxxxxxxxx"),
    )
    .await
    .unwrap();
    let err = store
        .get("/registry/secrets/default/bad", 0)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, crate::Error::Internal(m) if m == "no matching prefix found"),
        "{err}"
    );
    let err = store
        .list("/registry/secrets/", ListOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, crate::Error::Internal(m) if m == "unable to transform key \"/registry/secrets/default/bad\": no matching prefix found"),
        "{err}"
    );

    let recorded = recorder.0.lock().unwrap().clone();
    assert!(recorded.contains(&(
        "secrets".into(),
        "to_storage".into(),
        "k8s:enc:aescbc:v1:".into(),
        true
    )));
    assert!(recorded.contains(&(
        "secrets".into(),
        "from_storage".into(),
        "unknown".into(),
        false
    )));
}

/// Rotation through the decorator: a value written with the old key reads
/// as stale; written again it carries the new key and is current.
#[tokio::test]
async fn rotated_keys_mark_values_stale_until_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let raw: Arc<dyn Storage> =
        Arc::new(EmbeddedStore::open(dir.path(), EmbeddedOptions::default()).unwrap());
    let key = "/registry/secrets/default/s1";
    let old = Encrypted::new(
        raw.clone(),
        "/registry",
        Arc::new(transformers(&format!("[{}]", aescbc(&[("key1", KEY1)])))),
        [],
    );
    old.create(key, Bytes::from_static(b"v")).await.unwrap();
    let new = Encrypted::new(
        raw.clone(),
        "/registry",
        Arc::new(transformers(&format!(
            "[{}]",
            aescbc(&[("key2", KEY2), ("key1", KEY1)])
        ))),
        [],
    );
    let read = new.get(key, 0).await.unwrap().unwrap();
    assert!(read.stale);
    let updated = crate::guaranteed_update(&new, key, |kv| Ok(kv.value.clone()))
        .await
        .unwrap();
    assert!(!updated.stale);
    let stored = raw.get(key, 0).await.unwrap().unwrap();
    assert!(stored.value.starts_with(b"k8s:enc:aescbc:v1:key2:"));
    assert!(!new.get(key, 0).await.unwrap().unwrap().stale);
}
