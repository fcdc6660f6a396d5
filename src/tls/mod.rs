//! TLS for client connections (ZooKeeper's secureClientPort and
//! client.portUnification), with rustls on the aws-lc-rs provider: the server
//! context built once at startup from the `ssl.*` keys ([`server_config`]),
//! one [`TlsSession`] per connection, and the x509 identity a verified
//! client certificate gives its session.
//!
//! Where ringkeeper differs from ZooKeeper (each refused at startup with the
//! key named, never silently weaker): JKS and BCFKS stores (convert to
//! PKCS12 or PEM), CBC cipher suites and protocols below TLS 1.2 (rustls
//! has neither; ZooKeeper's default list starts with the GCM suites rustls
//! has), no key store (ZooKeeper starts and then fails every handshake), a
//! client certificate asked for with no trust store (ZooKeeper falls back
//! to the JDK's).

pub mod quorum;
pub mod session;
pub mod x509;

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};

use crate::config::tls::{ClientAuth, ClientTls, StoreSpec, StoreType};

pub use session::TlsSession;

/// The client port's TLS: the rustls context and who is super.
pub struct ClientTlsContext {
    /// The context new handshakes use; replaced when client.certReload
    /// sees the stores change.
    config: RwLock<Arc<ServerConfig>>,
    settings: ClientTls,
    pub client_auth: ClientAuth,
    pub x509_super_user: Option<String>,
    pub handshake_limit: Option<usize>,
}

impl ClientTlsContext {
    /// The context a new connection's handshake uses.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.config.read().expect("TLS context lock").clone()
    }

    /// Reads the key and trust stores again; on an error the context in
    /// use stays.
    pub fn reload(&self) -> Result<(), String> {
        let fresh = build(&self.settings)?;
        *self.config.write().expect("TLS context lock") = fresh;
        Ok(())
    }

    /// The files whose change client.certReload watches.
    fn watched(&self) -> Vec<PathBuf> {
        std::iter::once(&self.settings.key_store)
            .chain(self.settings.trust_store.as_ref())
            .map(|s| s.location.clone())
            .collect()
    }
}

/// How often client.certReload looks at the stores' files.
pub const CERT_RELOAD_POLL: Duration = Duration::from_secs(1);

/// client.certReload: a thread that reloads the context when a store's
/// file changes (its modification time or size), as ZooKeeper's
/// FileChangeWatcher does, and logs what it did.
pub fn watch_stores(ctx: Arc<ClientTlsContext>) -> std::io::Result<std::thread::JoinHandle<()>> {
    let paths = ctx.watched();
    watch_files("client", paths, move || ctx.reload())
}

/// A thread that calls `reload` whenever one of `paths` changes (its
/// modification time or size; polled every [`CERT_RELOAD_POLL`]); a failed
/// reload is logged and the context in use stays.
pub(crate) fn watch_files(
    what: &'static str,
    paths: Vec<PathBuf>,
    reload: impl Fn() -> Result<(), String> + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let stamp = |paths: &[PathBuf]| -> Vec<Option<(std::time::SystemTime, u64)>> {
        paths
            .iter()
            .map(|p| {
                let m = std::fs::metadata(p).ok()?;
                Some((m.modified().ok()?, m.len()))
            })
            .collect()
    };
    std::thread::Builder::new()
        .name(format!("{what}-tls-reload"))
        .spawn(move || {
            let mut seen = stamp(&paths);
            loop {
                std::thread::sleep(CERT_RELOAD_POLL);
                let now = stamp(&paths);
                if now == seen {
                    continue;
                }
                seen = now;
                match reload() {
                    Ok(()) => tracing::info!(?paths, "{what} TLS key and trust stores reloaded"),
                    Err(e) => {
                        tracing::error!("{what} TLS reload failed, keeping the old context: {e}")
                    }
                }
            }
        })
}

/// ZooKeeper's default cipher suites on Java 9+ (X509Util
/// .getDefaultCipherSuitesForJavaVersion), GCM first; the CBC ones that
/// follow them there rustls does not implement.
const ZOOKEEPER_DEFAULT_SUITES: &[&str] = &[
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
];

/// The TLS 1.3 suites, offered when TLSv1.3 is enabled and
/// `ssl.ciphersuites` is not set (the JDK enables them with the protocol).
const TLS13_SUITES: &[&str] = &[
    "TLS13_AES_128_GCM_SHA256",
    "TLS13_AES_256_GCM_SHA384",
    "TLS13_CHACHA20_POLY1305_SHA256",
];

/// Builds the server's TLS context; the error names the key to fix.
pub fn server_config(tls: &ClientTls) -> Result<ClientTlsContext, String> {
    Ok(ClientTlsContext {
        config: RwLock::new(build(tls)?),
        settings: tls.clone(),
        client_auth: tls.client_auth,
        x509_super_user: tls.x509_super_user.clone(),
        handshake_limit: tls.handshake_limit,
    })
}

fn build(tls: &ClientTls) -> Result<Arc<ServerConfig>, String> {
    let (provider, versions) = provider_for(&tls.protocols, tls.cipher_suites.as_ref(), "ssl.")?;
    let (chain, key) = load_identity(&tls.key_store, "ssl.")?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("ssl.enabledProtocols: {e}"))?;
    let builder = match (tls.client_auth, &tls.trust_store) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (auth, Some(trust)) => {
            let roots = load_roots(trust, "ssl.")?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Want {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("ssl.trustStore.location: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
        (_, None) => {
            return Err("ssl.clientAuth asks for client certificates: set ssl.trustStore".into())
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("ssl.keyStore.location: the key does not fit the certificate: {e}"))?;
    Ok(Arc::new(config))
}

/// The crypto provider with the cipher suites `suites` names (ZooKeeper's
/// default list when None), and the protocol versions among `protocols`
/// that have a suite; errors name the `prefix`'s keys.
pub(crate) fn provider_for(
    protocols: &[String],
    suites: Option<&Vec<String>>,
    prefix: &str,
) -> Result<(Arc<CryptoProvider>, Vec<&'static SupportedProtocolVersion>), String> {
    let base = rustls::crypto::aws_lc_rs::default_provider();
    let versions = protocol_versions(protocols, prefix)?;
    let wanted: Vec<String> = match suites {
        Some(list) => list.clone(),
        None => ZOOKEEPER_DEFAULT_SUITES
            .iter()
            .chain(TLS13_SUITES)
            .map(|s| s.to_string())
            .collect(),
    };
    let suites: Vec<_> = base
        .cipher_suites
        .iter()
        .copied()
        .filter(|s| {
            let name = format!("{:?}", s.suite());
            wanted
                .iter()
                .any(|w| *w == name || tls13_alias(w) == Some(name.as_str()))
        })
        .collect();
    let versions: Vec<&'static SupportedProtocolVersion> = versions
        .into_iter()
        .filter(|v| suites.iter().any(|s| s.version() == *v))
        .collect();
    if versions.is_empty() {
        return Err(format!(
            "{prefix}ciphersuites / {prefix}enabledProtocols: no cipher suite ringkeeper \
             implements is enabled for {} (it has {})",
            protocols.join(", "),
            base.cipher_suites
                .iter()
                .map(|s| format!("{:?}", s.suite()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let provider = Arc::new(CryptoProvider {
        cipher_suites: suites,
        ..base
    });
    Ok((provider, versions))
}

/// rustls names the TLS 1.3 suites TLS13_*; Java and IANA TLS_*.
fn tls13_alias(name: &str) -> Option<&'static str> {
    match name {
        "TLS_AES_128_GCM_SHA256" => Some("TLS13_AES_128_GCM_SHA256"),
        "TLS_AES_256_GCM_SHA384" => Some("TLS13_AES_256_GCM_SHA384"),
        "TLS_CHACHA20_POLY1305_SHA256" => Some("TLS13_CHACHA20_POLY1305_SHA256"),
        _ => None,
    }
}

fn protocol_versions(
    names: &[String],
    prefix: &str,
) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for n in names {
        match n.as_str() {
            "TLSv1.2" => out.push(&rustls::version::TLS12),
            "TLSv1.3" => out.push(&rustls::version::TLS13),
            // SSLContext.getInstance("TLS") enables both.
            "TLS" => out.extend([&rustls::version::TLS12, &rustls::version::TLS13]),
            other => skipped.push(other.to_string()),
        }
    }
    if !skipped.is_empty() {
        tracing::warn!(
            "{prefix}enabledProtocols: {} not offered (ringkeeper speaks TLSv1.2 and TLSv1.3)",
            skipped.join(", ")
        );
    }
    if out.is_empty() {
        return Err(format!(
            "{prefix}enabledProtocols / {prefix}protocol: none of {} is TLSv1.2 or TLSv1.3",
            names.join(", ")
        ));
    }
    out.dedup();
    Ok(out)
}

fn read(store: &StoreSpec, key: &str) -> Result<Vec<u8>, String> {
    std::fs::read(&store.location)
        .map_err(|e| format!("{key}: cannot read {}: {e}", store.location.display()))
}

fn refuse_java_store(store: &StoreSpec, key: &str) -> Result<(), String> {
    match store.store_type {
        StoreType::Jks | StoreType::Bcfks => Err(format!(
            "{key}: {} is a {:?} store, which ringkeeper cannot read: convert it with \
             `keytool -importkeystore -srckeystore {} -destkeystore store.p12 \
             -deststoretype PKCS12` and set the .type key to PKCS12",
            store.location.display(),
            store.store_type,
            store.location.display()
        )),
        _ => Ok(()),
    }
}

/// The certificate chain and key from `<prefix>keyStore.*`.
pub(crate) fn load_identity(
    store: &StoreSpec,
    prefix: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let key_name = format!("{prefix}keyStore.location");
    let key_name = key_name.as_str();
    refuse_java_store(store, key_name)?;
    let bytes = read(store, key_name)?;
    let (chain, key) = match store.store_type {
        StoreType::Pem => pem_identity(&bytes, store.password.expose()),
        _ => pkcs12_identity(&bytes, store.password.expose()),
    }
    .map_err(|e| format!("{key_name}: {}: {e}", store.location.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "{key_name}: {}: no certificate in the key store",
            store.location.display()
        ));
    }
    Ok((chain, key))
}

/// The trusted certificates from `<prefix>trustStore.*`.
pub(crate) fn load_roots(store: &StoreSpec, prefix: &str) -> Result<RootCertStore, String> {
    let key_name = format!("{prefix}trustStore.location");
    let key_name = key_name.as_str();
    refuse_java_store(store, key_name)?;
    let bytes = read(store, key_name)?;
    let certs = match store.store_type {
        StoreType::Pem => pem_blocks(&bytes)
            .into_iter()
            .filter(|(label, _)| label.ends_with("CERTIFICATE"))
            .map(|(_, der)| CertificateDer::from(der))
            .collect(),
        _ => pkcs12_certificates(&bytes, store.password.expose())
            .map_err(|e| format!("{key_name}: {}: {e}", store.location.display()))?,
    };
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!(
            "{key_name}: {}: no usable certificate ({ignored} unreadable)",
            store.location.display()
        ));
    }
    Ok(roots)
}

/// Every PEM block of `bytes` as (label, DER).
fn pem_blocks(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    let mut rest: &str = &text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + 11..];
        let Some(label_end) = after.find("-----") else {
            break;
        };
        let label = after[..label_end].trim().to_string();
        let end_marker = format!("-----END {label}-----");
        let Some(end) = after.find(&end_marker) else {
            break;
        };
        let block = &rest[start..start + 11 + end + end_marker.len()];
        if let Ok((_, der)) = pkcs8::der::pem::decode_vec(block.as_bytes()) {
            out.push((label, der));
        }
        rest = &after[end + end_marker.len()..];
    }
    out
}

/// PemReader.loadKeyStore: one file with the key (PKCS#8, encrypted when a
/// password is set) and the chain, leaf first.
fn pem_identity(
    bytes: &[u8],
    password: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let blocks = pem_blocks(bytes);
    let chain = blocks
        .iter()
        .filter(|(l, _)| l.ends_with("CERTIFICATE"))
        .map(|(_, der)| CertificateDer::from(der.clone()))
        .collect();
    let (label, der) = blocks
        .iter()
        .find(|(l, _)| l.ends_with("PRIVATE KEY"))
        .ok_or("did not find a private key")?;
    let key = match label.as_str() {
        "ENCRYPTED PRIVATE KEY" => {
            if password.is_empty() {
                return Err(
                    "the private key is encrypted and the key store has no password".into(),
                );
            }
            let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
                .map_err(|e| format!("encrypted private key: {e}"))?;
            let plain = info
                .decrypt(password)
                .map_err(|e| format!("cannot decrypt the private key with the password: {e}"))?;
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(plain.as_bytes().to_vec()))
        }
        "PRIVATE KEY" => PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der.clone())),
        "RSA PRIVATE KEY" => PrivateKeyDer::Pkcs1(der.clone().into()),
        "EC PRIVATE KEY" => PrivateKeyDer::Sec1(der.clone().into()),
        other => return Err(format!("unknown private key kind '{other}'")),
    };
    Ok((chain, key))
}

fn pkcs12_store(bytes: &[u8], password: &str) -> Result<p12_keystore::KeyStore, String> {
    p12_keystore::KeyStore::from_pkcs12(bytes, password)
        .map_err(|e| format!("not a PKCS12 store this password opens: {e}"))
}

fn pkcs12_identity(
    bytes: &[u8],
    password: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let store = pkcs12_store(bytes, password)?;
    let (_, chain) = store
        .private_key_chain()
        .ok_or("did not find a private key")?;
    let certs = chain
        .chain()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().to_vec()));
    Ok((certs, key))
}

fn pkcs12_certificates(
    bytes: &[u8],
    password: &str,
) -> Result<Vec<CertificateDer<'static>>, String> {
    let store = pkcs12_store(bytes, password)?;
    let mut out = Vec::new();
    for (_, entry) in store.entries() {
        match entry {
            p12_keystore::KeyStoreEntry::Certificate(c) => {
                out.push(CertificateDer::from(c.as_der().to_vec()))
            }
            p12_keystore::KeyStoreEntry::PrivateKeyChain(chain) => out.extend(
                chain
                    .chain()
                    .iter()
                    .map(|c| CertificateDer::from(c.as_der().to_vec())),
            ),
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }
    Ok(out)
}

/// The auth ids a verified client certificate gives its connection, in the
/// order X509AuthenticationProvider adds them (super first, then x509).
pub fn certificate_ids(
    ctx: &ClientTlsContext,
    session: &TlsSession,
) -> Result<Vec<(String, String)>, String> {
    if ctx.client_auth == ClientAuth::None {
        return Ok(Vec::new());
    }
    let Some(leaf) = session.peer_leaf() else {
        return Ok(Vec::new());
    };
    let dn = x509::subject_rfc2253(leaf)?;
    let mut ids = Vec::new();
    if ctx.x509_super_user.as_deref() == Some(dn.as_str()) {
        ids.push(("super".to_string(), dn.clone()));
    }
    ids.push(("x509".to_string(), dn));
    Ok(ids)
}

/// client.portUnification's test (Netty's SslHandler.isEncrypted, as
/// DualModeSslHandler applies it): Some(true) for a TLS record header,
/// Some(false) for plaintext, None when more bytes are needed to tell.
pub fn looks_like_tls(first: &[u8]) -> Option<bool> {
    match first {
        [] => None,
        [b0, ..] if first.len() < 5 => {
            if *b0 == 0x16 {
                None
            } else {
                Some(false)
            }
        }
        [t, major, _, hi, lo, ..] => {
            let len = u16::from_be_bytes([*hi, *lo]);
            Some((20..=24).contains(t) && *major == 3 && len > 0)
        }
        _ => unreachable!("a slice of five or more bytes matches the arm above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_unification_tells_tls_from_zookeeper_frames() {
        assert_eq!(looks_like_tls(b""), None);
        assert_eq!(looks_like_tls(b"ruok"), Some(false));
        assert_eq!(looks_like_tls(&[0, 0, 0, 45, 0, 0]), Some(false));
        assert_eq!(looks_like_tls(&[0x16]), None);
        assert_eq!(looks_like_tls(&[0x16, 3, 1, 0, 200]), Some(true));
        assert_eq!(looks_like_tls(&[0x16, 3, 1, 0, 0]), Some(false));
        assert_eq!(looks_like_tls(&[0x17, 2, 1, 0, 5]), Some(false));
    }

    #[test]
    fn protocols_map_to_what_rustls_speaks() {
        assert_eq!(
            protocol_versions(&["TLSv1.2".into()], "ssl.")
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            protocol_versions(
                &["TLSv1.2".into(), "TLSv1.3".into(), "TLSv1.1".into()],
                "ssl."
            )
            .unwrap()
            .len(),
            2
        );
        assert!(protocol_versions(&["TLSv1".into(), "SSLv3".into()], "ssl.").is_err());
    }
}
