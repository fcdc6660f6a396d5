//! Leader: which server each session's requests come through (ZooKeeper's
//! SessionTrackerImpl owner), for SESSIONMOVED. Entries come with a
//! session's creation, a write through a server, or a revalidation; a
//! session that ends by expiry or by a close the leader applied for
//! another path leaves its entry behind, so the map is pruned of sessions
//! the leader no longer knows whenever it outgrows them: it stays within
//! twice the live sessions plus a constant, at amortized O(1) per entry.

use std::collections::HashMap;

use crate::zab::Sid;

/// Entries allowed beyond twice the live sessions before a prune.
const SLACK: usize = 1024;

#[derive(Default)]
pub struct SessionOwners(HashMap<i64, Sid>);

impl SessionOwners {
    pub fn get(&self, session: i64) -> Option<Sid> {
        self.0.get(&session).copied()
    }

    pub fn set(&mut self, session: i64, owner: Sid) {
        self.0.insert(session, owner);
    }

    /// The owner, which becomes `owner` if the session had none.
    pub fn get_or_set(&mut self, session: i64, owner: Sid) -> Sid {
        *self.0.entry(session).or_insert(owner)
    }

    pub fn remove(&mut self, session: i64) {
        self.0.remove(&session);
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Drops the entries of sessions that are not `live`, when there are
    /// more than twice `live_count` (the sessions the leader knows) plus
    /// the slack.
    pub fn prune(&mut self, live_count: usize, live: impl Fn(i64) -> bool) {
        if self.0.len() <= live_count.saturating_mul(2) + SLACK {
            return;
        }
        self.0.retain(|session, _| live(*session));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ended_sessions_are_pruned_once_they_outnumber_the_live_ones() {
        let mut owners = SessionOwners::default();
        let live = |s: i64| s % 10 == 0;
        for s in 0..(SLACK as i64) {
            owners.set(s, 2);
        }
        owners.prune(0, live);
        assert_eq!(owners.len(), SLACK, "within the slack: nothing pruned");
        for s in (SLACK as i64)..20_000 {
            owners.set(s, 3);
            owners.prune(2_000, live);
            assert!(owners.len() <= 2 * 2_000 + SLACK + 1);
        }
        assert!(owners.len() < 20_000, "pruned");
        assert!((0..20_000).step_by(10).all(|s| owners.get(s).is_some()));
        assert_eq!(owners.get(10), Some(2));
        assert_eq!(owners.get(19_990), Some(3));
    }

    #[test]
    fn get_or_set_keeps_the_first_owner() {
        let mut owners = SessionOwners::default();
        assert_eq!(owners.get_or_set(7, 2), 2);
        assert_eq!(owners.get_or_set(7, 3), 2);
        owners.remove(7);
        assert!(owners.is_empty());
        assert_eq!(owners.get_or_set(7, 3), 3);
    }
}
