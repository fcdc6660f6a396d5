//! Ensembles of 3, 5 or 7 replicas of [`crate::zab::ensemble::Node`] over a
//! simulated network and disk, all from one seed: per-pair FIFO channels
//! (TCP) with random delays; lost votes (the election resends), and lost
//! quorum messages that break their connection as TCP would (both ends
//! told, what was in flight gone); partitions that cut off a minority
//! (breaking the connections across), crashes that lose what was not yet durable (a random prefix of
//! the unsynced tail reaches the disk, an epoch file write in flight lands
//! or not), restarts from what is durable, and client writes at whoever
//! leads. Faults stop at `stable_after_ticks`.
//!
//! Checked after every step: at most one leader establishes each epoch; a
//! committed txn is never changed, never truncated, and is in the history
//! of every leader that establishes later; logs never have a gap; a
//! follower writes currentEpoch only with everything it synced durable.
//! At the end: one leader, every replica committed the same prefix, and
//! writes made well after the network stabilized are in it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::Rng;
use crate::zab::election::Timing;
use crate::zab::ensemble::{Input, Msg, Node, Ready, Role, Timings, Txn};
use crate::zab::{zxid, Epochs, Sid};

#[derive(Clone, Debug)]
pub struct Params {
    pub voters: usize,
    pub max_delay_ticks: u64,
    pub loss_per_mille: u64,
    pub crash_per_mille: u64,
    pub partition_per_mille: u64,
    pub stable_after_ticks: u64,
    pub end_ticks: u64,
    pub write_percent: u64,
}

impl Params {
    pub fn for_seed(seed: u64) -> Params {
        let mut rng = Rng::new(seed ^ 0xe45e_3b1e);
        Params {
            voters: [3, 5, 7][rng.below(3) as usize],
            max_delay_ticks: 1 + rng.below(8),
            loss_per_mille: rng.below(3),
            crash_per_mille: rng.below(15),
            partition_per_mille: rng.below(6),
            stable_after_ticks: 1_500,
            end_ticks: 4_000,
            write_percent: 20 + rng.below(60),
        }
    }
}

/// Writes made this long after the faults stop must all commit.
const SETTLE_TICKS: u64 = 1_500;

const TIMINGS: Timings = Timings {
    election: Timing {
        finalize_wait_ticks: 20,
        min_not_timeout_ticks: 20,
        max_not_timeout_ticks: 320,
    },
    init_limit_ticks: 150,
    sync_limit_ticks: 60,
};

#[derive(Default)]
struct Disk {
    durable: Vec<Txn>,
    unsynced: Vec<Txn>,
    epochs: Option<Epochs>,
    /// (done at tick, what): syncs through a zxid, epoch writes.
    pending: Vec<(u64, Io)>,
}

#[derive(Clone, Copy)]
enum Io {
    Sync(i64),
    Accepted(u32),
    Current(u32),
}

impl Disk {
    fn last(&self) -> i64 {
        self.unsynced
            .last()
            .or(self.durable.last())
            .map_or(0, |t| t.zxid)
    }

    fn epochs(&self) -> Epochs {
        self.epochs.unwrap_or(Epochs {
            accepted: 0,
            current: 0,
        })
    }
}

struct World {
    p: Params,
    rng: Rng,
    now: u64,
    nodes: BTreeMap<Sid, Option<Node>>,
    disks: BTreeMap<Sid, Disk>,
    down_until: BTreeMap<Sid, u64>,
    /// (from, to) -> FIFO of (deliver at, message).
    channels: BTreeMap<(Sid, Sid), VecDeque<(u64, Msg)>>,
    cut_off: BTreeSet<Sid>,
    /// Connections broken this tick, told to both ends at the next.
    breaks: Vec<(Sid, Sid)>,
    committed: BTreeMap<i64, Vec<u8>>,
    leaders: BTreeMap<u32, Sid>,
    /// Per server, the commit point its txns were checked through.
    checked: BTreeMap<Sid, i64>,
    writes: u64,
    /// Data of writes proposed after the network stabilized.
    late_writes: Vec<Vec<u8>>,
}

type Check = Result<(), String>;

impl World {
    fn voters(&self) -> BTreeSet<Sid> {
        self.nodes.keys().copied().collect()
    }

    fn up(&self, s: Sid) -> bool {
        self.nodes[&s].is_some()
    }

    fn step(&mut self, s: Sid, input: Input) -> Check {
        let Some(node) = self.nodes.get_mut(&s).and_then(Option::as_mut) else {
            return Ok(());
        };
        let ready = node.step(input);
        self.apply(s, ready)
    }

    fn apply(&mut self, s: Sid, r: Ready) -> Check {
        let now = self.now;
        let node = self.nodes[&s].as_ref().expect("up");
        let history: &[Txn] = node.history();
        let node_last = node.log_last();
        let node_committed = node.committed();
        let disk = self.disks.get_mut(&s).expect("disk");
        if let Some(to) = r.truncate_after {
            if let Some((z, _)) = self.committed.range(to + 1..).next() {
                if disk
                    .durable
                    .iter()
                    .chain(&disk.unsynced)
                    .any(|t| t.zxid == *z)
                {
                    return Err(format!(
                        "tick {now}: server {s} truncates committed txn {z:#x}"
                    ));
                }
            }
            disk.durable.retain(|t| t.zxid <= to);
            disk.unsynced.retain(|t| t.zxid <= to);
        }
        if let Some(h) = r.replace_log {
            let last = h.last().map_or(0, |t| t.zxid);
            for (z, data) in self.committed.range(..=last) {
                if !h.iter().any(|t| t.zxid == *z && t.data == *data) {
                    return Err(format!(
                        "tick {now}: a SNAP to server {s} lacks committed txn {z:#x}"
                    ));
                }
            }
            disk.durable = h;
            disk.unsynced.clear();
        }
        for t in r.append {
            if !zxid::follows(disk.last(), t.zxid) {
                return Err(format!(
                    "tick {now}: server {s} appends {:#x} after {:#x}",
                    t.zxid,
                    disk.last()
                ));
            }
            disk.unsynced.push(t);
        }
        if disk.last() != node_last {
            return Err(format!(
                "tick {now}: server {s}'s disk ends at {:#x}, its history at {node_last:#x}",
                disk.last()
            ));
        }
        if r.sync {
            let at = now + self.rng.below(4);
            disk.pending.push((at, Io::Sync(disk.last())));
        }
        if let Some(e) = r.persist_accepted_epoch {
            let at = now + self.rng.below(4);
            disk.pending.push((at, Io::Accepted(e)));
        }
        if let Some(e) = r.persist_current_epoch {
            if !disk.unsynced.is_empty() {
                return Err(format!(
                    "tick {now}: server {s} writes currentEpoch {e} before its log is durable"
                ));
            }
            let at = now + self.rng.below(4);
            disk.pending.push((at, Io::Current(e)));
        }
        if let Some(z) = r.commit_to {
            if z > node_last || z != node_committed {
                return Err(format!(
                    "tick {now}: server {s} commits {z:#x} beyond its log"
                ));
            }
            // Only what this commit adds (a commit point never goes back).
            let from = self.checked.get(&s).copied().unwrap_or(0);
            let start = history.partition_point(|t| t.zxid <= from);
            for t in history[start..].iter().take_while(|t| t.zxid <= z) {
                match self.committed.get(&t.zxid) {
                    Some(d) if *d != t.data => {
                        return Err(format!(
                            "tick {now}: server {s} commits a different txn {:#x}",
                            t.zxid
                        ))
                    }
                    Some(_) => {}
                    None => {
                        self.committed.insert(t.zxid, t.data.clone());
                    }
                }
            }
        }
        if let Some(z) = r.commit_to {
            self.checked.insert(s, z);
        }
        if let Some(Role::Broadcasting { epoch }) = r.role {
            if let Some(other) = self.leaders.insert(epoch, s) {
                if other != s {
                    return Err(format!(
                        "tick {now}: servers {other} and {s} both established epoch {epoch}"
                    ));
                }
            }
            for (z, data) in &self.committed {
                if !history.iter().any(|t| t.zxid == *z && t.data == *data) {
                    return Err(format!(
                        "tick {now}: server {s} leads epoch {epoch} without committed txn {z:#x}"
                    ));
                }
            }
        }
        for (to, msg) in r.send {
            self.send(s, to, msg);
        }
        Ok(())
    }

    fn send(&mut self, from: Sid, to: Sid, msg: Msg) {
        let stable = self.now >= self.p.stable_after_ticks;
        if !self.up(to) || (!stable && self.cut_off.contains(&from) != self.cut_off.contains(&to)) {
            return;
        }
        if !stable && self.rng.below(1000) < self.p.loss_per_mille {
            if !matches!(msg, Msg::Vote(_)) {
                self.breaks.push((from, to));
            }
            return;
        }
        let delay = self.rng.below(self.p.max_delay_ticks + 1);
        let q = self.channels.entry((from, to)).or_default();
        let at = (self.now + delay).max(q.back().map_or(0, |(t, _)| *t));
        q.push_back((at, msg));
    }

    /// Tells both ends of each broken connection, after dropping what was
    /// in flight on it.
    fn deliver_breaks(&mut self) -> Check {
        for (a, b) in std::mem::take(&mut self.breaks) {
            for pair in [(a, b), (b, a)] {
                if let Some(q) = self.channels.get_mut(&pair) {
                    q.clear();
                }
            }
            self.step(a, Input::Disconnected(b))?;
            self.step(b, Input::Disconnected(a))?;
        }
        Ok(())
    }

    fn crash(&mut self, s: Sid) {
        for other in self.nodes.keys().copied().collect::<Vec<_>>() {
            if other != s {
                self.breaks.push((s, other));
            }
        }
        self.nodes.insert(s, None);
        self.down_until
            .insert(s, self.now + 20 + self.rng.below(200));
        for ((a, b), q) in self.channels.iter_mut() {
            if *a == s || *b == s {
                q.clear();
            }
        }
        let disk = self.disks.get_mut(&s).expect("disk");
        // Some of what was not durable reached the disk, in order.
        let kept = self.rng.below(disk.unsynced.len() as u64 + 1) as usize;
        let reached: Vec<Txn> = disk.unsynced.drain(..).take(kept).collect();
        disk.durable.extend(reached);
        for (_, io) in std::mem::take(&mut disk.pending) {
            if self.rng.chance(50) {
                let mut e = disk.epochs();
                match io {
                    Io::Accepted(a) => e.accepted = e.accepted.max(a),
                    Io::Current(c) => e.current = e.current.max(c),
                    Io::Sync(_) => {}
                }
                disk.epochs = Some(e);
            }
        }
    }

    fn restart(&mut self, s: Sid) -> Check {
        let voters = self.voters();
        let disk = &self.disks[&s];
        let mut epochs = disk.epochs();
        // Recovery's own checks: a missing file comes from the log.
        let log_epoch = zxid::epoch(disk.last());
        if disk.epochs.is_none() {
            epochs = Epochs {
                accepted: log_epoch,
                current: log_epoch,
            };
        }
        // A crash in sync, after txns of the new epoch were durable and
        // before currentEpoch was written, leaves the log ahead of
        // currentEpoch (ZooKeeper then refuses to start). acceptedEpoch was
        // durable before any of them arrived: the replica rejoins with its
        // old currentEpoch, so its vote does not claim the epoch, and syncs.
        if log_epoch > epochs.accepted {
            return Err(format!(
                "tick {}: server {s} restarts with a log in epoch {log_epoch} ahead of acceptedEpoch {}",
                self.now, epochs.accepted
            ));
        }
        let node = Node::new(s, voters, TIMINGS, epochs, disk.durable.clone());
        self.checked.remove(&s);
        self.nodes.insert(s, Some(node));
        self.down_until.remove(&s);
        self.step(s, Input::Start)
    }

    fn complete_io(&mut self, s: Sid) -> Check {
        let now = self.now;
        let Some(disk) = self.disks.get_mut(&s) else {
            return Ok(());
        };
        let (due, later): (Vec<_>, Vec<_>) = disk.pending.drain(..).partition(|(at, _)| *at <= now);
        disk.pending = later;
        for (_, io) in due {
            let disk = self.disks.get_mut(&s).expect("disk");
            let input = match io {
                Io::Sync(through) => {
                    let n = disk
                        .unsynced
                        .iter()
                        .take_while(|t| t.zxid <= through)
                        .count();
                    let moved: Vec<Txn> = disk.unsynced.drain(..n).collect();
                    disk.durable.extend(moved);
                    Input::Durable(through)
                }
                Io::Accepted(e) => {
                    let mut ep = disk.epochs();
                    ep.accepted = ep.accepted.max(e);
                    disk.epochs = Some(ep);
                    Input::AcceptedEpochDurable(e)
                }
                Io::Current(e) => {
                    let mut ep = disk.epochs();
                    ep.current = ep.current.max(e);
                    disk.epochs = Some(ep);
                    Input::CurrentEpochDurable(e)
                }
            };
            self.step(s, input)?;
        }
        Ok(())
    }
}

#[derive(Debug)]
pub struct Summary {
    pub voters: usize,
    pub leaders: usize,
    pub committed: usize,
    pub writes: u64,
}

pub fn run(seed: u64) -> Result<Summary, String> {
    let p = Params::for_seed(seed);
    let sids: Vec<Sid> = (1..=p.voters as Sid).collect();
    let mut w = World {
        rng: Rng::new(seed),
        now: 0,
        nodes: sids.iter().map(|s| (*s, None)).collect(),
        disks: sids.iter().map(|s| (*s, Disk::default())).collect(),
        down_until: BTreeMap::new(),
        channels: BTreeMap::new(),
        cut_off: BTreeSet::new(),
        breaks: Vec::new(),
        committed: BTreeMap::new(),
        leaders: BTreeMap::new(),
        checked: BTreeMap::new(),
        writes: 0,
        late_writes: Vec::new(),
        p: p.clone(),
    };
    let ctx = |e: String| format!("{e} ({p:?})");
    for s in &sids {
        w.restart(*s).map_err(ctx)?;
    }
    while w.now < p.end_ticks {
        w.now += 1;
        let now = w.now;
        let unstable = now < p.stable_after_ticks;
        // Faults.
        if unstable && w.rng.below(1000) < p.crash_per_mille {
            let s = sids[w.rng.below(sids.len() as u64) as usize];
            if w.up(s) {
                w.crash(s);
            }
        }
        if unstable && w.rng.below(1000) < p.partition_per_mille {
            let k = w.rng.below((p.voters / 2) as u64 + 1) as usize;
            let mut cut = BTreeSet::new();
            while cut.len() < k {
                cut.insert(sids[w.rng.below(sids.len() as u64) as usize]);
            }
            // Connections across the new cut break.
            for a in &sids {
                for b in &sids {
                    if a < b && cut.contains(a) != cut.contains(b) {
                        w.breaks.push((*a, *b));
                    }
                }
            }
            w.cut_off = cut;
        }
        w.deliver_breaks().map_err(ctx)?;
        if !unstable {
            w.cut_off.clear();
        }
        let due: Vec<Sid> = w
            .down_until
            .iter()
            .filter(|(_, t)| **t <= now || !unstable)
            .map(|(s, _)| *s)
            .collect();
        for s in due {
            w.restart(s).map_err(ctx)?;
        }
        // Messages due, channel by channel in a random order, FIFO within.
        let mut keys: Vec<(Sid, Sid)> = w.channels.keys().copied().collect();
        for i in (1..keys.len()).rev() {
            keys.swap(i, w.rng.below(i as u64 + 1) as usize);
        }
        for (from, to) in keys {
            loop {
                let q = w.channels.get_mut(&(from, to)).expect("channel");
                match q.front() {
                    Some((at, _)) if *at <= now => {}
                    _ => break,
                }
                let (_, msg) = q.pop_front().expect("front");
                w.step(to, Input::Receive { from, msg }).map_err(ctx)?;
            }
        }
        for s in &sids {
            w.complete_io(*s).map_err(ctx)?;
            w.step(*s, Input::Tick).map_err(ctx)?;
        }
        // A client write at the leader.
        if now + 300 < p.end_ticks && w.rng.below(100) < p.write_percent {
            let leader = sids.iter().copied().find(|s| {
                w.nodes[s]
                    .as_ref()
                    .is_some_and(|n| matches!(n.role(), Role::Broadcasting { .. }))
            });
            if let Some(l) = leader {
                w.writes += 1;
                let data = w.writes.to_be_bytes().to_vec();
                if now >= p.stable_after_ticks + SETTLE_TICKS {
                    w.late_writes.push(data.clone());
                }
                w.step(l, Input::Propose(data)).map_err(ctx)?;
            }
        }
    }
    // The end: one leader, one committed prefix everywhere.
    let nodes: Vec<&Node> = w
        .nodes
        .values()
        .map(|n| n.as_ref().expect("all up"))
        .collect();
    let leaders: Vec<Sid> = nodes
        .iter()
        .filter(|n| matches!(n.role(), Role::Broadcasting { .. }))
        .map(|n| n.myid())
        .collect();
    if leaders.len() != 1 {
        let roles: Vec<String> = nodes
            .iter()
            .map(|n| format!("{}: {:?}", n.myid(), n.role()))
            .collect();
        return Err(ctx(format!(
            "at the end, leaders {leaders:?}; roles {roles:?}"
        )));
    }
    let leader = nodes
        .iter()
        .find(|n| n.myid() == leaders[0])
        .expect("leader");
    let states: Vec<String> = nodes
        .iter()
        .map(|n| {
            format!(
                "{}: {:?} log {:#x} committed {:#x} epochs {:?}",
                n.myid(),
                n.role(),
                n.log_last(),
                n.committed(),
                n.epochs()
            )
        })
        .collect();
    for n in &nodes {
        if n.committed() != leader.committed() {
            return Err(ctx(format!(
                "at the end, server {} committed {:#x}, the leader {:#x}: {states:?}",
                n.myid(),
                n.committed(),
                leader.committed()
            )));
        }
        let prefix = |n: &Node| -> Vec<Txn> {
            n.history()
                .iter()
                .take_while(|t| t.zxid <= leader.committed())
                .cloned()
                .collect()
        };
        if prefix(n) != prefix(leader) {
            return Err(ctx(format!(
                "at the end, server {} has another history",
                n.myid()
            )));
        }
    }
    let final_history: Vec<&Vec<u8>> = leader
        .history()
        .iter()
        .take_while(|t| t.zxid <= leader.committed())
        .map(|t| &t.data)
        .collect();
    if let Some(missing) = w.late_writes.iter().find(|d| !final_history.contains(d)) {
        return Err(ctx(format!(
            "a write proposed once the network had long been stable is not committed: {missing:?}"
        )));
    }
    Ok(Summary {
        voters: p.voters,
        leaders: w.leaders.len(),
        committed: w.committed.len(),
        writes: w.writes,
    })
}
