//! Differential transcripts with the `zookeeper-client` crate: a script
//! run against ringkeeper and Apache ZooKeeper, one line per step, and the
//! two compared (tests/tls.rs, tests/sasl.rs).

use zookeeper_client as zk;

use super::Flavor;

/// A current-thread tokio runtime, rustls's process-wide provider chosen
/// first (the tests link both of its providers: ring for the server,
/// aws-lc-rs through zookeeper-client).
pub fn runtime() -> tokio::runtime::Runtime {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The session's auth ids as whoAmI lists them, sorted.
pub async fn who(c: &zk::Client) -> String {
    let mut ids: Vec<String> = c
        .list_auth_users()
        .await
        .unwrap()
        .iter()
        .map(|u| format!("{}:{}", u.scheme(), u.user()))
        .collect();
    ids.sort();
    ids.join(" ")
}

/// "ok", or the error's name.
pub fn outcome<T>(r: Result<T, zk::Error>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => format!("{e:?}"),
    }
}

/// Runs `run` against ringkeeper, then (unless RK_SKIP_ZK is set) Apache
/// ZooKeeper, and asserts the transcripts are equal.
pub fn compare<C>(name: &str, ctx: &C, run: fn(Flavor, &C) -> Vec<String>) {
    let rk = run(Flavor::Ringkeeper, ctx);
    println!("ringkeeper:\n  {}", rk.join("\n  "));
    if std::env::var("RK_SKIP_ZK").is_ok() {
        return;
    }
    let zk = run(Flavor::ZooKeeper, ctx);
    println!("Apache ZooKeeper:\n  {}", zk.join("\n  "));
    assert_eq!(rk, zk, "{name}: ringkeeper and Apache ZooKeeper differ");
}

/// The ACL steps both provider scripts run as `name`, a session holding
/// `scheme:id`: a node only that id may use, one with the `auth` ACL (it
/// must expand to that id), an ACL the provider refuses (`bad_id`), and a
/// read of the first node.
pub async fn own_acls(
    c: &zk::Client,
    name: &str,
    scheme: &str,
    id: &str,
    bad_id: &str,
) -> Vec<String> {
    let mut t = Vec::new();
    let create = |path: &'static str, acl: zk::Acl| async move {
        let acls = [acl];
        let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acls));
        outcome(c.create(path, b"v", &opts).await)
    };
    let acl =
        |scheme: &str, id: &str| zk::Acl::new(zk::Permission::ALL, zk::AuthId::new(scheme, id));
    t.push(format!(
        "{name} create {scheme}-owned: {}",
        create("/owned", acl(scheme, id)).await
    ));
    t.push(format!(
        "{name} create auth-acl: {}",
        create("/mine", acl("auth", "")).await
    ));
    let (acls, _) = c.get_acl("/mine").await.unwrap();
    t.push(format!(
        "acl of /mine: {:?}",
        acls.iter()
            .map(|a| format!("{}:{}", a.scheme(), a.id()))
            .collect::<Vec<_>>()
    ));
    t.push(format!(
        "bad {scheme} acl: {}",
        create("/bad", acl(scheme, bad_id)).await
    ));
    t.push(format!(
        "{name} reads own: {}",
        outcome(c.get_data("/owned").await)
    ));
    t
}
