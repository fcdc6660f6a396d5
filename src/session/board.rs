//! What the admin words see of the core's session tracker: how many
//! sessions exist and which of them have no connection (their socket
//! closed, the session not yet expired). ZooKeeper's mntr
//! (zk_global_sessions) and dump count those too; the shards only know the
//! sessions connected to them. Written by the core on session create,
//! close, disconnect and reconnect (not per request); read by admin words.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;

#[derive(Default)]
pub struct SessionBoard {
    count: AtomicU64,
    /// Sessions without a connection: id -> (timeout, last touch).
    detached: Mutex<HashMap<i64, (i32, Instant)>>,
}

impl SessionBoard {
    /// Sessions in the tracker (mntr's zk_global_sessions).
    pub fn count(&self) -> u64 {
        self.count.load(Relaxed)
    }

    /// Sessions without a connection: (id, timeout ms, last touch).
    pub fn detached(&self) -> Vec<(i64, i32, Instant)> {
        let d = self.detached.lock().expect("session board lock");
        d.iter().map(|(&id, &(t, at))| (id, t, at)).collect()
    }

    pub(super) fn set_count(&self, count: usize) {
        self.count.store(count as u64, Relaxed);
    }

    pub(super) fn detach(&self, id: i64, timeout_ms: i32, last_touch: Instant) {
        let mut d = self.detached.lock().expect("session board lock");
        d.insert(id, (timeout_ms, last_touch));
    }

    pub(super) fn attach(&self, id: i64) {
        self.detached
            .lock()
            .expect("session board lock")
            .remove(&id);
    }
}
