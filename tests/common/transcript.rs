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
