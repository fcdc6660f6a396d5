//! Normalization of server-specific values so two servers can be compared:
//! zxids become their order of first appearance (`z0`, `z1`, ...), session ids
//! become the role name of the session that owns them, and times are checked
//! for consistency (a time is a function of the zxid of its transaction and is
//! monotone in zxid) instead of being compared by value.

use std::collections::{BTreeMap, HashMap};

use super::wire::Stat;

/// ephemeralOwner of container nodes in ZooKeeper (EphemeralType.CONTAINER).
pub const CONTAINER_OWNER: i64 = i64::MIN;

pub struct Norm {
    zxids: HashMap<i64, usize>,
    /// zxid -> time (ms) of its transaction, learned from ctime/mtime.
    times: BTreeMap<i64, i64>,
    sessions: HashMap<i64, String>,
    unknown_sessions: HashMap<i64, usize>,
    /// Last header zxid seen per session (role name), to check monotonicity.
    last_hdr: HashMap<String, i64>,
    /// Include reply-header zxids in the zxid order map (RK_DIFF_STRICT_ZXID=1).
    /// Strict mode requires the same zxid consumption as ZooKeeper: failed
    /// writes, createSession and closeSession each take a zxid there.
    pub strict_hdr: bool,
    now_ms: i64,
}

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

impl Default for Norm {
    fn default() -> Self {
        Self::new()
    }
}

impl Norm {
    pub fn new() -> Norm {
        Norm {
            zxids: HashMap::new(),
            times: BTreeMap::new(),
            sessions: HashMap::new(),
            unknown_sessions: HashMap::new(),
            last_hdr: HashMap::new(),
            strict_hdr: std::env::var("RK_DIFF_STRICT_ZXID").is_ok_and(|v| v == "1"),
            now_ms: wall_ms(),
        }
    }

    pub fn register_session(&mut self, id: i64, name: &str) {
        self.sessions.insert(id, name.to_string());
    }

    pub fn zxid(&mut self, z: i64) -> String {
        if z <= 0 {
            return z.to_string();
        }
        let n = self.zxids.len();
        let idx = *self.zxids.entry(z).or_insert(n);
        format!("z{idx}")
    }

    /// A zxid only if already known (does not create an order entry).
    fn known_zxid(&self, z: i64) -> Option<String> {
        if z <= 0 {
            return Some(z.to_string());
        }
        self.zxids.get(&z).map(|i| format!("z{i}"))
    }

    pub fn owner(&mut self, eo: i64) -> String {
        if eo == 0 {
            return "0".into();
        }
        if eo == CONTAINER_OWNER {
            return "CONTAINER".into();
        }
        if (eo as u64) >> 56 == 0xff {
            // TTL node: 0xFF in the top byte, the ttl in the low bytes.
            return format!("TTL({})", eo & 0x00ff_ffff_ffff_ffff);
        }
        if let Some(n) = self.sessions.get(&eo) {
            return n.clone();
        }
        let n = self.unknown_sessions.len();
        let idx = *self.unknown_sessions.entry(eo).or_insert(n);
        format!("?session{idx}")
    }

    /// Checks `t` as the time of transaction `zxid`; returns "" when
    /// consistent, or a marker.
    fn time(&mut self, zxid: i64, t: i64) -> String {
        if zxid <= 0 {
            return if t == 0 {
                String::new()
            } else {
                "(t!=0)".into()
            };
        }
        if let Some(&known) = self.times.get(&zxid) {
            return if known == t {
                String::new()
            } else {
                "(t-differs-for-same-zxid)".into()
            };
        }
        let mut marks = String::new();
        if let Some((_, &prev)) = self.times.range(..zxid).next_back() {
            if prev > t {
                marks.push_str("(t<earlier-zxid)");
            }
        }
        if let Some((_, &next)) = self.times.range(zxid + 1..).next() {
            if next < t {
                marks.push_str("(t>later-zxid)");
            }
        }
        if (t - self.now_ms).abs() > 86_400_000 {
            marks.push_str("(t-implausible)");
        }
        self.times.insert(zxid, t);
        marks
    }

    pub fn stat(&mut self, s: &Stat) -> String {
        let c = self.zxid(s.czxid);
        let m = self.zxid(s.mzxid);
        let p = self.zxid(s.pzxid);
        let ct = self.time(s.czxid, s.ctime);
        let mt = self.time(s.mzxid, s.mtime);
        let eo = self.owner(s.ephemeral_owner);
        format!(
            "{{c={c}{ct} m={m}{mt} p={p} v={} cv={} av={} eo={eo} len={} nc={}}}",
            s.version, s.cversion, s.aversion, s.data_length, s.num_children
        )
    }

    /// Normalized form of a reply-header zxid for session `who`. Returns ""
    /// when the (non-strict) invariants hold: never below the previous header
    /// zxid of the same session and, when `expect` is given (the zxid of the
    /// write's own transaction), equal to it.
    pub fn hdr_zxid(&mut self, who: &str, z: i64, expect: Option<i64>) -> String {
        let mut marks = String::new();
        if let Some(&last) = self.last_hdr.get(who) {
            if z < last {
                marks.push_str(" !hdr-zxid-went-backwards");
            }
        }
        self.last_hdr.insert(who.to_string(), z);
        if let Some(e) = expect {
            if e != z {
                marks.push_str(" !hdr-zxid-is-not-the-txn-zxid");
            }
        }
        if self.strict_hdr {
            let n = self.zxid(z);
            marks.push_str(&format!(" hz={n}"));
        }
        marks
    }

    /// Normalized zxid carried by a notification (ZooKeeper 3.8 sends -1).
    pub fn event_zxid(&mut self, z: i64) -> String {
        if z == -1 {
            return "-1".into();
        }
        self.known_zxid(z).unwrap_or_else(|| "z?".into())
    }
}
