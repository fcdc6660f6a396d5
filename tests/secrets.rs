//! Secrets stay where the config put them (issue 28 §3, §4): a server
//! holding a key store password, a trust store password read from a
//! passwordPath file and JAAS digest passwords, logging at `trace`, is
//! asked every four-letter word and scraped for metrics, while clients log
//! in over TLS and with right and wrong SASL passwords; no password (and
//! nothing the config names only as a secret) appears in any answer or in
//! a line the server logged, on any of these paths.
//!
//! Needs: apt-get install -y openssl

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::free_port;
use common::transcript::runtime;
use rcgen::{CertificateParams, DnType, KeyPair, SanType};
use zookeeper_client as zk;

const KEY_STORE_PASSWORD: &str = "KS-s3cret-9137";
const TRUST_STORE_PASSWORD: &str = "TS-s3cret-5521";
const BOB_PASSWORD: &str = "JAAS-s3cret-7788";
const SUPER_PASSWORD: &str = "JAAS-super-2264";
const WRONG_PASSWORD: &str = "WRONG-s3cret-4410";
const PROMETHEUS: &str = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";
/// Every word ZooKeeper 3.8 has, the ones that print configuration first.
const WORDS: &[&str] = &[
    "conf", "envi", "dirs", "srvr", "stat", "mntr", "cons", "dump", "wchs", "wchc", "wchp", "isro",
    "hash", "ruok", "gtmk",
];

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A self-signed server certificate (its own trust anchor) whose key is
/// PKCS#8 encrypted with KEY_STORE_PASSWORD, and the PEM of the
/// certificate for clients.
fn key_store(dir: &Path) -> String {
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::CommonName, "localhost");
    p.subject_alt_names = vec![SanType::IpAddress("127.0.0.1".parse().unwrap())];
    let key = KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap().pem();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
    let out = Command::new("openssl")
        .args(["pkcs8", "-topk8", "-v2", "aes256", "-passout"])
        .arg(format!("pass:{KEY_STORE_PASSWORD}"))
        .arg("-in")
        .arg(dir.join("key.pem"))
        .output()
        .expect("openssl (apt-get install -y openssl)");
    assert!(out.status.success(), "openssl pkcs8: {out:?}");
    std::fs::remove_file(dir.join("key.pem")).unwrap();
    let encrypted = String::from_utf8(out.stdout).unwrap();
    assert!(encrypted.contains("ENCRYPTED PRIVATE KEY"));
    std::fs::write(dir.join("server.pem"), format!("{encrypted}{cert}")).unwrap();
    std::fs::write(dir.join("ca.pem"), &cert).unwrap();
    cert
}

fn http_get(port: u16, path: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the metrics port");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).into_owned()
}

async fn sasl_session(port: u16, user: &'static str, password: &'static str) -> String {
    let cluster = format!("127.0.0.1:{port}");
    let connector = zk::Client::connector()
        .with_sasl(zk::SaslOptions::digest_md5(user, password))
        .with_session_timeout(Duration::from_secs(6))
        .with_connection_timeout(Duration::from_secs(2));
    let connect = connector.connect(&cluster);
    match tokio::time::timeout(Duration::from_secs(10), connect).await {
        Ok(Ok(c)) => common::transcript::who(&c).await,
        Ok(Err(e)) => format!("no session: {e}"),
        Err(_) => "no session within 10 s".into(),
    }
}

#[test]
fn passwords_never_reach_words_metrics_or_logs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = key_store(d);
    std::fs::write(d.join("trust.pass"), format!("{TRUST_STORE_PASSWORD}\n")).unwrap();
    std::fs::write(
        d.join("server.jaas"),
        format!(
            "Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
             user_super=\"{SUPER_PASSWORD}\"\n  user_bob=\"{BOB_PASSWORD}\";\n}};\n"
        ),
    )
    .unwrap();
    let (port, secure, metrics) = (free_port(), free_port(), free_port());
    let cfg = d.join("zoo.cfg");
    std::fs::create_dir_all(d.join("data")).unwrap();
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={data}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
             secureClientPort={secure}\nsecureClientPortAddress=127.0.0.1\n\
             serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
             ssl.keyStore.location={dir}/server.pem\nssl.keyStore.password={KEY_STORE_PASSWORD}\n\
             ssl.trustStore.location={dir}/ca.pem\nssl.trustStore.passwordPath={dir}/trust.pass\n\
             ssl.clientAuth=none\n\
             authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
             java.security.auth.login.config={dir}/server.jaas\nzookeeper.superUser=super\n\
             metricsProvider.className={PROMETHEUS}\nmetricsProvider.httpHost=127.0.0.1\n\
             metricsProvider.httpPort={metrics}\n\
             admin.enableServer=false\n4lw.commands.whitelist=*\n",
            data = d.join("data").display(),
            dir = d.display(),
        ),
    )
    .unwrap();
    let log = std::fs::File::create(d.join("server.log")).unwrap();
    let server = Killed(
        Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
            .arg("--config")
            .arg(&cfg)
            .env("RUST_LOG", "trace")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let start = Instant::now();
    while !common::four_letter(port, "srvr").is_ok_and(|s| s.contains("Mode:")) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no answer: {}",
            std::fs::read_to_string(d.join("server.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // Clients that use every secret: a TLS session (the decrypted key),
    // SASL logins with the right and a wrong password.
    let mut seen = Vec::new();
    runtime().block_on(async {
        let opts = zk::TlsOptions::new().with_pem_ca(&ca).unwrap();
        let tls = tokio::time::timeout(
            Duration::from_secs(10),
            zk::Client::connector()
                .with_tls(opts)
                .with_session_timeout(Duration::from_secs(6))
                .connect(&format!("tcp+tls://127.0.0.1:{secure}")),
        )
        .await
        .expect("a TLS session within 10 s")
        .expect("a TLS session");
        tls.create(
            "/tls",
            b"x",
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await
        .unwrap();
        seen.push(sasl_session(port, "bob", BOB_PASSWORD).await);
        seen.push(sasl_session(port, "super", SUPER_PASSWORD).await);
        seen.push(sasl_session(port, "bob", WRONG_PASSWORD).await);
    });
    assert!(seen[0].contains("bob"), "bob did not log in: {seen:?}");
    for w in WORDS {
        let answer = common::four_letter(port, w).unwrap_or_else(|e| format!("{w}: {e}"));
        assert!(!answer.is_empty() || *w == "hash", "{w} answered nothing");
        seen.push(format!("{w}: {answer}"));
    }
    let scraped = http_get(metrics, "/metrics");
    assert!(scraped.starts_with("HTTP/1.1 200"), "{scraped}");
    seen.push(scraped);
    drop(server);
    let logged = std::fs::read_to_string(d.join("server.log")).unwrap();
    assert!(
        logged.lines().count() > 20,
        "trace logging wrote almost nothing, so this test shows nothing: {logged}"
    );
    seen.push(logged);

    let all = seen.join("\n");
    // The conf word does show where the stores are: the check would be
    // empty if it did not answer with the TLS settings at all.
    assert!(all.contains("secureClientPort"), "conf shows no TLS: {all}");
    for secret in [
        KEY_STORE_PASSWORD,
        TRUST_STORE_PASSWORD,
        BOB_PASSWORD,
        SUPER_PASSWORD,
        WRONG_PASSWORD,
    ] {
        if let Some(at) = all.find(secret) {
            let from = all[..at].rfind('\n').map_or(0, |n| n + 1);
            let to = all[at..].find('\n').map_or(all.len(), |n| at + n);
            panic!("{secret} shown: {}", &all[from..to]);
        }
    }
}
