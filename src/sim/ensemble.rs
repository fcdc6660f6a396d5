//! Ensembles of 3, 5 or 7 replicas of [`crate::zab::ensemble::Node`] over a
//! simulated network and disk, all from one seed. What a member's runner
//! does with a [`Ready`] is modelled as `consensus::runner` does it
//! (as far as it is not I/O):
//!
//! - the network: per-pair FIFO channels (TCP) with random delays; lost
//!   votes (the election resends, and a vote may arrive twice), lost quorum
//!   messages that break their connection as TCP would (both ends told);
//!   partitions that cut off a minority. Every quorum connection has a
//!   generation: a break opens a new one, and what was in flight on the old
//!   one is either gone or, as from a reader task that outlived its
//!   connection, still delivered later (before or after what the new one
//!   brings), and then dropped by the generation check, as the server's net
//!   layer must (issue 26, defect 7: without the check, a member leads
//!   without a committed txn);
//! - the runner: FOLLOWERINFOs that come while a member elects are held
//!   until it leads (one to a member that does not lead closes the
//!   connection); a role change settles the log (`rebuild`: what was
//!   appended is durable; zab is not told; `SIM_NO_SETTLE=1` leaves this
//!   out, to check zab's own order); a leader whose zxid counter reaches
//!   `ringkeeper.epochCounterLimit` takes no writes and, once all is
//!   committed, ends its epoch (`Input::EndEpoch`);
//! - the disk: a log of records (each framed with the zxid known durable
//!   when it was appended, `log/record.rs`), one sync in flight at a time
//!   (records wait in memory meanwhile and go down as one write when the
//!   next starts), a sync now and then stalled for long; snapshots taken
//!   at a member's commit point, as the server's snapshot policy does, and
//!   at a crash; a restart starts the history after the newest snapshot
//!   (`ensemble_history`); a SNAP is made by the leader from its committed
//!   tree and the history after it (`snap_floor`) and installed by the
//!   follower only while it syncs with that leader (`syncing_with`), log
//!   cut and cleared, then `Input::SnapshotInstalled`, as the runner's
//!   `install_snapshot`;
//! - crashes, at random and targeted (a leader right after it proposes, so
//!   that it alone holds the txn; a leader not yet established right after
//!   it sends a SNAP, so that txns nobody committed are left in a snapshot):
//!   the unsynced writes before one reach the disk, that one in any page
//!   order (a subset of its records), the later ones not at all;
//!   recovery keeps the records up to the first missing one, and a record
//!   after the gap that says (its durable zxid) the missing one was durable
//!   would make it damage (`log/recovery.rs`): checked never to happen;
//!   an epoch file write in flight lands or not;
//! - damaged disks: at a crash, the lost-disk marker is written, then the
//!   log and snapshots are set aside (epochs kept); while the marker is
//!   there the member restarts `with_disk_lost`; a `Ready` with
//!   `wipe_disk` does the same to a running member; `resync_done` removes
//!   the marker. In most runs a disk is damaged only while a quorum of
//!   members keeps theirs; in some, any number are (the ensemble may then
//!   be unavailable, and must be at the end if no quorum of undamaged
//!   members is left);
//! - client writes at whoever leads, and bursts of them while a member
//!   rejoins; the history in memory bounded small, so it is trimmed and
//!   followers behind it get SNAPs;
//! - clients' syncs at followers: forwarded to the leader on the quorum
//!   connection (in order with the follower's ACKs), given to zab there
//!   (`Input::Sync`) with the leader's last zxid as its point, as the
//!   runner gives the core's last assigned one; some followers announce
//!   themselves as Java servers (FOLLOWERINFO without the ringkeeper bit),
//!   so the leader sends them one COMMIT per txn.
//!
//! Faults stop at `stable_after_ticks`.
//!
//! Checked at every step:
//! - at most one leader establishes each epoch;
//! - a committed txn is never changed, truncated (by a TRUNC or a SNAP
//!   install) or missing from a SNAP, and it is durable in every leader that
//!   establishes an epoch later (rule 1 of issue 26: a member that lost its
//!   disk never counts toward establishing an epoch, so this holds whatever
//!   disks were damaged; in particular a txn committed and held durably by
//!   a quorum of members that are not damaged is never lost);
//! - a leader commits a txn only when a quorum of members holds it durably
//!   (members whose disk was ever damaged counted as holding it);
//! - a member that restarts without the lost-disk marker finds on its disk
//!   every committed txn its acks covered (what it acked, or as leader
//!   counted itself for, lowered to the point of a TRUNC or SNAP it took):
//!   a SNAP install that removes a snapshot past the SNAP's zxid is crashed
//!   right after that removal in half the runs that reach it;
//! - an ACK(z) is sent only with z durable on the sender's disk; a NEWLEADER
//!   ack (ACK(epoch << 32)) only with currentEpoch = epoch on its disk and
//!   what it had synced when NEWLEADER came durable;
//! - currentEpoch is written only over a durable log: a follower's through
//!   what it held at NEWLEADER, a leader's through its whole history;
//! - logs never have a gap; disk and history agree on the last zxid; a
//!   TRUNC never goes below the snapshot the member's history starts from;
//! - a torn tail is never read as damage;
//! - a follower acks NEWLEADER within initLimit of receiving it unless its
//!   connection broke or its disk stalled meanwhile (defect 4);
//! - a SYNC answer reaches a follower exactly at its sync's point among the
//!   COMMITs: the follower's commit point then is the leader's last zxid
//!   when the sync came, no less (a read after the sync sees every write
//!   committed before it) and no more (the session's writes after the sync
//!   are answered after it), and every answer has a sync waiting for it.
//!
//! At the end, when a quorum of members has its disk: one leader, no member
//! waiting for a resync, every member committed the same prefix (by
//! content, snapshots and logs), each member's history is its disk's, every
//! committed txn is there, and writes made well after the network
//! stabilized are in it. When no such quorum is left: no leader.
//!
//! [`Coverage`] counts how often each path ran. `SIM_TRACE=1` prints a
//! replayed run's events.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use super::Rng;
use crate::zab::election::Timing;
use crate::zab::ensemble::{Input, Msg, Node, Ready, Role, Timings, Txn};
use crate::zab::{quorum, snap_install, zxid, Epochs, Sid};

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
    /// Per member and tick, a snapshot at its commit point.
    pub snapshot_per_mille: u64,
    /// At a crash, a snapshot at a random point up to the commit point.
    pub crash_snapshot_percent: u64,
    /// The history in memory keeps this many bytes (None: the server's
    /// 64 MiB, never trimmed here), looking every so many appends.
    pub history_bytes_min: Option<u64>,
    pub history_check_every: usize,
    /// Whether the leader tells the Node its tree's size (as the runner).
    pub tell_snapshot_bytes: bool,
    /// A crash damages the disk (log and snapshots set aside).
    pub damage_percent: u64,
    /// Disks are damaged even when that leaves no quorum of members with
    /// theirs.
    pub damage_unbounded: bool,
    /// At a break, what was in flight is delivered later (and dropped by the
    /// generation check) instead of vanishing.
    pub stale_percent: u64,
    pub vote_duplicate_per_mille: u64,
    /// A sync that takes long (a disk stall).
    pub stall_per_mille: u64,
    /// A restart starts a burst of client writes.
    pub burst_percent: u64,
    /// A leader not yet established crashes right after sending a SNAP
    /// (so that a SNAP carrying txns nobody committed is left behind).
    pub crash_snap_sender_percent: u64,
    /// The leader crashes right after proposing (so that it alone holds
    /// what it proposed, and may lead again with it).
    pub crash_proposer_per_mille: u64,
    /// `ringkeeper.epochCounterLimit`: past this zxid counter the leader
    /// takes no writes and, once all is committed, ends its epoch.
    pub epoch_counter_limit: Option<u32>,
    /// Per follower and tick, the percent chance of a client's sync
    /// forwarded to the leader.
    pub sync_percent: u64,
    /// Per member, the percent chance it announces itself as a Java server.
    pub java_percent: u64,
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
            snapshot_per_mille: rng.below(8),
            crash_snapshot_percent: rng.below(50),
            history_bytes_min: rng.chance(80).then(|| 8 * (4 + rng.below(60))),
            history_check_every: 1 + rng.below(32) as usize,
            tell_snapshot_bytes: rng.chance(50),
            damage_percent: rng.below(25),
            damage_unbounded: rng.chance(10),
            stale_percent: rng.below(60),
            vote_duplicate_per_mille: rng.below(30),
            stall_per_mille: rng.below(40),
            burst_percent: rng.below(50),
            epoch_counter_limit: rng.chance(30).then(|| 20 + rng.below(400) as u32),
            crash_snap_sender_percent: if rng.chance(70) {
                30 + rng.below(70)
            } else {
                0
            },
            crash_proposer_per_mille: rng.below(15),
            sync_percent: rng.below(30),
            java_percent: rng.below(60),
        }
    }
}

/// How often each path ran, in one run or summed over many.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Epochs established (a quorum acked NEWLEADER).
    pub elections: u64,
    pub diffs: u64,
    pub truncs: u64,
    /// SNAPs installed by followers.
    pub snaps: u64,
    /// Times a member trimmed its history in memory.
    pub trims: u64,
    /// Snapshots taken by members (not SNAPs).
    pub snapshots: u64,
    pub crashes: u64,
    /// Crashes after which a record past the first missing one had reached
    /// the disk (a write torn out of page order).
    pub tears: u64,
    /// Disks damaged at a crash (set aside, marker written).
    pub damaged: u64,
    /// Disks set aside at the Node's request (`Ready::wipe_disk`).
    pub wipes: u64,
    /// Messages of a closed connection dropped by the generation check.
    pub stale_dropped: u64,
    /// Members that lost their disk and were synced (`resync_done`).
    pub resyncs: u64,
    pub bursts: u64,
    pub stalls: u64,
    pub vote_duplicates: u64,
    /// Runs that ended with no quorum of members holding their disk.
    pub unavailable: u64,
    /// Leaders that ended their epoch at the zxid counter's limit.
    pub epoch_ends: u64,
    /// Members that crashed between two steps of installing a SNAP.
    pub snap_crashes: u64,
    /// SYNC answers checked at the follower.
    pub syncs_answered: u64,
    /// SYNC answers with a later COMMIT to the same follower behind them
    /// in one step (a run of commits cut at the sync's point).
    pub sync_cuts: u64,
    /// Of those, to a follower that announced itself as a Java server.
    pub sync_cuts_java: u64,
    /// SNAP installs that removed a snapshot past the SNAP's zxid (one an
    /// earlier SNAP from a leader that never established its epoch left).
    pub snapshots_above_removed: u64,
    /// Members that crashed installing a SNAP after such a removal and
    /// before the SNAP's own snapshot was written.
    pub snap_crashes_after_removal: u64,
}

impl Coverage {
    /// Each counter by name.
    pub fn counters(&self) -> [(&'static str, u64); 23] {
        [
            ("elections", self.elections),
            ("diffs", self.diffs),
            ("truncs", self.truncs),
            ("snaps", self.snaps),
            ("trims", self.trims),
            ("snapshots", self.snapshots),
            ("crashes", self.crashes),
            ("tears", self.tears),
            ("damaged", self.damaged),
            ("wipes", self.wipes),
            ("stale_dropped", self.stale_dropped),
            ("resyncs", self.resyncs),
            ("bursts", self.bursts),
            ("stalls", self.stalls),
            ("vote_duplicates", self.vote_duplicates),
            ("unavailable", self.unavailable),
            ("epoch_ends", self.epoch_ends),
            ("snap_crashes", self.snap_crashes),
            ("syncs_answered", self.syncs_answered),
            ("sync_cuts", self.sync_cuts),
            ("sync_cuts_java", self.sync_cuts_java),
            ("snapshots_above_removed", self.snapshots_above_removed),
            (
                "snap_crashes_after_removal",
                self.snap_crashes_after_removal,
            ),
        ]
    }

    pub fn add(&mut self, o: &Coverage) {
        self.elections += o.elections;
        self.diffs += o.diffs;
        self.truncs += o.truncs;
        self.snaps += o.snaps;
        self.trims += o.trims;
        self.snapshots += o.snapshots;
        self.crashes += o.crashes;
        self.tears += o.tears;
        self.damaged += o.damaged;
        self.wipes += o.wipes;
        self.stale_dropped += o.stale_dropped;
        self.resyncs += o.resyncs;
        self.bursts += o.bursts;
        self.stalls += o.stalls;
        self.vote_duplicates += o.vote_duplicates;
        self.unavailable += o.unavailable;
        self.epoch_ends += o.epoch_ends;
        self.snap_crashes += o.snap_crashes;
        self.syncs_answered += o.syncs_answered;
        self.sync_cuts += o.sync_cuts;
        self.sync_cuts_java += o.sync_cuts_java;
        self.snapshots_above_removed += o.snapshots_above_removed;
        self.snap_crashes_after_removal += o.snap_crashes_after_removal;
    }

    /// One line: `name count` pairs.
    pub fn line(&self) -> String {
        self.counters()
            .iter()
            .map(|(n, c)| format!("{n} {c}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Writes made this long after the faults stop must all commit.
const SETTLE_TICKS: u64 = 1_500;

/// Epochs end at `epoch_counter_limit` until this long after the faults
/// stop.
const ENDING_EPOCHS_AFTER_STABLE: u64 = 500;

const TIMINGS: Timings = Timings {
    election: Timing {
        finalize_wait_ticks: 20,
        min_not_timeout_ticks: 20,
        max_not_timeout_ticks: 320,
    },
    init_limit_ticks: 150,
    sync_limit_ticks: 60,
};

/// A txn as the disk holds it: its zxid and the client write it carries
/// (the sim's txn data is that number, 8 bytes big-endian).
type Entry = (i64, u64);

fn entry(t: &Txn) -> Entry {
    let mut b = [0u8; 8];
    b.copy_from_slice(&t.data);
    (t.zxid, u64::from_be_bytes(b))
}

fn txn(e: &Entry) -> Txn {
    Txn {
        zxid: e.0,
        data: e.1.to_be_bytes().to_vec(),
    }
}

/// A log record: the txn, the zxid known durable when it was framed, and
/// the write it went to the disk with (0: not yet, it waits in memory for
/// the next sync, which appends every waiting record as one write, as the
/// runner's `start_sync` does).
#[derive(Clone)]
struct Record {
    e: Entry,
    durable_zxid: i64,
    write: u64,
}

/// A member's model disk as `zab::snap_install` sees it; it crashes (fails
/// the step) after `crash_after` steps, if set.
struct SimSnapDisk<'a> {
    disk: &'a mut Disk,
    steps: usize,
    crash_after: Option<usize>,
    /// Every txn some member committed (to check what a step drops).
    committed: &'a BTreeMap<i64, u64>,
    /// Set when a snapshot past the SNAP's zxid was removed.
    removed_above: bool,
    /// Crash this many steps after such a removal, if set.
    crash_after_removal: Option<usize>,
    /// The steps done when it was removed.
    removed_at: Option<usize>,
    crashed: bool,
}

impl SimSnapDisk<'_> {
    fn step(&mut self) -> Result<(), String> {
        let after_removal = match (self.crash_after_removal, self.removed_at) {
            (Some(k), Some(at)) => self.steps == at + k,
            _ => false,
        };
        if self.crash_after == Some(self.steps) || after_removal {
            self.crashed = true;
            return Err("crashed".into());
        }
        self.steps += 1;
        Ok(())
    }
}

impl snap_install::SnapDisk for SimSnapDisk<'_> {
    type Tree = Rc<Vec<Entry>>;

    fn cut_log_above(&mut self, z: i64) -> Result<(), String> {
        self.step()?;
        self.disk.durable.retain(|e| e.0 <= z);
        self.disk.unsynced.retain(|r| r.e.0 <= z);
        self.disk.log_durable = self.disk.log_durable.min(z);
        Ok(())
    }

    fn has_snapshot_above(&self, z: i64) -> Result<bool, String> {
        Ok(self.disk.base() > z)
    }

    fn disk_lost(&self) -> bool {
        self.disk.lost
    }

    fn mark_disk_lost(&mut self) -> Result<(), String> {
        self.step()?;
        self.disk.lost = true;
        Ok(())
    }

    fn clear_disk_lost(&mut self) -> Result<(), String> {
        self.step()?;
        self.disk.lost = false;
        Ok(())
    }

    fn remove_snapshots_above(&mut self, z: i64) -> Result<(), String> {
        self.step()?;
        let Some(s) = &self.disk.snapshot else {
            return Ok(());
        };
        if s.zxid <= z {
            return Ok(());
        }
        // A SNAP from a leader that never established its epoch carries
        // its whole log, txns nobody committed among them: installed, they
        // make a snapshot past what a later leader holds. Such a snapshot
        // goes, as the server removes it; one that holds a committed txn
        // past the SNAP's zxid would mean the leader lacks it.
        if let Some((c, _)) = self.committed.range(z + 1..=s.zxid).next() {
            return Err(format!(
                "its snapshot at {:#x} is past the SNAP's {z:#x} and holds committed txn {c:#x}",
                s.zxid
            ));
        }
        self.disk.snapshot = None;
        self.removed_above = true;
        self.removed_at = Some(self.steps);
        Ok(())
    }

    fn mark_fuzzy(&mut self, _z: i64) -> Result<(), String> {
        self.step()
    }

    fn write_snapshot(&mut self, z: i64, entries: &Rc<Vec<Entry>>) -> Result<(), String> {
        self.step()?;
        self.disk.snapshot = Some(Snapshot {
            zxid: z,
            entries: entries.clone(),
        });
        Ok(())
    }

    fn clear_log(&mut self) -> Result<(), String> {
        self.step()?;
        self.disk.durable.clear();
        self.disk.unsynced.clear();
        self.disk.log_durable = self.disk.base();
        Ok(())
    }
}

/// A snapshot: every txn through `zxid` (the tree it stands for).
struct Snapshot {
    zxid: i64,
    entries: Rc<Vec<Entry>>,
}

#[derive(Default)]
struct Disk {
    /// The newest snapshot (a member's history starts after it).
    snapshot: Option<Snapshot>,
    /// Log records known durable, in zxid order (some may lie under the
    /// snapshot: the log is not purged in an ensemble).
    durable: Vec<Entry>,
    /// Appended after them, not yet covered by a completed sync.
    unsynced: Vec<Record>,
    epochs: Option<Epochs>,
    /// Epoch file writes in flight: (done at tick, what).
    pending: Vec<(u64, EpochWrite)>,
    /// The sync in flight: (done at tick, through zxid, covering writes up
    /// to this one).
    syncing: Option<(u64, i64, u64)>,
    /// A sync was asked for while one ran: start one when it is done.
    want_sync: bool,
    /// The lost-disk marker.
    lost: bool,
    /// The last stalled sync lasts until this tick.
    stalled_until: u64,
    writes: u64,
    /// The runner's `log_durable`: the highest zxid its syncs reported
    /// (and what a reload, a cut or a SNAP left), what records are framed
    /// with.
    log_durable: i64,
}

#[derive(Clone, Copy)]
enum EpochWrite {
    Accepted(u32),
    Current(u32),
}

impl Disk {
    fn base(&self) -> i64 {
        self.snapshot.as_ref().map_or(0, |s| s.zxid)
    }

    fn log_last(&self) -> i64 {
        self.unsynced
            .last()
            .map(|r| r.e.0)
            .or(self.durable.last().map(|e| e.0))
            .unwrap_or(0)
    }

    /// The last zxid this disk holds (snapshot or log).
    fn last(&self) -> i64 {
        self.base().max(self.log_last())
    }

    /// Everything through this zxid is durable.
    fn durable_last(&self) -> i64 {
        self.base().max(self.durable.last().map_or(0, |e| e.0))
    }

    fn epochs(&self) -> Epochs {
        self.epochs.unwrap_or(Epochs {
            accepted: 0,
            current: 0,
        })
    }

    /// The client write under `z` on this disk, if it holds `z` (durably,
    /// if `durable_only`).
    fn get(&self, z: i64, durable_only: bool) -> Option<u64> {
        if z <= self.base() {
            let s = self.snapshot.as_ref()?;
            let i = s.entries.binary_search_by_key(&z, |e| e.0).ok()?;
            return Some(s.entries[i].1);
        }
        if let Ok(i) = self.durable.binary_search_by_key(&z, |e| e.0) {
            return Some(self.durable[i].1);
        }
        if durable_only {
            return None;
        }
        self.unsynced.iter().find(|r| r.e.0 == z).map(|r| r.e.1)
    }

    /// What the disk holds in (`lo`, `hi`], in order.
    fn range(&self, lo: i64, hi: i64) -> Vec<Entry> {
        let mut out = Vec::new();
        let base = self.base();
        if let Some(s) = &self.snapshot {
            let from = s.entries.partition_point(|e| e.0 <= lo);
            let to = s.entries.partition_point(|e| e.0 <= hi.min(base));
            if from < to {
                out.extend_from_slice(&s.entries[from..to]);
            }
        }
        let lo = lo.max(base);
        let from = self.durable.partition_point(|e| e.0 <= lo);
        out.extend(self.durable[from..].iter().take_while(|e| e.0 <= hi));
        out.extend(
            self.unsynced
                .iter()
                .map(|r| r.e)
                .filter(|e| e.0 > lo && e.0 <= hi),
        );
        out
    }

    /// How many txns the disk holds through `z`.
    fn count_through(&self, z: i64) -> usize {
        let base = self.base();
        let in_snapshot = self
            .snapshot
            .as_ref()
            .map_or(0, |s| s.entries.partition_point(|e| e.0 <= z.min(base)));
        let above = |e: &Entry| e.0 > base && e.0 <= z;
        in_snapshot
            + self
                .durable
                .iter()
                .rev()
                .take_while(|e| e.0 > base)
                .filter(|e| above(e))
                .count()
            + self.unsynced.iter().filter(|r| above(&r.e)).count()
    }

    /// Writes a snapshot of what the disk holds through `z`.
    fn take_snapshot(&mut self, z: i64) {
        let entries = Rc::new(self.range(i64::MIN, z));
        self.snapshot = Some(Snapshot { zxid: z, entries });
    }

    /// Sets everything aside but the epochs, after writing the marker.
    fn lose(&mut self) {
        self.lost = true;
        self.log_durable = 0;
        self.snapshot = None;
        self.durable.clear();
        self.unsynced.clear();
    }
}

/// What travels on a channel: a zab message, or a SNAP as the runner sends
/// it (the leader's tree as of `zxid`).
#[derive(Clone)]
enum Packet {
    Zab(Msg),
    Snapshot {
        zxid: i64,
        entries: Rc<Vec<Entry>>,
    },
    /// A client's sync, forwarded by a follower (a REQUEST packet).
    SyncRequest,
}

#[derive(Clone)]
struct Envelope {
    at: u64,
    /// The generation of the connection it was sent on.
    generation: u64,
    packet: Packet,
}

/// The quorum connection between two members.
#[derive(Default)]
struct Conn {
    generation: u64,
    /// Broken, not yet told to both ends: nothing more goes through.
    broken: bool,
}

/// Whether the sim settles the log when the role changes, as the runner's
/// `rebuild` does (zab does not ask for it): `SIM_NO_SETTLE=1` leaves it
/// out, to check zab's own order.
fn settles_when_rebuilding() -> bool {
    static SETTLES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SETTLES.get_or_init(|| std::env::var("SIM_NO_SETTLE").map_or(true, |v| v != "1"))
}

/// `SIM_TRACE=1`: every input and what came of it, on stderr (for a
/// replayed seed).
fn tracing() -> bool {
    static TRACING: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACING.get_or_init(|| std::env::var("SIM_TRACE").is_ok_and(|v| v == "1"))
}

fn trace_input(now: u64, s: Sid, input: &Input) {
    let what = match input {
        Input::Start => "start".to_string(),
        Input::Tick => return,
        Input::Receive { from, msg } => match msg {
            Msg::Ping => return,
            Msg::Proposal(t) => format!("<- {from} PROPOSAL {:#x}", t.zxid),
            Msg::Snap { history } => format!("<- {from} SNAP of {} txns", history.len()),
            m => format!("<- {from} {m:?}"),
        },
        Input::Durable(z) => format!("durable {z:#x}"),
        Input::AcceptedEpochDurable(e) => format!("acceptedEpoch {e} durable"),
        Input::CurrentEpochDurable(e) => format!("currentEpoch {e} durable"),
        Input::Propose(_) | Input::ProposeBatch(_) => return,
        Input::EndEpoch => "end the epoch".to_string(),
        Input::Disconnected(p) => format!("disconnected from {p}"),
        Input::SnapshotInstalled { from, zxid } => {
            format!("SNAP from {from} installed at {zxid:#x}")
        }
        Input::Sync { from, point } => format!("sync from {from} at {point:#x}"),
    };
    eprintln!("{now:5} {s}: {what}");
}

fn trace_ready(now: u64, s: Sid, r: &Ready) {
    let mut parts = Vec::new();
    if let Some(role) = r.role {
        parts.push(format!("role {role:?}"));
    }
    if let Some(z) = r.truncate_after {
        parts.push(format!("truncate after {z:#x}"));
    }
    if r.wipe_disk {
        parts.push("wipe disk".into());
    }
    if r.resync_done {
        parts.push("resync done".into());
    }
    if let Some(e) = r.persist_accepted_epoch {
        parts.push(format!("write acceptedEpoch {e}"));
    }
    if let Some(e) = r.persist_current_epoch {
        parts.push(format!("write currentEpoch {e}"));
    }
    if let Some(z) = r.commit_to {
        parts.push(format!("commit {z:#x}"));
    }
    for (to, m) in &r.send {
        match m {
            Msg::Ping | Msg::Proposal(_) | Msg::Commit(_) => {}
            Msg::Snap { history } => parts.push(format!("-> {to} SNAP of {} txns", history.len())),
            m => parts.push(format!("-> {to} {m:?}")),
        }
    }
    if !r.close.is_empty() {
        parts.push(format!("close {:?}", r.close));
    }
    if !parts.is_empty() {
        eprintln!("{now:5} {s}:   {}", parts.join("; "));
    }
}

fn pair(a: Sid, b: Sid) -> (Sid, Sid) {
    (a.min(b), a.max(b))
}

struct World {
    p: Params,
    rng: Rng,
    now: u64,
    nodes: BTreeMap<Sid, Option<Node>>,
    disks: BTreeMap<Sid, Disk>,
    down_until: BTreeMap<Sid, u64>,
    /// (from, to) -> FIFO of envelopes.
    channels: BTreeMap<(Sid, Sid), VecDeque<Envelope>>,
    conns: BTreeMap<(Sid, Sid), Conn>,
    cut_off: BTreeSet<Sid>,
    /// Connections broken, told to both ends at the next tick.
    breaks: Vec<(Sid, Sid)>,
    /// What closed connections still hand over: (at, from, to, envelope).
    stale: Vec<(u64, Sid, Sid, Envelope)>,
    /// zxid -> client write, of every txn some member committed.
    committed: BTreeMap<i64, u64>,
    leaders: BTreeMap<u32, Sid>,
    /// Per server, the commit point its txns were checked through.
    checked: BTreeMap<Sid, i64>,
    /// Follower: where its log ended when NEWLEADER came.
    newleader_upto: BTreeMap<Sid, i64>,
    /// Follower that has not acked NEWLEADER yet: (tick it came, leader).
    newleader_at: BTreeMap<Sid, (u64, Sid)>,
    /// The runner's committed tree's last zxid, per member that leads.
    snap_floor: BTreeMap<Sid, i64>,
    /// Members whose disk was ever damaged or wiped.
    damaged_ever: BTreeSet<Sid>,
    writes: u64,
    /// Data of writes proposed after the network stabilized.
    late_writes: Vec<u64>,
    /// A burst of writes: (until tick, writes per tick).
    burst: Option<(u64, u64)>,
    /// Members to crash at a tick (targeted faults).
    crash_at: BTreeMap<Sid, u64>,
    /// (follower, leader) -> the syncs the leader took from it and has not
    /// answered: (connection generation, point).
    syncs: BTreeMap<(Sid, Sid), VecDeque<(u64, i64)>>,
    /// Members that announce themselves as Java servers.
    java: BTreeSet<Sid>,
    /// Follower: the log's last zxid when its runner last rebuilt its tree
    /// from the log (following a new leader, a TRUNC, a SNAP): its tree
    /// holds that much whatever zab's commit point says.
    rebuilt_through: BTreeMap<Sid, i64>,
    /// What a member's acks promise its disk holds: the highest zxid it
    /// acked (a leader: committed, counting itself), lowered to the point
    /// of a TRUNC or SNAP it takes, gone when its disk is set aside. A
    /// restart without the lost-disk marker must find every committed txn
    /// through it on the disk.
    promised: BTreeMap<Sid, i64>,
    cov: Coverage,
}

type Check = Result<(), String>;

impl World {
    fn voters(&self) -> BTreeSet<Sid> {
        self.nodes.keys().copied().collect()
    }

    fn up(&self, s: Sid) -> bool {
        self.nodes[&s].is_some()
    }

    fn quorum_of(&self, members: impl IntoIterator<Item = Sid>) -> bool {
        let v: Vec<Sid> = members.into_iter().collect();
        quorum::is_quorum(&self.voters(), v.iter())
    }

    /// Members that hold their disk (no lost-disk marker).
    fn intact(&self) -> Vec<Sid> {
        self.disks
            .iter()
            .filter(|(_, d)| !d.lost)
            .map(|(s, _)| *s)
            .collect()
    }

    fn step(&mut self, s: Sid, input: Input) -> Check {
        let Some(node) = self.nodes.get_mut(&s).and_then(Option::as_mut) else {
            return Ok(());
        };
        if tracing() {
            trace_input(self.now, s, &input);
        }
        let installed = matches!(input, Input::SnapshotInstalled { .. });
        let front = node.history().first().map(|t| t.zxid);
        let was = node.role();
        let ready = node.step(input);
        let front_after = node.history().first().map(|t| t.zxid);
        if let (Some(a), Some(b)) = (front, front_after) {
            if b > a && !installed && !ready.wipe_disk {
                self.cov.trims += 1;
            }
        }
        if tracing() {
            trace_ready(self.now, s, &ready);
        }
        let rebuilds = match ready.role {
            Some(Role::Looking) => was != Role::Looking,
            Some(Role::Following { leader }) => was != (Role::Following { leader }),
            _ => false,
        };
        if ready.role.is_some_and(|r| r != was) {
            // A follower's role change: its runner abandons the syncs it
            // forwarded (their clients lose their connection). A leader's
            // zab forgets those it held at its own, but the answers it sent
            // are on their way, and its followers change role before they
            // take another leader's.
            self.syncs.retain(|(f, _), _| *f != s);
        }
        let follows = match ready.role {
            Some(Role::Following { leader }) => was != (Role::Following { leader }),
            _ => false,
        };
        self.apply(s, ready)?;
        if follows {
            // The runner's rebuild: the tree is the log, replayed.
            let last = self.nodes[&s].as_ref().expect("up").log_last();
            self.rebuilt_through.insert(s, last);
        }
        if rebuilds && settles_when_rebuilding() {
            // The runner's `rebuild` (a role change) settles the log first:
            // what was appended is durable, and zab is not told.
            let disk = self.disks.get_mut(&s).expect("disk");
            let moved: Vec<Entry> = disk.unsynced.drain(..).map(|r| r.e).collect();
            disk.durable.extend(moved);
            disk.log_durable = disk.log_durable.max(disk.last());
        }
        Ok(())
    }

    fn break_conn(&mut self, a: Sid, b: Sid) {
        self.conns.entry(pair(a, b)).or_default().broken = true;
        self.breaks.push((a, b));
    }

    fn apply(&mut self, s: Sid, r: Ready) -> Check {
        let now = self.now;
        let node = self.nodes[&s].as_ref().expect("up");
        let node_last = node.log_last();
        let node_committed = node.committed();
        let role = node.role();
        let disk = self.disks.get_mut(&s).expect("disk");
        if r.wipe_disk {
            disk.lose();
            self.promised.remove(&s);
            self.cov.wipes += 1;
            self.damaged_ever.insert(s);
            self.checked.remove(&s);
            self.newleader_upto.remove(&s);
        }
        if let Some(to) = r.truncate_after {
            if to < disk.base() {
                return Err(format!(
                    "tick {now}: server {s} truncates after {to:#x}, below its snapshot {:#x}",
                    disk.base()
                ));
            }
            for (z, _) in disk.range(to, i64::MAX) {
                if self.committed.contains_key(&z) {
                    return Err(format!(
                        "tick {now}: server {s} truncates committed txn {z:#x}"
                    ));
                }
            }
            disk.durable.retain(|e| e.0 <= to);
            disk.unsynced.retain(|r| r.e.0 <= to);
            disk.log_durable = disk.log_durable.min(to);
            if let Some(p) = self.promised.get_mut(&s) {
                *p = (*p).min(to);
            }
            if let Some(t) = self.rebuilt_through.get_mut(&s) {
                *t = (*t).min(to);
            }
        }
        if r.replace_log.is_some() {
            return Err(format!(
                "tick {now}: server {s} replaces its log from a SNAP message, which the runner never passes to zab"
            ));
        }
        for t in &r.append {
            if !zxid::follows(disk.last(), t.zxid) {
                return Err(format!(
                    "tick {now}: server {s} appends {:#x} after {:#x}",
                    t.zxid,
                    disk.last()
                ));
            }
            // Framed with what is known durable here (log/record.rs).
            let durable_zxid = disk.log_durable;
            disk.unsynced.push(Record {
                e: entry(t),
                durable_zxid,
                write: 0,
            });
        }
        if disk.last() != node_last {
            return Err(format!(
                "tick {now}: server {s}'s disk ends at {:#x}, its history at {node_last:#x}",
                disk.last()
            ));
        }
        if r.sync {
            disk.want_sync = true;
        }
        if let Some(e) = r.persist_accepted_epoch {
            let at = now + self.rng.below(4);
            disk.pending.push((at, EpochWrite::Accepted(e)));
        }
        if let Some(e) = r.persist_current_epoch {
            // A follower's synced history (what it held at NEWLEADER), a
            // leader's whole history: durable first.
            let need = match role {
                Role::Following { .. } => match self.newleader_upto.get(&s) {
                    Some(z) => *z,
                    None => {
                        return Err(format!(
                            "tick {now}: server {s} writes currentEpoch {e} with no NEWLEADER"
                        ))
                    }
                },
                _ => disk.last(),
            };
            if disk.durable_last() < need {
                return Err(format!(
                    "tick {now}: server {s} ({role:?}) writes currentEpoch {e} with its log durable through {:#x}, not {need:#x}",
                    disk.durable_last()
                ));
            }
            let at = now + self.rng.below(4);
            disk.pending.push((at, EpochWrite::Current(e)));
        }
        if r.resync_done {
            if !disk.lost {
                return Err(format!(
                    "tick {now}: server {s} reports a resync with no lost-disk marker"
                ));
            }
            disk.lost = false;
            self.cov.resyncs += 1;
        }
        if let Some(z) = r.commit_to {
            if z > node_last || z != node_committed {
                return Err(format!(
                    "tick {now}: server {s} commits {z:#x} beyond its log"
                ));
            }
            // Only what this commit adds (a commit point never goes back).
            let from = self.checked.get(&s).copied().unwrap_or(0);
            for (t, w) in disk.range(from, z) {
                match self.committed.get(&t) {
                    Some(d) if *d != w => {
                        return Err(format!(
                            "tick {now}: server {s} commits a different txn {t:#x}"
                        ))
                    }
                    Some(_) => {}
                    None => {
                        self.committed.insert(t, w);
                    }
                }
            }
            self.checked.insert(s, z);
        }
        let leading = matches!(role, Role::Broadcasting { .. });
        let mut floor = None;
        if let (Some(z), true) = (r.commit_to, leading) {
            // The leader commits what a quorum holds durably.
            let w = self.committed.get(&z).copied();
            let holders: Vec<Sid> = self
                .disks
                .iter()
                .filter(|(m, d)| {
                    (w.is_some() && d.get(z, true) == w) || self.damaged_ever.contains(m)
                })
                .map(|(m, _)| *m)
                .collect();
            if !self.quorum_of(holders.iter().copied()) {
                return Err(format!(
                    "tick {now}: leader {s} commits {z:#x}, durable only on {holders:?}"
                ));
            }
            if self.disks[&s].get(z, true).is_some() {
                // It counted itself.
                let p = self.promised.entry(s).or_insert(0);
                *p = (*p).max(z);
            }
            floor = Some(z);
        }
        if let Some(Role::Broadcasting { epoch }) = r.role {
            if let Some(other) = self.leaders.insert(epoch, s) {
                if other != s {
                    return Err(format!(
                        "tick {now}: servers {other} and {s} both established epoch {epoch}"
                    ));
                }
            } else {
                self.cov.elections += 1;
            }
            let disk = &self.disks[&s];
            for (z, w) in &self.committed {
                if disk.get(*z, true) != Some(*w) {
                    return Err(format!(
                        "tick {now}: server {s} leads epoch {epoch} without committed txn {z:#x}"
                    ));
                }
            }
        }
        if matches!(r.role, Some(Role::Leading | Role::Broadcasting { .. })) {
            // The runner's committed tree is the whole log here.
            floor = Some(node_last);
        }
        if let Some(floor) = floor {
            // As the runner: its committed tree moved (see `snapshot_packet`).
            self.snap_floor.insert(s, floor);
            let node = self.nodes.get_mut(&s).and_then(Option::as_mut).expect("up");
            node.set_snap_floor(floor);
            if self.p.tell_snapshot_bytes {
                let bytes = 8 * self.disks[&s].count_through(floor) as u64;
                node.set_snapshot_bytes(bytes);
            }
        }
        for to in &r.close {
            self.break_conn(s, *to);
        }
        for (i, (to, msg)) in r.send.iter().enumerate() {
            if matches!(msg, Msg::SyncAnswer)
                && r.send[i + 1..]
                    .iter()
                    .any(|(t, m)| t == to && matches!(m, Msg::Commit(_)))
            {
                self.cov.sync_cuts += 1;
                if self.java.contains(to) {
                    self.cov.sync_cuts_java += 1;
                }
            }
        }
        for (to, msg) in r.send {
            let msg = match msg {
                // A Java server's FOLLOWERINFO: no ringkeeper bit, so its
                // leader sends it one COMMIT per txn.
                Msg::FollowerInfo { accepted_epoch, .. } if self.java.contains(&s) => {
                    Msg::FollowerInfo {
                        accepted_epoch,
                        ringkeeper: false,
                    }
                }
                m => m,
            };
            self.check_send(s, &msg)?;
            if matches!(msg, Msg::Ack(z) if zxid::counter(z) == 0) {
                self.newleader_at.remove(&s);
            }
            if let Msg::Ack(z) = msg {
                let through = if zxid::counter(z) == 0 {
                    // NEWLEADER: what it synced (`check_send` saw it durable).
                    self.newleader_upto.get(&s).copied().unwrap_or(0)
                } else {
                    z
                };
                let p = self.promised.entry(s).or_insert(0);
                *p = (*p).max(through);
            }
            let packet = match msg {
                Msg::Snap { history } => {
                    if role == Role::Leading
                        && now < self.p.stable_after_ticks
                        && self.rng.chance(self.p.crash_snap_sender_percent)
                    {
                        // About when the SNAP arrives.
                        let at = now + 1 + self.rng.below(self.p.max_delay_ticks + 1);
                        self.crash_at.entry(s).or_insert(at);
                    }
                    self.snapshot_packet(s, &history)?
                }
                Msg::Diff => {
                    self.cov.diffs += 1;
                    Packet::Zab(Msg::Diff)
                }
                Msg::Trunc { to } => {
                    self.cov.truncs += 1;
                    Packet::Zab(Msg::Trunc { to })
                }
                m => Packet::Zab(m),
            };
            self.send(s, to, packet);
        }
        self.start_sync(s);
        Ok(())
    }

    /// What an ACK promises is on the disk already.
    fn check_send(&self, s: Sid, msg: &Msg) -> Check {
        let now = self.now;
        let disk = &self.disks[&s];
        if let Msg::Ack(z) = msg {
            if zxid::counter(*z) == 0 {
                let e = zxid::epoch(*z);
                if disk.epochs().current != e {
                    return Err(format!(
                        "tick {now}: server {s} acks NEWLEADER {e} with currentEpoch {} on its disk",
                        disk.epochs().current
                    ));
                }
                let upto = self.newleader_upto.get(&s).copied().unwrap_or(i64::MAX);
                if disk.durable_last() < upto {
                    return Err(format!(
                        "tick {now}: server {s} acks NEWLEADER {e} with its log durable through {:#x}, not {upto:#x}",
                        disk.durable_last()
                    ));
                }
            } else if disk.get(*z, true).is_none() {
                return Err(format!(
                    "tick {now}: server {s} acks {z:#x} before it is durable (durable through {:#x})",
                    disk.durable_last()
                ));
            }
        }
        Ok(())
    }

    /// The runner's SNAP: the committed tree (through `snap_floor`) with
    /// the history after it, as of the history's last txn.
    fn snapshot_packet(&mut self, s: Sid, history: &[Txn]) -> Result<Packet, String> {
        let now = self.now;
        let Some(floor) = self.snap_floor.get(&s).copied() else {
            return Err(format!(
                "tick {now}: server {s} sends a SNAP and has no committed tree"
            ));
        };
        let disk = &self.disks[&s];
        let zxid = history.last().map_or(floor, |t| t.zxid);
        if history.first().is_some_and(|t| t.zxid <= floor) || zxid > disk.last() {
            return Err(format!(
                "tick {now}: server {s} sends a SNAP of {:?} over a tree at {floor:#x}",
                history.iter().map(|t| t.zxid).collect::<Vec<_>>()
            ));
        }
        let tail: Vec<Entry> = history.iter().map(entry).collect();
        if disk.range(floor, zxid) != tail {
            return Err(format!(
                "tick {now}: server {s} sends a SNAP whose history is not its log"
            ));
        }
        Ok(Packet::Snapshot {
            zxid,
            entries: Rc::new(disk.range(i64::MIN, zxid)),
        })
    }

    fn send(&mut self, from: Sid, to: Sid, packet: Packet) {
        let stable = self.now >= self.p.stable_after_ticks;
        if !self.up(to) || (!stable && self.cut_off.contains(&from) != self.cut_off.contains(&to)) {
            return;
        }
        let vote = matches!(packet, Packet::Zab(Msg::Vote(_)));
        let conn = self.conns.entry(pair(from, to)).or_default();
        if conn.broken && !vote {
            return;
        }
        let generation = conn.generation;
        if !stable && self.rng.below(1000) < self.p.loss_per_mille {
            if !vote {
                self.break_conn(from, to);
            }
            return;
        }
        let copies = if vote && self.rng.below(1000) < self.p.vote_duplicate_per_mille {
            self.cov.vote_duplicates += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = self.rng.below(self.p.max_delay_ticks + 1);
            let q = self.channels.entry((from, to)).or_default();
            let at = (self.now + delay).max(q.back().map_or(0, |e| e.at));
            q.push_back(Envelope {
                at,
                generation,
                packet: packet.clone(),
            });
        }
    }

    /// Tells both ends of each broken connection; a new one (a new
    /// generation) opens. What was in flight on the old one vanishes, or is
    /// delivered later and dropped as stale.
    fn deliver_breaks(&mut self) -> Check {
        for (a, b) in std::mem::take(&mut self.breaks) {
            let conn = self.conns.entry(pair(a, b)).or_default();
            conn.generation += 1;
            conn.broken = false;
            for (from, to) in [(a, b), (b, a)] {
                let stale = self.rng.chance(self.p.stale_percent);
                let Some(q) = self.channels.get_mut(&(from, to)) else {
                    continue;
                };
                for env in q.drain(..) {
                    if stale && !matches!(env.packet, Packet::Zab(Msg::Vote(_))) {
                        // The old connection's reader hands it over later,
                        // in its own time: before or after what the new
                        // connection brings.
                        let at =
                            env.at.max(self.now) + self.rng.below(2 * self.p.max_delay_ticks + 4);
                        self.stale.push((at, from, to, env));
                    }
                }
            }
            self.step(a, Input::Disconnected(b))?;
            self.step(b, Input::Disconnected(a))?;
        }
        Ok(())
    }

    fn deliver(&mut self, from: Sid, to: Sid, env: Envelope) -> Check {
        if !self.up(to) {
            return Ok(());
        }
        if !matches!(env.packet, Packet::Zab(Msg::Vote(_))) {
            let conn = self.conns.entry(pair(from, to)).or_default();
            if env.generation != conn.generation {
                // The net layer drops what a closed connection's reader
                // still hands over.
                self.cov.stale_dropped += 1;
                return Ok(());
            }
            if conn.broken {
                return Ok(());
            }
        }
        let role = self.nodes[&to].as_ref().expect("up").role();
        match env.packet {
            Packet::SyncRequest => {
                // The leader's runner: a forwarded sync goes to zab with
                // what the leader has assigned (here: proposed) so far.
                let node = self.nodes[&to].as_ref().expect("up");
                if !node.takes_syncs_from(from) {
                    // Not leading, or from a learner of an earlier epoch:
                    // no answer (its client times out).
                    return Ok(());
                }
                let point = node.log_last();
                self.syncs
                    .entry((from, to))
                    .or_default()
                    .push_back((env.generation, point));
                self.step(to, Input::Sync { from, point })
            }
            Packet::Zab(Msg::SyncAnswer) => {
                self.check_sync_answer(from, to, env.generation)?;
                self.step(
                    to,
                    Input::Receive {
                        from,
                        msg: Msg::SyncAnswer,
                    },
                )
            }
            Packet::Zab(msg) => {
                if matches!(msg, Msg::NewLeader { .. })
                    && role == (Role::Following { leader: from })
                {
                    self.newleader_upto.insert(to, self.disks[&to].last());
                    self.newleader_at.insert(to, (self.now, from));
                }
                self.step(to, Input::Receive { from, msg })
            }
            Packet::Snapshot { zxid, entries } => self.install_snapshot(from, to, zxid, entries),
        }
    }

    /// A SYNC answer from `leader` reaches `follower` on connection
    /// `generation`: it answers the oldest sync the leader took from the
    /// follower on that connection, and the follower's commit point is
    /// exactly that sync's point.
    fn check_sync_answer(&mut self, leader: Sid, follower: Sid, generation: u64) -> Check {
        let now = self.now;
        let node = self.nodes[&follower].as_ref().expect("up");
        if node.role() != (Role::Following { leader }) {
            return Ok(()); // its runner no longer waits for it
        }
        // What its tree holds: the commit point, or the log it was rebuilt
        // from when that is further.
        let committed = node
            .committed()
            .max(self.rebuilt_through.get(&follower).copied().unwrap_or(0));
        let q = self.syncs.entry((follower, leader)).or_default();
        while q.front().is_some_and(|(g, _)| *g < generation) {
            q.pop_front(); // taken on a connection that broke since
        }
        let Some((g, point)) = q.pop_front() else {
            return Err(format!(
                "tick {now}: server {follower} got a SYNC answer from {leader} for no sync"
            ));
        };
        if g != generation {
            return Err(format!(
                "tick {now}: server {follower} got a SYNC answer from {leader} on connection {generation} for a sync taken on {g}"
            ));
        }
        if committed != point {
            return Err(format!(
                "tick {now}: server {follower} got the SYNC answer for point {point:#x} from {leader} with its commit point at {committed:#x}"
            ));
        }
        self.cov.syncs_answered += 1;
        Ok(())
    }

    /// The runner's `install_snapshot`: only while syncing with that
    /// leader (else the connection closes); the log after the SNAP's zxid
    /// and snapshots after it go, the snapshot is written, the log is
    /// cleared; then zab is told.
    fn install_snapshot(&mut self, from: Sid, to: Sid, z: i64, entries: Rc<Vec<Entry>>) -> Check {
        let now = self.now;
        let node = self.nodes[&to].as_ref().expect("up");
        if !node.syncing_with(from) {
            self.break_conn(from, to);
            return Ok(());
        }
        let mut prev = 0;
        for e in entries.iter() {
            if !zxid::follows(prev, e.0) {
                return Err(format!(
                    "tick {now}: a SNAP from {from} to {to} has {:#x} after {prev:#x}",
                    e.0
                ));
            }
            prev = e.0;
        }
        if prev != z {
            return Err(format!(
                "tick {now}: a SNAP from {from} to {to} at {z:#x} ends at {prev:#x}"
            ));
        }
        for (c, w) in self.committed.range(..=z) {
            if entries
                .binary_search_by_key(c, |e| e.0)
                .ok()
                .map(|i| entries[i].1)
                != Some(*w)
            {
                return Err(format!(
                    "tick {now}: a SNAP from {from} to {to} lacks committed txn {c:#x}"
                ));
            }
        }
        let disk = self.disks.get_mut(&to).expect("disk");
        for (c, _) in disk.range(z, i64::MAX) {
            if self.committed.contains_key(&c) {
                return Err(format!(
                    "tick {now}: server {to} cuts committed txn {c:#x} installing a SNAP at {z:#x}"
                ));
            }
        }
        // The server's own order of steps; before the network settles, a
        // crash between two of them now and then.
        // When a snapshot past the SNAP's zxid is about to go, often a
        // crash after it went and before the SNAP's own is durable.
        let above = self.disks[&to].base() > z;
        let unstable = now < self.p.stable_after_ticks;
        let crash_after_removal =
            (unstable && above && self.rng.chance(50)).then(|| self.rng.below(2) as usize);
        let crash_after = (unstable && crash_after_removal.is_none() && self.rng.chance(10))
            .then(|| self.rng.below(7) as usize + 1);
        if let Some(p) = self.promised.get_mut(&to) {
            // The SNAP's history is the leader's: txns of this member's
            // past it are not committed (checked above).
            *p = (*p).min(z);
        }
        let mut sim_disk = SimSnapDisk {
            disk: self.disks.get_mut(&to).expect("disk"),
            steps: 0,
            crash_after,
            committed: &self.committed,
            removed_above: false,
            crash_after_removal,
            removed_at: None,
            crashed: false,
        };
        let installed = snap_install::install(&mut sim_disk, z, &entries);
        let crashed = sim_disk.crashed || sim_disk.crash_after == Some(sim_disk.steps);
        let steps = sim_disk.steps;
        if sim_disk.removed_above {
            self.cov.snapshots_above_removed += 1;
        }
        if crashed {
            // Before zab hears of it, if not before all the steps were done.
            self.cov.snap_crashes += 1;
            if crash_after_removal.is_some() {
                self.cov.snap_crashes_after_removal += 1;
            }
            if tracing() {
                eprintln!("{now:5} {to}: CRASH installing a SNAP at {z:#x}, after {steps} steps");
            }
            return self.crash(to);
        }
        if let Err(e) = installed {
            return Err(format!("tick {now}: server {to} installing a SNAP: {e}"));
        }
        self.cov.snaps += 1;
        // The runner rebuilds from the snapshot it installed.
        self.rebuilt_through.insert(to, z);
        self.step(to, Input::SnapshotInstalled { from, zxid: z })
    }

    /// A snapshot of a member's tree (its commit point), as the server's
    /// snapshot policy writes one.
    fn snapshot(&mut self, s: Sid, z: i64) {
        let disk = self.disks.get_mut(&s).expect("disk");
        if z > disk.base() && z <= disk.last() {
            disk.take_snapshot(z);
            self.cov.snapshots += 1;
        }
    }

    fn crash(&mut self, s: Sid) -> Check {
        let now = self.now;
        self.cov.crashes += 1;
        if tracing() {
            eprintln!("{now:5} {s}: CRASH");
        }
        let committed = self.nodes[&s].as_ref().map_or(0, Node::committed);
        if self.rng.chance(self.p.crash_snapshot_percent) {
            // A snapshot somewhere up to the commit point.
            let points = self.disks[&s].range(self.disks[&s].base(), committed);
            if !points.is_empty() {
                let z = self.rng.pick(&points).0;
                self.snapshot(s, z);
            }
        }
        for other in self.nodes.keys().copied().collect::<Vec<_>>() {
            if other != s {
                self.break_conn(s, other);
            }
        }
        self.nodes.insert(s, None);
        self.down_until
            .insert(s, self.now + 20 + self.rng.below(200));
        self.newleader_upto.remove(&s);
        self.newleader_at.remove(&s);
        let disk = self.disks.get_mut(&s).expect("disk");
        disk.syncing = None;
        disk.want_sync = false;
        // The unsynced writes before one reached the disk; that one in any
        // page order; the later ones not at all (nor what was not written).
        let mut unsynced = std::mem::take(&mut disk.unsynced);
        unsynced.retain(|r| r.write != 0);
        let mut writes: Vec<u64> = unsynced.iter().map(|r| r.write).collect();
        writes.dedup();
        let torn = self.rng.below(writes.len() as u64 + 1) as usize;
        let landed: Vec<bool> = unsynced
            .iter()
            .map(|r| match writes.iter().position(|w| *w == r.write) {
                Some(i) if i < torn => true,
                Some(i) if i == torn => self.rng.chance(50),
                _ => false,
            })
            .collect();
        // Recovery keeps the records up to the first missing one.
        let kept = landed.iter().position(|l| !l).unwrap_or(landed.len());
        if landed[kept..].iter().any(|l| *l) {
            self.cov.tears += 1;
            let missing = unsynced[kept].e.0;
            for (r, _) in unsynced.iter().zip(&landed).skip(kept).filter(|(_, l)| **l) {
                if r.durable_zxid >= missing {
                    return Err(format!(
                        "tick {now}: server {s}'s torn log reads as damage: record {:#x} says {missing:#x} was durable",
                        r.e.0
                    ));
                }
            }
        }
        disk.durable.extend(unsynced[..kept].iter().map(|r| r.e));
        for (_, io) in std::mem::take(&mut disk.pending) {
            if self.rng.chance(50) {
                let mut e = disk.epochs();
                match io {
                    EpochWrite::Accepted(a) => e.accepted = e.accepted.max(a),
                    EpochWrite::Current(c) => e.current = e.current.max(c),
                }
                disk.epochs = Some(e);
            }
        }
        // A damaged disk: the marker, then everything set aside.
        if self.rng.chance(self.p.damage_percent) {
            let intact_after = self.intact().into_iter().filter(|m| *m != s);
            if self.p.damage_unbounded || self.quorum_of(intact_after) {
                self.disks.get_mut(&s).expect("disk").lose();
                self.promised.remove(&s);
                self.damaged_ever.insert(s);
                self.cov.damaged += 1;
                if tracing() {
                    eprintln!("{now:5} {s}: DISK DAMAGED");
                }
            }
        }
        Ok(())
    }

    fn restart(&mut self, s: Sid) -> Check {
        let now = self.now;
        let voters = self.voters();
        let disk = &self.disks[&s];
        assert!(disk.unsynced.is_empty() && disk.syncing.is_none());
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
                "tick {now}: server {s} restarts with a log in epoch {log_epoch} ahead of acceptedEpoch {}",
                epochs.accepted
            ));
        }
        // The history starts after the newest snapshot.
        let base = disk.base();
        let history: Vec<Txn> = disk
            .durable
            .iter()
            .filter(|e| e.0 > base)
            .map(txn)
            .collect();
        if let Some(first) = history.first() {
            if !zxid::follows(base, first.zxid) {
                return Err(format!(
                    "tick {now}: server {s} restarts with a log that starts at {:#x}, after its snapshot {base:#x}",
                    first.zxid
                ));
            }
        }
        if !disk.lost {
            // Its acks still stand: what they covered is here.
            let promised = self.promised.get(&s).copied().unwrap_or(0);
            for (c, w) in self.committed.range(..=promised) {
                if disk.get(*c, true) != Some(*w) {
                    return Err(format!(
                        "tick {now}: server {s} restarts without committed txn {c:#x}, which it \
                         acked (through {promised:#x}), and with no lost-disk marker"
                    ));
                }
            }
        }
        let mut node = Node::new(s, voters, TIMINGS, epochs, history).with_history_base(base);
        // Recovery synced what it kept.
        let last = disk.last();
        self.disks.get_mut(&s).expect("disk").log_durable = last;
        let disk = &self.disks[&s];
        if disk.lost {
            node = node.with_disk_lost();
        }
        if let Some(bytes) = self.p.history_bytes_min {
            node.set_history_bytes_min(bytes, self.p.history_check_every);
        }
        self.checked.remove(&s);
        self.snap_floor.remove(&s);
        self.nodes.insert(s, Some(node));
        self.down_until.remove(&s);
        if self.burst.is_none_or(|(until, _)| until < now) && self.rng.chance(self.p.burst_percent)
        {
            self.cov.bursts += 1;
            self.burst = Some((now + 20 + self.rng.below(300), 2 + self.rng.below(6)));
        }
        self.step(s, Input::Start)
    }

    /// Starts a sync if one is wanted and none runs (one at a time, as the
    /// runner's sync gate).
    fn start_sync(&mut self, s: Sid) {
        let now = self.now;
        let unstable = now < self.p.stable_after_ticks;
        let disk = self.disks.get_mut(&s).expect("disk");
        if disk.syncing.is_some() || !disk.want_sync {
            return;
        }
        disk.want_sync = false;
        // What waits in memory goes down as one write.
        if disk.unsynced.iter().any(|r| r.write == 0) {
            disk.writes += 1;
            for r in disk.unsynced.iter_mut().filter(|r| r.write == 0) {
                r.write = disk.writes;
            }
        }
        let latency = if unstable && self.rng.below(1000) < self.p.stall_per_mille {
            self.cov.stalls += 1;
            let latency = 20 + self.rng.below(150);
            disk.stalled_until = now + latency;
            latency
        } else {
            self.rng.below(4)
        };
        disk.syncing = Some((now + latency, disk.last(), disk.writes));
    }

    /// A follower acks NEWLEADER within initLimit of it (ZooKeeper's
    /// leader waits no longer), unless its disk stalled meanwhile (issue
    /// 26, defect 4: under steady writes, waiting for the log's moving end
    /// never acks).
    fn check_syncing(&mut self) -> Check {
        let now = self.now;
        for (s, (at, leader)) in self.newleader_at.clone() {
            let stalled = self.disks[&s].stalled_until >= at;
            let syncing = self.nodes[&s].as_ref().is_some_and(|n| {
                n.role() == (Role::Following { leader }) && n.phase_name() == "synchronization"
            });
            if !syncing || stalled {
                self.newleader_at.remove(&s);
            } else if now - at > u64::from(TIMINGS.init_limit_ticks) {
                return Err(format!(
                    "tick {now}: server {s} has not acked NEWLEADER from {leader} {} ticks after it came",
                    now - at
                ));
            }
        }
        Ok(())
    }

    fn complete_io(&mut self, s: Sid) -> Check {
        let now = self.now;
        let disk = self.disks.get_mut(&s).expect("disk");
        let mut inputs = Vec::new();
        if let Some((at, through, writes)) = disk.syncing {
            if at <= now {
                disk.syncing = None;
                let n = disk
                    .unsynced
                    .iter()
                    .take_while(|r| r.write != 0 && r.write <= writes)
                    .count();
                let moved: Vec<Entry> = disk.unsynced.drain(..n).map(|r| r.e).collect();
                disk.durable.extend(moved);
                disk.log_durable = disk.log_durable.max(through);
                inputs.push(Input::Durable(through));
            }
        }
        let (due, later): (Vec<_>, Vec<_>) = disk.pending.drain(..).partition(|(at, _)| *at <= now);
        disk.pending = later;
        for (_, io) in due {
            let mut ep = disk.epochs();
            inputs.push(match io {
                EpochWrite::Accepted(e) => {
                    ep.accepted = ep.accepted.max(e);
                    Input::AcceptedEpochDurable(e)
                }
                EpochWrite::Current(e) => {
                    ep.current = ep.current.max(e);
                    Input::CurrentEpochDurable(e)
                }
            });
            disk.epochs = Some(ep);
        }
        for input in inputs {
            self.step(s, input)?;
        }
        self.start_sync(s);
        Ok(())
    }
}

#[derive(Debug)]
pub struct Summary {
    pub voters: usize,
    pub leaders: usize,
    pub committed: usize,
    pub writes: u64,
    pub coverage: Coverage,
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
        conns: BTreeMap::new(),
        cut_off: BTreeSet::new(),
        breaks: Vec::new(),
        stale: Vec::new(),
        committed: BTreeMap::new(),
        leaders: BTreeMap::new(),
        checked: BTreeMap::new(),
        newleader_upto: BTreeMap::new(),
        newleader_at: BTreeMap::new(),
        snap_floor: BTreeMap::new(),
        damaged_ever: BTreeSet::new(),
        writes: 0,
        late_writes: Vec::new(),
        burst: None,
        crash_at: BTreeMap::new(),
        syncs: BTreeMap::new(),
        java: BTreeSet::new(),
        rebuilt_through: BTreeMap::new(),
        promised: BTreeMap::new(),
        cov: Coverage::default(),
        p: p.clone(),
    };
    let ctx = |e: String| format!("{e} ({p:?})");
    for s in &sids {
        if w.rng.chance(p.java_percent) {
            w.java.insert(*s);
        }
    }
    for s in &sids {
        w.restart(*s).map_err(ctx)?;
    }
    w.burst = None;
    w.cov.bursts = 0;
    while w.now < p.end_ticks {
        w.now += 1;
        let now = w.now;
        let unstable = now < p.stable_after_ticks;
        // Faults.
        let due: Vec<Sid> = w
            .crash_at
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(s, _)| *s)
            .collect();
        for s in due {
            w.crash_at.remove(&s);
            if w.up(s) {
                w.crash(s).map_err(ctx)?;
            }
        }
        if unstable && w.rng.below(1000) < p.crash_per_mille {
            let s = sids[w.rng.below(sids.len() as u64) as usize];
            if w.up(s) {
                w.crash(s).map_err(ctx)?;
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
                        w.break_conn(*a, *b);
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
                    Some(e) if e.at <= now => {}
                    _ => break,
                }
                let env = q.pop_front().expect("front");
                w.deliver(from, to, env).map_err(ctx)?;
            }
        }
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut w.stale)
            .into_iter()
            .partition(|(at, ..)| *at <= now);
        w.stale = later;
        for (_, from, to, env) in due {
            w.deliver(from, to, env).map_err(ctx)?;
        }
        for s in &sids {
            w.complete_io(*s).map_err(ctx)?;
            w.step(*s, Input::Tick).map_err(ctx)?;
        }
        w.check_syncing().map_err(ctx)?;
        // Clients' syncs at followers, forwarded to their leaders.
        for s in &sids {
            let leader = match w.nodes[s].as_ref().map(Node::serves) {
                Some(crate::zab::ensemble::Serves::Follower { leader }) => leader,
                _ => continue,
            };
            if w.rng.below(100) < p.sync_percent {
                w.send(*s, leader, Packet::SyncRequest);
            }
        }
        // Snapshots at members' commit points.
        for s in &sids {
            if let Some(c) = w.nodes[s].as_ref().map(Node::committed) {
                if w.rng.below(1000) < p.snapshot_per_mille {
                    w.snapshot(*s, c);
                }
            }
        }
        // Client writes at the leader.
        if now + 300 < p.end_ticks {
            let n = match w.burst {
                Some((until, rate)) if now <= until => rate,
                _ => u64::from(w.rng.below(100) < p.write_percent),
            };
            let leader = sids.iter().copied().find(|s| {
                w.nodes[s]
                    .as_ref()
                    .is_some_and(|n| matches!(n.role(), Role::Broadcasting { .. }))
            });
            // Epochs end at the counter's limit until a while after the
            // faults stop; then no election comes again (a member that
            // lost its disk rejoins only between elections).
            let limit = p
                .epoch_counter_limit
                .filter(|_| now < p.stable_after_ticks + ENDING_EPOCHS_AFTER_STABLE);
            if let (Some(l), Some(limit)) = (leader, limit) {
                let node = w.nodes[&l].as_ref().expect("up");
                let Role::Broadcasting { epoch } = node.role() else {
                    unreachable!("the leader")
                };
                let last = node.log_last();
                let used = if zxid::epoch(last) == epoch {
                    zxid::counter(last)
                } else {
                    0
                };
                if used + 1 >= limit {
                    // The runner takes no more writes; once everything is
                    // committed and no sync runs, the epoch ends.
                    if node.committed() == last && w.disks[&l].syncing.is_none() {
                        w.cov.epoch_ends += 1;
                        w.step(l, Input::EndEpoch).map_err(ctx)?;
                    }
                    continue;
                }
            }
            if let Some(l) = leader {
                for _ in 0..n {
                    w.writes += 1;
                    if now >= p.stable_after_ticks + SETTLE_TICKS {
                        w.late_writes.push(w.writes);
                    }
                    let data = w.writes.to_be_bytes().to_vec();
                    w.step(l, Input::Propose(data)).map_err(ctx)?;
                    if unstable && w.rng.below(1000) < p.crash_proposer_per_mille {
                        w.crash_at.entry(l).or_insert(now + 1);
                    }
                }
            }
        }
    }
    w.end().map_err(ctx)?;
    Ok(Summary {
        voters: p.voters,
        leaders: w.leaders.len(),
        committed: w.committed.len(),
        writes: w.writes,
        coverage: w.cov,
    })
}

impl World {
    fn end(&mut self) -> Check {
        let nodes: Vec<&Node> = self
            .nodes
            .values()
            .map(|n| n.as_ref().expect("all up"))
            .collect();
        let states: Vec<String> = nodes
            .iter()
            .map(|n| {
                format!(
                    "{}: {:?} log {:#x} committed {:#x} epochs {:?}{}",
                    n.myid(),
                    n.role(),
                    n.log_last(),
                    n.committed(),
                    n.epochs(),
                    if n.awaiting_resync() {
                        " awaiting resync"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        let leaders: Vec<Sid> = nodes
            .iter()
            .filter(|n| matches!(n.role(), Role::Broadcasting { .. }))
            .map(|n| n.myid())
            .collect();
        // Each member's history is its disk's.
        for n in &nodes {
            let disk = &self.disks[&n.myid()];
            if n.awaiting_resync() != disk.lost {
                return Err(format!(
                    "at the end, server {} awaits a resync: {}, its marker says {}",
                    n.myid(),
                    n.awaiting_resync(),
                    disk.lost
                ));
            }
            if let Some(t) = n
                .history()
                .iter()
                .find(|t| disk.get(t.zxid, false) != Some(entry(t).1))
            {
                return Err(format!(
                    "at the end, server {}'s history holds {:#x}, its disk does not",
                    n.myid(),
                    t.zxid
                ));
            }
        }
        if !self.quorum_of(self.intact()) {
            // No quorum keeps its disk: nothing can establish an epoch.
            self.cov.unavailable += 1;
            if !leaders.is_empty() {
                return Err(format!(
                    "at the end, {leaders:?} lead with only {:?} holding their disks: {states:?}",
                    self.intact()
                ));
            }
            return Ok(());
        }
        if leaders.len() != 1 {
            return Err(format!("at the end, leaders {leaders:?}: {states:?}"));
        }
        let leader = nodes
            .iter()
            .find(|n| n.myid() == leaders[0])
            .expect("leader");
        let c = leader.committed();
        let final_content = self.disks[&leader.myid()].range(i64::MIN, c);
        for n in &nodes {
            if n.awaiting_resync() {
                return Err(format!(
                    "at the end, server {} still awaits a resync: {states:?}",
                    n.myid()
                ));
            }
            if n.committed() != c {
                return Err(format!(
                    "at the end, server {} committed {:#x}, the leader {c:#x}: {states:?}",
                    n.myid(),
                    n.committed(),
                ));
            }
            if self.disks[&n.myid()].range(i64::MIN, c) != final_content {
                return Err(format!(
                    "at the end, server {} holds another history: {states:?}",
                    n.myid()
                ));
            }
        }
        let held: BTreeMap<i64, u64> = final_content.iter().copied().collect();
        if let Some((z, _)) = self.committed.iter().find(|(z, w)| held.get(z) != Some(w)) {
            return Err(format!(
                "at the end, committed txn {z:#x} is not in the final history"
            ));
        }
        let writes: BTreeSet<u64> = final_content.iter().map(|e| e.1).collect();
        if let Some(missing) = self.late_writes.iter().find(|d| !writes.contains(d)) {
            return Err(format!(
                "a write proposed once the network had long been stable is not committed: {missing}"
            ));
        }
        Ok(())
    }
}
