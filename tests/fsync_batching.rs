//! Group commit's settings, observed on a real server through its
//! Prometheus counters (`ringkeeper_core_fsyncs_total`, `_txns_total`,
//! `_log_bytes_total`, and the gauges of the last batch):
//!
//! - `ringkeeper.fsyncBatchTxnsMax`: no fdatasync covers more txns;
//! - `ringkeeper.fsyncBatchBytesMax`: no fdatasync covers more log bytes
//!   (a batch stops growing once it reaches the bound, so it may pass it
//!   by the one record that reached it);
//! - `ringkeeper.fsyncDelayUs`: the server waits that long before starting
//!   a sync, "to let more writes join" (README): a write that arrives
//!   during the wait is covered by the same fdatasync. (This test orders
//!   two writes with a sleep of a quarter of the delay; see there.)
//!
//! Batches only grow past one txn when writes arrive while a sync is in
//! flight, which on a fast disk is a matter of timing. So the bound tests
//! make it certain instead: the dataDir is on a small ext4 filesystem of
//! their own (an image on a loop device), the filesystem is frozen
//! (`fsfreeze`) so the first log write cannot complete, 600 pipelined
//! creates are sent and seen outstanding by the server, and then the
//! filesystem is thawed. With the default bounds the 600 then take a few
//! syncs (checked: fewer than the bound would allow, so the setup does make
//! large batches); with a bound they take at least 600 / bound.
//!
//! Needs root, mkfs.ext4 (e2fsprogs), fsfreeze (util-linux) and a loop
//! device, as tests/disk_full.rs; without them the tests fail, saying so.
//! The filesystem is thawed and unmounted, and the server killed, when a
//! test ends, also on a panic. No timing assertions: waits are bounded polls
//! for a state.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::prom::{scrape, scrape_until, Exposition};
use common::raw::{create_body, read_frame, request, Conn};
use common::{free_port, start_ringkeeper, Server};

const PROMETHEUS: &str = "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider";
const OP_CREATE: i32 = 1;
/// Creates held back behind the frozen filesystem.
const WRITES: usize = 600;
/// The ext4 image's size, and log segments (with their preallocation) of
/// 16 MiB that fit it.
const IMAGE_BYTES: u64 = 128 << 20;
const SEGMENT_CFG: &str = "preAllocSize=16384\nringkeeper.segmentBytesMax=16777216\n";
/// Bound on each command, and on each wait for a state.
const CMD_LIMIT: Duration = Duration::from_secs(30);
const WAIT_LIMIT: Duration = Duration::from_secs(60);
/// What a machine needs for these tests, said when a mount fails.
const NEEDS: &str = "these tests need root (CAP_SYS_ADMIN, to mount and freeze), mkfs.ext4 \
     (Debian: e2fsprogs), fsfreeze (util-linux) and a free loop device (as root: `modprobe \
     loop`, then `losetup -f` prints one); scripts/test-all.sh sets these up";

/// Runs a command to completion (killing it after `CMD_LIMIT`); Err holds
/// its status and output.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let what = format!("{program} {}", args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return Err(format!("{what}: {status}: {}", err.trim()));
            }
            Ok(None) if start.elapsed() > CMD_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what}: still running after {CMD_LIMIT:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
}

/// An ext4 image mounted on a loop device in a temporary directory;
/// thawed, unmounted (lazily if busy) and removed when dropped.
struct Ext4 {
    root: tempfile::TempDir,
    mounted: bool,
    frozen: bool,
}

impl Ext4 {
    fn mount() -> Ext4 {
        let root = tempfile::Builder::new()
            .prefix("rk-fsync-")
            .tempdir()
            .expect("a temp dir");
        let mut fs = Ext4 {
            root,
            mounted: false,
            frozen: false,
        };
        let (img, mnt) = (fs.path("fs.img"), fs.mnt());
        std::fs::create_dir(&mnt).expect("the mount point");
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(IMAGE_BYTES))
            .expect("the image file");
        let mounted = run("mkfs.ext4", &["-q", "-F", "-b", "4096", "-m", "0", s(&img)])
            .and_then(|()| run("mount", &["-o", "loop", s(&img), s(&mnt)]));
        if let Err(why) = mounted {
            panic!("cannot mount a small ext4 filesystem: {why}\n{NEEDS}");
        }
        fs.mounted = true;
        fs
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    fn mnt(&self) -> PathBuf {
        self.path("mnt")
    }

    /// From now on every write to the filesystem waits (FIFREEZE).
    fn freeze(&mut self) {
        run("fsfreeze", &["--freeze", s(&self.mnt())])
            .unwrap_or_else(|e| panic!("freezing the filesystem: {e}\n{NEEDS}"));
        self.frozen = true;
    }
}

/// The filesystem frozen for as long as it lives: dropped (a failed check
/// unwinding too) it thaws before the server is killed, whose threads would
/// otherwise stay blocked on the frozen filesystem and the test wait for
/// them for ever.
struct Frozen<'a>(&'a mut Ext4);

impl<'a> Frozen<'a> {
    fn new(fs: &'a mut Ext4) -> Frozen<'a> {
        fs.freeze();
        Frozen(fs)
    }
}

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        if let Err(e) = run("fsfreeze", &["--unfreeze", s(&self.0.mnt())]) {
            eprintln!("thawing the filesystem: {e}");
        }
        self.0.frozen = false;
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        let mnt = self.mnt();
        if self.frozen {
            if let Err(e) = run("fsfreeze", &["--unfreeze", s(&mnt)]) {
                eprintln!("{e}");
            }
        }
        if self.mounted {
            let start = Instant::now();
            // A killed server's io_uring lets go of its files moments later.
            while let Err(e) = run("umount", &[s(&mnt)]) {
                if start.elapsed() > Duration::from_secs(10) {
                    eprintln!("{e}; detaching it lazily");
                    let _ = run("umount", &["-l", s(&mnt)]);
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn s(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temp path")
}

/// A ringkeeper whose dataDir is on `fs`, with `extra` in its zoo.cfg and
/// its Prometheus endpoint on the returned port.
fn start_on(fs: &Ext4, extra: &str) -> (Server, u16) {
    let data = fs.mnt().join("data");
    std::fs::create_dir(&data).expect("the data dir");
    let mport = free_port();
    // The held-back writes all come from one connection: with several
    // shards its shard's share of the default globalOutstandingLimit
    // (1000 / shards) would stop reading it before they are all in.
    let server = start_ringkeeper(&format!(
        "dataDir={}\n{SEGMENT_CFG}metricsProvider.className={PROMETHEUS}\n\
         metricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={mport}\n\
         globalOutstandingLimit=10000\n{extra}",
        data.display()
    ));
    (server, mport)
}

/// The core's group-commit counters, and the last batch's gauges.
#[derive(Clone, Copy, Debug)]
struct Commits {
    fsyncs: f64,
    txns: f64,
    log_bytes: f64,
    last_batch_txns: f64,
    last_batch_bytes: f64,
}

impl Commits {
    fn of(e: &Exposition) -> Commits {
        Commits {
            fsyncs: e.value("ringkeeper_core_fsyncs_total"),
            txns: e.value("ringkeeper_core_txns_total"),
            log_bytes: e.value("ringkeeper_core_log_bytes_total"),
            last_batch_txns: e.value("ringkeeper_core_fsync_batch_txns"),
            last_batch_bytes: e.value("ringkeeper_core_fsync_batch_bytes"),
        }
    }

    /// The counters' growth since `before` (the gauges as they are now).
    fn since(self, before: Commits) -> Commits {
        Commits {
            fsyncs: self.fsyncs - before.fsyncs,
            txns: self.txns - before.txns,
            log_bytes: self.log_bytes - before.log_bytes,
            ..self
        }
    }
}

/// The counters once nothing is outstanding (the core notes that when its
/// loop comes round after the last batch).
fn settled(mport: u16) -> Commits {
    Commits::of(&scrape_until(
        mport,
        "nothing outstanding",
        WAIT_LIMIT,
        |e| e.value("ringkeeper_core_outstanding_txns") == 0.0,
    ))
}

fn mntr_value(server: &Server, key: &str) -> u64 {
    let mntr = server.four_letter("mntr");
    mntr.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}\t")))
        .unwrap_or_else(|| panic!("{key} in mntr: {mntr}"))
        .parse()
        .unwrap_or_else(|e| panic!("{key} in mntr: {e}"))
}

/// Reads replies for xids `first..first + n`, in order, each OK.
fn read_replies(s: &mut TcpStream, first: i32, n: usize, what: &str) {
    for xid in first..first + n as i32 {
        let f = read_frame(s).unwrap_or_else(|| panic!("{what}: connection closed at {xid}"));
        let got = i32::from_be_bytes(f[0..4].try_into().unwrap());
        let err = i32::from_be_bytes(f[12..16].try_into().unwrap());
        assert_eq!((got, err), (xid, 0), "{what}: reply (xid, err)");
    }
}

/// Waits until `done` holds, polling; panics after `WAIT_LIMIT`.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < WAIT_LIMIT, "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts a server with `extra` on a fresh filesystem, then: freezes the
/// filesystem, pipelines `WRITES` creates of `value_bytes` each, waits
/// until the server holds them all outstanding, thaws, reads every reply.
/// Returns what the core committed for them.
fn held_back_writes(extra: &str, value_bytes: usize) -> Commits {
    let mut fs = Ext4::mount();
    let (server, mport) = start_on(&fs, extra);
    let mut c = Conn::handshake(server.port, 30_000);
    c.s.set_read_timeout(Some(WAIT_LIMIT)).unwrap();
    let (r, _) = c.call(1, OP_CREATE, &create_body("/w", b"", 0));
    assert_eq!(r.err, 0, "create /w");
    let before = settled(mport);

    let frozen = Frozen::new(&mut fs);
    let value = vec![b'v'; value_bytes];
    let mut burst = Vec::new();
    for i in 0..WRITES {
        let body = create_body(&format!("/w/c{i:04}"), &value, 0);
        burst.extend_from_slice(&request(2 + i as i32, OP_CREATE, &body));
    }
    let mut writer = c.s.try_clone().unwrap();
    let sender = std::thread::spawn(move || writer.write_all(&burst));
    wait_for(&format!("{WRITES} requests outstanding"), || {
        mntr_value(&server, "zk_outstanding_requests") >= WRITES as u64
    });
    // Still none of them durable: the filesystem holds them back.
    let e = scrape(mport);
    assert_eq!(
        Commits::of(&e).txns,
        before.txns,
        "txns became durable on a frozen filesystem"
    );
    drop(frozen);
    sender.join().unwrap().expect("sending the creates");
    read_replies(&mut c.s, 2, WRITES, "the held-back creates");
    let after = scrape_until(mport, "every create durable", WAIT_LIMIT, |e| {
        Commits::of(e).txns >= before.txns + WRITES as f64
            && e.value("ringkeeper_core_outstanding_txns") == 0.0
    });
    let d = Commits::of(&after).since(before);
    eprintln!(
        "{extra:?}: {WRITES} creates of {value_bytes} bytes: {} fsyncs, {} txns, {} log bytes; \
         the last batch {} txns, {} bytes",
        d.fsyncs, d.txns, d.log_bytes, d.last_batch_txns, d.last_batch_bytes
    );
    assert_eq!(d.txns, WRITES as f64, "txns made durable");
    d
}

#[test]
fn fsync_batch_txns_max_bounds_the_txns_one_fsync_covers() {
    const MAX: usize = 10;
    let least = WRITES.div_ceil(MAX) as f64;
    // Without a bound of 10 the held-back creates go in big batches: fewer
    // syncs than a bound of 10 would need (else this test shows nothing).
    let free = held_back_writes("", 100);
    assert!(
        free.fsyncs < least,
        "with the default bound {WRITES} held-back creates took {} fsyncs: the setup does \
         not make batches of more than {MAX} txns",
        free.fsyncs
    );
    let bounded = held_back_writes(&format!("ringkeeper.fsyncBatchTxnsMax={MAX}\n"), 100);
    assert!(
        bounded.fsyncs >= least,
        "fsyncBatchTxnsMax={MAX}: {WRITES} txns in {} fsyncs, so some fsync covered more than \
         {MAX}",
        bounded.fsyncs
    );
    assert!(
        (1.0..=MAX as f64).contains(&bounded.last_batch_txns),
        "fsyncBatchTxnsMax={MAX}: the last batch held {} txns",
        bounded.last_batch_txns
    );
}

#[test]
fn fsync_batch_bytes_max_bounds_the_bytes_one_fsync_covers() {
    const MAX: usize = 16 << 10;
    const VALUE: usize = 1000;
    let free = held_back_writes("", VALUE);
    // Every record is the same size give or take a digit of its name.
    let record = (free.log_bytes / WRITES as f64).ceil() + 8.0;
    // A batch stops growing once it holds MAX bytes: at most MAX plus the
    // record that reached it.
    let least = (free.log_bytes / (MAX as f64 + record)).ceil();
    assert!(
        free.fsyncs < least,
        "with the default bound {WRITES} held-back creates ({} log bytes) took {} fsyncs: the \
         setup does not make batches of more than {MAX} bytes",
        free.log_bytes,
        free.fsyncs
    );
    let bounded = held_back_writes(&format!("ringkeeper.fsyncBatchBytesMax={MAX}\n"), VALUE);
    assert_eq!(
        bounded.log_bytes, free.log_bytes,
        "the same creates, the same log bytes"
    );
    assert!(
        bounded.fsyncs >= least,
        "fsyncBatchBytesMax={MAX}: {} log bytes of {record}-byte records in {} fsyncs, so some \
         fsync covered more than {MAX} bytes and the record that reached it",
        bounded.log_bytes,
        bounded.fsyncs
    );
    assert!(
        bounded.last_batch_bytes > 0.0 && bounded.last_batch_bytes <= MAX as f64 + record,
        "fsyncBatchBytesMax={MAX}: the last batch held {} bytes",
        bounded.last_batch_bytes
    );
}

/// fsyncDelayUs: a write that arrives while the server waits to start a
/// sync joins that sync (README: "wait before starting a sync, to let more
/// writes join"). One create is sent; once the server holds it, and a
/// quarter of the delay later (so the core has taken it into its batch and
/// is waiting), a second create on another session; one fdatasync must
/// cover both. The second create arrives with three quarters of the delay
/// to spare; were it late, the two would rightly take two syncs.
#[test]
fn fsync_delay_lets_a_write_that_arrives_during_it_join_the_sync() {
    const DELAY: Duration = Duration::from_secs(4);
    let mport = free_port();
    let server = start_ringkeeper(&format!(
        "ringkeeper.fsyncDelayUs={}\nmetricsProvider.className={PROMETHEUS}\n\
         metricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={mport}\n",
        DELAY.as_micros()
    ));
    // Each createSession is a txn, and waits the delay too.
    let mut a = Conn::handshake(server.port, 30_000);
    let mut b = Conn::handshake(server.port, 30_000);
    for c in [&mut a, &mut b] {
        c.s.set_read_timeout(Some(WAIT_LIMIT)).unwrap();
    }
    let before = settled(mport);

    a.send(1, OP_CREATE, &create_body("/a", b"a", 0));
    wait_for("the first create outstanding", || {
        mntr_value(&server, "zk_outstanding_requests") >= 1
    });
    std::thread::sleep(DELAY / 4);
    b.send(1, OP_CREATE, &create_body("/b", b"b", 0));
    read_replies(&mut a.s, 1, 1, "create /a");
    read_replies(&mut b.s, 1, 1, "create /b");
    let after = scrape_until(mport, "both creates durable", WAIT_LIMIT, |e| {
        Commits::of(e).txns >= before.txns + 2.0
            && e.value("ringkeeper_core_outstanding_txns") == 0.0
    });
    let d = Commits::of(&after).since(before);
    assert_eq!(d.txns, 2.0, "txns made durable");
    assert_eq!(
        (d.fsyncs, d.last_batch_txns),
        (1.0, 2.0),
        "fsyncDelayUs={}: a create that arrived while the server waited to sync the first \
         did not join that sync (fsyncs, txns in the last batch)",
        DELAY.as_micros()
    );
}
