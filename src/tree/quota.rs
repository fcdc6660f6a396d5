//! Quota accounting as Apache ZooKeeper's DataTree does it: a node
//! /zookeeper/quota/<path>/zookeeper_limits makes <path> a quota root; the
//! sibling zookeeper_stats node holds "count=N,bytes=M" for the subtree and
//! is rewritten in place (no zxid, no version) as the subtree changes. Only
//! the deepest quota root above a changed node is updated.

use std::sync::Arc;

use super::{path::split_parent, Tree, QUOTA_PATH};

pub const LIMIT_NODE: &str = "zookeeper_limits";
pub const STAT_NODE: &str = "zookeeper_stats";

impl Tree {
    /// Called after `path` was created with `bytes` of data.
    pub(super) fn quota_on_create(&mut self, path: &str, bytes: i64) {
        if let Some((parent, child)) = split_parent(path) {
            if let Some(root) = parent.strip_prefix(QUOTA_PATH) {
                if child == LIMIT_NODE {
                    self.quota_roots.insert(Arc::from(root));
                }
                if child == STAT_NODE {
                    self.recount_quota(root);
                }
            }
        }
        self.update_quota_stat(path, bytes, 1);
    }

    /// Called after `path`, which held `bytes` of data, was deleted.
    pub(super) fn quota_on_delete(&mut self, path: &str, bytes: i64) {
        if let Some((parent, child)) = split_parent(path) {
            if parent.starts_with(super::ZOOKEEPER_PATH) && child == LIMIT_NODE {
                let root = parent.strip_prefix(QUOTA_PATH).unwrap_or(parent);
                self.quota_roots.remove(root);
            }
        }
        self.update_quota_stat(path, -bytes, -1);
    }

    pub(super) fn quota_on_set(&mut self, path: &str, bytes_diff: i64) {
        self.update_quota_stat(path, bytes_diff, 0);
    }

    /// PathTrie.findMaxPrefix: the deepest quota root at or above `path`
    /// ("/" never counts).
    fn quota_prefix(&self, path: &str) -> Option<Arc<str>> {
        if self.quota_roots.is_empty() {
            return None;
        }
        // Every prefix ending at a '/' boundary, and the path itself.
        let ends = path
            .match_indices('/')
            .map(|(i, _)| i)
            .filter(|&i| i > 0)
            .chain(std::iter::once(path.len()));
        let mut best = None;
        for end in ends {
            if let Some(r) = self.quota_roots.get(&path[..end]) {
                best = Some(r.clone());
            }
        }
        best
    }

    fn update_quota_stat(&mut self, path: &str, bytes_diff: i64, count_diff: i64) {
        let Some(root) = self.quota_prefix(path) else {
            return;
        };
        let stat_path = format!("{QUOTA_PATH}{root}/{STAT_NODE}");
        let Some(node) = self.get(&stat_path) else {
            tracing::error!(%stat_path, "missing quota stat node");
            return;
        };
        let mut stats = StatsTrack::parse(node.data().unwrap_or(&[]));
        stats.count += count_diff;
        stats.bytes += bytes_diff;
        self.replace_data(&stat_path, stats.to_string());
    }

    /// DataTree.updateQuotaForPath: counts the subtree afresh.
    fn recount_quota(&mut self, root: &str) {
        let (mut count, mut bytes) = (0i64, 0i64);
        let mut stack = vec![root.to_string()];
        while let Some(p) = stack.pop() {
            let Some(n) = self.get(&p) else { continue };
            count += 1;
            bytes += n.data_len() as i64;
            for c in n.children.sorted() {
                stack.push(super::join(&p, c));
            }
        }
        let stat_path = format!("{QUOTA_PATH}{root}/{STAT_NODE}");
        if self.get(&stat_path).is_some() {
            let s = StatsTrack {
                count,
                bytes,
                extra: Vec::new(),
            };
            self.replace_data(&stat_path, s.to_string());
        }
    }

    /// Rewrites a node's data without touching its stat (quota stats only).
    fn replace_data(&mut self, path: &str, text: String) {
        let old = self.update(path, |node| {
            let old = node.data_len() as u64;
            node.set_data(Some(text.as_bytes()));
            old
        });
        self.data_bytes = self.data_bytes - old + text.len() as u64;
    }
}

impl Tree {
    /// ZooKeeperServer.checkQuota, for prep when `enforceQuota` is set: a
    /// change of `count_diff` nodes and `bytes_diff` data bytes at `path`,
    /// checked against the limits of its deepest quota root. A soft limit
    /// (`count`, `bytes`) is only logged; a hard one (`countHardLimit`,
    /// `byteHardLimit`, which wins when both are set) refuses with
    /// QUOTAEXCEEDED. Limits ZooKeeper cannot parse (its StatsTrack throws)
    /// fail the request with MARSHALLINGERROR, as there.
    pub fn check_quota(&self, path: &str, bytes_diff: i64, count_diff: i64) -> Result<(), i32> {
        let Some(root) = self.quota_prefix(path) else {
            return Ok(());
        };
        let limit_path = format!("{QUOTA_PATH}{root}/{LIMIT_NODE}");
        let Some(limit_node) = self.get(&limit_path) else {
            tracing::error!("Missing limit node for quota {limit_path}");
            return Ok(());
        };
        let limits = parse_or_marshalling_error(limit_node, path)?;
        let check_count =
            count_diff != 0 && (limits.get(COUNT) > -1 || limits.get(COUNT_HARD_LIMIT) > -1);
        let check_bytes =
            bytes_diff != 0 && (limits.get(BYTES) > -1 || limits.get(BYTE_HARD_LIMIT) > -1);
        if !check_count && !check_bytes {
            return Ok(());
        }
        let stat_path = format!("{QUOTA_PATH}{root}/{STAT_NODE}");
        let Some(stat_node) = self.get(&stat_path) else {
            tracing::error!("Missing node for stat {stat_path}");
            return Ok(());
        };
        let current = parse_or_marshalling_error(stat_node, path)?;
        if check_count {
            let hard = limits.get(COUNT_HARD_LIMIT);
            let new = current.get(COUNT) + count_diff;
            check_limit(&root, "count", "Count", new, hard, limits.get(COUNT))?;
        }
        if check_bytes {
            let hard = limits.get(BYTE_HARD_LIMIT);
            let new = current.get(BYTES) + bytes_diff;
            check_limit(&root, "bytes", "Byte", new, hard, limits.get(BYTES))?;
        }
        Ok(())
    }
}

const COUNT: &str = "count";
const BYTES: &str = "bytes";
const COUNT_HARD_LIMIT: &str = "countHardLimit";
const BYTE_HARD_LIMIT: &str = "byteHardLimit";

fn parse_or_marshalling_error(node: &super::Node, path: &str) -> Result<StatsTrack, i32> {
    let data = node.data().unwrap_or(&[]);
    StatsTrack::parse_java(data).ok_or_else(|| {
        // PrepRequestProcessor: "Failed to process", then MARSHALLINGERROR.
        tracing::error!(
            path,
            "Failed to process: quota data {:?} is not a StatsTrack",
            String::from_utf8_lossy(data)
        );
        crate::proto::codes::err::MARSHALLING_ERROR
    })
}

/// One limit of ZooKeeperServer.checkQuota: the hard limit when set, else
/// the soft one; past it the message is logged, and a hard limit refuses.
fn check_limit(
    root: &str,
    what: &str,
    kind: &str,
    new: i64,
    hard: i64,
    soft: i64,
) -> Result<(), i32> {
    let is_hard = hard > -1;
    let limit = if is_hard { hard } else { soft };
    if new <= limit {
        return Ok(());
    }
    let level = if is_hard { "hard" } else { "soft" };
    let msg = format!("Quota exceeded: {root} [current {what}={new}, {level}{kind}Limit={limit}]");
    QUOTA_LOG.with(|l| l.borrow_mut().log(msg, std::time::Instant::now()));
    if is_hard {
        Err(crate::proto::codes::err::QUOTA_EXCEEDED)
    } else {
        Ok(())
    }
}

thread_local! {
    /// ZooKeeperServer's RATE_LOGGER. Only the consensus core preps, so
    /// one per thread is one per server.
    static QUOTA_LOG: std::cell::RefCell<RateLogger> =
        const { std::cell::RefCell::new(RateLogger::new()) };
}

/// org.apache.zookeeper.server.RateLogger with its 100 ms interval: a new
/// message is logged at once; repeats of it are counted and logged as
/// "[N times] Message: ..." when the interval has passed or another
/// message comes.
pub struct RateLogger {
    msg: Option<String>,
    since: Option<std::time::Instant>,
    count: u64,
}

const RATE_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

impl RateLogger {
    pub const fn new() -> RateLogger {
        RateLogger {
            msg: None,
            since: None,
            count: 0,
        }
    }

    /// Logs `msg` as ZooKeeper's RateLogger would; returns the lines written.
    pub fn log(&mut self, msg: String, now: std::time::Instant) -> Vec<String> {
        let mut lines = Vec::new();
        if self.msg.as_deref() == Some(msg.as_str()) {
            self.count += 1;
            let due = self
                .since
                .is_none_or(|t| now.duration_since(t) >= RATE_LOG_INTERVAL);
            if due {
                lines.extend(self.flush());
                self.msg = Some(msg);
                self.since = Some(now);
            }
        } else {
            lines.extend(self.flush());
            lines.push(format!("Message:{msg} Value:null"));
            self.msg = Some(msg);
            self.since = Some(now);
        }
        for l in &lines {
            tracing::warn!("{l}");
        }
        lines
    }

    fn flush(&mut self) -> Option<String> {
        let msg = self.msg.take()?;
        let count = std::mem::take(&mut self.count);
        if count == 0 {
            return None;
        }
        let times = if count > 1 {
            format!("[{count} times] ")
        } else {
            String::new()
        };
        Some(format!("{times}Message: {msg}"))
    }
}

impl Default for RateLogger {
    fn default() -> Self {
        Self::new()
    }
}

/// org.apache.zookeeper.StatsTrack: "count=N,bytes=M" and, after an extra
/// "=", further ";key=value" pairs in key order.
#[derive(Debug, PartialEq, Eq)]
pub struct StatsTrack {
    pub count: i64,
    pub bytes: i64,
    pub extra: Vec<(String, i64)>,
}

impl StatsTrack {
    pub fn parse(data: &[u8]) -> StatsTrack {
        let mut s = StatsTrack {
            count: -1,
            bytes: -1,
            extra: Vec::new(),
        };
        let text = String::from_utf8_lossy(data);
        for pair in text.split([',', ';']).filter(|p| !p.is_empty()) {
            let mut kv = pair.split('=');
            let key = kv.next().unwrap_or("");
            let value = kv
                .next()
                .filter(|v| !v.is_empty())
                .and_then(|v| v.parse().ok())
                .unwrap_or(-1);
            match key {
                "count" => s.count = value,
                "bytes" => s.bytes = value,
                k => match s.extra.iter_mut().find(|(ek, _)| ek == k) {
                    Some(e) => e.1 = value,
                    None => s.extra.push((k.to_string(), value)),
                },
            }
        }
        s.extra.sort();
        s
    }

    /// `new StatsTrack(String)` exactly as Java parses: pairs split on runs
    /// of ',' and ';' (a leading empty pair kept, trailing ones dropped),
    /// each pair split on '=' with trailing empty parts dropped, the second
    /// part a Long ("" means -1). None where Java throws: a pair without a
    /// value ("count=", "", "="), or a value Long.parseLong refuses.
    pub fn parse_java(data: &[u8]) -> Option<StatsTrack> {
        let mut s = StatsTrack {
            count: -1,
            bytes: -1,
            extra: Vec::new(),
        };
        let text = String::from_utf8_lossy(data);
        if text.is_empty() {
            return Some(s);
        }
        let separators = [',', ';'];
        let mut pairs: Vec<&str> = text.split(separators).filter(|p| !p.is_empty()).collect();
        if text.starts_with(separators) && !pairs.is_empty() {
            pairs.insert(0, "");
        }
        for pair in pairs {
            let kv = crate::java_compat::split(pair, '=');
            let (key, value) = (kv.first()?, kv.get(1)?);
            let value = if value.is_empty() {
                -1
            } else {
                crate::java_compat::parse_long(value)?
            };
            s.set(key, value);
        }
        s.extra.sort();
        Some(s)
    }

    /// A value by key; -1 when absent (StatsTrack.getValue).
    pub fn get(&self, key: &str) -> i64 {
        match key {
            COUNT => self.count,
            BYTES => self.bytes,
            k => self
                .extra
                .iter()
                .find(|(ek, _)| ek == k)
                .map_or(-1, |e| e.1),
        }
    }

    fn set(&mut self, key: &str, value: i64) {
        match key {
            COUNT => self.count = value,
            BYTES => self.bytes = value,
            k => match self.extra.iter_mut().find(|(ek, _)| ek == k) {
                Some(e) => e.1 = value,
                None => self.extra.push((k.to_string(), value)),
            },
        }
    }
}

impl std::fmt::Display for StatsTrack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "count={},bytes={}", self.count, self.bytes)?;
        if !self.extra.is_empty() {
            f.write_str("=")?;
            for (k, v) in &self.extra {
                write!(f, ";{k}={v}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_track_parses_as_java_does() {
        let p = |s: &str| StatsTrack::parse_java(s.as_bytes()).map(|t| t.to_string());
        let ok = |s: &str| Some(s.to_string());
        assert_eq!(p(""), ok("count=-1,bytes=-1"));
        assert_eq!(p(",;,"), ok("count=-1,bytes=-1"));
        assert_eq!(
            p("count=-1,bytes=-1=;byteHardLimit=10;countHardLimit=5"),
            ok("count=-1,bytes=-1=;byteHardLimit=10;countHardLimit=5")
        );
        assert_eq!(p("count=10,bytes=-1"), ok("count=10,bytes=-1"));
        assert_eq!(p("count==1"), ok("count=-1,bytes=-1"));
        assert_eq!(p("count=1=2;;bytes=+3,"), ok("count=1,bytes=3"));
        assert_eq!(p("=5"), ok("count=-1,bytes=-1=;=5"));
        for bad in [
            "count=",
            "count=abc",
            "foo",
            "count=1 ",
            ",count=1",
            "=",
            "count=0x1",
            "count=99999999999999999999",
        ] {
            assert_eq!(p(bad), None, "{bad:?}");
        }
        let t = StatsTrack::parse_java(b"count=3,bytes=-1=;countHardLimit=2").unwrap();
        assert_eq!(
            (t.get(COUNT), t.get(BYTES), t.get(COUNT_HARD_LIMIT)),
            (3, -1, 2)
        );
        assert_eq!(t.get(BYTE_HARD_LIMIT), -1);
    }

    #[test]
    fn rate_logger_counts_repeats_like_zookeeper() {
        let mut l = RateLogger::new();
        let t0 = std::time::Instant::now();
        let ms = |n| t0 + std::time::Duration::from_millis(n);
        assert_eq!(l.log("a".into(), t0), vec!["Message:a Value:null"]);
        assert!(l.log("a".into(), ms(10)).is_empty());
        assert!(l.log("a".into(), ms(20)).is_empty());
        assert_eq!(l.log("a".into(), ms(150)), vec!["[3 times] Message: a"]);
        assert_eq!(
            l.log("b".into(), ms(160)),
            vec!["Message:b Value:null".to_string()]
        );
        assert!(l.log("b".into(), ms(170)).is_empty());
        assert_eq!(
            l.log("c".into(), ms(180)),
            vec!["Message: b", "Message:c Value:null"]
        );
    }

    #[test]
    fn stats_track_round_trips_zookeepers_format() {
        let s = StatsTrack::parse(b"count=10,bytes=-1=;byteHardLimit=-1;countHardLimit=-1");
        assert_eq!((s.count, s.bytes), (10, -1));
        assert_eq!(
            s.to_string(),
            "count=10,bytes=-1=;byteHardLimit=-1;countHardLimit=-1"
        );
        assert_eq!(
            StatsTrack::parse(b"count=4,bytes=7").to_string(),
            "count=4,bytes=7"
        );
    }
}
