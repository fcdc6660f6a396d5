//! Differential tests against Apache ZooKeeper 3.8.
//!
//! Side A is always Apache ZooKeeper (the reference). Side B is ringkeeper,
//! or a second Apache ZooKeeper with `RK_DIFF_SELF=1` (which validates the
//! normalization: ZooKeeper against ZooKeeper must always pass).
//!
//! Environment:
//! * `RK_DIFF_SELF=1`   side B is Apache ZooKeeper too.
//! * `RK_DIFF_SEED=n`   seed of the random sequence (printed on every run).
//! * `RK_DIFF_OPS=n`    length of the random sequence (default 10000).
//! * `RK_DIFF_CASE=s`   run only the scripted cases whose name contains s.
//! * `RK_DIFF_DUMP=1`   print the reference transcripts.
//! * `RK_DIFF_STRICT_ZXID=1`  also compare reply-header zxids by order (this
//!   requires ZooKeeper's zxid consumption: failed writes, createSession and
//!   closeSession each take one).
//! * `RK_DIFF_STRICT_MULTI=1`  also compare the result type and stat of creates
//!   inside a multi (ZooKeeper 3.8.0 answers most of them as plain `create`,
//!   without a stat, ZOOKEEPER-4026).
//! * `RK_DIFF_LAX_EVENTS=1`   random sequence: compare each session's event
//!   sequence, not the position of each event between replies.
//!
//! Transcript conventions: `z<n>` is the n-th distinct zxid seen (0 stays 0),
//! session ids are replaced by the session's role name (A, W, S0, S1g2...),
//! `eo=CONTAINER`/`TTL(..)` are the special ephemeralOwner encodings, and a
//! time is shown only when it is inconsistent (`(t-differs-for-same-zxid)`,
//! `(t<earlier-zxid)`, `(t-implausible)`, ...). Lines starting with `!` or
//! containing ` !` are transport failures or violated invariants.

mod common;
mod diff;

use std::time::{Duration, Instant};

use diff::ops::Runner;
use diff::{cases, diff_report, dump_enabled, other_flavor, random, side_name, start_pair};

#[test]
fn scripted_cases() {
    let (a, b) = start_pair(diff::DIFF_CFG);
    eprintln!(
        "scripted cases: zookeeper on {} vs {} on {}",
        a.addr(),
        side_name(other_flavor()),
        b.addr()
    );
    let t0 = Instant::now();
    let results = diff::diff_cases(&a, &b, cases::CASES);
    eprintln!("scripted cases ran in {:?}", t0.elapsed());
    results.assert_all_identical("scripted");
}

fn seed() -> u64 {
    match std::env::var("RK_DIFF_SEED") {
        Ok(s) => s.trim().parse().expect("RK_DIFF_SEED must be a u64"),
        Err(_) => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            t.as_nanos() as u64 ^ (std::process::id() as u64) << 32
        }
    }
}

/// Splits a random-sequence transcript into op lines and, per session,
/// event lines without their op index (for RK_DIFF_LAX_EVENTS).
fn split_events(t: &[String]) -> (Vec<String>, Vec<String>) {
    let mut ops = Vec::new();
    let mut evs: Vec<(String, String)> = Vec::new();
    for l in t {
        let rest = l.split_once(' ').map(|x| x.1).unwrap_or(l);
        if let Some(e) = rest.strip_prefix("EVENT ") {
            let who = e.split(':').next().unwrap_or("").to_string();
            evs.push((who, rest.to_string()));
        } else {
            ops.push(l.clone());
        }
    }
    // stable sort by session keeps each session's order
    evs.sort_by(|x, y| x.0.cmp(&y.0));
    (ops, evs.into_iter().map(|x| x.1).collect())
}

#[test]
fn random_sequence() {
    let seed = seed();
    let nops: usize = std::env::var("RK_DIFF_OPS")
        .ok()
        .map(|s| s.parse().expect("RK_DIFF_OPS"))
        .unwrap_or(10_000);
    eprintln!("random sequence: seed {seed} ({nops} ops); rerun with RK_DIFF_SEED={seed}");
    let (a, b) = start_pair(diff::DIFF_CFG);
    let t0 = Instant::now();
    // ZooKeeper reaps empty containers 60 s after start at the earliest; the
    // sequence must end before that to stay deterministic.
    let deadline = t0 + Duration::from_secs(50);
    let (addr_a, addr_b) = (a.addr(), b.addr());
    let ta = std::thread::spawn(move || random::run_side(&addr_a, seed, nops, deadline));
    let tb = std::thread::spawn(move || random::run_side(&addr_b, seed, nops, deadline));
    let ra = ta.join().expect("reference side panicked");
    let rb = tb.join().expect("other side panicked");
    let elapsed = t0.elapsed();
    eprintln!(
        "random sequence: {} / {} transcript lines in {elapsed:?}",
        ra.len(),
        rb.len()
    );
    let oks = ra.iter().filter(|l| l.contains("=> OK")).count();
    eprintln!(
        "random sequence: {oks} OK replies, {} non-OK replies on the reference",
        ra.iter()
            .filter(|l| l.contains(" => ") && !l.contains("=> OK"))
            .count()
    );
    if dump_enabled() {
        for l in &ra {
            eprintln!("{l}");
        }
    }
    let lax = std::env::var("RK_DIFF_LAX_EVENTS").is_ok_and(|v| v == "1");
    let report = if lax {
        let (oa, ea) = split_events(&ra);
        let (ob, eb) = split_events(&rb);
        diff_report("random sequence (op replies)", &oa, &ob, 12)
            .or_else(|| diff_report("random sequence (per-session events)", &ea, &eb, 12))
    } else {
        diff_report("random sequence", &ra, &rb, 12)
    };
    if let Some(rep) = report {
        let dir = std::env::temp_dir();
        let fa = dir.join(format!("rk-diff-{seed}-zookeeper.txt"));
        let fb = dir.join(format!("rk-diff-{seed}-{}.txt", side_name(other_flavor())));
        let _ = std::fs::write(&fa, ra.join("\n"));
        let _ = std::fs::write(&fb, rb.join("\n"));
        panic!(
            "seed {seed}: {rep}\nfull transcripts: {} and {}",
            fa.display(),
            fb.display()
        );
    }
    assert!(
        !ra.iter().any(|l| l.contains("DEADLINE REACHED")),
        "random sequence did not finish within the deadline"
    );
    assert!(ra.len() >= nops, "transcript shorter than the op count");
    drop((a, b));
}

// ------------------------------------------------------------------------
// Container and TTL reaping: ZooKeeper checks every 60 s (first check 60 s
// after start) and deletes empty containers that once had a child and empty
// TTL nodes whose mtime + ttl has passed. This test waits for the reference
// to reap, then gives the other side a little more time, and compares.

mod reaping {
    use super::diff::ops::{self, mode, Op, Runner};
    use super::diff::wire::{op, Acl};

    fn ttl(path: &str, ttl: i64) -> Op {
        Op::Create {
            opcode: op::CREATE_TTL,
            path: path.into(),
            data: b"t".to_vec(),
            acl: Acl::open(),
            flags: mode::PERSISTENT_WITH_TTL,
            ttl,
        }
    }

    pub const WATCHED: &[&str] = &[
        "/reap/used",
        "/reap/never-used",
        "/reap/with-child",
        "/reap/ttl-short",
        "/reap/ttl-long",
        "/reap/ttl-with-child",
        "/reap/plain",
    ];

    pub fn setup(r: &mut Runner) {
        r.open("A");
        r.open("W");
        r.run("A", &ops::create("/reap", "", mode::PERSISTENT));
        r.run("A", &ops::container("/reap/used"));
        r.run("A", &ops::create("/reap/used/c", "", mode::PERSISTENT));
        r.run("A", &ops::delete("/reap/used/c", -1));
        r.run("A", &ops::container("/reap/never-used"));
        r.run("A", &ops::container("/reap/with-child"));
        r.run(
            "A",
            &ops::create("/reap/with-child/c", "", mode::PERSISTENT),
        );
        r.run("A", &ttl("/reap/ttl-short", 1000));
        r.run("A", &ttl("/reap/ttl-long", 3_600_000));
        r.run("A", &ttl("/reap/ttl-with-child", 1000));
        r.run(
            "A",
            &ops::create("/reap/ttl-with-child/c", "", mode::PERSISTENT),
        );
        r.run("A", &ops::create("/reap/plain", "", mode::PERSISTENT));
        r.run(
            "W",
            &Op::AddWatch {
                path: "/reap".into(),
                mode: 1,
            },
        );
        for p in WATCHED {
            r.run("W", &ops::exists(p, true));
        }
    }

    /// Whether the nodes the reference reaps are gone (not recorded).
    pub fn reaped(r: &mut Runner) -> bool {
        let mut probe = Runner::new(&r.addr);
        probe.open("P");
        let a = probe.run("P", &ops::exists("/reap/used", false));
        let b = probe.run("P", &ops::exists("/reap/ttl-short", false));
        probe.close_all();
        a.err == Some(-101) && b.err == Some(-101)
    }

    pub fn finish(r: &mut Runner) {
        r.unordered_next("W");
        r.drain("W");
        r.run("A", &ops::children2("/reap", false));
        for p in WATCHED {
            r.run("A", &ops::exists(p, false));
        }
        r.close_all();
    }
}

#[test]
fn container_and_ttl_reaping() {
    // A short sweep interval on both sides (ZooKeeper reads it as a system
    // property, which the harness passes on). Setup must finish before the
    // first sweep, 10 s after each server started: ZooKeeper's clock starts
    // with its JVM, seconds before it answers, and on a loaded CI machine
    // (5 s) its first sweep once fell inside the setup.
    let cfg = format!("{}znode.container.checkIntervalMs=10000\n", diff::DIFF_CFG);
    let (a, b) = start_pair(&cfg);
    let started = Instant::now();
    let mut ra = Runner::new(&a.addr());
    let mut rb = Runner::new(&b.addr());
    reaping::setup(&mut ra);
    reaping::setup(&mut rb);
    // The reference reaps at its first or second sweep.
    let limit = Duration::from_secs(45);
    let mut reference_at = None;
    while started.elapsed() < limit {
        std::thread::sleep(Duration::from_secs(1));
        ra.keepalive();
        rb.keepalive();
        if reaping::reaped(&mut ra) {
            reference_at = Some(started.elapsed());
            break;
        }
    }
    let reference_at =
        reference_at.expect("the reference ZooKeeper did not reap within 40 s of its start");
    eprintln!("reference reaped {reference_at:?} after start");
    let grace = Instant::now();
    let mut other_at = None;
    while grace.elapsed() < Duration::from_secs(15) {
        if reaping::reaped(&mut rb) {
            other_at = Some(started.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
        ra.keepalive();
        rb.keepalive();
    }
    eprintln!(
        "{} reaped: {:?}",
        side_name(other_flavor()),
        other_at.map(|t| format!("{t:?} after start"))
    );
    reaping::finish(&mut ra);
    reaping::finish(&mut rb);
    if dump_enabled() {
        for l in &ra.out {
            eprintln!("{l}");
        }
    }
    if let Some(rep) = diff_report("container/TTL reaping", &ra.out, &rb.out, 8) {
        panic!("{rep}");
    }
}

// ------------------------------------------------------------------------
// The same kind of comparison through the zookeeper-client crate, to check
// that a real client library sees the same thing on both servers.

mod via_crate {
    use std::time::Duration;

    use zookeeper_client as zk;

    use super::diff::norm::Norm;
    use super::diff::wire;

    fn stat(n: &mut Norm, s: &zk::Stat) -> String {
        n.stat(&wire::Stat {
            czxid: s.czxid,
            mzxid: s.mzxid,
            ctime: s.ctime,
            mtime: s.mtime,
            version: s.version,
            cversion: s.cversion,
            aversion: s.aversion,
            ephemeral_owner: s.ephemeral_owner,
            data_length: s.data_length,
            num_children: s.num_children,
            pzxid: s.pzxid,
        })
    }

    async fn t<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(10), f)
            .await
            .expect("client op timed out")
    }

    fn ev(n: &mut Norm, e: &zk::WatchedEvent) -> String {
        format!(
            "{:?} {:?} {:?} zxid={}",
            e.event_type,
            e.session_state,
            e.path,
            n.event_zxid(e.zxid)
        )
    }

    pub async fn script(addr: String) -> Vec<String> {
        let mut n = Norm::new();
        let mut out = Vec::new();
        let connect = || {
            zk::Client::connector()
                .with_session_timeout(Duration::from_secs(20))
                .with_fail_eagerly()
                .connect(&addr)
        };
        let a = t(connect()).await.expect("connect A");
        let w = t(connect()).await.expect("connect W");
        n.register_session(a.session_id().0, "A");
        n.register_session(w.session_id().0, "W");
        let open = zk::Acls::anyone_all();
        let p = zk::CreateMode::Persistent.with_acls(open);
        let e = zk::CreateMode::Ephemeral.with_acls(open);
        let ps = zk::CreateMode::PersistentSequential.with_acls(open);
        let es = zk::CreateMode::EphemeralSequential.with_acls(open);
        let c = zk::CreateMode::Container.with_acls(open);

        macro_rules! rec {
            ($label:expr, $v:expr) => {{
                let s = $v;
                out.push(format!("{}: {}", $label, s));
            }};
        }
        // A third session only holds a persistent recursive watch.
        let rw = t(connect()).await.expect("connect R");
        n.register_session(rw.session_id().0, "R");
        let mut recursive = t(rw.watch("/crate", zk::AddWatchMode::PersistentRecursive))
            .await
            .expect("watch");
        let (_, root_watch) = t(w.check_and_watch_stat("/crate")).await.unwrap();
        match t(a.create("/crate", b"root", &p)).await {
            Ok((s, seq)) => rec!(
                "create /crate",
                format!("{} seq={}", stat(&mut n, &s), seq.into_i64())
            ),
            Err(err) => rec!("create /crate", format!("Err({err:?})")),
        }
        rec!("root watch", ev(&mut n, &t(root_watch.changed()).await));
        for (path, mode) in [("/crate/s-", &ps), ("/crate/s-", &ps), ("/crate/es-", &es)] {
            match t(a.create(path, b"", mode)).await {
                Ok((s, seq)) => rec!(
                    format!("create {path}"),
                    format!("{} seq={seq}", stat(&mut n, &s))
                ),
                Err(err) => rec!(format!("create {path}"), format!("Err({err:?})")),
            }
        }
        for (path, mode) in [("/crate/e", &e), ("/crate/c", &c), ("/crate/e", &e)] {
            let r = t(a.create(path, b"x", mode)).await;
            rec!(
                format!("create {path}"),
                match r {
                    Ok((s, _)) => stat(&mut n, &s),
                    Err(err) => format!("Err({err:?})"),
                }
            );
        }
        rec!(
            "create /crate/e/x",
            format!("{:?}", t(a.create("/crate/e/x", b"", &p)).await.err())
        );
        rec!(
            "create /nope/x",
            format!("{:?}", t(a.create("/nope/x", b"", &p)).await.err())
        );
        rec!(
            "create bad path",
            format!("{:?}", t(a.create("/crate/", b"", &p)).await.err())
        );
        rec!(
            "delete /crate",
            format!("{:?}", t(a.delete("/crate", None)).await)
        );
        rec!(
            "delete bad version",
            format!("{:?}", t(a.delete("/crate/e", Some(3))).await)
        );
        rec!(
            "check_stat missing",
            format!("{:?}", t(a.check_stat("/crate/zz")).await)
        );
        match t(a.get_data("/crate")).await {
            Ok((d, s)) => rec!(
                "get_data /crate",
                format!("{:?} {}", String::from_utf8_lossy(&d), stat(&mut n, &s))
            ),
            Err(err) => rec!("get_data /crate", format!("Err({err:?})")),
        }
        rec!(
            "set_data bad version",
            format!("{:?}", t(a.set_data("/crate", b"v", Some(7))).await.err())
        );
        let s = t(a.set_data("/crate", b"v1", Some(0))).await.unwrap();
        rec!("set_data", stat(&mut n, &s));
        let mut kids = t(a.list_children("/crate")).await.unwrap();
        kids.sort();
        rec!("list_children", format!("{kids:?}"));
        let (mut kids, s) = t(a.get_children("/crate")).await.unwrap();
        kids.sort();
        rec!("get_children", format!("{kids:?} {}", stat(&mut n, &s)));
        rec!(
            "count_descendants",
            format!("{:?}", t(a.count_descendants_number("/crate")).await)
        );
        let mut eph = t(a.list_ephemerals("/")).await.unwrap();
        eph.sort();
        rec!("list_ephemerals A", format!("{eph:?}"));
        rec!(
            "list_ephemerals W",
            format!("{:?}", t(w.list_ephemerals("/")).await)
        );
        let (acl, s) = t(a.get_acl("/crate")).await.unwrap();
        rec!("get_acl", format!("{acl:?} {}", stat(&mut n, &s)));
        rec!("sync", format!("{:?}", t(a.sync("/crate")).await));
        rec!(
            "list_auth_users",
            format!("{:?}", t(a.list_auth_users()).await)
        );
        match t(a.get_config()).await {
            Ok((d, s)) => rec!(
                "get_config",
                format!("{:?} {}", String::from_utf8_lossy(&d), stat(&mut n, &s))
            ),
            Err(err) => rec!("get_config", format!("Err({err:?})")),
        }

        // One-shot watches through the crate.
        let (_, _, data_watch) = t(w.get_and_watch_data("/crate")).await.unwrap();
        let (_, child_watch) = t(w.list_and_watch_children("/crate")).await.unwrap();
        let (_, exist_watch) = t(w.check_and_watch_stat("/crate/new")).await.unwrap();
        t(a.set_data("/crate", b"v2", None)).await.unwrap();
        t(a.create("/crate/new", b"", &p)).await.unwrap();
        rec!("data watch", ev(&mut n, &t(data_watch.changed()).await));
        rec!("child watch", ev(&mut n, &t(child_watch.changed()).await));
        rec!("exist watch", ev(&mut n, &t(exist_watch.changed()).await));

        // Multi through the crate: success, then failure surfaces as
        // OperationFailed { index, source } of the first failing op.
        let mut mw = a.new_multi_writer();
        mw.add_create("/crate/m", b"m", &p).unwrap();
        mw.add_set_data("/crate/m", b"m2", Some(0)).unwrap();
        mw.add_check_version("/crate/m", 1).unwrap();
        mw.add_create("/crate/ms-", b"", &ps).unwrap();
        mw.add_delete("/crate/new", None).unwrap();
        match t(mw.commit()).await {
            Ok(results) => {
                for (i, r) in results.iter().enumerate() {
                    let s = match r {
                        // The stat of a create inside a multi is not compared
                        // (ZooKeeper 3.8.0 returns none: the crate reports an
                        // invalid stat; see RK_DIFF_STRICT_MULTI).
                        zk::MultiWriteResult::Create { path, .. } => format!("Create {path}"),
                        zk::MultiWriteResult::SetData { stat: st } => {
                            format!("SetData {}", stat(&mut n, st))
                        }
                        other => format!("{other:?}"),
                    };
                    rec!(format!("multi ok [{i}]"), s);
                }
            }
            Err(err) => rec!("multi ok", format!("Err({err:?})")),
        }
        let mut mw = a.new_multi_writer();
        mw.add_create("/crate/m2", b"", &p).unwrap();
        mw.add_check_version("/crate/m", 5).unwrap();
        mw.add_delete("/crate/missing", None).unwrap();
        rec!("multi fail", format!("{:?}", t(mw.commit()).await));
        let mut cw = a.new_check_writer("/crate/m", Some(9)).unwrap();
        cw.add_create("/crate/m3", b"", &p).unwrap();
        rec!("check writer fail", format!("{:?}", t(cw.commit()).await));
        let mut mr = a.new_multi_reader();
        mr.add_get_data("/crate/m").unwrap();
        mr.add_get_children("/crate/missing").unwrap();
        mr.add_get_children("/crate/c").unwrap();
        match t(mr.commit()).await {
            Ok(results) => {
                for (i, r) in results.iter().enumerate() {
                    let s = match r {
                        zk::MultiReadResult::Data { data, stat: st } => {
                            format!(
                                "Data {:?} {}",
                                String::from_utf8_lossy(data),
                                stat(&mut n, st)
                            )
                        }
                        other => format!("{other:?}"),
                    };
                    rec!(format!("multi read [{i}]"), s);
                }
            }
            Err(err) => rec!("multi read", format!("Err({err:?})")),
        }

        // A lock recipe (ephemeral sequential + children + data watch).
        match t(a.lock(
            zk::LockPrefix::new_shared("/crate/lock-").unwrap(),
            b"",
            open,
        ))
        .await
        {
            Ok(lock) => {
                rec!("lock", lock.lock_path().to_string());
                drop(lock);
            }
            Err(err) => rec!("lock", format!("Err({err:?})")),
        }

        // Events of the recursive watch so far, in order (except those of
        // the lock recipe's background deletion, whose timing is free).
        t(rw.sync("/")).await.unwrap();
        let mut events = Vec::new();
        while let Ok(e) =
            tokio::time::timeout(Duration::from_millis(300), recursive.changed()).await
        {
            events.push(e);
        }
        for e in events.iter().filter(|e| !e.path.contains("lock-")) {
            rec!("recursive", ev(&mut n, e));
        }

        // Ending session A deletes its ephemerals.
        drop(a);
        let mut kids = Vec::new();
        for _ in 0..50 {
            kids = t(w.list_children("/crate")).await.unwrap();
            if !kids.iter().any(|k| k == "e" || k.starts_with("es-")) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        kids.sort();
        // The lock node is deleted in the background; ignore it here.
        kids.retain(|k| !k.starts_with("lock-"));
        rec!("children after A closed", format!("{kids:?}"));

        // Events of the session close: ephemeral deletions come in an
        // unspecified order.
        let mut events = Vec::new();
        while let Ok(e) =
            tokio::time::timeout(Duration::from_millis(500), recursive.changed()).await
        {
            events.push(e);
        }
        let mut lines: Vec<String> = events
            .iter()
            .filter(|e| !e.path.contains("lock-"))
            .map(|e| ev(&mut n, e))
            .collect();
        lines.sort();
        for l in lines {
            rec!("recursive after close", l);
        }
        drop(w);
        drop(rw);
        out
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_client_crate() {
    let (a, b) = tokio::task::spawn_blocking(|| start_pair(diff::DIFF_CFG))
        .await
        .unwrap();
    let (ra, rb) = tokio::join!(via_crate::script(a.addr()), via_crate::script(b.addr()));
    if dump_enabled() {
        for l in &ra {
            eprintln!("{l}");
        }
    }
    if let Some(rep) = diff_report("zookeeper-client crate", &ra, &rb, 6) {
        panic!("{rep}");
    }
}
