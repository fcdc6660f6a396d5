//! TLS on the client port (secureClientPort, client.portUnification,
//! ssl.clientAuth, the x509 auth provider and its superUser), differential
//! against Apache ZooKeeper 3.8 with Netty: the same script runs against
//! both servers, with certificates made fresh for the run (rcgen, ECDSA
//! P-256, PEM key stores as ZooKeeper's PemReader reads them), and the
//! transcripts must be equal. Clients: the `zookeeper-client` crate with
//! its `tls` feature, a bare rustls client for four-letter words, kazoo's
//! `use_ssl` (Debian's python3-kazoo) and the Java client (ZooKeeperMain,
//! zkCli's class, on ClientCnxnSocketNetty with `zookeeper.client.secure`).
//! Set RK_SKIP_ZK=1 to run only against ringkeeper.
//!
//! Needs: apt-get install -y zookeeper python3-kazoo

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::bounded::run_bounded;
use common::transcript::{self, outcome, own_acls, runtime, who};
use common::{free_port, start, Flavor, NETTY_CODEC_JAR, ZK_CONF_DIR, ZK_JAR};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, SanType,
};
use zookeeper_client as zk;

const CLIENT1_DN: &str = "CN=client1,OU=test,O=ringkeeper,C=US";
const ADMIN_DN: &str = "CN=admin,O=ringkeeper";

/// PEM files of one run: a CA, the server's key store (key and chain in
/// one file), clients signed by the CA and one signed by another CA.
struct Certs {
    dir: tempfile::TempDir,
    ca: String,
    client1: (String, String),
    admin: (String, String),
    rogue: (String, String),
}

impl Certs {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

fn dn(parts: &[(DnType, &str)]) -> DistinguishedName {
    let mut d = DistinguishedName::new();
    for (t, v) in parts {
        d.push(t.clone(), *v);
    }
    d
}

fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let mut p = CertificateParams::default();
    p.distinguished_name = dn(&[(DnType::CommonName, name)]);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    (p.self_signed(&key).unwrap(), key)
}

fn leaf(
    subject: DistinguishedName,
    server: bool,
    issuer: &(rcgen::Certificate, KeyPair),
) -> (String, String) {
    let mut p = CertificateParams::default();
    p.distinguished_name = subject;
    if server {
        p.subject_alt_names = vec![
            SanType::IpAddress("127.0.0.1".parse().unwrap()),
            SanType::DnsName("localhost".try_into().unwrap()),
        ];
    }
    p.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = p.signed_by(&key, &issuer.0, &issuer.1).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn make_certs() -> Certs {
    let dir = tempfile::tempdir().unwrap();
    let root = ca("ringkeeper test CA");
    let other = ca("someone else's CA");
    let server = leaf(dn(&[(DnType::CommonName, "localhost")]), true, &root);
    let client1 = leaf(
        dn(&[
            (DnType::CountryName, "US"),
            (DnType::OrganizationName, "ringkeeper"),
            (DnType::OrganizationalUnitName, "test"),
            (DnType::CommonName, "client1"),
        ]),
        false,
        &root,
    );
    let admin = leaf(
        dn(&[
            (DnType::OrganizationName, "ringkeeper"),
            (DnType::CommonName, "admin"),
        ]),
        false,
        &root,
    );
    let rogue = leaf(dn(&[(DnType::CommonName, "client1")]), false, &other);
    let ca = root.0.pem();
    std::fs::write(dir.path().join("ca.pem"), &ca).unwrap();
    // PemReader: the key (PKCS#8) and the chain, leaf first, in one file.
    std::fs::write(
        dir.path().join("server.pem"),
        format!("{}{}{}", server.1, server.0, ca),
    )
    .unwrap();
    Certs {
        dir,
        ca,
        client1,
        admin,
        rogue,
    }
}

fn tls_cfg(certs: &Certs, secure_port: u16, extra: &str) -> String {
    format!(
        "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
         secureClientPort={secure_port}\nsecureClientPortAddress=127.0.0.1\n\
         ssl.keyStore.location={}\nssl.trustStore.location={}\n\
         X509AuthenticationProvider.superUser={ADMIN_DN}\n{extra}",
        certs.path("server.pem").display(),
        certs.path("ca.pem").display(),
    )
}

/// A session over TLS with `identity` (PEM cert, key), or why not.
async fn connect_tls(
    certs: &Certs,
    port: u16,
    identity: Option<&(String, String)>,
) -> Result<zk::Client, String> {
    let mut opts = zk::TlsOptions::new()
        .with_pem_ca(&certs.ca)
        .map_err(|e| e.to_string())?;
    if let Some((cert, key)) = identity {
        opts = opts
            .with_pem_identity(cert, key)
            .map_err(|e| e.to_string())?;
    }
    let cluster = format!("tcp+tls://127.0.0.1:{port}");
    let connect = zk::Client::connector()
        .with_tls(opts)
        .with_session_timeout(Duration::from_secs(6))
        .with_connection_timeout(Duration::from_secs(2))
        .connect(&cluster);
    match tokio::time::timeout(Duration::from_secs(10), connect).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(format!("{e}")),
        Err(_) => Err("no session within 10 s".into()),
    }
}

async fn connect_plain(port: u16) -> zk::Client {
    zk::Client::connector()
        .with_session_timeout(Duration::from_secs(6))
        .connect(&format!("tcp://127.0.0.1:{port}"))
        .await
        .unwrap()
}

/// A four-letter word over TLS (as FourLetterWordMain's secure mode
/// sends it), with `identity` as the client certificate.
fn four_letter_tls(certs: &Certs, port: u16, word: &str, identity: &(String, String)) -> String {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pem_cert(&certs.ca)).unwrap();
    let key =
        rustls::pki_types::PrivateKeyDer::try_from(pem_der(&identity.1, "PRIVATE KEY")).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_client_auth_cert(vec![pem_cert(&identity.0)], key)
    .unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut tls = rustls::Stream::new(&mut conn, &mut sock);
    if let Err(e) = tls.write_all(word.as_bytes()) {
        return format!("error {e}");
    }
    let mut out = Vec::new();
    match tls.read_to_end(&mut out) {
        Ok(_) => String::from_utf8_lossy(&out).into_owned(),
        // ZooKeeper closes without close_notify after the answer.
        Err(_) if !out.is_empty() => String::from_utf8_lossy(&out).into_owned(),
        Err(e) => format!("error {:?}", e.kind()),
    }
}

fn pem_der(pem: &str, label: &str) -> Vec<u8> {
    use base64::Engine;
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let body = &pem[pem.find(&begin).unwrap() + begin.len()..pem.find(&end).unwrap()];
    let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
}

fn pem_cert(pem: &str) -> rustls::pki_types::CertificateDer<'static> {
    pem_der(pem, "CERTIFICATE").into()
}

/// A plaintext four-letter word sent to a TLS-only port: ZooKeeper's
/// SslHandler never answers it.
fn four_letter_plain_to_secure(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.write_all(b"ruok\n").unwrap();
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) | Err(_) if out.starts_with(b"imok") => "answered imok".into(),
        _ => "no answer".into(),
    }
}

fn secure_port_transcript(flavor: Flavor, certs: &Certs) -> Vec<String> {
    let secure = free_port();
    let server = start(flavor, &tls_cfg(certs, secure, ""));
    let plain = server.port;
    let rt = runtime();
    let mut t = rt.block_on(async {
        let mut t = Vec::new();
        let c1 = connect_tls(certs, secure, Some(&certs.client1))
            .await
            .unwrap();
        t.push(format!("client1 whoami: {}", who(&c1).await));
        t.extend(own_acls(&c1, "client1", "x509", CLIENT1_DN, "not a name").await);
        let p = connect_plain(plain).await;
        t.push(format!("plain whoami: {}", who(&p).await));
        t.push(format!(
            "plain reads x509-owned: {}",
            outcome(p.get_data("/owned").await)
        ));
        let admin = connect_tls(certs, secure, Some(&certs.admin))
            .await
            .unwrap();
        t.push(format!("admin whoami: {}", who(&admin).await));
        t.push(format!(
            "admin (super) reads x509-owned: {}",
            outcome(admin.get_data("/owned").await)
        ));
        t.push(format!(
            "no certificate: {}",
            match connect_tls(certs, secure, None).await {
                Ok(_) => "session",
                Err(_) => "refused",
            }
        ));
        t.push(format!(
            "certificate from another CA: {}",
            match connect_tls(certs, secure, Some(&certs.rogue)).await {
                Ok(_) => "session",
                Err(_) => "refused",
            }
        ));
        t
    });
    let ruok = four_letter_tls(certs, secure, "ruok", &certs.client1);
    t.push(format!("ruok over TLS: {ruok}"));
    let srvr = four_letter_tls(certs, secure, "srvr", &certs.client1);
    t.push(format!(
        "srvr over TLS has a mode: {}",
        srvr.contains("Mode: standalone")
    ));
    t.push(format!(
        "plaintext ruok on the secure port: {}",
        four_letter_plain_to_secure(secure)
    ));
    drop(server);
    t
}

fn unified_and_want_transcript(flavor: Flavor, certs: &Certs) -> Vec<String> {
    let secure = free_port();
    let cfg = tls_cfg(
        certs,
        secure,
        "client.portUnification=true\nssl.clientAuth=want\n",
    );
    let server = start(flavor, &cfg);
    let port = server.port;
    let rt = runtime();
    let mut t = rt.block_on(async {
        let mut t = Vec::new();
        let p = connect_plain(port).await;
        t.push(format!("plaintext on the unified port: {}", who(&p).await));
        let c1 = connect_tls(certs, port, Some(&certs.client1))
            .await
            .unwrap();
        t.push(format!("TLS on the unified port: {}", who(&c1).await));
        t.push(format!(
            "client1 create: {}",
            outcome(
                c1.create(
                    "/u",
                    b"x",
                    &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
                )
                .await
            )
        ));
        t.push(format!(
            "plaintext reads it: {}",
            outcome(p.get_data("/u").await)
        ));
        match connect_tls(certs, secure, None).await {
            Ok(anon) => t.push(format!("no certificate with want: {}", who(&anon).await)),
            Err(e) => t.push(format!("no certificate with want: refused {e}")),
        }
        t.push(format!(
            "certificate from another CA with want: {}",
            match connect_tls(certs, secure, Some(&certs.rogue)).await {
                Ok(_) => "session",
                Err(_) => "refused",
            }
        ));
        t
    });
    t.push(format!(
        "plaintext ruok on the unified port: {}",
        common::four_letter(port, "ruok").unwrap_or_else(|e| format!("error {e}"))
    ));
    drop(server);
    t
}

/// Writes client1's certificate and key as kazoo and the Java client read
/// them: separate PEM files, and one file with the key and the chain.
fn client_files(certs: &Certs) -> (PathBuf, PathBuf, PathBuf) {
    let (cert, key) = &certs.client1;
    let (c, k, both) = (
        certs.path("client1-cert.pem"),
        certs.path("client1-key.pem"),
        certs.path("client1.pem"),
    );
    std::fs::write(&c, cert).unwrap();
    std::fs::write(&k, key).unwrap();
    std::fs::write(&both, format!("{key}{cert}")).unwrap();
    (c, k, both)
}

const KAZOO: &str = r#"
import sys
from kazoo.client import KazooClient
port, ca, cert, key = sys.argv[1:5]
zk = KazooClient(hosts="127.0.0.1:" + port, use_ssl=True, ca=ca, certfile=cert,
                 keyfile=key, timeout=10)
zk.start(timeout=20)
print("create", zk.create("/kazoo-tls", b"over tls"))
data, stat = zk.get("/kazoo-tls")
print("get", data.decode(), stat.version)
print("children", sorted(zk.get_children("/")))
print("ruok", zk.command(b"ruok"))
zk.stop()
print("done")
"#;

fn kazoo_transcript(flavor: Flavor, certs: &Certs) -> Vec<String> {
    let secure = free_port();
    let server = start(flavor, &tls_cfg(certs, secure, ""));
    let (cert, key, _) = client_files(certs);
    let mut cmd = std::process::Command::new("/usr/bin/python3");
    cmd.arg("-c")
        .arg(KAZOO)
        .arg(secure.to_string())
        .arg(certs.path("ca.pem"))
        .arg(cert)
        .arg(key);
    let run = run_bounded(
        cmd,
        std::process::Stdio::null(),
        certs.dir.path(),
        "kazoo-tls",
        Duration::from_secs(120),
    );
    drop(server);
    assert!(
        run.success(),
        "kazoo over TLS failed:\n{}{}",
        run.out,
        run.err
    );
    run.out.lines().map(str::to_string).collect()
}

const JAVA_SCRIPT: &str = "create /java-tls \"over tls\"\nget /java-tls\nwhoami\nls /\nquit\n";

fn java_transcript(flavor: Flavor, certs: &Certs) -> Vec<String> {
    let secure = free_port();
    let server = start(flavor, &tls_cfg(certs, secure, ""));
    let (_, _, both) = client_files(certs);
    let input = certs.path("java-input.txt");
    std::fs::write(&input, JAVA_SCRIPT).unwrap();
    let mut cmd = std::process::Command::new("bash");
    // One stream for the CLI's stdout and stderr, in order.
    cmd.arg("-c").arg("exec \"$0\" \"$@\" 2>&1").arg("java");
    cmd.arg("-Xmx256m")
        .arg("-Dzookeeper.client.secure=true")
        .arg("-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty")
        .arg(format!(
            "-Dzookeeper.ssl.trustStore.location={}",
            certs.path("ca.pem").display()
        ))
        .arg(format!(
            "-Dzookeeper.ssl.keyStore.location={}",
            both.display()
        ))
        .arg("-cp")
        // ClientCnxnSocketNetty also needs Netty's resolver, which
        // Debian's manifest leaves off too.
        .arg(format!(
            "{ZK_CONF_DIR}:{ZK_JAR}:{NETTY_CODEC_JAR}:/usr/share/java/netty-resolver.jar"
        ))
        .arg("org.apache.zookeeper.ZooKeeperMain")
        .arg("-waitforconnection")
        .arg("-timeout")
        .arg("20000")
        .arg("-server")
        .arg(format!("127.0.0.1:{secure}"));
    let stdin = std::process::Stdio::from(std::fs::File::open(&input).unwrap());
    let run = run_bounded(
        cmd,
        stdin,
        certs.dir.path(),
        "java-tls",
        Duration::from_secs(120),
    );
    drop(server);
    assert!(
        run.status.is_some(),
        "the Java client did not finish:\n{}",
        run.out
    );
    // The answers; the port in "Connecting to" differs.
    run.out
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("SLF4J"))
        .filter(|l| !l.starts_with("Connecting to"))
        .map(str::to_string)
        .collect()
}

fn compare(name: &str, run: fn(Flavor, &Certs) -> Vec<String>) {
    transcript::compare(name, &make_certs(), run);
}

#[test]
fn secure_client_port_with_x509_identities() {
    compare("secureClientPort", secure_port_transcript);
}

#[test]
fn port_unification_and_client_auth_want() {
    compare("client.portUnification", unified_and_want_transcript);
}

#[test]
fn kazoo_over_tls() {
    compare("kazoo use_ssl", kazoo_transcript);
}

#[test]
fn java_client_over_tls() {
    compare("the Java client on Netty", java_transcript);
}

#[test]
fn startup_refuses_a_key_store_it_cannot_use() {
    let certs = make_certs();
    for (extra, wanted) in [
        (
            format!(
                "ssl.keyStore.location={}",
                certs.path("server.jks").display()
            ),
            "keytool -importkeystore",
        ),
        (
            format!(
                "ssl.keyStore.location={}",
                certs.path("missing.pem").display()
            ),
            "cannot read",
        ),
        ("ssl.clientAuth=maybe".to_string(), "ssl.clientAuth"),
    ] {
        std::fs::write(certs.path("server.jks"), b"not a key store").unwrap();
        let cfg = certs.path("refused.cfg");
        std::fs::write(
            &cfg,
            format!(
                "tickTime=2000\ndataDir={}\nclientPort={}\nsecureClientPort={}\n\
                 ssl.keyStore.location={}\nssl.trustStore.location={}\n{extra}\n",
                certs.path("data").display(),
                free_port(),
                free_port(),
                certs.path("server.pem").display(),
                certs.path("ca.pem").display(),
            ),
        )
        .unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
            .arg("--config")
            .arg(&cfg)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "started with {extra}: {text}");
        assert!(
            text.contains(wanted),
            "{extra}: wanted '{wanted}' in: {text}"
        );
    }
}

/// client.certReload: a key store replaced on disk is used for new
/// connections without a restart (ringkeeper only: Debian's ZooKeeper
/// 3.8.0 predates the key).
#[test]
fn cert_reload_serves_a_replaced_key_store() {
    let first = make_certs();
    let second = make_certs();
    let secure = free_port();
    let server = start(
        Flavor::Ringkeeper,
        &tls_cfg(
            &first,
            secure,
            "ssl.clientAuth=none\nclient.certReload=true\n",
        ),
    );
    let rt = runtime();
    rt.block_on(async {
        connect_tls(&first, secure, None)
            .await
            .expect("the first certificate is served");
        assert!(
            connect_tls(&second, secure, None).await.is_err(),
            "a client trusting only the second CA must not connect yet"
        );
        // Replaced as operators do it: a new file renamed over the old.
        let staged = first.path("server.pem.new");
        std::fs::copy(second.path("server.pem"), &staged).unwrap();
        std::fs::rename(&staged, first.path("server.pem")).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            match connect_tls(&second, secure, None).await {
                Ok(_) => break,
                Err(e) => assert!(
                    std::time::Instant::now() < deadline,
                    "the replaced key store was not served within 15 s: {e}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(
            connect_tls(&first, secure, None).await.is_err(),
            "the old certificate is no longer served"
        );
    });
    drop(server);
}

/// netty.server.outstandingHandshake.limit: with one handshake allowed in
/// flight, a connection that never finishes its handshake makes the next
/// one be closed; once it is gone, handshakes go through again, and an
/// established session is never affected (ringkeeper only).
#[test]
fn handshakes_in_flight_are_bounded() {
    let certs = make_certs();
    let secure = free_port();
    let server = start(
        Flavor::Ringkeeper,
        &tls_cfg(
            &certs,
            secure,
            "ssl.clientAuth=none\nnetty.server.outstandingHandshake.limit=1\n\
             ringkeeper.shards=1\n",
        ),
    );
    let rt = runtime();
    rt.block_on(async {
        let established = connect_tls(&certs, secure, None)
            .await
            .expect("a first session");
        // Half a ClientHello: its handshake stays in flight.
        let mut stalled = TcpStream::connect(("127.0.0.1", secure)).unwrap();
        stalled.write_all(&[0x16, 3, 1, 0, 200, 1]).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            connect_tls(&certs, secure, None).await.is_err(),
            "a handshake past the limit must be refused"
        );
        assert!(
            established.get_data("/").await.is_ok(),
            "the established session is served meanwhile"
        );
        drop(stalled);
        tokio::time::sleep(Duration::from_millis(300)).await;
        connect_tls(&certs, secure, None)
            .await
            .expect("handshakes go through again once the stalled one is gone");
    });
    drop(server);
}

/// A PKCS12 key store as Java's keytool writes one (PBES2, AES, HMAC-SHA256
/// in JDK 17), with its password: ringkeeper serves its certificate.
#[test]
fn pkcs12_key_store_from_keytool() {
    let dir = tempfile::tempdir().unwrap();
    let p12 = dir.path().join("server.p12");
    let cert = dir.path().join("server-cert.pem");
    let keytool = |args: &[&str]| {
        let out = std::process::Command::new("keytool")
            .args(args)
            .output()
            .expect("keytool (a JDK: apt-get install -y default-jdk-headless)");
        assert!(out.status.success(), "keytool {args:?}: {out:?}");
    };
    keytool(&[
        "-genkeypair",
        "-alias",
        "zk",
        "-keyalg",
        "EC",
        "-groupname",
        "secp256r1",
        "-dname",
        "CN=localhost",
        "-ext",
        "SAN=ip:127.0.0.1",
        "-keystore",
        p12.to_str().unwrap(),
        "-storetype",
        "PKCS12",
        "-storepass",
        "s3cret",
        "-validity",
        "2",
    ]);
    keytool(&[
        "-exportcert",
        "-rfc",
        "-alias",
        "zk",
        "-keystore",
        p12.to_str().unwrap(),
        "-storepass",
        "s3cret",
        "-file",
        cert.to_str().unwrap(),
    ]);
    let secure = free_port();
    let server = start(
        Flavor::Ringkeeper,
        &format!(
            "secureClientPort={secure}\nsecureClientPortAddress=127.0.0.1\n\
             ssl.keyStore.location={}\nssl.keyStore.password=s3cret\nssl.clientAuth=none\n",
            p12.display()
        ),
    );
    let ca = std::fs::read_to_string(&cert).unwrap();
    runtime().block_on(async {
        let opts = zk::TlsOptions::new().with_pem_ca(&ca).unwrap();
        let cluster = format!("tcp+tls://127.0.0.1:{secure}");
        let c = zk::Client::connector()
            .with_tls(opts)
            .with_session_timeout(Duration::from_secs(6))
            .connect(&cluster)
            .await
            .expect("a session with the PKCS12 key store's certificate");
        c.get_data("/").await.unwrap();
    });
    drop(server);
}

/// A PEM key store whose PKCS#8 key is encrypted (openssl pkcs8 -topk8,
/// PBES2 with AES-256) opens with ssl.keyStore.password and not without
/// (ringkeeper only).
#[test]
fn encrypted_pem_key_store() {
    let certs = make_certs();
    let plain = certs.path("server.pem");
    let text = std::fs::read_to_string(&plain).unwrap();
    let key_end = text.find("-----END PRIVATE KEY-----").unwrap() + 25;
    std::fs::write(certs.path("key.pem"), &text[..key_end]).unwrap();
    let out = std::process::Command::new("openssl")
        .args([
            "pkcs8",
            "-topk8",
            "-v2",
            "aes256",
            "-passout",
            "pass:k3y-pass",
            "-in",
        ])
        .arg(certs.path("key.pem"))
        .output()
        .expect("openssl (apt-get install -y openssl)");
    assert!(out.status.success(), "openssl pkcs8: {out:?}");
    let encrypted = format!(
        "{}{}",
        String::from_utf8(out.stdout).unwrap(),
        &text[key_end..]
    );
    assert!(encrypted.contains("ENCRYPTED PRIVATE KEY"));
    std::fs::write(&plain, encrypted).unwrap();
    let secure = free_port();
    let server = start(
        Flavor::Ringkeeper,
        &tls_cfg(
            &certs,
            secure,
            "ssl.keyStore.password=k3y-pass\nssl.clientAuth=none\n",
        ),
    );
    runtime().block_on(async {
        connect_tls(&certs, secure, None)
            .await
            .expect("a session with the decrypted key");
    });
    drop(server);
    let cfg = certs.path("nopass.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort={}\n{}",
            certs.path("data2").display(),
            free_port(),
            tls_cfg(&certs, free_port(), "ssl.clientAuth=none\n")
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
        .arg("--config")
        .arg(&cfg)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.status.success(),
        "started without the key's password: {text}"
    );
    assert!(
        text.contains("ssl.keyStore.location") && text.contains("encrypted"),
        "{text}"
    );
}
