//! A full disk or a failing log device, end to end (the durability
//! requirement): "A full disk or failed fsync stops accepting writes with a
//! clear error to clients and in the log, never acknowledges a write that is
//! not durable, and keeps serving reads."
//!
//! Each test mounts a small filesystem of its own (ext4 in a 24 MiB image on
//! a loop device), puts a ringkeeper's dataDir on it with 1 MiB log segments, and has one real
//! client (`zookeeper-client`) write 8 KiB values one at a time, recording
//! every write the server acknowledged, until a write fails:
//!
//! - disk full: a ballast file leaves 3 MiB free, so a segment roll (or the
//!   growth of a segment) soon meets ENOSPC;
//! - I/O error: after 200 acknowledged writes the ext4 filesystem is shut
//!   down (EXT4_IOC_SHUTDOWN, without flushing its journal: what is not on
//!   the device by then is lost, as in a power cut), so the next log write
//!   or sync fails with EIO.
//!
//! Then, on the same session: the failing write and every write after it
//! (however small) answer SYSTEMERROR (-1); reads (getData, getChildren,
//! exists) answer and show exactly the acknowledged writes, none of the
//! failed ones; a new session is refused unless it asks to be read-only
//! (then it reads, as in ZooKeeper's read-only mode; tests/
//! log_failure_health.rs checks that mode); the server keeps running and its
//! log says "txn log failed" with the OS error. Finally the server is killed
//! (SIGKILL), room is made (ballast deleted, or the shut-down filesystem
//! unmounted and mounted again, replaying its journal), ringkeeper restarts
//! on the same data, and every acknowledged write is there with its value,
//! none of the writes refused after the failure is, and writes work again.
//!
//! Each runs in both log write modes (`ringkeeper.logWrite=direct`, the
//! default O_DIRECT|O_DSYNC, and `buffered`, write + fdatasync). Mounting
//! needs root (CAP_SYS_ADMIN), `mkfs.ext4` (Debian: e2fsprogs) and a free
//! loop device; where the filesystem cannot be mounted the test fails,
//! saying what is missing (`scripts/test-all.sh` provides all three). There
//! is no fallback to another filesystem: only ext4 on a block device gives
//! both ENOSPC and EIO, and takes O_DIRECT as a disk does. Every filesystem
//! is unmounted when its test ends, also on a panic.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::future::Future;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::restart::Proc;
use common::{start_ringkeeper, Server};
use zk::{Acls, Client, CreateMode};
use zookeeper_client as zk;

/// ZooKeeper's SYSTEMERROR (-1): the client library has no name for it.
const SYSTEM_ERROR: zk::Error = zk::Error::UnexpectedErrorCode(-1);
/// Size of each value written.
const VALUE_BYTES: usize = 8 << 10;
/// The ext4 image's size.
const IMAGE_BYTES: u64 = 24 << 20;
/// What the ballast leaves free in the disk-full tests.
const LEFT_FREE_BYTES: u64 = 3 << 20;
/// Log segments (and their preallocation) of 1 MiB.
const SEGMENT_CFG: &str = "preAllocSize=1024\nringkeeper.segmentBytesMax=1048576\n";
/// In the I/O error tests, the filesystem is shut down before this write.
const SHUTDOWN_BEFORE_OP: usize = 201;
/// Bounds on the write loop: operations and time.
const MAX_OPS: usize = 5000;
const FILL_LIMIT: Duration = Duration::from_secs(60);
/// Bound on any one client call, on each client phase, and on each command.
const OP_LIMIT: Duration = Duration::from_secs(10);
const PHASE_LIMIT: Duration = Duration::from_secs(120);
const CMD_LIMIT: Duration = Duration::from_secs(30);
/// How long a busy mount may stay busy before the test gives up on it.
const UMOUNT_PATIENCE: Duration = Duration::from_secs(10);
/// What a machine needs for these tests, said when a mount fails.
const NEEDS: &str = "these tests need root (CAP_SYS_ADMIN, to mount), mkfs.ext4 \
     (Debian: apt-get install e2fsprogs) and a free loop device (as root: `modprobe loop`, \
     then `losetup -f` prints one; in a container, run it privileged or pass \
     /dev/loop-control and /dev/loop*); scripts/test-all.sh sets these up";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// The filesystem fills up.
    DiskFull,
    /// The filesystem is shut down: every write and sync fails with EIO.
    IoError,
}

#[test]
fn disk_full_direct() {
    scenario("direct", Fault::DiskFull);
}

#[test]
fn disk_full_buffered() {
    scenario("buffered", Fault::DiskFull);
}

#[test]
fn io_error_direct() {
    scenario("direct", Fault::IoError);
}

#[test]
fn io_error_buffered() {
    scenario("buffered", Fault::IoError);
}

// ---------------------------------------------------------------------------
// A small filesystem, mounted for one test.

/// A mount point and its ext4 image in a temporary directory; unmounted
/// (lazily if it is busy) and removed when dropped.
struct SmallFs {
    root: tempfile::TempDir,
    mounted: bool,
}

impl SmallFs {
    /// Makes and mounts ext4 on a loop device. Err says why it could not.
    fn mount() -> Result<SmallFs, String> {
        let root = tempfile::Builder::new()
            .prefix("rk-disk-full-")
            .tempdir()
            .map_err(|e| format!("temp dir: {e}"))?;
        fs::create_dir(root.path().join("mnt")).map_err(|e| format!("mount point: {e}"))?;
        let mut small = SmallFs {
            root,
            mounted: false,
        };
        small.make_ext4()?;
        small.mount_ext4()?;
        Ok(small)
    }

    fn mnt(&self) -> PathBuf {
        self.root.path().join("mnt")
    }

    fn image(&self) -> PathBuf {
        self.root.path().join("fs.img")
    }

    fn make_ext4(&self) -> Result<(), String> {
        let img = self.image();
        fs::File::create(&img)
            .and_then(|f| f.set_len(IMAGE_BYTES))
            .map_err(|e| format!("image file: {e}"))?;
        // 4 KiB blocks as on a real disk; no blocks reserved for root (the
        // tests run as root, which may use them).
        run(
            "mkfs.ext4",
            &["-q", "-F", "-b", "4096", "-m", "0", path_str(&img)],
        )?;
        Ok(())
    }

    fn mount_ext4(&mut self) -> Result<(), String> {
        let (img, mnt) = (self.image(), self.mnt());
        run("mount", &["-o", "loop", path_str(&img), path_str(&mnt)])?;
        self.mounted = true;
        Ok(())
    }

    /// Unmounts, waiting out a busy mount for a while: a killed server's
    /// io_uring lets go of its files asynchronously, moments after the
    /// process is gone.
    fn unmount(&mut self) -> Result<(), String> {
        let start = Instant::now();
        loop {
            match run("umount", &[path_str(&self.mnt())]) {
                Ok(_) => {
                    self.mounted = false;
                    return Ok(());
                }
                Err(e) if start.elapsed() > UMOUNT_PATIENCE => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Unmounts and mounts the ext4 image again (its journal replays).
    fn remount(&mut self) -> Result<(), String> {
        self.unmount()?;
        self.mount_ext4()
    }

    /// Bytes free for unprivileged and privileged writers alike (-m 0).
    fn free_bytes(&self) -> u64 {
        let c = std::ffi::CString::new(self.mnt().as_os_str().as_bytes()).unwrap();
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
        assert_eq!(rc, 0, "statvfs: {}", std::io::Error::last_os_error());
        st.f_bavail as u64 * st.f_frsize as u64
    }

    /// A file of zeros that leaves about `leave` bytes free.
    fn fill_leaving(&self, ballast: &Path, leave: u64) {
        let bytes = self.free_bytes().saturating_sub(leave);
        let mut f = fs::File::create(ballast).expect("create the ballast file");
        let chunk = vec![0u8; 1 << 20];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            f.write_all(&chunk[..n]).expect("write the ballast file");
            left -= n as u64;
        }
        f.sync_all().expect("sync the ballast file");
    }

    /// Shuts the ext4 filesystem down without flushing its journal: from
    /// now on every write and sync on it fails with EIO, and what is not on
    /// the device yet never will be (until a remount replays the journal).
    fn shut_down(&self) -> std::io::Result<()> {
        // _IOR('X', 125, __u32), as XFS_IOC_GOINGDOWN.
        const EXT4_IOC_SHUTDOWN: u32 = 0x8004_587D;
        const EXT4_GOING_FLAGS_NOLOGFLUSH: u32 = 2;
        let dir = fs::File::open(self.mnt())?;
        let flags: u32 = EXT4_GOING_FLAGS_NOLOGFLUSH;
        let rc = unsafe {
            libc::ioctl(
                dir.as_raw_fd(),
                EXT4_IOC_SHUTDOWN as _,
                &flags as *const u32,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        if self.mounted {
            let mnt = self.mnt();
            if let Err(e) = self.unmount() {
                eprintln!("umount {}: {e}; detaching it lazily", mnt.display());
                if let Err(e) = run("umount", &["-l", path_str(&mnt)]) {
                    eprintln!("umount -l {}: {e}", mnt.display());
                }
            }
            self.mounted = false;
        }
    }
}

/// The server's log without its terminal colours.
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-byte
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temp path")
}

/// Runs a command to completion (killing it after `CMD_LIMIT`); Err holds
/// its status and output.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let what = format!("{program} {}", args.join(" "));
    let out = tempfile::tempfile().map_err(|e| format!("{what}: {e}"))?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().map_err(|e| format!("{what}: {e}"))?)
        .stderr(out.try_clone().map_err(|e| format!("{what}: {e}"))?)
        .spawn()
        .map_err(|e| format!("{what}: {e}"))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > CMD_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what}: still running after {CMD_LIMIT:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("{what}: {e}")),
        }
    };
    let mut text = String::new();
    let mut out = out;
    let _ = out.seek(SeekFrom::Start(0));
    let _ = out.read_to_string(&mut text);
    if status.success() {
        Ok(text)
    } else {
        Err(format!("{what}: {status}: {}", text.trim()))
    }
}

// ---------------------------------------------------------------------------
// The writes.

/// The i-th write of the loop: every fourth sets /ok, the others create
/// /fill/nNNNNN; each carries its own 8 KiB value.
struct Op {
    index: usize,
    path: String,
    value: Vec<u8>,
    create: bool,
}

impl Op {
    fn nth(index: usize) -> Op {
        let create = !index.is_multiple_of(4);
        let path = if create {
            format!("/fill/n{index:05}")
        } else {
            "/ok".to_string()
        };
        Op {
            index,
            path,
            value: value_of(index),
            create,
        }
    }

    async fn run(&self, client: &Client) -> Result<(), zk::Error> {
        if self.create {
            client
                .create(&self.path, &self.value, &persistent())
                .await
                .map(|_| ())
        } else {
            client
                .set_data(&self.path, &self.value, None)
                .await
                .map(|_| ())
        }
    }
}

fn value_of(index: usize) -> Vec<u8> {
    let mut v = format!("value {index:05} ").into_bytes();
    v.resize(VALUE_BYTES, b'a' + (index % 26) as u8);
    v
}

fn persistent() -> zk::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

fn show(v: &[u8]) -> String {
    let head = &v[..v.len().min(16)];
    format!("{:?} ({} bytes)", String::from_utf8_lossy(head), v.len())
}

/// Where to look when something fails: the servers' output and the data
/// directory.
struct Ctx {
    logs: Vec<PathBuf>,
    data: PathBuf,
}

impl Ctx {
    fn dump(&self) -> String {
        let mut s = String::new();
        for log in &self.logs {
            s += &format!(
                "\n--- {} ---\n{}",
                log.display(),
                fs::read_to_string(log).unwrap_or_else(|e| format!("({e})"))
            );
        }
        s += &format!("\n--- {} ---\n{}", self.data.display(), listing(&self.data));
        s
    }

    fn log_text(&self) -> String {
        self.logs
            .iter()
            .map(|l| fs::read_to_string(l).unwrap_or_default())
            .collect()
    }
}

fn listing(dir: &Path) -> String {
    let mut entries: Vec<String> = match fs::read_dir(dir) {
        Ok(rd) => rd
            .flatten()
            .map(|e| {
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                format!("{:>10} {}", len, e.file_name().to_string_lossy())
            })
            .collect(),
        Err(e) => return format!("({e})"),
    };
    entries.sort();
    entries.join("\n")
}

/// Bounds one client call.
async fn bounded<T>(what: &str, ctx: &Ctx, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(OP_LIMIT, f).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: no answer within {OP_LIMIT:?}{}", ctx.dump()),
    }
}

async fn connect(addr: &str) -> Result<Client, zk::Error> {
    Client::connector()
        .with_session_timeout(Duration::from_secs(30))
        .connect(addr)
        .await
}

/// What the first phase saw.
struct Outcome {
    /// Every acknowledged write's effect: path -> value.
    acked: BTreeMap<String, Vec<u8>>,
    /// The write that failed first.
    failed: Op,
    /// Writes refused after it (none of them may ever show up).
    refused: Vec<Op>,
    writes_acked: usize,
    fill_time: Duration,
}

/// Checks that the tree holds `acked` exactly: /fill's children and every
/// value. `maybe` is a write whose outcome is unknown (it failed): after a
/// restart it may be there or not.
async fn check_tree(
    client: &Client,
    acked: &BTreeMap<String, Vec<u8>>,
    maybe: Option<&Op>,
    when: &str,
    ctx: &Ctx,
) {
    let mut children = bounded("getChildren /fill", ctx, client.list_children("/fill"))
        .await
        .unwrap_or_else(|e| panic!("{when}: getChildren /fill failed: {e}{}", ctx.dump()));
    children.sort();
    let expected: BTreeSet<String> = acked
        .keys()
        .filter_map(|p| p.strip_prefix("/fill/"))
        .map(str::to_string)
        .collect();
    let mut found: BTreeSet<String> = children.into_iter().collect();
    if let Some(op) = maybe.filter(|op| op.create) {
        found.remove(op.path.strip_prefix("/fill/").unwrap());
    }
    assert!(
        found == expected,
        "{when}: /fill's children differ from the acknowledged creates: \
         missing {:?}, unexpected {:?}{}",
        expected.difference(&found).collect::<Vec<_>>(),
        found.difference(&expected).collect::<Vec<_>>(),
        ctx.dump()
    );
    for (path, value) in acked {
        let (data, stat) = bounded("getData", ctx, client.get_data(path))
            .await
            .unwrap_or_else(|e| panic!("{when}: getData {path} failed: {e}{}", ctx.dump()));
        let unknown = maybe.is_some_and(|op| op.path == *path && op.value == data);
        assert!(
            data == *value || unknown,
            "{when}: {path} holds {} where the last acknowledged write put {}{}",
            show(&data),
            show(value),
            ctx.dump()
        );
        assert_eq!(stat.data_length as usize, data.len(), "{when}: {path}");
        let exists = bounded("exists", ctx, client.check_stat(path))
            .await
            .unwrap_or_else(|e| panic!("{when}: exists {path} failed: {e}{}", ctx.dump()));
        assert!(exists.is_some(), "{when}: exists {path}: no{}", ctx.dump());
    }
}

/// Writes until one fails; then checks that the server refuses writes and
/// new sessions, and keeps serving reads of exactly what it acknowledged.
async fn fill_until_failure(
    addr: &str,
    fault: Fault,
    fs: &SmallFs,
    ctx: &Ctx,
    running: &mut dyn FnMut() -> bool,
) -> Outcome {
    let client = bounded("connect", ctx, connect(addr))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}{}", ctx.dump()));
    let mut acked = BTreeMap::new();
    for (path, value) in [("/fill", Vec::new()), ("/ok", value_of(0))] {
        bounded("create", ctx, client.create(path, &value, &persistent()))
            .await
            .unwrap_or_else(|e| panic!("create {path}: {e}{}", ctx.dump()));
        acked.insert(path.to_string(), value);
    }

    let start = Instant::now();
    let mut writes_acked = 0;
    let mut failure = None;
    for index in 1..=MAX_OPS {
        if start.elapsed() > FILL_LIMIT {
            break;
        }
        if fault == Fault::IoError && index == SHUTDOWN_BEFORE_OP {
            fs.shut_down()
                .unwrap_or_else(|e| panic!("EXT4_IOC_SHUTDOWN: {e}{}", ctx.dump()));
        }
        let op = Op::nth(index);
        match bounded(&format!("write {}", op.path), ctx, op.run(&client)).await {
            Ok(()) => {
                acked.insert(op.path.clone(), op.value.clone());
                writes_acked += 1;
            }
            Err(e) => {
                failure = Some((op, e));
                break;
            }
        }
    }
    let fill_time = start.elapsed();
    let Some((failed, err)) = failure else {
        panic!(
            "no write failed: {writes_acked} acknowledged in {fill_time:?}, {} bytes free{}",
            fs.free_bytes(),
            ctx.dump()
        );
    };
    assert_eq!(
        err,
        SYSTEM_ERROR,
        "write {} ({}) after {writes_acked} acknowledged ones: expected SYSTEMERROR{}",
        failed.index,
        failed.path,
        ctx.dump()
    );
    match fault {
        // Filling takes real writes: the first segments and their
        // preparation fit.
        Fault::DiskFull => assert!(
            writes_acked >= 50,
            "the disk was full after only {writes_acked} writes{}",
            ctx.dump()
        ),
        // Nothing before the shutdown fails; the first write after does.
        Fault::IoError => assert_eq!(
            failed.index,
            SHUTDOWN_BEFORE_OP,
            "the first failed write{}",
            ctx.dump()
        ),
    }

    // The log says why, and that writes stop.
    let log = ctx.log_text();
    let os_error = match fault {
        Fault::DiskFull => "No space left on device",
        Fault::IoError => "Input/output error",
    };
    assert!(
        log.lines()
            .any(|l| l.contains("txn log failed") && l.contains(os_error)),
        "the server log does not say 'txn log failed ({os_error} ...)'{}",
        ctx.dump()
    );
    assert!(
        log.contains("refusing writes until restart"),
        "the server log does not say writes are refused{}",
        ctx.dump()
    );

    // Every later write, whatever its size, answers SYSTEMERROR.
    let first_acked_create = acked
        .keys()
        .find(|p| p.starts_with("/fill/"))
        .cloned()
        .expect("some create was acknowledged");
    let mut refused = Vec::new();
    let mut later = |index: usize, path: &str, value: Vec<u8>, create: bool| {
        refused.push(Op {
            index,
            path: path.to_string(),
            value,
            create,
        });
    };
    later(
        MAX_OPS + 1,
        "/fill/after-failure",
        value_of(MAX_OPS + 1),
        true,
    );
    later(MAX_OPS + 2, "/fill/tiny", b"t".to_vec(), true);
    later(MAX_OPS + 3, "/ok", value_of(MAX_OPS + 3), false);
    later(MAX_OPS + 4, "/ok", b"tiny".to_vec(), false);
    for op in &refused {
        let r = bounded("a write after the failure", ctx, op.run(&client)).await;
        assert_eq!(
            r,
            Err(SYSTEM_ERROR),
            "{} {} ({} bytes) after the log failed{}",
            if op.create { "create" } else { "setData" },
            op.path,
            op.value.len(),
            ctx.dump()
        );
    }
    let r = bounded("delete", ctx, client.delete(&first_acked_create, None)).await;
    assert_eq!(
        r,
        Err(SYSTEM_ERROR),
        "delete {first_acked_create} after the log failed{}",
        ctx.dump()
    );

    // Reads go on, on the same session, and show exactly what was
    // acknowledged: the tree is back at its last durable version.
    check_tree(&client, &acked, None, "reads after the failure", ctx).await;
    for op in refused.iter().chain([&failed]).filter(|op| op.create) {
        let stat = bounded("exists", ctx, client.check_stat(&op.path))
            .await
            .unwrap_or_else(|e| panic!("exists {}: {e}{}", op.path, ctx.dump()));
        assert!(
            stat.is_none(),
            "{} exists though its create failed{}",
            op.path,
            ctx.dump()
        );
    }

    // A new session is refused unless it asks to be read-only: the server
    // closes the connection unanswered, as ZooKeeper's read-only server does.
    let fresh = Client::connector()
        .with_session_timeout(Duration::from_secs(30))
        .with_fail_eagerly()
        .connect(addr);
    let fresh = bounded("a new session", ctx, fresh).await;
    assert!(
        fresh.is_err(),
        "a new session while writes are refused{}",
        ctx.dump()
    );
    drop(fresh);
    let read_only = Client::connector()
        .with_session_timeout(Duration::from_secs(30))
        .with_readonly(true)
        .connect(addr);
    let read_only = bounded("a read-only session", ctx, read_only)
        .await
        .unwrap_or_else(|e| panic!("a read-only session: {e}{}", ctx.dump()));
    let (data, _) = bounded("read-only getData /ok", ctx, read_only.get_data("/ok"))
        .await
        .unwrap_or_else(|e| panic!("read-only getData /ok: {e}{}", ctx.dump()));
    assert_eq!(data, acked["/ok"], "/ok read-only{}", ctx.dump());
    drop(read_only);

    // ...and the old one still reads.
    let (data, _) = bounded("getData /ok", ctx, client.get_data("/ok"))
        .await
        .unwrap_or_else(|e| panic!("getData /ok after the refused session: {e}{}", ctx.dump()));
    assert_eq!(data, acked["/ok"], "/ok{}", ctx.dump());
    assert!(running(), "the server exited{}", ctx.dump());

    Outcome {
        acked,
        failed,
        refused,
        writes_acked,
        fill_time,
    }
}

/// After a restart on the same data: every acknowledged write is there with
/// its value, none of the refused ones, and writes work again.
/// Returns whether the write that failed first (outcome unknown) is there.
async fn check_after_restart(addr: &str, outcome: &Outcome, ctx: &Ctx) -> bool {
    let client = bounded("connect", ctx, connect(addr))
        .await
        .unwrap_or_else(|e| panic!("connect after the restart: {e}{}", ctx.dump()));
    check_tree(
        &client,
        &outcome.acked,
        Some(&outcome.failed),
        "after the restart",
        ctx,
    )
    .await;
    let failed = &outcome.failed;
    let failed_is_there = match bounded("getData", ctx, client.get_data(&failed.path)).await {
        Ok((data, _)) => data == failed.value,
        Err(zk::Error::NoNode) => false,
        Err(e) => panic!("getData {}: {e}{}", failed.path, ctx.dump()),
    };
    for op in &outcome.refused {
        if op.create {
            let stat = bounded("exists", ctx, client.check_stat(&op.path))
                .await
                .unwrap_or_else(|e| panic!("exists {}: {e}{}", op.path, ctx.dump()));
            assert!(
                stat.is_none(),
                "{}, refused, exists after the restart{}",
                op.path,
                ctx.dump()
            );
        }
    }
    let value = value_of(MAX_OPS + 10);
    bounded(
        "create",
        ctx,
        client.create("/fill/after-restart", &value, &persistent()),
    )
    .await
    .unwrap_or_else(|e| panic!("create after the restart: {e}{}", ctx.dump()));
    bounded("setData", ctx, client.set_data("/ok", &value, None))
        .await
        .unwrap_or_else(|e| panic!("setData after the restart: {e}{}", ctx.dump()));
    for path in ["/fill/after-restart", "/ok"] {
        let (data, _) = bounded("getData", ctx, client.get_data(path))
            .await
            .unwrap_or_else(|e| panic!("getData {path}: {e}{}", ctx.dump()));
        assert_eq!(data, value, "{path} after the restart{}", ctx.dump());
    }
    failed_is_there
}

fn scenario(log_write: &str, fault: Fault) {
    let started = Instant::now();
    let name = format!("{fault:?}/{log_write}");
    let mut fs = SmallFs::mount().unwrap_or_else(|why| {
        panic!("{name}: cannot mount a small ext4 filesystem: {why}\n{NEEDS}")
    });
    let data = fs.mnt().join("data");
    fs::create_dir(&data).expect("create the data dir");
    let ballast = fs.mnt().join("ballast");
    if fault == Fault::DiskFull {
        fs.fill_leaving(&ballast, LEFT_FREE_BYTES);
    }
    let free_before = fs.free_bytes();

    let cfg = format!(
        "dataDir={}\n{SEGMENT_CFG}ringkeeper.logWrite={log_write}\n",
        data.display()
    );
    let mut server: Server = start_ringkeeper(&cfg);
    let mut ctx = Ctx {
        logs: vec![server.dir.path().join("server.log")],
        data: data.clone(),
    };
    // The mode asked for is the one in use (ext4 takes O_DIRECT).
    assert!(
        !ctx.log_text().contains("refuses O_DIRECT"),
        "{name}: fell back to buffered writes{}",
        ctx.dump()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let addr = server.addr();

    let outcome = {
        let mut running = || server.is_running();
        let phase = fill_until_failure(&addr, fault, &fs, &ctx, &mut running);
        match rt.block_on(async { tokio::time::timeout(PHASE_LIMIT, phase).await }) {
            Ok(o) => o,
            Err(_) => panic!(
                "{name}: the write phase took over {PHASE_LIMIT:?}{}",
                ctx.dump()
            ),
        }
    };
    let files_at_failure = listing(&data);

    // Crash, make room, restart on the same data.
    server.kill();
    match fault {
        Fault::DiskFull => fs::remove_file(&ballast).expect("remove the ballast"),
        Fault::IoError => fs
            .remount()
            .unwrap_or_else(|e| panic!("{name}: remount: {e}{}", ctx.dump())),
    }
    let restart_at = Instant::now();
    let restarted = Proc::restart(&server, "restart");
    ctx.logs.push(server.dir.path().join("restart.log"));
    let phase = check_after_restart(&addr, &outcome, &ctx);
    let failed_is_there =
        match rt.block_on(async { tokio::time::timeout(PHASE_LIMIT, phase).await }) {
            Ok(there) => there,
            Err(_) => panic!(
                "{name}: the restart phase took over {PHASE_LIMIT:?}{}",
                ctx.dump()
            ),
        };
    let restart_log = fs::read_to_string(server.dir.path().join("restart.log")).unwrap_or_default();
    assert!(
        !restart_log.contains("txn log failed"),
        "{name}: the restarted server's log failed{}",
        ctx.dump()
    );
    drop(restarted);
    drop(rt);

    eprintln!(
        "{name} on ext4: {} bytes free at start; {} writes acknowledged in {:?}, then \
         write {} ({}) failed with {SYSTEM_ERROR:?}; {} later writes refused; reads, the \
         refused session and the log checked; restart verified in {:?} (the failed write {} \
         there); {:?} in all\n\
         data dir when the log failed:\n{files_at_failure}\n\
         server warnings and errors:\n{}",
        free_before,
        outcome.writes_acked,
        outcome.fill_time,
        outcome.failed.index,
        outcome.failed.path,
        outcome.refused.len() + 1,
        restart_at.elapsed(),
        if failed_is_there { "is" } else { "is not" },
        started.elapsed(),
        strip_ansi(&ctx.log_text())
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
}
