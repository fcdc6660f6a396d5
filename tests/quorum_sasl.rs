//! Quorum SASL (quorum.auth.enableSasl, learnerRequireSasl,
//! serverRequireSasl; DIGEST-MD5 with the JAAS file's QuorumServer users
//! and QuorumLearner login): mixed ensembles with Debian's Apache
//! ZooKeeper 3.8 authenticating each other on the election and quorum
//! ports, a writer through every member; and a member whose learner
//! password is wrong kept out.
//!
//! Needs: apt-get install -y zookeeper

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::cluster::Cluster;
use common::ensemble_client::*;
use common::Flavor::{self, Ringkeeper as Rk, ZooKeeper as Zk};

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn jaas(dir: &Path, name: &str, learner_password: &str) -> String {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "QuorumServer {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
             user_member=\"quorum-secret\";\n}};\nQuorumLearner {{\n  \
             org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
             username=\"member\"\n  password=\"{learner_password}\";\n}};\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

const SASL_CFG: &str = "quorum.auth.enableSasl=true\nquorum.auth.learnerRequireSasl=true\n\
                        quorum.auth.serverRequireSasl=true\n";

fn start(flavors: &[Flavor], dir: &Path) -> Cluster {
    let path = jaas(dir, "quorum.jaas", "quorum-secret");
    let cfg = format!("{SASL_CFG}java.security.auth.login.config={path}\n");
    let prop = format!("java.security.auth.login.config={path}");
    Cluster::start_mixed_with_cfg_and_props(flavors, &cfg, &[&prop])
}

/// With `fail_over`, the first leader is killed under the writers and
/// restarted: it rejoins as a learner of a leader of the other flavor
/// (SASL on both of its ports' connections) and its writer goes on.
fn run(flavors: &[Flavor], fail_over: bool) {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut c = start(flavors, dir.path());
    let leader = c.wait_for_leader(ELECTION_TIMEOUT);
    eprintln!(
        "with quorum SASL, server {} ({:?}) leads",
        leader + 1,
        c.members[leader].flavor
    );
    let ws: Vec<(String, Writer)> = (0..c.size())
        .map(|i| {
            let parent = format!("/sasl-{}", i + 1);
            make_parent(&c, &parent);
            (
                parent.clone(),
                Writer::start(vec![c.members[i].client], &parent, 100_000),
            )
        })
        .collect();
    for (_, w) in &ws {
        w.wait_for(0, 50, &c);
    }
    if fail_over {
        c.kill(leader);
        let next = c.wait_for_leader(ELECTION_TIMEOUT);
        eprintln!(
            "after the kill, server {} ({:?}) leads",
            next + 1,
            c.members[next].flavor
        );
        c.restart(leader);
        for (_, w) in &ws {
            let at = w.acked_count();
            w.wait_for(at, 30, &c);
        }
        assert!(
            c.srvr(leader).contains("Mode: follower"),
            "the restarted member did not rejoin:\n{}",
            c.srvr(leader)
        );
    }
    let acked: Vec<(String, BTreeSet<String>)> =
        ws.into_iter().map(|(p, w)| (p, w.finish())).collect();
    wait_converged(&c);
    for (parent, names) in &acked {
        check_replicas(&c, parent, names);
    }
}

#[test]
fn mixed_ensemble_with_quorum_sasl_two_ringkeeper_one_zookeeper() {
    run(&[Rk, Rk, Zk], true);
}

#[test]
fn mixed_ensemble_with_quorum_sasl_two_zookeeper_one_ringkeeper() {
    run(&[Zk, Zk, Rk], true);
}

/// The reference alone, with the same files: checks the test's setup.
#[test]
fn zookeeper_ensemble_with_quorum_sasl() {
    run(&[Zk, Zk, Zk], false);
}

/// A ringkeeper member whose QuorumLearner password is wrong cannot join
/// the two that require SASL; they serve on.
#[test]
fn a_member_with_a_wrong_password_is_kept_out() {
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut c = start(&[Rk, Rk, Rk], dir.path());
    c.wait_for_leader(ELECTION_TIMEOUT);
    c.kill(2);
    let wrong = jaas(dir.path(), "wrong.jaas", "not-the-secret");
    let cfg = std::fs::read_to_string(&c.members[2].cfg).unwrap().replace(
        &dir.path().join("quorum.jaas").display().to_string(),
        &wrong,
    );
    std::fs::write(&c.members[2].cfg, cfg).unwrap();
    c.restart(2);
    std::thread::sleep(Duration::from_secs(8));
    let mode = c.srvr(2);
    assert!(
        !mode.contains("Mode: follower") && !mode.contains("Mode: leader"),
        "a member with the wrong password joined:\n{mode}"
    );
    let mut conn = session_on(&c, 0);
    assert_eq!(create(&mut conn, "/still-writable", b"").unwrap(), 0);
}
