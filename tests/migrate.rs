//! Migration both ways with data Apache ZooKeeper itself wrote (issue 29
//! §1): a ZooKeeper 3.8 member (a one-server ensemble, so that restarts
//! make new epochs) takes 100,000 znodes and every kind of txn (create,
//! create2, sequential, ephemeral, container, TTL, setData, setACL,
//! delete, multi, a failed multi's error txns, sessions closing with their
//! ephemerals) over three epochs, with small snapCount so that its
//! snapshots are fuzzy and its log spans several files, and is killed -9
//! with a live session's ephemerals in place. Then:
//! - `ringkeeper import` of that dataDir, served by ringkeeper, answers
//!   every node's data, stat, ACL and children as ZooKeeper does on the
//!   same dataDir;
//! - `ringkeeper export` of ringkeeper's dataDir, loaded by a fresh
//!   ZooKeeper, answers the same again, and ZooKeeper finds no digest
//!   mismatch in it;
//! - damaged inputs stop with the file and offset and leave no output.
//!
//! Needs: apt-get install -y zookeeper

mod common;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::Cluster;
use common::transcript::runtime;
use common::{free_port, Flavor, NETTY_CODEC_JAR, ZK_CONF_DIR, ZK_JAR};
use zookeeper_client as zk;

const ZNODES: usize = 100_000;
/// Requests in flight while loading and walking.
const DEPTH: usize = 256;
const SESSION_MS: u64 = 590_000;
const READY: Duration = Duration::from_secs(60);
/// The members' session bounds: a live session's ephemerals outlast the
/// kill, the import and the walks.
const SESSION_BOUNDS: &str = "minSessionTimeout=1000\nmaxSessionTimeout=600000\n";
/// Java properties for the ZooKeeper members: TTL nodes, and no reaping
/// of containers or TTL nodes while the test runs.
const ZK_PROPS: &[&str] = &[
    "zookeeper.extendedTypesEnabled=true",
    "znode.container.checkIntervalMs=3600000",
];

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_serving(port: u16, proc: &mut Proc, log: &Path) {
    let start = Instant::now();
    while !common::four_letter(port, "srvr").is_ok_and(|s| s.contains("Mode:")) {
        if let Ok(Some(status)) = proc.0.try_wait() {
            panic!(
                "exited ({status}) before serving: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(start.elapsed() < READY, "not serving within {READY:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A standalone server of `flavor` on `data` (a dataDir made elsewhere).
fn serve(flavor: Flavor, data: &Path, home: &Path) -> (Proc, u16) {
    let port = free_port();
    std::fs::create_dir_all(home).unwrap();
    let cfg = home.join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
             4lw.commands.whitelist=*\nadmin.enableServer=false\n{SESSION_BOUNDS}",
            data.display()
        ),
    )
    .unwrap();
    let log_path = home.join("server.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut cmd = match flavor {
        Flavor::Ringkeeper => {
            let mut c = Command::new(env!("CARGO_BIN_EXE_ringkeeper"));
            c.arg("--config").arg(&cfg).env("RUST_LOG", "warn");
            c
        }
        Flavor::ZooKeeper => {
            let mut c = Command::new("java");
            for p in ZK_PROPS {
                c.arg(format!("-D{p}"));
            }
            c.arg(format!("-Dzookeeper.log.dir={}", home.display()))
                .arg("-Xmx1g")
                .arg("-cp")
                .arg(format!("{ZK_CONF_DIR}:{ZK_JAR}:{NETTY_CODEC_JAR}"))
                .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
                .arg(&cfg);
            c
        }
    };
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    let mut p = Proc(cmd.spawn().unwrap());
    wait_serving(port, &mut p, &log_path);
    (p, port)
}

fn ringkeeper(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn import(zk_data: &Path, out: &Path) -> (bool, String) {
    ringkeeper(&[
        "import".as_ref(),
        "--zookeeper-datadir".as_ref(),
        zk_data.as_os_str(),
        "--datadir".as_ref(),
        out.as_os_str(),
    ])
}

async fn connect(addr: &str) -> zk::Client {
    tokio::time::timeout(
        Duration::from_secs(30),
        zk::Client::connector()
            .with_session_timeout(Duration::from_millis(SESSION_MS))
            .connect(addr),
    )
    .await
    .expect("a session within 30 s")
    .expect("a session")
}

/// Runs `ops` concurrently, at most DEPTH at a time.
async fn pipelined<F>(ops: impl Iterator<Item = F>)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    for op in ops {
        if set.len() >= DEPTH {
            set.join_next().await.unwrap().unwrap();
        }
        set.spawn(op);
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
}

/// One epoch's writes: `count` bulk znodes and one of every other txn.
async fn write_epoch(c: &zk::Client, addr: &str, epoch: usize, count: usize, live: &zk::Client) {
    let open = zk::Acls::anyone_all();
    let p = zk::CreateMode::Persistent.with_acls(open);
    let base = format!("/bulk{epoch}");
    c.create(&base, b"", &p).await.unwrap();
    let groups = count / 1000;
    pipelined((0..groups).map(|g| {
        let (c, p, base) = (c.clone(), p.clone(), base.clone());
        async move {
            c.create(&format!("{base}/g{g}"), b"group", &p)
                .await
                .unwrap();
        }
    }))
    .await;
    pipelined((0..count - groups - 1).map(|i| {
        let (c, p, base) = (c.clone(), p.clone(), base.clone());
        async move {
            let data = vec![b'a' + (i % 26) as u8; i % 300];
            c.create(&format!("{base}/g{}/n{i}", i % groups), &data, &p)
                .await
                .unwrap();
        }
    }))
    .await;
    // Changes to some of them.
    pipelined((0..500).map(|i| {
        let (c, base) = (c.clone(), base.clone());
        async move {
            let path = format!("{base}/g{}/n{i}", i % groups);
            c.set_data(&path, format!("changed {i}").as_bytes(), None)
                .await
                .unwrap();
            if i % 5 == 0 {
                c.delete(&path, None).await.unwrap();
            }
        }
    }))
    .await;
    let acl = [
        zk::Acl::new(
            zk::Permission::READ | zk::Permission::WRITE,
            zk::AuthId::new("digest", "user:tpUq/4Pn5A64fVZyQ0gOJ8ZWqkY="),
        ),
        zk::Acl::new(zk::Permission::READ, zk::AuthId::new("world", "anyone")),
    ];
    c.set_acl(
        &format!("{base}/g{}/n1001", 1001 % groups),
        &zk::Acls::new(&acl),
        None,
    )
    .await
    .unwrap();
    // Sequential, container, TTL.
    let ps = zk::CreateMode::PersistentSequential.with_acls(open);
    for _ in 0..3 {
        c.create(&format!("{base}/seq-"), b"s", &ps).await.unwrap();
    }
    let container = zk::CreateMode::Container.with_acls(open);
    c.create(&format!("{base}/container"), b"", &container)
        .await
        .unwrap();
    c.create(&format!("{base}/container/child"), b"", &p)
        .await
        .unwrap();
    let ttl = zk::CreateMode::Persistent
        .with_acls(open)
        .with_ttl(Duration::from_secs(3600));
    c.create(&format!("{base}/ttl"), b"t", &ttl).await.unwrap();
    // Multi: one that applies, one that fails (error txns).
    let mut m = c.new_multi_writer();
    m.add_create(&format!("{base}/m"), b"m", &p).unwrap();
    m.add_set_data(&format!("{base}/m"), b"m2", Some(0))
        .unwrap();
    m.add_create(&format!("{base}/m/x"), b"", &p).unwrap();
    m.add_delete(&format!("{base}/m/x"), None).unwrap();
    m.commit().await.unwrap();
    let mut m = c.new_multi_writer();
    m.add_create(&format!("{base}/never"), b"", &p).unwrap();
    m.add_set_data(&format!("{base}/m"), b"", Some(99)).unwrap();
    assert!(m.commit().await.is_err());
    // A session that closes, taking its ephemerals with it.
    let short = connect(addr).await;
    let e = zk::CreateMode::Ephemeral.with_acls(open);
    let es = zk::CreateMode::EphemeralSequential.with_acls(open);
    short
        .create(&format!("{base}/gone"), b"", &e)
        .await
        .unwrap();
    short
        .create(&format!("{base}/gone-"), b"", &es)
        .await
        .unwrap();
    drop(short);
    gone(c, &format!("{base}/gone")).await;
    // The live session's ephemerals stay.
    live.create(&format!("{base}/live"), b"here", &e)
        .await
        .unwrap();
    live.create(&format!("{base}/live-"), b"", &es)
        .await
        .unwrap();
}

/// Waits until `path` is gone: a dropped client closes its session in
/// the background, and a close that reached no server before a kill would
/// arrive after the restart, in the middle of a comparison.
async fn gone(c: &zk::Client, path: &str) {
    let start = Instant::now();
    while c.check_stat(path).await.unwrap().is_some() {
        assert!(start.elapsed() < READY, "{path} outlived its session");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every node outside /zookeeper: path, data, stat, ACL and children, one
/// line each, sorted by path.
async fn walk(addr: &str) -> Vec<String> {
    let c = connect(addr).await;
    let mut out = Vec::new();
    let mut level: VecDeque<String> = VecDeque::from(["/".to_string()]);
    while !level.is_empty() {
        let mut set = tokio::task::JoinSet::new();
        let mut next = Vec::new();
        let mut take = |r: (String, Vec<u8>, zk::Stat, Vec<zk::Acl>, Vec<String>)| {
            let (p, data, stat, acl, children) = r;
            let acl: Vec<String> = acl
                .iter()
                .map(|a| format!("{}:{}:{:?}", a.scheme(), a.id(), a.permission()))
                .collect();
            out.push(format!(
                "{p} data={} stat={stat:?} acl={acl:?} children={children:?}",
                String::from_utf8_lossy(&data)
            ));
            for ch in children {
                let child = if p == "/" {
                    format!("/{ch}")
                } else {
                    format!("{p}/{ch}")
                };
                if child != "/zookeeper" {
                    next.push(child);
                }
            }
        };
        for p in level.drain(..) {
            if set.len() >= DEPTH {
                take(set.join_next().await.unwrap().unwrap());
            }
            let c = c.clone();
            set.spawn(async move {
                let (data, stat) = c.get_data(&p).await.unwrap();
                let (acl, _) = c.get_acl(&p).await.unwrap();
                let mut children = c.list_children(&p).await.unwrap();
                children.sort();
                (p, data, stat, acl, children)
            });
        }
        while let Some(r) = set.join_next().await {
            take(r.unwrap());
        }
        level.extend(next);
    }
    out.sort();
    out
}

fn assert_same(what: &str, a: &[String], b: &[String]) {
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x, y, "{what}: the first node that differs");
    }
    assert_eq!(a.len(), b.len(), "{what}: node counts differ");
}

/// What ZooKeeper wrote: a one-server ensemble's dataDir after three
/// epochs of writes and a kill -9; returns the cluster (member stopped)
/// and the live session, still open.
fn zookeeper_history(rt: &tokio::runtime::Runtime, snap_count: usize) -> (Cluster, zk::Client) {
    let cfg = format!("standaloneEnabled=false\nsnapCount={snap_count}\n{SESSION_BOUNDS}");
    let mut cluster = Cluster::start_mixed_with_cfg_and_props(&[Flavor::ZooKeeper], &cfg, ZK_PROPS);
    cluster.wait_for_leader(READY);
    let addr = cluster.members[0].client.to_string();
    let live = rt.block_on(async {
        let live = connect(&addr).await;
        for epoch in 1..=3 {
            let c = connect(&addr).await;
            write_epoch(&c, &addr, epoch, ZNODES / 3, &live).await;
            drop(c);
            if epoch < 3 {
                cluster.kill(0);
                cluster.restart(0);
                cluster.wait_for_leader(READY);
            }
        }
        live
    });
    cluster.kill(0);
    (cluster, live)
}

fn data_dir(c: &Cluster) -> PathBuf {
    c.members[0].cfg.parent().unwrap().join("data")
}

#[test]
fn zookeeper_data_imports_serves_the_same_and_exports_back() {
    let rt = runtime();
    let (mut cluster, live) = zookeeper_history(&rt, 20_000);
    let zk_data = data_dir(&cluster);
    let work = tempfile::tempdir().unwrap();
    let rk_data = work.path().join("rk-data");
    let (ok, report) = import(&zk_data, &rk_data);
    println!("import:\n{report}");
    assert!(ok, "import failed: {report}");
    assert!(
        report.contains("acceptedEpoch 3, currentEpoch 3"),
        "{report}"
    );
    let checked: u32 = report
        .lines()
        .find_map(|l| l.strip_prefix("ZooKeeper digests checked: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("a digest count");
    assert!(checked >= 1, "no ZooKeeper digest was checked: {report}");
    let logs = report.lines().filter(|l| l.starts_with("log: ")).count();
    assert!(logs >= 2, "the replay read {logs} log file(s): {report}");

    // The same dataDir in ZooKeeper, and the import in ringkeeper.
    cluster.restart(0);
    cluster.wait_for_leader(READY);
    let zk_addr = cluster.members[0].client.to_string();
    let (rk, rk_port) = serve(Flavor::Ringkeeper, &rk_data, &work.path().join("rk"));
    let reference = rt.block_on(walk(&zk_addr));
    assert!(reference.len() > ZNODES - 2000, "{} nodes", reference.len());
    assert!(
        reference.iter().any(|l| l.starts_with("/bulk3/live ")),
        "the live session's ephemeral is gone from ZooKeeper"
    );
    let imported = rt.block_on(walk(&format!("127.0.0.1:{rk_port}")));
    assert_same(
        "ZooKeeper vs ringkeeper on the import",
        &reference,
        &imported,
    );

    // Back: ringkeeper's dataDir exported, loaded by a fresh ZooKeeper.
    drop(rk);
    let back = work.path().join("zk-back");
    let (ok, report) = ringkeeper(&[
        "export".as_ref(),
        "--datadir".as_ref(),
        rk_data.as_os_str(),
        "--zookeeper-datadir".as_ref(),
        back.as_os_str(),
    ]);
    println!("export:\n{report}");
    assert!(ok, "export failed: {report}");
    // The txns after ringkeeper's newest snapshot stay a ZooKeeper txn log
    // (ZooKeeper can cut a log when its leader sends TRUNC, not a
    // snapshot): the exported snapshot is at that snapshot's zxid.
    let field = |name: &str| {
        report
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name:?} in the export report:\n{report}"))
            .to_string()
    };
    let last = field("last zxid: 0x");
    let snap = field("snapshot: ");
    let snap_zxid = snap.rsplit('.').next().unwrap().to_string();
    if snap_zxid != last {
        let log = field("txn log: ");
        let first = log.split(' ').next().unwrap().rsplit('.').next().unwrap();
        let (s, f) = (
            i64::from_str_radix(&snap_zxid, 16).unwrap(),
            i64::from_str_radix(first, 16).unwrap(),
        );
        assert_eq!(
            f,
            s + 1,
            "the log starts right after the snapshot:\n{report}"
        );
    }
    let (_zk_back, back_port) = serve(Flavor::ZooKeeper, &back, &work.path().join("zk-back-home"));
    let exported = rt.block_on(walk(&format!("127.0.0.1:{back_port}")));
    assert_same(
        "ringkeeper vs ZooKeeper on its export",
        &imported,
        &exported,
    );
    let mntr = common::four_letter(back_port, "mntr").unwrap();
    assert!(
        mntr.lines().any(|l| l == "zk_digest_mismatches_count\t0"),
        "ZooKeeper found a digest mismatch in the export:\n{mntr}"
    );
    drop(live);
}

/// Compressed snapshots (SnapStream's gz), a damaged newest snapshot
/// (ZooKeeper falls back to the one before, and so does import), a
/// damaged log record (stops with its file and offset, no output left).
#[test]
fn compressed_and_damaged_zookeeper_files() {
    let rt = runtime();
    let cfg = format!("standaloneEnabled=false\nsnapCount=100\n{SESSION_BOUNDS}");
    let mut props = ZK_PROPS.to_vec();
    props.push("zookeeper.snapshot.compression.method=gz");
    let mut cluster = Cluster::start_mixed_with_cfg_and_props(&[Flavor::ZooKeeper], &cfg, &props);
    cluster.wait_for_leader(READY);
    let addr = cluster.members[0].client.to_string();
    rt.block_on(async {
        let live = connect(&addr).await;
        let c = connect(&addr).await;
        write_epoch(&c, &addr, 1, 3000, &live).await;
        drop(live);
        gone(&c, "/bulk1/live").await;
    });
    cluster.kill(0);
    let zk_data = data_dir(&cluster);
    let version2 = zk_data.join("version-2");
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(&version2)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("snapshot."))
        .collect();
    snaps.sort_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap());
    assert!(
        snaps.len() >= 2
            && snaps
                .iter()
                .all(|p| p.extension().is_some_and(|e| e == "gz")),
        "gzip snapshots expected: {snaps:?}"
    );
    // `snapshot dump` reads ZooKeeper's compressed snapshot. ZooKeeper
    // writes snapshots on a thread of their own, so the kill above can
    // cut the newest one short; ZooKeeper then loads the one before it.
    // Only the newest may be cut, the dump must say where, and the one
    // before it must read whole.
    let dump = |snap: &Path| {
        ringkeeper(&[
            "snapshot".as_ref(),
            "dump".as_ref(),
            snap.as_os_str(),
            "--json".as_ref(),
        ])
    };
    let newest = snaps.last().unwrap();
    let (mut ok, mut json) = dump(newest);
    if !ok {
        assert!(
            json.contains(&*newest.to_string_lossy()) && json.contains("at byte "),
            "a failed dump names the file and the offset: {json}"
        );
        println!("the kill cut {} short: {json}", newest.display());
        (ok, json) = dump(&snaps[snaps.len() - 2]);
    }
    assert!(ok, "{json}");
    let mut lines = json.lines();
    let head = lines.next().unwrap();
    let nodes: usize = head
        .split("\"nodes\":")
        .nth(1)
        .and_then(|n| n.trim_end_matches('}').parse().ok())
        .unwrap_or_else(|| panic!("no node count in {head}"));
    let node_lines: Vec<&str> = lines.collect();
    assert_eq!(node_lines.len(), nodes, "{head}");
    assert!(nodes > 10, "{head}");
    assert!(
        node_lines.iter().all(|l| l.starts_with("{\"path\":\"/")),
        "{node_lines:?}"
    );
    let work = tempfile::tempdir().unwrap();
    let whole = work.path().join("whole");
    let (ok, report) = import(&zk_data, &whole);
    assert!(ok, "{report}");

    // The newest snapshot cut short: the one before it, and more log.
    let newest = snaps.last().unwrap();
    let bytes = std::fs::read(newest).unwrap();
    std::fs::write(newest, &bytes[..bytes.len() / 2]).unwrap();
    let fallback = work.path().join("fallback");
    let (ok, report) = import(&zk_data, &fallback);
    assert!(ok, "{report}");
    assert!(
        report.contains("skipped damaged snapshot") && report.contains(&*newest.to_string_lossy()),
        "{report}"
    );
    cluster.restart(0);
    cluster.wait_for_leader(READY);
    let reference = rt.block_on(walk(&addr));
    for dir in [&whole, &fallback] {
        let (server, port) = serve(Flavor::Ringkeeper, dir, &dir.with_extension("home"));
        let got = rt.block_on(walk(&format!("127.0.0.1:{port}")));
        assert_same(&format!("{}", dir.display()), &reference, &got);
        drop(server);
    }
    cluster.kill(0);

    // One flipped byte inside the first record of a log the replay reads.
    let (ok, report) = import(&zk_data, &work.path().join("again"));
    assert!(ok, "{report}");
    let log = PathBuf::from(
        report
            .lines()
            .find_map(|l| l.strip_prefix("log: "))
            .unwrap_or_else(|| panic!("no log replayed: {report}")),
    );
    let mut bytes = std::fs::read(&log).unwrap();
    bytes[16 + 12 + 40] ^= 0x20;
    std::fs::write(&log, &bytes).unwrap();
    let broken = work.path().join("broken");
    let (ok, report) = import(&zk_data, &broken);
    assert!(!ok, "a damaged log imported: {report}");
    assert!(
        report.contains(&*log.to_string_lossy()) && report.contains("at byte 16:"),
        "the error names the file and the record's offset: {report}"
    );
    assert!(!broken.exists(), "output left behind");
    assert_eq!(
        std::fs::read_dir(work.path())
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains("partial"))
            .count(),
        0,
        "a staging directory left behind"
    );
}
