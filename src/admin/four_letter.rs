//! Four-letter words (FourLetterCommands.java and the command package): a
//! connection whose first four bytes spell a known word gets a text answer
//! and is closed. Formats follow Apache ZooKeeper 3.8 byte for byte; the
//! data comes from a [`View`] the shard assembles (see `mailbox` for how
//! other shards' connections and watches get into it).
//!
//! Where the content (not the format) differs from ZooKeeper, and why:
//! * Version strings are ringkeeper's.
//! * conf: dataDir/dataLogDir are the configured directories (ZooKeeper
//!   shows its `version-2` subdirectories); clientPortListenBacklog is -1
//!   (not used); serverId 0 (standalone).
//! * envi: the java.* entries are `<NA>`; os.memory.* describe the machine
//!   and this process instead of a JVM heap.
//! * stat/cons/dump list connections by shard, then in accept order, and
//!   wchc/wchp watchers by session id: ZooKeeper's order comes from Java
//!   identity hashes, i.e. is arbitrary. cons "lop" is the last request
//!   received (ZooKeeper: the last answered; they differ only while
//!   requests are in flight).
//! * dump: sessions are owned by the consensus core; the shards know only
//!   every session of the core's tracker; expiry times are computed from
//!   the last packet as ZooKeeper's for connected sessions (the core's own
//!   clock may differ by a touch interval) and from the core's last touch
//!   for sessions without a connection. Empty expiry sets, which ZooKeeper keeps until they pass,
//!   are not shown. Dates are printed in UTC.
//! * mntr: zk_global_sessions counts every session of the core's tracker,
//!   with a connection or not, as ZooKeeper's; the dynamic per-namespace keys are not printed; see `monitor`
//!   for the keys without an equivalent.
//! * stmk stores and echoes the mask (gtmk shows it), but ringkeeper has no
//!   ZooTrace logging for it to control. hash is empty, as a standalone
//!   ZooKeeper's.
//! * With several shards, the words that need every shard's connections
//!   or watches combine per-shard reports taken moments apart (`mailbox`).

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;

use super::health::ServerRole;
use super::javafmt::{self, Table};
use super::report::{ConnInfo, ShardCounts, ShardReport};
use super::stats::Totals;
use crate::config::Config;

pub const VERSION: &str = concat!("3.9.3-ringkeeper-", env!("CARGO_PKG_VERSION"));
pub const BUILD_DATE: &str = env!("RINGKEEPER_BUILD_DATE");

const KNOWN: [&str; 18] = [
    "conf", "cons", "crst", "dirs", "dump", "envi", "gtmk", "ruok", "stmk", "srvr", "srst", "stat",
    "wchc", "wchp", "wchs", "mntr", "isro", "hash",
];

/// Telnet's "interrupt process" sequence, which ZooKeeper also treats as a word.
const TELNET_CLOSE: [u8; 4] = [0xff, 0xf4, 0xff, 0xfd];

/// NIOServerCnxnFactory's expiry interval (and timeout) of connections
/// without a session: zookeeper.nio.sessionlessCnxnTimeout, 10 s.
const CNXN_EXPIRY_INTERVAL_MS: i64 = 10_000;

/// The word the first four bytes of a connection spell, if any.
pub fn word_of(first: [u8; 4]) -> Option<&'static str> {
    if first == TELNET_CLOSE {
        return Some("telnet close");
    }
    KNOWN.iter().copied().find(|w| w.as_bytes() == first)
}

pub fn full_version() -> String {
    format!("{VERSION}, built on {BUILD_DATE}")
}

/// The answer to a word the whitelist does not allow (NopCommand); None
/// when the word may run.
pub fn refusal(word: &str, config: &Config) -> Option<String> {
    (!config.four_letter_whitelist.allows(word))
        .then(|| format!("{word} is not executed because it is not in the whitelist.\n"))
}

/// What a word needs from the other shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    /// Watch and session counts (mntr).
    Counts,
    /// Connections, sessions and watches.
    Full,
}

pub fn needs(word: &str) -> Needs {
    match word {
        "mntr" => Needs::Counts,
        "stat" | "cons" | "dump" | "wchc" | "wchp" | "wchs" => Needs::Full,
        _ => Needs::Nothing,
    }
}

/// Facts from the answering shard's view of the tree.
#[derive(Clone, Debug, Default)]
pub struct TreeFacts {
    pub node_count: u64,
    pub ephemerals_count: u64,
    pub approximate_data_size: u64,
    /// Sessions with ephemeral nodes and their paths (dump only).
    pub ephemerals: Vec<(i64, Vec<String>)>,
}

/// Everything a word (or an AdminServer command) may print. Fields a word
/// does not need stay empty.
pub struct View {
    pub config: Arc<Config>,
    pub totals: Totals,
    /// Every shard's report, for `Needs::Full` words.
    pub shards: Vec<Arc<ShardReport>>,
    /// Counts summed over the shards, for `Needs::Counts` words.
    pub counts: ShardCounts,
    /// The answering shard's tree view: filled for mntr (counts and size)
    /// and dump (ephemerals) only.
    pub tree: TreeFacts,
    /// gtmk's answer; stmk's mask after setting it.
    pub trace_mask: i64,
    /// The txn log failed: the server answers as ZooKeeper's
    /// ReadOnlyZooKeeperServer (isro, srvr/stat, mntr's server_state).
    pub read_only: bool,
    pub unrecoverable_errors: u64,
    pub role: ServerRole,
    pub ensemble: crate::admin::health::EnsembleView,
    /// The leader's server id while leading or following.
    pub leader_id: Option<u64>,
    /// The newest snapshot file in dataDir (zxid, path), for the
    /// last_snapshot command: read by the shard, which may name the
    /// snapshot module (admin sits below it).
    pub last_snapshot: Option<(i64, std::path::PathBuf)>,
}

impl View {
    /// ZooKeeper's isZKServerRunning: a server object runs (leading,
    /// following, standalone, or read-only), not while electing or
    /// syncing.
    pub fn serving(&self) -> bool {
        self.read_only || self.role != ServerRole::Looking
    }

    pub(crate) fn conns(&self) -> impl Iterator<Item = &ConnInfo> {
        self.shards.iter().flat_map(|s| s.conns.iter())
    }
}

/// The answer to an allowed `word`, or None for words that close without
/// an answer (telnet close). Side effects (srst, crst, stmk) are the
/// caller's, done before.
pub fn answer(word: &str, view: &View) -> Option<String> {
    if !view.serving() {
        if let Some(text) = not_serving(word, view) {
            return Some(text);
        }
    }
    let mut out = String::new();
    match word {
        "telnet close" => return None,
        "ruok" => out.push_str("imok"),
        // IsroCommand; ruok is RuokCommand's "imok" whatever the state.
        "isro" => out.push_str(if view.read_only { "ro" } else { "rw" }),
        "gtmk" | "stmk" => {
            let _ = write!(out, "{}", view.trace_mask);
        }
        // DigestCommand prints the digest log, which a standalone server
        // only fills when digests are logged: empty, as ZooKeeper 3.8.
        "hash" => {}
        "srvr" | "stat" => stat(&mut out, view, word == "stat"),
        "cons" => {
            for c in view.conns() {
                conn_line(&mut out, c, false);
                out.push('\n');
            }
            out.push('\n');
        }
        "srst" => out.push_str("Server stats reset.\n"),
        "crst" => out.push_str("Connection stats reset.\n"),
        "conf" => conf(&mut out, &view.config),
        "dirs" => {
            let _ = writeln!(out, "datadir_size: {}", dir_size(&view.config.data_dir));
            let _ = writeln!(out, "logdir_size: {}", dir_size(&view.config.data_log_dir));
        }
        "envi" => envi(&mut out),
        "wchs" => wchs(&mut out, view),
        "wchc" => wchc(&mut out, view),
        "wchp" => wchp(&mut out, view),
        "dump" => dump(&mut out, view),
        "mntr" => mntr(&mut out, view),
        _ => return None,
    }
    Some(out)
}

/// The answer of a word whose ZooKeeper command checks isZKServerRunning,
/// while no server runs (measured on 3.8.0 with its quorum gone): the
/// not-serving line, `null` for isro, the line without its end for hash
/// (DigestCommand prints, the others println). srvr and stat say it in
/// [`stat`]; ruok, envi, gtmk and stmk answer whatever the state. mntr
/// adds ringkeeper's lost-disk key when the member waits for a resync.
fn not_serving(word: &str, view: &View) -> Option<String> {
    use super::commands::NOT_SERVING;
    match word {
        "isro" => Some("null".to_string()),
        "hash" => Some(NOT_SERVING.to_string()),
        "conf" | "cons" | "crst" | "dirs" | "dump" | "srst" | "wchc" | "wchp" | "wchs" => {
            Some(format!("{NOT_SERVING}\n"))
        }
        "mntr" => {
            let mut out = format!("{NOT_SERVING}\n");
            if view.ensemble.awaiting_resync {
                out.push_str("zk_lost_disk_awaiting_sync\t1\n");
            }
            Some(out)
        }
        _ => None,
    }
}

/// mntr's lines whatever the state (the AdminServer's `monitor` shows
/// them with its not-serving error).
pub fn mntr_lines(view: &View) -> String {
    let mut out = String::new();
    mntr(&mut out, view);
    out
}

/// What srvr, stat and mntr add on a member that lost its disk.
const AWAITING_RESYNC: &str = "This member lost its disk (ringkeeper.lost-disk in dataDir): it \
    does not vote or count toward a new epoch until a leader established without it has \
    synced it\n";

fn stat(out: &mut String, view: &View, with_clients: bool) {
    if !view.serving() {
        // StatCommand when the server is not running (electing, syncing).
        out.push_str("This ZooKeeper instance is not currently serving requests\n");
        if view.ensemble.awaiting_resync {
            out.push_str(AWAITING_RESYNC);
        }
        return;
    }
    let t = &view.totals;
    let _ = writeln!(out, "Zookeeper version: {}", full_version());
    if view.read_only {
        out.push_str("READ-ONLY mode; serving only read-only clients\n");
    }
    if with_clients {
        out.push_str("Clients:\n");
        for c in view.conns() {
            conn_line(out, c, true);
            out.push('\n');
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "Latency min/avg/max: {}/{}/{}",
        t.latency_min_ms,
        javafmt::double(t.latency_avg_ms),
        t.latency_max_ms
    );
    let _ = writeln!(out, "Received: {}", t.packets_received);
    let _ = writeln!(out, "Sent: {}", t.packets_sent);
    let _ = writeln!(out, "Connections: {}", t.connections);
    let _ = writeln!(out, "Outstanding: {}", t.outstanding);
    let _ = writeln!(out, "Zxid: 0x{:x}", t.last_zxid);
    let _ = writeln!(out, "Mode: {}", server_state(view));
    let _ = writeln!(out, "Node count: {}", t.node_count);
    if view.role == ServerRole::Leader && !view.read_only {
        // StatCommand / ServerCommand on a leader: Leader.getProposalStats.
        let e = &view.ensemble;
        let _ = writeln!(
            out,
            "Proposal sizes last/min/max: {}/{}/{}",
            e.last_proposal_bytes, e.min_proposal_bytes, e.max_proposal_bytes
        );
    }
}

/// ServerCnxn.dumpConnectionInfo, without the line end.
fn conn_line(out: &mut String, c: &ConnInfo, brief: bool) {
    let _ = write!(
        out,
        " {}[{:x}](queued={},recved={},sent={}",
        javafmt::socket_address(c.peer),
        c.interest,
        c.queued,
        c.received,
        c.sent
    );
    if !brief && c.session_id != 0 {
        let _ = write!(
            out,
            ",sid=0x{:x},lop={},est={},to={}",
            c.session_id, c.last_op, c.established_ms, c.timeout_ms
        );
        if c.last_cxid >= 0 {
            let _ = write!(out, ",lcxid=0x{:x}", c.last_cxid);
        }
        let _ = write!(
            out,
            ",lzxid=0x{:x},lresp={},llat={},minlat={},avglat={},maxlat={}",
            c.last_zxid,
            c.last_response_ms,
            c.last_latency_ms,
            c.min_latency_ms,
            c.avg_latency_ms,
            c.max_latency_ms
        );
    }
    out.push(')');
}

/// ZooKeeperServer.dumpConf. ZooKeeper's dataDir and dataLogDir are the
/// snapshot and log directories, `<dir>/version-2`; ringkeeper shows the
/// configured directories themselves.
fn conf(out: &mut String, c: &Config) {
    // getClientPort / getSecureClientPort: -1 for a port not served.
    let port = |p: Option<u16>| p.map_or(-1, i32::from);
    let _ = writeln!(
        out,
        "clientPort={}",
        port((c.client_port != 0).then_some(c.client_port))
    );
    let _ = writeln!(out, "secureClientPort={}", port(c.secure_client_port));
    let _ = writeln!(out, "dataDir={}", absolute(&c.data_dir));
    let _ = writeln!(out, "dataDirSize={}", dir_size(&c.data_dir));
    let _ = writeln!(out, "dataLogDir={}", absolute(&c.data_log_dir));
    let _ = writeln!(out, "dataLogSize={}", dir_size(&c.data_log_dir));
    let _ = writeln!(out, "tickTime={}", c.tick_time_ms);
    let _ = writeln!(out, "maxClientCnxns={}", c.max_client_cnxns);
    let _ = writeln!(out, "minSessionTimeout={}", c.min_session_timeout_ms);
    let _ = writeln!(out, "maxSessionTimeout={}", c.max_session_timeout_ms);
    // clientPortListenBacklog is not used: the kernel default applies.
    out.push_str("clientPortListenBacklog=-1\n");
    let me = c
        .myid
        .filter(|_| c.ensemble)
        .and_then(|id| c.servers.get(&id).map(|spec| (id, spec)));
    let Some((id, spec)) = me else {
        // Standalone: no server id.
        out.push_str("serverId=0\n");
        return;
    };
    // QuorumZooKeeperServer.dumpConf.
    let _ = writeln!(out, "serverId={id}");
    let _ = writeln!(out, "initLimit={}", c.init_limit);
    let _ = writeln!(out, "syncLimit={}", c.sync_limit);
    out.push_str("electionAlg=3\n");
    let _ = writeln!(out, "electionPort={}", spec.election_port);
    let _ = writeln!(out, "quorumPort={}", spec.quorum_port);
    // LearnerType.PARTICIPANT (observers are refused at startup).
    out.push_str("peerType=0\n");
    out.push_str("membership: \n");
    // QuorumVerifier.toString(): no line end after "version=0".
    out.push_str(&c.membership_text());
}

pub(crate) fn absolute(p: &Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// ZooKeeperServer.getDirSize: the lengths of all files below `p`.
pub(crate) fn dir_size(p: &Path) -> u64 {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::read_dir(p)
            .map(|entries| entries.flatten().map(|e| dir_size(&e.path())).sum())
            .unwrap_or(0),
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

/// EnvCommand: ZooKeeper's Environment.list, key for key. The java.*
/// entries have no counterpart and say `<NA>`, as Java does for unknown
/// properties; the os.memory.* entries (the JVM heap in ZooKeeper) show
/// the machine's available memory, its total memory and this process's
/// resident set.
fn envi(out: &mut String) {
    out.push_str("Environment:\n");
    for (k, v) in environment() {
        let _ = writeln!(out, "{k}={v}");
    }
}

/// Environment.list: the entries envi and the `environment` command show.
pub(crate) fn environment() -> Vec<(&'static str, String)> {
    let na = || "<NA>".to_string();
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| na())
    };
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| na());
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "x86" => "i386",
        a => a,
    };
    let cwd = std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| na());
    let mem = |kb: Option<u64>| format!("{}MB", kb.unwrap_or(0) / 1024);
    let user = passwd_entry();
    let entries = [
        ("zookeeper.version", full_version()),
        ("host.name", read("/proc/sys/kernel/hostname")),
        ("java.version", na()),
        ("java.vendor", na()),
        ("java.home", na()),
        ("java.class.path", na()),
        ("java.library.path", na()),
        ("java.io.tmpdir", std::env::temp_dir().display().to_string()),
        ("java.compiler", na()),
        ("os.name", "Linux".to_string()),
        ("os.arch", arch.to_string()),
        ("os.version", read("/proc/sys/kernel/osrelease")),
        (
            "user.name",
            user.as_ref().map_or_else(|| env("USER"), |u| u.0.clone()),
        ),
        (
            "user.home",
            user.as_ref().map_or_else(|| env("HOME"), |u| u.1.clone()),
        ),
        ("user.dir", cwd),
        (
            "os.memory.free",
            mem(meminfo_kb("/proc/meminfo", "MemAvailable:")),
        ),
        (
            "os.memory.max",
            mem(meminfo_kb("/proc/meminfo", "MemTotal:")),
        ),
        (
            "os.memory.total",
            mem(meminfo_kb("/proc/self/status", "VmRSS:")),
        ),
    ];
    entries.into()
}

/// The user's name and home directory from the password database, as
/// Java's user.name and user.home.
fn passwd_entry() -> Option<(String, String)> {
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes into `pwd` and `buf` (of the length given)
    // and sets `result` to `&pwd` or null; the strings read below point into
    // `buf`, which outlives them.
    unsafe {
        let rc = libc::getpwuid_r(
            libc::getuid(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        );
        if rc != 0 || result.is_null() || pwd.pw_name.is_null() || pwd.pw_dir.is_null() {
            return None;
        }
        let name = std::ffi::CStr::from_ptr(pwd.pw_name)
            .to_string_lossy()
            .into_owned();
        let home = std::ffi::CStr::from_ptr(pwd.pw_dir)
            .to_string_lossy()
            .into_owned();
        Some((name, home))
    }
}

/// A "Key:   123 kB" line of a /proc file.
fn meminfo_kb(file: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// WatchManager.toString over the data watches of every shard.
fn wchs(out: &mut String, view: &View) {
    let mut paths: HashSet<&str> = HashSet::new();
    let (mut watchers, mut total) = (0usize, 0usize);
    for (_, ps) in view.shards.iter().flat_map(|s| s.data_watches.iter()) {
        watchers += 1;
        total += ps.len();
        paths.extend(ps.iter().map(String::as_str));
    }
    let _ = writeln!(
        out,
        "{watchers} connections watching {} paths\nTotal watches:{total}",
        paths.len()
    );
}

/// WatchManager.dumpWatches(byPath = false). Watchers come in session id
/// order (ZooKeeper's order is their identity hashes'); each watcher's
/// paths in Java HashSet order.
fn wchc(out: &mut String, view: &View) {
    let mut by_session: Vec<(i64, Vec<&str>)> = view
        .shards
        .iter()
        .flat_map(|s| s.data_watches.iter())
        .map(|(sid, ps)| (*sid, ps.iter().map(String::as_str).collect()))
        .collect();
    by_session.sort_by_key(|(sid, _)| *sid);
    for (sid, mut paths) in by_session {
        paths.sort_unstable();
        javafmt::string_order(&mut paths, Table::HashMap);
        let _ = writeln!(out, "0x{sid:x}");
        for p in paths {
            let _ = writeln!(out, "\t{p}");
        }
    }
    out.push('\n');
}

/// WatchManager.dumpWatches(byPath = true): paths in Java HashMap order,
/// each path's watchers by session id.
fn wchp(out: &mut String, view: &View) {
    let mut by_path: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for (sid, ps) in view.shards.iter().flat_map(|s| s.data_watches.iter()) {
        for p in ps {
            by_path.entry(p.as_str()).or_default().push(*sid);
        }
    }
    let mut paths: Vec<(&str, Vec<i64>)> = by_path.into_iter().collect();
    javafmt::hash_order(&mut paths, Table::HashMap, |(p, _)| {
        crate::java_compat::string_hash(p)
    });
    for (p, mut sids) in paths {
        sids.sort_unstable();
        let _ = writeln!(out, "{p}");
        for sid in sids {
            let _ = writeln!(out, "\t0x{sid:x}");
        }
    }
    out.push('\n');
}

/// ExpiryQueue.roundToNextInterval.
fn round_to_next_interval(time: i64, interval: i64) -> i64 {
    (time / interval + 1) * interval
}

/// ExpiryQueue.dump: "Sets (n)/(m):", then each expiry time's set.
fn expiry_sets(out: &mut String, what: &str, items: Vec<(i64, String)>) {
    let mut sets: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    let count = items.len();
    for (expiry, line) in items {
        sets.entry(expiry).or_default().push(line);
    }
    let _ = writeln!(out, "{what} Sets ({})/({count}):", sets.len());
    for (expiry, lines) in sets {
        let wall = javafmt::elapsed_to_wall_ms(expiry);
        let _ = writeln!(out, "{} expire at {}:", lines.len(), javafmt::date(wall));
        for l in lines {
            let _ = writeln!(out, "\t{l}");
        }
    }
}

/// DumpCommand. The session tracker part lists every session of the core's
/// tracker (the answering shard adds those without a connection to its
/// report); expiry times are ZooKeeper's: last packet + timeout, rounded up
/// to the next tick.
fn dump(out: &mut String, view: &View) {
    out.push_str("SessionTracker dump:\n");
    let tick = view.config.tick_time_ms.max(1) as i64;
    let mut sessions: Vec<(i64, i64, String)> = view
        .shards
        .iter()
        .flat_map(|s| s.sessions.iter())
        .map(|s| {
            let expiry = round_to_next_interval(s.last_heard_ms + s.timeout_ms as i64, tick);
            (expiry, s.id, format!("0x{:x}", s.id))
        })
        .collect();
    sessions.sort_by_key(|(e, id, _)| (*e, *id));
    expiry_sets(
        out,
        "Session",
        sessions.into_iter().map(|(e, _, l)| (e, l)).collect(),
    );

    out.push_str("ephemeral nodes dump:\n");
    let mut eph: Vec<&(i64, Vec<String>)> = view.tree.ephemerals.iter().collect();
    eph.sort_by_key(|(sid, _)| *sid);
    javafmt::hash_order(&mut eph, Table::Concurrent, |(sid, _)| {
        javafmt::long_hash(*sid)
    });
    let _ = writeln!(out, "Sessions with Ephemerals ({}):", eph.len());
    for (sid, paths) in eph {
        let mut paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        paths.sort_unstable();
        javafmt::string_order(&mut paths, Table::HashMap);
        let _ = writeln!(out, "0x{sid:x}:");
        for p in paths {
            let _ = writeln!(out, "\t{p}");
        }
    }

    out.push_str("Connections dump:\n");
    let mut conns: Vec<(i64, String)> = view
        .conns()
        .map(|c| {
            let timeout = if c.session_id != 0 {
                c.timeout_ms as i64
            } else {
                CNXN_EXPIRY_INTERVAL_MS
            };
            let expiry = round_to_next_interval(c.last_heard_ms + timeout, CNXN_EXPIRY_INTERVAL_MS);
            let line = format!(
                "ip: {} sessionId: 0x{:x}",
                javafmt::socket_address(c.peer),
                c.session_id
            );
            (expiry, line)
        })
        .collect();
    conns.sort();
    expiry_sets(out, "Connections", conns);
}

/// ZooKeeperServer.getState: ReadOnlyZooKeeperServer says "read-only".
pub(crate) fn server_state(view: &View) -> &'static str {
    if view.read_only {
        return "read-only";
    }
    match view.role {
        ServerRole::Standalone => "standalone",
        ServerRole::Looking => "looking",
        ServerRole::Follower => "follower",
        ServerRole::Leader => "leader",
    }
}

fn mntr(out: &mut String, view: &View) {
    let t = &view.totals;
    let e = &view.ensemble;
    for key in super::monitor::KEYS {
        let value = match key {
            "version" => full_version(),
            "server_state" => server_state(view).to_string(),
            "unrecoverable_error_count" => view.unrecoverable_errors.to_string(),
            "ephemerals_count" => view.tree.ephemerals_count.to_string(),
            "num_alive_connections" => t.connections.to_string(),
            "avg_latency" => javafmt::double(t.latency_avg_ms),
            "min_latency" => t.latency_min_ms.to_string(),
            "max_latency" => t.latency_max_ms.to_string(),
            "outstanding_requests" => t.outstanding.to_string(),
            "znode_count" => view.tree.node_count.to_string(),
            "global_sessions" => view.counts.sessions.to_string(),
            "packets_sent" => t.packets_sent.to_string(),
            "packets_received" => t.packets_received.to_string(),
            "watch_count" => view.counts.watch_count.to_string(),
            "approximate_data_size" => view.tree.approximate_data_size.to_string(),
            "open_file_descriptor_count" => open_fds().to_string(),
            "max_file_descriptor_count" => max_fds().to_string(),
            "uptime" => t.uptime_ms.to_string(),
            "connection_rejected" => t.connections_rejected.to_string(),
            "connection_drop_count" => t.connection_drops.to_string(),
            "proposal_count" => e.proposal_count.to_string(),
            "snap_count" => e.snap_syncs.to_string(),
            "diff_count" => e.diff_syncs.to_string(),
            "learner_proposal_received_count" => e.learner_proposals_received.to_string(),
            "learner_commit_received_count" => e.learner_commits_received.to_string(),
            "avg_election_time" if e.election_count > 0 => {
                javafmt::double(e.election_sum_ms as f64 / e.election_count as f64)
            }
            "min_election_time" => e.election_min_ms.to_string(),
            "max_election_time" => e.election_max_ms.to_string(),
            "cnt_election_time" => e.election_count.to_string(),
            "sum_election_time" => e.election_sum_ms.to_string(),
            other => super::monitor::unmapped(other).to_string(),
        };
        let _ = writeln!(out, "zk_{key}\t{value}");
        if matches!(view.role, ServerRole::Leader | ServerRole::Follower) {
            for (key, value) in ensemble_keys_after(key, view) {
                let _ = writeln!(out, "zk_{key}\t{value}");
            }
        }
        if key == "server_state" && view.ensemble.awaiting_resync {
            // Mostly while looking: it waits for a leader to join.
            let _ = writeln!(out, "zk_lost_disk_awaiting_sync\t1");
        }
    }
}

/// The keys an ensemble member adds to mntr, where ZooKeeper 3.8 prints
/// them: after `key` (captured from a 3.8.0 leader and follower).
fn ensemble_keys_after(key: &str, view: &View) -> Vec<(&'static str, String)> {
    let e = &view.ensemble;
    let leading = view.role == ServerRole::Leader;
    match key {
        "server_state" => {
            let who = if leading { "leading" } else { "following" };
            vec![("peer_state", format!("{who} - {}", e.phase))]
        }
        "avg_latency" if leading => vec![("min_proposal_size", e.min_proposal_bytes.to_string())],
        "packets_received" if leading => {
            vec![("max_proposal_size", e.max_proposal_bytes.to_string())]
        }
        "max_client_response_size" if leading => {
            vec![("synced_followers", e.synced_followers.to_string())]
        }
        // Observers are not supported yet (their lines stop startup).
        "watch_count" if leading => vec![
            ("synced_non_voting_followers", "0".into()),
            ("synced_observers", "0".into()),
        ],
        "open_file_descriptor_count" if leading => vec![
            ("last_proposal_size", e.last_proposal_bytes.to_string()),
            ("pending_syncs", e.pending_syncs.to_string()),
            ("leader_uptime", e.leader_uptime_ms.to_string()),
        ],
        "outstanding_tls_handshake" if leading => vec![("learners", e.learners.to_string())],
        "non_mtls_local_conn_count" => vec![("quorum_size", e.quorum_size.to_string())],
        _ => Vec::new(),
    }
}

/// OSMXBean.getOpenFileDescriptorCount.
pub(crate) fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .unwrap_or(0)
}

/// OSMXBean.getMaxFileDescriptorCount: the soft RLIMIT_NOFILE.
pub(crate) fn max_fds() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::report::SessionInfo;

    fn view(config: &Config) -> View {
        View {
            config: Arc::new(config.clone()),
            totals: Totals::default(),
            shards: vec![],
            counts: ShardCounts::default(),
            tree: TreeFacts::default(),
            trace_mask: 306,
            read_only: false,
            role: crate::admin::health::ServerRole::Standalone,
            unrecoverable_errors: 0,
            ensemble: Default::default(),
            leader_id: None,
            last_snapshot: None,
        }
    }

    fn conn(port: u16, sid: i64) -> ConnInfo {
        ConnInfo {
            peer: format!("127.0.0.1:{port}").parse().unwrap(),
            interest: 1,
            queued: 0,
            received: 6,
            sent: 6,
            session_id: sid,
            last_op: "GETC",
            established_ms: 1_795_320_803_334,
            timeout_ms: 30_000,
            last_cxid: 5,
            last_zxid: 6,
            last_response_ms: 3_115_035,
            last_latency_ms: 0,
            min_latency_ms: 0,
            avg_latency_ms: 1,
            max_latency_ms: 2,
            last_heard_ms: 1000,
        }
    }

    /// As a ZooKeeper 3.8.0 member whose quorum is gone answers them.
    #[test]
    fn a_member_that_is_not_serving_answers_as_zookeeper_does() {
        let mut v = view(&Config::embedded_default());
        v.role = crate::admin::health::ServerRole::Looking;
        let line = "This ZooKeeper instance is not currently serving requests";
        for w in [
            "conf", "cons", "crst", "dirs", "dump", "mntr", "srst", "srvr", "stat", "wchc", "wchp",
            "wchs",
        ] {
            assert_eq!(answer(w, &v).unwrap(), format!("{line}\n"), "{w}");
        }
        assert_eq!(answer("hash", &v).unwrap(), line);
        assert_eq!(answer("isro", &v).unwrap(), "null");
        assert_eq!(answer("ruok", &v).unwrap(), "imok");
        assert_eq!(answer("gtmk", &v).unwrap(), "306");
        assert!(answer("envi", &v).unwrap().starts_with("Environment:\n"));
        // The AdminServer's monitor still has the values.
        assert!(mntr_lines(&v).contains("zk_server_state\tlooking\n"));
        // A member waiting for a resync says so in mntr too.
        v.ensemble.awaiting_resync = true;
        assert_eq!(
            answer("mntr", &v).unwrap(),
            format!("{line}\nzk_lost_disk_awaiting_sync\t1\n")
        );
        // Read-only, a server runs.
        v.read_only = true;
        assert_eq!(answer("isro", &v).unwrap(), "ro");
        assert!(answer("mntr", &v)
            .unwrap()
            .contains("zk_server_state\tread-only"));
    }

    #[test]
    fn words_are_recognised() {
        assert_eq!(word_of(*b"ruok"), Some("ruok"));
        assert_eq!(word_of(*b"srvr"), Some("srvr"));
        assert_eq!(word_of([0, 0, 0, 45]), None);
        assert_eq!(word_of(TELNET_CLOSE), Some("telnet close"));
    }

    #[test]
    fn whitelist_refusal_text() {
        let config = Config::embedded_default();
        assert_eq!(refusal("srvr", &config), None);
        assert_eq!(
            refusal("ruok", &config).unwrap(),
            "ruok is not executed because it is not in the whitelist.\n"
        );
        assert_eq!(
            refusal("telnet close", &config).unwrap(),
            "telnet close is not executed because it is not in the whitelist.\n"
        );
    }

    #[test]
    fn srvr_has_zookeepers_nine_lines() {
        let config = Config::embedded_default();
        let mut v = view(&config);
        v.totals = Totals {
            last_zxid: 0x1909,
            node_count: 5,
            ..Default::default()
        };
        let out = answer("srvr", &v).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 9);
        assert!(lines[0].starts_with("Zookeeper version: 3.9.3-ringkeeper-"));
        assert!(lines[0].ends_with(" UTC"));
        assert_eq!(lines[1], "Latency min/avg/max: 0/0.0/0");
        assert_eq!(lines[6], "Zxid: 0x1909");
        assert_eq!(lines[7], "Mode: standalone");
        assert_eq!(lines[8], "Node count: 5");
    }

    #[test]
    fn read_only_words_match_read_only_zookeeper_server() {
        let config = Config::embedded_default();
        let mut v = view(&config);
        v.read_only = true;
        v.unrecoverable_errors = 1;
        assert_eq!(answer("isro", &v).unwrap(), "ro");
        assert_eq!(answer("ruok", &v).unwrap(), "imok");
        let out = answer("srvr", &v).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 10);
        assert_eq!(lines[1], "READ-ONLY mode; serving only read-only clients");
        assert_eq!(lines[8], "Mode: read-only");
        let mntr = answer("mntr", &v).unwrap();
        assert!(mntr.contains("\nzk_server_state\tread-only\n"));
        assert!(mntr.contains("\nzk_unrecoverable_error_count\t1\n"));
    }

    #[test]
    fn cons_lines_match_zookeeper() {
        let config = Config::embedded_default();
        let mut v = view(&config);
        let mut word_conn = conn(43464, 0);
        word_conn.interest = 0;
        word_conn.received = 1;
        word_conn.sent = 0;
        v.shards = vec![Arc::new(ShardReport {
            conns: vec![conn(43442, 0x100002f5bd30001), word_conn],
            ..Default::default()
        })];
        assert_eq!(
            answer("cons", &v).unwrap(),
            " /127.0.0.1:43442[1](queued=0,recved=6,sent=6,sid=0x100002f5bd30001,lop=GETC,\
             est=1795320803334,to=30000,lcxid=0x5,lzxid=0x6,lresp=3115035,llat=0,minlat=0,\
             avglat=1,maxlat=2)\n /127.0.0.1:43464[0](queued=0,recved=1,sent=0)\n\n"
        );
        // After crst: no lcxid, lzxid -1 as Java prints it.
        let mut reset = conn(1, 0x10);
        reset.last_cxid = -1;
        reset.last_zxid = -1;
        v.shards = vec![Arc::new(ShardReport {
            conns: vec![reset],
            ..Default::default()
        })];
        let out = answer("cons", &v).unwrap();
        assert!(out.contains(",to=30000,lzxid=0xffffffffffffffff,"), "{out}");
    }

    #[test]
    fn watch_words_match_zookeeper() {
        let config = Config::embedded_default();
        let mut v = view(&config);
        let w = |sid: i64, ps: &[&str]| (sid, ps.iter().map(|p| p.to_string()).collect());
        v.shards = vec![
            Arc::new(ShardReport {
                data_watches: vec![w(0x101, &["/nope", "/a"])],
                ..Default::default()
            }),
            Arc::new(ShardReport {
                data_watches: vec![w(0x100, &["/a"])],
                ..Default::default()
            }),
        ];
        assert_eq!(
            answer("wchs", &v).unwrap(),
            "2 connections watching 2 paths\nTotal watches:3\n"
        );
        assert_eq!(
            answer("wchc", &v).unwrap(),
            "0x100\n\t/a\n0x101\n\t/a\n\t/nope\n\n"
        );
        assert_eq!(
            answer("wchp", &v).unwrap(),
            "/a\n\t0x100\n\t0x101\n/nope\n\t0x101\n\n"
        );
    }

    #[test]
    fn dump_has_zookeepers_sections() {
        let mut config = Config::embedded_default();
        config.tick_time_ms = 2000;
        let mut v = view(&config);
        v.shards = vec![Arc::new(ShardReport {
            conns: vec![conn(5000, 0x100), conn(5001, 0)],
            sessions: vec![SessionInfo {
                id: 0x100,
                timeout_ms: 30_000,
                last_heard_ms: 1000,
            }],
            ..Default::default()
        })];
        v.tree.ephemerals = vec![(0x100, vec!["/a/e".to_string()])];
        let out = answer("dump", &v).unwrap();
        let shape: Vec<String> = out
            .lines()
            .map(|l| match l.find(" expire at ") {
                Some(i) => format!("{} expire at DATE:", &l[..i]),
                None => l.to_string(),
            })
            .collect();
        assert_eq!(
            shape,
            [
                "SessionTracker dump:",
                "Session Sets (1)/(1):",
                "1 expire at DATE:",
                "\t0x100",
                "ephemeral nodes dump:",
                "Sessions with Ephemerals (1):",
                "0x100:",
                "\t/a/e",
                "Connections dump:",
                "Connections Sets (2)/(2):",
                "1 expire at DATE:",
                "\tip: /127.0.0.1:5001 sessionId: 0x0",
                "1 expire at DATE:",
                "\tip: /127.0.0.1:5000 sessionId: 0x100",
            ]
        );
    }

    #[test]
    fn mntr_prints_every_key_once() {
        let config = Config::embedded_default();
        let v = view(&config);
        let out = answer("mntr", &v).unwrap();
        let keys: Vec<&str> = out.lines().map(|l| l.split('\t').next().unwrap()).collect();
        assert_eq!(keys.len(), crate::admin::monitor::KEYS.len());
        assert_eq!(keys[0], "zk_version");
        assert_eq!(keys[1], "zk_server_state");
        let unique: HashSet<&str> = keys.iter().copied().collect();
        assert_eq!(unique.len(), keys.len());
        assert!(out.contains("\nzk_avg_latency\t0.0\n"));
        assert!(out.contains("\nzk_last_client_response_size\t-1\n"));
        assert!(out.contains("\nzk_avg_fsynctime\t0.0\n"));
        assert!(out.contains("\nzk_p99_readlatency\t0\n"));
    }
}
