//! Issue 26, defect 9: an undecodable PROPOSAL must not enter a follower's
//! history (which its ACKEPOCH and votes then advertise) without reaching
//! its disk. The follower decodes a proposal's txn before zab takes it; a
//! bad one is the leader's protocol violation and closes that connection.
//!
//! One real ringkeeper process is server 1 of a 2-voter ensemble; server 2
//! is a fake Java-speaking leader written here (plain std sockets and
//! threads). The fake wins the election (LOOKING notifications with a
//! better vote in ringkeeper's own round), runs discovery and sync as
//! ZooKeeper 3.8's LearnerHandler does (LEADERINFO with protocol version
//! 0x10000, an empty DIFF, NEWLEADER, UPTODATE, then PINGs), gets a valid
//! create ACKed and COMMITted (a fake that never gets a follower synced
//! fails here), then proposes a txn whose header names an unknown type.
//! ringkeeper must not ACK it and must close the connection; when it comes
//! back its ACKEPOCH must report the valid txn as its last one, and after
//! it is killed no log segment may hold the bad zxid.
//!
//! ringkeeper only: the fake plays the Java side, so there is nothing to
//! rerun against Apache ZooKeeper.

mod common;

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use common::free_port;
use common::raw_fallible::{put_bool, put_buf, put_i32, put_i64, put_str};

// QuorumPacket types (Leader.java).
const PROPOSAL: i32 = 2;
const ACK: i32 = 3;
const COMMIT: i32 = 4;
const PING: i32 = 5;
const NEWLEADER: i32 = 10;
const FOLLOWERINFO: i32 = 11;
const UPTODATE: i32 = 12;
const DIFF: i32 = 13;
const LEADERINFO: i32 = 17;
const ACKEPOCH: i32 = 18;
/// What a Java leader sends in LEADERINFO (no ringkeeper bit).
const JAVA_PROTOCOL_VERSION: i32 = 0x10000;
/// QuorumCnxManager's PROTOCOL_VERSION_V1 connection header.
const ELECTION_PROTOCOL_V1: i64 = -65536;
const LOOKING: i32 = 0;
/// Txn header type `create` (ZooDefs.OpCode).
const TXN_CREATE: i32 = 1;
/// A txn header type no ZooKeeper version has.
const TXN_UNKNOWN: i32 = 99;

const RK_SID: i64 = 1;
const FAKE_SID: i64 = 2;
/// The fake's currentEpoch before it leads, and the epochs it leads in.
const FAKE_START_EPOCH: i64 = 5;
const EPOCH_1: i64 = FAKE_START_EPOCH + 1;
const EPOCH_2: i64 = EPOCH_1 + 1;

const TICK_MS: u64 = 200;
const INIT_LIMIT: u64 = 20;
const SYNC_LIMIT: u64 = 10;
/// The leader's PING interval (tickTime / 2).
const PING_EVERY: Duration = Duration::from_millis(TICK_MS / 2);

/// Start-up (a debug build) and the first election.
const FIRST_CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// One step of the learner protocol.
const STEP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the follower may take to drop the leader that sent a bad
/// proposal (it does so at once; this leaves room for a loaded machine).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(15);
/// Back to the election (syncLimit of silence at most) and connected again.
const RECONNECT_TIMEOUT: Duration = Duration::from_secs(30);
const DUMP_TIMEOUT: Duration = Duration::from_secs(60);

fn zxid(epoch: i64, counter: i64) -> i64 {
    (epoch << 32) | counter
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// What the fake did and saw, for failure reports.
#[derive(Clone, Default)]
struct Trace(Arc<Mutex<Vec<String>>>);

impl Trace {
    fn note(&self, line: impl Into<String>) {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if t.len() >= 300 {
            t.remove(0);
        }
        t.push(line.into());
    }

    fn text(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).join("\n")
    }
}

// ---- the ringkeeper process -------------------------------------------

/// The ringkeeper member, killed (SIGKILL, by pid) when dropped.
struct Ringkeeper {
    child: Option<Child>,
    dir: tempfile::TempDir,
    client: SocketAddr,
}

impl Ringkeeper {
    fn start(client_port: u16, servers: &str) -> Ringkeeper {
        let dir = tempfile::tempdir().expect("a temporary dir");
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("myid"), format!("{RK_SID}\n")).unwrap();
        let cfg = dir.path().join("zoo.cfg");
        std::fs::write(
            &cfg,
            format!(
                "tickTime={TICK_MS}\ninitLimit={INIT_LIMIT}\nsyncLimit={SYNC_LIMIT}\n\
                 dataDir={}\nclientPort={client_port}\nclientPortAddress=127.0.0.1\n\
                 4lw.commands.whitelist=*\nadmin.enableServer=false\n{servers}",
                data.display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
            .arg("--config")
            .arg(&cfg)
            .env(
                "RUST_LOG",
                std::env::var("RK_TEST_LOG").unwrap_or("info".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn ringkeeper");
        Ringkeeper {
            child: Some(child),
            dir,
            client: format!("127.0.0.1:{client_port}").parse().unwrap(),
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn srvr(&self) -> String {
        let ask = || -> io::Result<String> {
            let mut s = TcpStream::connect_timeout(&self.client, Duration::from_secs(2))?;
            s.set_read_timeout(Some(Duration::from_secs(3)))?;
            s.write_all(b"srvr")?;
            let mut out = String::new();
            s.read_to_string(&mut out)?;
            Ok(out)
        };
        ask().unwrap_or_default()
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(80)..].join("\n")
    }
}

impl Drop for Ringkeeper {
    fn drop(&mut self) {
        self.kill();
    }
}

fn report(rk: &Ringkeeper, trace: &Trace) -> String {
    format!(
        "\n--- the fake leader:\n{}\n--- ringkeeper's log (tail):\n{}",
        trace.text(),
        rk.log_tail()
    )
}

// ---- the fake's election port -------------------------------------------

/// The fake's vote: (its last zxid, its currentEpoch), for itself.
type SharedVote = Arc<Mutex<(i64, i64)>>;

/// A notification as it travels (FastLeaderElection.buildMsg, version 2).
fn notification(
    state: i32,
    leader: i64,
    zxid: i64,
    round: i64,
    peer_epoch: i64,
    config: &str,
) -> Vec<u8> {
    let mut b = Vec::new();
    put_i32(&mut b, 44 + config.len() as i32);
    put_i32(&mut b, state);
    put_i64(&mut b, leader);
    put_i64(&mut b, zxid);
    put_i64(&mut b, round);
    put_i64(&mut b, peer_epoch);
    put_i32(&mut b, 2);
    put_str(&mut b, config);
    b
}

struct Notification {
    state: i32,
    leader: i64,
    zxid: i64,
    round: i64,
    peer_epoch: i64,
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// A framed notification at the front of `b`: Ok(None) while incomplete.
fn parse_notification(b: &[u8]) -> Result<Option<(Notification, usize)>, String> {
    if b.len() < 4 {
        return Ok(None);
    }
    let len = be_i32(b, 0);
    if !(28..=512 * 1024).contains(&len) {
        return Err(format!("a notification of {len} bytes"));
    }
    let end = 4 + len as usize;
    if b.len() < end {
        return Ok(None);
    }
    let p = &b[4..end];
    let zxid = be_i64(p, 12);
    let n = Notification {
        state: be_i32(p, 0),
        leader: be_i64(p, 4),
        zxid,
        round: be_i64(p, 20),
        peer_epoch: if p.len() >= 36 {
            be_i64(p, 28)
        } else {
            zxid >> 32
        },
    };
    Ok(Some((n, end)))
}

/// Server 2's election port: the lower sid's connections are dropped (the
/// higher sid keeps the one it dials, QuorumCnxManager's rule), and a
/// connection dialled to ringkeeper answers each LOOKING notification that
/// does not carry the fake's vote with that vote, LOOKING, in the same
/// round: ringkeeper adopts it (a better vote of its round), and the two
/// then make a quorum for server 2 (FastLeaderElection.lookForLeader).
struct FakeElection {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl FakeElection {
    fn start(
        listener: TcpListener,
        ringkeeper: SocketAddr,
        my_address: String,
        vote: SharedVote,
        config: String,
        trace: Trace,
    ) -> FakeElection {
        let stop = Arc::new(AtomicBool::new(false));
        listener.set_nonblocking(true).unwrap();
        let acceptor = {
            let stop = stop.clone();
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((s, _)) => drop(s),
                        Err(_) => thread::sleep(Duration::from_millis(20)),
                    }
                }
            })
        };
        let dialer = {
            let stop = stop.clone();
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let why = answer_votes(&stop, ringkeeper, &my_address, &vote, &config, &trace);
                    if let Err(e) = why {
                        if !stop.load(Ordering::Relaxed) {
                            trace.note(format!("election: connection to ringkeeper ended: {e}"));
                        }
                    }
                    thread::sleep(Duration::from_millis(100));
                }
            })
        };
        FakeElection {
            stop,
            threads: vec![acceptor, dialer],
        }
    }
}

impl Drop for FakeElection {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// One election connection to ringkeeper, until it ends or `stop`.
fn answer_votes(
    stop: &AtomicBool,
    ringkeeper: SocketAddr,
    my_address: &str,
    vote: &SharedVote,
    config: &str,
    trace: &Trace,
) -> Result<(), String> {
    let mut s = TcpStream::connect_timeout(&ringkeeper, Duration::from_millis(500))
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut header = Vec::new();
    put_i64(&mut header, ELECTION_PROTOCOL_V1);
    put_i64(&mut header, FAKE_SID);
    put_str(&mut header, my_address);
    s.write_all(&header).map_err(|e| format!("header: {e}"))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        match s.read(&mut chunk) {
            Ok(0) => return Err("closed by ringkeeper".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => return Err(e.to_string()),
        }
        while let Some((n, used)) = parse_notification(&buf)? {
            buf.drain(..used);
            let (my_zxid, my_epoch) = *vote.lock().unwrap_or_else(|e| e.into_inner());
            trace.note(format!(
                "election: ringkeeper says state {} leader {} zxid {:#x} round {} epoch {}",
                n.state, n.leader, n.zxid, n.round, n.peer_epoch
            ));
            let ours = (n.leader, n.zxid, n.peer_epoch) == (FAKE_SID, my_zxid, my_epoch);
            if n.state == LOOKING && !ours {
                let reply = notification(LOOKING, FAKE_SID, my_zxid, n.round, my_epoch, config);
                s.write_all(&reply).map_err(|e| format!("vote: {e}"))?;
                trace.note(format!(
                    "election: answered LOOKING leader {FAKE_SID} zxid {my_zxid:#x} round {} epoch {my_epoch}",
                    n.round
                ));
            }
        }
    }
    Ok(())
}

// ---- the fake's quorum port --------------------------------------------

struct Packet {
    kind: i32,
    zxid: i64,
    data: Option<Vec<u8>>,
}

impl std::fmt::Debug for Packet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.kind {
            PROPOSAL => "PROPOSAL",
            ACK => "ACK",
            COMMIT => "COMMIT",
            PING => "PING",
            NEWLEADER => "NEWLEADER",
            FOLLOWERINFO => "FOLLOWERINFO",
            UPTODATE => "UPTODATE",
            DIFF => "DIFF",
            LEADERINFO => "LEADERINFO",
            ACKEPOCH => "ACKEPOCH",
            _ => "packet",
        };
        write!(
            f,
            "{name}({}) zxid {:#x} data {:?}",
            self.kind,
            self.zxid,
            self.data.as_ref().map(|d| d.len())
        )
    }
}

/// A QuorumPacket as it goes on the wire: no length prefix.
fn quorum_packet(kind: i32, zxid: i64, data: Option<&[u8]>) -> Vec<u8> {
    let mut b = Vec::new();
    put_i32(&mut b, kind);
    put_i64(&mut b, zxid);
    match data {
        Some(d) => put_buf(&mut b, d),
        None => put_i32(&mut b, -1),
    }
    put_i32(&mut b, -1); // authinfo: null vector
    b
}

/// A QuorumPacket at the front of `b`: Ok(None) while incomplete.
fn parse_packet(b: &[u8]) -> Result<Option<(Packet, usize)>, String> {
    const BOUND: i32 = 1 << 20;
    let mut at = 0usize;
    let mut need = |n: usize| -> Option<usize> {
        let start = at;
        (b.len() >= start + n).then(|| {
            at += n;
            start
        })
    };
    let Some(p) = need(16) else { return Ok(None) };
    let (kind, zxid, len) = (be_i32(b, p), be_i64(b, p + 4), be_i32(b, p + 12));
    if !(-1..=BOUND).contains(&len) {
        return Err(format!("a packet buffer of {len} bytes"));
    }
    let data = if len >= 0 {
        let Some(p) = need(len as usize) else {
            return Ok(None);
        };
        Some(b[p..p + len as usize].to_vec())
    } else {
        None
    };
    let Some(p) = need(4) else { return Ok(None) };
    let ids = be_i32(b, p);
    if !(-1..=64).contains(&ids) {
        return Err(format!("{ids} auth ids"));
    }
    for _ in 0..ids.max(0) * 2 {
        let Some(p) = need(4) else { return Ok(None) };
        let n = be_i32(b, p);
        if !(0..=BOUND).contains(&n) {
            return Err(format!("an auth string of {n} bytes"));
        }
        if need(n as usize).is_none() {
            return Ok(None);
        }
    }
    Ok(Some((Packet { kind, zxid, data }, at)))
}

enum Next {
    Packet(Packet),
    Closed(String),
    TimedOut,
}

/// The fake leader's end of one learner connection (LearnerHandler).
struct Learner {
    reader: TcpStream,
    writer: Arc<Mutex<TcpStream>>,
    buf: Vec<u8>,
    trace: Trace,
    /// PING's zxid: the last proposed.
    last_proposed: Arc<AtomicI64>,
    pinger: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Learner {
    fn new(stream: TcpStream, trace: Trace) -> Learner {
        stream.set_nonblocking(false).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let writer = Arc::new(Mutex::new(stream.try_clone().unwrap()));
        Learner {
            reader: stream,
            writer,
            buf: Vec::new(),
            trace,
            last_proposed: Arc::new(AtomicI64::new(0)),
            pinger: None,
        }
    }

    fn send(&self, kind: i32, zxid: i64, data: Option<&[u8]>) -> io::Result<()> {
        let bytes = quorum_packet(kind, zxid, data);
        let r = self
            .writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .write_all(&bytes);
        let p = Packet {
            kind,
            zxid,
            data: data.map(<[u8]>::to_vec),
        };
        self.trace.note(format!("quorum: sent {p:?}: {r:?}"));
        if kind == PROPOSAL {
            self.last_proposed.store(zxid, Ordering::Relaxed);
        }
        r
    }

    /// PING(lastProposed) every tickTime / 2 from now on, as a leader does
    /// once a learner is synced: a working follower never times out.
    fn start_pinging(&mut self) {
        let stop = Arc::new(AtomicBool::new(false));
        let (writer, last, flag) = (
            self.writer.clone(),
            self.last_proposed.clone(),
            stop.clone(),
        );
        let handle = thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                let ping = quorum_packet(PING, last.load(Ordering::Relaxed), None);
                let sent = writer
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .write_all(&ping);
                if sent.is_err() {
                    return;
                }
                thread::sleep(PING_EVERY);
            }
        });
        self.pinger = Some((stop, handle));
    }

    /// The next packet, until `deadline`.
    fn next(&mut self, deadline: Instant) -> Next {
        let mut chunk = [0u8; 8192];
        loop {
            match parse_packet(&self.buf) {
                Ok(Some((p, used))) => {
                    self.buf.drain(..used);
                    if p.kind != PING {
                        self.trace.note(format!("quorum: received {p:?}"));
                    }
                    return Next::Packet(p);
                }
                Ok(None) => {}
                Err(e) => return Next::Closed(format!("undecodable bytes from ringkeeper: {e}")),
            }
            if Instant::now() >= deadline {
                return Next::TimedOut;
            }
            match self.reader.read(&mut chunk) {
                Ok(0) => return Next::Closed("end of stream".into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Next::Closed(e.to_string()),
            }
        }
    }

    /// The next packet that is not a PING (nor, with `skip_epoch_acks`, an
    /// ACK of a new epoch's zxid, which a Java follower sends after
    /// UPTODATE), within `timeout`; panics otherwise.
    fn expect(
        &mut self,
        what: &str,
        timeout: Duration,
        skip_epoch_acks: bool,
        rk: &Ringkeeper,
    ) -> Packet {
        let deadline = Instant::now() + timeout;
        loop {
            match self.next(deadline) {
                Next::Packet(p) if p.kind == PING => {}
                Next::Packet(p)
                    if skip_epoch_acks && p.kind == ACK && p.zxid & 0xffff_ffff == 0 => {}
                Next::Packet(p) => return p,
                Next::Closed(why) => panic!(
                    "waiting for {what}, the quorum connection ended: {why}{}",
                    report(rk, &self.trace)
                ),
                Next::TimedOut => panic!("no {what} within {timeout:?}{}", report(rk, &self.trace)),
            }
        }
    }

    fn expect_kind(&mut self, kind: i32, what: &str, rk: &Ringkeeper) -> Packet {
        let p = self.expect(what, STEP_TIMEOUT, false, rk);
        assert_eq!(
            p.kind,
            kind,
            "expected {what}, got {p:?}{}",
            report(rk, &self.trace)
        );
        p
    }
}

impl Drop for Learner {
    fn drop(&mut self) {
        let _ = self.reader.shutdown(Shutdown::Both);
        if let Some((stop, handle)) = self.pinger.take() {
            stop.store(true, Ordering::Relaxed);
            let _ = handle.join();
        }
    }
}

/// The next connection on the fake's quorum port within `timeout`; panics
/// if ringkeeper exits meanwhile.
fn accept_learner(
    listener: &TcpListener,
    timeout: Duration,
    rk: &mut Ringkeeper,
    trace: &Trace,
    what: &str,
) -> Learner {
    listener.set_nonblocking(true).unwrap();
    let start = Instant::now();
    loop {
        match listener.accept() {
            Ok((s, from)) => {
                trace.note(format!("quorum: {what} from {from}"));
                return Learner::new(s, trace.clone());
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("accepting on the fake's quorum port: {e}"),
        }
        if !rk.running() {
            panic!("ringkeeper exited before {what}{}", report(rk, trace));
        }
        if start.elapsed() > timeout {
            panic!("no {what} within {timeout:?}{}", report(rk, trace));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// LearnerInfo's sid, checked to be ringkeeper's.
fn check_follower_info(p: &Packet, rk: &Ringkeeper, trace: &Trace) {
    let data = p.data.as_deref().unwrap_or_default();
    assert!(
        data.len() >= 12,
        "FOLLOWERINFO without a LearnerInfo: {p:?}{}",
        report(rk, trace)
    );
    assert_eq!(be_i64(data, 0), RK_SID, "FOLLOWERINFO's sid");
    assert!(
        be_i32(data, 8) >= JAVA_PROTOCOL_VERSION,
        "FOLLOWERINFO's version"
    );
}

/// ACKEPOCH's currentEpoch (-1: none).
fn ackepoch_current(p: &Packet) -> i32 {
    p.data
        .as_deref()
        .filter(|d| d.len() >= 4)
        .map_or(i32::MIN, |d| be_i32(d, 0))
}

// ---- txns ---------------------------------------------------------------

/// A create of `path` (world:anyone ALL, persistent) in ZooKeeper's txn
/// encoding: TxnHeader, then CreateTxn.
fn create_txn(zxid: i64, path: &str, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    put_i64(&mut b, 0); // clientId
    put_i32(&mut b, 0); // cxid
    put_i64(&mut b, zxid);
    put_i64(&mut b, now_ms());
    put_i32(&mut b, TXN_CREATE);
    put_str(&mut b, path);
    put_buf(&mut b, data);
    put_i32(&mut b, 1); // one ACL
    put_i32(&mut b, 31);
    put_str(&mut b, "world");
    put_str(&mut b, "anyone");
    put_bool(&mut b, false); // ephemeral
    put_i32(&mut b, 1); // parentCVersion
    b
}

/// A TxnHeader under `zxid` whose type no server knows, then junk.
fn undecodable_txn(zxid: i64) -> Vec<u8> {
    let mut b = Vec::new();
    put_i64(&mut b, 0);
    put_i32(&mut b, 0);
    put_i64(&mut b, zxid);
    put_i64(&mut b, now_ms());
    put_i32(&mut b, TXN_UNKNOWN);
    b.extend_from_slice(&[0xab; 16]);
    b
}

// ---- the log on disk ----------------------------------------------------

/// Every `log.<hex>` file under `dir`.
fn log_segments(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                dirs.push(p);
            } else if name
                .strip_prefix("log.")
                .is_some_and(|h| !h.is_empty() && u64::from_str_radix(h, 16).is_ok())
            {
                found.push(p);
            }
        }
    }
    found.sort();
    found
}

/// `ringkeeper log dump FILE`, bounded; its output goes through
/// `out_path`.
fn log_dump(file: &Path, out_path: &Path) -> String {
    let out_file = std::fs::File::create(out_path).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringkeeper"))
        .arg("log")
        .arg("dump")
        .arg(file)
        .stdin(Stdio::null())
        .stdout(out_file)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ringkeeper log dump");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > DUMP_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "ringkeeper log dump {} took over {DUMP_TIMEOUT:?}",
                file.display()
            );
        }
        thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    let out = std::fs::read_to_string(out_path).unwrap_or_default();
    let _ = std::fs::remove_file(out_path);
    assert!(
        status.success(),
        "ringkeeper log dump {}: {status}: {err}\n{out}",
        file.display()
    );
    out
}

/// The zxids of every txn the log segments under `dir` hold (dumped
/// through a file in `scratch`).
fn logged_zxids(dir: &Path, scratch: &Path) -> (Vec<i64>, String) {
    let mut zxids = Vec::new();
    let mut dumps = String::new();
    for seg in log_segments(dir) {
        let dump = log_dump(&seg, &scratch.join("log-dump.out"));
        for line in dump.lines() {
            if let Some((_, rest)) = line.split_once(" zxid 0x") {
                let hex = rest.split(' ').next().unwrap_or_default();
                zxids.push(i64::from_str_radix(hex, 16).expect("a hex zxid"));
            }
        }
        dumps.push_str(&dump);
    }
    (zxids, dumps)
}

// ---- the test -------------------------------------------------------------

#[test]
fn an_undecodable_proposal_closes_the_connection_and_never_enters_the_log() {
    let trace = Trace::default();
    let (rk_client, rk_quorum, rk_election) = (free_port(), free_port(), free_port());
    let (fake_quorum, fake_election) = (free_port(), free_port());
    let fake_ip = "127.0.0.2";
    let servers = format!(
        "server.{RK_SID}=127.0.0.1:{rk_quorum}:{rk_election}\n\
         server.{FAKE_SID}={fake_ip}:{fake_quorum}:{fake_election}\n"
    );
    let config = format!(
        "server.{RK_SID}=127.0.0.1:{rk_quorum}:{rk_election}:participant\n\
         server.{FAKE_SID}={fake_ip}:{fake_quorum}:{fake_election}:participant\nversion=0"
    );
    let quorum_listener =
        TcpListener::bind((fake_ip, fake_quorum)).expect("the fake's quorum port");
    let election_listener =
        TcpListener::bind((fake_ip, fake_election)).expect("the fake's election port");
    // Server 2 (the fake) has an empty history in epoch 5: a better vote
    // than a fresh ringkeeper's (epoch 0).
    let vote: SharedVote = Arc::new(Mutex::new((0, FAKE_START_EPOCH)));
    let _election = FakeElection::start(
        election_listener,
        format!("127.0.0.1:{rk_election}").parse().unwrap(),
        format!("{fake_ip}:{fake_election}"),
        vote.clone(),
        config.clone(),
        trace.clone(),
    );
    let mut rk = Ringkeeper::start(rk_client, &servers);

    // ---- ringkeeper follows the fake: discovery and sync as a Java leader runs them.
    let mut l = accept_learner(
        &quorum_listener,
        FIRST_CONNECT_TIMEOUT,
        &mut rk,
        &trace,
        "ringkeeper's first quorum connection",
    );
    let fi = l.expect_kind(FOLLOWERINFO, "FOLLOWERINFO", &rk);
    check_follower_info(&fi, &rk, &trace);
    assert!(
        fi.zxid >> 32 < EPOCH_1,
        "ringkeeper's acceptedEpoch {:#x}",
        fi.zxid
    );
    l.send(
        LEADERINFO,
        zxid(EPOCH_1, 0),
        Some(&JAVA_PROTOCOL_VERSION.to_be_bytes()),
    )
    .expect("LEADERINFO");
    let ae = l.expect_kind(ACKEPOCH, "ACKEPOCH", &rk);
    assert_eq!(
        ae.zxid,
        0,
        "a fresh ringkeeper's last zxid{}",
        report(&rk, &trace)
    );
    // In sync already (peerLastZxid == lastProcessedZxid): an empty DIFF.
    l.send(DIFF, ae.zxid, None).expect("DIFF");
    l.send(NEWLEADER, zxid(EPOCH_1, 0), Some(config.as_bytes()))
        .expect("NEWLEADER");
    let ack = l.expect_kind(ACK, "the NEWLEADER ACK", &rk);
    assert_eq!(ack.zxid, zxid(EPOCH_1, 0), "the NEWLEADER ACK's zxid");
    l.send(UPTODATE, -1, None).expect("UPTODATE");
    l.start_pinging();

    // ---- a valid proposal: the follower logs, ACKs and applies it.
    let good = zxid(EPOCH_1, 1);
    l.send(
        PROPOSAL,
        good,
        Some(&create_txn(good, "/before-the-bad-one", b"ok")),
    )
    .expect("PROPOSAL");
    let ack = l.expect("the valid proposal's ACK", STEP_TIMEOUT, true, &rk);
    assert!(
        ack.kind == ACK && ack.zxid == good,
        "expected ACK {good:#x}, got {ack:?}{}",
        report(&rk, &trace)
    );
    l.send(COMMIT, good, None).expect("COMMIT");
    let start = Instant::now();
    loop {
        let srvr = rk.srvr();
        if srvr.contains("Mode: follower") && srvr.contains(&format!("Zxid: {good:#x}\n")) {
            break;
        }
        assert!(
            start.elapsed() < STEP_TIMEOUT,
            "ringkeeper did not serve the committed {good:#x} as a follower: {srvr}{}",
            report(&rk, &trace)
        );
        // Read on (PING replies), so that nothing backs up.
        if let Next::Closed(why) = l.next(Instant::now() + Duration::from_millis(100)) {
            panic!(
                "the quorum connection ended after COMMIT: {why}{}",
                report(&rk, &trace)
            );
        }
    }

    // ---- the undecodable proposal.
    let bad = zxid(EPOCH_1, 2);
    // A leader's vote carries its last zxid and epoch (updateElectionVote):
    // set before ringkeeper can be looking again.
    *vote.lock().unwrap() = (bad, EPOCH_1);
    l.send(PROPOSAL, bad, Some(&undecodable_txn(bad)))
        .expect("the bad PROPOSAL");
    let sent_at = Instant::now();
    let deadline = sent_at + CLOSE_TIMEOUT;
    let mut acked_bad = false;
    let mut others = Vec::new();
    let closed = loop {
        match l.next(deadline) {
            Next::Packet(p) if p.kind == PING => {}
            Next::Packet(p) if p.kind == ACK && p.zxid == bad => acked_bad = true,
            Next::Packet(p) => others.push(format!("{p:?}")),
            Next::Closed(why) => break Some((sent_at.elapsed(), why)),
            Next::TimedOut => break None,
        }
    };
    assert!(
        !acked_bad,
        "ringkeeper ACKed the undecodable proposal {bad:#x} (closed: {closed:?}){}",
        report(&rk, &trace)
    );
    let Some((took, why)) = closed else {
        panic!(
            "ringkeeper kept the connection to a leader that sent an undecodable proposal \
             open for {CLOSE_TIMEOUT:?} (leader PINGs answered, other packets: {others:?}){}",
            report(&rk, &trace)
        );
    };
    trace.note(format!(
        "quorum: closed by ringkeeper {took:?} after the bad proposal: {why}"
    ));
    drop(l);

    // ---- ringkeeper elects the fake again and reports its history.
    let mut l = accept_learner(
        &quorum_listener,
        RECONNECT_TIMEOUT,
        &mut rk,
        &trace,
        "ringkeeper's second quorum connection",
    );
    let fi = l.expect_kind(FOLLOWERINFO, "the second FOLLOWERINFO", &rk);
    check_follower_info(&fi, &rk, &trace);
    assert_eq!(fi.zxid, zxid(EPOCH_1, 0), "ringkeeper's acceptedEpoch");
    l.send(
        LEADERINFO,
        zxid(EPOCH_2, 0),
        Some(&JAVA_PROTOCOL_VERSION.to_be_bytes()),
    )
    .expect("LEADERINFO");
    let ae = l.expect_kind(ACKEPOCH, "the second ACKEPOCH", &rk);
    assert!(
        ae.zxid < bad,
        "ringkeeper's last logged zxid is {:#x}: the undecodable {bad:#x} entered its history{}",
        ae.zxid,
        report(&rk, &trace)
    );
    assert_eq!(
        ae.zxid,
        good,
        "ringkeeper's last logged zxid is not the valid txn's{}",
        report(&rk, &trace)
    );
    assert_eq!(
        ackepoch_current(&ae),
        EPOCH_1 as i32,
        "ACKEPOCH's currentEpoch"
    );
    drop(l);

    // ---- and on disk: the valid txn, never the bad one.
    rk.kill();
    let (zxids, dumps) = logged_zxids(&rk.data_dir(), rk.dir.path());
    assert!(
        zxids.contains(&good),
        "the log lacks the valid txn {good:#x}: {zxids:x?}\n{dumps}{}",
        report(&rk, &trace)
    );
    assert!(
        !zxids.contains(&bad),
        "the log holds the undecodable txn {bad:#x}: {zxids:x?}\n{dumps}"
    );
    eprintln!(
        "ringkeeper closed the connection {took:?} after the undecodable proposal ({why}); \
         logged zxids {zxids:x?}"
    );
}
