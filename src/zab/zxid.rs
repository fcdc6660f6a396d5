//! zxids: `epoch << 32 | counter`, as ZooKeeper's `ZxidUtils`. An epoch's
//! first txn has counter 1 (counter 0 is the epoch itself, as NEWLEADER
//! and LEADERINFO carry it).

/// The epoch of a zxid (its high 32 bits).
pub fn epoch(zxid: i64) -> u32 {
    (zxid >> 32) as u32
}

/// The counter of a zxid within its epoch (its low 32 bits).
pub fn counter(zxid: i64) -> u32 {
    zxid as u32
}

/// The zxid of `counter` in `epoch`.
pub fn make(epoch: u32, counter: u32) -> i64 {
    ((epoch as i64) << 32) | counter as i64
}

/// The zxid of a txn's successor in the same epoch; None when the epoch's
/// counter is exhausted (ZooKeeper then forces a new election:
/// `Leader.propose` on counter 0xffffffff).
pub fn next_in_epoch(zxid: i64) -> Option<i64> {
    (counter(zxid) != u32::MAX).then_some(zxid + 1)
}

/// Whether `next` may directly follow `prev` in a log: the next counter of
/// the same epoch, or the first txn (counter 1) of a later epoch. A log
/// holds no gaps within an epoch; between epochs, the txns a new leader
/// never proposed do not exist anywhere.
pub fn follows(prev: i64, next: i64) -> bool {
    if epoch(next) == epoch(prev) {
        counter(prev) != u32::MAX && next == prev + 1
    } else {
        epoch(next) > epoch(prev) && counter(next) == 1
    }
}

/// The zxids of the epoch a leader leads: `zab` hands one out when it
/// establishes (or, standalone, resumes) an epoch, and the leader's core
/// takes each txn's zxid from it. zab is the only place zxids are minted:
/// nothing outside this module can make a `Mint`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mint {
    epoch: u32,
    /// The last zxid given out, or the log's last one before the first.
    last: i64,
}

impl Mint {
    /// Zxids of `epoch` after a log that ends at `last` (in `epoch` when
    /// a standalone server resumes it, else before it).
    pub(super) fn after(led: u32, last: i64) -> Mint {
        assert!(epoch(last) <= led, "the log is ahead of the epoch led");
        Mint { epoch: led, last }
    }

    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// The counter the next zxid would carry (past `u32::MAX` when the
    /// epoch is exhausted).
    pub fn next_counter(&self) -> u64 {
        if epoch(self.last) == self.epoch {
            counter(self.last) as u64 + 1
        } else {
            1
        }
    }

    /// The next zxid of the epoch; None once its counter is exhausted.
    pub fn take(&mut self) -> Option<i64> {
        let next = if epoch(self.last) == self.epoch {
            next_in_epoch(self.last)?
        } else {
            make(self.epoch, 1)
        };
        self.last = next;
        Some(next)
    }
}

/// A zxid as ZooKeeper prints one (`0x` and lower-case hex).
pub fn hex(zxid: i64) -> String {
    format!("{zxid:#x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parts() {
        let z = make(3, 7);
        assert_eq!(z, 0x3_0000_0007);
        assert_eq!((epoch(z), counter(z)), (3, 7));
        assert_eq!(hex(z), "0x300000007");
        assert_eq!(next_in_epoch(make(1, u32::MAX)), None);
        assert_eq!(next_in_epoch(make(1, 5)), Some(make(1, 6)));
    }

    #[test]
    fn continuity() {
        assert!(follows(make(1, 4), make(1, 5)));
        assert!(!follows(make(1, 4), make(1, 6)), "a gap within an epoch");
        assert!(!follows(make(1, 4), make(1, 4)), "a repeat");
        assert!(follows(make(1, 4), make(2, 1)), "a new epoch starts at 1");
        assert!(follows(make(1, 4), make(9, 1)), "epochs may be skipped");
        assert!(
            !follows(make(1, 4), make(2, 2)),
            "a new epoch's first txn is missing"
        );
        assert!(!follows(make(2, 1), make(1, 5)), "epochs never go back");
        assert!(!follows(make(1, u32::MAX), make(2, 0)));
        assert!(follows(make(1, u32::MAX), make(2, 1)));
        // The empty log's last zxid is 0 (epoch 0, counter 0).
        assert!(follows(0, 1));
        assert!(follows(0, make(1, 1)));
    }

    #[test]
    fn a_mint_continues_its_epoch_or_starts_it() {
        let mut m = Mint::after(2, make(2, 7));
        assert_eq!(m.next_counter(), 8);
        assert_eq!(m.take(), Some(make(2, 8)));
        let mut m = Mint::after(3, make(2, 7));
        assert_eq!(m.next_counter(), 1);
        assert_eq!(m.take(), Some(make(3, 1)));
        assert_eq!(m.take(), Some(make(3, 2)));
        let mut m = Mint::after(3, make(3, u32::MAX - 1));
        assert_eq!(m.take(), Some(make(3, u32::MAX)));
        assert_eq!(m.next_counter(), u32::MAX as u64 + 1);
        assert_eq!(m.take(), None, "an exhausted epoch mints nothing");
    }

    proptest! {
        #[test]
        fn parts_round_trip(e in 0u32..0x7fff_fffe, c in any::<u32>()) {
            let z = make(e, c);
            prop_assert_eq!((epoch(z), counter(z)), (e, c));
            // zxids (positive: epochs below 2^31) order as (epoch, counter).
            prop_assert!(make(e + 1, 0) > z);
        }

        #[test]
        fn exactly_one_successor_per_epoch(e in 0u32..1000, c in 0u32..u32::MAX, later in 1u32..5) {
            let prev = make(e, c);
            prop_assert!(follows(prev, make(e, c + 1)));
            prop_assert!(follows(prev, make(e + later, 1)));
            prop_assert!(!follows(prev, make(e + later, 2)));
            if c < u32::MAX - 1 {
                prop_assert!(!follows(prev, make(e, c + 2)));
            }
        }
    }
}
