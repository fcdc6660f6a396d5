//! TLS between ensemble members (sslQuorum) as ZooKeeper's QuorumX509Util
//! sets it up: one key store (`ssl.quorum.keyStore.*`) whose certificate
//! each member presents both when it accepts and when it dials, one trust
//! store, mutual authentication always, and with
//! `ssl.quorum.hostnameVerification` (on by default) each side checking the
//! other's certificate against the peer's address: the dialer against the
//! address it dialed (rustls, for an IP address its SAN IP entries), the
//! acceptor against the address the connection came from
//! ([`QuorumTlsContext::check_peer`]: a SAN IP entry, or `localhost` for a
//! loopback peer). ZooKeeper's ZKHostnameVerifier may also look the
//! address up in DNS and match a SAN DNS entry; ringkeeper does not (a
//! lookup would stall the member for as long as the resolver takes): its
//! peers' certificates must carry their IP addresses.

use std::net::IpAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme,
};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

use crate::config::tls::QuorumTls;

const PREFIX: &str = "ssl.quorum.";

pub struct QuorumTlsContext {
    /// The contexts new connections use; replaced when
    /// sslQuorumReloadCertFiles sees the stores change.
    configs: RwLock<Configs>,
    settings: QuorumTls,
    pub hostname_verification: bool,
    /// `sslQuorum`: connections this member dials use TLS.
    pub ssl_quorum: bool,
    /// `portUnification`: accepted connections may be TLS or plaintext.
    pub port_unification: bool,
    pub detection_timeout: Duration,
}

struct Configs {
    /// For connections this member accepts (client certificates required).
    server: Arc<ServerConfig>,
    /// For connections this member dials (its certificate presented).
    client: Arc<ClientConfig>,
}

/// Builds the quorum's TLS; the error names the key to fix.
pub fn quorum_config(tls: &QuorumTls) -> Result<QuorumTlsContext, String> {
    Ok(QuorumTlsContext {
        configs: RwLock::new(build(tls)?),
        settings: tls.clone(),
        hostname_verification: tls.hostname_verification,
        ssl_quorum: tls.ssl_quorum,
        port_unification: tls.port_unification,
        detection_timeout: Duration::from_millis(tls.detection_timeout_ms),
    })
}

/// sslQuorumReloadCertFiles: a thread that reads the quorum's stores again
/// when their files change (for connections made after).
pub fn watch_stores(ctx: Arc<QuorumTlsContext>) -> std::io::Result<std::thread::JoinHandle<()>> {
    let paths = vec![
        ctx.settings.key_store.location.clone(),
        ctx.settings.trust_store.location.clone(),
    ];
    super::watch_files("quorum", paths, move || ctx.reload())
}

fn build(tls: &QuorumTls) -> Result<Configs, String> {
    let (provider, versions) =
        super::provider_for(&tls.protocols, tls.cipher_suites.as_ref(), PREFIX)?;
    let (chain, key) = super::load_identity(&tls.key_store, PREFIX)?;
    let roots = Arc::new(super::load_roots(&tls.trust_store, PREFIX)?);
    let client_verifier =
        WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| format!("{PREFIX}trustStore.location: {e}"))?;
    let server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("{PREFIX}enabledProtocols: {e}"))?
        .with_client_cert_verifier(client_verifier)
        .with_single_cert(chain.clone(), key.clone_key())
        .map_err(|e| {
            format!("{PREFIX}keyStore.location: the key does not fit the certificate: {e}")
        })?;
    let server_verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| format!("{PREFIX}trustStore.location: {e}"))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| format!("{PREFIX}enabledProtocols: {e}"))?;
    let builder = if tls.hostname_verification {
        builder.with_webpki_verifier(server_verifier)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyName(server_verifier)))
    };
    let client = builder
        .with_client_auth_cert(chain, key)
        .map_err(|e| format!("{PREFIX}keyStore.location: {e}"))?;
    Ok(Configs {
        server: Arc::new(server),
        client: Arc::new(client),
    })
}

impl QuorumTlsContext {
    /// The context for a connection this member accepts.
    pub fn server(&self) -> Arc<ServerConfig> {
        self.configs.read().expect("quorum TLS lock").server.clone()
    }

    /// The context for a connection this member dials.
    pub fn client(&self) -> Arc<ClientConfig> {
        self.configs.read().expect("quorum TLS lock").client.clone()
    }

    fn reload(&self) -> Result<(), String> {
        let fresh = build(&self.settings)?;
        *self.configs.write().expect("quorum TLS lock") = fresh;
        Ok(())
    }

    /// The name a dialed peer's certificate must carry: its address.
    pub fn server_name(addr: IpAddr) -> ServerName<'static> {
        ServerName::IpAddress(addr.into())
    }

    /// After accepting: the peer's certificate must name the address it
    /// connected from (when hostname verification is on).
    pub fn check_peer(
        &self,
        leaf: Option<&CertificateDer<'_>>,
        peer: IpAddr,
    ) -> Result<(), String> {
        if !self.hostname_verification {
            return Ok(());
        }
        let leaf = leaf.ok_or("the peer presented no certificate")?;
        let (_, cert) = X509Certificate::from_der(leaf)
            .map_err(|e| format!("unreadable peer certificate: {e}"))?;
        let names: Vec<GeneralName<'_>> = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|san| san.value.general_names.clone())
            .unwrap_or_default();
        let ip_match = names.iter().any(|n| match n {
            GeneralName::IPAddress(b) => ip_from(b) == Some(peer),
            _ => false,
        });
        if ip_match {
            return Ok(());
        }
        // No reverse DNS lookup (ZooKeeper may do one): it would block the
        // executor for as long as a resolver takes, at the behest of any
        // peer with a certificate. A loopback peer may be `localhost`.
        let localhost = peer.is_loopback()
            && names
                .iter()
                .any(|n| matches!(n, GeneralName::DNSName(d) if dns_matches(d, "localhost")));
        if localhost {
            return Ok(());
        }
        Err(format!(
            "the peer's certificate does not name {peer} (ssl.quorum.hostnameVerification)"
        ))
    }
}

fn ip_from(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => Some(IpAddr::from(<[u8; 4]>::try_from(b).ok()?)),
        16 => Some(IpAddr::from(<[u8; 16]>::try_from(b).ok()?)),
        _ => None,
    }
}

/// ZKHostnameVerifier's DNS match: case-insensitive, one leading `*`
/// label.
fn dns_matches(pattern: &str, host: &str) -> bool {
    let (p, h) = (pattern.to_ascii_lowercase(), host.to_ascii_lowercase());
    match p.strip_prefix("*.") {
        Some(rest) => h.split_once('.').is_some_and(|(_, tail)| tail == rest),
        None => p == h,
    }
}

/// The chain checked as always, the name not (hostnameVerification=false).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_names_match_as_zookeeper_checks_them() {
        assert!(dns_matches("localhost", "LOCALHOST"));
        assert!(dns_matches("*.example.com", "zk1.example.com"));
        assert!(!dns_matches("*.example.com", "a.b.example.com"));
        assert!(!dns_matches("zk1.example.com", "zk2.example.com"));
    }

    #[test]
    fn addresses_from_san_bytes() {
        assert_eq!(ip_from(&[127, 0, 0, 2]), Some("127.0.0.2".parse().unwrap()));
        assert_eq!(ip_from(&[1, 2, 3]), None);
    }
}
