//! Quota accounting as Apache ZooKeeper's DataTree does it: a node
//! /zookeeper/quota/<path>/zookeeper_limits makes <path> a quota root; the
//! sibling zookeeper_stats node holds "count=N,bytes=M" for the subtree and
//! is rewritten in place (no zxid, no version) as the subtree changes. Only
//! the deepest quota root above a changed node is updated.

use std::sync::Arc;

use bytes::Bytes;

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
        let mut stats = StatsTrack::parse(node.data.as_deref().unwrap_or(&[]));
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
        let node = self.node_mut(path);
        let old = node.data_len() as u64;
        node.data = Some(Bytes::from(text));
        let new = node.data_len() as u64;
        self.data_bytes = self.data_bytes - old + new;
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
