//! The providers of one resource and the stored byte layouts.
//!
//! A stored value is `k8s:enc:<provider>:v1:<key name>:` followed by the
//! provider's payload; `identity` stores the plain bytes with no prefix.
//! Writes use the first provider's first key; reads try every provider
//! whose prefix matches, in order, and report the value *stale* when it was
//! not read with the first provider's first key.

use aes_gcm::aead::consts::U12;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes128Gcm, Aes256Gcm, AesGcm};
use bytes::Bytes;
use cbc::cipher::generic_array::GenericArray;
use cbc::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use crypto_secretbox::XSalsa20Poly1305;

/// The prefix every encrypted value starts with.
pub(crate) const ENCRYPTED_PREFIX: &[u8] = b"k8s:enc:";

const AES_BLOCK: usize = 16;
const GCM_NONCE: usize = 12;
const SECRETBOX_NONCE: usize = 24;
const SECRETBOX_TAG: usize = 16;

const SHORT: &str = "the stored data was shorter than the required size";
const IDENTITY_ENCRYPTED: &str = "identity transformer tried to read encrypted data";
/// What a read that no provider's prefix matches fails with.
pub(crate) const NO_MATCHING_PREFIX: &str = "no matching prefix found";

/// Why a value could not be transformed (upstream's messages).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TransformError(pub(crate) String);

impl TransformError {
    fn new(message: impl Into<String>) -> Self {
        TransformError(message.into())
    }

    /// One error as itself, several as `[e1, e2]` (apimachinery's
    /// aggregate).
    fn aggregate(mut errs: Vec<TransformError>) -> Self {
        if errs.len() == 1 {
            return errs.remove(0);
        }
        let joined = errs.iter().map(|e| e.0.as_str()).collect::<Vec<_>>();
        TransformError(format!("[{}]", joined.join(", ")))
    }
}

/// The kind of a keyed provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `aescbc`: AES-CBC with PKCS#7 padding and a random IV.
    AesCbc,
    /// `aesgcm`: AES-GCM with a random nonce and the storage key as
    /// authenticated data.
    AesGcm,
    /// `secretbox`: XSalsa20-Poly1305 with a random nonce.
    Secretbox,
}

impl Kind {
    /// The provider's name in the configuration (`aescbc`, …).
    pub fn name(self) -> &'static str {
        match self {
            Kind::AesCbc => "aescbc",
            Kind::AesGcm => "aesgcm",
            Kind::Secretbox => "secretbox",
        }
    }

    /// The prefix of the values it writes (`k8s:enc:aescbc:v1:`).
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::AesCbc => "k8s:enc:aescbc:v1:",
            Kind::AesGcm => "k8s:enc:aesgcm:v1:",
            Kind::Secretbox => "k8s:enc:secretbox:v1:",
        }
    }

    /// The key lengths (bytes) it accepts.
    pub fn key_lengths(self) -> &'static [usize] {
        match self {
            Kind::AesCbc | Kind::AesGcm => &[16, 24, 32],
            Kind::Secretbox => &[32],
        }
    }

    fn no_matching_key(self) -> TransformError {
        TransformError::new(match self {
            Kind::AesCbc | Kind::AesGcm => {
                "no matching key was found for the provided AES transformer"
            }
            Kind::Secretbox => "no matching key was found for the provided Secretbox transformer",
        })
    }
}

/// A key's cipher, chosen by the provider and the key's length.
enum Cipher {
    Cbc128([u8; 16]),
    Cbc192([u8; 24]),
    Cbc256([u8; 32]),
    Gcm128(Box<Aes128Gcm>),
    Gcm192(Box<AesGcm<aes::Aes192, U12>>),
    Gcm256(Box<Aes256Gcm>),
    Secretbox(Box<XSalsa20Poly1305>),
}

/// One named key of a keyed provider.
pub struct NamedKey {
    name: String,
    cipher: Cipher,
}

impl std::fmt::Debug for NamedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedKey")
            .field("name", &self.name)
            .field("secret", &"REDACTED")
            .finish()
    }
}

impl NamedKey {
    /// A key of `kind` named `name` from its raw bytes; `None` when the
    /// length does not fit the provider.
    pub fn new(kind: Kind, name: &str, secret: &[u8]) -> Option<NamedKey> {
        let cipher = match (kind, secret.len()) {
            (Kind::AesCbc, 16) => Cipher::Cbc128(secret.try_into().ok()?),
            (Kind::AesCbc, 24) => Cipher::Cbc192(secret.try_into().ok()?),
            (Kind::AesCbc, 32) => Cipher::Cbc256(secret.try_into().ok()?),
            (Kind::AesGcm, 16) => Cipher::Gcm128(Box::new(Aes128Gcm::new_from_slice(secret).ok()?)),
            (Kind::AesGcm, 24) => Cipher::Gcm192(Box::new(
                AesGcm::<aes::Aes192, U12>::new_from_slice(secret).ok()?,
            )),
            (Kind::AesGcm, 32) => Cipher::Gcm256(Box::new(Aes256Gcm::new_from_slice(secret).ok()?)),
            (Kind::Secretbox, 32) => {
                Cipher::Secretbox(Box::new(XSalsa20Poly1305::new_from_slice(secret).ok()?))
            }
            _ => return None,
        };
        Some(NamedKey {
            name: name.to_string(),
            cipher,
        })
    }

    fn seal(&self, plain: &[u8], aad: &[u8]) -> Result<Vec<u8>, TransformError> {
        match &self.cipher {
            Cipher::Cbc128(k) => cbc_seal::<aes::Aes128>(k, plain),
            Cipher::Cbc192(k) => cbc_seal::<aes::Aes192>(k, plain),
            Cipher::Cbc256(k) => cbc_seal::<aes::Aes256>(k, plain),
            Cipher::Gcm128(c) => gcm_seal(c.as_ref(), plain, aad),
            Cipher::Gcm192(c) => gcm_seal(c.as_ref(), plain, aad),
            Cipher::Gcm256(c) => gcm_seal(c.as_ref(), plain, aad),
            Cipher::Secretbox(c) => {
                let nonce = random::<SECRETBOX_NONCE>()?;
                let boxed = c
                    .encrypt(GenericArray::from_slice(&nonce), plain)
                    .map_err(|_| TransformError::new("secretbox: encryption failed"))?;
                Ok([nonce.as_slice(), &boxed].concat())
            }
        }
    }

    fn open(&self, data: &[u8], aad: &[u8]) -> Result<Vec<u8>, TransformError> {
        match &self.cipher {
            Cipher::Cbc128(k) => cbc_open::<aes::Aes128>(k, data),
            Cipher::Cbc192(k) => cbc_open::<aes::Aes192>(k, data),
            Cipher::Cbc256(k) => cbc_open::<aes::Aes256>(k, data),
            Cipher::Gcm128(c) => gcm_open(c.as_ref(), data, aad),
            Cipher::Gcm192(c) => gcm_open(c.as_ref(), data, aad),
            Cipher::Gcm256(c) => gcm_open(c.as_ref(), data, aad),
            Cipher::Secretbox(c) => {
                if data.len() < SECRETBOX_NONCE + SECRETBOX_TAG {
                    return Err(TransformError::new(SHORT));
                }
                let (nonce, boxed) = data.split_at(SECRETBOX_NONCE);
                c.decrypt(GenericArray::from_slice(nonce), boxed)
                    .map_err(|_| {
                        TransformError::new("output array was not large enough for encryption")
                    })
            }
        }
    }
}

fn random<const N: usize>() -> Result<[u8; N], TransformError> {
    let mut out = [0u8; N];
    getrandom::fill(&mut out)
        .map_err(|e| TransformError::new(format!("unable to read sufficient random bytes: {e}")))?;
    Ok(out)
}

/// `IV || AES-CBC(PKCS#7(plain))`.
fn cbc_seal<C>(key: &[u8], plain: &[u8]) -> Result<Vec<u8>, TransformError>
where
    cbc::Encryptor<C>: KeyIvInit + BlockEncryptMut,
    C: cbc::cipher::BlockCipher + cbc::cipher::BlockEncryptMut,
{
    let iv = random::<AES_BLOCK>()?;
    let mut enc = cbc::Encryptor::<C>::new_from_slices(key, &iv)
        .map_err(|e| TransformError::new(format!("crypto/aes: {e}")))?;
    let pad = AES_BLOCK - plain.len() % AES_BLOCK;
    let mut out = Vec::with_capacity(AES_BLOCK + plain.len() + pad);
    out.extend_from_slice(&iv);
    out.extend_from_slice(plain);
    out.resize(AES_BLOCK + plain.len() + pad, pad as u8);
    for block in out[AES_BLOCK..].chunks_exact_mut(AES_BLOCK) {
        enc.encrypt_block_mut(GenericArray::from_mut_slice(block));
    }
    Ok(out)
}

/// The plain bytes of `IV || AES-CBC(PKCS#7(plain))`, with upstream's
/// checks and messages (the padding byte may be larger than a block, as
/// upstream accepts, but never larger than the data).
fn cbc_open<C>(key: &[u8], data: &[u8]) -> Result<Vec<u8>, TransformError>
where
    cbc::Decryptor<C>: KeyIvInit + BlockDecryptMut,
    C: cbc::cipher::BlockCipher + cbc::cipher::BlockDecryptMut,
{
    if data.len() < AES_BLOCK {
        return Err(TransformError::new(SHORT));
    }
    let (iv, body) = data.split_at(AES_BLOCK);
    if body.len() % AES_BLOCK != 0 {
        return Err(TransformError::new(
            "the stored data is not a multiple of the block size",
        ));
    }
    let mut dec = cbc::Decryptor::<C>::new_from_slices(key, iv)
        .map_err(|e| TransformError::new(format!("crypto/aes: {e}")))?;
    let mut out = body.to_vec();
    for block in out.chunks_exact_mut(AES_BLOCK) {
        dec.decrypt_block_mut(GenericArray::from_mut_slice(block));
    }
    let pad = out.last().copied().map_or(0, usize::from);
    if pad == 0 || pad > out.len() {
        return Err(TransformError::new(
            "invalid PKCS7 data (empty or not padded)",
        ));
    }
    let keep = out.len() - pad;
    if out[keep..].iter().any(|&b| usize::from(b) != pad) {
        return Err(TransformError::new("invalid padding on input"));
    }
    out.truncate(keep);
    Ok(out)
}

/// `nonce || ciphertext || tag`, authenticating `aad`.
fn gcm_seal<A: Aead>(cipher: &A, plain: &[u8], aad: &[u8]) -> Result<Vec<u8>, TransformError> {
    let nonce = random::<GCM_NONCE>()?;
    let sealed = cipher
        .encrypt(
            GenericArray::from_slice(&nonce),
            Payload { msg: plain, aad },
        )
        .map_err(|_| TransformError::new("cipher: message too large for GCM"))?;
    Ok([nonce.as_slice(), &sealed].concat())
}

fn gcm_open<A: Aead>(cipher: &A, data: &[u8], aad: &[u8]) -> Result<Vec<u8>, TransformError> {
    if data.len() < GCM_NONCE {
        return Err(TransformError::new(SHORT));
    }
    let (nonce, sealed) = data.split_at(GCM_NONCE);
    cipher
        .decrypt(
            GenericArray::from_slice(nonce),
            Payload { msg: sealed, aad },
        )
        .map_err(|_| TransformError::new("cipher: message authentication failed"))
}

/// One element of a resource's provider list.
#[derive(Debug)]
pub enum Provider {
    /// `identity`: plain bytes, no prefix.
    Identity,
    /// `aescbc`, `aesgcm` or `secretbox` with its keys, the first writing.
    Keyed {
        /// Which provider.
        kind: Kind,
        /// Its keys, in configuration order (never empty).
        keys: Vec<NamedKey>,
    },
}

impl Provider {
    /// The prefix of the values this provider reads and writes (`""` for
    /// identity).
    pub fn prefix(&self) -> &'static str {
        match self {
            Provider::Identity => "",
            Provider::Keyed { kind, .. } => kind.prefix(),
        }
    }

    /// Reads `data` with the provider prefix removed: the plain bytes and
    /// whether a key other than the first one was needed.
    fn read(&self, data: &[u8], aad: &[u8]) -> Result<(Option<Vec<u8>>, bool), TransformError> {
        match self {
            Provider::Identity => identity_read(data).map(|()| (None, false)),
            Provider::Keyed { kind, keys } => {
                let mut errs = Vec::new();
                for (i, key) in keys.iter().enumerate() {
                    let Some(payload) = data
                        .strip_prefix(key.name.as_bytes())
                        .and_then(|rest| rest.strip_prefix(b":"))
                    else {
                        continue;
                    };
                    match key.open(payload, aad) {
                        Ok(plain) => return Ok((Some(plain), i != 0)),
                        Err(e) => errs.push(e),
                    }
                }
                if errs.is_empty() {
                    Err(kind.no_matching_key())
                } else {
                    Err(TransformError::aggregate(errs))
                }
            }
        }
    }
}

fn identity_read(data: &[u8]) -> Result<(), TransformError> {
    if data.starts_with(ENCRYPTED_PREFIX) {
        Err(TransformError::new(IDENTITY_ENCRYPTED))
    } else {
        Ok(())
    }
}

/// What a read found.
#[derive(Debug)]
pub struct ReadValue {
    /// The plain bytes.
    pub value: Bytes,
    /// Read with a provider or key other than the writing one: a write
    /// must store it again even when it did not change.
    pub stale: bool,
    /// The metrics label of the provider that read it (`identity` or
    /// its prefix).
    pub prefix: &'static str,
}

/// A failed read, with the metrics label of the provider that failed
/// (`unknown` when none matched).
#[derive(Debug)]
pub struct ReadError {
    /// Why.
    pub error: TransformError,
    /// The provider label.
    pub prefix: &'static str,
}

/// The transformer of one resource: an ordered provider list (from the
/// configuration), or plain identity for a resource no rule names.
#[derive(Debug)]
pub enum ResourceTransformer {
    /// No rule names the resource: plain bytes; encrypted data cannot be
    /// read.
    Unconfigured,
    /// The providers of the rules naming the resource, in order.
    Providers(Vec<Provider>),
}

impl ResourceTransformer {
    /// The bytes to store for `plain` at storage key `aad`, and the
    /// writing provider's prefix (the metrics label).
    pub fn write(
        &self,
        plain: &Bytes,
        aad: &[u8],
    ) -> Result<(Bytes, &'static str), TransformError> {
        match self {
            ResourceTransformer::Unconfigured => Ok((plain.clone(), "")),
            ResourceTransformer::Providers(providers) => match providers.first() {
                None | Some(Provider::Identity) => Ok((plain.clone(), "")),
                Some(Provider::Keyed { kind, keys }) => {
                    let key = keys
                        .first()
                        .ok_or_else(|| TransformError::new("aes provider has no valid keys"))?;
                    let sealed = key.seal(plain, aad)?;
                    let mut out =
                        Vec::with_capacity(kind.prefix().len() + key.name.len() + 1 + sealed.len());
                    out.extend_from_slice(kind.prefix().as_bytes());
                    out.extend_from_slice(key.name.as_bytes());
                    out.push(b':');
                    out.extend_from_slice(&sealed);
                    Ok((Bytes::from(out), kind.prefix()))
                }
            },
        }
    }

    /// The plain bytes of the stored `data` at storage key `aad`.
    pub fn read(&self, data: &Bytes, aad: &[u8]) -> Result<ReadValue, ReadError> {
        let providers = match self {
            ResourceTransformer::Unconfigured => {
                return match identity_read(data) {
                    Ok(()) => Ok(ReadValue {
                        value: data.clone(),
                        stale: false,
                        prefix: "identity",
                    }),
                    Err(error) => Err(ReadError {
                        error,
                        prefix: "identity",
                    }),
                };
            }
            ResourceTransformer::Providers(providers) => providers,
        };
        let mut errs = Vec::new();
        let mut last_prefix = "unknown";
        for (i, provider) in providers.iter().enumerate() {
            let prefix = provider.prefix();
            let Some(rest) = data.strip_prefix(prefix.as_bytes()) else {
                continue;
            };
            match provider.read(rest, aad) {
                Ok((plain, stale)) => {
                    return Ok(ReadValue {
                        value: plain.map_or_else(|| data.clone(), Bytes::from),
                        stale: stale || i != 0,
                        prefix: if prefix.is_empty() {
                            "identity"
                        } else {
                            prefix
                        },
                    });
                }
                // Identity passes encrypted data on to the next provider.
                Err(_) if prefix.is_empty() => {}
                Err(e) => {
                    errs.push(e);
                    last_prefix = prefix;
                }
            }
        }
        if errs.is_empty() {
            Err(ReadError {
                error: TransformError::new(NO_MATCHING_PREFIX),
                prefix: "unknown",
            })
        } else {
            Err(ReadError {
                error: TransformError::aggregate(errs),
                prefix: last_prefix,
            })
        }
    }
}
