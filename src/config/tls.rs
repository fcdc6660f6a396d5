//! TLS on the client port as ZooKeeper 3.8 configures it: `secureClientPort`
//! (and its address), `client.portUnification`, and the `ssl.*` keys that
//! ClientX509Util reads, each also accepted with the `zookeeper.` prefix
//! (zoo.cfg keys become `zookeeper.<key>` system properties in ZooKeeper).
//! Plain data here; the TLS context is built from it at startup
//! (src/tls), where a key or certificate that cannot be used stops the
//! server naming the key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// A password, kept out of Debug output, logs and the admin words.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: String) -> Secret {
        Secret(s)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() {
            "\"\""
        } else {
            "<hidden>"
        })
    }
}

/// `ssl.*.type`, or what the file name says (KeyStoreFileType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreType {
    Pem,
    Pkcs12,
    Jks,
    Bcfks,
}

impl StoreType {
    /// KeyStoreFileType.fromPropertyValue: case-insensitive.
    fn parse(v: &str) -> Result<StoreType, String> {
        match v.to_ascii_uppercase().as_str() {
            "PEM" => Ok(StoreType::Pem),
            "PKCS12" => Ok(StoreType::Pkcs12),
            "JKS" => Ok(StoreType::Jks),
            "BCFKS" => Ok(StoreType::Bcfks),
            _ => Err(format!(
                "'{v}' is not a key store type (PEM, PKCS12, JKS or BCFKS)"
            )),
        }
    }

    /// KeyStoreFileType.fromFilename: the extension, compared with case.
    fn from_file_name(path: &std::path::Path) -> Result<StoreType, String> {
        let name = path.to_string_lossy();
        match name.rfind('.').map(|i| &name[i..]) {
            Some(".pem") => Ok(StoreType::Pem),
            Some(".p12") => Ok(StoreType::Pkcs12),
            Some(".jks") => Ok(StoreType::Jks),
            Some(".bcfks") => Ok(StoreType::Bcfks),
            _ => Err(format!(
                "unable to auto-detect store file type from file name: {name} (set the \
                 matching .type key: PEM or PKCS12)"
            )),
        }
    }
}

/// A key store or trust store: where, its password, its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreSpec {
    pub location: PathBuf,
    pub password: Secret,
    pub store_type: StoreType,
}

/// `ssl.clientAuth` (X509Util.ClientAuth): unset means need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No certificate is asked for.
    None,
    /// Asked for; a client without one is accepted without an x509 id.
    Want,
    /// Asked for; the handshake fails without one.
    Need,
}

/// What the client port's TLS needs, settled from the keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientTls {
    pub key_store: StoreSpec,
    pub trust_store: Option<StoreSpec>,
    /// `ssl.enabledProtocols`, or `ssl.protocol` alone (TLSv1.2), as Java
    /// names them.
    pub protocols: Vec<String>,
    /// `ssl.ciphersuites` as IANA names; None: ZooKeeper's default list.
    pub cipher_suites: Option<Vec<String>>,
    pub client_auth: ClientAuth,
    /// `X509AuthenticationProvider.superUser`: this subject also holds
    /// `super`.
    pub x509_super_user: Option<String>,
    /// `netty.server.outstandingHandshake.limit`: handshakes in flight per
    /// server past which new connections are closed; None: no limit.
    pub handshake_limit: Option<usize>,
    /// `client.certReload`: a changed key or trust store file is read
    /// again, for new connections, without a restart.
    pub cert_reload: bool,
}

/// ZooKeeper's default protocol (X509Util.DEFAULT_PROTOCOL).
pub const DEFAULT_PROTOCOL: &str = "TLSv1.2";

/// The keys of one TLS family (`ssl.*` for the client port, `ssl.quorum.*`
/// for the peer ports) as (line, value) by name after the prefix,
/// collected while the file is read.
pub struct SslKeys {
    /// "ssl." or "ssl.quorum.", for messages.
    prefix: &'static str,
    keys: BTreeMap<String, (usize, String)>,
}

impl Default for SslKeys {
    fn default() -> Self {
        SslKeys::new("ssl.")
    }
}

/// The quorum's TLS (sslQuorum), settled from the `ssl.quorum.*` keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumTls {
    pub key_store: StoreSpec,
    pub trust_store: StoreSpec,
    pub protocols: Vec<String>,
    pub cipher_suites: Option<Vec<String>>,
    /// `ssl.quorum.hostnameVerification` (default true): each side checks
    /// the other's certificate against the peer's address.
    pub hostname_verification: bool,
    /// `sslQuorum`: this member dials its peers with TLS.
    pub ssl_quorum: bool,
    /// `portUnification`: the peer ports take TLS and plaintext peers (for
    /// a rolling switch to TLS and back), whatever this member dials with.
    pub port_unification: bool,
    /// `ssl.quorum.handshakeDetectionTimeoutMillis` (5000): how long a
    /// unified port waits for the first bytes that tell TLS apart.
    pub detection_timeout_ms: u64,
    /// `sslQuorumReloadCertFiles`: changed store files are read again.
    pub reload: bool,
}

/// The client-port `ssl.*` keys ringkeeper reads (after `ssl.`).
const KNOWN: &[&str] = &[
    "keyStore.location",
    "keyStore.password",
    "keyStore.passwordPath",
    "keyStore.type",
    "trustStore.location",
    "trustStore.password",
    "trustStore.passwordPath",
    "trustStore.type",
    "protocol",
    "enabledProtocols",
    "ciphersuites",
    "clientAuth",
    "hostnameVerification",
    "crl",
    "ocsp",
    "handshakeDetectionTimeoutMillis",
    "authProvider",
    "allowReverseDnsLookup",
];

impl SslKeys {
    pub fn new(prefix: &'static str) -> SslKeys {
        SslKeys {
            prefix,
            keys: BTreeMap::new(),
        }
    }

    /// Takes `key` (the `zookeeper.` prefix stripped) if it is of this
    /// family; Err(reason) for one that cannot be honoured.
    pub fn take(&mut self, key: &str, value: &str, line: usize) -> Option<Result<(), String>> {
        let name = key.strip_prefix(self.prefix)?;
        if self.prefix == "ssl." && name.starts_with("quorum.") {
            return None;
        }
        let p = self.prefix;
        if !KNOWN.contains(&name) || (p != "ssl." && name == "authProvider") {
            return Some(Err(format!(
                "{p}{name} is not supported by ringkeeper: refusing to start rather than \
                 ignore it"
            )));
        }
        let on = value.trim().eq_ignore_ascii_case("true");
        let refused = match name {
            "crl" | "ocsp" if on => Some(format!(
                "certificate revocation checking ({p}{name}=true) is not supported by \
                 ringkeeper yet: refusing to start rather than accept revoked certificates"
            )),
            "authProvider" if value.trim() != "x509" => Some(format!(
                "only the x509 provider can authenticate TLS clients in ringkeeper, not '{value}'"
            )),
            _ => None,
        };
        if let Some(why) = refused {
            return Some(Err(why));
        }
        self.keys
            .insert(name.to_string(), (line, value.to_string()));
        Some(Ok(()))
    }

    fn get(&self, name: &str) -> Option<&(usize, String)> {
        self.keys.get(name)
    }

    /// The quorum's TLS, when sslQuorum is on (its line `at` for errors
    /// about what is missing). Errors are (line, reason).
    pub fn settle_quorum(
        &self,
        at: usize,
        ssl_quorum: bool,
        port_unification: bool,
        reload: bool,
    ) -> Result<QuorumTls, (usize, String)> {
        let p = self.prefix;
        let key_store = self.store("keyStore")?.ok_or_else(|| {
            (
                at,
                format!("sslQuorum or portUnification is on but {p}keyStore.location is not set"),
            )
        })?;
        let trust_store = self.store("trustStore")?.ok_or_else(|| {
            (
                at,
                format!(
                    "sslQuorum or portUnification is on but {p}trustStore.location is not set \
                     (peers authenticate each other)"
                ),
            )
        })?;
        let hostname_verification = self
            .get("hostnameVerification")
            .is_none_or(|(_, v)| !v.trim().eq_ignore_ascii_case("false"));
        let detection_timeout_ms = match self.get("handshakeDetectionTimeoutMillis") {
            Some((line, v)) => match v.trim().parse::<i64>() {
                Ok(n) if n >= 1 => n as u64,
                Ok(_) => 5000,
                Err(_) => {
                    return Err((
                        *line,
                        format!("{p}handshakeDetectionTimeoutMillis: '{v}' is not an integer"),
                    ))
                }
            },
            None => 5000,
        };
        Ok(QuorumTls {
            key_store,
            trust_store,
            protocols: self.protocols(),
            cipher_suites: self.list("ciphersuites"),
            hostname_verification,
            ssl_quorum,
            port_unification,
            detection_timeout_ms,
            reload,
        })
    }

    fn list(&self, name: &str) -> Option<Vec<String>> {
        self.get(name).map(|(_, v)| {
            v.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
        })
    }

    fn protocols(&self) -> Vec<String> {
        self.list("enabledProtocols").unwrap_or_else(|| {
            vec![self
                .get("protocol")
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_else(|| DEFAULT_PROTOCOL.to_string())]
        })
    }

    fn store(&self, which: &str) -> Result<Option<StoreSpec>, (usize, String)> {
        let Some((line, location)) = self.get(&format!("{which}.location")) else {
            return Ok(None);
        };
        let p = self.prefix;
        let location = PathBuf::from(location.trim());
        let mut password = self
            .get(&format!("{which}.password"))
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        // SecretUtils.readSecret: the file wins, one trailing line end off.
        if let Some((pline, path)) = self.get(&format!("{which}.passwordPath")) {
            if !path.trim().is_empty() {
                let text = std::fs::read_to_string(path.trim()).map_err(|e| {
                    (
                        *pline,
                        format!("ssl.{which}.passwordPath: cannot read {path}: {e}"),
                    )
                })?;
                password = text
                    .strip_suffix("\r\n")
                    .or_else(|| text.strip_suffix('\n'))
                    .unwrap_or(&text)
                    .to_string();
            }
        }
        let store_type = match self.get(&format!("{which}.type")) {
            Some((tline, v)) if !v.trim().is_empty() => StoreType::parse(v.trim())
                .map_err(|e| (*tline, format!("ssl.{which}.type: {e}")))?,
            _ => StoreType::from_file_name(&location)
                .map_err(|e| (*line, format!("{p}{which}.location: {e}")))?,
        };
        Ok(Some(StoreSpec {
            location,
            password: Secret::new(password),
            store_type,
        }))
    }

    /// The settled TLS settings (called when a secure port or port
    /// unification asks for TLS, on line `at`). Errors are (line, reason).
    pub fn settle(
        &self,
        at: usize,
        super_user: Option<String>,
        handshake_limit: Option<usize>,
        cert_reload: bool,
    ) -> Result<ClientTls, (usize, String)> {
        let key_store = self.store("keyStore")?.ok_or_else(|| {
            (
                at,
                "secureClientPort or client.portUnification is set but ssl.keyStore.location \
                 is not: the server has no certificate to present"
                    .to_string(),
            )
        })?;
        let trust_store = self.store("trustStore")?;
        let client_auth = match self.get("clientAuth") {
            None => ClientAuth::Need,
            Some((line, v)) => match v.trim().to_ascii_lowercase().as_str() {
                "" | "need" => ClientAuth::Need,
                "want" => ClientAuth::Want,
                "none" => ClientAuth::None,
                _ => {
                    return Err((
                        *line,
                        format!("ssl.clientAuth: '{v}' is not none, want or need"),
                    ))
                }
            },
        };
        if client_auth != ClientAuth::None && trust_store.is_none() {
            return Err((
                self.get("clientAuth").map_or(at, |(l, _)| *l),
                "ssl.clientAuth asks for client certificates but ssl.trustStore.location is \
                 not set: ringkeeper does not fall back to the JDK's default trust store"
                    .to_string(),
            ));
        }
        let protocols = self.protocols();
        Ok(ClientTls {
            key_store,
            trust_store,
            protocols,
            cipher_suites: self.list("ciphersuites"),
            client_auth,
            x509_super_user: super_user,
            handshake_limit,
            cert_reload,
        })
    }

    /// The line of `ssl.<name>`, for errors found when the context is built.
    pub fn line_of(&self, name: &str) -> Option<usize> {
        self.get(name).map(|(l, _)| *l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(pairs: &[(&str, &str)]) -> SslKeys {
        let mut k = SslKeys::default();
        for (i, (key, v)) in pairs.iter().enumerate() {
            k.take(key, v, i + 1).expect("a client TLS key").unwrap();
        }
        k
    }

    #[test]
    fn defaults_are_zookeepers() {
        let t = keys(&[
            ("ssl.keyStore.location", "/k/server.pem"),
            ("ssl.trustStore.location", "/k/ca.p12"),
        ])
        .settle(1, None, None, false)
        .unwrap();
        assert_eq!(t.key_store.store_type, StoreType::Pem);
        assert_eq!(t.trust_store.unwrap().store_type, StoreType::Pkcs12);
        assert_eq!(t.client_auth, ClientAuth::Need);
        assert_eq!(t.protocols, ["TLSv1.2"]);
        assert_eq!(t.cipher_suites, None);
    }

    #[test]
    fn store_type_from_name_is_case_sensitive_and_knows_no_pfx() {
        for name in ["/k/a.PEM", "/k/a.pfx", "/k/a.crt"] {
            let err = keys(&[("ssl.keyStore.location", name), ("ssl.clientAuth", "none")])
                .settle(1, None, None, false)
                .unwrap_err();
            assert!(err.1.contains("auto-detect"), "{err:?}");
        }
        let t = keys(&[
            ("ssl.keyStore.location", "/k/a.pfx"),
            ("ssl.keyStore.type", "pkcs12"),
            ("ssl.clientAuth", "none"),
        ])
        .settle(1, None, None, false)
        .unwrap();
        assert_eq!(t.key_store.store_type, StoreType::Pkcs12);
    }

    #[test]
    fn password_path_wins_without_its_line_end() {
        let dir = std::env::temp_dir().join(format!("rk-tls-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pw = dir.join("pw");
        std::fs::write(&pw, "s3cret\n").unwrap();
        let t = keys(&[
            ("ssl.keyStore.location", "/k/a.pem"),
            ("ssl.keyStore.password", "other"),
            ("ssl.keyStore.passwordPath", pw.to_str().unwrap()),
            ("ssl.clientAuth", "none"),
        ])
        .settle(1, None, None, false)
        .unwrap();
        assert_eq!(t.key_store.password.expose(), "s3cret");
        assert_eq!(format!("{:?}", t.key_store.password), "<hidden>");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refuses_what_it_cannot_honour() {
        let mut k = SslKeys::default();
        assert!(k.take("ssl.crl", "true", 1).unwrap().is_err());
        assert!(k.take("ssl.crl", "false", 1).unwrap().is_ok());
        assert!(k
            .take("ssl.context.supplier.class", "x.Y", 2)
            .unwrap()
            .is_err());
        assert!(k.take("ssl.quorum.keyStore.location", "/q", 3).is_none());
        let mut q = SslKeys::new("ssl.quorum.");
        assert!(q
            .take("ssl.quorum.keyStore.location", "/q/k.pem", 4)
            .unwrap()
            .is_ok());
        assert!(q.take("ssl.keyStore.location", "/k", 5).is_none());
        assert!(q
            .take("ssl.quorum.trustStore.location", "/q/ca.pem", 6)
            .unwrap()
            .is_ok());
        let t = q.settle_quorum(1, true, true, false).unwrap();
        assert!(t.hostname_verification && t.port_unification);
        assert_eq!(t.detection_timeout_ms, 5000);
        assert_eq!(t.protocols, ["TLSv1.2"]);
        let err = keys(&[("ssl.keyStore.location", "/k/a.pem")])
            .settle(1, None, None, false)
            .unwrap_err();
        assert!(err.1.contains("trustStore"), "{err:?}");
        let err = keys(&[("ssl.clientAuth", "none")])
            .settle(1, None, None, false)
            .unwrap_err();
        assert!(err.1.contains("keyStore.location"), "{err:?}");
    }
}
