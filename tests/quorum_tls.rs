//! TLS between ensemble members (sslQuorum, ssl.quorum.* key and trust
//! stores, hostname verification both ways): a ringkeeper ensemble over
//! TLS, and mixed ensembles with Debian's Apache ZooKeeper 3.8 over TLS,
//! with a writer through every member at once and, in the mixed one, the
//! leader killed under them; every acknowledged write must be on every
//! survivor. A member whose certificate another CA signed is kept out.
//!
//! Needs: apt-get install -y zookeeper

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::cluster::Cluster;
use common::ensemble_client::*;
use common::Flavor::{self, Ringkeeper as Rk, ZooKeeper as Zk};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};

/// One ensemble at a time: JVMs and debug builds on two cores.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// A CA and one member certificate (SAN IP 127.0.0.1-9, as the cluster
/// helper gives member i 127.0.0.i) in `dir`: member.pem (PKCS#8 key,
/// then the chain) and ca.pem. Returns the zoo.cfg lines.
fn quorum_pki(dir: &Path, ca_name: &str) -> String {
    let mut ca = CertificateParams::default();
    ca.distinguished_name.push(DnType::CommonName, ca_name);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca.self_signed(&ca_key).unwrap();
    let mut member = CertificateParams::default();
    member
        .distinguished_name
        .push(DnType::CommonName, "ensemble member");
    member.subject_alt_names = (1..=9)
        .map(|i| SanType::IpAddress(format!("127.0.0.{i}").parse().unwrap()))
        .chain([SanType::DnsName("localhost".try_into().unwrap())])
        .collect();
    let key = KeyPair::generate().unwrap();
    let cert = member.signed_by(&key, &ca, &ca_key).unwrap();
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(
        dir.join("member.pem"),
        format!("{}{}{}", key.serialize_pem(), cert.pem(), ca.pem()),
    )
    .unwrap();
    format!(
        "sslQuorum=true\nssl.quorum.keyStore.location={}\nssl.quorum.trustStore.location={}\n",
        dir.join("member.pem").display(),
        dir.join("ca.pem").display()
    )
}

/// A writer through each member at once, under its own parent.
fn writers(c: &Cluster) -> Vec<(String, Writer)> {
    (0..c.size())
        .map(|i| {
            let parent = format!("/tls-{}", i + 1);
            make_parent(c, &parent);
            let w = Writer::start(vec![c.members[i].client], &parent, 100_000);
            (parent, w)
        })
        .collect()
}

fn finish_and_check(c: &Cluster, ws: Vec<(String, Writer)>) {
    let acked: Vec<(String, BTreeSet<String>)> =
        ws.into_iter().map(|(p, w)| (p, w.finish())).collect();
    wait_converged(c);
    for (parent, names) in &acked {
        assert!(
            !names.is_empty(),
            "no write was acknowledged under {parent}"
        );
        check_replicas(c, parent, names);
    }
}

fn run(flavors: &[Flavor], kill_leader: bool) {
    let _one = one_at_a_time();
    let pki = tempfile::tempdir().unwrap();
    let cfg = quorum_pki(pki.path(), "quorum CA");
    let mut c = Cluster::start_mixed_with_cfg(flavors, &cfg);
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    eprintln!(
        "over TLS, server {} ({:?}) leads",
        leader + 1,
        c.members[leader].flavor
    );
    let ws = writers(&c);
    for (_, w) in &ws {
        w.wait_for(0, 50, &c);
    }
    if kill_leader {
        c.kill(leader);
        let next = c.wait_for_leader(ELECTION_TIMEOUT);
        assert_ne!(next, leader);
        eprintln!(
            "after the kill, server {} ({:?}) leads over TLS",
            next + 1,
            c.members[next].flavor
        );
        for (_, w) in ws
            .iter()
            .filter(|(p, _)| *p != format!("/tls-{}", leader + 1))
        {
            let at = w.acked_count();
            w.wait_for(at, 50, &c);
        }
        c.restart(leader);
    }
    finish_and_check(&c, ws);
}

#[test]
fn ringkeeper_ensemble_over_quorum_tls() {
    run(&[Rk, Rk, Rk], false);
}

/// Two ringkeeper members and a Java one; whichever leads is killed under
/// the writers and another takes over, over TLS.
#[test]
fn mixed_ensemble_over_quorum_tls_two_ringkeeper_one_zookeeper() {
    run(&[Rk, Rk, Zk], true);
}

/// Two Java members and a ringkeeper one, likewise.
#[test]
fn mixed_ensemble_over_quorum_tls_two_zookeeper_one_ringkeeper() {
    run(&[Zk, Zk, Rk], true);
}

/// A member whose certificate another CA signed cannot join: the other two
/// form the quorum, and it never reports a leader.
#[test]
fn a_member_with_a_foreign_certificate_is_kept_out() {
    let _one = one_at_a_time();
    let pki = tempfile::tempdir().unwrap();
    let cfg = quorum_pki(pki.path(), "quorum CA");
    let mut c = Cluster::start_mixed_with_cfg(&[Rk, Rk, Rk], &cfg);
    c.wait_for_leader(ELECTION_TIMEOUT);
    // Member 3 gets a key store from another CA (same trust store path:
    // it trusts the others, they do not trust it).
    c.kill(2);
    let foreign = pki.path().join("foreign");
    quorum_pki(&foreign, "someone else's CA");
    std::fs::copy(foreign.join("member.pem"), pki.path().join("member-3.pem")).unwrap();
    let cfg3 = std::fs::read_to_string(&c.members[2].cfg).unwrap().replace(
        &format!("{}", pki.path().join("member.pem").display()),
        &format!("{}", pki.path().join("member-3.pem").display()),
    );
    std::fs::write(&c.members[2].cfg, cfg3).unwrap();
    c.restart(2);
    std::thread::sleep(Duration::from_secs(8));
    let mode = c.srvr(2);
    assert!(
        !mode.contains("Mode: follower") && !mode.contains("Mode: leader"),
        "a member the others do not trust joined:\n{mode}"
    );
    let mut conn = session_on(&c, 0);
    assert_eq!(create(&mut conn, "/still-writable", b"").unwrap(), 0);
}

/// The same certificates and keys for Apache ZooKeeper alone: checks the
/// test's own setup against the reference.
#[test]
fn zookeeper_ensemble_over_quorum_tls() {
    run(&[Zk, Zk, Zk], false);
}

/// The rolling switch ZooKeeper documents: every member with
/// portUnification (its peer ports take TLS and plaintext), then
/// sslQuorum turned on one member at a time, restarting each, under a
/// writer through every member; every acknowledged write survives.
#[test]
fn rolling_switch_to_quorum_tls_with_port_unification() {
    let _one = one_at_a_time();
    let pki = tempfile::tempdir().unwrap();
    let keys = quorum_pki(pki.path(), "quorum CA").replace("sslQuorum=true\n", "");
    let mut c =
        Cluster::start_mixed_with_cfg(&[Rk, Zk, Rk], &format!("portUnification=true\n{keys}"));
    c.wait_for_leader(ELECTION_TIMEOUT);
    let ws = writers(&c);
    for i in 0..c.size() {
        c.kill(i);
        let mut cfg = std::fs::read_to_string(&c.members[i].cfg).unwrap();
        cfg.push_str("\nsslQuorum=true\n");
        std::fs::write(&c.members[i].cfg, cfg).unwrap();
        c.restart(i);
        c.wait_for_leader(ELECTION_TIMEOUT);
        for (_, w) in &ws {
            let at = w.acked_count();
            w.wait_for(at, 20, &c);
        }
        eprintln!(
            "server {} ({:?}) now dials with TLS",
            i + 1,
            c.members[i].flavor
        );
    }
    finish_and_check(&c, ws);
}

/// sslQuorumReloadCertFiles: a member's key store replaced on disk (a
/// certificate from a second CA) is what it presents on its next
/// connections, without a restart. Shown by a member restarted to trust
/// only the second CA: it can join only if the others reloaded. (The test
/// fails with the reload off.)
#[test]
fn quorum_certificates_reload_without_a_restart() {
    let _one = one_at_a_time();
    let pki = tempfile::tempdir().unwrap();
    let (one, two) = (pki.path().join("one"), pki.path().join("two"));
    quorum_pki(&one, "CA one");
    quorum_pki(&two, "CA two");
    let (member, trust) = (pki.path().join("member.pem"), pki.path().join("ca.pem"));
    std::fs::copy(one.join("member.pem"), &member).unwrap();
    let both = std::fs::read_to_string(one.join("ca.pem")).unwrap()
        + &std::fs::read_to_string(two.join("ca.pem")).unwrap();
    std::fs::write(&trust, both).unwrap();
    let cfg = format!(
        "sslQuorum=true\nsslQuorumReloadCertFiles=true\nssl.quorum.keyStore.location={}\n\
         ssl.quorum.trustStore.location={}\n",
        member.display(),
        trust.display()
    );
    let mut c = Cluster::start_mixed_with_cfg(&[Rk, Rk, Rk], &cfg);
    c.wait_for_leader(ELECTION_TIMEOUT);
    let staged = pki.path().join("member.pem.new");
    std::fs::copy(two.join("member.pem"), &staged).unwrap();
    std::fs::rename(&staged, &member).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    c.kill(2);
    let cfg3 = std::fs::read_to_string(&c.members[2].cfg).unwrap().replace(
        &trust.display().to_string(),
        &two.join("ca.pem").display().to_string(),
    );
    std::fs::write(&c.members[2].cfg, cfg3).unwrap();
    c.restart(2);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mode = c.srvr(2);
        if mode.contains("Mode: follower") || mode.contains("Mode: leader") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a member trusting only the new CA did not join: the others did not reload\n{mode}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
