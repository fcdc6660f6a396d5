//! SASL DIGEST-MD5 on client sessions (a JAAS `Server` section with
//! ZooKeeper's DigestLoginModule, authProvider.1=SASLAuthenticationProvider,
//! superUser, sessionRequireClientSASLAuth), differential against Apache
//! ZooKeeper 3.8: the same script against both servers, transcripts
//! compared. Clients: the `zookeeper-client` crate with its
//! `sasl-digest-md5` feature, kazoo's `sasl_options` (Debian's
//! python3-kazoo with python3-pure-sasl) and the Java client (ZooKeeperMain
//! with a JAAS `Client` section). Set RK_SKIP_ZK=1 to run only against
//! ringkeeper.
//!
//! Needs: apt-get install -y zookeeper python3-kazoo python3-pure-sasl

mod common;

use std::path::Path;
use std::time::Duration;

use common::bounded::run_bounded;
use common::transcript::{compare, outcome, own_acls, runtime, who};
use common::{start, Flavor, ZK_CONF_DIR, ZK_JAR};
use zookeeper_client as zk;

const SERVER_JAAS: &str = r#"Server {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       user_super="adminsecret"
       user_bob="bobsecret";
};
"#;

fn sasl_cfg(dir: &Path, extra: &str) -> String {
    let jaas = dir.join("server.jaas");
    std::fs::write(&jaas, SERVER_JAAS).unwrap();
    format!(
        "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
         java.security.auth.login.config={}\nzookeeper.superUser=super\n{extra}",
        jaas.display()
    )
}

async fn connect(
    port: u16,
    login: Option<(&'static str, &'static str)>,
) -> Result<zk::Client, String> {
    let mut c = zk::Client::connector()
        .with_session_timeout(Duration::from_secs(6))
        .with_connection_timeout(Duration::from_secs(2));
    if let Some((user, password)) = login {
        c = c.with_sasl(zk::SaslOptions::digest_md5(user, password));
    }
    let cluster = format!("127.0.0.1:{port}");
    match tokio::time::timeout(Duration::from_secs(10), c.connect(&cluster)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(format!("{e:?}")),
        Err(_) => Err("no session within 10 s".into()),
    }
}

fn digest_transcript(flavor: Flavor, _: &()) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let server = start(flavor, &sasl_cfg(dir.path(), ""));
    let port = server.port;
    let t = runtime().block_on(async {
        let mut t = Vec::new();
        let bob = connect(port, Some(("bob", "bobsecret"))).await.unwrap();
        t.push(format!("bob whoami: {}", who(&bob).await));
        t.extend(own_acls(&bob, "bob", "sasl", "bob", "a@b@c").await);
        let plain = connect(port, None).await.unwrap();
        t.push(format!("plain whoami: {}", who(&plain).await));
        t.push(format!(
            "plain reads sasl-owned: {}",
            outcome(plain.get_data("/owned").await)
        ));
        let admin = connect(port, Some(("super", "adminsecret"))).await.unwrap();
        t.push(format!("super whoami: {}", who(&admin).await));
        t.push(format!(
            "super reads sasl-owned: {}",
            outcome(admin.get_data("/owned").await)
        ));
        t.push(format!(
            "wrong password: {}",
            match connect(port, Some(("bob", "nope"))).await {
                Ok(c) => format!("session, reads: {}", outcome(c.get_data("/owned").await)),
                Err(_) => "refused".into(),
            }
        ));
        t.push(format!(
            "unknown user: {}",
            match connect(port, Some(("eve", "bobsecret"))).await {
                Ok(c) => format!("session, reads: {}", outcome(c.get_data("/owned").await)),
                Err(_) => "refused".into(),
            }
        ));
        t
    });
    drop(server);
    t
}

/// allowSaslFailedClients: a wrong password does not close the
/// connection (ZooKeeper answers OK with no token and keeps it); what the
/// client library then makes of it is compared.
fn allow_failed_transcript(flavor: Flavor, _: &()) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        flavor,
        &sasl_cfg(dir.path(), "allowSaslFailedClients=true\n"),
    );
    let port = server.port;
    let t = runtime().block_on(async {
        let mut t = Vec::new();
        match connect(port, Some(("bob", "wrong"))).await {
            Ok(c) => {
                t.push(format!("wrong password: session, whoami {}", who(&c).await));
                t.push(format!("and reads /: {}", outcome(c.get_data("/").await)));
            }
            Err(_) => t.push("wrong password: refused".into()),
        }
        t
    });
    drop(server);
    t
}

#[test]
fn allow_sasl_failed_clients() {
    compare("allowSaslFailedClients", &(), allow_failed_transcript);
}

fn required_transcript(flavor: Flavor, _: &()) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        flavor,
        &sasl_cfg(dir.path(), "sessionRequireClientSASLAuth=true\n"),
    );
    let port = server.port;
    let t = runtime().block_on(async {
        let mut t = Vec::new();
        let bob = connect(port, Some(("bob", "bobsecret"))).await.unwrap();
        t.push(format!(
            "bob creates: {}",
            outcome(
                bob.create(
                    "/r",
                    b"x",
                    &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
                )
                .await
            )
        ));
        match connect(port, None).await {
            Ok(plain) => t.push(format!(
                "without SASL, a read: {}",
                outcome(plain.get_data("/r").await)
            )),
            Err(_) => t.push("without SASL: no session".into()),
        }
        t
    });
    drop(server);
    t
}

const CLIENT_JAAS: &str = r#"Client {
       org.apache.zookeeper.server.auth.DigestLoginModule required
       username="bob"
       password="bobsecret";
};
"#;

fn java_transcript(flavor: Flavor, _: &()) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let server = start(flavor, &sasl_cfg(dir.path(), ""));
    let jaas = dir.path().join("client.jaas");
    std::fs::write(&jaas, CLIENT_JAAS).unwrap();
    let input = dir.path().join("input.txt");
    std::fs::write(
        &input,
        "whoami\ncreate /java-sasl \"v\" sasl:bob:cdrwa\ngetAcl /java-sasl\nget /java-sasl\nquit\n",
    )
    .unwrap();
    let mut cmd = std::process::Command::new("bash");
    cmd.arg("-c").arg("exec \"$0\" \"$@\" 2>&1").arg("java");
    cmd.arg("-Xmx256m")
        .arg(format!(
            "-Djava.security.auth.login.config={}",
            jaas.display()
        ))
        .arg("-cp")
        .arg(format!("{ZK_CONF_DIR}:{ZK_JAR}"))
        .arg("org.apache.zookeeper.ZooKeeperMain")
        .arg("-waitforconnection")
        .arg("-timeout")
        .arg("20000")
        .arg("-server")
        .arg(format!("127.0.0.1:{}", server.port));
    let stdin = std::process::Stdio::from(std::fs::File::open(&input).unwrap());
    let run = run_bounded(
        cmd,
        stdin,
        dir.path(),
        "java-sasl",
        Duration::from_secs(120),
    );
    drop(server);
    assert!(
        run.status.is_some(),
        "the Java client did not finish:\n{}",
        run.out
    );
    for wanted in ["sasl: bob", "Created /java-sasl", "'sasl,'bob"] {
        assert!(
            run.out.contains(wanted),
            "{flavor:?}: the Java client's SASL session lacks '{wanted}':\n{}",
            run.out
        );
    }
    run.out
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("SLF4J"))
        .filter(|l| !l.starts_with("Connecting to"))
        .map(str::to_string)
        .collect()
}

const KAZOO: &str = r#"
import sys
from kazoo.client import KazooClient
from kazoo.security import make_acl
from kazoo.exceptions import NoAuthError
port, user, password = sys.argv[1:4]
zk = KazooClient(hosts="127.0.0.1:" + port, timeout=10,
                 sasl_options={"mechanism": "DIGEST-MD5", "username": user, "password": password})
zk.start(timeout=20)
acl = [make_acl("sasl", "bob", all=True)]
if not zk.exists("/kazoo-sasl"):
    print("create", zk.create("/kazoo-sasl", b"v", acl=acl))
try:
    data, stat = zk.get("/kazoo-sasl")
    print(user, "reads", data.decode())
except NoAuthError:
    print(user, "reads: no auth")
print("acl", [(a.id.scheme, a.id.id, a.perms) for a in zk.get_acls("/kazoo-sasl")[0]])
zk.stop()
"#;

fn kazoo_transcript(flavor: Flavor, _: &()) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let server = start(flavor, &sasl_cfg(dir.path(), ""));
    let mut lines = Vec::new();
    for (user, password) in [("bob", "bobsecret"), ("super", "adminsecret")] {
        let mut cmd = std::process::Command::new("/usr/bin/python3");
        cmd.arg("-c")
            .arg(KAZOO)
            .arg(server.port.to_string())
            .arg(user)
            .arg(password);
        let run = run_bounded(
            cmd,
            std::process::Stdio::null(),
            dir.path(),
            &format!("kazoo-{user}"),
            Duration::from_secs(120),
        );
        assert!(
            run.success(),
            "{flavor:?}: kazoo with SASL as {user} failed (needs python3-kazoo and \
             python3-pure-sasl):\n{}{}",
            run.out,
            run.err
        );
        lines.extend(run.out.lines().map(str::to_string));
    }
    drop(server);
    lines
}

#[test]
fn kazoo_with_sasl_digest_md5() {
    compare("kazoo sasl_options", &(), kazoo_transcript);
}

#[test]
fn digest_md5_sessions_acls_and_super() {
    compare("SASL DIGEST-MD5", &(), digest_transcript);
}

#[test]
fn session_require_client_sasl_auth() {
    compare("sessionRequireClientSASLAuth", &(), required_transcript);
}

#[test]
fn java_client_with_a_jaas_login() {
    compare("the Java client's SASL login", &(), java_transcript);
}
