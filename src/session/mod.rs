//! Sessions, owned by the consensus core: ids, passwords, timeouts, which
//! connection holds each session, and expiry (guarantee 6: sessions expire
//! only by the core's decision).

pub mod board;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::fast_map::FastMap;

use board::SessionBoard;

/// The secret ZooKeeper mixes into session passwords (ZooKeeperServer.superSecret).
const SUPER_SECRET: i64 = 0xB3415C00;
pub const PASSWORD_LEN: usize = 16;

/// Where a session's connection lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnRef {
    pub shard: usize,
    pub conn: u64,
}

#[derive(Debug)]
pub struct Session {
    pub timeout_ms: i32,
    pub last_touch: Instant,
    pub owner: Option<ConnRef>,
    /// A closeSession txn is on its way: the session takes no new requests.
    pub closing: bool,
}

pub struct SessionTracker {
    sessions: FastMap<i64, Session>,
    next_id: i64,
    /// Bound on live sessions: creating more fails the connection attempt.
    max_sessions: usize,
    /// Published for the admin words.
    board: Arc<SessionBoard>,
}

impl SessionTracker {
    /// Ids start like ZooKeeper's SessionTrackerImpl.initializeNextSessionId:
    /// the server id in the top byte, milliseconds since the epoch below.
    pub fn new(server_id: i64, now_ms: i64, max_sessions: usize) -> SessionTracker {
        let mut next_id = (((now_ms << 24) as u64) >> 8) as i64 | (server_id << 56);
        if next_id == i64::MIN {
            next_id += 1;
        }
        SessionTracker {
            sessions: FastMap::default(),
            next_id,
            max_sessions,
            board: Arc::default(),
        }
    }

    /// Mints ids from now on as server `server_id` would at `now_ms`.
    pub fn reseed(&mut self, server_id: i64, now_ms: i64) {
        self.next_id = SessionTracker::new(server_id, now_ms, 0).next_id;
    }

    /// The connections that own sessions.
    pub fn owners(&self) -> Vec<ConnRef> {
        self.sessions.values().filter_map(|s| s.owner).collect()
    }

    /// Publishes to `board` from now on (it starts with the current state).
    pub fn set_board(&mut self, board: Arc<SessionBoard>) {
        board.set_count(self.sessions.len());
        for (&id, s) in &self.sessions {
            match s.owner {
                None => board.detach(id, s.timeout_ms, s.last_touch),
                Some(_) => board.attach(id),
            }
        }
        self.board = board;
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Allocates the id of a new session (the createSession txn registers it).
    pub fn next_session_id(&mut self) -> Option<i64> {
        if self.sessions.len() >= self.max_sessions {
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        Some(id)
    }

    pub fn add(&mut self, id: i64, timeout_ms: i32, owner: Option<ConnRef>, now: Instant) {
        let prev = self.sessions.insert(
            id,
            Session {
                timeout_ms,
                last_touch: now,
                owner,
                closing: false,
            },
        );
        assert!(prev.is_none(), "session {id:#x} created twice");
        self.board.set_count(self.sessions.len());
        if owner.is_none() {
            self.board.detach(id, timeout_ms, now);
        }
    }

    pub fn get(&self, id: i64) -> Option<&Session> {
        self.sessions.get(&id)
    }

    pub fn get_mut(&mut self, id: i64) -> Option<&mut Session> {
        self.sessions.get_mut(&id)
    }

    pub fn remove(&mut self, id: i64) -> Option<Session> {
        let s = self.sessions.remove(&id);
        self.board.set_count(self.sessions.len());
        self.board.attach(id);
        s
    }

    /// Gives the session a new connection (or none) and returns the old.
    /// Use this, not `get_mut`, to change an owner: the board follows it.
    pub fn set_owner(&mut self, id: i64, owner: Option<ConnRef>) -> Option<ConnRef> {
        let s = self.sessions.get_mut(&id)?;
        let old = std::mem::replace(&mut s.owner, owner);
        match owner {
            None => self.board.detach(id, s.timeout_ms, s.last_touch),
            Some(_) => self.board.attach(id),
        }
        old
    }

    /// Every session's id and timeout, by id.
    pub fn entries(&self) -> Vec<crate::snapshot::SessionEntry> {
        let mut v: Vec<_> = self
            .sessions
            .iter()
            .map(|(id, s)| crate::snapshot::SessionEntry {
                id: *id,
                timeout_ms: s.timeout_ms,
            })
            .collect();
        v.sort_by_key(|e| e.id);
        v
    }

    pub fn touch(&mut self, id: i64, now: Instant) {
        if let Some(s) = self.sessions.get_mut(&id) {
            s.last_touch = now;
        }
    }

    /// Sessions whose timeout has passed without a touch, not yet closing.
    /// Marks them closing so each expires once.
    pub fn take_expired(&mut self, now: Instant) -> Vec<i64> {
        let mut out = Vec::new();
        for (id, s) in self.sessions.iter_mut() {
            let timeout = Duration::from_millis(s.timeout_ms.max(0) as u64);
            if !s.closing && now.duration_since(s.last_touch) > timeout {
                s.closing = true;
                out.push(*id);
            }
        }
        out.sort_unstable();
        out
    }
}

/// A session's password as ZooKeeper derives it:
/// `new java.util.Random(sessionId ^ superSecret).nextBytes(passwd)`.
/// Deriving it (rather than storing a random one) means the password
/// survives a restart with nothing but the session id on disk, as in ZooKeeper.
pub fn password_for(session_id: i64) -> [u8; PASSWORD_LEN] {
    let mut rng = JavaRandom::new(session_id ^ SUPER_SECRET);
    let mut out = [0u8; PASSWORD_LEN];
    for chunk in out.chunks_mut(4) {
        let v = rng.next_i32();
        for (i, b) in chunk.iter_mut().enumerate() {
            *b = (v >> (8 * i)) as u8;
        }
    }
    out
}

/// java.util.Random's 48-bit linear congruential generator.
struct JavaRandom {
    seed: u64,
}

impl JavaRandom {
    const MULTIPLIER: u64 = 0x5DEECE66D;
    const MASK: u64 = (1 << 48) - 1;

    fn new(seed: i64) -> JavaRandom {
        JavaRandom {
            seed: (seed as u64 ^ Self::MULTIPLIER) & Self::MASK,
        }
    }

    fn next_i32(&mut self) -> i32 {
        self.seed = (self.seed.wrapping_mul(Self::MULTIPLIER).wrapping_add(0xB)) & Self::MASK;
        (self.seed >> 16) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_random_matches_reference() {
        // new java.util.Random(42).nextInt() == -1170105035
        let mut r = JavaRandom::new(42);
        assert_eq!(r.next_i32(), -1170105035);
        assert_eq!(r.next_i32(), 234785527);
    }

    #[test]
    fn passwords_differ_per_session() {
        assert_ne!(password_for(1), password_for(2));
        assert_eq!(password_for(5), password_for(5));
    }

    #[test]
    fn expiry_marks_once() {
        let t0 = Instant::now();
        let mut t = SessionTracker::new(1, 1_700_000_000_000, 10);
        let id = t.next_session_id().unwrap();
        t.add(id, 100, None, t0);
        assert!(t.take_expired(t0 + Duration::from_millis(50)).is_empty());
        assert_eq!(t.take_expired(t0 + Duration::from_millis(150)), vec![id]);
        assert!(t.take_expired(t0 + Duration::from_millis(300)).is_empty());
    }
}
